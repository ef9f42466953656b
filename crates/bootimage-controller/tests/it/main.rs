//! The integration tests of bootimage-controller: one test binary (one link) for all of them, all
//! of them running real components (built with the `real-components` feature only).

#[path = "../common/mod.rs"]
mod common;
mod real;
