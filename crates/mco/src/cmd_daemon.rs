//! `mco daemon`: what the node daemon applies to a node (`mco-apply`), one shot (for debugging and tests).

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context;
use mco_api::{MachineConfig, MachineConfiguration};
use mco_apply::apply::{self, Disruption, Node, Recovered, SystemdRunReboot};
use mco_apply::failpoint::Failpoints;
use mco_apply::files::Originals;
use mco_apply::firstboot::{self, Firstboot};
use mco_apply::os::sysroot::{OstreeSysroot, PullSource};
use mco_apply::os::{Bootc, OsBackend, RpmOstree};
use mco_apply::runner::HostRunner;
use mco_apply::units::HostSystemd;
use mco_apply::{plan, state, validate};

#[derive(Debug, clap::Subcommand)]
pub enum DaemonCommand {
    /// Apply a rendered config to a node root, rolling back on failure (MCO_FAILPOINT=<n>:error|crash
    /// injects a failure at the n-th step boundary).
    Apply {
        #[command(flatten)]
        node: NodeArgs,
        /// The config the node runs; the on-disk currentconfig wins when present. Default: empty.
        #[arg(long)]
        current: Option<PathBuf>,
        /// The config to apply.
        #[arg(long)]
        desired: PathBuf,
        /// A MachineConfiguration `cluster` whose node disruption policies (status, else spec merged
        /// with the defaults) pick the post-update actions; the defaults without it. A reboot on the
        /// root "/" reboots the host; a directory root gets ROOT/run/mco-reboot-requested.
        #[arg(long, value_name = "FILE", conflicts_with = "firstboot")]
        policies: Option<PathBuf>,
        /// Use the fixed rules of a node's first boot (unit changes reboot) instead of the policies.
        #[arg(long)]
        firstboot: bool,
        /// As if the `image-registry-override-drain` ConfigMap existed: registries.conf changes never drain.
        #[arg(long)]
        skip_registry_drain: bool,
    },
    /// Complete a node's first boot (before kubelet): apply the MachineConfig Ignition left in
    /// ROOT/etc/ignition-machine-config-encapsulated.json (OS image, kernel arguments, files),
    /// rename it to .bak and request the reboot; delete it if the machine already matches. A boot
    /// image too old for the served skew enforcement is refused (exit 1, the reason in
    /// ROOT/etc/issue.d/mco-boot-image-skew.issue) and nothing changes.
    Firstboot {
        #[command(flatten)]
        node: NodeArgs,
    },
    /// The node daemon in the cluster: watch this node's Node and move the node to its
    /// desiredConfig (drain/uncordon handshake, apply, reboot), reporting state and reason.
    Run(crate::cmd_daemon_run::RunArgs),
    /// Check a node root against a config; print one line per mismatch.
    Validate {
        #[command(flatten)]
        node: NodeArgs,
        /// The config the node should be running.
        #[arg(long)]
        config: PathBuf,
    },
}

#[derive(Debug, clap::Args)]
pub struct NodeArgs {
    /// The node's root directory ("/" on a host: systemctl and rpm are used there).
    #[arg(long)]
    root: PathBuf,
    /// ROOT is this host's root, mounted into the daemon's pod: host commands (systemctl, rpm-ostree,
    /// bootc, rpm) run chrooted into it and updates reboot the host, as with root "/".
    #[arg(long)]
    host: bool,
    /// How OS changes (image, kernel arguments, kernel type, extensions) are made. Without one,
    /// configs that change the OS are refused.
    #[arg(long, value_enum, conflicts_with = "sysroot")]
    os_backend: Option<OsBackendKind>,
    /// An OSTree sysroot directory (see `mco image install`): OS changes are staged there with
    /// libostree, images pulled with the root's etc/containers/registries.conf and
    /// var/lib/kubelet/config.json.
    #[arg(long, value_name = "DIR")]
    pub(crate) sysroot: Option<PathBuf>,
    /// The kernel command line file naming the booted deployment of --sysroot [default:
    /// SYSROOT/.mco-cmdline, written by `mco image install` and `mco image boot`].
    #[arg(long, value_name = "FILE", requires = "sysroot")]
    cmdline: Option<PathBuf>,
}

