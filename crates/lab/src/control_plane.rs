//! The Kubernetes control plane beside the API server: kube-controller-manager, running the
//! standard controllers (service accounts and their tokens, garbage collector,
//! ReplicaSet/Deployment/DaemonSet/Job, disruption, node lifecycle, ...) each with its own
//! service account's credentials, kube-scheduler, and kube-proxy (iptables mode), one for all
//! nodes: they share the lab's network namespace, so one set of Service rules serves every pod.
//! Each has a client certificate of its own (`system:kube-controller-manager`,
//! `system:kube-scheduler`, `system:kube-proxy`), so the API server's default RBAC rules are what
//! it may do, and serves its health and metrics on loopback only.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use fn_error_context::context;
use k8s_openapi::api::coordination::v1::Lease;
use kube::Api;
use mco_testenv::TestEnv;
use tokio::process::Command;

use crate::layout::Layout;
use crate::network;
use crate::process::{Service, free_ports};

/// The binaries this module runs, built by `hack/kube-binaries.sh` beside kube-apiserver.
pub const BINARIES: [&str; 3] = ["kube-controller-manager", "kube-scheduler", "kube-proxy"];
/// How long a component gets to take its leader Lease after it starts.
const READY_TIMEOUT: Duration = Duration::from_secs(120);

/// One component: how to start it, and the process while it runs.
struct Component {
    name: &'static str,
    binary: PathBuf,
    args: Vec<String>,
    log: PathBuf,
    service: Option<Service>,
}

impl Component {
    fn start(&mut self) -> anyhow::Result<()> {
        let mut command = Command::new(&self.binary);
        command.args(&self.args);
        self.service = Some(Service::spawn(self.name, command, &self.log)?);
        Ok(())
    }
}

/// The running kube-controller-manager, kube-scheduler and kube-proxy.
pub struct ControlPlane {
    components: Vec<Component>,
    /// Where the components keep their kubeconfigs and serving certificates.
    dir: PathBuf,
}

impl ControlPlane {
    /// Starts kube-controller-manager and kube-scheduler and waits until each holds its leader
    /// Lease in `kube-system` (the moment it starts its controllers or its scheduling loop).
    #[context("Starting kube-controller-manager and kube-scheduler")]
    pub async fn start(env: &TestEnv, layout: &Layout) -> anyhow::Result<ControlPlane> {
        let [controller_manager, scheduler, _] = mco_testenv::find_binaries(BINARIES)?;
        let dir = layout.dir.join("control-plane");
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        let [controller_manager_port, scheduler_port] = free_ports()?;
        let controller_manager_kubeconfig = component_kubeconfig(env, &dir, "system:kube-controller-manager")?;
        let scheduler_kubeconfig = component_kubeconfig(env, &dir, "system:kube-scheduler")?;

        let mut controller_manager_args = common_args(&controller_manager_kubeconfig, controller_manager_port, &dir);
        controller_manager_args.extend([
            "--controllers=*".to_string(),
            "--use-service-account-credentials=true".to_string(),
            format!("--service-account-private-key-file={}", env.service_account_key().display()),
            format!("--root-ca-file={}", env.ca_cert().display()),
            "--cluster-name=mco-lab".to_string(),
        ]);
        let mut control_plane = ControlPlane {
            components: vec![
                Component {
                    name: "kube-controller-manager",
                    binary: controller_manager,
                    args: controller_manager_args,
                    log: layout.log("kube-controller-manager"),
                    service: None,
                },
                Component {
                    name: "kube-scheduler",
                    binary: scheduler,
                    args: common_args(&scheduler_kubeconfig, scheduler_port, &dir),
                    log: layout.log("kube-scheduler"),
                    service: None,
                },
            ],
            dir,
        };
        for component in &mut control_plane.components {
            component.start()?;
        }
        let leases: Api<Lease> = Api::namespaced(env.client(), "kube-system");
        for component in &mut control_plane.components {
            wait_leader(&leases, component).await?;
        }
        Ok(control_plane)
    }

