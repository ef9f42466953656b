//! MachineConfigNode: one per node, named like it, where the node's daemon reports how its update
//! to the pool's rendered config goes (conditions per phase, current and desired config).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Serialize};

use super::NameReference;
use crate::crd::UpstreamSchema;

/// The update state of one node: its pool and target config (spec, set by the controller) and
/// what its daemon reports (status).
// Every print column repeats `type_ = ...`, which clippy takes for a duplicated attribute.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "machineconfiguration.openshift.io",
    version = "v1",
    kind = "MachineConfigNode",
    plural = "machineconfignodes",
    status = "MachineConfigNodeStatus",
    derive = "PartialEq",
    derive = "Default",
    label("openshift.io/operator-managed", ""),
    doc = "MachineConfigNode describes the health of the Machines on the system",
    printcolumn(name = "PoolName", type_ = "string", json_path = ".spec.pool.name"),
    printcolumn(name = "DesiredConfig", type_ = "string", json_path = ".spec.configVersion.desired"),
    printcolumn(name = "CurrentConfig", type_ = "string", json_path = ".status.configVersion.current"),
    printcolumn(name = "Updated", type_ = "string", json_path = ".status.conditions[?(@.type==\"Updated\")].status"),
    printcolumn(name = "Age", type_ = "date", json_path = ".metadata.creationTimestamp"),
    printcolumn(
        name = "UpdatePrepared",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"UpdatePrepared\")].status",
        priority = 1
    ),
    printcolumn(
        name = "UpdateExecuted",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"UpdateExecuted\")].status",
        priority = 1
    ),
    printcolumn(
        name = "UpdatePostActionComplete",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"UpdatePostActionComplete\")].status",
        priority = 1
    ),
    printcolumn(
        name = "UpdateComplete",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"UpdateComplete\")].status",
        priority = 1
    ),
    printcolumn(
        name = "Resumed",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Resumed\")].status",
        priority = 1
    ),
    printcolumn(
        name = "UpdatedFilesAndOS",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"AppliedFilesAndOS\")].status",
        priority = 1
    ),
    printcolumn(
        name = "CordonedNode",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Cordoned\")].status",
        priority = 1
    ),
    printcolumn(
        name = "DrainedNode",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Drained\")].status",
        priority = 1
    ),
    printcolumn(
        name = "RebootedNode",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"RebootedNode\")].status",
        priority = 1
    ),
    printcolumn(
        name = "UncordonedNode",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Uncordoned\")].status",
        priority = 1
    )
)]
#[serde(rename_all = "camelCase")]
pub struct MachineConfigNodeSpec {
    /// The node; its name is the MachineConfigNode's.
    #[schemars(schema_with = "mco_object_reference")]
    pub node: NameReference,

    /// The MachineConfigPool the node belongs to.
    #[schemars(schema_with = "mco_object_reference")]
    pub pool: NameReference,

    /// The rendered MachineConfig the node is to update to, set before the daemon validates it.
    pub config_version: MachineConfigNodeSpecMachineConfigVersion,
}

/// The config a node is to run.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MachineConfigNodeSpecMachineConfigVersion {
    /// Name of the rendered MachineConfig the node should be updated to; a change starts the
    /// daemon's update.
    #[schemars(schema_with = "crate::schema::lowercase_dns1123_subdomain")]
    pub desired: String,
}

/// What a node's daemon reports about its update.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MachineConfigNodeStatus {
    /// At most 20, unique by type (`machine_config_node_condition`): one per update phase
    /// (`UpdatePrepared`, `UpdateExecuted`, ...), `Updated`, `NodeDegraded` and the pinned image
    /// set ones.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::schema::conditions", length(max = 20))]
    pub conditions: Option<Vec<Condition>>,

    /// Generation of the MachineConfigNode the controller last observed (at least 1, never
    /// decreasing).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1), extend("x-kubernetes-validations" = [{
        "rule": "self >= oldSelf",
        "message": "observedGeneration must not decrease",
    }]))]
    pub observed_generation: Option<i64>,

    /// The config the node runs and the one it updates to, once validated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_version: Option<MachineConfigNodeStatusMachineConfigVersion>,

    /// The node's progress on the PinnedImageSets of its pool (at most 100, unique by name).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 100), extend(
        "x-kubernetes-list-type" = "map",
        "x-kubernetes-list-map-keys" = ["name"],
    ))]
    pub pinned_image_sets: Option<Vec<MachineConfigNodeStatusPinnedImageSet>>,

    /// Differences between the node's config and the target rendered MachineConfig that only new
    /// nodes can take (1 to 32, unique by fieldPath).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 32), extend(
        "x-kubernetes-list-type" = "map",
        "x-kubernetes-list-map-keys" = ["fieldPath"],
    ))]
    pub irreconcilable_changes: Option<Vec<IrreconcilableChangeDiff>>,

    /// The release payloads stored on the node, when an InternalReleaseImage exists.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub internal_release_image: Option<MachineConfigNodeStatusInternalReleaseImage>,
}

