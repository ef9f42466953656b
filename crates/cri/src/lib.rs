//! The node's container runtime as the daemon needs it for PinnedImageSets: images are pulled
//! through the CRI, as the kubelet pulls them (so they are the kubelet's images, with the same
//! registry settings), and pinned with containerd's image label `io.cri-containerd.pinned`, which
//! containerd's CRI reports as `pinned` and the kubelet's image garbage collection skips.
//!
//! containerd (v1.7 and later) only: upstream's nodes run CRI-O, which pins by its
//! `pinned_images` setting (a drop-in and a reload); mco's nodes run containerd, where a pin is a
//! label on the image record, set and removed through containerd's images API on the same socket.
//!
//! * [`auth`]: pure, the credentials of the node's pull secret for an image.
//! * [`runtime`]: the IO shell, a gRPC client of the CRI image service and of containerd's images.

pub mod auth;
pub mod runtime;

pub use runtime::{CriImage, Runtime};

/// Where containerd serves its gRPC API (CRI and its own) on a node.
pub const CONTAINERD_SOCKET: &str = "/run/containerd/containerd.sock";
