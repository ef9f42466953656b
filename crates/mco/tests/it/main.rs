//! The integration tests of mco: one test binary (one link) for all of them.

mod bootimage;
mod cli;
mod cli_reference;
#[path = "../common/mod.rs"]
mod common;
mod diff;
mod links;
#[cfg(feature = "real-components")]
mod real;
#[cfg(feature = "real-components")]
#[path = "../common/transitions.rs"]
mod transitions;
