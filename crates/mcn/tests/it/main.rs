//! The integration tests of mcn: one test binary (one link) for all of them.

mod progress;
#[cfg(feature = "real-components")]
mod real;
