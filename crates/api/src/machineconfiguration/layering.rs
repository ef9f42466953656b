//! On-cluster layering: MachineOSConfig (what to build for a pool) and MachineOSBuild (one build).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::CustomResource;
use schemars::{JsonSchema, Schema, SchemaGenerator};
use serde::{Deserialize, Serialize};

use super::NameReference;

/// How to build a layered OS image for one pool; named like the pool.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "machineconfiguration.openshift.io",
    version = "v1",
    kind = "MachineOSConfig",
    plural = "machineosconfigs",
    status = "MachineOSConfigStatus",
    derive = "PartialEq",
    derive = "Default",
    label("openshift.io/operator-managed", ""),
    doc = "MachineOSConfig describes the configuration for a build process managed by the MCO."
)]
#[serde(rename_all = "camelCase")]
pub struct MachineOSConfigSpec {
    /// Pool the image is built for; must equal the MachineOSConfig's name.
    pub machine_config_pool: NameReference,

    /// Build backend.
    pub image_builder: MachineOSImageBuilder,

    /// Secret (ns/MCO) to pull the base image; defaults to a copy of the global pull secret.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_image_pull_secret: Option<NameReference>,

    /// Secret (ns/MCO) to push the built image.
    pub rendered_image_push_secret: NameReference,

    /// Where the built image is pushed: `host[:port][/namespace]/name:<tag>` or
    /// `svc_name.namespace.svc[:port]/repository/name:<tag>`, at most 447 characters.
    pub rendered_image_push_spec: String,

    // Go serializes a nil list here as `null` (no `omitempty`); anything hashing this spec the
    // way upstream does (MachineOSBuild names) must emit that itself.
    /// Containerfile content per architecture (at most 4).
    #[serde(rename = "containerFile", default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend(
        "x-kubernetes-list-type" = "map",
        "x-kubernetes-list-map-keys" = ["containerfileArch"]
    ))]
    pub containerfile: Option<Vec<MachineOSContainerfile>>,
}

/// The image builder of a MachineOSConfig.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MachineOSImageBuilder {
    /// Build backend.
    pub image_builder_type: MachineOSImageBuilderType,
}

/// Build backends.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum MachineOSImageBuilderType {
    /// A Job running buildah.
    #[default]
    Job,
}

/// Containerfile content for one architecture.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MachineOSContainerfile {
    /// Architecture; unset means `NoArch` (any).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "containerfile_arch_schema")]
    pub containerfile_arch: Option<ContainerfileArch>,

    /// Containerfile content, at most 4096 characters.
    pub content: String,
}

/// The API server requires a list-map key that is not required to have a default and forbids it
/// to be nullable, so the `Option`'s schema is the plain enum plus upstream's default.
fn containerfile_arch_schema(generator: &mut SchemaGenerator) -> Schema {
    let mut schema = generator.subschema_for::<ContainerfileArch>();
    schema.insert("default".into(), "NoArch".into());
    schema
}

/// Architectures of a containerfile.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema)]
pub enum ContainerfileArch {
    /// arm64.
    #[serde(rename = "ARM64")]
    Arm64,
    /// amd64.
    #[serde(rename = "AMD64")]
    Amd64,
    /// ppc64le.
    #[serde(rename = "PPC64LE")]
    Ppc64le,
    /// s390x.
    #[serde(rename = "S390X")]
    S390x,
    /// Any architecture.
    NoArch,
}

/// Observed state of a MachineOSConfig, written by the build controller.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MachineOSConfigStatus {
    /// Conditions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::schema::conditions")]
    pub conditions: Option<Vec<Condition>>,

    /// Generation this status was computed for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,

    /// Digest pullspec (`...@sha256:<64 hex>`) of the last successfully built image.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current_image_pull_spec: Option<String>,

    /// The MachineOSBuild of the current image.
    #[serde(rename = "machineOSBuild", default, skip_serializing_if = "Option::is_none")]
    pub machine_os_build: Option<ObjectReference>,
}

