use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, Time};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::NameReference;
use crate::constants::RESOLVED_OS_IMAGE_ANNOTATION;

/// A set of nodes (`nodeSelector`) and the MachineConfigs they run (`machineConfigSelector`).
// Every print column repeats `type_ = ...`, which clippy takes for a duplicated attribute.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "machineconfiguration.openshift.io",
    version = "v1",
    kind = "MachineConfigPool",
    plural = "machineconfigpools",
    shortname = "mcp",
    status = "MachineConfigPoolStatus",
    derive = "PartialEq",
    derive = "Default",
    label("openshift.io/operator-managed", ""),
    doc = "MachineConfigPool describes a pool of MachineConfigs.",
    printcolumn(name = "Config", type_ = "string", json_path = ".status.configuration.name"),
    printcolumn(
        name = "Updated",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Updated\")].status",
        description = "When all the machines in the pool are updated to the correct machine config."
    ),
    printcolumn(
        name = "Updating",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Updating\")].status",
        description = "When at least one of machine is not either not updated or is in the process of updating to the desired machine config."
    ),
    printcolumn(
        name = "Degraded",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Degraded\")].status",
        description = "When progress is blocked on updating one or more nodes or the pool configuration is failing."
    ),
    printcolumn(
        name = "MachineCount",
        type_ = "number",
        json_path = ".status.machineCount",
        description = "Total number of machines in the machine config pool"
    ),
    printcolumn(
        name = "ReadyMachineCount",
        type_ = "number",
        json_path = ".status.readyMachineCount",
        description = "Total number of ready machines targeted by the pool"
    ),
    printcolumn(
        name = "UpdatedMachineCount",
        type_ = "number",
        json_path = ".status.updatedMachineCount",
        description = "Total number of machines targeted by the pool that have the CurrentMachineConfig as their config"
    ),
    printcolumn(
        name = "DegradedMachineCount",
        type_ = "number",
        json_path = ".status.degradedMachineCount",
        description = "Total number of machines marked degraded (or unreconcilable)"
    ),
    printcolumn(name = "Age", type_ = "date", json_path = ".metadata.creationTimestamp")
)]
#[serde(rename_all = "camelCase")]
pub struct MachineConfigPoolSpec {
    /// Selects the MachineConfigs merged into this pool's rendered config.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machine_config_selector: Option<LabelSelector>,

    /// Selects the nodes of this pool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_selector: Option<LabelSelector>,

    /// Stops new rendered configs from rolling out to the pool's nodes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paused: Option<bool>,

    /// How many (or what percentage `"N%"` of) nodes may be unavailable during an update.
    /// Unset means 1; 0 is treated as 1 (use `paused` to stop updates).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_unavailable: Option<IntOrString>,

    /// Target rendered config, written by the render controller.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub configuration: Option<MachineConfigPoolStatusConfiguration>,

    /// PinnedImageSets whose images the pool's nodes preload and pin.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["name"]))]
    pub pinned_image_sets: Option<Vec<NameReference>>,

    /// OS stream of the pool; unset uses the cluster default (custom pools inherit the worker's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub os_image_stream: Option<NameReference>,
}

/// Observed state of a pool, written by the render and node controllers.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MachineConfigPoolStatus {
    /// Generation of the pool this status was computed for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,

    /// Rendered config every node of the pool runs; set only once the whole pool is updated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub configuration: Option<MachineConfigPoolStatusConfiguration>,

    /// Nodes in the pool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machine_count: Option<i32>,

    /// Nodes that run the target config.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub updated_machine_count: Option<i32>,

    /// Nodes that run the target config and are ready.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready_machine_count: Option<i32>,

    /// Nodes updating or not ready.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unavailable_machine_count: Option<i32>,

    /// Nodes degraded or unreconcilable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub degraded_machine_count: Option<i32>,

    /// Conditions (`Updated`, `Updating`, `Degraded`, ...); a changed condition moves to the end.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-list-type" = "atomic"))]
    pub conditions: Option<Vec<MachineConfigPoolCondition>>,

    /// Expiry of the certificates the pool's nodes trust.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-list-type" = "atomic"))]
    pub cert_expirys: Option<Vec<CertExpiry>>,

    /// Progress of the pool synchronizers (pinned image sets).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend(
        "x-kubernetes-list-type" = "map",
        "x-kubernetes-list-map-keys" = ["poolSynchronizerType"]
    ))]
    pub pool_synchronizers_status: Option<Vec<PoolSynchronizerStatus>>,

    /// OS stream the pool was last updated to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub os_image_stream: Option<NameReference>,
}

/// A rendered MachineConfig (the inline ObjectReference fields) and the MachineConfigs merged
/// into it (`source`, in merge order).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-map-type" = "atomic"))]
pub struct MachineConfigPoolStatusConfiguration {
    /// Kind of the referent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,

    /// Namespace of the referent (unused: MachineConfigs are cluster-scoped).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,

    /// Name of the rendered MachineConfig.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,

    /// UID of the referent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uid: Option<String>,

    /// API version of the referent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_version: Option<String>,

    /// Resource version of the referent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_version: Option<String>,

    /// Part of the referent this refers to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub field_path: Option<String>,

    /// The MachineConfigs merged into the rendered config, in merge order.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-list-type" = "atomic"))]
    pub source: Option<Vec<ObjectReference>>,
}

