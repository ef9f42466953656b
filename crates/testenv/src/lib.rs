//! A real Kubernetes API server for integration tests: etcd and kube-apiserver on loopback ports,
//! in a temporary directory, with mco's CustomResourceDefinitions installed. The lab runs its
//! cluster's API server with the same code ([`TestEnv::start_in`]); what only tests use (the
//! shared server, the prepared etcd directory, unique names, `eventually`, containerd for
//! tests) is behind the feature `fixtures`, which only test builds enable, so none of it is in
//! the `mco` binary.
//!
//! ```no_run
//! # async fn example() -> Result<(), mco_testenv::Error> {
//! let env = mco_testenv::TestEnv::shared().await?;
//! let pools: kube::Api<mco_api::MachineConfigPool> = kube::Api::all(env.client());
//! # Ok(()) }
//! ```
//!
//! The binaries are built once by `hack/kube-binaries.sh` (see [`find_binaries`]). Each server
//! has its own CA, serving certificate for `127.0.0.1`, administrator client certificate (group
//! `system:masters`, so RBAC allows everything) and etcd data directory, copied from one where the
//! CRDs are already established (made once per CRD set and binaries: see `template`);
//! [`TestEnv::kubeconfig`] is a file other programs (`mco controller --kubeconfig`) can use.
//!
//! Tests that only touch objects of their own share one server per test binary
//! ([`TestEnv::shared`]); the others start their own ([`TestEnv::start`]). Dropping an own
//! environment kills both processes (SIGKILL: the API server takes up to a minute to shut down
//! gracefully, and nothing of a test cluster needs to survive); the shared one is killed when the
//! test binary exits, and every process this crate starts is killed if the test binary dies.

mod binaries;
#[cfg(feature = "fixtures")]
pub mod containerd;
mod pki;
mod process;
#[cfg(feature = "fixtures")]
mod shared;
#[cfg(feature = "fixtures")]
mod template;

use std::net::{IpAddr, Ipv4Addr};
use std::path::{Path, PathBuf};
use std::sync::Arc;
#[cfg(feature = "fixtures")]
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use anyhow::Context as _;
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use fn_error_context::context;
#[cfg(feature = "fixtures")]
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::discovery::{Discovery, Scope};
use kube::runtime::wait::{await_condition, conditions};
use kube::{Api, Client};
use mco_api::ControllerConfig;
use mco_api::constants::CONTROLLER_CONFIG_NAME;
use mco_api::machineconfiguration::controller_config_condition;
use serde::Deserialize as _;
use tempfile::TempDir;

pub use binaries::{BIN_DIR_ENV, cache_dir_name, find_binaries};
use pki::Pki;
use process::Process;
/// The kube and k8s-openapi crates the client comes from, for tests of crates that do not
/// otherwise use them.
pub use {k8s_openapi, kube};

/// Set (to anything) to keep environments' directories, with the logs, after the test.
pub const KEEP_ENV: &str = "MCO_TESTENV_KEEP";

/// How long each process gets to become ready. The API server needs 2-3 s on an idle machine;
/// the margin is for machines where several test binaries build and run at once.
const READY_TIMEOUT: Duration = Duration::from_secs(90);
/// How long the API server gets to serve a newly created CRD.
const CRD_TIMEOUT: Duration = Duration::from_secs(30);

/// Why a test environment could not be started.
#[derive(thiserror::Error)]
pub enum Error {
    #[error(
        "Kubernetes binaries not found: missing {}. Build them with `bash hack/kube-binaries.sh` \
         (or set {BIN_DIR_ENV} to a directory holding them)",
        missing.join(", ")
    )]
    MissingBinaries { missing: Vec<String> },
    #[error("{name} did not become ready: {reason}\n--- last lines of {} ---\n{tail}", log.display())]
    NotReady { name: &'static str, reason: String, log: PathBuf, tail: String },
    #[error(transparent)]
    Setup(#[from] anyhow::Error),
}

// Tests `unwrap()` these, which prints `Debug`: make that the message (with anyhow's causes).
impl std::fmt::Debug for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Error::Setup(e) => write!(f, "{e:?}"),
            other => write!(f, "{other}"),
        }
    }
}

