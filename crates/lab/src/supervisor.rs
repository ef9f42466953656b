//! `mco lab supervise`: brings the whole lab up, keeps it running, and takes it down on SIGTERM.
//!
//! Everything runs in the lab's network namespace ([`crate::network`]); the host reaches the API
//! server, the registry and the Machine Config Server through loopback ports forwarded into it.
//!
//! Order: network → API server + CRDs → kube-controller-manager + kube-scheduler → registry +
//! images → certificates → cluster objects → controller (which renders the pools) → server →
//! nodes, one after another (install, Ignition, firstboot, reboot, then the machine's containerd
//! and kubelet, which registers the Node; the supervisor gives it its pool's role label, as an
//! installer would), kube-proxy once the first node is there → mco installed from `deploy/` (its
//! daemons as a DaemonSet's pods on every node, its controller as a Deployment's). Then it adds the
//! nodes `mco lab add-node` asks for ([`crate::request`]), each provisioned in a task of its own,
//! and plays the machines' firmware: a machine whose systemd rebooted it boots its bootloader's
//! default deployment again; one that powered off or crashed stays down, with the reason.

use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::{Node, ServiceAccount};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Patch, PatchParams, PostParams};
use kube::runtime::wait::{await_condition, conditions};
use kube::{Api, Client};
use mco_api::MachineConfigPool;
use mco_api::constants::{MASTER_POOL, MCO_NAMESPACE, WORKER_POOL};
use serde_json::json;
use tokio::process::Command;
use tokio::signal::unix::{SignalKind, signal};
use tokio::sync::OnceCell;
use tokio::task::JoinSet;

use crate::boot::{BootSpec, Halt};
use crate::control_plane::ControlPlane;
use crate::disk::Disks;
use crate::install::{self, Overlay};
use crate::layout::Layout;
use crate::machine::{Machine, MachineSpec};
use crate::manifests::{
    ClusterInputs, Platform, cloud_objects, cluster_objects, config_crds, image_config, image_config_crds,
};
use crate::node::{Answer, Boot, LabNode, Provisioned, ask_server};
use crate::node_os::MachineSettings;
use crate::process::{Service, run_tool};
use crate::request::{self, AddNode, BootImage};
use crate::state::{self, LabState, NodeReason, Phase};
use crate::{apply, images, network};

/// How long the controller gets to render the pools.
const RENDER_TIMEOUT: Duration = Duration::from_secs(180);
/// How often the supervisor looks at its processes and at the nodes' reboot requests (a node
/// that asked waits for this, at every update of the scenarios).
const TICK: Duration = Duration::from_millis(250);
/// Control-plane nodes (pool `master`): where mco's server runs, as on upstream's clusters.
const MASTERS: usize = 1;
/// A control-plane node's role label and taint key, and the newer role label it also carries.
const MASTER_ROLE: &str = "node-role.kubernetes.io/master";
const CONTROL_PLANE_ROLE: &str = "node-role.kubernetes.io/control-plane";
/// The server's ports on a control-plane node (upstream's), behind the lab's load balancer.
const SERVER_PORTS: [u16; 2] = [22623, 22624];
/// How long a new machine's kubelet gets to register its Node and report it Ready: 5-20 s on a
/// quiet machine; a machine provisioned while two labs and a build share two cores once took
/// more than 120 s.
const JOIN_TIMEOUT: Duration = Duration::from_secs(300);
/// The group kubelets' client certificates are in (what the Node authorizer recognises).
const NODES_GROUP: &str = "system:nodes";
/// The service account whose token nodes bootstrap with (upstream's name).
const NODE_BOOTSTRAPPER: &str = "node-bootstrapper";
/// A lab lives for days at most.
const BOOTSTRAP_TOKEN_SECONDS: i64 = 7 * 24 * 3600;
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
    /// The repository's `deploy/` (mco's manifests; `hack/image.sh`, which builds its image, beside it).
    pub deploy: PathBuf,
    /// Run Prometheus with mco's rules, scraping mco's pods ([`crate::monitoring`]).
    pub prometheus: bool,
}

struct RunningNode {
    node: LabNode,
    spec: MachineSpec,
    /// None while it reboots, or when it is down.
    machine: Option<Machine>,
    /// Why its machine does not run, once it was powered off or powering it on failed: it stays down.
    down: Option<String>,
}