/// The config a node runs and the one it updates to. They differ while an update is in progress.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MachineConfigNodeStatusMachineConfigVersion {
    // Go writes `"current": ""` before the first update completes (no `omitempty`): it reads as
    // `Some("")` and is written back.
    /// Name of the rendered MachineConfig the node runs, set once the daemon has completed an
    /// update.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::schema::lowercase_dns1123_subdomain")]
    pub current: Option<String>,

    /// Name of the rendered MachineConfig the node updates to, set once it has been validated
    /// against the current one.
    #[schemars(schema_with = "crate::schema::lowercase_dns1123_subdomain")]
    pub desired: String,
}

/// A node's progress on one PinnedImageSet, by the set's generation.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {
        "rule": "has(self.desiredGeneration) && has(self.currentGeneration) ? self.desiredGeneration >= self.currentGeneration : true",
        "message": "desired generation must be greater than or equal to the current generation",
    },
    {
        "rule": "has(self.lastFailedGeneration) && has(self.desiredGeneration) ? self.desiredGeneration >= self.lastFailedGeneration : true",
        "message": "desired generation must be greater than or equal to the last failed generation",
    },
    {
        "rule": "has(self.lastFailedGeneration) ? has(self.lastFailedGenerationError) : true",
        "message": "last failed generation error must be defined on image pull and pin failure",
    },
]))]
pub struct MachineConfigNodeStatusPinnedImageSet {
    /// Name of the PinnedImageSet.
    #[schemars(schema_with = "crate::schema::lowercase_dns1123_subdomain")]
    pub name: String,

    /// Generation of the set whose images were last pulled and pinned on the node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1), extend("x-kubernetes-validations" = [{
        "rule": "self >= oldSelf",
        "message": "currentGeneration must not decrease",
    }]))]
    pub current_generation: Option<i32>,

    /// Generation of the set the node is to pull and pin.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1), extend("x-kubernetes-validations" = [{
        "rule": "self >= oldSelf",
        "message": "desiredGeneration must not decrease",
    }]))]
    pub desired_generation: Option<i32>,

    /// Generation of the set whose images last failed to be pulled and pinned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1), extend("x-kubernetes-validations" = [{
        "rule": "self >= oldSelf",
        "message": "lastFailedGeneration must not decrease",
    }]))]
    pub last_failed_generation: Option<i32>,

    /// Why the images of `lastFailedGeneration` failed to be pulled and pinned (at most 32768
    /// characters); empty after a success.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 32768))]
    pub last_failed_generation_error: Option<String>,
}

/// One difference between a node's config and the target rendered MachineConfig that cannot be
/// applied to the node.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct IrreconcilableChangeDiff {
    /// Path of the differing field in the rendered MachineConfig: `spec.` followed by
    /// alphanumerics, brackets and dots, 1 to 70 characters.
    #[schemars(length(min = 1, max = 70), extend("x-kubernetes-validations" = [
        {"rule": "self.startsWith('spec.')", "message": "The fieldPath must start with `spec.`"},
        {
            "rule": r"self.matches('^[\\da-zA-Z\\.\\[\\]]+$')",
            "message": "The fieldPath must consist only of alphanumeric characters, brackets [] and dots ('.').",
        },
    ]))]
    pub field_path: String,

    /// The difference for that field, 1 to 4096 characters.
    #[schemars(length(min = 1, max = 4096))]
    pub diff: String,
}

/// The release bundles stored on a node.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MachineConfigNodeStatusInternalReleaseImage {
    /// The release bundles the cluster owns and manages (1 to 32, unique by name). A bundle may
    /// be pulled from only when it is `Available` and not `Degraded`.
    #[schemars(length(min = 1, max = 32), extend(
        "x-kubernetes-list-type" = "map",
        "x-kubernetes-list-map-keys" = ["name"],
    ))]
    pub releases: Vec<MachineConfigNodeStatusInternalReleaseImageRef>,
}

/// One release bundle on a node.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MachineConfigNodeStatusInternalReleaseImageRef {
    /// 1 to 5, unique by type (`internal_release_image_condition`): `Mounted`, `Installing`,
    /// `Available`, `Removing`, `Degraded`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::schema::conditions", length(min = 1, max = 5))]
    pub conditions: Option<Vec<Condition>>,

    /// Bundle name, `ocp-release-bundle-<version>-<arch|stream>`, 1 to 64 characters.
    #[schemars(length(min = 1, max = 64), extend("x-kubernetes-validations" = [{
        "rule": r"self.matches('^ocp-release-bundle-[0-9]+\\.[0-9]+\\.[0-9]+-[A-Za-z0-9._-]+$')",
        "message": "must be ocp-release-bundle-<version>-<arch|stream> and <= 64 chars",
    }]))]
    pub name: String,

    /// The OCP release image, `host[:port][/namespace]/name@sha256:<64 hex>` where host is
    /// `localhost` or a dot-qualified domain name; set once the release is installed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "release_image_digest")]
    pub image: Option<String>,
}