/// Where the API server listens and what it tells clients inside the cluster (the endpoint of the
/// `kubernetes` Service).
#[derive(Debug, Clone)]
pub struct Network {
    /// The secure port; a free one if `None`.
    pub port: Option<u16>,
    /// Loopback only (tests), or every address of its network namespace (the lab's namespace,
    /// where kubelets and pods reach it).
    pub bind_address: IpAddr,
    /// The address published for the `kubernetes` Service, also in the serving certificate.
    pub advertise_address: IpAddr,
}

impl Default for Network {
    fn default() -> Self {
        Network { port: None, bind_address: LOOPBACK, advertise_address: LOOPBACK }
    }
}

const LOOPBACK: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);
/// The `kubernetes` Service's address: the first of `--service-cluster-ip-range`.
pub const SERVICE_CLUSTER_IP_RANGE: &str = "10.0.0.0/24";
pub const KUBERNETES_SERVICE_IP: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);

/// The etcd data directory's name in an environment's directory.
const ETCD_DIR: &str = "etcd";

/// Where a new server's CRDs are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CrdsIn {
    /// Already established in its etcd data (a copy of the prepared directory).
    #[cfg(feature = "fixtures")]
    EtcdData,
    /// To create, and to wait for.
    ToCreate,
}

/// A running etcd + kube-apiserver pair with the CRDs installed: a test's own
/// ([`TestEnv::start`]) or the one its test binary shares ([`TestEnv::shared`]).
pub struct TestEnv {
    // Field order is drop order: the processes die before their directory is removed.
    /// `None` for the shared server, which lives until the test binary exits.
    processes: Option<Processes>,
    cluster: Arc<Cluster>,
    /// Made in the test's own runtime: a client's connections and buffer worker die with the
    /// runtime that spawned them, so not even the shared server's client is shared.
    client: Client,
}

/// What a client needs to know of a running server.
struct Cluster {
    pki: Pki,
    files: PkiFiles,
    apiserver_port: u16,
    kubeconfig: PathBuf,
    dir: PathBuf,
}

/// The processes of one server and their directory.
struct Processes {
    // Field order is drop order: the processes die before their directory is removed.
    apiserver: Option<Process>,
    etcd: Process,
    apiserver_binary: PathBuf,
    apiserver_args: Vec<String>,
    dir: TempDir,
}

impl TestEnv {
    /// Starts etcd and the API server of this test alone, with [`mco_api::crds`] established
    /// (from a prepared etcd data directory, see [`template`]). For tests that restart the
    /// server, read its audit log, or act on cluster-wide singletons or every object of a kind.
    #[cfg(feature = "fixtures")]
    pub async fn start() -> Result<TestEnv, Error> {
        let dir = tempfile::Builder::new().prefix("mco-testenv-").tempdir().context("creating the temp dir")?;
        let etcd_data = template::etcd_data().await?;
        template::copy_dir(&etcd_data, &dir.path().join(ETCD_DIR))?;
        Self::start_with(dir, &Network::default(), CrdsIn::EtcdData).await
    }

    /// [`TestEnv::start`] on an empty etcd, creating the CRDs and waiting until they are served:
    /// what the prepared data directory saves (`cargo bench -p mco-testenv` compares both).
    #[cfg(feature = "fixtures")]
    pub async fn start_fresh() -> Result<TestEnv, Error> {
        let dir = tempfile::Builder::new().prefix("mco-testenv-").tempdir().context("creating the temp dir")?;
        Self::start_with(dir, &Network::default(), CrdsIn::ToCreate).await
    }

    /// The API server every test of this test binary shares, started by the first to ask: for
    /// tests that only touch objects of their own (named with [`TestEnv::unique_name`] or in
    /// [`TestEnv::namespace`]). It cannot be stopped; it dies with the test binary.
    #[cfg(feature = "fixtures")]
    pub async fn shared() -> Result<TestEnv, Error> {
        let cluster = shared::cluster().await?;
        let client = client_from_kubeconfig(&cluster.kubeconfig).await?;
        Ok(TestEnv { processes: None, cluster, client })
    }

    /// [`TestEnv::start`] in a new directory under `parent` that is kept after the environment
    /// is dropped (the lab keeps its API server's logs and data with its other state), with the
    /// API server where `network` says. The CRDs are created afresh: the prepared data directory
    /// records the loopback address, which the `kubernetes` Service would keep for a while.
    pub async fn start_in(parent: &Path, network: &Network) -> Result<TestEnv, Error> {
        let mut dir = tempfile::Builder::new()
            .prefix("apiserver-")
            .tempdir_in(parent)
            .with_context(|| format!("creating a directory in {}", parent.display()))?;
        dir.disable_cleanup(true);
        Self::start_with(dir, network, CrdsIn::ToCreate).await
    }

