//! `operator.openshift.io/v1` MachineConfiguration: the operator's user-facing configuration, a
//! singleton named `cluster`.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, LabelSelector};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

// The first eight fields are upstream's inlined `StaticPodOperatorSpec`, kept for compatibility.
/// Desired behaviour of the Machine Config Operator.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "operator.openshift.io",
    version = "v1",
    kind = "MachineConfiguration",
    plural = "machineconfigurations",
    status = "MachineConfigurationStatus",
    derive = "PartialEq",
    derive = "Default",
    doc = "MachineConfiguration provides information to configure an operator to manage Machine Configuration."
)]
#[serde(rename_all = "camelCase")]
pub struct MachineConfigurationSpec {
    /// `Managed`, `Unmanaged`, `Force` or `Removed`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub management_state: Option<String>,

    /// Operand log level: "", `Normal`, `Debug`, `Trace`, `TraceAll`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log_level: Option<String>,

    /// Operator log level: "", `Normal`, `Debug`, `Trace`, `TraceAll`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operator_log_level: Option<String>,

    /// Unsupported overrides of the computed configuration.
    // `null` is common here (Go writes nil pointers and RawExtensions as `null`) and must survive.
    #[serde(default, deserialize_with = "crate::null::keep_null", skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::schema::nullable_preserve_unknown_object")]
    pub unsupported_config_overrides: Option<Value>,

    /// Sparse configuration observed from the cluster.
    // `null` is common here (Go writes nil pointers and RawExtensions as `null`) and must survive.
    #[serde(default, deserialize_with = "crate::null::keep_null", skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::schema::nullable_preserve_unknown_object")]
    pub observed_config: Option<Value>,

    /// Unique string forcing a redeployment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub force_redeployment_reason: Option<String>,

    /// Failed static pod revisions to keep.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed_revision_limit: Option<i32>,

    /// Successful static pod revisions to keep.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub succeeded_revision_limit: Option<i32>,

    /// Which machine resources get their boot images updated. Unset: the platform default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub managed_boot_images: Option<ManagedBootImages>,

    /// Per file, unit and SSH key: what a change does to a node instead of a reboot.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_disruption_policy: Option<NodeDisruptionPolicyConfig>,

    /// Parts of `spec.config.storage` that may change although existing nodes cannot apply them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub irreconcilable_validation_overrides: Option<IrreconcilableValidationOverrides>,

    /// How boot image skew blocks upgrades.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub boot_image_skew_enforcement: Option<BootImageSkewEnforcementConfig>,
}

/// Observed state of the operator.
///
/// Upstream dropped the inlined `StaticPodOperatorStatus` (its field names are tombstoned), so
/// only the MachineConfiguration-specific fields are here.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MachineConfigurationStatus {
    /// Generation this status was computed for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,

    /// Conditions, e.g. `BootImageUpdateProgressing`, `BootImageUpdateDegraded`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Option<Vec<Condition>>,

    /// The cluster default policies merged with `spec.nodeDisruptionPolicy`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_disruption_policy_status: Option<NodeDisruptionPolicyStatus>,

    /// The effective boot image configuration the controller uses.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub managed_boot_images_status: Option<ManagedBootImages>,

    /// The effective skew enforcement.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub boot_image_skew_enforcement_status: Option<BootImageSkewEnforcementStatus>,
}

/// Condition types of [`MachineConfigurationStatus::conditions`].
pub mod machine_configuration_condition {
    /// Boot image reconciliation failed; the ClusterOperator degrades.
    pub const BOOT_IMAGE_UPDATE_DEGRADED: &str = "BootImageUpdateDegraded";
    /// Boot images are being reconciled.
    pub const BOOT_IMAGE_UPDATE_PROGRESSING: &str = "BootImageUpdateProgressing";
}

// ---------------------------------------------------------------------------------------------
// Managed boot images
// ---------------------------------------------------------------------------------------------

/// The machine resources registered for boot image updates.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ManagedBootImages {
    /// At most one entry per resource and API group (at most 5). An explicit empty list opts out
    /// of boot image updates; unset leaves it to the platform default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend(
        "x-kubernetes-list-type" = "map",
        "x-kubernetes-list-map-keys" = ["resource", "apiGroup"]
    ))]
    pub machine_managers: Option<Vec<MachineManager>>,
}

/// A kind of machine resource and which of its objects get boot image updates.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MachineManager {
    /// Resource type.
    pub resource: MachineManagerResource,

    /// API group of the resource.
    pub api_group: MachineManagerApiGroup,

    /// Which objects are updated.
    pub selection: MachineManagerSelector,
}

/// Machine resources whose boot images can be managed.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema)]
pub enum MachineManagerResource {
    /// Machine API MachineSets.
    #[serde(rename = "machinesets")]
    MachineSets,
    /// The ControlPlaneMachineSet (only `All` or `None` selection).
    #[serde(rename = "controlplanemachinesets")]
    ControlPlaneMachineSets,
}