impl RunningNode {
    /// Powers the machine on; one that cannot run stays down, with the reason.
    async fn power_on(&mut self, mco: &Path) -> anyhow::Result<()> {
        match Machine::power_on(mco, &self.spec).await {
            Ok(machine) => {
                self.machine = Some(machine);
                self.down = None;
                Ok(())
            }
            Err(e) => {
                self.down = Some(format!("{e:#}"));
                Err(e)
            }
        }
    }
}

/// The loopback ports of the host's network namespace through which the host reaches the lab's
/// services, bound before the supervisor enters the lab's namespace.
pub struct HostPorts {
    apiserver: TcpListener,
    registry: TcpListener,
    /// The Machine Config Server's secure and insecure ports.
    server: TcpListener,
    insecure_server: TcpListener,
    prometheus: TcpListener,
    signatures: TcpListener,
}

impl HostPorts {
    /// Binds them, then moves this process into the lab's network namespace
    /// ([`network::enter_lab_namespace`]: before the process starts any other thread).
    pub fn bind_and_enter_lab_namespace() -> anyhow::Result<Self> {
        let [apiserver, registry, server, insecure_server, prometheus, signatures] = network::enter_lab_namespace()?;
        Ok(HostPorts { apiserver, registry, server, insecure_server, prometheus, signatures })
    }

    /// Forwards each into the lab's namespace, to the same port there.
    fn forward(self) -> anyhow::Result<Ports> {
        let forward = |listener: TcpListener| -> anyhow::Result<u16> {
            let port = listener.local_addr()?.port();
            network::forward(listener)?;
            Ok(port)
        };
        Ok(Ports {
            apiserver: forward(self.apiserver)?,
            registry: forward(self.registry)?,
            server: forward(self.server)?,
            insecure_server: forward(self.insecure_server)?,
            prometheus: forward(self.prometheus)?,
            signatures: forward(self.signatures)?,
        })
    }
}

/// The lab's services' loopback ports, the same on the host and in the lab's namespace.
#[derive(Debug, Clone, Copy)]
struct Ports {
    apiserver: u16,
    registry: u16,
    server: u16,
    insecure_server: u16,
    prometheus: u16,
    signatures: u16,
}

impl Ports {
    /// What a machine reaches on its own loopback, as on the lab's: all but Prometheus.
    fn machines_reach(&self) -> Vec<u16> {
        vec![self.apiserver, self.registry, self.server, self.insecure_server, self.signatures]
    }
}

/// Runs the lab until SIGTERM/SIGINT; the state file says how far it got.
pub async fn supervise(options: Options, host_ports: HostPorts) -> anyhow::Result<()> {
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
        signatures: None,
        prometheus: None,
        os_image: None,
        nodes: Vec::new(),
        pending: Vec::new(),
        not_joined: Vec::new(),
        down: Vec::new(),
        pools: Default::default(),
        roots: Default::default(),
    };
    let cgroup_parent = format!("mco-lab-{}", std::process::id());
    let result = run(&options, &layout, &mut report, host_ports, &cgroup_parent).await;
    // Also after a failure, when the machines were dropped with their shims and containers running.
    if let Err(e) = crate::machine::power_off_all(&cgroup_parent).await {
        tracing::warn!("powering off what is left of the machines: {e:#}");
    }
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

