//! The integration tests of api: one test binary (one link) for all of them.

mod crds;
mod machineconfig_json;
mod provider;
mod roundtrip;
mod upstream_crds;
mod validate;
