//! `machine.openshift.io/v1beta1` MachineSet and `machine.openshift.io/v1` ControlPlaneMachineSet,
//! as far as boot image management needs them.
//!
//! Only the fields the operator reads or writes are typed; everything else is kept in `extra`
//! maps, and the provider spec is raw JSON, so a read-modify-write never drops what another
//! component (or a newer API version) put there.

pub mod provider;

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Keeps a number of machines of one template running.
// Every print column repeats `type_ = ...`, which clippy takes for a duplicated attribute.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(remote = "Self")]
#[kube(
    group = "machine.openshift.io",
    version = "v1beta1",
    kind = "MachineSet",
    plural = "machinesets",
    namespaced,
    status = "MachineSetStatus",
    derive = "PartialEq",
    derive = "Default",
    doc = "MachineSet ensures that a specified number of machines replicas are running at any given time.",
    scale(
        spec_replicas_path = ".spec.replicas",
        status_replicas_path = ".status.replicas",
        label_selector_path = ".status.labelSelector"
    ),
    printcolumn(name = "Desired", type_ = "integer", json_path = ".spec.replicas", description = "Desired Replicas"),
    printcolumn(name = "Current", type_ = "integer", json_path = ".status.replicas", description = "Current Replicas"),
    printcolumn(
        name = "Ready",
        type_ = "integer",
        json_path = ".status.readyReplicas",
        description = "Ready Replicas"
    ),
    printcolumn(
        name = "Available",
        type_ = "string",
        json_path = ".status.availableReplicas",
        description = "Observed number of available replicas"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp",
        description = "Machineset age"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct MachineSetSpec {
    /// Desired number of machines (unset means 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i32>,

    /// Seconds a new machine must be ready before it counts as available.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_ready_seconds: Option<i32>,

    /// `Random`, `Newest` or `Oldest`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delete_policy: Option<String>,

    /// Selects the machines counted against `replicas`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<LabelSelector>,

    /// The machines to create.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub template: Option<MachineTemplateSpec>,

    /// Fields not modelled here (e.g. `authoritativeAPI`).
    #[serde(flatten)]
    pub extra: BTreeMap<String, Value>,
}

// Upstream's spec is optional (`json:"spec,omitempty"`): a missing or `null` spec reads as empty.
crate::null::optional_spec!(MachineSetSpec);

/// Template of the machines of a MachineSet.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct MachineTemplateSpec {
    /// Metadata of the created machines.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<MachineTemplateMeta>,

    /// Spec of the created machines.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec: Option<MachineSpec>,
}

/// Labels and annotations of a machine template (e.g. `machine.openshift.io/os-id`).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct MachineTemplateMeta {
    /// Labels of the created machines.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub labels: Option<BTreeMap<String, String>>,

    /// Annotations of the created machines.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<BTreeMap<String, String>>,

    /// Fields not modelled here (name, generateName, namespace, ownerReferences).
    #[serde(flatten)]
    pub extra: BTreeMap<String, Value>,
}

/// Spec of a machine.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MachineSpec {
    /// Cloud provider configuration of the machine.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider_spec: Option<ProviderSpec>,

    /// Fields not modelled here (metadata, taints, lifecycleHooks, providerID, ...).
    #[serde(flatten)]
    pub extra: BTreeMap<String, Value>,
}

/// Provider-specific machine configuration.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct ProviderSpec {
    // Read and edit it with the `provider` module.
    /// The platform's provider config (`AWSMachineProviderConfig`, `GCPMachineProviderSpec`, ...),
    /// verbatim.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::schema::preserve_unknown_object")]
    pub value: Option<Value>,

    /// Fields not modelled here.
    #[serde(flatten)]
    pub extra: BTreeMap<String, Value>,
}

/// Observed state of a MachineSet.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MachineSetStatus {
    /// Observed number of machines.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i32>,

    /// Machines whose labels match the template's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fully_labeled_replicas: Option<i32>,

    /// Machines whose node is ready.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready_replicas: Option<i32>,

    /// Machines ready for at least `minReadySeconds`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub available_replicas: Option<i32>,

    /// Generation this status was computed for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,

    /// Fields not modelled here (errorReason, errorMessage, conditions, labelSelector, ...).
    #[serde(flatten)]
    pub extra: BTreeMap<String, Value>,
}

impl MachineSet {
    /// The provider spec value (`spec.template.spec.providerSpec.value`), if any.
    pub fn provider_spec(&self) -> Option<&Value> {
        self.spec.template.as_ref()?.spec.as_ref()?.provider_spec.as_ref()?.value.as_ref()
    }

    /// Mutable access to the provider spec value, to edit it in place with [`provider`].
    pub fn provider_spec_mut(&mut self) -> Option<&mut Value> {
        self.spec.template.as_mut()?.spec.as_mut()?.provider_spec.as_mut()?.value.as_mut()
    }

    /// A label of the machine template (e.g. [`crate::constants::MACHINE_OS_ID_LABEL`]).
    pub fn template_label(&self, key: &str) -> Option<&str> {
        self.spec.template.as_ref()?.metadata.as_ref()?.labels.as_ref()?.get(key).map(String::as_str)
    }
}