async fn run(
    options: &Options,
    layout: &Layout,
    report: &mut LabState,
    host_ports: HostPorts,
    cgroup_parent: &str,
) -> anyhow::Result<()> {
    let mut terminate = signal(SignalKind::terminate())?;
    let mut interrupt = signal(SignalKind::interrupt())?;
    let mco = options.mco.as_path();

    progress(layout, report, "setting up the lab's network")?;
    network::set_up(&layout.log("network")).await?;
    let ports = host_ports.forward()?;

    progress(layout, report, "starting etcd and kube-apiserver")?;
    let apiserver_network = mco_testenv::Network {
        port: Some(ports.apiserver),
        bind_address: IpAddr::V4(Ipv4Addr::UNSPECIFIED),
        advertise_address: IpAddr::V4(network::APISERVER_ADDRESS),
    };
    let mut env =
        mco_testenv::TestEnv::start_in(&layout.dir, &apiserver_network).await.map_err(|e| anyhow::anyhow!("{e:?}"))?;
    std::fs::copy(env.kubeconfig(), layout.kubeconfig()).context("copying the kubeconfig")?;
    let client = env.client();
    let kubeconfig = layout.kubeconfig();

    progress(layout, report, "starting kube-controller-manager and kube-scheduler")?;
    let mut control_plane = ControlPlane::start(&env, layout).await?;

    progress(layout, report, "starting the OCI registry and building the OS and container images")?;
    let registry_service = images::start_registry(layout, ports.registry).await?;
    let signature_service = images::start_signature_store(layout, ports.signatures).await?;
    report.signatures = Some(format!("http://127.0.0.1:{}", ports.signatures));
    let registry = format!("127.0.0.1:{}", ports.registry);
    report.registry = Some(registry.clone());
    let (lab_images, sandbox_image) =
        tokio::try_join!(images::build(mco, layout, &registry), images::build_container_images(layout, &registry))?;
    report.os_image = Some(lab_images.node.clone());

    progress(layout, report, "creating the cluster's pools, base configs and ControllerConfig")?;
    let certs = layout.certs();
    let server_url = format!("https://127.0.0.1:{}", ports.server);
    create_cluster(options, layout, &env, &lab_images, &registry, &server_url).await?;

    // As an installer's bootstrap node does: a controller outside the cluster renders the pools and
    // a server outside it serves the first machines, until mco runs on those machines as pods.
    progress(layout, report, "starting the bootstrap controller; waiting for the pools to be rendered")?;
    let mut controller_cmd = Command::new(mco);
    controller_cmd
        .arg("controller")
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        // Every input of the first render exists before it starts: it renders after 1 s (as the
        // lab overlay's controller does) rather than the default 5 s.
        .args(["--identity", "bootstrap", "--retry-period", "2", "--render-delay", "1"])
        .env("MCO_LOG", "info");
    let controller = Service::spawn("controller", controller_cmd, &layout.log("controller"))?;
    wait_rendered(&client, WORKER_POOL).await?;

    progress(layout, report, "starting the Machine Config Server")?;
    let server = start_bootstrap_server(mco, layout, &env, &ports).await?;
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
    let image_registry = registry.clone();
    let machines = Machines {
        env: &env,
        mco,
        layout,
        nodes_api: Api::all(client.clone()),
        registry: registry.clone(),
        sandbox_image,
        cgroup_parent: cgroup_parent.to_string(),
        ports: ports.machines_reach(),
    };
    let provisioner = Provisioner {
        mco: mco.to_path_buf(),
        layout: layout.clone(),
        registry,
        server: server_url,
        boot: lab_images.boot.clone(),
        base: lab_images.base.clone(),
        old_boot: Arc::default(),
        disks: Arc::new(Disks::new(mco, layout)),
    };
    let mut nodes = Vec::new();
    let planned: Vec<LabNode> = (0..MASTERS)
        .map(|i| (MASTER_POOL, i))
        .chain((0..options.workers).map(|i| (WORKER_POOL, i)))
        .enumerate()
        .map(|(index, (pool, i))| LabNode::named(layout, pool, &format!("{pool}-{i}"), index))
        .collect();
    let total = planned.len();
    for node in &planned {
        report.pools.insert(node.name.clone(), node.pool.clone());
    }
    // The machines' first boots at once (each has a /boot of its own: see node::mount_boot),
    // beside mco's image build.
    progress(layout, report, format!("provisioning {total} nodes and building mco's image"))?;
    let mut specs = Vec::new();
    for (index, node) in planned.iter().enumerate() {
        specs.push(machines.machine(node, index)?);
    }
    let provisioned = futures::future::try_join_all(planned.iter().zip(&specs).map(|(node, (spec, settings))| async {
        let request = AddNode {
            name: node.name.clone(),
            pool: node.pool.clone(),
            boot_image: BootImage::Current,
            version_header: true,
        };
        match provisioner.provision(node, &request, spec, settings).await? {
            Provisioned::Refused { reason } => anyhow::bail!("node {} was refused: {reason}", node.name),
            Provisioned::Booted(machine) => Ok(*machine),
        }
    }));
    let image = install::build_image(mco, &options.deploy, layout, &image_registry, None);
    let (booted, digest) = tokio::try_join!(provisioned, image)?;
    for (index, ((node, (spec, _)), machine)) in planned.into_iter().zip(specs).zip(booted).enumerate() {
        progress(layout, report, format!("waiting for node {} to join ({}/{total})", node.name, index + 1))?;
        nodes.push(machines.join(node, spec, machine, report).await?);
        if index == 0 {
            control_plane.start_proxy(&env, layout, &nodes[0].node.name)?;
        }
    }

    progress(layout, report, "installing mco from deploy/: applying the lab overlay")?;
    let overlay = Overlay {
        digest,
        apiserver_url: format!("https://{}:{}", network::APISERVER_ADDRESS, ports.apiserver),
        machine_api: options.platform.has_machinesets(),
    };
    install::apply(&install::kubectl()?, &kubeconfig, &options.deploy, layout, &overlay).await?;
    // What an administrator creates beside deploy/: the server's certificate (the lab's, which
    // the stubs' CA signed for the address machines ask).
    apply::apply(&client, &[install::server_tls_secret(&certs.join("tls.crt"), &certs.join("tls.key"))?]).await?;
    // Tasks that live as long as the lab. Prometheus from here on: it finds mco's pods as they
    // start, and has scraped them by the time the lab is up.
    let mut background = JoinSet::new();
    let prometheus = if options.prometheus {
        progress(layout, report, "starting Prometheus with mco's rules")?;
        let service =
            crate::monitoring::start(layout, &options.deploy, client.clone(), ports.prometheus, &mut background)
                .await?;
        report.prometheus = Some(format!("http://127.0.0.1:{}", ports.prometheus));
        Some(service)
    } else {
        None
    };

    progress(layout, report, "waiting for the controller's pods; the bootstrap controller hands over")?;
    // The control-plane nodes' network indices (their addresses).
    let masters: Vec<usize> = nodes.iter().filter(|r| r.node.pool == MASTER_POOL).map(|r| r.spec.index).collect();
    let installed = async {
        install::wait_controller(&client).await?;
        controller.stop().await;
        progress(layout, report, "waiting for a daemon's pod on every node and the server's on the control plane")?;
        install::wait_daemons(&client, nodes.len()).await?;
        install::wait_servers(&client, masters.len()).await
    };
    if let Err(e) = installed.await {
        anyhow::bail!(
            "{e:#}\n(pods: kubectl -n {MCO_NAMESPACE} get pods; the kubelets' logs are in {})",
            layout.logs().display()
        );
    }

    // As the installer's load balancer drops the bootstrap node: machines that ask the server's
    // address from now on reach the servers on the control-plane nodes.
    server.stop().await;
    let backends =
        |port: u16| masters.iter().map(|&index| SocketAddr::from((network::node_address(index), port))).collect();
    for (port, server_port) in [ports.server, ports.insecure_server].into_iter().zip(SERVER_PORTS) {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, port)).with_context(|| format!("binding {port}"))?;
        listener.set_nonblocking(true)?;
        network::balance(listener, backends(server_port))?;
    }

    report.phase = Phase::Ready;
    progress(layout, report, format!("ready: {} nodes", nodes.len()))?;
    let stop = async {
        tokio::select! {
            _ = terminate.recv() => {}
            _ = interrupt.recv() => {}
        }
    };
    serve(layout, report, &mut control_plane, &machines, &provisioner, &mut nodes, stop).await?;

    progress(layout, report, "stopping")?;
    for running in nodes {
        if let Some(machine) = running.machine {
            machine.power_off().await;
        }
    }
    if let Some(prometheus) = prometheus {
        prometheus.stop().await;
    }
    registry_service.stop().await;
    signature_service.stop().await;
    control_plane.stop().await;
    if let Err(e) = env.shut_down().await {
        tracing::warn!("stopping etcd: {e:#}");
    }
    Ok(())
}

