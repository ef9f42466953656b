//! The integration tests of server: one test binary (one link) for all of them.

#[path = "../common/mod.rs"]
mod common;
mod metrics;
#[cfg(feature = "real-components")]
mod real;
mod server;
