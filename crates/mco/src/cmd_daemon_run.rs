//! `mco daemon run --node NAME`: the node daemon in the cluster (crate `mco-agent`).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use mco_agent::{Settings, Stopped, Timing};

use crate::cmd_daemon::{NodeArgs, node};

#[derive(Debug, clap::Args)]
pub struct RunArgs {
    /// The Node this daemon runs on; it reads and writes no other.
    #[arg(long = "node", value_name = "NAME")]
    node_name: String,
    /// Kubeconfig file. Without it: $KUBECONFIG, ~/.kube/config or the in-cluster service account.
    #[arg(long)]
    kubeconfig: Option<PathBuf>,
    /// Answer `GET /healthz` (the pod's probes) on this address.
    #[arg(long, value_name = "ADDR")]
    health_listen: Option<std::net::SocketAddr>,
    #[command(flatten)]
    node: NodeArgs,
}

/// Runs until an update needs a reboot. On a host the reboot is under way and the process waits
/// for it to be stopped; on a directory root it exits 0 after writing ROOT/run/mco-reboot-requested,
/// and whoever runs the root starts it again as the rebooted node.
pub fn run(args: RunArgs) -> anyhow::Result<ExitCode> {
    let node = node(&args.node);
    let host = args.node.is_host();
    let settings = Settings { node_name: args.node_name, aleph: args.node.aleph(), timing: Timing::default() };
    let runtime = tokio::runtime::Runtime::new().context("starting the async runtime")?;
    runtime.block_on(async {
        if let Some(addr) = args.health_listen {
            tokio::spawn(mco_controller::health::listen(addr).await?);
        }
        let client = mco_controller::client(args.kubeconfig.as_deref()).await?;
        match mco_agent::run(client, node, settings).await {
            // Exiting would let systemd restart the daemon before the reboot, and it would then
            // report the update complete on a node that has not booted into it.
            Stopped::RebootRequested if host => std::future::pending().await,
            Stopped::RebootRequested => Ok(ExitCode::SUCCESS),
        }
    })
}
