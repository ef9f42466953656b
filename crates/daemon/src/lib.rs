//! The node daemon (`mco daemon run --node NAME`, upstream's machine-config-daemon): the process
//! on each node. It watches only its own Node, moves the node to the `desiredConfig` the node
//! controller sets with `mco-apply` (what is applied to the node's filesystem and OS), and talks to the controller through the Node's annotations
//! (`docs/behaviour.md#the-node-handshake`): `state`, `reason`, the drain/uncordon handshake,
//! `currentConfig`.
//!
//! * [`handshake`]: pure — what to do next from the annotations and the on-disk config.
//! * [`annotations`]: pure — the merge patches of the keys the daemon owns.
//! * [`aleph`]: the boot image the node was installed from, reported on the Node.
//! * [`agent`]: the thin IO shell (kube-rs), failures reported and retried with [`backoff`].
//! * [`events`]: Events on the Node, with upstream's reasons, rate-limited.
//! * [`metered`]: the OS backend's and the reboot's failures counted, reboots timed across the boot.
//! * [`os_release`]: the node's OS and version, reported as a metric.
//! * [`pinned_images`]: pure — the images of the node's PinnedImageSets, the storage gate, their
//!   MachineConfigNode status; [`pinning`] pulls and pins them in the node's containerd.
//!
//! The apply engine stays free of Kubernetes; this crate is the only daemon code that talks to
//! the API server.

pub mod agent;
pub mod aleph;
pub mod annotations;
pub mod backoff;
pub mod events;
pub mod handshake;
pub mod kubelet_health;
pub mod metered;
pub mod os_release;
pub mod pinned_images;
pub mod pinning;

pub use agent::{Settings, Stopped, Timing, run};
