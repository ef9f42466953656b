//! The integration tests of mco: one test binary (one link) for all of them.

mod bootimage;
mod cli;
#[path = "../common/mod.rs"]
mod common;
mod diff;
#[cfg(feature = "real-components")]
mod real;
#[cfg(feature = "real-components")]
#[path = "../common/transitions.rs"]
mod transitions;