    /// Starts etcd on the data in `dir` (where `crds` says the CRDs are) and the API server.
    async fn start_with(dir: TempDir, network: &Network, crds: CrdsIn) -> Result<TestEnv, Error> {
        let [kube_apiserver, etcd_binary] = find_binaries(["kube-apiserver", "etcd"])?;
        let pki = Pki::generate(network.advertise_address).context("generating certificates")?;
        let files = write_pki(dir.path(), &pki)?;
        let [etcd_port, etcd_peer_port, free_apiserver_port] = process::free_ports()?;
        let apiserver_port = network.port.unwrap_or(free_apiserver_port);

        let etcd_dir = dir.path().join(ETCD_DIR);
        let etcd_url = format!("http://127.0.0.1:{etcd_port}");
        let mut etcd = Process::spawn(
            "etcd",
            &etcd_binary,
            &[
                format!("--data-dir={}", etcd_dir.display()),
                format!("--listen-client-urls={etcd_url}"),
                format!("--listen-peer-urls=http://127.0.0.1:{etcd_peer_port}"),
                // Test data need not survive a machine crash; fsync dominates etcd's write latency.
                "--unsafe-no-fsync".to_string(),
            ],
            dir.path(),
        )?;
        etcd.wait_for_port(etcd_port, READY_TIMEOUT).await?;

        std::fs::write(dir.path().join(AUDIT_POLICY_FILE), AUDIT_POLICY).context("writing the audit policy")?;
        let apiserver_args = apiserver_args(dir.path(), &files, &etcd_url, apiserver_port, network);
        let kubeconfig = dir.path().join("kubeconfig");
        write_kubeconfig(&kubeconfig, &pki.ca_cert, apiserver_port, "admin", (&pki.client_cert, &pki.client_key))?;
        let client = client_from_kubeconfig(&kubeconfig).await?;
        let cluster = Arc::new(Cluster { pki, files, apiserver_port, kubeconfig, dir: dir.path().to_owned() });
        let processes = Processes { apiserver: None, etcd, apiserver_binary: kube_apiserver, apiserver_args, dir };
        let mut env = TestEnv { processes: Some(processes), cluster, client };
        env.start_apiserver().await?;
        if crds == CrdsIn::ToCreate {
            env.install_crds().await?;
        }
        Ok(env)
    }

    /// A client authenticated as a cluster administrator.
    pub fn client(&self) -> Client {
        self.client.clone()
    }

    /// A kubeconfig file for the same administrator.
    pub fn kubeconfig(&self) -> &Path {
        &self.cluster.kubeconfig
    }

    /// `prefix` made unique in this test binary's run (`prefix-N`): a name for a cluster-scoped
    /// object of a test on the [shared](TestEnv::shared) server.
    #[cfg(feature = "fixtures")]
    pub fn unique_name(&self, prefix: &str) -> String {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        format!("{prefix}-{}", NEXT.fetch_add(1, Ordering::Relaxed))
    }

    /// Creates a namespace of the test's own (named after `prefix`) and returns its name.
    #[cfg(feature = "fixtures")]
    #[context("Creating a namespace for {prefix}")]
    pub async fn namespace(&self, prefix: &str) -> anyhow::Result<String> {
        let name = self.unique_name(prefix);
        let namespace: Namespace = serde_json::from_value(serde_json::json!({"metadata": {"name": name}}))?;
        Api::<Namespace>::all(self.client.clone()).create(&PostParams::default(), &namespace).await?;
        Ok(name)
    }

    /// Writes a kubeconfig like [`TestEnv::kubeconfig`]'s for `user` (in `group` if given), with a
    /// client certificate of its own: the identity Kubernetes components such as
    /// `system:kube-scheduler` have the default RBAC rules of.
    #[context("Writing a kubeconfig for {user} into {}", path.display())]
    pub fn write_client_kubeconfig(&self, path: &Path, user: &str, group: Option<&str>) -> anyhow::Result<()> {
        let cluster = &self.cluster;
        let client = cluster.pki.client(user, group)?;
        write_kubeconfig(path, &cluster.pki.ca_cert, cluster.apiserver_port, user, (&client.0, &client.1))
    }

    /// The CA certificate (PEM file) the API server's serving and client certificates chain to.
    pub fn ca_cert(&self) -> &Path {
        &self.cluster.files.ca_cert
    }

