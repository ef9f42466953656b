//! The integration tests of bootimage: one test binary (one link) for all of them.

mod plan;
mod skew;
mod stream;
mod stub;
