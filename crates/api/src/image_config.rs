//! The cluster's image configuration, as the original's container runtime config controller reads
//! it to write each pool's registries files (`/etc/containers/registries.conf`, `policy.json`,
//! the search registries drop-in):
//!
//! * `config.openshift.io/v1` [`Image`] (the singleton `cluster`): `spec.registrySources`.
//! * `config.openshift.io/v1` [`ImageDigestMirrorSet`] and [`ImageTagMirrorSet`]: mirrors for
//!   pulls by digest and by tag.
//! * `operator.openshift.io/v1alpha1` [`ImageContentSourcePolicy`]: the older form of digest
//!   mirrors.
//!
//! These kinds belong to the cluster (openshift/api), not to mco: OpenShift serves them; their
//! CRDs among [`crate::crds`] are for other clusters (`deploy/components/image-config`). Lists keep Go's nil/empty distinction (`None` vs `Some(vec![])`): the
//! original writes registries.conf for an Image whose `insecureRegistries` is `[]` and not for
//! one without the field.

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The name of the one Image config the controller reads.
pub const IMAGE_CONFIG_NAME: &str = "cluster";

/// Cluster-wide image registry settings (only `cluster` is read).
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "config.openshift.io",
    version = "v1",
    kind = "Image",
    plural = "images",
    status = "ImageStatus",
    derive = "PartialEq",
    derive = "Default",
    doc = "Image governs policies related to imagestream imports and runtime configuration for external registries."
)]
#[serde(rename_all = "camelCase")]
pub struct ImageSpec {
    /// Registries image streams may import from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allowed_registries_for_import: Option<Vec<RegistryLocation>>,

    /// Extra hostnames of the internal registry.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub external_registry_hostnames: Option<Vec<String>>,

    /// ConfigMap (in `openshift-config`) of extra CAs trusted for registries.
    #[serde(rename = "additionalTrustedCA", default, skip_serializing_if = "Option::is_none")]
    pub additional_trusted_ca: Option<ConfigMapNameReference>,

    /// How the container runtime treats individual registries.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub registry_sources: Option<RegistrySources>,

    /// `Legacy` or `PreserveOriginal`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_stream_import_mode: Option<String>,
}

/// Observed state of the Image config.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ImageStatus {
    /// Where the internal registry is reachable inside the cluster.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub internal_registry_hostname: Option<String>,

    /// Where the internal registry is reachable from outside.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub external_registry_hostnames: Option<Vec<String>>,

    /// The effective image stream import mode.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_stream_import_mode: Option<String>,
}

/// A registry image streams may import from.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RegistryLocation {
    /// Registry domain, with `*.` for subdomains.
    pub domain_name: String,
    /// Whether the registry is reached without TLS verification.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub insecure: Option<bool>,
}

/// A ConfigMap by name.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct ConfigMapNameReference {
    /// `metadata.name` of the ConfigMap.
    pub name: String,
}

/// Registry scopes (`host[:port][/namespace...]`, or `*.domain`) for the container runtime.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RegistrySources {
    /// Reached without TLS verification (also over plain HTTP).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub insecure_registries: Option<Vec<String>>,

    /// Never pulled from. Exclusive with `allowedRegistries`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blocked_registries: Option<Vec<String>>,

    /// The only ones pulled from. Exclusive with `blockedRegistries`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allowed_registries: Option<Vec<String>>,

    /// Where short (unqualified) image names are searched, in order.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub container_runtime_search_registries: Option<Vec<String>>,
}

/// Whether a source may still be contacted when it has mirrors.
pub mod mirror_source_policy {
    /// Only the mirrors are tried.
    pub const NEVER_CONTACT_SOURCE: &str = "NeverContactSource";
    /// The source is tried after the mirrors (the default).
    pub const ALLOW_CONTACTING_SOURCE: &str = "AllowContactingSource";
}

/// Mirrors for images pulled by digest.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "config.openshift.io",
    version = "v1",
    kind = "ImageDigestMirrorSet",
    plural = "imagedigestmirrorsets",
    shortname = "idms",
    status = "MirrorSetStatus",
    derive = "PartialEq",
    derive = "Default",
    doc = "ImageDigestMirrorSet holds cluster-wide information about how to handle registry mirror rules on using digest pull specification."
)]
#[serde(rename_all = "camelCase")]
pub struct ImageDigestMirrorSetSpec {
    /// Sources and their mirrors, in order of preference.
    #[serde(default)]
    pub image_digest_mirrors: Vec<ImageMirrors>,
}