    /// The private key (PEM file) service-account tokens are signed with.
    pub fn service_account_key(&self) -> &Path {
        &self.cluster.files.service_account_key
    }

    /// The environment's directory: certificates, etcd data, and the processes' logs
    /// (`etcd.log`, `kube-apiserver.log`). Removed on drop unless [`KEEP_ENV`] is set.
    pub fn dir(&self) -> &Path {
        &self.cluster.dir
    }

    /// The audit log: one JSON event (audit.k8s.io/v1, level Metadata) per request that a service
    /// account of mco's namespace made (mco's components as pods), nothing else.
    pub fn audit_log(&self) -> PathBuf {
        self.cluster.dir.join(AUDIT_LOG_FILE)
    }

    fn processes(&mut self) -> &mut Processes {
        self.processes.as_mut().expect("the shared API server cannot be stopped: use TestEnv::start")
    }

    /// Kills the API server (SIGKILL, like a crash). etcd and its data stay; requests fail until
    /// [`TestEnv::start_apiserver`].
    pub fn stop_apiserver(&mut self) {
        self.processes().apiserver = None;
    }

    /// Starts the API server (again, on the same port with the same certificates, so existing
    /// clients and kubeconfigs keep working) and waits until it is ready. A no-op if it runs.
    pub async fn start_apiserver(&mut self) -> Result<(), Error> {
        let client = self.client.clone();
        let processes = self.processes();
        if processes.apiserver.is_some() {
            return Ok(());
        }
        let mut apiserver = Process::spawn(
            "kube-apiserver",
            &processes.apiserver_binary,
            &processes.apiserver_args,
            processes.dir.path(),
        )?;
        apiserver
            .wait_until(READY_TIMEOUT, || async {
                let request = http::Request::get("/readyz").body(Vec::new()).expect("a valid request");
                client.request_text(request).await.map(drop).map_err(|e| e.to_string())
            })
            .await?;
        processes.apiserver = Some(apiserver);
        Ok(())
    }

    /// [`TestEnv::stop_apiserver`] then [`TestEnv::start_apiserver`]: objects stay in etcd.
    pub async fn restart_apiserver(&mut self) -> Result<(), Error> {
        self.stop_apiserver();
        self.start_apiserver().await
    }

    /// Stops both processes (the API server killed, etcd with SIGTERM, so that it closes its
    /// files); the directory stays until the environment is dropped. The lab stops its cluster's
    /// so, since it keeps the data.
    pub async fn shut_down(&mut self) -> anyhow::Result<()> {
        let processes = self.processes();
        processes.apiserver = None;
        processes.etcd.terminate().await
    }

    /// Creates every object of the YAML files (multi-document) in `dir`, in file name order, as
    /// `kubectl create -f DIR` does. Namespaced objects without a namespace go to `default`.
    #[context("Creating the manifests of {}", dir.display())]
    pub async fn create_manifests(&self, dir: &Path) -> anyhow::Result<Vec<DynamicObject>> {
        let mut files: Vec<PathBuf> = std::fs::read_dir(dir)?
            .map(|entry| Ok(entry?.path()))
            .collect::<std::io::Result<Vec<_>>>()?
            .into_iter()
            .filter(|p| p.extension().is_some_and(|e| e == "yaml" || e == "yml"))
            .collect();
        files.sort();
        let discovery = Discovery::new(self.client.clone()).run().await.context("discovering the API")?;
        let mut created = Vec::new();
        for file in files {
            let text = std::fs::read_to_string(&file).with_context(|| file.display().to_string())?;
            for document in serde_yaml::Deserializer::from_str(&text) {
                let value = serde_json::Value::deserialize(document).with_context(|| file.display().to_string())?;
                if value.is_null() {
                    continue;
                }
                let object: DynamicObject =
                    serde_json::from_value(value).with_context(|| file.display().to_string())?;
                created.push(self.create_object(&discovery, object).await.with_context(|| file.display().to_string())?);
            }
        }
        Ok(created)
    }

