//! The content of a generated MachineConfig: the pool's kubelet config (template, cluster TLS
//! profile, feature gates, worker latency profile) with the KubeletConfig merged over it, and the
//! files the original writes for it (`generateKubeletIgnFiles`).

use std::collections::BTreeMap;

use mco_api::KubeletConfig;
use mco_api::config::TlsSecurityProfile;
use mco_ignition::v3::File;
use serde_json::Value;

use crate::common::overwriting_file;
use crate::kubelet::KubeletConfiguration;
use crate::template::{self, Data};
use crate::tls;

/// The kubelet config file.
pub(crate) const KUBELET_CONF: &str = "/etc/kubernetes/kubelet.conf";
/// The auto node sizing environment file.
const NODE_SIZING_ENV: &str = "/etc/node-sizing-enabled.env";
/// The kubelet log level drop-in.
const LOG_LEVEL_DROPIN: &str = "/etc/systemd/system/kubelet.service.d/20-logging.conf";
/// Why the raw JSON is searched for `protectKernelDefaults: false` (Go cannot tell an omitted
/// `false` from an unset field).
const PROTECT_KERNEL_DEFAULTS_FALSE: &str = "\"protectKernelDefaults\":false";
/// `enforceNodeAllocatable` keys of system-reserved enforcement, and the pods one.
const SYSTEM_RESERVED: [&str; 2] = ["system-reserved", "system-reserved-compressible"];
const PODS: &str = "pods";

/// What the pool's kubelet config is made from, besides the role.
pub(crate) struct Base<'a> {
    pub cluster_dns_ip: &'a str,
    pub control_plane_topology: &'a str,
    pub api_server_tls: Option<&'a TlsSecurityProfile>,
    pub feature_gates: &'a BTreeMap<String, bool>,
}

/// `generateOriginalKubeletConfigWithFeatureGates`: the role's template executed and read, with
/// every known feature gate set.
pub(crate) fn original_config(role: &str, base: &Base) -> Result<KubeletConfiguration, String> {
    let (min_tls_version, ciphers) = tls::settings(base.api_server_tls);
    let data = Data::Map(BTreeMap::from([
        ("ClusterDNSIP", Data::Str(base.cluster_dns_ip.to_string())),
        ("TLSMinVersion", Data::Str(min_tls_version)),
        ("TLSCipherSuites", Data::List(ciphers.into_iter().map(Data::Str).collect())),
        (
            "Infra",
            Data::Map(BTreeMap::from([(
                "Status",
                Data::Map(BTreeMap::from([(
                    "ControlPlaneTopology",
                    Data::Str(base.control_plane_topology.to_string()),
                )])),
            )])),
        ),
    ]));
    let file = template::execute(template::kubelet_template(role), &data).map_err(|e| e.to_string())?;
    let file = single_document(&file)?;
    let inline = file["contents"]["inline"].as_str().ok_or("the original Kubelet source string is empty")?;
    let mut config = KubeletConfiguration::from_yaml(&single_document(inline)?)
        .map_err(|e| format!("could not deserialize the Kubelet source: {e}"))?;
    config.set_feature_gates(base.feature_gates);
    Ok(config)
}

fn single_document(text: &str) -> Result<Value, String> {
    let mut documents = mco_goser::yaml_documents(text).map_err(|e| e.to_string())?;
    Ok(if documents.is_empty() { Value::Null } else { documents.swap_remove(0) })
}

/// `updateOriginalKubeConfigwithNodeConfig`: a worker latency profile sets how often the kubelet
/// reports its node status (an unknown profile changes nothing).
pub(crate) fn apply_worker_latency_profile(config: &mut KubeletConfiguration, profile: &str) {
    const SECOND: i64 = 1_000_000_000;
    let frequency = match profile {
        "MediumUpdateAverageReaction" => 20 * SECOND,
        "LowUpdateSlowReaction" => 60 * SECOND,
        "Default" => 10 * SECOND,
        _ => return,
    };
    config.set_duration("nodeStatusUpdateFrequency", frequency);
}

