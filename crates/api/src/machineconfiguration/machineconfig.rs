use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

// Serializes exactly like upstream's Go struct under `encoding/json`, because the name of a
// rendered MachineConfig is a hash of that output: fields in declaration order, strings and
// booleans always present (no `omitempty` in Go), `config` as `null` when unset (a
// `runtime.RawExtension` is a struct, which `omitempty` never omits, and its `MarshalJSON` writes
// `null` for nil), and `kernelArguments`/`extensions` as `null` when nil but `[]` when empty.
// Missing fields deserialize to Go's zero values, and so does a missing or `null` spec.
/// An Ignition config plus the OS-level settings Ignition cannot express.
// Every print column repeats `type_ = ...`, which clippy takes for a duplicated attribute.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(remote = "Self")]
#[kube(
    group = "machineconfiguration.openshift.io",
    version = "v1",
    kind = "MachineConfig",
    plural = "machineconfigs",
    shortname = "mc",
    derive = "PartialEq",
    derive = "Default",
    label("openshift.io/operator-managed", ""),
    doc = "MachineConfig defines the configuration for a machine.",
    printcolumn(
        name = "GeneratedByController",
        type_ = "string",
        json_path = ".metadata.annotations.machineconfiguration\\.openshift\\.io/generated-by-controller-version",
        description = "Version of the controller that generated the machineconfig. This will be empty if the machineconfig is not managed by a controller."
    ),
    printcolumn(
        name = "IgnitionVersion",
        type_ = "string",
        json_path = ".spec.config.ignition.version",
        description = "Version of the Ignition Config defined in the machineconfig."
    ),
    printcolumn(name = "Age", type_ = "date", json_path = ".metadata.creationTimestamp")
)]
pub struct MachineConfigSpec {
    /// OS image pullspec (a digest). Empty means "the cluster default".
    #[serde(rename = "osImageURL", default)]
    pub os_image_url: String,

    /// Extensions container image matching the OS image.
    #[serde(rename = "baseOSExtensionsContainerImage", default)]
    pub base_os_extensions_container_image: String,

    /// Ignition config object, kept verbatim (spec 2.2 or 3.0-3.5). Unset is the valid empty
    /// config; `{}` is a config without a version, which rendering rejects.
    #[serde(default)]
    #[schemars(schema_with = "crate::schema::preserve_unknown_object")]
    pub config: Option<Value>,

    /// Kernel arguments to add; one entry may hold several space-separated arguments.
    #[serde(rename = "kernelArguments", default)]
    #[schemars(extend("x-kubernetes-list-type" = "atomic"))]
    pub kernel_arguments: Option<Vec<String>>,

    /// RHCOS extensions to install (names from the allow-list).
    #[serde(default)]
    #[schemars(extend("x-kubernetes-list-type" = "atomic"))]
    pub extensions: Option<Vec<String>>,

    /// FIPS mode.
    #[serde(default)]
    pub fips: bool,

    /// Kernel flavour: "" or `default`, `realtime`, `64k-pages` (aarch64 only).
    #[serde(rename = "kernelType", default)]
    pub kernel_type: String,
}

crate::null::optional_spec!(MachineConfigSpec);
