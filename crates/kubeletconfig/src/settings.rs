//! The cluster-wide settings the kubelet config controller reads besides the KubeletConfig: the
//! FeatureGate, APIServer and (config.openshift.io) Node objects named `cluster`, parsed from
//! their JSON (the API server's or a manifest's), none of them required.

use mco_api::config::TlsSecurityProfile;
use serde_json::Value;

use crate::{FeatureGates, KubeletInputs};

/// What the cluster's FeatureGate, APIServer and Node objects say.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ClusterSettings {
    pub feature_gates: FeatureGates,
    /// `spec.tlsSecurityProfile` of APIServer `cluster`.
    pub api_server_tls: Option<TlsSecurityProfile>,
    /// `spec.workerLatencyProfile` of Node `cluster`.
    pub worker_latency_profile: Option<String>,
}

impl ClusterSettings {
    /// Reads the three objects (each optional). A FeatureGate must list the gates of one version:
    /// the cluster's current one.
    pub fn read(
        feature_gate: Option<&Value>,
        api_server: Option<&Value>,
        node: Option<&Value>,
    ) -> Result<ClusterSettings, String> {
        let api_server_tls = match api_server.map(|a| &a["spec"]["tlsSecurityProfile"]) {
            None | Some(Value::Null) => None,
            Some(profile) => Some(
                serde_json::from_value(profile.clone())
                    .map_err(|e| format!("APIServer cluster: spec.tlsSecurityProfile: {e}"))?,
            ),
        };
        Ok(ClusterSettings {
            feature_gates: feature_gates(feature_gate)?,
            api_server_tls,
            worker_latency_profile: node.and_then(|n| n["spec"]["workerLatencyProfile"].as_str()).map(str::to_string),
        })
    }

    pub fn kubelet_inputs(&self) -> KubeletInputs<'_> {
        KubeletInputs {
            api_server_tls: self.api_server_tls.as_ref(),
            worker_latency_profile: self.worker_latency_profile.as_deref(),
            feature_gates: &self.feature_gates,
        }
    }

    /// Whether the `AdditionalStorageConfig` gate is on (the container runtime config controller's
    /// additional stores).
    pub fn additional_storage(&self) -> bool {
        self.feature_gates.enabled.iter().any(|g| g == "AdditionalStorageConfig")
    }
}

/// The gates FeatureGate `cluster`'s status lists (none without it).
fn feature_gates(feature_gate: Option<&Value>) -> Result<FeatureGates, String> {
    let Some(feature_gate) = feature_gate else { return Ok(FeatureGates::default()) };
    let versions = feature_gate["status"]["featureGates"].as_array().cloned().unwrap_or_default();
    let names = |gates: &Value| -> Vec<String> {
        gates.as_array().into_iter().flatten().filter_map(|g| g["name"].as_str().map(str::to_string)).collect()
    };
    match versions.as_slice() {
        [] => Ok(FeatureGates::default()),
        [one] => Ok(FeatureGates { enabled: names(&one["enabled"]), disabled: names(&one["disabled"]) }),
        several => {
            let listed: Vec<&str> = several.iter().filter_map(|v| v["version"].as_str()).collect();
            Err(format!(
                "FeatureGate cluster: status.featureGates lists {} versions ({}); keep only the cluster's current version's",
                several.len(),
                listed.join(", ")
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn reads_gates_tls_profile_and_latency_profile_and_refuses_several_gate_versions() {
        let gate = json!({"status": {"featureGates": [{"version": "4.22.0",
            "enabled": [{"name": "AdditionalStorageConfig"}], "disabled": [{"name": "Other"}]}]}});
        let api_server = json!({"spec": {"tlsSecurityProfile": {"type": "Modern", "modern": {}}}});
        let node = json!({"spec": {"workerLatencyProfile": "MediumUpdateAverageReaction"}});
        let read = ClusterSettings::read(Some(&gate), Some(&api_server), Some(&node)).unwrap();
        assert_eq!(read.feature_gates.enabled, ["AdditionalStorageConfig"]);
        assert_eq!(read.feature_gates.disabled, ["Other"]);
        assert!(read.additional_storage() && read.api_server_tls.is_some());
        assert_eq!(read.kubelet_inputs().worker_latency_profile, Some("MediumUpdateAverageReaction"));
        assert_eq!(ClusterSettings::read(None, None, None).unwrap(), ClusterSettings::default());

        let two = json!({"status": {"featureGates": [{"version": "4.21.0"}, {"version": "4.22.0"}]}});
        let refused = ClusterSettings::read(Some(&two), None, None).unwrap_err();
        assert!(refused.contains("lists 2 versions (4.21.0, 4.22.0)"), "{refused}");
        let bad_tls = json!({"spec": {"tlsSecurityProfile": {"type": 7}}});
        assert!(ClusterSettings::read(None, Some(&bad_tls), None).unwrap_err().starts_with("APIServer cluster:"));
    }
}
