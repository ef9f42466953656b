//! `mco skew`: boot image skew enforcement, offline.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use mco_api::MachineConfiguration;
use mco_api::operator::{BootImageSkewEnforcementModeStatus, BootImageSkewEnforcementStatus};
use mco_bootimage::skew::{
    BootImageVersion, ClusterVersion, ConditionView, ModeInputs, NodeVerdict, Verdict, check_node_boot_image,
    effective_managed_boot_images, resolve_mode, upgradeable,
};

use crate::cmd_bootimage::read_infrastructure;
use crate::manifests::{self, Object};

#[derive(Debug, clap::Subcommand)]
pub enum SkewCommand {
    /// Print the skew enforcement in effect and whether it blocks upgrades (the `Upgradeable`
    /// condition's reason and message); exit 1 when upgrades (or the given boot image) are
    /// refused.
    Check(CheckArgs),
}

#[derive(Debug, clap::Args)]
pub struct CheckArgs {
    /// The cluster's ClusterVersion (`oc get clusterversion version -o yaml`): the install
    /// version and the documentation version of the message.
    #[arg(long, value_name = "CLUSTERVERSION.yaml")]
    cluster_version: Option<PathBuf>,
    /// The cluster's Infrastructure: the platform and topology the mode depends on.
    #[arg(long, value_name = "INFRASTRUCTURE.yaml")]
    infrastructure: Option<PathBuf>,
    /// Also decide whether a machine booted from this boot image (RHCOS build such as
    /// `415.92.202311241643-0` or `9.6.20251023-0`, or an OCP version) may get its config.
    #[arg(long, value_name = "VERSION")]
    boot_image: Option<String>,
    /// Manifests holding the MachineConfiguration `cluster`.
    #[arg(required = true)]
    paths: Vec<PathBuf>,
}

pub fn run(cmd: SkewCommand) -> anyhow::Result<ExitCode> {
    match cmd {
        SkewCommand::Check(args) => check(&args),
    }
}

fn read_cluster_version(path: &Path) -> anyhow::Result<Result<ClusterVersion, String>> {
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    Ok(mco_goser::yaml_object::<serde_json::Value>(&text)
        .map_err(|e| e.to_string())
        .and_then(|v| {
            let kind = v.get("kind").and_then(|k| k.as_str()).unwrap_or_default().to_string();
            if kind != "ClusterVersion" {
                return Err(format!("expected kind ClusterVersion, found {kind:?}"));
            }
            serde_json::from_value(v).map_err(|e| e.to_string())
        })
        .map_err(|e| format!("{}: not a ClusterVersion: {e}", path.display())))
}

