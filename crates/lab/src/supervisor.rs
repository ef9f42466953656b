//! `mco lab supervise`: brings the whole lab up, keeps it running, and takes it down on SIGTERM.
//!
//! Order: API server + CRDs → kube-controller-manager + kube-scheduler → registry + images →
//! certificates → cluster objects → controller
//! (which renders the pools) → server → nodes, one after another (install, Ignition, firstboot,
//! reboot, register, daemon). Then it adds the nodes `mco lab add-node` asks for ([`crate::request`]),
//! each provisioned in a task of its own, and plays the machines' part: a daemon that exits after
//! requesting a reboot is "rebooted" (NotReady, boot the default deployment, Ready, daemon again);
//! one that exits otherwise is restarted with a backoff, as systemd would. Until the nodes run
//! kubelets, it also plays their part: it registers each Node, renews its Lease, and removes the pods
//! evicted from it, as the kubelet would once the containers stopped.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Node, Pod, ServiceAccount};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{DeleteParams, ListParams, PostParams};
use kube::runtime::wait::{await_condition, conditions};
use kube::{Api, Client};
use mco_api::MachineConfigPool;
use mco_api::constants::{MCO_NAMESPACE, WORKER_POOL};
use tokio::process::Command;
use tokio::signal::unix::{SignalKind, signal};
use tokio::sync::OnceCell;
use tokio::task::JoinSet;

use crate::control_plane::ControlPlane;
use crate::layout::Layout;
use crate::manifests::{ClusterInputs, Platform, cloud_objects, cluster_objects, config_crds};
use crate::node::{Answer, Boot, LabNode, Provisioned, ask_server};
use crate::process::{Service, free_ports, run_tool};
use crate::request::{self, AddNode, BootImage};
use crate::state::{self, LabState, NotJoined, Phase};
use crate::{apply, images};

/// How long the controller gets to render the pools.
const RENDER_TIMEOUT: Duration = Duration::from_secs(180);
/// How often the supervisor looks at its processes and the lab nodes' pods.
const TICK: Duration = Duration::from_secs(1);
/// How often a node's Lease is renewed (the kubelet's default).
const HEARTBEAT: Duration = Duration::from_secs(10);
/// Where the kubelets' Leases live.
const NODE_LEASE_NAMESPACE: &str = "kube-node-lease";
/// The service account whose token nodes bootstrap with (upstream's name).
const NODE_BOOTSTRAPPER: &str = "node-bootstrapper";
/// A lab lives for days at most.
const BOOTSTRAP_TOKEN_SECONDS: i64 = 7 * 24 * 3600;
/// Longest wait before a crashed daemon is started again.
const MAX_RESTART_DELAY: Duration = Duration::from_secs(30);
/// How long the Machine Config Server gets to serve its first config.
const SERVING_TIMEOUT: Duration = Duration::from_secs(120);
/// How long the API server gets to serve a new CRD.
const CRD_TIMEOUT: Duration = Duration::from_secs(60);

#[derive(Debug, Clone)]
pub struct Options {
    pub dir: PathBuf,
    pub workers: usize,
    pub platform: Platform,
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
    /// The Node object's uid, which its Lease is owned by.
    uid: String,
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
        platform: options.platform,
        server: None,
        registry: None,
        os_image: None,
        nodes: Vec::new(),
        pending: Vec::new(),
        not_joined: Vec::new(),
        pools: Default::default(),
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

    progress(layout, report, "starting kube-controller-manager and kube-scheduler")?;
    let mut control_plane = ControlPlane::start(&env, layout).await?;

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
    apply::apply(&client, &config_crds()).await?;
    wait_established(&client, &config_crds()).await?;
    let objects = cluster_objects(&ClusterInputs {
        os_image: &lab_images.node,
        registry: &registry,
        controller_version_raw: &options.controller_version_raw,
        platform: options.platform,
    });
    apply::apply(&client, &objects).await?;
    env.mark_controller_config_completed().await?;
    let server_url = format!("https://127.0.0.1:{server_port}");
    if options.platform.has_machinesets() {
        // The stub the installer would put in the user-data secret: the worker pool's config
        // from this lab's server (no boot image version: a MachineSet's image says nothing).
        let stub = run_tool(
            mco,
            [
                "ignition".as_ref(),
                "stub".as_ref(),
                "--pool".as_ref(),
                WORKER_POOL.as_ref(),
                "--url".as_ref(),
                server_url.as_ref(),
                "--ca".as_ref(),
                certs.join("ca.crt").as_os_str(),
            ],
            &[],
            &layout.log("cloud"),
        )
        .await?;
        apply::apply(&client, &cloud_objects(stub.trim_end())).await?;
    }

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
    report.server = Some(server_url.clone());

