//! OSImageStream: the OS image streams (e.g. RHEL 9 and RHEL 10 based) a cluster's pools can run,
//! a singleton named `cluster`.

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::crd::UpstreamSchema;

/// The streams of base OS images available to the pools, and the default one.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "machineconfiguration.openshift.io",
    version = "v1",
    kind = "OSImageStream",
    plural = "osimagestreams",
    status = "OSImageStreamStatus",
    derive = "PartialEq",
    derive = "Default",
    label("openshift.io/operator-managed", ""),
    doc = "OSImageStream describes a set of streams and associated images available for the MachineConfigPools to be used as base OS images. The resource is a singleton named \"cluster\"."
)]
#[serde(rename_all = "camelCase")]
pub struct OSImageStreamSpec {
    /// Stream of the pools that name none; must be one of `status.availableStreams` once the
    /// operator has filled it in.
    #[schemars(schema_with = "crate::schema::dns1123_subdomain")]
    pub default_stream: String,
}

/// The streams the release offers, filled in by the operator.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [{
    "rule": "self.defaultStream in self.availableStreams.map(s, s.name)",
    "message": "defaultStream must reference a stream name from availableStreams",
}]))]
pub struct OSImageStreamStatus {
    /// The streams (1 to 100), unique by name.
    #[schemars(length(min = 1, max = 100), extend(
        "x-kubernetes-list-type" = "map",
        "x-kubernetes-list-map-keys" = ["name"],
    ))]
    pub available_streams: Vec<OSImageStreamSet>,

    /// Stream of the pools that name none.
    #[schemars(schema_with = "crate::schema::dns1123_subdomain")]
    pub default_stream: String,
}

/// One stream: its OS image and extensions image, by digest.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct OSImageStreamSet {
    /// Stream name (from the images' OCI label), an RFC 1123 subdomain.
    #[schemars(schema_with = "crate::schema::dns1123_subdomain")]
    pub name: String,

    /// The stream's base OS image, by digest.
    #[schemars(schema_with = "crate::schema::image_digest")]
    pub os_image: String,

    /// The stream's extensions image, by digest.
    #[schemars(schema_with = "crate::schema::image_digest")]
    pub os_extensions_image: String,
}

impl OSImageStream {
    /// The stream whose OS image is `image` (exactly), if any.
    pub fn stream_of(&self, image: &str) -> Option<&OSImageStreamSet> {
        self.status.as_ref()?.available_streams.iter().find(|set| set.os_image == image)
    }
}

/// Upstream's CEL rules on the OSImageStream object itself.
pub(crate) const OS_IMAGE_STREAM_SCHEMA: UpstreamSchema = UpstreamSchema {
    nullable: &[],
    root_rules: &[
        ("self.metadata.name == 'cluster'", "osimagestream is a singleton, .metadata.name must be 'cluster'"),
        (
            "self.spec == oldSelf.spec || !has(self.status) || self.spec.defaultStream in self.status.availableStreams.map(s, s.name)",
            "spec.defaultStream must reference an existing stream name from status.availableStreams",
        ),
    ],
};
