//! The machine-config controller (`mco controller`): today the render controller
//! ([`render`]), run by whichever instance holds the leader Lease ([`leader`]).
//!
//! Decisions are pure functions ([`render::plan`], [`conditions`], [`leader::step`]) with table
//! tests; the IO shells around them are thin and tested against a real API server
//! (`tests/`, through `mco-testenv`).

pub mod conditions;
pub mod leader;
pub mod render;

use std::path::PathBuf;

use anyhow::Context as _;
use fn_error_context::context;
use kube::Client;
use kube::config::{KubeConfigOptions, Kubeconfig};
use mco_render::ControllerVersion;

/// Everything `mco controller` is configured with.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Without one: the in-cluster service account, or `$KUBECONFIG`/`~/.kube/config`.
    pub kubeconfig: Option<PathBuf>,
    pub version: ControllerVersion,
    pub render: render::controller::Options,
    pub lease: LeaseSettings,
}

/// Which Lease the instances compete for, and as whom.
#[derive(Debug, Clone)]
pub struct LeaseSettings {
    pub namespace: String,
    pub name: String,
    pub identity: String,
    pub timing: leader::Timing,
}

/// A client for `kubeconfig`, or the environment's default configuration.
#[context("Connecting to the API server")]
pub async fn client(kubeconfig: Option<&std::path::Path>) -> anyhow::Result<Client> {
    let config = match kubeconfig {
        Some(path) => {
            let kubeconfig = Kubeconfig::read_from(path).with_context(|| format!("reading {}", path.display()))?;
            kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default()).await?
        }
        None => kube::Config::infer().await?,
    };
    Ok(Client::try_from(config)?)
}

/// Waits for the leader Lease, then runs the controllers until leadership is lost (an error:
/// the process must exit so that it cannot act on stale state) or SIGINT/SIGTERM arrives (the
/// Lease is then released so that another instance takes over at once).
pub async fn run(settings: Settings) -> anyhow::Result<()> {
    let client = client(settings.kubeconfig.as_deref()).await?;
    let lease = &settings.lease;
    let elector =
        leader::LeaderElector::new(client.clone(), &lease.namespace, &lease.name, &lease.identity, lease.timing);
    tracing::info!(lease = %format!("{}/{}", lease.namespace, lease.name), identity = %lease.identity, "waiting to become the leader");
    tokio::select! {
        () = elector.acquire() => {}
        signal = shutdown_signal() => return signal,
    }
    tracing::info!("became the leader; starting the render controller");
    tokio::select! {
        lost = elector.hold() => Err(lost.into()),
        () = render::controller::run(client, settings.version, settings.render) => {
            anyhow::bail!("the render controller stopped")
        }
        signal = shutdown_signal() => {
            signal?;
            elector.release().await.context("releasing the leader lease")?;
            tracing::info!("stopped");
            Ok(())
        }
    }
}

/// [`run`] on a new multi-threaded runtime, for the synchronous `mco` command line.
pub fn main(settings: Settings) -> anyhow::Result<()> {
    tokio::runtime::Runtime::new().context("starting the async runtime")?.block_on(run(settings))
}

async fn shutdown_signal() -> anyhow::Result<()> {
    let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    tokio::select! {
        result = tokio::signal::ctrl_c() => result?,
        _ = terminate.recv() => {}
    }
    tracing::info!("shutting down");
    Ok(())
}

/// `<hostname>_<pid>`: unique among instances, and says where the leader runs.
pub fn default_identity() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    format!("{}_{}", host.trim(), std::process::id())
}
