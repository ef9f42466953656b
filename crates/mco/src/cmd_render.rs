//! `mco render`: what the render controller would create for one pool.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;

use mco_api::constants::{CONTROLLER_CONFIG_NAME, GENERATED_BY_VERSION_ANNOTATION, WORKER_POOL};
use mco_api::{ControllerConfig, MachineConfig, MachineConfigPool};
use mco_kubeletconfig::{ClusterSettings, Generated, Offline};
use mco_render::{ControllerVersion, Inputs, StorageOverrides};

use crate::Output;
use crate::manifests::{self, Manifests};

#[derive(Debug, clap::Args)]
pub struct RenderArgs {
    /// Name of the MachineConfigPool to render.
    #[arg(long)]
    pool: String,
    /// Files or directories with the pool, its MachineConfigs and optionally a ControllerConfig.
    #[arg(required = true)]
    paths: Vec<PathBuf>,
    #[arg(short, long, value_enum, default_value = "yaml")]
    output: Output,
    /// Render as the controller with this version hash would (`generated-by-controller-version`).
    #[arg(long, value_name = "HASH")]
    controller_version: Option<String>,
    /// The raw version the ControllerConfig's `generated-by-version` annotation must equal.
    #[arg(long, value_name = "RAW")]
    controller_version_raw: Option<String>,
}

pub fn run(args: &RenderArgs) -> anyhow::Result<ExitCode> {
    keep_freed_memory();
    let mut manifests = manifests::load(&args.paths)?;
    if !manifests.problems.is_empty() {
        for p in &manifests.problems {
            eprintln!("{p}");
        }
        return Ok(ExitCode::FAILURE);
    }
    let this_build = ControllerVersion::this_build();
    let version = ControllerVersion {
        raw: args.controller_version_raw.clone().unwrap_or(this_build.raw),
        hash: args.controller_version.clone().unwrap_or(this_build.hash),
    };
    // Moved, not copied: they hold all the file contents.
    let machine_configs = manifests.take_machine_configs();
    match render_machine_configs(&manifests, machine_configs, &args.pool, &version) {
        Ok(rendered) => {
            for w in &rendered.warnings {
                eprintln!("warning: {w}");
            }
            print!("{}", format_object(&rendered.machine_config, args.output)?);
            Ok(ExitCode::SUCCESS)
        }
        Err(message) => {
            eprintln!("error: {message}");
            Ok(ExitCode::FAILURE)
        }
    }
}

/// Makes the allocator keep memory freed at the top of the heap (up to 64 MiB) for reuse, rather
/// than hand it back to the kernel and fault it in again: a render of megabytes of configs frees
/// and allocates buffers of megabytes, and each page fault costs more than the process lives
/// on. (glibc's defaults suit the long-running commands, which this one-shot command is not.)
fn keep_freed_memory() {
    #[cfg(target_env = "gnu")]
    // SAFETY: mallopt only changes allocator parameters; nothing else runs on another thread yet.
    unsafe {
        libc::mallopt(libc::M_TOP_PAD, 64 << 20);
    }
}

/// Renders `pool` from the manifests, or the message the controller would report. The
/// MachineConfigs are the given ones plus what the kubelet config and container runtime config
/// controllers generate from the given KubeletConfigs and ContainerRuntimeConfigs; a config they
/// refuse is a warning, as on a cluster (its condition says Failure, the pool renders without it).
pub fn render(
    manifests: &Manifests,
    pool_name: &str,
    version: &ControllerVersion,
) -> Result<mco_render::Rendered, String> {
    render_machine_configs(manifests, manifests.machine_configs(), pool_name, version)
}

/// [`render`] with the manifests' MachineConfigs given apart.
fn render_machine_configs(
    manifests: &Manifests,
    machine_configs: Vec<MachineConfig>,
    pool_name: &str,
    version: &ControllerVersion,
) -> Result<mco_render::Rendered, String> {
    let pools = manifests.pools();
    let pool = pools
        .iter()
        .find(|p| p.metadata.name.as_deref() == Some(pool_name))
        .ok_or_else(|| format!("no MachineConfigPool named {pool_name:?} in the given manifests"))?;
    let controller_config = controller_config(manifests, version)?;
    let generated = generate(manifests, machine_configs, &controller_config, &pools, version)?;
    let machine_configs = generated.machine_configs;
    let current_name = pool.spec.configuration.as_ref().and_then(|c| c.name.clone());
    let current = machine_configs.iter().find(|mc| current_name.is_some() && mc.metadata.name == current_name);
    let rendered = mco_render::render(Inputs {
        pool,
        machine_configs: &machine_configs,
        controller_config: &controller_config,
        version,
        current,
        storage_overrides: StorageOverrides::default(),
        streams: mco_render::Streams {
            os_image_stream: manifests.os_image_stream(),
            worker_pool: pools.iter().find(|p| p.metadata.name.as_deref() == Some(WORKER_POOL)),
        },
        offline: true,
    })
    .map_err(|e| format!("MachineConfigPool {pool_name}: {e}"))?;
    let mut rendered = rendered;
    rendered
        .warnings
        .extend(generated.refused.iter().map(|r| format!("{} {} generates nothing: {}", r.kind, r.name, r.message)));
    Ok(rendered)
}

/// What the kubelet config and container runtime config controllers generate from the
/// manifests (their MachineConfigs given apart), reading the FeatureGate, APIServer and Node
/// `cluster` objects among them as those controllers read the cluster's.
pub fn generate(
    manifests: &Manifests,
    machine_configs: Vec<MachineConfig>,
    controller_config: &ControllerConfig,
    pools: &[MachineConfigPool],
    version: &ControllerVersion,
) -> Result<Generated, String> {
    let settings = ClusterSettings::read(
        manifests.cluster_config("FeatureGate"),
        manifests.cluster_config("APIServer"),
        manifests.cluster_config("Node"),
    )?;
    let offline = Offline {
        controller_config,
        pools,
        controller_version: &version.hash,
        kubelet: settings.kubelet_inputs(),
        additional_storage: settings.additional_storage(),
    };
    Ok(mco_kubeletconfig::generate(
        &offline,
        machine_configs,
        &manifests.kubelet_configs(),
        &manifests.container_runtime_configs(),
    ))
}

/// The manifests' ControllerConfig, or [`default_controller_config`] without one.
pub fn controller_config(manifests: &Manifests, version: &ControllerVersion) -> Result<ControllerConfig, String> {
    match manifests.controller_configs().as_slice() {
        [] => Ok(default_controller_config(version)),
        [one] => Ok(one.clone()),
        _ => Err("more than one ControllerConfig in the given manifests".to_string()),
    }
}

/// Without a ControllerConfig there is no base OS image: rendered configs get an empty
/// osImageURL unless a MachineConfig sets one.
fn default_controller_config(version: &ControllerVersion) -> ControllerConfig {
    let mut cc = ControllerConfig::new(CONTROLLER_CONFIG_NAME, Default::default());
    cc.metadata.annotations =
        Some(BTreeMap::from([(GENERATED_BY_VERSION_ANNOTATION.to_string(), version.raw.clone())]));
    cc
}

fn format_object(mc: &MachineConfig, output: Output) -> anyhow::Result<String> {
    Ok(match output {
        Output::Yaml => serde_yaml::to_string(mc)?,
        Output::Json => format!("{}\n", serde_json::to_string_pretty(mc)?),
        Output::Name => format!("machineconfig/{}\n", mc.metadata.name.clone().unwrap_or_default()),
    })
}
