//! The integration tests of bootimage: one test binary (one link) for all of them.

mod control_plane;
mod plan;
mod skew;
mod stream;
mod stub;
