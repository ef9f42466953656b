//! `config.openshift.io/v1` types embedded in machine-config kinds: the TLS security profile a
//! KubeletConfig (and the cluster's APIServer) sets, with the fixed profiles upstream defines.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// TLS settings: one of the fixed profiles, or a custom one.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TlsSecurityProfile {
    /// `Old`, `Intermediate`, `Modern` or `Custom`.
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub type_: Option<TlsProfileType>,

    /// Marks the `Old` profile (no settings of its own).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub old: Option<EmptyProfile>,

    /// Marks the `Intermediate` profile (no settings of its own).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub intermediate: Option<EmptyProfile>,

    /// Marks the `Modern` profile (no settings of its own).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub modern: Option<EmptyProfile>,

    /// The settings of a `Custom` profile.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub custom: Option<TlsProfileSpec>,
}

/// The body of a fixed profile: an empty object.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct EmptyProfile {}

/// The fixed profiles and `Custom`.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum TlsProfileType {
    /// Mozilla "old": very old clients, last resort.
    Old,
    /// Mozilla "intermediate": the default.
    Intermediate,
    /// Mozilla "modern": TLS 1.3 only.
    Modern,
    /// The settings in `custom`.
    Custom,
}

/// Ciphers and minimum version of a profile.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TlsProfileSpec {
    /// Cipher names in OpenSSL spelling (`ECDHE-RSA-AES128-GCM-SHA256`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-list-type" = "atomic"))]
    pub ciphers: Option<Vec<String>>,

    /// Minimum TLS version.
    #[serde(rename = "minTLSVersion", default, skip_serializing_if = "Option::is_none")]
    pub min_tls_version: Option<TlsProtocolVersion>,
}

/// TLS protocol versions, as the profiles name them.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum TlsProtocolVersion {
    /// TLS 1.0.
    VersionTLS10,
    /// TLS 1.1.
    VersionTLS11,
    /// TLS 1.2.
    VersionTLS12,
    /// TLS 1.3.
    VersionTLS13,
}

impl TlsProtocolVersion {
    /// The name as written in manifests and kubelet configs (`VersionTLS12`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::VersionTLS10 => "VersionTLS10",
            Self::VersionTLS11 => "VersionTLS11",
            Self::VersionTLS12 => "VersionTLS12",
            Self::VersionTLS13 => "VersionTLS13",
        }
    }
}

/// Ciphers (OpenSSL names) and minimum version of a fixed profile, as upstream's
/// `configv1.TLSProfiles` (the openshift/api the original vendors) defines them; `None` for
/// `Custom`.
pub fn fixed_profile(profile: TlsProfileType) -> Option<(&'static [&'static str], TlsProtocolVersion)> {
    const TLS13: [&str; 3] = ["TLS_AES_128_GCM_SHA256", "TLS_AES_256_GCM_SHA384", "TLS_CHACHA20_POLY1305_SHA256"];
    const INTERMEDIATE: [&str; 9] = [
        TLS13[0],
        TLS13[1],
        TLS13[2],
        "ECDHE-ECDSA-AES128-GCM-SHA256",
        "ECDHE-RSA-AES128-GCM-SHA256",
        "ECDHE-ECDSA-AES256-GCM-SHA384",
        "ECDHE-RSA-AES256-GCM-SHA384",
        "ECDHE-ECDSA-CHACHA20-POLY1305",
        "ECDHE-RSA-CHACHA20-POLY1305",
    ];
    const OLD: [&str; 24] = [
        INTERMEDIATE[0],
        INTERMEDIATE[1],
        INTERMEDIATE[2],
        INTERMEDIATE[3],
        INTERMEDIATE[4],
        INTERMEDIATE[5],
        INTERMEDIATE[6],
        INTERMEDIATE[7],
        INTERMEDIATE[8],
        "ECDHE-ECDSA-AES128-SHA256",
        "ECDHE-RSA-AES128-SHA256",
        "ECDHE-ECDSA-AES128-SHA",
        "ECDHE-RSA-AES128-SHA",
        "ECDHE-ECDSA-AES256-SHA384",
        "ECDHE-RSA-AES256-SHA384",
        "ECDHE-ECDSA-AES256-SHA",
        "ECDHE-RSA-AES256-SHA",
        "AES128-GCM-SHA256",
        "AES256-GCM-SHA384",
        "AES128-SHA256",
        "AES256-SHA256",
        "AES128-SHA",
        "AES256-SHA",
        "DES-CBC3-SHA",
    ];
    match profile {
        TlsProfileType::Old => Some((&OLD, TlsProtocolVersion::VersionTLS10)),
        TlsProfileType::Intermediate => Some((&INTERMEDIATE, TlsProtocolVersion::VersionTLS12)),
        TlsProfileType::Modern => Some((&TLS13, TlsProtocolVersion::VersionTLS13)),
        TlsProfileType::Custom => None,
    }
}