/// The Machine Config Server of the installer's bootstrap node, outside the cluster, with the
/// node-bootstrapper's token and the lab's certificate, listening on the lab's server ports.
async fn start_bootstrap_server(
    mco: &Path,
    layout: &Layout,
    env: &mco_testenv::TestEnv,
    ports: &Ports,
) -> anyhow::Result<Service> {
    let certs = layout.certs();
    let token_dir = bootstrap_token(&env.client(), env.dir(), layout).await?;
    let mut server_cmd = Command::new(mco);
    server_cmd
        .arg("server")
        .arg("--kubeconfig")
        .arg(layout.kubeconfig())
        .arg("--bootstrap-token-dir")
        .arg(&token_dir)
        .arg("--tls-cert")
        .arg(certs.join("tls.crt"))
        .arg("--tls-key")
        .arg(certs.join("tls.key"))
        .arg("--listen")
        .arg(format!("127.0.0.1:{}", ports.server))
        .arg("--insecure-listen")
        .arg(format!("127.0.0.1:{}", ports.insecure_server))
        .env("MCO_LOG", "info");
    let mut server = Service::spawn("server", server_cmd, &layout.log("server"))?;
    images::wait_for_port(&mut server, ports.server).await?;
    Ok(server)
}

/// What an installer creates before any machine boots: the certificates, the CRDs of the
/// kinds mco reads, the pools, base configs and ControllerConfig, the cluster's image
/// configuration and, on a platform with MachineSets, the cloud's objects with the stub of
/// `server_url`.
async fn create_cluster(
    options: &Options,
    layout: &Layout,
    env: &mco_testenv::TestEnv,
    lab_images: &images::LabImages,
    registry: &str,
    server_url: &str,
) -> anyhow::Result<()> {
    let mco = options.mco.as_path();
    let client = &env.client();
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
    apply::apply(client, &config_crds()).await?;
    wait_established(client, &config_crds()).await?;
    let objects = cluster_objects(&ClusterInputs {
        os_image: &lab_images.node,
        extensions_image: &lab_images.extensions,
        other_stream: (&lab_images.other_stream.0, &lab_images.other_stream.1),
        registry,
        controller_version_raw: &options.controller_version_raw,
        platform: options.platform,
    });
    apply::apply(client, &objects).await?;
    let image_crds = image_config_crds(&options.deploy)?;
    apply::apply(client, &image_crds).await?;
    wait_established(client, &image_crds).await?;
    apply::apply(client, &[image_config()]).await?;
    env.mark_controller_config_completed().await?;
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
        apply::apply(client, &cloud_objects(stub.trim_end())).await?;
    }
    Ok(())
}