fn check(args: &CheckArgs) -> anyhow::Result<ExitCode> {
    let mut problems = Vec::new();
    let cluster_version = match &args.cluster_version {
        Some(path) => read_cluster_version(path)?.map_err(|e| problems.push(e)).ok(),
        None => None,
    };
    let infrastructure = match &args.infrastructure {
        Some(path) => {
            let bytes = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
            read_infrastructure(path, &bytes).map_err(|e| problems.push(e)).ok()
        }
        None => None,
    };
    let manifests = manifests::load(&args.paths)?;
    problems.extend(manifests.problems.iter().map(ToString::to_string));
    let configurations: Vec<&MachineConfiguration> = manifests
        .objects
        .iter()
        .filter_map(|(_, o)| if let Object::MachineConfiguration(mc) = o { Some(mc.as_ref()) } else { None })
        .collect();
    let configuration = match configurations.as_slice() {
        [one] => Some(*one),
        [] => {
            problems.push("no MachineConfiguration in the given manifests".to_string());
            None
        }
        several => {
            problems.push(format!(
                "{} MachineConfigurations in the given manifests; expected one (cluster)",
                several.len()
            ));
            None
        }
    };
    if let Some(version) = &args.boot_image
        && let Err(e) = BootImageVersion::parse(version)
    {
        problems.push(format!("--boot-image: {e}"));
    }
    let (Some(configuration), true) = (configuration, problems.is_empty()) else {
        for p in &problems {
            eprintln!("error: {p}");
        }
        return Ok(ExitCode::FAILURE);
    };
    let cluster_version = cluster_version.unwrap_or_default();
    let status = configuration.status.as_ref();
    let (effective, source) = match status.and_then(|s| s.boot_image_skew_enforcement_status.clone()) {
        Some(recorded) if recorded.mode.is_some() => (recorded, "status"),
        _ => (computed_mode(configuration, infrastructure.as_ref(), &cluster_version), "computed"),
    };
    let conditions: Vec<ConditionView<'_>> = status
        .and_then(|s| s.conditions.as_ref())
        .into_iter()
        .flatten()
        .map(|c| ConditionView { type_: &c.type_, status: &c.status, message: &c.message })
        .collect();
    println!("mode: {} ({source})", mode_name(&effective));
    if let Some(version) = recorded_version(&effective) {
        println!("bootImage: {version}");
    }
    let mut refused = false;
    match upgradeable(Some(&effective), &conditions, &cluster_version.docs_version()) {
        Ok(Verdict::Upgradeable) => println!("Upgradeable: True"),
        Ok(Verdict::Blocked { reason, message }) => {
            refused = true;
            println!("Upgradeable: False\nreason: {reason}\nmessage: {message}");
        }
        Err(e) => {
            eprintln!("error: the recorded boot image version: {e}");
            return Ok(ExitCode::FAILURE);
        }
    }
    if let Some(boot_image) = &args.boot_image {
        match check_node_boot_image(Some(&effective), boot_image) {
            Ok(NodeVerdict::Allowed) => println!("bootImage {boot_image}: allowed"),
            Ok(NodeVerdict::Refused { message }) => {
                refused = true;
                println!("bootImage {boot_image}: refused: {message}");
            }
            Err(e) => {
                eprintln!("error: --boot-image: {e}");
                return Ok(ExitCode::FAILURE);
            }
        }
    }
    Ok(if refused { ExitCode::FAILURE } else { ExitCode::SUCCESS })
}

/// The mode the operator would write when the status does not hold one yet.
fn computed_mode(
    configuration: &MachineConfiguration,
    infrastructure: Option<&mco_bootimage::Infrastructure>,
    cluster_version: &ClusterVersion,
) -> BootImageSkewEnforcementStatus {
    let infrastructure = infrastructure.cloned().unwrap_or_default();
    let support = infrastructure.boot_image_support();
    let managed = effective_managed_boot_images(configuration.spec.managed_boot_images.as_ref(), &support);
    let install_version = cluster_version.install_version();
    resolve_mode(&ModeInputs {
        spec: configuration.spec.boot_image_skew_enforcement.as_ref(),
        platform_type: infrastructure.platform_type(),
        // Offline there is no Provisioning object to read: the newer provisioning path.
        baremetal_legacy_provisioning: false,
        single_replica: infrastructure.is_single_replica(),
        platform_supported: support.supported,
        managed_boot_images: managed.as_ref(),
        current: None,
        install_version: &install_version,
    })
}

fn mode_name(status: &BootImageSkewEnforcementStatus) -> &'static str {
    match status.mode {
        Some(BootImageSkewEnforcementModeStatus::Automatic) => "Automatic",
        Some(BootImageSkewEnforcementModeStatus::Manual) => "Manual",
        Some(BootImageSkewEnforcementModeStatus::None) => "None",
        None => "unset",
    }
}

/// `ocpVersion X` or `rhcosVersion Y` of the mode in effect.
fn recorded_version(status: &BootImageSkewEnforcementStatus) -> Option<String> {
    let (ocp, rhcos) = match status.mode? {
        BootImageSkewEnforcementModeStatus::Automatic => {
            let a = status.automatic.as_ref()?;
            (a.ocp_version.clone(), a.rhcos_version.clone())
        }
        BootImageSkewEnforcementModeStatus::Manual => {
            let m = status.manual.as_ref()?;
            (m.ocp_version.clone(), m.rhcos_version.clone())
        }
        BootImageSkewEnforcementModeStatus::None => return None,
    };
    ocp.filter(|v| !v.is_empty())
        .map(|v| format!("ocpVersion {v}"))
        .or_else(|| rhcos.filter(|v| !v.is_empty()).map(|v| format!("rhcosVersion {v}")))
}