    /// Starts kube-proxy, as `node`'s: kube-proxy reads its node's addresses and waits for the
    /// Node to exist, so it starts once the first node has joined.
    #[context("Starting kube-proxy")]
    pub fn start_proxy(&mut self, env: &TestEnv, layout: &Layout, node: &str) -> anyhow::Result<()> {
        let [_, _, proxy] = mco_testenv::find_binaries(BINARIES)?;
        let [proxy_healthz_port, proxy_metrics_port] = free_ports()?;
        let proxy_kubeconfig = component_kubeconfig(env, &self.dir, "system:kube-proxy")?;
        let mut component = Component {
            name: "kube-proxy",
            binary: proxy,
            args: vec![
                format!("--kubeconfig={}", proxy_kubeconfig.display()),
                "--proxy-mode=iptables".to_string(),
                format!("--cluster-cidr={}", network::CLUSTER_CIDR),
                format!("--hostname-override={node}"),
                "--nodeport-addresses=primary".to_string(),
                format!("--healthz-bind-address=127.0.0.1:{proxy_healthz_port}"),
                format!("--metrics-bind-address=127.0.0.1:{proxy_metrics_port}"),
                // Zero: leave the conntrack sysctls alone (not writable here, and not the lab's).
                "--conntrack-max-per-core=0".to_string(),
                "--conntrack-tcp-timeout-established=0s".to_string(),
                "--conntrack-tcp-timeout-close-wait=0s".to_string(),
            ],
            log: layout.log("kube-proxy"),
            service: None,
        };
        component.start()?;
        self.components.push(component);
        Ok(())
    }

    /// Starts again a component that has exited, as the static pod's kubelet would.
    pub fn look_after(&mut self) -> anyhow::Result<()> {
        for component in &mut self.components {
            let Some(service) = component.service.as_mut() else { continue };
            if let Some(status) = service.exited()? {
                tracing::warn!(name = component.name, %status, "exited; starting it again:\n{}", service.tail());
                component.start()?;
            }
        }
        Ok(())
    }

    pub async fn stop(self) {
        for component in self.components {
            if let Some(service) = component.service {
                service.stop().await;
            }
        }
    }
}

/// A kubeconfig with a client certificate for `user` (a component's identity).
fn component_kubeconfig(env: &TestEnv, dir: &Path, user: &str) -> anyhow::Result<PathBuf> {
    let path = dir.join(format!("{}.kubeconfig", user.trim_start_matches("system:")));
    env.write_client_kubeconfig(&path, user, None)?;
    Ok(path)
}

/// What both take: their identity, their loopback-only secure port (health, metrics) with a
/// self-signed serving certificate, and the API server to check the clients of that port against.
fn common_args(kubeconfig: &Path, port: u16, dir: &Path) -> Vec<String> {
    let kubeconfig = kubeconfig.display();
    vec![
        format!("--kubeconfig={kubeconfig}"),
        format!("--authentication-kubeconfig={kubeconfig}"),
        format!("--authorization-kubeconfig={kubeconfig}"),
        "--bind-address=127.0.0.1".to_string(),
        format!("--secure-port={port}"),
        format!("--cert-dir={}", dir.join("serving-certs").display()),
    ]
}

/// Waits until `component` holds its leader Lease, failing early (with its log) if it exits.
async fn wait_leader(leases: &Api<Lease>, component: &mut Component) -> anyhow::Result<()> {
    let deadline = Instant::now() + READY_TIMEOUT;
    loop {
        let holder = leases.get_opt(component.name).await?.and_then(|l| l.spec?.holder_identity);
        if holder.is_some_and(|h| !h.is_empty()) {
            tracing::info!(name = component.name, "leading");
            return Ok(());
        }
        let service = component.service.as_mut().context("not started")?;
        if let Some(status) = service.exited()? {
            anyhow::bail!("{} exited ({status}) before it started leading:\n{}", component.name, service.tail());
        }
        if Instant::now() > deadline {
            anyhow::bail!(
                "{} holds no Lease kube-system/{} after {READY_TIMEOUT:?}:\n{}",
                component.name,
                component.name,
                service.tail()
            );
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}
