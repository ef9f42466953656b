//! CoreOS stream metadata: the boot image each platform and architecture should use.
//!
//! The standard parts (architectures, disk artifacts, AWS regions, the GCP image) are read with
//! the `coreos-stream-metadata` crate. It does not know two things the original reads through
//! `stream-metadata-go`: the `release` of each artifact platform (the vSphere OVA release) and the
//! RHCOS extensions (`rhel-coreos-extensions.marketplace.azure`), so those are read from the same
//! JSON by the small [`Overlay`] types here.

use std::collections::{BTreeSet, HashMap};

use serde::Deserialize;
use serde_json::Value;

use crate::arch::Arch;

/// Why a stream could not be read or does not hold a boot image that was asked for.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StreamError {
    #[error("stream metadata is not valid: {0}")]
    Malformed(String),
    #[error("stream {stream} has no architecture {arch}")]
    MissingArchitecture { stream: String, arch: &'static str },
    #[error("stream {stream} has no AWS image for architecture {arch} in region {region}")]
    MissingAwsRegion { stream: String, arch: &'static str, region: String },
    #[error("stream {stream} has no GCP image for architecture {arch}")]
    MissingGcpImage { stream: String, arch: &'static str },
    #[error("stream {stream} has no Azure marketplace images for architecture {arch}")]
    MissingAzureMarketplace { stream: String, arch: &'static str },
    #[error("stream {stream} has no Azure marketplace {variant} HyperV {generation} image for architecture {arch}")]
    MissingAzureImage { stream: String, arch: &'static str, variant: AzureVariant, generation: HyperVGen },
    #[error("stream {stream} has no vmware release for architecture {arch}")]
    MissingVmwareRelease { stream: String, arch: &'static str },
    #[error("stream {stream} has no vmware OVA for architecture {arch}")]
    MissingVmwareOva { stream: String, arch: &'static str },
}

/// A parsed stream.
#[derive(Debug)]
pub struct Stream {
    inner: coreos_stream_metadata::Stream,
    overlay: Overlay,
}

// The parts `coreos-stream-metadata` does not model.
#[derive(Debug, Default, Deserialize)]
struct Overlay {
    #[serde(default)]
    architectures: HashMap<String, ArchOverlay>,
}

#[derive(Debug, Default, Deserialize)]
struct ArchOverlay {
    #[serde(default)]
    artifacts: HashMap<String, ArtifactRelease>,
    #[serde(default, rename = "rhel-coreos-extensions")]
    extensions: Option<Extensions>,
}

#[derive(Debug, Default, Deserialize)]
struct ArtifactRelease {
    #[serde(default)]
    release: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
struct Extensions {
    #[serde(default)]
    marketplace: Option<Marketplace>,
}

#[derive(Debug, Default, Deserialize)]
struct Marketplace {
    #[serde(default)]
    azure: Option<AzureMarketplace>,
}

#[derive(Debug, Default, Deserialize)]
struct AzureMarketplace {
    #[serde(default, rename = "no-purchase-plan")]
    no_purchase_plan: Option<AzureMarketplaceImages>,
    #[serde(default)]
    ocp: Option<AzureMarketplaceImages>,
    #[serde(default)]
    opp: Option<AzureMarketplaceImages>,
    #[serde(default)]
    oke: Option<AzureMarketplaceImages>,
    #[serde(default, rename = "ocp-emea")]
    ocp_emea: Option<AzureMarketplaceImages>,
    #[serde(default, rename = "opp-emea")]
    opp_emea: Option<AzureMarketplaceImages>,
    #[serde(default, rename = "oke-emea")]
    oke_emea: Option<AzureMarketplaceImages>,
}

#[derive(Debug, Default, Deserialize)]
struct AzureMarketplaceImages {
    #[serde(default, rename = "hyperVGen1")]
    gen1: Option<AzureMarketplaceImage>,
    #[serde(default, rename = "hyperVGen2")]
    gen2: Option<AzureMarketplaceImage>,
}

/// An Azure marketplace image as the stream lists it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct AzureMarketplaceImage {
    pub publisher: String,
    pub offer: String,
    pub sku: String,
    pub version: String,
}

/// The marketplace offer a MachineSet's Azure image belongs to (`marketplace.azure.<key>`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AzureVariant {
    NoPurchasePlan,
    Ocp,
    Opp,
    Oke,
    OcpEmea,
    OppEmea,
    OkeEmea,
}

impl AzureVariant {
    /// Paid variants boot with a purchase plan (`MarketplaceWithPlan`).
    pub fn is_paid(self) -> bool {
        self != AzureVariant::NoPurchasePlan
    }

    /// The key of the variant in the stream.
    pub fn stream_key(self) -> &'static str {
        match self {
            AzureVariant::NoPurchasePlan => "no-purchase-plan",
            AzureVariant::Ocp => "ocp",
            AzureVariant::Opp => "opp",
            AzureVariant::Oke => "oke",
            AzureVariant::OcpEmea => "ocp-emea",
            AzureVariant::OppEmea => "opp-emea",
            AzureVariant::OkeEmea => "oke-emea",
        }
    }
}

impl std::fmt::Display for AzureVariant {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.stream_key())
    }
}

/// Azure VM generation of an image.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HyperVGen {
    Gen1,
    Gen2,
}

impl std::fmt::Display for HyperVGen {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            HyperVGen::Gen1 => "Gen1",
            HyperVGen::Gen2 => "Gen2",
        })
    }
}

/// An image in one AWS region.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AwsImage {
    pub ami: String,
    pub release: String,
}

