//! One sync of the original's kubelet config controller (`syncKubeletConfig`).

use std::collections::BTreeMap;

use mco_api::config::TlsSecurityProfile;
use mco_api::{KubeletConfig, MachineConfig, MachineConfigPool};

use crate::common::{self, Cluster, Failure, Sync, Writer};
use crate::generate::{self, Base, KUBELET_CONF};
use crate::kubelet::KubeletConfiguration;
use crate::status;

/// What the kubelet config controller reads besides the [`Cluster`].
#[derive(Debug, Clone, Copy)]
pub struct KubeletInputs<'a> {
    /// `spec.tlsSecurityProfile` of APIServer `cluster`, if any.
    pub api_server_tls: Option<&'a TlsSecurityProfile>,
    /// `spec.workerLatencyProfile` of the `config.openshift.io` Node `cluster`, if any.
    pub worker_latency_profile: Option<&'a str>,
    /// The cluster's feature gates of the current version.
    pub feature_gates: &'a FeatureGates,
}

/// Feature gates by name, as the FeatureGate `cluster` status lists them for the current version.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FeatureGates {
    pub enabled: Vec<String>,
    pub disabled: Vec<String>,
}

impl FeatureGates {
    /// Every known gate: enabled ones `true`, the others `false`.
    fn map(&self) -> BTreeMap<String, bool> {
        let disabled = self.disabled.iter().map(|g| (g.clone(), false));
        disabled.chain(self.enabled.iter().map(|g| (g.clone(), true))).collect()
    }
}

/// Syncs `kc` against `cluster`, as the original's `syncKubeletConfig` does once the
/// ControllerConfig is complete.
pub fn sync(cluster: &Cluster<KubeletConfig>, inputs: &KubeletInputs, kc: &KubeletConfig) -> Sync {
    let mut writer = Writer::new(cluster, kc);
    match run(cluster, inputs, kc, &mut writer) {
        // Generated kubelet MachineConfigs of other controller versions go.
        Ok(()) => writer.finish("generated-kubelet", |name| !name.starts_with("99")),
        Err(failure) => Sync { outcome: Err(failure), ..writer.sync },
    }
}

fn run(
    cluster: &Cluster<KubeletConfig>,
    inputs: &KubeletInputs,
    kc: &KubeletConfig,
    writer: &mut Writer<KubeletConfig>,
) -> Result<(), Failure> {
    generate::validate(kc).map_err(|e| Failure { retry: false, ..Failure::plain(e) })?;
    let pools =
        common::pools_for(kc, cluster.pools, "could not find any MachineConfigPool set for KubeletConfig".into())?;
    let infra = cluster.controller_config.spec.infra.as_ref();
    let gates = inputs.feature_gates.map();
    let base = Base {
        cluster_dns_ip: cluster.controller_config.spec.cluster_dns_ip.as_deref().unwrap_or_default(),
        control_plane_topology: infra.and_then(|i| i["status"]["controlPlaneTopology"].as_str()).unwrap_or_default(),
        api_server_tls: inputs.api_server_tls,
        feature_gates: &gates,
    };
    let platform = cluster.platform();
    for pool in pools {
        let pool_name = pool.metadata.name.clone().unwrap_or_default();
        generate::validate_static_pod_path(kc, &pool_name, is_control_plane(pool)).map_err(Failure::plain)?;
        let (key, current) = writer.target(pool).map_err(Failure::context("could not get kubelet config key"))?;
        let mut config = original_config(&pool_name, platform, &base)
            .map_err(Failure::context("could not get original kubelet config"))?;
        if pool_name == "worker"
            && let Some(profile) = inputs.worker_latency_profile
        {
            generate::apply_worker_latency_profile(&mut config, profile);
        }
        if let Some(mc) = &current {
            let gates_match = feature_gates_match(mc, &config)
                .map_err(Failure::context("could not check if original and machine config feature gates match"))?;
            let observed = kc.status.as_ref().and_then(|s| s.observed_generation).unwrap_or_default();
            if gates_match
                && observed >= kc.metadata.generation.unwrap_or_default()
                && status::succeeded(kc.status.as_ref())
                && writer.current_version(mc)
            {
                continue;
            }
        }
        if let Some(profile) = &kc.spec.tls_security_profile {
            generate::apply_tls_profile(&mut config, profile);
        }
        let files = generate::kubelet_files(kc, config).map_err(Failure::plain)?;
        writer.write(&pool_name, &key.name, current, files, true);
    }
    Ok(())
}

/// `isControlPlanePool`: master, arbiter, or a pool selecting master nodes.
fn is_control_plane(pool: &MachineConfigPool) -> bool {
    const MASTER_LABEL: &str = "node-role.kubernetes.io/master";
    if matches!(pool.metadata.name.as_deref(), Some("master" | "arbiter")) {
        return true;
    }
    let Some(selector) = &pool.spec.node_selector else { return false };
    selector.match_labels.as_ref().is_some_and(|l| l.contains_key(MASTER_LABEL))
        || selector
            .match_expressions
            .iter()
            .flatten()
            .any(|e| e.key == MASTER_LABEL && matches!(e.operator.as_str(), "Exists" | "In"))
}

/// The pool's kubelet config before the KubeletConfig is applied; like the original, a
/// ControllerConfig without a platform cannot render templates.
fn original_config(role: &str, platform: &str, base: &Base) -> Result<KubeletConfiguration, String> {
    if let Some(error) = common::platform_error(platform) {
        return Err(format!(
            "could not generate the original Kubelet config ignition: GenerateMachineConfigsforRole failed with error: {error}"
        ));
    }
    generate::original_config(role, base)
}

/// `machineConfigFeatureGatesMatchesOriginalFeatureGates`: whether the kubelet config of an
/// existing generated MachineConfig has the feature gates the pool's would have now.
fn feature_gates_match(mc: &MachineConfig, original: &KubeletConfiguration) -> Result<bool, String> {
    let Some(config) = mc.spec.config.as_ref().filter(|c| !c.is_null()) else {
        return Ok(original.feature_gates().is_none_or(|g| g.is_empty()));
    };
    let ignition = mco_ignition::parse_and_convert(config)
        .map_err(|e| format!("error finding kubelet config: parsing Kubelet Ignition config failed with error: {e}"))?;
    let file = ignition
        .storage
        .files
        .iter()
        .find(|f| f.path == KUBELET_CONF)
        .ok_or("error finding kubelet config: could not find Kubelet Config")?;
    let decode_error = |e: String| format!("error decoding actual kubelet config: {e}");
    let bytes = mco_ignition::dataurl::decode_contents(&file.contents).map_err(|e| decode_error(e.to_string()))?;
    let text = String::from_utf8_lossy(&bytes);
    let json = text.trim_start().starts_with('{').then(|| serde_json::from_str(&text).ok()).flatten();
    let actual = match json {
        Some(value) => KubeletConfiguration::from_json(&value),
        None => {
            let documents = mco_goser::yaml_documents(&text).map_err(|e| decode_error(e.to_string()))?;
            KubeletConfiguration::from_yaml(documents.first().unwrap_or(&serde_json::Value::Null))
        }
    }
    .map_err(decode_error)?;
    Ok(actual.feature_gates() == original.feature_gates())
}
