use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

// The large upstream sub-objects (`infra`, `dns`, `proxy`, `network`) are kept as JSON, and
// fields added upstream after this type was written survive in `extra`.
/// Cluster facts the controller renders templates and MachineConfigs from; a singleton named
/// `machine-config-controller`, written by the operator.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "machineconfiguration.openshift.io",
    version = "v1",
    kind = "ControllerConfig",
    plural = "controllerconfigs",
    status = "ControllerConfigStatus",
    derive = "PartialEq",
    derive = "Default",
    label("openshift.io/operator-managed", ""),
    doc = "ControllerConfig describes configuration for MachineConfigController."
)]
#[serde(rename_all = "camelCase")]
pub struct ControllerConfigSpec {
    /// Cluster DNS service IP.
    #[serde(rename = "clusterDNSIP", default, skip_serializing_if = "Option::is_none")]
    pub cluster_dns_ip: Option<String>,

    /// Cloud provider configuration.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cloud_provider_config: Option<String>,

    /// Deprecated: use `infra.status.platformStatus.type`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub platform: Option<String>,

    /// Deprecated: use `infra.status.etcdDiscoveryDomain`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub etcd_discovery_domain: Option<String>,

    /// CA bundle kubelets use to trust the API server (rotated; the server injects the current one).
    #[serde(rename = "kubeAPIServerServingCAData", default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::schema::nullable_bytes")]
    pub kube_api_server_serving_ca_data: Option<ByteString>,

    /// Root CA data.
    #[serde(rename = "rootCAData", default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::schema::nullable_bytes")]
    pub root_ca_data: Option<ByteString>,

    /// Cloud provider CA data.
    #[serde(rename = "cloudProviderCAData", default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::schema::nullable_bytes")]
    pub cloud_provider_ca_data: Option<ByteString>,

    /// Certificates added to the nodes' trust store.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::schema::nullable_bytes")]
    pub additional_trust_bundle: Option<ByteString>,

    /// Image registry CA bundles provided by the user.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-list-type" = "atomic"))]
    pub image_registry_bundle_user_data: Option<Vec<ImageRegistryBundle>>,

    /// Image registry CA bundles.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-list-type" = "atomic"))]
    pub image_registry_bundle_data: Option<Vec<ImageRegistryBundle>>,

    /// Pull secret installed on every node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pull_secret: Option<ObjectReference>,

    /// Pull secret for the internal registry.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::schema::nullable_bytes")]
    pub internal_registry_pull_secret: Option<ByteString>,

    /// Component images used by templates, e.g. `machineConfigOperator`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub images: Option<BTreeMap<String, String>>,

    /// Default OS image of every rendered MachineConfig.
    #[serde(rename = "baseOSContainerImage", default, skip_serializing_if = "Option::is_none")]
    pub base_os_container_image: Option<String>,

    /// Extensions image matching `baseOSContainerImage`.
    #[serde(rename = "baseOSExtensionsContainerImage", default, skip_serializing_if = "Option::is_none")]
    pub base_os_extensions_container_image: Option<String>,

    /// Legacy OS image; no longer used for rendering.
    #[serde(rename = "osImageURL", default, skip_serializing_if = "Option::is_none")]
    pub os_image_url: Option<String>,

    /// Release image the cluster was installed with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub release_image: Option<String>,

    /// Proxy configuration of the nodes (`config.openshift.io/v1` ProxyStatus).
    // `null` is common here (Go writes nil pointers and RawExtensions as `null`) and must survive.
    #[serde(default, deserialize_with = "crate::null::keep_null", skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::schema::nullable_preserve_unknown_object")]
    pub proxy: Option<Value>,

    /// The cluster Infrastructure object (platform, topology, API URLs).
    // `null` is common here (Go writes nil pointers and RawExtensions as `null`) and must survive.
    #[serde(default, deserialize_with = "crate::null::keep_null", skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::schema::nullable_embedded_resource")]
    pub infra: Option<Value>,

    /// The cluster DNS object.
    // `null` is common here (Go writes nil pointers and RawExtensions as `null`) and must survive.
    #[serde(default, deserialize_with = "crate::null::keep_null", skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::schema::nullable_embedded_resource")]
    pub dns: Option<Value>,

    /// `IPv4`, `IPv6`, `DualStack` or `DualStackIPv6Primary`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ip_families: Option<String>,

    /// Network plugin of the cluster.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network_type: Option<String>,

    /// Further network information (MTU migration).
    // `null` is common here (Go writes nil pointers and RawExtensions as `null`) and must survive.
    #[serde(default, deserialize_with = "crate::null::keep_null", skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::schema::nullable_preserve_unknown_object")]
    pub network: Option<Value>,

    /// Fields this type does not model, kept so that a read-modify-write does not drop them.
    #[serde(flatten)]
    pub extra: BTreeMap<String, Value>,
}

/// A CA bundle written to a file on the nodes.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct ImageRegistryBundle {
    /// File name of the bundle.
    pub file: String,

    /// Bundle contents.
    #[schemars(schema_with = "crate::schema::bytes")]
    pub data: ByteString,
}

/// Observed state of the ControllerConfig, written by the template controller.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ControllerConfigStatus {
    /// Generation this status was computed for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,

    /// Conditions (`TemplateControllerRunning`, `...Completed`, `...Failing`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-list-type" = "atomic"))]
    pub conditions: Option<Vec<ControllerConfigStatusCondition>>,

    /// The automatically rotated certificates; pools report those of `KubeAPIServerServingCAData`
    /// as their `certExpirys`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-list-type" = "atomic"))]
    pub controller_certificates: Option<Vec<ControllerCertificate>>,
}

/// One ControllerConfig condition.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ControllerConfigStatusCondition {
    /// Condition type.
    #[serde(rename = "type")]
    pub type_: String,

    /// `True`, `False` or `Unknown`.
    pub status: String,

    /// When the status last changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<Time>,

    /// PascalCase reason of the last transition.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,

    /// Human-readable details.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// A certificate found in one of the ControllerConfig's bundles.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ControllerCertificate {
    /// Certificate subject.
    pub subject: String,

    /// Certificate issuer.
    pub signer: String,

    /// Start of validity.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_before: Option<Time>,

    /// End of validity.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_after: Option<Time>,

    /// Bundle the certificate comes from, e.g. `KubeAPIServerServingCAData`.
    pub bundle_file: String,
}

/// Condition types of [`ControllerConfigStatus::conditions`].
pub mod controller_config_condition {
    /// The template controller is running.
    pub const TEMPLATE_CONTROLLER_RUNNING: &str = "TemplateControllerRunning";
    /// The template controller completed a sync.
    pub const TEMPLATE_CONTROLLER_COMPLETED: &str = "TemplateControllerCompleted";
    /// The template controller is failing.
    pub const TEMPLATE_CONTROLLER_FAILING: &str = "TemplateControllerFailing";
}
