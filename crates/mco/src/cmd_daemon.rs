//! `mco daemon`: the node agent's apply engine, one shot (for debugging and tests).

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context;
use mco_api::MachineConfig;
use mco_daemon::apply::{self, Node, PostAction, RequestFileReboot, SystemdRunReboot};
use mco_daemon::failpoint::Failpoints;
use mco_daemon::files::Originals;
use mco_daemon::os::{Bootc, OsBackend, RpmOstree};
use mco_daemon::runner::HostRunner;
use mco_daemon::units::{DirSystemd, HostSystemd};
use mco_daemon::{plan, state, validate};

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
        /// Reboot once the update is written (the root "/" reboots the host; a directory root gets
        /// ROOT/run/mco-reboot-requested).
        #[arg(long)]
        reboot: bool,
    },
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
    /// How OS changes (image, kernel arguments, kernel type, extensions) are made. Without one,
    /// configs that change the OS are refused.
    #[arg(long, value_enum)]
    os_backend: Option<OsBackendKind>,
}

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum OsBackendKind {
    RpmOstree,
    Bootc,
}

fn node(args: &NodeArgs) -> Node {
    let host = args.root == Path::new("/");
    let runner = Arc::new(HostRunner);
    let os: Option<Box<dyn OsBackend>> = args.os_backend.map(|kind| -> Box<dyn OsBackend> {
        match kind {
            OsBackendKind::RpmOstree => {
                Box::new(RpmOstree { runner: runner.clone(), arch: std::env::consts::ARCH.to_string() })
            }
            OsBackendKind::Bootc => Box::new(Bootc { runner: runner.clone(), cmdline: "/proc/cmdline".into() }),
        }
    });
    if host {
        Node {
            root: args.root.clone(),
            systemd: Box::new(HostSystemd { runner: runner.clone() }),
            os,
            originals: Originals { rpm: Some(runner.clone()) },
            reboot: Box::new(SystemdRunReboot { runner }),
        }
    } else {
        Node {
            root: args.root.clone(),
            systemd: Box::new(DirSystemd { root: args.root.clone() }),
            os,
            originals: Originals::default(),
            reboot: Box::new(RequestFileReboot { root: args.root.clone() }),
        }
    }
}

fn read_mc(path: &Path) -> anyhow::Result<MachineConfig> {
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    serde_yaml::from_str(&text).with_context(|| format!("{}: not a MachineConfig", path.display()))
}

fn empty_mc() -> MachineConfig {
    MachineConfig::new("mco-empty-mc", Default::default())
}

fn name(mc: &MachineConfig) -> &str {
    mc.metadata.name.as_deref().unwrap_or("")
}

pub fn run(cmd: DaemonCommand) -> anyhow::Result<ExitCode> {
    match cmd {
        DaemonCommand::Apply { node: args, current, desired, reboot } => {
            let node = node(&args);
            let desired = read_mc(&desired)?;
            let given = current.as_deref().map(read_mc).transpose()?;
            if apply::recover(&node)? {
                eprintln!("rolled back an interrupted update first");
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
            let post = if reboot { PostAction::Reboot } else { PostAction::None };
            match apply::apply(&node, &current, &desired, post, &failpoints) {
                Ok(done) => {
                    println!("applied {} -> {} ({} steps)", name(&current), name(&desired), done.steps);
                    Ok(ExitCode::SUCCESS)
                }
                Err(e) => {
                    eprintln!("state: {}\nreason: {}", e.state(), e.reason());
                    Ok(ExitCode::FAILURE)
                }
            }
        }
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