/// One image build of a rendered MachineConfig for a MachineOSConfig; the spec is immutable.
// Every print column repeats `type_ = ...`, which clippy takes for a duplicated attribute.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "machineconfiguration.openshift.io",
    version = "v1",
    kind = "MachineOSBuild",
    plural = "machineosbuilds",
    status = "MachineOSBuildStatus",
    derive = "PartialEq",
    derive = "Default",
    label("openshift.io/operator-managed", ""),
    doc = "MachineOSBuild describes a build process managed and deployed by the MCO.",
    printcolumn(name = "Prepared", type_ = "string", json_path = ".status.conditions[?(@.type==\"Prepared\")].status"),
    printcolumn(name = "Building", type_ = "string", json_path = ".status.conditions[?(@.type==\"Building\")].status"),
    printcolumn(
        name = "Succeeded",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Succeeded\")].status"
    ),
    printcolumn(
        name = "Interrupted",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Interrupted\")].status"
    ),
    printcolumn(name = "Failed", type_ = "string", json_path = ".status.conditions[?(@.type==\"Failed\")].status"),
    printcolumn(name = "Age", type_ = "date", json_path = ".metadata.creationTimestamp")
)]
#[serde(rename_all = "camelCase")]
pub struct MachineOSBuildSpec {
    /// Rendered MachineConfig built into the image.
    pub machine_config: NameReference,

    /// MachineOSConfig this build belongs to.
    #[serde(rename = "machineOSConfig")]
    pub machine_os_config: NameReference,

    /// Push spec of the MachineOSConfig with the tag replaced by the build's name.
    pub rendered_image_push_spec: String,
}

/// Observed state of a build.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MachineOSBuildStatus {
    /// Conditions (`Prepared`, `Building`, `Failed`, `Interrupted`, `Succeeded`); frozen once the
    /// build ends (upstream's rules).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::schema::conditions", length(max = 8), extend("x-kubernetes-validations" = [
        {
            "rule": "oldSelf.exists(x, x.type=='Failed' && x.status=='True') ? self==oldSelf : true",
            "message": "once a Failed condition is set, conditions are immutable",
        },
        {
            "rule": "oldSelf.exists(x, x.type=='Interrupted' && x.status=='True') ? self==oldSelf : true",
            "message": "once an Interrupted condition is set, conditions are immutable",
        },
        {
            "rule": "oldSelf.exists(x, x.type=='Succeeded' && x.status=='True') ? self==oldSelf : true",
            "message": "once an Succeeded condition is set, conditions are immutable",
        },
    ]))]
    pub conditions: Option<Vec<Condition>>,

    /// Backend running the build.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-validations" = [{
        "rule": "has(self.imageBuilderType) && self.imageBuilderType == 'Job' ?  has(self.job) : !has(self.job)",
        "message": "job is required when imageBuilderType is Job, and forbidden otherwise",
    }]))]
    pub builder: Option<MachineOSBuilderReference>,

    /// Ephemeral objects (ConfigMaps, Secrets) the build uses, removed after success.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend(
        "x-kubernetes-list-type" = "map",
        "x-kubernetes-list-map-keys" = ["name", "resource"]
    ))]
    pub related_objects: Option<Vec<ObjectReference>>,

    /// When the build backend was started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub build_start: Option<Time>,

    /// When the build backend completed, failed or was interrupted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub build_end: Option<Time>,

    /// Digest pullspec of the pushed image.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub digested_image_push_spec: Option<String>,
}

/// The backend object running a build.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MachineOSBuilderReference {
    /// Build backend (upstream's schema has no enum here, unlike the MachineOSConfig's).
    #[schemars(with = "String")]
    pub image_builder_type: MachineOSImageBuilderType,

    /// The Job running the build (when the type is `Job`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job: Option<ObjectReference>,
}

/// A reference to an object by group, resource, namespace and name (the layering API's own
/// ObjectReference, not core/v1's).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct ObjectReference {
    /// API group, "" for core.
    pub group: String,

    /// Resource (plural), e.g. `jobs`.
    pub resource: String,

    /// Namespace, if namespaced.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,

    /// Name.
    pub name: String,
}

/// Condition types of [`MachineOSBuildStatus::conditions`].
pub mod machine_os_build_condition {
    /// Build inputs gathered and validated.
    pub const PREPARED: &str = "Prepared";
    /// The backend is building.
    pub const BUILDING: &str = "Building";
    /// The build failed.
    pub const FAILED: &str = "Failed";
    /// The build was stopped by a config change.
    pub const INTERRUPTED: &str = "Interrupted";
    /// The image is built and pushed.
    pub const SUCCEEDED: &str = "Succeeded";
}
