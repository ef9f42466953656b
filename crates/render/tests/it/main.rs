//! The integration tests of render: one test binary (one link) for all of them.

mod conformance;
mod streams;
