//! The tests that run real components: an API server, a registry, OSTree, buildah, root.

mod controller;
mod daemon;
mod daemon_run;
mod deploy;
mod image;
mod lab_state;
mod machine;
mod monitoring;
mod server_ignition;