/// Mirrors for images pulled by tag.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "config.openshift.io",
    version = "v1",
    kind = "ImageTagMirrorSet",
    plural = "imagetagmirrorsets",
    shortname = "itms",
    status = "MirrorSetStatus",
    derive = "PartialEq",
    derive = "Default",
    doc = "ImageTagMirrorSet holds cluster-wide information about how to handle registry mirror rules on using tag pull specification."
)]
#[serde(rename_all = "camelCase")]
pub struct ImageTagMirrorSetSpec {
    /// Sources and their mirrors, in order of preference.
    #[serde(default)]
    pub image_tag_mirrors: Vec<ImageMirrors>,
}

/// The (empty) status of ImageDigestMirrorSet, ImageTagMirrorSet and ImageContentSourcePolicy.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct MirrorSetStatus {}

/// One source and its mirrors (upstream's `ImageDigestMirrors` and `ImageTagMirrors`, which are
/// the same fields).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ImageMirrors {
    /// The repository or registry mirrored (`*.domain` for subdomains).
    pub source: String,

    /// Mirrors, most preferred first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mirrors: Option<Vec<String>>,

    /// `NeverContactSource` or `AllowContactingSource` (unset: allow).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mirror_source_policy: Option<String>,
}

/// Digest mirrors, the form before ImageDigestMirrorSet.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "operator.openshift.io",
    version = "v1alpha1",
    kind = "ImageContentSourcePolicy",
    plural = "imagecontentsourcepolicies",
    status = "MirrorSetStatus",
    derive = "PartialEq",
    derive = "Default",
    doc = "ImageContentSourcePolicy holds cluster-wide information about how to handle registry mirror rules."
)]
#[serde(rename_all = "camelCase")]
pub struct ImageContentSourcePolicySpec {
    /// Sources and their mirrors, in order of preference.
    #[serde(default)]
    pub repository_digest_mirrors: Vec<RepositoryDigestMirrors>,
}

/// One source and its digest mirrors.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct RepositoryDigestMirrors {
    /// The repository mirrored.
    pub source: String,
    /// Mirrors, most preferred first.
    #[serde(default)]
    pub mirrors: Vec<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_list_is_not_an_absent_one() {
        let image: Image = serde_json::from_str(
            r#"{"apiVersion":"config.openshift.io/v1","kind":"Image","metadata":{"name":"cluster"},
                "spec":{"registrySources":{"insecureRegistries":[],"blockedRegistries":["b.io"]}}}"#,
        )
        .unwrap();
        let sources = image.spec.registry_sources.unwrap();
        assert_eq!(sources.insecure_registries, Some(vec![]));
        assert_eq!(sources.blocked_registries, Some(vec!["b.io".to_string()]));
        assert_eq!(sources.allowed_registries, None);
    }

    #[test]
    fn mirror_sets_read_their_upstream_fields() {
        let idms: ImageDigestMirrorSet = serde_json::from_str(
            r#"{"apiVersion":"config.openshift.io/v1","kind":"ImageDigestMirrorSet","metadata":{"name":"a"},
                "spec":{"imageDigestMirrors":[{"source":"q.io/a","mirrors":["m.io/a"],"mirrorSourcePolicy":"NeverContactSource"}]}}"#,
        )
        .unwrap();
        let set = &idms.spec.image_digest_mirrors[0];
        assert_eq!(set.mirror_source_policy.as_deref(), Some(mirror_source_policy::NEVER_CONTACT_SOURCE));
        let icsp: ImageContentSourcePolicy = serde_json::from_str(
            r#"{"apiVersion":"operator.openshift.io/v1alpha1","kind":"ImageContentSourcePolicy","metadata":{"name":"a"},
                "spec":{"repositoryDigestMirrors":[{"source":"q.io/a","mirrors":["m.io/a"]}]}}"#,
        )
        .unwrap();
        assert_eq!(icsp.spec.repository_digest_mirrors[0].mirrors, ["m.io/a"]);
    }
}