    async fn create_object(&self, discovery: &Discovery, object: DynamicObject) -> anyhow::Result<DynamicObject> {
        let types = object.types.clone().context("no apiVersion/kind")?;
        let gvk = GroupVersionKind::try_from(&types)?;
        let (resource, capabilities): (ApiResource, _) =
            discovery.resolve_gvk(&gvk).with_context(|| format!("the API server does not serve {gvk:?}"))?;
        let api: Api<DynamicObject> = match capabilities.scope {
            Scope::Cluster => Api::all_with(self.client.clone(), &resource),
            Scope::Namespaced => {
                let namespace = object.metadata.namespace.as_deref().unwrap_or("default");
                Api::namespaced_with(self.client.clone(), namespace, &resource)
            }
        };
        let name = object.metadata.name.clone().unwrap_or_default();
        api.create(&PostParams::default(), &object).await.with_context(|| format!("creating {} {name}", types.kind))
    }

    /// Marks the ControllerConfig as synced by the template controller, which test clusters do
    /// not run: `status.observedGeneration` = `metadata.generation` and only
    /// `TemplateControllerCompleted` True. The render controller waits for exactly that.
    #[context("Marking ControllerConfig {CONTROLLER_CONFIG_NAME} completed")]
    pub async fn mark_controller_config_completed(&self) -> anyhow::Result<()> {
        let api: Api<ControllerConfig> = Api::all(self.client.clone());
        let generation = api.get(CONTROLLER_CONFIG_NAME).await?.metadata.generation;
        let condition = |type_: &str, status: &str| serde_json::json!({"type": type_, "status": status});
        let status = serde_json::json!({
            "status": {
                "observedGeneration": generation,
                "conditions": [
                    condition(controller_config_condition::TEMPLATE_CONTROLLER_RUNNING, "False"),
                    condition(controller_config_condition::TEMPLATE_CONTROLLER_COMPLETED, "True"),
                    condition(controller_config_condition::TEMPLATE_CONTROLLER_FAILING, "False"),
                ],
            },
        });
        api.patch_status(CONTROLLER_CONFIG_NAME, &PatchParams::default(), &Patch::Merge(&status)).await?;
        Ok(())
    }

    #[context("Installing the CRDs")]
    async fn install_crds(&self) -> anyhow::Result<()> {
        let api: Api<CustomResourceDefinition> = Api::all(self.client.clone());
        let crds = mco_api::crds();
        for crd in &crds {
            let name = crd.metadata.name.clone().unwrap_or_default();
            api.create(&PostParams::default(), crd).await.with_context(|| format!("creating CRD {name}"))?;
        }
        for crd in &crds {
            let name = crd.metadata.name.clone().unwrap_or_default();
            tokio::time::timeout(CRD_TIMEOUT, await_condition(api.clone(), &name, conditions::is_crd_established()))
                .await
                .with_context(|| format!("CRD {name} not established after {CRD_TIMEOUT:?}"))?
                .with_context(|| format!("watching CRD {name}"))?;
        }
        Ok(())
    }
}

/// Paths of the PEM files the API server reads.
struct PkiFiles {
    ca_cert: PathBuf,
    serving_cert: PathBuf,
    serving_key: PathBuf,
    service_account_key: PathBuf,
    service_account_public_key: PathBuf,
    kubelet_client_cert: PathBuf,
    kubelet_client_key: PathBuf,
}

impl Drop for Processes {
    fn drop(&mut self) {
        if std::env::var_os(KEEP_ENV).is_some() {
            self.dir.disable_cleanup(true);
            eprintln!("{KEEP_ENV}: kept {}", self.dir.path().display());
        }
    }
}

