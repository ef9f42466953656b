//! The integration tests of ignition: one test binary (one link) for all of them.

mod spec2_versions;
