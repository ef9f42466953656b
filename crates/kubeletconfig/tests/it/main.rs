//! The integration tests of kubeletconfig: one test binary (one link) for all of them.

mod golden;