/// The vSphere OVA a template must be created from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VmwareOva {
    pub release: String,
    pub location: String,
    pub sha256: String,
}

/// Prefix of the images Red Hat publishes on GCP; any other image is a custom one.
pub const GCP_RHCOS_IMAGE_PREFIX: &str = "projects/rhcos-cloud/global/images/";

impl Stream {
    /// Parses stream JSON.
    pub fn parse(json: &[u8]) -> Result<Stream, StreamError> {
        let value: Value = serde_json::from_slice(json).map_err(|e| StreamError::Malformed(e.to_string()))?;
        if !value.is_object() {
            return Err(StreamError::Malformed("not a JSON object".to_string()));
        }
        let inner =
            coreos_stream_metadata::Stream::deserialize(&value).map_err(|e| StreamError::Malformed(e.to_string()))?;
        let overlay = Overlay::deserialize(&value).map_err(|e| StreamError::Malformed(e.to_string()))?;
        if inner.architectures.is_empty() {
            return Err(StreamError::Malformed(format!("stream {} lists no architectures", inner.stream)));
        }
        Ok(Stream { inner, overlay })
    }

    /// The stream's name, e.g. `rhcos-4.16`.
    pub fn name(&self) -> &str {
        &self.inner.stream
    }

    fn arch(&self, arch: Arch) -> Result<&coreos_stream_metadata::Arch, StreamError> {
        self.inner
            .architectures
            .get(arch.rpm())
            .ok_or_else(|| StreamError::MissingArchitecture { stream: self.name().to_string(), arch: arch.rpm() })
    }

    /// The AMI for `region` (`images.aws.regions.<region>`).
    pub fn aws_image(&self, arch: Arch, region: &str) -> Result<AwsImage, StreamError> {
        self.arch(arch)?
            .images
            .as_ref()
            .and_then(|images| images.aws.as_ref())
            .and_then(|aws| aws.regions.get(region))
            .map(|image| AwsImage { ami: image.image.clone(), release: image.release.clone() })
            .ok_or_else(|| StreamError::MissingAwsRegion {
                stream: self.name().to_string(),
                arch: arch.rpm(),
                region: region.to_string(),
            })
    }

    /// Every AMI the stream lists, in any architecture and region: all of them are Red Hat's.
    pub fn all_amis(&self) -> BTreeSet<&str> {
        self.inner
            .architectures
            .values()
            .filter_map(|a| a.images.as_ref()?.aws.as_ref())
            .flat_map(|aws| aws.regions.values().map(|r| r.image.as_str()))
            .collect()
    }

    /// `projects/<project>/global/images/<name>` of `images.gcp`.
    pub fn gcp_image(&self, arch: Arch) -> Result<String, StreamError> {
        let gcp = self
            .arch(arch)?
            .images
            .as_ref()
            .and_then(|images| images.gcp.as_ref())
            .ok_or_else(|| StreamError::MissingGcpImage { stream: self.name().to_string(), arch: arch.rpm() })?;
        Ok(format!("projects/{}/global/images/{}", gcp.project, gcp.name))
    }

    /// The marketplace image of `variant` and `generation`. `Ok(None)` when the stream has no
    /// Azure marketplace section at all for the architecture (the original skips such machine
    /// sets rather than failing).
    pub fn azure_image(
        &self,
        arch: Arch,
        variant: AzureVariant,
        generation: HyperVGen,
    ) -> Result<Option<AzureMarketplaceImage>, StreamError> {
        self.arch(arch)?;
        let Some(azure) = self
            .overlay
            .architectures
            .get(arch.rpm())
            .and_then(|a| a.extensions.as_ref()?.marketplace.as_ref()?.azure.as_ref())
        else {
            return Ok(None);
        };
        let images = match variant {
            AzureVariant::NoPurchasePlan => &azure.no_purchase_plan,
            AzureVariant::Ocp => &azure.ocp,
            AzureVariant::Opp => &azure.opp,
            AzureVariant::Oke => &azure.oke,
            AzureVariant::OcpEmea => &azure.ocp_emea,
            AzureVariant::OppEmea => &azure.opp_emea,
            AzureVariant::OkeEmea => &azure.oke_emea,
        };
        let image = images.as_ref().and_then(|i| match generation {
            HyperVGen::Gen1 => i.gen1.as_ref(),
            HyperVGen::Gen2 => i.gen2.as_ref(),
        });
        image.cloned().map(Some).ok_or_else(|| StreamError::MissingAzureImage {
            stream: self.name().to_string(),
            arch: arch.rpm(),
            variant,
            generation,
        })
    }

    /// The release of the `vmware` artifacts and their OVA.
    pub fn vmware_ova(&self, arch: Arch) -> Result<VmwareOva, StreamError> {
        let missing_release =
            || StreamError::MissingVmwareRelease { stream: self.name().to_string(), arch: arch.rpm() };
        self.arch(arch)?;
        let release = self
            .overlay
            .architectures
            .get(arch.rpm())
            .and_then(|a| a.artifacts.get("vmware")?.release.clone())
            .filter(|r| !r.is_empty())
            .ok_or_else(missing_release)?;
        let disk = self
            .inner
            .query_disk(arch.rpm(), "vmware", "ova")
            .ok_or_else(|| StreamError::MissingVmwareOva { stream: self.name().to_string(), arch: arch.rpm() })?;
        Ok(VmwareOva { release, location: disk.location.clone(), sha256: disk.sha256.clone() })
    }
}
