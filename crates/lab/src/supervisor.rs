//! `mco lab supervise`: brings the whole lab up, keeps it running, and takes it down on SIGTERM.
//!
//! Order: API server + CRDs → registry + images → certificates → cluster objects → controller
//! (which renders the pools) → server → nodes, one after another (install, Ignition, firstboot,
//! reboot, register, daemon). Then it plays the machines' part: a daemon that exits after
//! requesting a reboot is "rebooted" (NotReady, boot the default deployment, Ready, daemon again);
//! one that exits otherwise is restarted with a backoff, as systemd would; pods evicted from a lab
//! node are removed, as their kubelet would once the containers stopped.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::{Node, Pod, ServiceAccount};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{DeleteParams, ListParams, PostParams};
use kube::{Api, Client};
use mco_api::MachineConfigPool;
use mco_api::constants::{MCO_NAMESPACE, WORKER_POOL};
use tokio::process::Command;
use tokio::signal::unix::{SignalKind, signal};

use crate::layout::Layout;
use crate::manifests::{ClusterInputs, cluster_objects};
use crate::node::LabNode;
use crate::process::{Service, run_tool};
use crate::state::{self, LabState, Phase};
use crate::{apply, images};

/// How long the controller gets to render the pools.
const RENDER_TIMEOUT: Duration = Duration::from_secs(180);
/// How often the supervisor looks at its processes and the lab nodes' pods.
const TICK: Duration = Duration::from_secs(1);
/// The service account whose token nodes bootstrap with (upstream's name).
const NODE_BOOTSTRAPPER: &str = "node-bootstrapper";
/// A lab lives for days at most.
const BOOTSTRAP_TOKEN_SECONDS: i64 = 7 * 24 * 3600;
/// Longest wait before a crashed daemon is started again.
const MAX_RESTART_DELAY: Duration = Duration::from_secs(30);

#[derive(Debug, Clone)]
pub struct Options {
    pub dir: PathBuf,
    pub workers: usize,
    /// The `mco` binary the services and nodes run (this one).
    pub mco: PathBuf,
    /// `generated-by-version` the controller was built with.
    pub controller_version_raw: String,
}

/// What to do when a node's daemon has exited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnExit {
    /// It asked for a reboot: boot the default deployment and start it again.
    Reboot,
    /// It failed or stopped: start it again after this long.
    Restart(Duration),
}

/// `restarts` = how many times in a row the daemon exited without a reboot request.
pub fn on_daemon_exit(reboot_requested: bool, restarts: u32) -> OnExit {
    if reboot_requested {
        OnExit::Reboot
    } else {
        OnExit::Restart(Duration::from_secs(1u64 << restarts.min(5)).min(MAX_RESTART_DELAY))
    }
}

struct RunningNode {
    node: LabNode,
    daemon: Option<Service>,
    restarts: u32,
    start_at: Option<Instant>,
}

/// Runs the lab until SIGTERM/SIGINT; the state file says how far it got.
pub async fn supervise(options: Options) -> anyhow::Result<()> {
    let layout = Layout::new(&options.dir);
    std::fs::create_dir_all(layout.logs()).with_context(|| format!("creating {}", layout.logs().display()))?;
    std::fs::write(layout.pid_file(), format!("{}\n", std::process::id()))?;
    let mut report = LabState {
        phase: Phase::Starting,
        message: "starting".into(),
        kubeconfig: layout.kubeconfig(),
        server: None,
        registry: None,
        os_image: None,
        nodes: Vec::new(),
    };
    let result = run(&options, &layout, &mut report).await;
    match &result {
        Ok(()) => {
            report.phase = Phase::Stopped;
            report.message = "stopped".into();
        }
        Err(e) => {
            report.phase = Phase::Failed;
            report.message = format!("{e:#}");
        }
    }
    state::write(&layout.state_file(), &report)?;
    let _ = std::fs::remove_file(layout.pid_file());
    result
}

fn progress(layout: &Layout, report: &mut LabState, message: impl Into<String>) -> anyhow::Result<()> {
    report.message = message.into();
    tracing::info!("{}", report.message);
    state::write(&layout.state_file(), report)
}

