use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::constants::PINNED_OS_IMAGE_ANNOTATION;

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

/// Why a config's OS image cannot be deployed as it stands.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PinError {
    /// A [`PINNED_OS_IMAGE_ANNOTATION`] that cannot stand for the config's `osImageURL`.
    #[error(
        "MachineConfig {config}: annotation {PINNED_OS_IMAGE_ANNOTATION} {pinned:?} does not pin osImageURL {url:?}: it \
         must be that repository @sha256:<64 hex digits>, or the osImageURL itself when that is by digest"
    )]
    Mismatch { config: String, url: String, pinned: String },
    /// A tag the controller has not resolved: nodes of a pool deploy one digest, so a tag that
    /// moves cannot split the pool.
    #[error(
        "MachineConfig {config} names its OS image by tag ({url}) and has no digest pinned by the controller \
         ({PINNED_OS_IMAGE_ANNOTATION}): not deploying it"
    )]
    Unpinned { config: String, url: String },
}

impl MachineConfig {
    /// A MachineConfig labelled with its pool's role, holding `config` (upstream's
    /// `MachineConfigFromRawIgnConfig`): what generating controllers write.
    pub fn for_pool(name: &str, pool: &str, config: Option<Value>) -> MachineConfig {
        MachineConfig {
            metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                name: Some(name.to_string()),
                labels: Some(std::collections::BTreeMap::from([(
                    crate::constants::MACHINE_CONFIG_ROLE_LABEL.to_string(),
                    pool.to_string(),
                )])),
                ..Default::default()
            },
            spec: MachineConfigSpec { config, ..Default::default() },
        }
    }

    /// The image a node deploys for this config: its `osImageURL`, or the digest the controller
    /// resolved it to ([`PINNED_OS_IMAGE_ANNOTATION`]) so that every node gets the same image
    /// even if a tag moves. A pin of another repository, or not by digest, is refused, and so is
    /// a registry tag without a pin (an OCI directory, `oci:…`, is the node's own).
    pub fn deployed_os_image(&self) -> Result<&str, PinError> {
        let url = &self.spec.os_image_url;
        let config = || self.metadata.name.clone().unwrap_or_default();
        let Some(pinned) = self.metadata.annotations.as_ref().and_then(|a| a.get(PINNED_OS_IMAGE_ANNOTATION)) else {
            if url.is_empty() || url.starts_with("oci:") || is_by_digest(url) {
                return Ok(url);
            }
            return Err(PinError::Unpinned { config: config(), url: url.clone() });
        };
        if pin_fits(url, pinned) {
            Ok(pinned)
        } else {
            Err(PinError::Mismatch { config: config(), url: url.clone(), pinned: pinned.clone() })
        }
    }

    /// This config with [`Self::deployed_os_image`] as its `osImageURL`: what nodes apply.
    pub fn with_pinned_os_image(mut self) -> Result<Self, PinError> {
        let image = self.deployed_os_image()?.to_string();
        self.spec.os_image_url = image;
        Ok(self)
    }
}

/// `HOST/NAME` of an image pull spec `HOST/NAME[:TAG][@DIGEST]` (a port's colon is not a tag's).
pub fn image_repository(spec: &str) -> &str {
    let name = spec.split('@').next().unwrap_or_default();
    let last = name.rfind('/').map_or(0, |slash| slash + 1);
    match name[last..].find(':') {
        Some(colon) => &name[..last + colon],
        None => name,
    }
}

/// Whether `pinned` may stand for the OS image `url`: that repository `@sha256:<64 hex digits>`,
/// or `url` itself when it is by digest.
pub fn pin_fits(url: &str, pinned: &str) -> bool {
    match pinned.split_once("@sha256:") {
        Some(_) if is_by_digest(url) => pinned == url,
        Some((repository, hex)) => repository == image_repository(url) && is_sha256_hex(hex),
        None => false,
    }
}

