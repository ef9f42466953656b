//! KubeletConfig and ContainerRuntimeConfig: node tuning that the original's kubelet-config and
//! container-runtime-config controllers turn into `99-<pool>-generated-*` MachineConfigs.

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, Time};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::config::TlsSecurityProfile;
use crate::crd::UpstreamSchema;

/// A customized kubelet configuration for the pools it selects.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "machineconfiguration.openshift.io",
    version = "v1",
    kind = "KubeletConfig",
    plural = "kubeletconfigs",
    status = "KubeletConfigStatus",
    derive = "PartialEq",
    derive = "Default",
    label("openshift.io/operator-managed", ""),
    doc = "KubeletConfig describes a customized Kubelet configuration."
)]
#[serde(rename_all = "camelCase")]
pub struct KubeletConfigSpec {
    /// Size system-reserved CPU and memory from each node's capacity (unset: true for workers,
    /// false for control plane nodes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auto_sizing_reserved: Option<bool>,

    /// Kubelet log verbosity, 0 to 10 (unset: 2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = 10))]
    pub log_level: Option<i32>,

    /// Selects the pools; unset or empty selects none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::schema::label_selector")]
    pub machine_config_pool_selector: Option<LabelSelector>,

    /// Upstream `KubeletConfiguration` fields, merged over the pool's kubelet config.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::schema::preserve_unknown_object")]
    pub kubelet_config: Option<Value>,

    /// TLS settings of the kubelet (unset: those of the APIServer `cluster`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls_security_profile: Option<TlsSecurityProfile>,
}

/// Observed state of a KubeletConfig or ContainerRuntimeConfig.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct KubeletConfigStatus {
    /// Generation the controller last observed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,

    /// The last (at most three) outcomes, oldest first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-list-type" = "atomic"))]
    pub conditions: Option<Vec<ConfigCondition>>,
}

/// Observed state of a ContainerRuntimeConfig (the same shape as a KubeletConfig's).
pub type ContainerRuntimeConfigStatus = KubeletConfigStatus;

/// One outcome of a KubeletConfig or ContainerRuntimeConfig sync.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ConfigCondition {
    /// [`config_condition`] type.
    #[serde(rename = "type", default)]
    pub type_: String,

    /// `True`, `False` or `Unknown`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,

    /// When the condition was written.
    #[serde(default)]
    pub last_transition_time: Option<Time>,

    /// PascalCase reason.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,

    /// Human-readable outcome (`Success`, or `Error: ...`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// Condition types of KubeletConfig and ContainerRuntimeConfig status.
pub mod config_condition {
    /// Whether the config was accepted (current upstream).
    pub const ACCEPTED: &str = "Accepted";
    /// Deprecated success marker, still written after `Accepted` for older clients.
    pub const SUCCESS: &str = "Success";
    /// Deprecated failure marker, still written after `Accepted` for older clients.
    pub const FAILURE: &str = "Failure";
}

/// A customized container runtime (CRI-O) configuration for the pools it selects.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "machineconfiguration.openshift.io",
    version = "v1",
    kind = "ContainerRuntimeConfig",
    plural = "containerruntimeconfigs",
    shortname = "ctrcfg",
    status = "ContainerRuntimeConfigStatus",
    derive = "PartialEq",
    derive = "Default",
    label("openshift.io/operator-managed", ""),
    doc = "ContainerRuntimeConfig describes a customized Container Runtime configuration."
)]
#[serde(rename_all = "camelCase")]
pub struct ContainerRuntimeConfigSpec {
    /// Selects the pools; unset selects none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::schema::label_selector")]
    pub machine_config_pool_selector: Option<LabelSelector>,

    /// The runtime's tunables.
    pub container_runtime_config: ContainerRuntimeConfiguration,
}

/// Tunables of the container runtime.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ContainerRuntimeConfiguration {
    /// Most processes in one container.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pids_limit: Option<i64>,

    /// `fatal`, `panic`, `error`, `warn`, `info` or `debug`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log_level: Option<String>,

    /// Largest container log file; negative means no limit, else at least 8192.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::schema::quantity")]
    pub log_size_max: Option<Quantity>,

    /// Largest container image (overlay quota).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::schema::quantity")]
    pub overlay_size: Option<Quantity>,

    /// Default OCI runtime (unset: crun).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_runtime: Option<DefaultRuntime>,

    /// Read-only layer stores checked before the default location (1 to 5, unique paths).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 5), extend(
        "x-kubernetes-list-type" = "atomic",
        "x-kubernetes-validations" = [{
            "rule": "self.all(x, self.exists_one(y, x.path == y.path))",
            "message": "additionalLayerStores must not contain duplicate paths",
        }],
    ))]
    pub additional_layer_stores: Option<Vec<AdditionalStore>>,

    /// Read-only image stores checked before the default location (1 to 10, unique paths).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 10), extend(
        "x-kubernetes-list-type" = "atomic",
        "x-kubernetes-validations" = [{
            "rule": "self.all(x, self.exists_one(y, x.path == y.path))",
            "message": "additionalImageStores must not contain duplicate paths",
        }],
    ))]
    pub additional_image_stores: Option<Vec<AdditionalStore>>,

    /// Read-only artifact stores checked before the default location (1 to 10, unique paths).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 10), extend(
        "x-kubernetes-list-type" = "atomic",
        "x-kubernetes-validations" = [{
            "rule": "self.all(x, self.exists_one(y, x.path == y.path))",
            "message": "additionalArtifactStores must not contain duplicate paths",
        }],
    ))]
    pub additional_artifact_stores: Option<Vec<AdditionalStore>>,
}

/// OCI runtimes CRI-O can default to.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum DefaultRuntime {
    /// crun (upstream's default).
    Crun,
    /// runc.
    Runc,
}

impl DefaultRuntime {
    /// The name manifests and CRI-O use (`crun`, `runc`).
    pub fn as_str(self) -> &'static str {
        match self {
            DefaultRuntime::Crun => "crun",
            DefaultRuntime::Runc => "runc",
        }
    }
}

/// An additional read-only storage location (upstream's `AdditionalLayerStore`,
/// `AdditionalImageStore` and `AdditionalArtifactStore`, identical on the wire).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct AdditionalStore {
    /// Absolute path, 1 to 256 characters of `a-zA-Z0-9/._-`, no `//`.
    #[schemars(length(min = 1, max = 256), extend("x-kubernetes-validations" = [
        {
            "rule": "self.matches('^/[a-zA-Z0-9/._-]+$')",
            "message": "path must be absolute and contain only alphanumeric characters, '/', '.', '_', and '-'",
        },
        {
            "rule": "!self.contains('//')",
            "message": "path must not contain consecutive forward slashes",
        },
    ]))]
    pub path: String,
}

/// The `+nullable` fields of both kinds' status.
const NULLABLE_CONDITION_TIME: &str = "status.conditions[].lastTransitionTime";

pub(crate) const KUBELET_CONFIG_SCHEMA: UpstreamSchema = UpstreamSchema {
    nullable: &[
        "spec.tlsSecurityProfile.old",
        "spec.tlsSecurityProfile.intermediate",
        "spec.tlsSecurityProfile.modern",
        "spec.tlsSecurityProfile.custom",
        NULLABLE_CONDITION_TIME,
    ],
    root_rules: &[],
};

pub(crate) const CONTAINER_RUNTIME_CONFIG_SCHEMA: UpstreamSchema =
    UpstreamSchema { nullable: &[NULLABLE_CONDITION_TIME], root_rules: &[] };