/// Sets the kubelet's TLS settings from a KubeletConfig's own profile.
pub(crate) fn apply_tls_profile(config: &mut KubeletConfiguration, profile: &TlsSecurityProfile) {
    let (min_tls_version, ciphers) = tls::settings(Some(profile));
    config.set_str("tlsMinVersion", &min_tls_version);
    config.set_strings("tlsCipherSuites", ciphers);
}

/// `validateUserKubeletConfig`: the KubeletConfig's own fields, and the kubelet fields nobody may
/// set because a node would not come back from them.
pub(crate) fn validate(kc: &KubeletConfig) -> Result<(), String> {
    if let Some(level) = kc.spec.log_level.filter(|l| !(0..=10).contains(l)) {
        return Err(format!("KubeletConfig's LogLevel is not valid [0,10]: {level}"));
    }
    let Some(raw) = &kc.spec.kubelet_config else { return Ok(()) };
    let user = KubeletConfiguration::from_json(raw)
        .map_err(|e| format!("KubeletConfig could not be unmarshalled, err: {e}"))?;
    let refused = |field: &str, value: String| {
        Err(format!("KubeletConfiguration: {field} is not allowed to be set, but contains: {value}"))
    };
    if !user.str("cgroupDriver").is_empty() {
        return refused("cgroupDriver", user.str("cgroupDriver").into());
    }
    if let Some(dns) = user.strings("clusterDNS").filter(|d| !d.is_empty()) {
        return refused("clusterDNS", format!("[{}]", dns.join(" ")));
    }
    if !user.str("clusterDomain").is_empty() {
        return refused("clusterDomain", user.str("clusterDomain").into());
    }
    if let Some(gates) = user.map("featureGates").filter(|g| !g.is_empty()) {
        let gates: Vec<String> = gates.iter().map(|(k, v)| format!("{k}:{v}")).collect();
        return refused("featureGates", format!("map[{}]", gates.join(" ")));
    }
    if let Some(fail_swap_on) = user.bool_ptr("failSwapOn") {
        return refused("failSwapOn", fail_swap_on.to_string());
    }
    if !user.swap_behavior().is_empty() {
        return refused("swapBehavior", user.swap_behavior().into());
    }
    if user.map("systemReserved").is_some_and(|m| !m.is_empty()) && kc.spec.auto_sizing_reserved == Some(true) {
        return Err("KubeletConfiguration: autoSizingReserved and systemdReserved cannot be set together".into());
    }
    cgroups_agree(&user).map_err(|(reserved, system)| {
        format!("KubeletConfiguration: systemReservedCgroup ({reserved}) must match systemCgroups ({system})")
    })
}

/// `systemReservedCgroup` and `systemCgroups` must be equal when both are set.
fn cgroups_agree(config: &KubeletConfiguration) -> Result<(), (String, String)> {
    let (reserved, system) = (config.str("systemReservedCgroup"), config.str("systemCgroups"));
    if !reserved.is_empty() && !system.is_empty() && reserved != system {
        return Err((reserved.to_string(), system.to_string()));
    }
    Ok(())
}

/// `validateStaticPodPathGivenPool`: control plane pools may not mention `staticPodPath` at all,
/// other pools may only set it empty (to turn static pods off).
pub(crate) fn validate_static_pod_path(kc: &KubeletConfig, pool: &str, control_plane: bool) -> Result<(), String> {
    let Some(raw) = &kc.spec.kubelet_config else { return Ok(()) };
    if control_plane {
        if compact_json(raw).contains("\"staticPodPath\"") {
            return Err(format!(
                "KubeletConfiguration: staticPodPath is not allowed to be set for control plane pool {pool:?}"
            ));
        }
        return Ok(());
    }
    let user = KubeletConfiguration::from_json(raw)
        .map_err(|e| format!("KubeletConfig could not be unmarshalled, err: {e}"))?;
    match user.str("staticPodPath") {
        "" => Ok(()),
        path => {
            Err(format!("KubeletConfiguration: staticPodPath must be empty for pool {pool:?}, but contains: {path}"))
        }
    }
}

