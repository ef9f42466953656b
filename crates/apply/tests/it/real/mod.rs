//! The tests that run real components: an API server, a registry, OSTree, buildah, root.

mod ostree;