    if let Err(e) = wait_serving(&server_url, &certs.join("ca.crt")).await {
        let pool = Api::<MachineConfigPool>::all(client.clone()).get(WORKER_POOL).await;
        let status = pool.map(|p| serde_json::to_string(&p.status)).map_err(|e| e.to_string());
        anyhow::bail!(
            "{e:#}\npool {WORKER_POOL} status: {status:?}\ncontroller log:\n{}\nserver log:\n{}",
            controller.tail(),
            server.tail()
        );
    }
    crate::node::write_shims(layout)?;
    let nodes_api: Api<Node> = Api::all(client.clone());
    let provisioner = Provisioner {
        mco: mco.to_path_buf(),
        layout: layout.clone(),
        registry,
        server: server_url,
        boot: lab_images.boot.clone(),
        old_boot: Arc::default(),
    };
    let mut nodes = Vec::new();
    for index in 0..options.workers {
        let node = LabNode::new(layout, WORKER_POOL, index);
        report.pools.insert(node.name.clone(), node.pool.clone());
        progress(layout, report, format!("booting node {} ({}/{})", node.name, index + 1, options.workers))?;
        let request = AddNode {
            name: node.name.clone(),
            pool: node.pool.clone(),
            boot_image: BootImage::Current,
            version_header: true,
        };
        if let Provisioned::Refused { reason } = provisioner.provision(&node, &request).await? {
            anyhow::bail!("node {} was refused: {reason}", node.name);
        }
        nodes.push(join(mco, layout, &kubeconfig, &nodes_api, node, report).await?);
    }

