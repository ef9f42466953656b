//! Validating and merging a pool's MachineConfigs (the original's `ValidateMachineConfig` and
//! `MergeMachineConfigs`).

use mco_api::MachineConfig;
use mco_api::constants::MACHINE_CONFIG_ROLE_LABEL;
use mco_api::containers_policy;
use mco_ignition::v3;

use crate::RenderError;

/// Kernel flavours a MachineConfig may ask for.
pub const KERNEL_TYPES: [&str; 4] = ["", "default", "realtime", "64k-pages"];

/// Extensions the original allows, and the packages each installs.
pub const SUPPORTED_EXTENSIONS: [(&str, &[&str]); 7] = [
    ("two-node-ha", &["pacemaker", "pcs", "fence-agents-all"]),
    ("ipsec", &["NetworkManager-libreswan", "libreswan", "openvswitch3.5-ipsec"]),
    ("usbguard", &["usbguard"]),
    ("kerberos", &["krb5-workstation", "libkadm5"]),
    ("kernel-devel", &["kernel-devel", "kernel-headers"]),
    ("sandboxed-containers", &["kata-containers"]),
    ("sysstat", &["sysstat"]),
];

/// The defaults a rendered config starts from (ControllerConfig's base images).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BaseImages {
    pub os_image: String,
    pub extensions_image: String,
}

/// The merged spec before it is named.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Merged {
    pub config: v3::Config,
    pub os_image_url: String,
    pub base_os_extensions_container_image: String,
    pub kernel_arguments: Vec<String>,
    pub extensions: Vec<String>,
    pub fips: bool,
    pub kernel_type: String,
    /// Names of the inputs in the order they were applied.
    pub order: Vec<String>,
}

/// The most the API server takes in one request (its 3 MiB body limit): a config larger than
/// that exists in no cluster, and is refused before it is parsed (one of 200,000 files would
/// otherwise take gigabytes through parsing and merging before the rendered size refusal).
pub const MAX_OBJECT_BYTES: usize = 3 << 20;

/// The length of `value` as JSON, without writing it anywhere.
fn json_size(value: &serde_json::Value) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0 += bytes.len();
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    serde_json::to_writer(&mut count, value).expect("a JSON value serializes");
    count.0
}

/// Checks one MachineConfig as `ValidateMachineConfig` does: the kernel type, then the Ignition
/// config (parse and validate), and only when there is a config, the extensions. Returns the
/// config at spec 3.5, so it is parsed only once per render.
pub fn validate_machine_config(mc: &MachineConfig) -> Result<Option<v3::Config>, RenderError> {
    let name = mc_name(mc);
    let fail = |field: &str, message: String| RenderError::InvalidMachineConfig {
        name: name.clone(),
        field: field.to_string(),
        message,
    };
    let spec = &mc.spec;
    if !KERNEL_TYPES.contains(&spec.kernel_type.as_str()) {
        return Err(fail("spec.kernelType", format!("kernelType={} is invalid", spec.kernel_type)));
    }
    let Some(raw) = &spec.config else { return Ok(None) };
    let size = json_size(raw);
    if size > MAX_OBJECT_BYTES {
        return Err(fail(
            "spec.config",
            format!("{size} bytes: more than the API server takes in one object ({MAX_OBJECT_BYTES} bytes)"),
        ));
    }
    let parsed = mco_ignition::parse_value(raw).map_err(|e| fail("spec.config", e.to_string()))?;
    let internal = mco_ignition::validate_and_convert(parsed.config).map_err(|e| fail("spec.config", e.to_string()))?;
    let invalid: Vec<&str> = spec
        .extensions
        .iter()
        .flatten()
        .map(String::as_str)
        .filter(|e| !SUPPORTED_EXTENSIONS.iter().any(|(name, _)| name == e))
        .collect();
    if !invalid.is_empty() {
        return Err(fail("spec.extensions", format!("invalid extensions found: [{}]", invalid.join(" "))));
    }
    check_signature_policy(&internal).map_err(|message| fail("spec.config", message))?;
    Ok(Some(internal))
}

/// A containers policy the config writes must be one: nodes would refuse every image pull
/// (and their container runtime every container) with a broken one (mco's own check).
fn check_signature_policy(config: &v3::Config) -> Result<(), String> {
    let Some(file) = config.storage.files.iter().find(|f| f.path == containers_policy::POLICY_PATH) else {
        return Ok(());
    };
    let contents = mco_ignition::dataurl::decode_contents(&file.contents).map_err(|e| e.to_string())?;
    let text = String::from_utf8(contents).map_err(|_| format!("{} is not UTF-8", containers_policy::POLICY_PATH))?;
    containers_policy::key_files(&text).map(drop).map_err(|e| e.to_string())
}