/// Whether `hex` is a whole sha256 digest: 64 lower-case hex digits.
pub fn is_sha256_hex(hex: &str) -> bool {
    hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// Is `spec` pinned to a digest (`…@sha256:…`) rather than named by a tag?
pub fn is_by_digest(spec: &str) -> bool {
    spec.contains("@sha256:")
}

#[cfg(test)]
mod pin_tests {
    use super::*;

    const DIGEST: &str = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    fn config(url: &str, pinned: Option<&str>) -> MachineConfig {
        let mut mc = MachineConfig::new(
            "rendered-worker-1",
            MachineConfigSpec { os_image_url: url.into(), ..Default::default() },
        );
        if let Some(pinned) = pinned {
            mc.metadata.annotations = Some([(PINNED_OS_IMAGE_ANNOTATION.to_string(), pinned.to_string())].into());
        }
        mc
    }

    #[test]
    fn repositories_of_pull_specs() {
        for (spec, repository) in [
            ("quay.io/os:latest", "quay.io/os"),
            ("127.0.0.1:5000/mco/os:9.6", "127.0.0.1:5000/mco/os"),
            ("127.0.0.1:5000/mco/os", "127.0.0.1:5000/mco/os"),
            (&format!("127.0.0.1:5000/mco/os@{DIGEST}"), "127.0.0.1:5000/mco/os"),
            (&format!("quay.io/os:tag@{DIGEST}"), "quay.io/os"),
        ] {
            assert_eq!(image_repository(spec), repository, "{spec}");
        }
        assert!(is_by_digest(&format!("quay.io/os@{DIGEST}")));
        assert!(!is_by_digest("quay.io/os:latest"));
    }

    #[test]
    fn the_pin_replaces_the_url_only_for_the_same_repository_by_digest() {
        let pinned = format!("127.0.0.1:5000/mco/os@{DIGEST}");
        let mc = config("127.0.0.1:5000/mco/os:latest", Some(&pinned));
        assert_eq!(mc.deployed_os_image(), Ok(pinned.as_str()));
        assert_eq!(mc.with_pinned_os_image().unwrap().spec.os_image_url, pinned);
        assert_eq!(
            config("quay.io/os:latest", None).deployed_os_image().unwrap_err().to_string(),
            "MachineConfig rendered-worker-1 names its OS image by tag (quay.io/os:latest) and has no digest pinned by \
             the controller (mco.dev/pinned-os-image): not deploying it"
        );
        for own in ["", "oci:/var/images/os:1", &format!("quay.io/os@{DIGEST}")] {
            assert_eq!(config(own, None).deployed_os_image(), Ok(own));
        }

        for bad in [
            format!("quay.io/other@{DIGEST}"),
            "127.0.0.1:5000/mco/os:other".to_string(),
            "127.0.0.1:5000/mco/os@sha256:abc".to_string(),
            format!("127.0.0.1:5000/mco/os@{}", DIGEST.to_uppercase().replace("SHA256", "sha256")),
        ] {
            let err = config("127.0.0.1:5000/mco/os:latest", Some(&bad)).deployed_os_image().unwrap_err();
            assert_eq!(
                err.to_string(),
                format!(
                    "MachineConfig rendered-worker-1: annotation mco.dev/pinned-os-image {bad:?} does not pin osImageURL \
                     \"127.0.0.1:5000/mco/os:latest\": it must be that repository @sha256:<64 hex digits>, or the \
                     osImageURL itself when that is by digest"
                )
            );
        }
        // An osImageURL by digest is its own pin: no other digest stands for it.
        let by_digest = format!("127.0.0.1:5000/mco/os@{DIGEST}");
        assert_eq!(config(&by_digest, Some(&by_digest)).deployed_os_image(), Ok(by_digest.as_str()));
        let other = format!("127.0.0.1:5000/mco/os@sha256:{}", "f".repeat(64));
        assert!(config(&by_digest, Some(&other)).deployed_os_image().is_err());
    }
}