/// What has a provider spec: a MachineSet's machine template, a ControlPlaneMachineSet's.
pub trait ProviderSpecHolder: Clone {
    /// The provider spec value, if any.
    fn provider_spec(&self) -> Option<&Value>;
    /// Mutable access to it, to edit it in place with [`provider`].
    fn provider_spec_mut(&mut self) -> Option<&mut Value>;
}

impl ProviderSpecHolder for MachineSet {
    fn provider_spec(&self) -> Option<&Value> {
        MachineSet::provider_spec(self)
    }

    fn provider_spec_mut(&mut self) -> Option<&mut Value> {
        MachineSet::provider_spec_mut(self)
    }
}

/// Keeps the control plane's machines on one template (`machine.openshift.io/v1`, the singleton
/// `openshift-machine-api/cluster`), typed as far as boot image management needs it.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "machine.openshift.io",
    version = "v1",
    kind = "ControlPlaneMachineSet",
    plural = "controlplanemachinesets",
    namespaced,
    status = "ControlPlaneMachineSetStatus",
    derive = "PartialEq",
    derive = "Default",
    doc = "ControlPlaneMachineSet ensures that a specified number of control plane machine replicas are running at any given time.",
    scale(spec_replicas_path = ".spec.replicas", status_replicas_path = ".status.replicas"),
    printcolumn(name = "Desired", type_ = "integer", json_path = ".spec.replicas", description = "Desired Replicas"),
    printcolumn(name = "Current", type_ = "integer", json_path = ".status.replicas", description = "Current Replicas"),
    printcolumn(
        name = "Ready",
        type_ = "integer",
        json_path = ".status.readyReplicas",
        description = "Ready Replicas"
    ),
    printcolumn(
        name = "Updated",
        type_ = "integer",
        json_path = ".status.updatedReplicas",
        description = "Updated Replicas"
    ),
    printcolumn(
        name = "Unavailable",
        type_ = "integer",
        json_path = ".status.unavailableReplicas",
        description = "Observed number of unavailable replicas"
    ),
    printcolumn(
        name = "State",
        type_ = "string",
        json_path = ".spec.state",
        description = "ControlPlaneMachineSet state"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp",
        description = "ControlPlaneMachineSet age"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct ControlPlaneMachineSetSpec {
    /// Number of control plane machines (3 or 5).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i32>,

    /// `Active` (the CPMS operator replaces machines that differ from the template) or `Inactive`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<String>,

    /// Selects the control plane machines.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<LabelSelector>,

    /// The machines to create.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub template: Option<ControlPlaneMachineSetTemplate>,

    /// Fields not modelled here (strategy, machineNamePrefix).
    #[serde(flatten)]
    pub extra: BTreeMap<String, Value>,
}

/// The template of a ControlPlaneMachineSet: for now always a Machine API machine.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct ControlPlaneMachineSetTemplate {
    /// `machines_v1beta1_machine_openshift_io`.
    #[serde(rename = "machineType", default, skip_serializing_if = "Option::is_none")]
    pub machine_type: Option<String>,

    /// The Machine API machine template.
    #[serde(rename = "machines_v1beta1_machine_openshift_io", default, skip_serializing_if = "Option::is_none")]
    pub machine: Option<ControlPlaneMachineTemplate>,

    /// Fields not modelled here.
    #[serde(flatten)]
    pub extra: BTreeMap<String, Value>,
}

/// A control plane machine's template.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct ControlPlaneMachineTemplate {
    /// Labels and annotations of the created machines.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<MachineTemplateMeta>,

    /// Spec of the created machines.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec: Option<MachineSpec>,

    /// Fields not modelled here (failureDomains).
    #[serde(flatten)]
    pub extra: BTreeMap<String, Value>,
}

/// Observed state of a ControlPlaneMachineSet.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ControlPlaneMachineSetStatus {
    /// Observed number of control plane machines (the scale subresource's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i32>,

    /// The rest, as the ControlPlaneMachineSet operator writes it (nothing here reads it).
    #[serde(flatten)]
    pub extra: BTreeMap<String, Value>,
}

impl ControlPlaneMachineSet {
    fn machine_spec(&self) -> Option<&MachineSpec> {
        self.spec.template.as_ref()?.machine.as_ref()?.spec.as_ref()
    }

    /// A label the machines' spec carries (`spec.template.machines_v1beta1_machine_openshift_io
    /// .spec.metadata.labels`, where the original looks for [`crate::constants::MACHINE_OS_ID_LABEL`]).
    pub fn machine_spec_label(&self, key: &str) -> Option<&str> {
        self.machine_spec()?.extra.get("metadata")?.get("labels")?.get(key)?.as_str()
    }
}

impl ProviderSpecHolder for ControlPlaneMachineSet {
    fn provider_spec(&self) -> Option<&Value> {
        self.machine_spec()?.provider_spec.as_ref()?.value.as_ref()
    }

    fn provider_spec_mut(&mut self) -> Option<&mut Value> {
        self.spec.template.as_mut()?.machine.as_mut()?.spec.as_mut()?.provider_spec.as_mut()?.value.as_mut()
    }
}