impl NodeArgs {
    /// ROOT when it is this host's root mounted elsewhere (the daemon's pod).
    pub(crate) fn mounted_host_root(&self) -> Option<&Path> {
        (self.host && self.root != Path::new("/")).then_some(self.root.as_path())
    }

    /// Whether ROOT is this host's root (systemd, the OS tools and reboots are real).
    pub(crate) fn is_host(&self) -> bool {
        self.host || self.root == Path::new("/")
    }

    /// The boot image's aleph file: in the OSTree sysroot when given, else in the root's /sysroot.
    pub(crate) fn aleph(&self) -> anyhow::Result<PathBuf> {
        match &self.sysroot {
            Some(sysroot) => Ok(sysroot.join(mco_os::aleph::ALEPH_FILE)),
            None => firstboot::host_aleph(&self.root),
        }
    }
}

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum OsBackendKind {
    RpmOstree,
    Bootc,
}

/// The node `args` describe: its root, systemd, OS backend and reboot.
pub(crate) fn node(args: &NodeArgs) -> Node {
    let host = args.is_host();
    let runner = Arc::new(HostRunner { root: (args.root != Path::new("/")).then(|| args.root.clone()) });
    let mut os: Option<Box<dyn OsBackend>> = args.os_backend.map(|kind| -> Box<dyn OsBackend> {
        match kind {
            OsBackendKind::RpmOstree => {
                Box::new(RpmOstree { runner: runner.clone(), arch: std::env::consts::ARCH.to_string() })
            }
            OsBackendKind::Bootc => Box::new(Bootc { runner: runner.clone(), cmdline: "/proc/cmdline".into() }),
        }
    });
    if let Some(sysroot) = &args.sysroot {
        let cmdline = args.cmdline.clone().unwrap_or_else(|| mco_os::sysroot::default_cmdline(sysroot));
        let pull = PullSource::NodeRoot(args.root.clone());
        os = Some(Box::new(OstreeSysroot { sysroot: sysroot.clone(), cmdline, pull }));
    }
    if host {
        Node {
            root: args.root.clone(),
            systemd: Box::new(HostSystemd { runner: runner.clone() }),
            os,
            originals: Originals { rpm: Some(runner.clone()) },
            reboot: Box::new(SystemdRunReboot { runner }),
        }
    } else {
        Node::directory_root(args.root.clone(), os)
    }
}

/// A MachineConfig file as a node applies it: with the OS image the controller pinned (a
/// rendered config exported from a cluster carries the pin; a tag without one is refused).
fn read_mc(path: &Path) -> anyhow::Result<MachineConfig> {
    let mc: MachineConfig = read_object(path, "machineconfiguration.openshift.io/v1", "MachineConfig")?;
    mc.with_pinned_os_image().with_context(|| format!("{}", path.display()))
}

fn read_configuration(path: &Path) -> anyhow::Result<MachineConfiguration> {
    read_object(path, "operator.openshift.io/v1", "MachineConfiguration")
}

/// The one object of a file, which must be of the given apiVersion and kind: an object of
/// another kind is not read as this one, whatever fields the two share.
fn read_object<T: serde::de::DeserializeOwned>(path: &Path, api_version: &str, kind: &str) -> anyhow::Result<T> {
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let value: serde_json::Value =
        mco_goser::yaml_object(&text).with_context(|| format!("{}: not a {kind}", path.display()))?;
    let field = |name: &str| value.get(name).and_then(serde_json::Value::as_str).unwrap_or_default().to_string();
    let (found_version, found_kind) = (field("apiVersion"), field("kind"));
    if (found_version.as_str(), found_kind.as_str()) != (api_version, kind) {
        anyhow::bail!(
            "{}: a {found_kind:?} of apiVersion {found_version:?}, not a {kind} ({api_version})",
            path.display()
        );
    }
    serde_json::from_value(value).with_context(|| format!("{}: not a {kind}", path.display()))
}

fn empty_mc() -> MachineConfig {
    MachineConfig::new("mco-empty-mc", Default::default())
}

fn name(mc: &MachineConfig) -> &str {
    mc.metadata.name.as_deref().unwrap_or("")
}

