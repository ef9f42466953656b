//! The integration tests of agent: one test binary (one link) for all of them, all
//! of them running real components (built with the `real-components` feature only).
mod real;