async fn run(options: &Options, layout: &Layout, report: &mut LabState) -> anyhow::Result<()> {
    let mut terminate = signal(SignalKind::terminate())?;
    let mut interrupt = signal(SignalKind::interrupt())?;
    let mco = options.mco.as_path();

    progress(layout, report, "starting etcd and kube-apiserver")?;
    let env = mco_testenv::TestEnv::start_in(&layout.dir).await.map_err(|e| anyhow::anyhow!("{e:?}"))?;
    std::fs::copy(env.kubeconfig(), layout.kubeconfig()).context("copying the kubeconfig")?;
    let client = env.client();
    let kubeconfig = layout.kubeconfig();

    progress(layout, report, "starting the OCI registry and building the OS images")?;
    let [registry_port, server_port, insecure_port] = free_ports()?;
    let registry_service = images::start_registry(layout, registry_port).await?;
    let registry = format!("127.0.0.1:{registry_port}");
    report.registry = Some(registry.clone());
    let lab_images = images::build(mco, layout, &registry).await?;
    report.os_image = Some(lab_images.node.clone());

    progress(layout, report, "creating the cluster's pools, base configs and ControllerConfig")?;
    let certs = layout.certs();
    run_tool(
        mco,
        [
            "certs".as_ref(),
            "create".as_ref(),
            "--dir".as_ref(),
            certs.as_os_str(),
            "--san".as_ref(),
            "127.0.0.1,localhost".as_ref(),
        ],
        &[],
        &layout.log("certs"),
    )
    .await?;
    let objects = cluster_objects(&ClusterInputs {
        os_image: &lab_images.node,
        registry: &registry,
        controller_version_raw: &options.controller_version_raw,
    });
    apply::apply(&client, &objects).await?;
    env.mark_controller_config_completed().await?;

    progress(layout, report, "starting the controller; waiting for the pools to be rendered")?;
    let mut controller_cmd = Command::new(mco);
    controller_cmd.arg("controller").arg("--kubeconfig").arg(&kubeconfig).env("MCO_LOG", "info");
    let controller = Service::spawn("controller", controller_cmd, &layout.log("controller"))?;
    wait_rendered(&client, WORKER_POOL).await?;

    progress(layout, report, "starting the Machine Config Server")?;
    let token_dir = bootstrap_token(&client, env.dir(), layout).await?;
    let mut server_cmd = Command::new(mco);
    server_cmd
        .arg("server")
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .arg("--bootstrap-token-dir")
        .arg(&token_dir)
        .arg("--tls-cert")
        .arg(certs.join("tls.crt"))
        .arg("--tls-key")
        .arg(certs.join("tls.key"))
        .arg("--listen")
        .arg(format!("127.0.0.1:{server_port}"))
        .arg("--insecure-listen")
        .arg(format!("127.0.0.1:{insecure_port}"))
        .env("MCO_LOG", "info");
    let mut server = Service::spawn("server", server_cmd, &layout.log("server"))?;
    images::wait_for_port(&mut server, server_port).await?;
    let server_url = format!("https://127.0.0.1:{server_port}");
    report.server = Some(server_url.clone());

    crate::node::write_shims(layout)?;
    let nodes_api: Api<Node> = Api::all(client.clone());
    let mut nodes = Vec::new();
    for index in 0..options.workers {
        let node = LabNode::new(layout, WORKER_POOL, index);
        progress(layout, report, format!("booting node {} ({}/{})", node.name, index + 1, options.workers))?;
        node.provision(mco, layout, &lab_images.boot, &server_url).await?;
        node.register(&nodes_api).await?;
        let daemon = start_daemon(mco, layout, &node, &kubeconfig)?;
        report.nodes.push(node.name.clone());
        nodes.push(RunningNode { node, daemon: Some(daemon), restarts: 0, start_at: None });
    }

    report.phase = Phase::Ready;
    progress(layout, report, format!("ready: {} nodes", nodes.len()))?;
    let mut tick = tokio::time::interval(TICK);
    loop {
        tokio::select! {
            _ = terminate.recv() => break,
            _ = interrupt.recv() => break,
            _ = tick.tick() => {
                for running in &mut nodes {
                    if let Err(e) = look_after(mco, layout, &kubeconfig, &nodes_api, running).await {
                        tracing::warn!(node = running.node.name, "{e:#}");
                    }
                }
                if let Err(e) = remove_evicted_pods(&client, &report.nodes).await {
                    tracing::warn!("removing evicted pods: {e:#}");
                }
            }
        }
    }

    progress(layout, report, "stopping")?;
    for running in nodes {
        if let Some(daemon) = running.daemon {
            daemon.stop().await;
        }
    }
    server.stop().await;
    controller.stop().await;
    registry_service.stop().await;
    drop(env);
    Ok(())
}

fn start_daemon(mco: &Path, layout: &Layout, node: &LabNode, kubeconfig: &Path) -> anyhow::Result<Service> {
    let mut command = Command::new(mco);
    command
        .args(["daemon", "run", "--node", &node.name])
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(node.node_args())
        .env("MCO_LOG", "info")
        .env("CONTAINERS_REGISTRIES_CONF", layout.registries_conf());
    Service::spawn(&format!("daemon {}", node.name), command, &layout.log(&node.name))
}

