//! `machine.openshift.io/v1beta1` MachineSet, as far as boot image management needs it.
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