#[context("Writing certificates into {}", dir.display())]
fn write_pki(dir: &Path, pki: &Pki) -> anyhow::Result<PkiFiles> {
    let files = PkiFiles {
        ca_cert: dir.join("ca.crt"),
        serving_cert: dir.join("apiserver.crt"),
        serving_key: dir.join("apiserver.key"),
        service_account_key: dir.join("service-account.key"),
        service_account_public_key: dir.join("service-account.pub"),
        kubelet_client_cert: dir.join("kubelet-client.crt"),
        kubelet_client_key: dir.join("kubelet-client.key"),
    };
    for (path, pem) in [
        (&files.ca_cert, &pki.ca_cert),
        (&files.serving_cert, &pki.serving_cert),
        (&files.serving_key, &pki.serving_key),
        (&files.service_account_key, &pki.service_account_key),
        (&files.service_account_public_key, &pki.service_account_public_key),
        (&files.kubelet_client_cert, &pki.kubelet_client_cert),
        (&files.kubelet_client_key, &pki.kubelet_client_key),
    ] {
        std::fs::write(path, pem).with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(files)
}

const AUDIT_POLICY_FILE: &str = "audit-policy.yaml";
const AUDIT_LOG_FILE: &str = "audit.log";
/// What [`TestEnv::audit_log`] records: who asked for what, at completion, and for a watch also
/// when it starts (it may not complete before the test ends).
const AUDIT_POLICY: &str = r#"apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
  - level: Metadata
    userGroups: ["system:serviceaccounts:openshift-machine-config-operator"]
  - level: None
"#;

/// As in a real cluster: kubelets are authorized as their own Node only, and may run privileged pods.
fn apiserver_args(dir: &Path, files: &PkiFiles, etcd_url: &str, port: u16, network: &Network) -> Vec<String> {
    let path = |p: &Path| p.display().to_string();
    vec![
        format!("--etcd-servers={etcd_url}"),
        format!("--bind-address={}", network.bind_address),
        format!("--advertise-address={}", network.advertise_address),
        format!("--secure-port={port}"),
        format!("--cert-dir={}", path(&dir.join("apiserver-certs"))),
        format!("--tls-cert-file={}", path(&files.serving_cert)),
        format!("--tls-private-key-file={}", path(&files.serving_key)),
        format!("--client-ca-file={}", path(&files.ca_cert)),
        "--authorization-mode=Node,RBAC".to_string(),
        "--enable-admission-plugins=NodeRestriction".to_string(),
        // Node names are not in any DNS: reach kubelets (logs, exec) by their address.
        "--kubelet-preferred-address-types=InternalIP,Hostname".to_string(),
        "--allow-privileged=true".to_string(),
        format!("--kubelet-client-certificate={}", path(&files.kubelet_client_cert)),
        format!("--kubelet-client-key={}", path(&files.kubelet_client_key)),
        format!("--service-account-key-file={}", path(&files.service_account_public_key)),
        format!("--service-account-signing-key-file={}", path(&files.service_account_key)),
        "--service-account-issuer=https://kubernetes.default.svc".to_string(),
        format!("--service-cluster-ip-range={SERVICE_CLUSTER_IP_RANGE}"),
        format!("--audit-policy-file={}", path(&dir.join(AUDIT_POLICY_FILE))),
        format!("--audit-log-path={}", path(&dir.join(AUDIT_LOG_FILE))),
        // Written as requests complete, so a test reads what has happened so far.
        "--audit-log-mode=blocking".to_string(),
    ]
}

/// A kubeconfig for `user` with everything inline, so it stays valid wherever it is copied.
#[context("Writing {}", path.display())]
fn write_kubeconfig(
    path: &Path,
    ca_cert: &str,
    port: u16,
    user: &str,
    (cert, key): (&str, &str),
) -> anyhow::Result<()> {
    let kubeconfig = serde_json::json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{
            "name": "mco-testenv",
            "cluster": {
                "server": format!("https://127.0.0.1:{port}"),
                "certificate-authority-data": STANDARD.encode(ca_cert),
            },
        }],
        "users": [{
            "name": user,
            "user": {
                "client-certificate-data": STANDARD.encode(cert),
                "client-key-data": STANDARD.encode(key),
            },
        }],
        "contexts": [{ "name": "mco-testenv", "context": { "cluster": "mco-testenv", "user": user } }],
        "current-context": "mco-testenv",
    });
    std::fs::write(path, serde_yaml::to_string(&kubeconfig)?)?;
    Ok(())
}

/// A schemaless, cluster-scoped `config.openshift.io/v1` CRD for `kind` (Infrastructure,
/// ClusterVersion, Scheduler…): what tests and the lab need where no operator owns those kinds.
pub fn config_openshift_crd(kind: &str, plural: &str) -> serde_json::Value {
    serde_json::json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("{plural}.config.openshift.io")},
        "spec": {
            "group": "config.openshift.io",
            "names": {"kind": kind, "plural": plural, "singular": kind.to_lowercase(), "listKind": format!("{kind}List")},
            "scope": "Cluster",
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}},
            }],
        },
    })
}

/// Creates `crds` and waits until the API server serves each.
#[context("Installing CRDs")]
pub async fn install_crds(client: &Client, crds: &[serde_json::Value]) -> anyhow::Result<()> {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    for crd in crds {
        let crd: CustomResourceDefinition = serde_json::from_value(crd.clone())?;
        let name = crd.metadata.name.clone().unwrap_or_default();
        api.create(&PostParams::default(), &crd).await.with_context(|| format!("creating CRD {name}"))?;
        tokio::time::timeout(
            Duration::from_secs(60),
            await_condition(api.clone(), &name, conditions::is_crd_established()),
        )
        .await
        .with_context(|| format!("CRD {name} not established after 60 s"))??;
    }
    Ok(())
}