/// Reboots or restarts a node's daemon that has exited; starts one whose restart delay passed.
async fn look_after(
    mco: &Path,
    layout: &Layout,
    kubeconfig: &Path,
    nodes_api: &Api<Node>,
    running: &mut RunningNode,
) -> anyhow::Result<()> {
    if let Some(daemon) = running.daemon.as_mut()
        && let Some(status) = daemon.exited()?
    {
        running.daemon = None;
        match on_daemon_exit(running.node.reboot_requested(), running.restarts) {
            OnExit::Reboot => {
                tracing::info!(node = running.node.name, "rebooting");
                running.node.set_ready(nodes_api, false).await?;
                running.node.reboot(mco, layout).await?;
                running.node.set_ready(nodes_api, true).await?;
                running.restarts = 0;
                running.start_at = Some(Instant::now());
            }
            OnExit::Restart(delay) => {
                tracing::warn!(node = running.node.name, %status, "daemon exited; restarting in {delay:?}");
                running.restarts += 1;
                running.start_at = Some(Instant::now() + delay);
            }
        }
    }
    if running.daemon.is_none() && running.start_at.is_some_and(|at| at <= Instant::now()) {
        running.daemon = Some(start_daemon(mco, layout, &running.node, kubeconfig)?);
        running.start_at = None;
    }
    Ok(())
}

/// Deletes (grace period 0) the pods on lab nodes that are being deleted: no kubelet runs there
/// to stop their containers and confirm.
async fn remove_evicted_pods(client: &Client, lab_nodes: &[String]) -> anyhow::Result<()> {
    let pods: Api<Pod> = Api::all(client.clone());
    for pod in pods.list(&ListParams::default()).await? {
        let on_lab_node = pod.spec.as_ref().and_then(|s| s.node_name.as_ref()).is_some_and(|n| lab_nodes.contains(n));
        if on_lab_node && pod.metadata.deletion_timestamp.is_some() {
            let namespace = pod.metadata.namespace.as_deref().unwrap_or("default");
            let name = pod.metadata.name.as_deref().unwrap_or_default();
            let api: Api<Pod> = Api::namespaced(client.clone(), namespace);
            api.delete(name, &DeleteParams { grace_period_seconds: Some(0), ..Default::default() }).await?;
        }
    }
    Ok(())
}

async fn wait_rendered(client: &Client, pool: &str) -> anyhow::Result<()> {
    let pools: Api<MachineConfigPool> = Api::all(client.clone());
    let deadline = Instant::now() + RENDER_TIMEOUT;
    loop {
        let current = pools.get(pool).await?;
        if current.spec.configuration.as_ref().and_then(|c| c.name.as_deref()).is_some_and(|n| !n.is_empty()) {
            return Ok(());
        }
        if Instant::now() > deadline {
            anyhow::bail!(
                "pool {pool} was not rendered within {RENDER_TIMEOUT:?} (see the controller's log and the pool's \
                 conditions in namespace {MCO_NAMESPACE})"
            );
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// The node-bootstrapper service account's token and the API server's CA, in the directory the
/// server builds the nodes' kubeconfig from. No token controller runs in the lab, so the token
/// comes from the TokenRequest API.
async fn bootstrap_token(client: &Client, apiserver_dir: &Path, layout: &Layout) -> anyhow::Result<PathBuf> {
    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), MCO_NAMESPACE);
    if accounts.get_opt(NODE_BOOTSTRAPPER).await?.is_none() {
        let account = ServiceAccount {
            metadata: ObjectMeta { name: Some(NODE_BOOTSTRAPPER.into()), ..Default::default() },
            ..Default::default()
        };
        accounts.create(&PostParams::default(), &account).await.context("creating the node-bootstrapper account")?;
    }
    let request = TokenRequest {
        spec: Some(TokenRequestSpec { expiration_seconds: Some(BOOTSTRAP_TOKEN_SECONDS), ..Default::default() }),
        ..Default::default()
    };
    let token = accounts
        .create_token_request(NODE_BOOTSTRAPPER, &PostParams::default(), &request)
        .await
        .context("requesting a node-bootstrapper token")?
        .status
        .and_then(|status| status.token)
        .context("the token request returned no token")?;
    let dir = layout.dir.join("bootstrap-token");
    std::fs::create_dir_all(&dir)?;
    std::fs::write(dir.join("token"), token)?;
    std::fs::copy(apiserver_dir.join("ca.crt"), dir.join("ca.crt")).context("copying the API server's CA")?;
    Ok(dir)
}

/// Three ports free on the loopback interface now.
fn free_ports() -> anyhow::Result<[u16; 3]> {
    let listeners = [(); 3].map(|_| std::net::TcpListener::bind("127.0.0.1:0"));
    let mut ports = [0; 3];
    for (port, listener) in ports.iter_mut().zip(listeners) {
        *port = listener.context("finding a free port")?.local_addr()?.port();
    }
    Ok(ports)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exits_reboot_when_asked_and_restart_with_a_bounded_backoff() {
        for (requested, restarts, expected) in [
            (true, 0, OnExit::Reboot),
            (true, 7, OnExit::Reboot),
            (false, 0, OnExit::Restart(Duration::from_secs(1))),
            (false, 1, OnExit::Restart(Duration::from_secs(2))),
            (false, 4, OnExit::Restart(Duration::from_secs(16))),
            (false, 5, OnExit::Restart(MAX_RESTART_DELAY)),
            (false, 60, OnExit::Restart(MAX_RESTART_DELAY)),
        ] {
            assert_eq!(on_daemon_exit(requested, restarts), expected, "{requested} {restarts}");
        }
    }
}