pub fn run(cmd: DaemonCommand) -> anyhow::Result<ExitCode> {
    match cmd {
        DaemonCommand::Apply { node: args, current, desired, policies, firstboot, skip_registry_drain } => {
            let node = node(&args);
            let desired = read_mc(&desired)?;
            let given = current.as_deref().map(read_mc).transpose()?;
            let disruption = if firstboot {
                Disruption::Firstboot { skip_registry_drain }
            } else {
                let policies = match policies {
                    Some(path) => mco_disruption::policies_of(&read_configuration(&path)?),
                    None => mco_disruption::default_cluster_policies(),
                };
                Disruption::Cluster { policies, skip_registry_drain }
            };
            match apply::recover(&node)? {
                Recovered::Nothing => {}
                Recovered::RolledBack => eprintln!("rolled back an interrupted update first"),
                Recovered::RebootRequested => eprintln!("an interrupted update was complete: requested its reboot"),
                Recovered::Completed => eprintln!("an interrupted update was complete and the node has rebooted"),
            }
            let on_disk = state::read_current_config(&node.root)?;
            let current = match (on_disk, given) {
                (Some(disk), given) => {
                    if let Some(g) = given.filter(|g| name(g) != name(&disk)) {
                        tracing::warn!("on-disk config {} overrides --current {}", name(&disk), name(&g));
                    }
                    disk
                }
                (None, given) => given.unwrap_or_else(empty_mc),
            };
            let failpoints = Failpoints::from_env()?;
            match apply::apply(&node, &current, &desired, &disruption, &failpoints) {
                Ok(done) => {
                    let plan = &done.disruption;
                    let actions: Vec<String> = plan.actions.iter().map(mco_disruption::describe).collect();
                    println!("applied {} -> {} ({} steps)", name(&current), name(&desired), done.steps);
                    println!("actions: {}", actions.join(", "));
                    // A one-shot apply does not drain; the decision is what the daemon would do.
                    println!("drain: {} ({})", if plan.drain { "yes" } else { "no" }, plan.drain_reason);
                    Ok(ExitCode::SUCCESS)
                }
                Err(e) => {
                    eprintln!("state: {}\nreason: {}", e.state(), e.reason());
                    Ok(ExitCode::FAILURE)
                }
            }
        }
        DaemonCommand::Firstboot { node: args } => {
            let node = node(&args);
            match firstboot::firstboot_with_aleph(&node, &args.aleph()?, &Failpoints::from_env()?) {
                Ok(Firstboot::NotFirstboot) => println!("not a first boot: no {}", firstboot::ENCAPSULATED),
                Ok(Firstboot::AlreadyMatches { config }) => {
                    println!("the machine already runs {config}: removed {}", firstboot::ENCAPSULATED)
                }
                Ok(Firstboot::Applied { config, applied }) => {
                    println!("applied {config} ({} steps); rebooting into it", applied.steps)
                }
                Ok(Firstboot::Refused { config, reason }) => {
                    eprintln!("refused to pivot to {config}: {reason}");
                    return Ok(ExitCode::FAILURE);
                }
                Err(e) => {
                    eprintln!("state: {}\nreason: {}", e.state(), e.reason());
                    return Ok(ExitCode::FAILURE);
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        DaemonCommand::Run(args) => crate::cmd_daemon_run::run(args),
        DaemonCommand::Validate { node: args, config } => {
            let node = node(&args);
            let mc = read_mc(&config)?;
            let ignition = match plan::ignition_of(name(&mc), &mc.spec) {
                Ok(i) => i,
                Err(e) => {
                    eprintln!("error: {e}");
                    return Ok(ExitCode::FAILURE);
                }
            };
            match validate::validate(&node.root, node.systemd.as_ref(), node.os.as_deref(), &mc.spec, &ignition) {
                Ok(()) => {
                    println!("node matches {}", name(&mc));
                    Ok(ExitCode::SUCCESS)
                }
                Err(problems) => {
                    for p in problems {
                        println!("{p}");
                    }
                    Ok(ExitCode::FAILURE)
                }
            }
        }
    }
}