/// A client built the way `--kubeconfig` flags build one, so the file itself is exercised.
#[context("Creating a client from {}", path.display())]
pub async fn client_from_kubeconfig(path: &Path) -> anyhow::Result<Client> {
    let kubeconfig = Kubeconfig::read_from(path)?;
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default()).await?;
    Ok(Client::try_from(config)?)
}

/// How long [`eventually`] waits: generous, because tests run many API servers at once on small
/// machines; a test asserts what happens, never how fast.
#[cfg(feature = "fixtures")]
pub const EVENTUALLY_TIMEOUT: Duration = Duration::from_secs(120);

/// Polls `probe` until it returns `Ok` and returns that value. A probe that is not satisfied
/// returns `Err` with what it saw instead; after [`EVENTUALLY_TIMEOUT`] this panics naming both
/// `what` was awaited and the last thing seen, so a failure on a slow machine says how far it got.
#[cfg(feature = "fixtures")]
pub async fn eventually<T, Seen, F, Fut>(what: &str, probe: F) -> T
where
    Seen: std::fmt::Debug,
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, Seen>>,
{
    eventually_within(EVENTUALLY_TIMEOUT, what, probe).await
}

/// An [`eventually`] probe's answer: `seen` when it satisfies `wanted`, else `seen` as what was
/// seen instead.
#[cfg(feature = "fixtures")]
pub fn satisfying<S>(seen: S, wanted: impl FnOnce(&S) -> bool) -> Result<S, S> {
    if wanted(&seen) { Ok(seen) } else { Err(seen) }
}

/// `text` as an Ignition `data:` URL (every byte but ASCII letters and digits escaped).
#[cfg(feature = "fixtures")]
pub fn data_url(text: &str) -> String {
    let escaped: String = text
        .bytes()
        .map(|b| if b.is_ascii_alphanumeric() { (b as char).to_string() } else { format!("%{b:02X}") })
        .collect();
    format!("data:,{escaped}")
}

/// Text an [`eventually`] failure shows as it is, so a log keeps its lines.
#[cfg(feature = "fixtures")]
pub struct Verbatim(pub String);

#[cfg(feature = "fixtures")]
impl std::fmt::Debug for Verbatim {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// A wait at least this long is logged with what it waited for.
#[cfg(feature = "fixtures")]
const SLOW_WAIT: Duration = Duration::from_secs(15);

/// [`eventually`] with a chosen bound.
#[cfg(feature = "fixtures")]
pub async fn eventually_within<T, Seen, F, Fut>(timeout: Duration, what: &str, mut probe: F) -> T
where
    Seen: std::fmt::Debug,
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, Seen>>,
{
    let started = std::time::Instant::now();
    let deadline = started + timeout;
    loop {
        let seen = match probe().await {
            Ok(value) => {
                // Where a slow run spent its time (the lab's scenarios vary two to three times).
                if started.elapsed() >= SLOW_WAIT {
                    eprintln!("waited {:.1} s for {what}", started.elapsed().as_secs_f64());
                }
                return value;
            }
            Err(seen) => seen,
        };
        assert!(
            std::time::Instant::now() < deadline,
            "timed out after {timeout:?} waiting for {what}; last seen: {seen:#?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[cfg(all(test, feature = "fixtures"))]
mod tests {
    use super::*;

    #[tokio::test]
    async fn eventually_returns_the_first_satisfied_value() {
        let mut polls = 0;
        let value = eventually("the third poll", || {
            polls += 1;
            let seen = polls;
            async move { if seen == 3 { Ok(seen * 10) } else { Err(seen) } }
        })
        .await;
        assert_eq!(value, 30);
    }

    #[tokio::test]
    #[should_panic(expected = "waiting for a value that never comes; last seen: \"attempt")]
    async fn eventually_names_what_it_awaited_and_saw_last() {
        let mut polls = 0;
        eventually_within(Duration::from_millis(350), "a value that never comes", || {
            polls += 1;
            let seen = format!("attempt {polls}");
            async move { Err::<(), _>(seen) }
        })
        .await;
    }
}
