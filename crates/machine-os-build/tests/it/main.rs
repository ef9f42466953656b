//! The integration tests of build: one test binary (one link) for all of them.

mod upstream_name;