/// Keeps the lab running until `stop`: provisions the nodes asked for and looks after the control
/// plane and the machines (a rebooted machine booted again, one down said so in the state).
async fn serve(
    layout: &Layout,
    report: &mut LabState,
    control_plane: &mut ControlPlane,
    machines: &Machines<'_>,
    provisioner: &Provisioner,
    nodes: &mut Vec<RunningNode>,
    stop: impl std::future::Future<Output = ()>,
) -> anyhow::Result<()> {
    tokio::pin!(stop);
    let mut joining: JoinSet<((LabNode, MachineSpec), anyhow::Result<Provisioned>)> = JoinSet::new();
    let mut tick = tokio::time::interval(TICK);
    loop {
        tokio::select! {
            () = &mut stop => break,
            Some(joined) = joining.join_next(), if !joining.is_empty() => {
                let ((node, spec), outcome) = match joined {
                    Ok(joined) => joined,
                    Err(e) => {
                        tracing::error!("a node's provisioning task ended: {e}");
                        continue;
                    }
                };
                report.pending.retain(|n| n != &node.name);
                let name = node.name.clone();
                let reason = match outcome {
                    Ok(Provisioned::Booted(machine)) => match machines.join(node, spec, *machine, report).await {
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
                    report.not_joined.push(NodeReason { name, reason });
                }
                progress(layout, report, format!("ready: {} nodes", nodes.len()))?;
            }
            _ = tick.tick() => {
                if let Err(e) = control_plane.look_after() {
                    tracing::warn!("{e:#}");
                }
                for (node, index, request) in take_requests(layout, report)? {
                    let provisioner = provisioner.clone();
                    let (spec, settings) = machines.machine(&node, index)?;
                    joining.spawn(async move {
                        let outcome = provisioner.provision(&node, &request, &spec, &settings).await;
                        ((node, spec), outcome)
                    });
                }
                let roots = report.roots.clone();
                for running in nodes.iter_mut() {
                    if let Err(e) = machines.look_after(running, report).await {
                        tracing::warn!(node = running.node.name, "{e:#}");
                    }
                }
                let down: Vec<NodeReason> = nodes
                    .iter()
                    .filter_map(|r| Some(NodeReason { name: r.node.name.clone(), reason: r.down.clone()? }))
                    .collect();
                if down != report.down || roots != report.roots {
                    report.down = down;
                    state::write(&layout.state_file(), report)?;
                }
            }
        }
    }
    joining.shutdown().await;
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
    /// The base OS image, which boot images are built from.
    base: String,
    /// The too-old boot image, built for the first node that asks.
    old_boot: Arc<OnceCell<String>>,
    disks: Arc<Disks>,
}

impl Provisioner {
    async fn provision(
        &self,
        node: &LabNode,
        request: &AddNode,
        machine: &MachineSpec,
        settings: &MachineSettings,
    ) -> anyhow::Result<Provisioned> {
        let image = match request.boot_image {
            BootImage::Current => self.boot.clone(),
            BootImage::Old => self
                .old_boot
                .get_or_try_init(|| images::build_old_boot(&self.mco, &self.layout, &self.registry, &self.base))
                .await?
                .clone(),
        };
        let disk = self.disks.of(&image).await?;
        let boot = Boot { image, disk, version_header: request.version_header };
        node.provision(&self.mco, &self.layout, &boot, &self.server, machine, settings).await
    }
}

/// What the lab's machines need: the images, the API server and the lab's ports.
struct Machines<'a> {
    env: &'a mco_testenv::TestEnv,
    mco: &'a Path,
    layout: &'a Layout,
    nodes_api: Api<Node>,
    registry: String,
    sandbox_image: String,
    cgroup_parent: String,
    ports: Vec<u16>,
}