/// Merges validated MachineConfigs (each with its config at spec 3.5, see
/// [`validate_machine_config`]) in the original's order: those labelled `role: worker` by name,
/// then all others by name (so a custom pool's own configs always come after the worker ones).
pub fn merge_machine_configs(
    configs: Vec<(&MachineConfig, Option<v3::Config>)>,
    base: &BaseImages,
) -> Result<Merged, RenderError> {
    for (mc, _) in &configs {
        if mc.metadata.labels.is_none() {
            return Err(RenderError::Generate(format!("cannot find label in MachineConfig {}", mc_name(mc))));
        }
    }
    let is_worker = |mc: &MachineConfig| {
        mc.metadata.labels.as_ref().and_then(|l| l.get(MACHINE_CONFIG_ROLE_LABEL)).is_some_and(|r| r == "worker")
    };
    let (mut workers, mut others): (Vec<_>, Vec<_>) = configs.into_iter().partition(|(mc, _)| is_worker(mc));
    workers.sort_by_key(|(mc, _)| mc_name(mc));
    others.sort_by_key(|(mc, _)| mc_name(mc));
    let ordered_pairs: Vec<(&MachineConfig, Option<v3::Config>)> = workers.into_iter().chain(others).collect();
    let ordered: Vec<&MachineConfig> = ordered_pairs.iter().map(|(mc, _)| *mc).collect();

    let mut config = None;
    for (_, parsed) in ordered_pairs {
        config = Some(match (config, parsed) {
            (None, parsed) => parsed.unwrap_or_else(|| v3::Config::new(v3::MAX_VERSION)),
            (Some(acc), None) => acc,
            (Some(acc), Some(child)) => merge_child(acc, child),
        });
    }
    let mut config = config.unwrap_or_else(|| v3::Config::new(v3::MAX_VERSION));
    // The MCO always overwrites files; Ignition 3 defaults to not overwriting, which would make
    // new nodes fail where updated ones succeed.
    for f in &mut config.storage.files {
        f.overwrite.get_or_insert(true);
    }

    let fips = ordered.iter().any(|mc| mc.spec.fips);
    let kernel_type = ordered
        .iter()
        .rfind(|mc| matches!(mc.spec.kernel_type.as_str(), "realtime" | "64k-pages"))
        .map_or_else(|| "default".to_string(), |mc| mc.spec.kernel_type.clone());
    let kernel_arguments: Vec<String> =
        ordered.iter().flat_map(|mc| mc.spec.kernel_arguments.iter().flatten().cloned()).collect();
    let extensions: Vec<String> = ordered.iter().flat_map(|mc| mc.spec.extensions.iter().flatten().cloned()).collect();
    if kernel_type != "default" && extensions.iter().any(|e| e == "kernel-devel") {
        return Err(RenderError::Generate(format!(
            "installing kernel-devel extension is not supported with kernelType: {kernel_type}"
        )));
    }
    // Controller-generated configs carry the defaults; only user configs may override them.
    let user_configs = || ordered.iter().filter(|mc| !generated_by_controller(mc));
    let os_image_url =
        user_configs().map(|mc| &mc.spec.os_image_url).rfind(|u| !u.is_empty()).unwrap_or(&base.os_image).clone();
    let base_os_extensions_container_image = user_configs()
        .map(|mc| &mc.spec.base_os_extensions_container_image)
        .rfind(|u| !u.is_empty())
        .unwrap_or(&base.extensions_image)
        .clone();
    Ok(Merged {
        config,
        os_image_url,
        base_os_extensions_container_image,
        kernel_arguments,
        extensions,
        fips,
        kernel_type,
        order: ordered.iter().map(|mc| mc_name(mc)).collect(),
    })
}

/// One merge step. A child file without a compression gets "" first so that it overrides the
/// parent's compression (the contents changed, so the old compression no longer applies); ""
/// goes back to "none" afterwards, as the original does.
fn merge_child(parent: v3::Config, mut child: v3::Config) -> v3::Config {
    for f in &mut child.storage.files {
        f.contents.compression.get_or_insert_with(String::new);
    }
    let mut merged = mco_ignition::merge::merge(parent, child);
    for f in &mut merged.storage.files {
        if f.contents.compression.as_deref() == Some("") {
            f.contents.compression = None;
        }
    }
    merged
}

pub(crate) fn generated_by_controller(mc: &MachineConfig) -> bool {
    mc.metadata
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key(mco_api::constants::GENERATED_BY_CONTROLLER_VERSION_ANNOTATION))
}

pub(crate) fn mc_name(mc: &MachineConfig) -> String {
    mc.metadata.name.clone().unwrap_or_default()
}
