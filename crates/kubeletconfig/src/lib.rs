//! KubeletConfig and ContainerRuntimeConfig → MachineConfig, as the original's kubelet config
//! and container runtime config controllers (`pkg/controller/kubelet-config`,
//! `pkg/controller/container-runtime-config`) sync one object: pure functions, no IO. The two
//! share how pools are selected and how the generated MachineConfig is named, owned and cleaned up.
//!
//! [`sync`] takes the cluster's state and one KubeletConfig and says what the controller writes:
//! for each pool the KubeletConfig selects, a `99-<pool>-generated-kubelet[-<n>]` MachineConfig
//! holding the pool's kubelet config (the role's template from the original, the APIServer's TLS
//! profile, every known feature gate, the worker latency profile) with the KubeletConfig's
//! `kubeletConfig` merged over it by mergo's rules, its own TLS profile, the node sizing file for
//! `autoSizingReserved`/`systemReserved` and the log level drop-in; the `mc-name-suffix`
//! annotation and finalizers of the KubeletConfig; generated MachineConfigs of older controller
//! versions to delete; and the outcome, whose message [`updated_status`] turns into the
//! KubeletConfig's conditions. A KubeletConfig upstream refuses gets upstream's failure message
//! and no MachineConfig.
//!
//! [`sync_container_runtime`] does the same for a ContainerRuntimeConfig:
//! `99-<pool>-generated-containerruntime[-<n>]` with CRI-O drop-ins (`pidsLimit`, `logLevel`,
//! `logSizeMax`, `defaultRuntime`, additional artifact stores) and `storage.conf` (overlay size,
//! additional layer and image stores) as Go's TOML encoder writes them; [`updated_runtime_status`]
//! gives its conditions.
//!
//! [`generate`] runs both over a whole set of manifests, as the controllers of a new cluster
//! would, for rendering offline.
//!
//! The bytes are what the original writes: `testdata/kubelet` and `testdata/containerruntime`
//! hold its outputs, produced by running its code.

mod common;
mod completed;
mod crio;
mod generate;
mod kubelet;
mod kubelet_sync;
mod name;
mod offline;
mod runtime_sync;
mod settings;
mod status;
mod template;
mod tls;

pub use common::{Cluster, Failure, Sync};
pub use completed::generating_controllers_completed;
pub use kubelet_sync::{FeatureGates, KubeletInputs, sync};
pub use offline::{Generated, Offline, Refused, generate};
pub use runtime_sync::sync_container_runtime;
pub use settings::ClusterSettings;
pub use status::{updated_runtime_status, updated_status};
pub use template::TemplateError;
