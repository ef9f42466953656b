//! The tests that run real components: an API server, a registry, OSTree, buildah, root.

mod build;
mod drain;
mod kubeletconfig;
mod leader;
mod networkpolicy;
mod node;
mod os_image;
mod osimagestream;
mod pinnedimageset;
mod registries;
mod render;
