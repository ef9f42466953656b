//! The integration tests of goser: one test binary (one link) for all of them.

mod ghodss_floats;
mod ghodss_vectors;
mod go_json;
mod golden;
mod yaml_table;