/// One pool condition. Unlike `metav1.Condition`, every field is optional.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MachineConfigPoolCondition {
    /// Condition type.
    #[serde(rename = "type", default)]
    pub type_: String,

    /// `True`, `False` or `Unknown`.
    #[serde(default)]
    pub status: String,

    /// When the status last changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<Time>,

    /// Machine-readable reason of the last transition.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,

    /// Human-readable details of the last transition.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// Expiry of one certificate of a CA bundle.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct CertExpiry {
    /// Bundle holding the certificate.
    pub bundle: String,

    /// Certificate subject.
    pub subject: String,

    /// Time after which the certificate is no longer valid.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expiry: Option<Time>,
}

/// Progress of one pool synchronizer over the pool's machines.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PoolSynchronizerStatus {
    /// Synchronizer type; the only one is `PinnedImageSets`.
    #[schemars(length(max = 256), extend("enum" = ["PinnedImageSets"]))]
    pub pool_synchronizer_type: String,

    /// Machines managed by the synchronizer.
    pub machine_count: i64,

    /// Machines the synchronizer has updated.
    pub updated_machine_count: i64,

    /// Managed machines that are ready.
    pub ready_machine_count: i64,

    /// Managed machines that are available.
    pub available_machine_count: i64,

    /// Managed machines that are unavailable.
    pub unavailable_machine_count: i64,

    /// Generation of the pool last applied.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}

/// Condition types of [`MachineConfigPoolStatus::conditions`].
pub mod pool_condition {
    /// All nodes run the target config.
    pub const UPDATED: &str = "Updated";
    /// At least one node is not yet on the target config.
    pub const UPDATING: &str = "Updating";
    /// A node failed to apply a config.
    pub const NODE_DEGRADED: &str = "NodeDegraded";
    /// The rendered config cannot be generated.
    pub const RENDER_DEGRADED: &str = "RenderDegraded";
    /// An on-cluster image build failed.
    pub const IMAGE_BUILD_DEGRADED: &str = "ImageBuildDegraded";
    /// Pinning images failed.
    pub const PINNED_IMAGE_SETS_DEGRADED: &str = "PinnedImageSetsDegraded";
    /// A pool synchronizer failed.
    pub const POOL_SYNCHRONIZER_DEGRADED: &str = "PoolSynchronizerDegraded";
    /// Any of the `*Degraded` conditions.
    pub const DEGRADED: &str = "Degraded";
    /// An image build is waiting to start.
    pub const BUILD_PENDING: &str = "BuildPending";
    /// An image build runs.
    pub const BUILDING: &str = "Building";
    /// An image build succeeded.
    pub const BUILD_SUCCESS: &str = "BuildSuccess";
    /// An image build failed.
    pub const BUILD_FAILED: &str = "BuildFailed";
    /// An image build was interrupted.
    pub const BUILD_INTERRUPTED: &str = "BuildInterrupted";
}

impl MachineConfigPool {
    /// The OS image the controller resolved again on request for the rendered config `config`
    /// ([`RESOLVED_OS_IMAGE_ANNOTATION`]), when the pool's record is of that config and by a whole
    /// digest.
    pub fn resolved_os_image(&self, config: &str) -> Option<&str> {
        let record = self.metadata.annotations.as_ref()?.get(RESOLVED_OS_IMAGE_ANNOTATION)?;
        let (named, image) = record.split_once(' ')?;
        let whole = image.split_once("@sha256:").is_some_and(|(_, hex)| super::machineconfig::is_sha256_hex(hex));
        (named == config && whole).then_some(image)
    }

    /// [`Self::resolved_os_image`] for the pool's target config.
    pub fn resolved_target_os_image(&self) -> Option<&str> {
        self.resolved_os_image(self.spec.configuration.as_ref()?.name.as_deref()?)
    }
}

/// The value of [`RESOLVED_OS_IMAGE_ANNOTATION`] for `image`, resolved again for `config`.
pub fn resolved_os_image_record(config: &str, image: &str) -> String {
    format!("{config} {image}")
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn the_resolved_os_image_counts_for_the_config_it_names_and_only_by_digest() {
        let image = &*format!("registry.example/os@sha256:{}", "1".repeat(64));
        let pool = |record: Option<&str>| -> MachineConfigPool {
            let annotations = record.map(|r| json!({RESOLVED_OS_IMAGE_ANNOTATION: r})).unwrap_or(json!({}));
            serde_json::from_value(json!({
                "apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineConfigPool",
                "metadata": {"name": "worker", "annotations": annotations},
                "spec": {"configuration": {"name": "rendered-worker-1"}},
            }))
            .unwrap()
        };
        let record = resolved_os_image_record("rendered-worker-1", image);
        assert_eq!(pool(Some(&record)).resolved_target_os_image(), Some(image));
        assert_eq!(pool(Some(&record)).resolved_os_image("rendered-worker-2"), None);
        let other = resolved_os_image_record("rendered-worker-0", image);
        assert_eq!(pool(Some(&other)).resolved_target_os_image(), None, "a record of another config");
        assert_eq!(pool(Some("rendered-worker-1 registry.example/os:latest")).resolved_target_os_image(), None);
        let short = resolved_os_image_record("rendered-worker-1", "registry.example/os@sha256:1");
        assert_eq!(pool(Some(&short)).resolved_target_os_image(), None, "not a whole digest");
        assert_eq!(pool(Some("rendered-worker-1")).resolved_target_os_image(), None);
        assert_eq!(pool(None).resolved_target_os_image(), None);
    }
}