/// The KubeletConfig's raw JSON as the API server hands it to the original (compact).
fn compact_json(raw: &Value) -> String {
    serde_json::to_string(raw).expect("a JSON value always serializes")
}

/// `generateKubeletIgnFiles`: the files of the generated MachineConfig, in the original's order
/// (node sizing, log level, kubelet config).
pub(crate) fn kubelet_files(kc: &KubeletConfig, mut config: KubeletConfiguration) -> Result<Vec<File>, String> {
    let mut user_reserved = BTreeMap::new();
    if let Some(raw) = &kc.spec.kubelet_config {
        let mut user = KubeletConfiguration::from_json(raw)
            .map_err(|e| format!("could not deserialize the new Kubelet config: {e}"))?;
        if let Some(reserved) = user.map("systemReserved") {
            for key in ["memory", "cpu", "ephemeral-storage"] {
                if let Some(value) = reserved.get(key) {
                    user_reserved.insert(key, value.clone());
                    user.remove_key("systemReserved", key);
                }
            }
        }
        // Feature gates come from the cluster's FeatureGate only.
        user.clear_feature_gates();
        if compact_json(raw).contains(PROTECT_KERNEL_DEFAULTS_FALSE) {
            config.set_bool("protectKernelDefaults", false);
        }
        config.merge(&user);
        // mergo ignores an empty systemReservedCgroup; enforcing only non-system-reserved
        // allocations needs it cleared.
        let enforce = user.strings("enforceNodeAllocatable").unwrap_or_default();
        if user.str("systemReservedCgroup").is_empty()
            && !enforce.is_empty()
            && !enforce.iter().any(|e| SYSTEM_RESERVED.contains(&e.as_str()))
        {
            config.set_str("systemReservedCgroup", "");
        }
    }
    if !config.str("reservedSystemCPUs").is_empty() {
        config.set_str("systemReservedCgroup", "");
        let mut enforce: Vec<String> = config
            .strings("enforceNodeAllocatable")
            .unwrap_or_default()
            .into_iter()
            .filter(|e| !SYSTEM_RESERVED.contains(&e.as_str()))
            .collect();
        if !enforce.iter().any(|e| e == PODS) {
            enforce.insert(0, PODS.to_string());
        }
        config.set_strings("enforceNodeAllocatable", enforce);
    }
    cgroups_agree(&config).map_err(|(reserved, system)| {
        format!("invalid merged configuration: systemReservedCgroup ({reserved}) must match systemCgroups ({system})")
    })?;

    let mut files = Vec::new();
    if !user_reserved.is_empty() || kc.spec.auto_sizing_reserved.is_some() {
        let enabled = if user_reserved.is_empty() { kc.spec.auto_sizing_reserved == Some(true) } else { false };
        let reserved = |key: &str, default: &str| {
            user_reserved.get(key).filter(|v| !v.is_empty()).cloned().unwrap_or(default.into())
        };
        let env = format!(
            "NODE_SIZING_ENABLED={enabled}\nSYSTEM_RESERVED_MEMORY={}\nSYSTEM_RESERVED_CPU={}\nSYSTEM_RESERVED_ES={}\n",
            reserved("memory", "1Gi"),
            reserved("cpu", "500m"),
            reserved("ephemeral-storage", "1Gi"),
        );
        files.push(overwriting_file(NODE_SIZING_ENV, env.as_bytes()));
    }
    if let Some(level) = kc.spec.log_level {
        let dropin = format!("[Service]\nEnvironment=\"KUBELET_LOG_LEVEL={level}\"\n");
        files.push(overwriting_file(LOG_LEVEL_DROPIN, dropin.as_bytes()));
    }
    files.push(overwriting_file(KUBELET_CONF, config.to_yaml().as_bytes()));
    Ok(files)
}
