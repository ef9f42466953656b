//! The cluster's platform: a minimal `config.openshift.io/v1` Infrastructure and the boot image
//! support matrix of the original's `CheckBootImagePlatform`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// `config.openshift.io/v1` Infrastructure, only the fields boot image management reads; other
/// keys are kept in `extra` maps.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Infrastructure {
    #[serde(default)]
    pub api_version: String,
    #[serde(default)]
    pub kind: String,
    #[serde(default)]
    pub spec: InfrastructureSpec,
    #[serde(default)]
    pub status: InfrastructureStatus,
    #[serde(flatten)]
    pub extra: BTreeMap<String, Value>,
}

/// `spec` of an Infrastructure.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InfrastructureSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub platform_spec: Option<PlatformSpec>,
    #[serde(flatten)]
    pub extra: BTreeMap<String, Value>,
}

/// `spec.platformSpec`: the vSphere part holds the vCenters and failure domains.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PlatformSpec {
    #[serde(default, rename = "type")]
    pub type_: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vsphere: Option<Value>,
    #[serde(flatten)]
    pub extra: BTreeMap<String, Value>,
}

/// `status` of an Infrastructure.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InfrastructureStatus {
    /// `HighlyAvailable`, `SingleReplica`, `External`, ...
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub control_plane_topology: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub platform_status: Option<PlatformStatus>,
    #[serde(flatten)]
    pub extra: BTreeMap<String, Value>,
}

/// `status.platformStatus`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PlatformStatus {
    /// `AWS`, `GCP`, `Azure`, `VSphere`, `BareMetal`, ...
    #[serde(default, rename = "type")]
    pub type_: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub azure: Option<AzurePlatformStatus>,
    #[serde(flatten)]
    pub extra: BTreeMap<String, Value>,
}

/// `status.platformStatus.azure`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AzurePlatformStatus {
    /// `AzurePublicCloud`, `AzureUSGovernmentCloud`, `AzureStackCloud`, ...
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cloud_name: Option<String>,
    #[serde(flatten)]
    pub extra: BTreeMap<String, Value>,
}

/// A platform whose MachineSets have boot images this crate knows how to update.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Platform {
    Aws,
    Gcp,
    Azure,
    VSphere,
}

impl Platform {
    /// The `platformStatus.type` value.
    pub fn infrastructure_type(self) -> &'static str {
        match self {
            Platform::Aws => "AWS",
            Platform::Gcp => "GCP",
            Platform::Azure => "Azure",
            Platform::VSphere => "VSphere",
        }
    }

    /// The `kind` of the platform's MachineSet provider spec.
    pub fn provider_kind(self) -> &'static str {
        match self {
            Platform::Aws => "AWSMachineProviderConfig",
            Platform::Gcp => "GCPMachineProviderSpec",
            Platform::Azure => "AzureMachineProviderSpec",
            Platform::VSphere => "VSphereMachineProviderSpec",
        }
    }

    /// The platform whose provider spec has this `kind`.
    pub fn from_provider_kind(kind: &str) -> Option<Platform> {
        [Platform::Aws, Platform::Gcp, Platform::Azure, Platform::VSphere]
            .into_iter()
            .find(|p| p.provider_kind() == kind)
    }
}

/// What the original's `CheckBootImagePlatform` answers for an Infrastructure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Support {
    /// Boot images of MachineSets are managed at all (and the controller runs).
    pub supported: bool,
    /// ControlPlaneMachineSets can be managed too.
    pub cpms_supported: bool,
    /// Managed unless the admin opts out (the code defaults every supported platform on).
    pub default_on: bool,
    /// The platform, when supported.
    pub platform: Option<Platform>,
}

impl Infrastructure {
    /// `status.platformStatus.type`, "" when absent.
    pub fn platform_type(&self) -> &str {
        self.status.platform_status.as_ref().map_or("", |p| p.type_.as_str())
    }

    /// The boot image support of this cluster's platform.
    pub fn boot_image_support(&self) -> Support {
        let unsupported = Support { supported: false, cpms_supported: false, default_on: false, platform: None };
        let platform = match self.platform_type() {
            "AWS" => Platform::Aws,
            "GCP" => Platform::Gcp,
            "Azure" => {
                let cloud = self.status.platform_status.as_ref().and_then(|p| p.azure.as_ref()?.cloud_name.as_deref());
                if cloud == Some("AzureStackCloud") {
                    return unsupported;
                }
                Platform::Azure
            }
            "VSphere" => Platform::VSphere,
            _ => return unsupported,
        };
        Support {
            supported: true,
            cpms_supported: platform != Platform::VSphere,
            default_on: true,
            platform: Some(platform),
        }
    }

    /// `spec.platformSpec.vsphere` is set (the original does nothing on vSphere without it).
    pub fn has_vsphere_platform_spec(&self) -> bool {
        self.spec.platform_spec.as_ref().and_then(|p| p.vsphere.as_ref()).is_some_and(|v| !v.is_null())
    }

    /// The control plane runs on a single node.
    pub fn is_single_replica(&self) -> bool {
        self.status.control_plane_topology.as_deref() == Some("SingleReplica")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn infra(yaml: &str) -> Infrastructure {
        serde_yaml::from_str(yaml).unwrap()
    }

    #[test]
    fn support_matrix() {
        let cases = [
            ("status: {platformStatus: {type: AWS}}", (true, true, true, Some(Platform::Aws))),
            ("status: {platformStatus: {type: GCP}}", (true, true, true, Some(Platform::Gcp))),
            (
                "status: {platformStatus: {type: Azure, azure: {cloudName: AzurePublicCloud}}}",
                (true, true, true, Some(Platform::Azure)),
            ),
            ("status: {platformStatus: {type: Azure}}", (true, true, true, Some(Platform::Azure))),
            (
                "status: {platformStatus: {type: Azure, azure: {cloudName: AzureStackCloud}}}",
                (false, false, false, None),
            ),
            ("status: {platformStatus: {type: VSphere}}", (true, false, true, Some(Platform::VSphere))),
            ("status: {platformStatus: {type: BareMetal}}", (false, false, false, None)),
            ("status: {platformStatus: {type: OpenStack}}", (false, false, false, None)),
            ("status: {platformStatus: {type: Nutanix}}", (false, false, false, None)),
            ("status: {}", (false, false, false, None)),
            ("{}", (false, false, false, None)),
        ];
        for (yaml, (supported, cpms_supported, default_on, platform)) in cases {
            let want = Support { supported, cpms_supported, default_on, platform };
            assert_eq!(infra(yaml).boot_image_support(), want, "{yaml}");
        }
    }

    #[test]
    fn vsphere_platform_spec_and_topology() {
        assert!(!infra("spec: {platformSpec: {type: VSphere}}").has_vsphere_platform_spec());
        assert!(!infra("spec: {platformSpec: {type: VSphere, vsphere: null}}").has_vsphere_platform_spec());
        assert!(infra("spec: {platformSpec: {type: VSphere, vsphere: {}}}").has_vsphere_platform_spec());
        assert!(infra("status: {controlPlaneTopology: SingleReplica}").is_single_replica());
        assert!(!infra("status: {controlPlaneTopology: HighlyAvailable}").is_single_replica());
    }

    #[test]
    fn provider_kinds_round_trip() {
        for p in [Platform::Aws, Platform::Gcp, Platform::Azure, Platform::VSphere] {
            assert_eq!(Platform::from_provider_kind(p.provider_kind()), Some(p));
        }
        assert_eq!(Platform::from_provider_kind("OpenstackProviderSpec"), None);
    }
}
