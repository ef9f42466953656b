//! PinnedImageSet: images the nodes of the pools that list the set pull and keep from garbage
//! collection.

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A set of images, by digest, that CRI-O pins and pre-loads on the nodes of the pools naming it
/// in `spec.pinnedImageSets`.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "machineconfiguration.openshift.io",
    version = "v1",
    kind = "PinnedImageSet",
    plural = "pinnedimagesets",
    derive = "PartialEq",
    derive = "Default",
    label("openshift.io/operator-managed", ""),
    doc = "PinnedImageSet describes a set of images that should be pinned by CRI-O and pulled to the nodes which are members of the declared MachineConfigPools."
)]
#[serde(rename_all = "camelCase")]
pub struct PinnedImageSetSpec {
    /// The images (1 to 500), unique by name.
    #[schemars(length(min = 1, max = 500), extend(
        "x-kubernetes-list-type" = "map",
        "x-kubernetes-list-map-keys" = ["name"],
    ))]
    pub pinned_images: Vec<PinnedImageRef>,
}

/// One image of a PinnedImageSet.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct PinnedImageRef {
    /// `host[:port][/namespace]/name@sha256:<64 hex>`, at most 447 characters.
    #[schemars(schema_with = "crate::schema::image_digest")]
    pub name: String,
}