/// Condition types of a MachineConfigNode's status (upstream's `StateProgress`).
pub mod machine_config_node_condition {
    /// The daemon prepares the update.
    pub const UPDATE_PREPARED: &str = "UpdatePrepared";
    /// The daemon has applied the body of the update.
    pub const UPDATE_EXECUTED: &str = "UpdateExecuted";
    /// The post-update action (e.g. the reboot) is done.
    pub const UPDATE_POST_ACTION_COMPLETE: &str = "UpdatePostActionComplete";
    /// The core parts of the update are done.
    pub const UPDATE_COMPLETE: &str = "UpdateComplete";
    /// The node runs its desired config.
    pub const UPDATED: &str = "Updated";
    /// The node has resumed normal operation.
    pub const RESUMED: &str = "Resumed";
    /// The node was drained.
    pub const DRAINED: &str = "Drained";
    /// Files were written (feature gate `ImageModeStatusReporting`).
    pub const APPLIED_FILES: &str = "AppliedFiles";
    /// The OS image was applied (feature gate `ImageModeStatusReporting`).
    pub const APPLIED_OS_IMAGE: &str = "AppliedOSImage";
    /// Files were written and the OS image applied.
    pub const APPLIED_FILES_AND_OS: &str = "AppliedFilesAndOS";
    /// The update image was pulled (feature gate `ImageModeStatusReporting`).
    pub const IMAGE_PULLED_FROM_REGISTRY: &str = "ImagePulledFromRegistry";
    /// The node was cordoned.
    pub const CORDONED: &str = "Cordoned";
    /// The node was uncordoned.
    pub const UNCORDONED: &str = "Uncordoned";
    /// The node rebooted.
    pub const REBOOTED_NODE: &str = "RebootedNode";
    /// The node failed to update to its desired config.
    pub const NODE_DEGRADED: &str = "NodeDegraded";
    /// The node pulls and pins the images of its PinnedImageSets.
    pub const PINNED_IMAGE_SETS_PROGRESSING: &str = "PinnedImageSetsProgressing";
    /// Pulling or pinning the images of a PinnedImageSet failed.
    pub const PINNED_IMAGE_SETS_DEGRADED: &str = "PinnedImageSetsDegraded";
    /// The node's local InternalReleaseImage registry does not work (feature gate
    /// `NoRegistryClusterInstall`).
    pub const INTERNAL_RELEASE_IMAGE_DEGRADED: &str = "InternalReleaseImageDegraded";
}

/// Condition types of a release bundle on a node (upstream's `InternalReleaseImageConditionType`).
pub mod internal_release_image_condition {
    /// A new release was found on an ISO attached to the node.
    pub const MOUNTED: &str = "Mounted";
    /// The release is being copied to the node.
    pub const INSTALLING: &str = "Installing";
    /// The release is installed on the node and can be used.
    pub const AVAILABLE: &str = "Available";
    /// The release is being removed from the node.
    pub const REMOVING: &str = "Removing";
    /// Something went wrong with the release on the node.
    pub const DEGRADED: &str = "Degraded";
}

/// Upstream's `MCOObjectReference`: a [`NameReference`] whose name is a lowercase RFC 1123
/// subdomain (the shared type's schema has no bounds, and other kinds' references have none).
fn mco_object_reference(generator: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "object",
        "properties": {
            "name": crate::schema::lowercase_dns1123_subdomain(generator),
        },
        "required": ["name"],
    })
}

/// A release image by digest. Unlike [`crate::schema::image_digest`] the host may also be
/// `localhost` (and the message says so).
fn release_image_digest(_: &mut SchemaGenerator) -> Schema {
    crate::schema::digest_pull_spec(
        r"(localhost|([a-zA-Z0-9-]+\\.)+[a-zA-Z0-9-]+)",
        "the OCI Image name should follow the host[:port][/namespace]/name format, resembling a valid URL without the \
         scheme; host must be either 'localhost' or a dot-qualified domain name",
    )
}

/// Upstream's CEL rule on the MachineConfigNode object itself.
pub(crate) const MACHINE_CONFIG_NODE_SCHEMA: UpstreamSchema = UpstreamSchema {
    nullable: &[],
    root_rules: &[("self.metadata.name == self.spec.node.name", "spec.node.name should match metadata.name")],
};
