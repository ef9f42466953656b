//! KubeletConfig → MachineConfig, as the original's kubelet config controller
//! (`pkg/controller/kubelet-config`) syncs one KubeletConfig: pure functions, no IO.
//!
//! [`sync`] takes the cluster's state and one KubeletConfig and says what the controller writes:
//! for each pool the KubeletConfig selects, a `99-<pool>-generated-kubelet[-<n>]` MachineConfig
//! holding the pool's kubelet config (the role's template from the original, the APIServer's TLS
//! profile, every known feature gate, the worker latency profile) with the KubeletConfig's
//! `kubeletConfig` merged over it by mergo's rules, its own TLS profile, the node sizing file for
//! `autoSizingReserved`/`systemReserved` and the log level drop-in; the `mc-name-suffix`
//! annotation and finalizers of the KubeletConfig; generated MachineConfigs of older controller
//! versions to delete; and the outcome, whose message [`updated_status`] turns into the
//! KubeletConfig's conditions. A KubeletConfig upstream refuses gets upstream's failure message
//! and no MachineConfig.
//!
//! The kubelet config bytes are what Go's serializer writes for the typed
//! `KubeletConfiguration` (`crates/kubeletconfig/testdata/cases` holds the original's outputs).

mod generate;
mod kubelet;
mod name;
mod status;
mod template;
mod tls;

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use mco_api::config::TlsSecurityProfile;
use mco_api::constants::{GENERATED_BY_CONTROLLER_VERSION_ANNOTATION, MACHINE_CONFIG_ROLE_LABEL};
use mco_api::{ControllerConfig, KubeletConfig, MachineConfig, MachineConfigPool, MachineConfigSpec};
use mco_ignition::v3;

pub use status::updated_status;
pub use template::TemplateError;

use generate::{Base, KUBELET_CONF};
use kubelet::KubeletConfiguration;

/// What the original's controller reads besides the KubeletConfig being synced.
#[derive(Debug, Clone, Copy)]
pub struct Cluster<'a> {
    /// ControllerConfig `machine-config-controller` (cluster DNS IP, infrastructure).
    pub controller_config: &'a ControllerConfig,
    pub pools: &'a [MachineConfigPool],
    /// Every KubeletConfig, the synced one among them (for the name suffixes).
    pub kubelet_configs: &'a [KubeletConfig],
    /// The MachineConfigs that exist.
    pub machine_configs: &'a [MachineConfig],
    /// `spec.tlsSecurityProfile` of APIServer `cluster`, if any.
    pub api_server_tls: Option<&'a TlsSecurityProfile>,
    /// `spec.workerLatencyProfile` of the `config.openshift.io` Node `cluster`, if any.
    pub worker_latency_profile: Option<&'a str>,
    /// The cluster's feature gates of the current version.
    pub feature_gates: &'a FeatureGates,
    /// The controller's version hash, written on generated MachineConfigs.
    pub controller_version: &'a str,
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

/// What syncing one KubeletConfig writes.
#[derive(Debug, Clone, PartialEq)]
pub struct Sync {
    /// MachineConfigs to create or (when they exist) replace, in pool order.
    pub machine_configs: Vec<MachineConfig>,
    /// MachineConfigs to delete: a pre-4.7 name taken over, generated kubelet MachineConfigs of
    /// other controller versions.
    pub deletions: Vec<String>,
    /// The `mc-name-suffix` annotation to set on the KubeletConfig, when it has none yet.
    pub name_suffix: Option<String>,
    /// The KubeletConfig's finalizers afterwards (the generated MachineConfigs' names), when
    /// they change.
    pub finalizers: Option<Vec<String>>,
    /// `Ok`, or why the sync stopped; what was computed before stays to be written.
    pub outcome: Result<(), Failure>,
}

/// Why a sync failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{error}")]
pub struct Failure {
    /// The message of the KubeletConfig's condition.
    pub message: String,
    /// The error the original's sync returns (and logs).
    pub error: String,
    /// Whether the original retries: an invalid KubeletConfig waits for a change instead.
    pub retry: bool,
}

impl Failure {
    /// A failure whose condition says `Error: <error>`.
    fn plain(error: String) -> Self {
        Failure { message: format!("Error: {error}"), error, retry: true }
    }

    /// A failure whose condition says `<context>: <error>`.
    fn context(context: &str) -> impl FnOnce(String) -> Self {
        move |error| Failure { message: format!("{context}: {error}"), error, retry: true }
    }
}