    report.phase = Phase::Ready;
    progress(layout, report, format!("ready: {} nodes", nodes.len()))?;
    let mut joining: JoinSet<(LabNode, anyhow::Result<Provisioned>)> = JoinSet::new();
    let mut tick = tokio::time::interval(TICK);
    let mut heartbeat = tokio::time::interval(HEARTBEAT);
    let leases: Api<Lease> = Api::namespaced(client.clone(), NODE_LEASE_NAMESPACE);
    loop {
        tokio::select! {
            _ = terminate.recv() => break,
            _ = interrupt.recv() => break,
            Some(joined) = joining.join_next(), if !joining.is_empty() => {
                let (node, outcome) = match joined {
                    Ok(joined) => joined,
                    Err(e) => {
                        tracing::error!("a node's provisioning task ended: {e}");
                        continue;
                    }
                };
                report.pending.retain(|n| n != &node.name);
                let name = node.name.clone();
                let reason = match outcome {
                    Ok(Provisioned::Booted) => match join(mco, layout, &kubeconfig, &nodes_api, node, report).await {
                        Ok(running) => {
                            nodes.push(running);
                            None
                        }
                        Err(e) => Some(format!("{e:#}")),
                    },
                    Ok(Provisioned::Refused { reason }) => Some(reason),
                    Err(e) => Some(format!("{e:#}")),
                };
                if let Some(reason) = reason {
                    tracing::warn!(node = name, "did not join: {reason}");
                    report.not_joined.push(NotJoined { name, reason });
                }
                progress(layout, report, format!("ready: {} nodes", nodes.len()))?;
            }
            _ = heartbeat.tick() => {
                for running in &nodes {
                    if let Err(e) = running.node.renew_lease(&leases, &running.uid).await {
                        tracing::warn!(node = running.node.name, "{e:#}");
                    }
                }
            }
            _ = tick.tick() => {
                if let Err(e) = control_plane.look_after() {
                    tracing::warn!("{e:#}");
                }
                for (node, request) in take_requests(layout, report)? {
                    let provisioner = provisioner.clone();
                    joining.spawn(async move {
                        let outcome = provisioner.provision(&node, &request).await;
                        (node, outcome)
                    });
                }
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

    joining.shutdown().await;
    progress(layout, report, "stopping")?;
    for running in nodes {
        if let Some(daemon) = running.daemon {
            daemon.stop().await;
        }
    }
    server.stop().await;
    controller.stop().await;
    registry_service.stop().await;
    control_plane.stop().await;
    drop(env);
    Ok(())
}

/// What provisioning a node needs; cloned into each node's task.
#[derive(Clone)]
struct Provisioner {
    mco: PathBuf,
    layout: Layout,
    registry: String,
    server: String,
    /// The current boot image.
    boot: String,
    /// The too-old boot image, built for the first node that asks.
    old_boot: Arc<OnceCell<String>>,
}

impl Provisioner {
    async fn provision(&self, node: &LabNode, request: &AddNode) -> anyhow::Result<Provisioned> {
        let image = match request.boot_image {
            BootImage::Current => self.boot.clone(),
            BootImage::Old => self
                .old_boot
                .get_or_try_init(|| images::build_old_boot(&self.mco, &self.layout, &self.registry))
                .await?
                .clone(),
        };
        let boot = Boot { image, version_header: request.version_header };
        node.provision(&self.mco, &self.layout, &boot, &self.server).await
    }
}

/// A provisioned node joins: its Node registered, its daemon started, the state says so.
async fn join(
    mco: &Path,
    layout: &Layout,
    kubeconfig: &Path,
    nodes_api: &Api<Node>,
    node: LabNode,
    report: &mut LabState,
) -> anyhow::Result<RunningNode> {
    let uid = node.register(nodes_api).await?;
    let daemon = start_daemon(mco, layout, &node, kubeconfig)?;
    report.nodes.push(node.name.clone());
    Ok(RunningNode { node, uid, daemon: Some(daemon), restarts: 0, start_at: None })
}

/// Takes the waiting `mco lab add-node` requests: each valid one is recorded as pending (before
/// its file goes, so whoever waits for it never sees neither) and returned with its node; an
/// invalid one is recorded as not joined with the reason, unless it names a node that is there.
fn take_requests(layout: &Layout, report: &mut LabState) -> anyhow::Result<Vec<(LabNode, AddNode)>> {
    let mut taken = Vec::new();
    for (file, request) in request::waiting_requests(layout) {
        let checked = request.and_then(|r| request::check(&r, report).map(|()| r).map_err(anyhow::Error::msg));
        match checked {
            Ok(request) => {
                report.not_joined.retain(|n| n.name != request.name);
                report.pending.push(request.name.clone());
                report.pools.insert(request.name.clone(), request.pool.clone());
                let index = report.nodes.len() + report.pending.len() - 1;
                taken.push((LabNode::named(layout, &request.pool, &request.name, index), request));
            }
            Err(e) => {
                let name = file.file_stem().unwrap_or_default().to_string_lossy().into_owned();
                tracing::warn!(node = name, "ignoring a node request: {e:#}");
                if !report.nodes.contains(&name) && !report.pending.contains(&name) {
                    report.not_joined.retain(|n| n.name != name);
                    report.not_joined.push(NotJoined { name, reason: format!("{e:#}") });
                }
            }
        }
        state::write(&layout.state_file(), report)?;
        std::fs::remove_file(&file).with_context(|| format!("removing {}", file.display()))?;
    }
    Ok(taken)
}

/// Waits until the server hands out the worker pool's config (its caches are filled): Ignition
/// gives up on a server that cannot serve for `timeouts.httpTotal`.
async fn wait_serving(server: &str, ca: &Path) -> anyhow::Result<()> {
    let deadline = Instant::now() + SERVING_TIMEOUT;
    loop {
        let answer = ask_server(server, WORKER_POOL, ca, None).await;
        match answer {
            Ok(Answer::Config) => return Ok(()),
            _ if Instant::now() > deadline => {
                anyhow::bail!("the Machine Config Server does not serve configs after {SERVING_TIMEOUT:?}: {answer:?}")
            }
            _ => tokio::time::sleep(Duration::from_millis(500)).await,
        }
    }
}

/// Waits until the API server serves every CRD of `crds`.
async fn wait_established(client: &Client, crds: &[serde_json::Value]) -> anyhow::Result<()> {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    for crd in crds {
        let name = crd["metadata"]["name"].as_str().unwrap_or_default();
        tokio::time::timeout(CRD_TIMEOUT, await_condition(api.clone(), name, conditions::is_crd_established()))
            .await
            .with_context(|| format!("CRD {name} not established after {CRD_TIMEOUT:?}"))??;
    }
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