impl Machines<'_> {
    /// The machine of `node`, lab node `index`, and the settings its disk gets.
    fn machine(&self, node: &LabNode, index: usize) -> anyhow::Result<(MachineSpec, MachineSettings)> {
        let kubeconfig = self.layout.dir.join(format!("kubelet-kubeconfigs/{}", node.name));
        std::fs::create_dir_all(kubeconfig.parent().context("a file has a directory")?)?;
        self.env.write_client_kubeconfig(&kubeconfig, &format!("system:node:{}", node.name), Some(NODES_GROUP))?;
        let settings = MachineSettings {
            name: node.name.clone(),
            index,
            zone: node.zone.clone(),
            taints: if node.pool == MASTER_POOL { vec![format!("{MASTER_ROLE}:NoSchedule")] } else { vec![] },
            kubeconfig: std::fs::read_to_string(&kubeconfig)?,
            client_ca: std::fs::read_to_string(self.env.ca_cert())?,
            registry: self.registry.clone(),
            sandbox_image: self.sandbox_image.clone(),
        };
        let spec = MachineSpec {
            boot: BootSpec {
                name: node.name.clone(),
                sysroot: node.dirs.sysroot.clone(),
                cgroup_parent: self.cgroup_parent.clone(),
                console: self.layout.log(&node.name),
            },
            index,
            ports: self.ports.clone(),
            network_log: self.layout.log("network"),
        };
        Ok((spec, settings))
    }

    /// A provisioned node joins: its kubelet registers the Node and reports it Ready, the Node
    /// gets its pool's role label, the state says so (its daemon is the DaemonSet's pod, which the
    /// cluster starts once mco is installed). A node that does not get there is powered off and
    /// the error says why.
    async fn join(
        &self,
        node: LabNode,
        spec: MachineSpec,
        mut machine: Machine,
        report: &mut LabState,
    ) -> anyhow::Result<RunningNode> {
        if let Err(e) = self.wait_joined(&node, &mut machine).await {
            machine.power_off().await;
            return Err(e);
        }
        report.nodes.push(node.name.clone());
        report.roots.insert(node.name.clone(), machine.root());
        Ok(RunningNode { node, spec, machine: Some(machine), down: None })
    }

    /// Waits until the node's kubelet has registered it and reports it Ready, then labels it with
    /// its pool's role (kubelets may not set `node-role.kubernetes.io/` labels on themselves).
    async fn wait_joined(&self, node: &LabNode, machine: &mut Machine) -> anyhow::Result<()> {
        let deadline = Instant::now() + JOIN_TIMEOUT;
        let mut labelled = false;
        loop {
            if let Some(halt) = machine.halted()? {
                anyhow::bail!("node {}'s machine halted ({halt:?}):\n{}", node.name, machine.console_tail());
            }
            if let Some(fault) = machine.fault() {
                anyhow::bail!("node {} cannot run: {fault}", node.name);
            }
            if let Some(registered) = self.nodes_api.get_opt(&node.name).await? {
                if !labelled {
                    let mut roles = serde_json::Map::new();
                    roles.insert(format!("node-role.kubernetes.io/{}", node.pool), json!(""));
                    if node.pool == MASTER_POOL {
                        roles.insert(CONTROL_PLANE_ROLE.to_string(), json!(""));
                    }
                    let role = json!({"metadata": {"labels": roles}});
                    self.nodes_api.patch(&node.name, &PatchParams::default(), &Patch::Merge(&role)).await?;
                    labelled = true;
                }
                if crate::node::is_ready(&registered) {
                    return Ok(());
                }
            }
            if Instant::now() > deadline {
                anyhow::bail!(
                    "node {}'s kubelet did not register a Ready Node within {JOIN_TIMEOUT:?} (its journal: \
                     nsenter --all --target {} journalctl -u kubelet)",
                    node.name,
                    machine.root().parent().and_then(Path::file_name).unwrap_or_default().to_string_lossy()
                );
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }

    /// Plays the firmware's part when a machine's boot ends: a reboot boots it again, a power-off
    /// leaves it off (down), a crash power-cycles it, as a watchdog would.
    async fn look_after(&self, running: &mut RunningNode, report: &mut LabState) -> anyhow::Result<()> {
        let Some(machine) = running.machine.as_mut() else { return Ok(()) };
        let Some(halt) = machine.halted()? else {
            // It runs, but cannot be a node any more (until a reboot into another deployment).
            running.down = machine.fault();
            return Ok(());
        };
        let name = running.node.name.clone();
        let console = machine.console_tail();
        if let Some(machine) = running.machine.take() {
            machine.power_off().await;
        }
        report.roots.remove(&name);
        match halt {
            Halt::Reboot => tracing::info!(node = name, "rebooting"),
            Halt::PowerOff => {
                tracing::info!(node = name, "powered off");
                running.down = Some("powered off".into());
                return Ok(());
            }
            Halt::Crashed(status) => {
                tracing::warn!(node = name, "the machine crashed ({status}); power-cycling it:\n{console}")
            }
        }
        running.power_on(self.mco).await?;
        if let Some(machine) = &running.machine {
            report.roots.insert(name, machine.root());
        }
        Ok(())
    }
}

/// Takes the waiting `mco lab add-node` requests: each valid one is recorded as pending (before
/// its file goes, so whoever waits for it never sees neither) and returned with its node; an
/// invalid one is recorded as not joined with the reason, unless it names a node that is there.
fn take_requests(layout: &Layout, report: &mut LabState) -> anyhow::Result<Vec<(LabNode, usize, AddNode)>> {
    let mut taken = Vec::new();
    for (file, request) in request::waiting_requests(layout) {
        let checked = request.and_then(|r| request::check(&r, report).map(|()| r).map_err(anyhow::Error::msg));
        match checked {
            Ok(request) => {
                report.not_joined.retain(|n| n.name != request.name);
                report.pending.push(request.name.clone());
                report.pools.insert(request.name.clone(), request.pool.clone());
                let index = report.nodes.len() + report.pending.len() - 1;
                taken.push((LabNode::named(layout, &request.pool, &request.name, index), index, request));
            }
            Err(e) => {
                let name = file.file_stem().unwrap_or_default().to_string_lossy().into_owned();
                tracing::warn!(node = name, "ignoring a node request: {e:#}");
                if !report.nodes.contains(&name) && !report.pending.contains(&name) {
                    report.not_joined.retain(|n| n.name != name);
                    report.not_joined.push(NodeReason { name, reason: format!("{e:#}") });
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

/// Waits until `pool` is rendered with the image configuration controller's MachineConfig, so
/// that the first machines boot the config the pool keeps (not one it is re-rendered from at once).
async fn wait_rendered(client: &Client, pool: &str) -> anyhow::Result<()> {
    let pools: Api<MachineConfigPool> = Api::all(client.clone());
    let registries = format!("99-{pool}-generated-registries");
    let deadline = Instant::now() + RENDER_TIMEOUT;
    loop {
        let current = pools.get(pool).await?;
        let configuration = current.spec.configuration.as_ref();
        let rendered = configuration.and_then(|c| c.name.as_deref()).is_some_and(|n| !n.is_empty());
        let sources = configuration.and_then(|c| c.source.as_ref());
        if rendered && sources.is_some_and(|s| s.iter().any(|r| r.name.as_deref() == Some(&registries))) {
            return Ok(());
        }
        if Instant::now() > deadline {
            anyhow::bail!(
                "pool {pool} was not rendered with {registries} within {RENDER_TIMEOUT:?} (see the controller's log and the pool's \
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