/// Syncs `kc` against `cluster`, as the original's `syncKubeletConfig` does once the
/// ControllerConfig is complete.
pub fn sync(cluster: &Cluster, kc: &KubeletConfig) -> Sync {
    let mut sync = Sync {
        machine_configs: Vec::new(),
        deletions: Vec::new(),
        name_suffix: None,
        finalizers: None,
        outcome: Ok(()),
    };
    sync.outcome = run(cluster, kc, &mut sync);
    sync
}

fn run(cluster: &Cluster, kc: &KubeletConfig, sync: &mut Sync) -> Result<(), Failure> {
    generate::validate(kc).map_err(|e| Failure { retry: false, ..Failure::plain(e) })?;
    let pools = pools_for(kc, cluster.pools).map_err(Failure::plain)?;
    let existing: BTreeMap<&str, &MachineConfig> =
        cluster.machine_configs.iter().filter_map(|mc| Some((mc.metadata.name.as_deref()?, mc))).collect();
    let infra = cluster.controller_config.spec.infra.as_ref();
    let gates = cluster.feature_gates.map();
    let base = Base {
        cluster_dns_ip: cluster.controller_config.spec.cluster_dns_ip.as_deref().unwrap_or_default(),
        control_plane_topology: infra.and_then(|i| i["status"]["controlPlaneTopology"].as_str()).unwrap_or_default(),
        api_server_tls: cluster.api_server_tls,
        feature_gates: &gates,
    };
    let platform = infra.and_then(|i| i["status"]["platformStatus"]["type"].as_str()).unwrap_or_default();
    let had_suffix =
        kc.metadata.annotations.as_ref().is_some_and(|a| a.contains_key(mco_api::constants::MC_NAME_SUFFIX_ANNOTATION));
    let mut written = BTreeSet::new();
    for pool in pools {
        let pool_name = pool.metadata.name.clone().unwrap_or_default();
        generate::validate_static_pod_path(kc, &pool_name, is_control_plane(pool)).map_err(Failure::plain)?;
        let key = name::managed_key(pool, kc, cluster.kubelet_configs, &|n| existing.contains_key(n))
            .map_err(Failure::context("could not get kubelet config key"))?;
        // A pre-4.7 MachineConfig is copied (its config only) to the new name and deleted.
        let renamed = key.renamed_from.as_ref().map(|old| {
            sync.deletions.push(old.clone());
            new_machine_config(&key.name, &pool_name, existing[old.as_str()].spec.config.clone())
        });
        let current = renamed.as_ref().or_else(|| existing.get(key.name.as_str()).copied());
        let mut config = original_config(&pool_name, platform, &base)
            .map_err(Failure::context("could not get original kubelet config"))?;
        if pool_name == "worker"
            && let Some(profile) = cluster.worker_latency_profile
        {
            generate::apply_worker_latency_profile(&mut config, profile);
        }
        if let Some(mc) = current {
            let gates_match = feature_gates_match(mc, &config)
                .map_err(Failure::context("could not check if original and machine config feature gates match"))?;
            let observed = kc.status.as_ref().and_then(|s| s.observed_generation).unwrap_or_default();
            let version =
                mc.metadata.annotations.as_ref().and_then(|a| a.get(GENERATED_BY_CONTROLLER_VERSION_ANNOTATION));
            if gates_match
                && observed >= kc.metadata.generation.unwrap_or_default()
                && status::succeeded(kc.status.as_ref())
                && version.map(String::as_str) == Some(cluster.controller_version)
            {
                continue;
            }
        }
        if let Some(profile) = &kc.spec.tls_security_profile {
            generate::apply_tls_profile(&mut config, profile);
        }
        let files = generate::kubelet_files(kc, config).map_err(Failure::plain)?;
        if !had_suffix {
            sync.name_suffix = Some(name::suffix_of(&key.name));
        }
        sync.machine_configs.push(machine_config(
            current,
            &key.name,
            &pool_name,
            files,
            kc,
            cluster.controller_version,
        ));
        sync.finalizers =
            Some(with_finalizer(sync.finalizers.take().or_else(|| kc.metadata.finalizers.clone()), &key.name));
        written.insert(key.name);
    }
    let stale = existing.iter().filter(|(name, mc)| {
        let version = mc.metadata.annotations.as_ref().and_then(|a| a.get(GENERATED_BY_CONTROLLER_VERSION_ANNOTATION));
        name.contains("generated-kubelet")
            && name.starts_with("99")
            && !written.contains(**name)
            && !sync.deletions.iter().any(|d| d == *name)
            && version.map(String::as_str) != Some(cluster.controller_version)
    });
    sync.deletions.extend(stale.map(|(name, _)| name.to_string()).collect::<Vec<_>>());
    Ok(())
}

