//! `mco validate`: every problem the API server, the render controller or a node would find in
//! a set of manifests, one line each, naming the object and the field.

use std::path::PathBuf;
use std::process::ExitCode;

use mco_api::MachineConfig;
use mco_api::constants::GENERATED_BY_VERSION_ANNOTATION;
use mco_render::{ControllerVersion, RenderError, Selection, merge};

use crate::cmd_render;
use crate::manifests::{self, Manifests, Object};

pub fn run(paths: &[PathBuf]) -> anyhow::Result<ExitCode> {
    let manifests = manifests::load(paths)?;
    let problems = problems(&manifests);
    for p in &problems {
        println!("{p}");
    }
    Ok(if problems.is_empty() { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

/// All problems, in manifest order.
pub fn problems(manifests: &Manifests) -> Vec<String> {
    let mut out: Vec<String> = manifests.problems.iter().map(ToString::to_string).collect();
    let machine_configs = manifests.machine_configs();
    let version = validation_version(manifests);
    let generated = cmd_render::controller_config(manifests, &version)
        .and_then(|cc| cmd_render::generate(manifests, machine_configs.clone(), &cc, &manifests.pools(), &version));
    // What the kubelet config and container runtime config controllers refuse, by kind and name.
    let refused = |kind: &str, name: &Option<String>| -> Vec<String> {
        let refused = generated.as_ref().map(|g| g.refused.as_slice()).unwrap_or_default();
        refused
            .iter()
            .filter(|r| r.kind == kind && Some(&r.name) == name.as_ref())
            .map(|r| format!("{kind} {}: {}", r.name, r.message))
            .collect()
    };
    for (origin, object) in &manifests.objects {
        let found: Vec<String> = match object {
            Object::MachineConfig(mc) => machine_config(mc),
            Object::MachineConfigPool(pool) => {
                let mut found: Vec<String> =
                    mco_api::validate::machine_config_pool(pool).iter().map(ToString::to_string).collect();
                found.extend(pool_selection(manifests, pool, &machine_configs, generated.is_ok()));
                // mco's rollout policy annotations (those that need the pool's nodes are checked
                // by the controller).
                found.extend(mco_rollout::policy::RolloutPolicy::from_pool(pool).err().map(|e| e.to_string()));
                found.extend(mco_rollout::prestage::concurrency(pool).err());
                if let Some(stream) = manifests.os_image_stream() {
                    let unknown = mco_api::validate::pool_os_image_stream(pool, stream);
                    found.extend(unknown.iter().map(ToString::to_string));
                }
                found
            }
            Object::MachineConfiguration(m) => {
                mco_api::validate::machine_configuration(m).iter().map(ToString::to_string).collect()
            }
            Object::MachineOSConfig(m) => {
                mco_api::validate::machine_os_config(m).iter().map(ToString::to_string).collect()
            }
            Object::OSImageStream(stream) => {
                mco_api::validate::os_image_stream(stream).iter().map(ToString::to_string).collect()
            }
            Object::KubeletConfig(kc) => refused("KubeletConfig", &kc.metadata.name),
            Object::ContainerRuntimeConfig(crc) => refused("ContainerRuntimeConfig", &crc.metadata.name),
            // A configuration object the controllers cannot read.
            Object::ClusterConfig { kind, .. } => match &generated {
                Err(e) if e.starts_with(&format!("{kind} cluster:")) => vec![e.clone()],
                _ => Vec::new(),
            },
            Object::ControllerConfig(_) | Object::MachineOSBuild(_) | Object::MachineSet(_) => Vec::new(),
        };
        // The API server's rules for names, labels and annotations come first, as it checks them first.
        let meta = object.kind_and_meta().map(|(kind, meta)| mco_api::validate::object_meta(kind, meta));
        let meta = meta.unwrap_or_default().into_iter().map(|e| e.to_string());
        out.extend(meta.chain(found).map(|f| format!("{origin}: {f}")));
    }
    out
}

fn machine_config(mc: &MachineConfig) -> Vec<String> {
    let name = mc.metadata.name.clone().unwrap_or_default();
    let mut found = Vec::new();
    if mc.metadata.labels.as_ref().is_none_or(|l| l.is_empty()) {
        found.push(format!(
            "MachineConfig {name}: metadata.labels: no labels, so no pool selects it (the render controller refuses it: cannot find label in MachineConfig {name})"
        ));
    }
    match merge::validate_machine_config(mc) {
        Err(RenderError::InvalidMachineConfig { name, field, message }) => {
            found.push(format!("MachineConfig {name}: {field}: {message}"))
        }
        Err(other) => found.push(format!("MachineConfig {name}: {other}")),
        Ok(_) => {}
    }
    let kernel_type = mc.spec.kernel_type.as_str();
    if matches!(kernel_type, "realtime" | "64k-pages")
        && mc.spec.extensions.iter().flatten().any(|e| e == "kernel-devel")
    {
        found.push(format!(
            "MachineConfig {name}: spec.extensions: installing kernel-devel extension is not supported with kernelType: {kernel_type}"
        ));
    }
    found
}

/// Renders with the version the ControllerConfig asks for: version skew is not what is checked here.
fn validation_version(manifests: &Manifests) -> ControllerVersion {
    let raw = manifests
        .controller_configs()
        .first()
        .and_then(|cc| cc.metadata.annotations.as_ref()?.get(GENERATED_BY_VERSION_ANNOTATION).cloned())
        .unwrap_or_else(|| ControllerVersion::this_build().raw);
    ControllerVersion { raw, hash: ControllerVersion::this_build().hash }
}

/// What a pool's selector picks among the given MachineConfigs, and whether they render.
/// Without `renders`, the render is not tried (the configuration objects it needs are reported
/// on themselves).
fn pool_selection(
    manifests: &Manifests,
    pool: &mco_api::MachineConfigPool,
    mcs: &[MachineConfig],
    renders: bool,
) -> Vec<String> {
    let name = pool.metadata.name.clone().unwrap_or_default();
    let field = "spec.machineConfigSelector";
    let problem = |message: String| vec![format!("MachineConfigPool {name}: {field}: {message}")];
    let selection = match Selection::new(pool.spec.machine_config_selector.as_ref()) {
        Ok(s) => s,
        Err(e) => return problem(e.to_string()),
    };
    match &selection {
        Selection::Everything => {
            return problem("{} selects every MachineConfig; a non-empty selector is required".into());
        }
        Selection::Nothing => return problem("not set, so the pool selects no MachineConfigs".into()),
        Selection::Requirements(_) => {}
    }
    let selected: Vec<&MachineConfig> =
        mcs.iter().filter(|mc| selection.matches(mc.metadata.labels.as_ref())).collect();
    if selected.is_empty() {
        return problem(format!("selects no MachineConfigs among the given manifests ({selection})"));
    }
    // A broken MachineConfig is reported on itself; the pool's render would only repeat it.
    if !renders || selected.iter().any(|mc| !machine_config(mc).is_empty()) {
        return Vec::new();
    }
    match cmd_render::render(manifests, &name, &validation_version(manifests)) {
        // Generated configs of another controller version are a cluster state, not a manifest problem.
        Err(e) if e.contains("Ignoring MC ") => Vec::new(),
        Err(e) => vec![e],
        Ok(_) => Vec::new(),
    }
}