/// API groups of [`MachineManagerResource`]s.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema)]
pub enum MachineManagerApiGroup {
    /// The OpenShift Machine API.
    #[serde(rename = "machine.openshift.io")]
    MachineApi,
}

/// Selection of the objects of a [`MachineManager`].
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
pub struct MachineManagerSelector {
    /// All, some (by label) or none of the objects.
    pub mode: MachineManagerSelectorMode,

    /// The label selector; required when `mode` is `Partial`, forbidden otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partial: Option<PartialSelector>,
}

/// Selection modes of a [`MachineManagerSelector`].
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum MachineManagerSelectorMode {
    /// Every object.
    All,
    /// The objects matching `partial.machineResourceSelector`.
    Partial,
    /// No object.
    None,
}

/// Label selection of machine resources.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PartialSelector {
    /// Selects the machine resources (e.g. MachineSets) to update.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machine_resource_selector: Option<LabelSelector>,
}

// ---------------------------------------------------------------------------------------------
// Node disruption policy
// ---------------------------------------------------------------------------------------------

/// User node disruption policies (spec).
pub type NodeDisruptionPolicyConfig = NodeDisruptionPolicies<NodeDisruptionPolicySpecActionType>;
/// Effective node disruption policies (status: defaults merged with the spec).
pub type NodeDisruptionPolicyClusterStatus = NodeDisruptionPolicies<NodeDisruptionPolicyStatusActionType>;
/// A spec action.
pub type NodeDisruptionPolicySpecAction = NodeDisruptionPolicyAction<NodeDisruptionPolicySpecActionType>;
/// A status action.
pub type NodeDisruptionPolicyStatusAction = NodeDisruptionPolicyAction<NodeDisruptionPolicyStatusActionType>;

// Generic over the action type because spec and status differ only in that status may also
// hold `Special` (upstream has a separate Go type for each). The `Option` fields carry no
// `#[serde(default)]` because that would make serde require `T: Default`; a missing `Option`
// field is `None` anyway.
/// Actions for changed files, units and SSH keys.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeDisruptionPolicies<T> {
    /// Per file path (or parent directory); at most 50 in the spec.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["path"]))]
    pub files: Option<Vec<NodeDisruptionPolicyFile<T>>>,

    /// Per systemd unit name; at most 50 in the spec.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["name"]))]
    pub units: Option<Vec<NodeDisruptionPolicyUnit<T>>>,

    /// For any change of the core user's SSH keys.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sshkey: Option<NodeDisruptionPolicySshKey<T>>,
}

// Written by hand: a derive would require `T: Default` although no `T` value is needed.
impl<T> Default for NodeDisruptionPolicies<T> {
    fn default() -> Self {
        Self { files: None, units: None, sshkey: None }
    }
}

/// Actions for a changed file path.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
pub struct NodeDisruptionPolicyFile<T> {
    /// Absolute path of a file or directory managed by MachineConfigs.
    pub path: String,

    /// Actions in order; at most 10; `Reboot` and `None` must stand alone.
    #[schemars(extend("x-kubernetes-list-type" = "atomic"))]
    pub actions: Vec<NodeDisruptionPolicyAction<T>>,
}

/// Actions for a changed systemd unit.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
pub struct NodeDisruptionPolicyUnit<T> {
    /// Unit name, `${NAME}${SERVICETYPE}` (e.g. `crio.service`).
    pub name: String,

    /// Actions in order; at most 10; `Reboot` and `None` must stand alone.
    #[schemars(extend("x-kubernetes-list-type" = "atomic"))]
    pub actions: Vec<NodeDisruptionPolicyAction<T>>,
}

/// Actions for a changed SSH key.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
pub struct NodeDisruptionPolicySshKey<T> {
    /// Actions in order; at most 10; `Reboot` and `None` must stand alone.
    #[schemars(extend("x-kubernetes-list-type" = "atomic"))]
    pub actions: Vec<NodeDisruptionPolicyAction<T>>,
}

/// One action; `reload`/`restart` name the service for the `Reload`/`Restart` types.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
pub struct NodeDisruptionPolicyAction<T> {
    /// What to do.
    #[serde(rename = "type")]
    pub type_: T,

    /// Service to reload; required for `Reload`, forbidden otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reload: Option<ServiceReference>,

    /// Service to restart; required for `Restart`, forbidden otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub restart: Option<ServiceReference>,
}

impl<T> NodeDisruptionPolicyAction<T> {
    /// An action without a service (`Reboot`, `Drain`, `DaemonReload`, `None`, `Special`).
    pub fn new(type_: T) -> Self {
        Self { type_, reload: None, restart: None }
    }
}

impl From<NodeDisruptionPolicySpecAction> for NodeDisruptionPolicyStatusAction {
    fn from(action: NodeDisruptionPolicySpecAction) -> Self {
        Self { type_: action.type_.into(), reload: action.reload, restart: action.restart }
    }
}