/// `getPoolsForKubeletConfig`: the pools the selector selects, by name.
fn pools_for<'a>(kc: &KubeletConfig, pools: &'a [MachineConfigPool]) -> Result<Vec<&'a MachineConfigPool>, String> {
    let mut selected = Vec::new();
    for pool in pools {
        if name::selects(kc, pool)? {
            selected.push(pool);
        }
    }
    if selected.is_empty() {
        return Err("could not find any MachineConfigPool set for KubeletConfig".into());
    }
    selected.sort_by_key(|p| p.metadata.name.clone());
    Ok(selected)
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
    let generate = |e: &str| {
        format!(
            "could not generate the original Kubelet config ignition: GenerateMachineConfigsforRole failed with error: {e}"
        )
    };
    match platform {
        "" => return Err(generate("cannot generate MachineConfigs when no platformStatus.type is set")),
        "_base" => return Err(generate("platform _base unsupported")),
        _ => {}
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

/// The generated MachineConfig: the existing one (its labels and other fields kept) or a new
/// one labelled with the pool, with the files as its Ignition 3.5.0 config, the controller
/// version as its only annotation and the KubeletConfig as its controller.
fn machine_config(
    existing: Option<&MachineConfig>,
    name: &str,
    pool: &str,
    files: Vec<v3::File>,
    kc: &KubeletConfig,
    controller_version: &str,
) -> MachineConfig {
    let mut mc = existing.cloned().unwrap_or_else(|| new_machine_config(name, pool, None));
    let mut ignition = v3::Config::new("3.5.0");
    ignition.storage.files = files;
    let bytes =
        mco_goser::to_go_json(&ignition, mco_goser::Escaping::Legacy).expect("an Ignition config always serializes");
    mc.spec.config = Some(serde_json::from_slice(&bytes).expect("Go's JSON is JSON"));
    mc.metadata.annotations = Some(BTreeMap::from([(
        GENERATED_BY_CONTROLLER_VERSION_ANNOTATION.to_string(),
        controller_version.to_string(),
    )]));
    mc.metadata.owner_references = Some(vec![OwnerReference {
        api_version: "machineconfiguration.openshift.io/v1".into(),
        kind: "KubeletConfig".into(),
        name: kc.metadata.name.clone().unwrap_or_default(),
        uid: kc.metadata.uid.clone().unwrap_or_default(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }]);
    mc
}

/// `MachineConfigFromRawIgnConfig`: a MachineConfig labelled with its pool.
fn new_machine_config(name: &str, pool: &str, config: Option<serde_json::Value>) -> MachineConfig {
    MachineConfig {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            labels: Some(BTreeMap::from([(MACHINE_CONFIG_ROLE_LABEL.to_string(), pool.to_string())])),
            ..Default::default()
        },
        spec: MachineConfigSpec { config, ..Default::default() },
    }
}

/// `addFinalizerToKubeletConfig`: the finalizers with `name` added; finalizers of another kind
/// (older uids) are dropped first.
fn with_finalizer(finalizers: Option<Vec<String>>, name: &str) -> Vec<String> {
    let mut finalizers = finalizers.unwrap_or_default();
    if finalizers.iter().any(|f| !f.contains("kubelet")) {
        finalizers.clear();
    }
    if !finalizers.iter().any(|f| f == name) {
        finalizers.push(name.to_string());
    }
    finalizers
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finalizers_name_the_generated_machine_configs() {
        let owned = |v: &[&str]| Some(v.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        // (finalizers before, MachineConfig written, finalizers after)
        type Case<'a> = (Option<Vec<String>>, &'a str, &'a [&'a str]);
        let cases: &[Case] = &[
            (None, "99-worker-generated-kubelet", &["99-worker-generated-kubelet"]),
            (owned(&["99-worker-generated-kubelet"]), "99-worker-generated-kubelet", &["99-worker-generated-kubelet"]),
            (
                owned(&["99-master-generated-kubelet"]),
                "99-worker-generated-kubelet",
                &["99-master-generated-kubelet", "99-worker-generated-kubelet"],
            ),
            // Finalizers of another kind (older uids) are dropped.
            (
                owned(&["7c1b5b0e", "99-master-generated-kubelet"]),
                "99-worker-generated-kubelet-1",
                &["99-worker-generated-kubelet-1"],
            ),
        ];
        for (before, name, after) in cases {
            assert_eq!(with_finalizer(before.clone(), name), *after, "{before:?}");
        }
    }
}