/// The systemd service of a `Reload` or `Restart` action.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ServiceReference {
    /// Full unit name, e.g. `crio.service`.
    pub service_name: String,
}

/// Actions a user may configure.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema)]
pub enum NodeDisruptionPolicySpecActionType {
    /// Reboot the node (the default for unlisted changes).
    Reboot,
    /// Drain the node.
    Drain,
    /// `systemctl reload <service>`.
    Reload,
    /// `systemctl restart <service>`.
    Restart,
    /// `systemctl daemon-reload`.
    DaemonReload,
    /// Nothing.
    None,
}

/// Actions of the effective policy: the user's plus `Special` (internal to the operator).
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema)]
pub enum NodeDisruptionPolicyStatusActionType {
    /// Reboot the node.
    Reboot,
    /// Drain the node.
    Drain,
    /// `systemctl reload <service>`.
    Reload,
    /// `systemctl restart <service>`.
    Restart,
    /// `systemctl daemon-reload`.
    DaemonReload,
    /// Nothing.
    None,
    /// registries.conf handling: reload crio, drain unless the change is safe.
    Special,
}

impl From<NodeDisruptionPolicySpecActionType> for NodeDisruptionPolicyStatusActionType {
    fn from(action: NodeDisruptionPolicySpecActionType) -> Self {
        use NodeDisruptionPolicySpecActionType as S;
        match action {
            S::Reboot => Self::Reboot,
            S::Drain => Self::Drain,
            S::Reload => Self::Reload,
            S::Restart => Self::Restart,
            S::DaemonReload => Self::DaemonReload,
            S::None => Self::None,
        }
    }
}

/// Status wrapper of the effective node disruption policies.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeDisruptionPolicyStatus {
    /// Cluster defaults merged with the user's policies.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster_policies: Option<NodeDisruptionPolicyClusterStatus>,
}

// ---------------------------------------------------------------------------------------------
// Irreconcilable overrides, skew enforcement
// ---------------------------------------------------------------------------------------------

/// Irreconcilable MachineConfig changes to allow anyway (only new nodes get them).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct IrreconcilableValidationOverrides {
    /// Sections of `spec.config.storage` that may change.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-list-type" = "set"))]
    pub storage: Option<Vec<IrreconcilableValidationOverridesStorage>>,
}

/// Storage sections of `spec.config` that may change irreconcilably.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema)]
pub enum IrreconcilableValidationOverridesStorage {
    /// `spec.config.storage.disks`.
    Disks,
    /// `spec.config.storage.filesystems`.
    FileSystems,
    /// `spec.config.storage.raid`.
    Raid,
}

/// User configuration of boot image skew enforcement.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct BootImageSkewEnforcementConfig {
    /// `Manual` or `None` (required).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<BootImageSkewEnforcementConfigMode>,

    /// The oldest boot image in use; required when `mode` is `Manual`, forbidden otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub manual: Option<ClusterBootImageManual>,
}

/// Skew enforcement modes a user may choose.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum BootImageSkewEnforcementConfigMode {
    /// The admin updates boot images and records the oldest one in `manual`.
    Manual,
    /// No skew enforcement.
    None,
}

/// The oldest boot image of the cluster, recorded by the admin.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterBootImageManual {
    /// Which of the two versions is given (required).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<ClusterBootImageManualMode>,

    /// OCP version `x.y.z` (5-10 characters); required iff `mode` is `OCPVersion`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ocp_version: Option<String>,

    /// RHCOS version `major.minor.YYYYMMDD-N` or legacy `major.minor.YYYYMMDDHHmm-N`
    /// (14-21 characters); required iff `mode` is `RHCOSVersion`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rhcos_version: Option<String>,
}

/// Which version identifies the boot image.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum ClusterBootImageManualMode {
    /// `ocpVersion`.
    #[serde(rename = "OCPVersion")]
    OcpVersion,
    /// `rhcosVersion`.
    #[serde(rename = "RHCOSVersion")]
    RhcosVersion,
}

/// Effective boot image skew enforcement.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct BootImageSkewEnforcementStatus {
    /// `Automatic`, `Manual` or `None`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<BootImageSkewEnforcementModeStatus>,

    /// The boot image the operator last updated to; present iff `mode` is `Automatic`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub automatic: Option<ClusterBootImageAutomatic>,

    /// Copy of the spec's `manual`; present iff `mode` is `Manual`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub manual: Option<ClusterBootImageManual>,
}

/// Effective skew enforcement modes.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum BootImageSkewEnforcementModeStatus {
    /// The operator updates boot images and records the version in `automatic`.
    Automatic,
    /// The admin records the oldest boot image in `manual`.
    Manual,
    /// No skew enforcement.
    None,
}

/// The boot image the operator last updated to (at least one of the two versions).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterBootImageAutomatic {
    /// OCP version `x.y.z`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ocp_version: Option<String>,

    /// RHCOS version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rhcos_version: Option<String>,
}
