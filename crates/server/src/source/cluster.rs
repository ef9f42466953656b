//! Cluster mode: configs come from the API server. Pools, MachineConfigs,
//! the ControllerConfig and the `kubeconfig-data` ConfigMap are watched (kube-rs reflectors: one
//! list, then a watch), so requests are answered from memory without calling the API server.
//! A pool's snapshot is kept while its chosen rendered config, that config, the ControllerConfig
//! and the node kubeconfig stay the same; any change to them drops it (and its cached bodies)
//! as soon as the watch reports it.
//!
//! A layered pool's new nodes boot straight into its built image ([`layered_image`]), as upstream.
//!
//! The kubeconfig handed to new nodes is built as upstream builds it: the token and CA of the
//! node-bootstrapper service account, which upstream mounts from its secret at
//! `/etc/mcs/bootstrap-token` (`--bootstrap-token-dir`), with the CA replaced by the ConfigMap
//! `kubeconfig-data`'s `ca-bundle.crt` when that exists. The files are re-read when they change.
//!
//! Boot image skew enforcement ([`crate::skew`]): MachineConfiguration `cluster` is watched too;
//! machines whose boot image is too old for its `status.bootImageSkewEnforcementStatus` are
//! refused (403, a Warning Event `BootImageSkewRefused` on the pool, at most one per pool and
//! version per 10 minutes), and every served config carries that status in
//! [`SKEW_STATUS_FILE`] so firstboot can check the boot image again before it pivots.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use anyhow::Context as _;
use base64::Engine as _;
use futures::{Stream, StreamExt as _, TryStreamExt as _};
use k8s_openapi::api::core::v1::{ConfigMap, ObjectReference, Service};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt as _, watcher};
use kube::{Api, Client, Resource, ResourceExt as _};
use mco_api::constants::{CONTROLLER_CONFIG_NAME, MACHINE_CONFIGURATION_NAME, MCO_NAMESPACE, OS_IMAGE_STREAM_NAME};
use mco_api::machineconfiguration::machine_os_build_condition;
use mco_api::{
    ControllerConfig, MachineConfig, MachineConfigPool, MachineConfiguration, MachineOSBuild, MachineOSConfig,
    OSImageStream,
};
use mco_bootimage::skew::SKEW_STATUS_FILE;

use super::{ConfigSource, SourceError, cluster_config_name};
use crate::cache::BodyCache;
use crate::serve::Inputs;
use crate::skew::{self, Admission, EventLimiter};
use crate::source::Snapshot;
use crate::stamp::Stamp;

/// Upstream's mount of the node-bootstrapper token secret.
pub const DEFAULT_BOOTSTRAP_TOKEN_DIR: &str = "/etc/mcs/bootstrap-token";
/// The ConfigMap (in the MCO namespace) whose `ca-bundle.crt` replaces the token secret's CA.
pub const KUBECONFIG_DATA_CONFIGMAP: &str = "kubeconfig-data";
const KUBECONFIG_DATA_CA_KEY: &str = "ca-bundle.crt";
/// Files of a service account token secret (`corev1.ServiceAccountTokenKey`, `ServiceAccountRootCAKey`).
const TOKEN_FILE: &str = "token";
const CA_FILE: &str = "ca.crt";
/// Namespace of the cluster's internal image registry.
const IMAGE_REGISTRY_NAMESPACE: &str = "openshift-image-registry";
/// The reporting controller of the server's Events (upstream's component name).
const EVENT_REPORTER: &str = "machine-config-server";

/// How the cluster source is set up.
#[derive(Debug, Clone)]
pub struct ClusterOptions {
    /// API server URL written into the served kubeconfig (upstream `--apiserver-url`: the
    /// internal API URL new nodes can reach).
    pub apiserver_url: String,
    /// Directory holding `token` and `ca.crt` of the node-bootstrapper service account.
    pub bootstrap_token_dir: PathBuf,
    /// How long to wait for the first list of every watched kind before giving up.
    pub sync_timeout: Duration,
}

/// Serves from the cluster. Dropping it stops its watches.
pub struct ClusterSource {
    inner: Arc<Inner>,
    watches: Vec<tokio::task::AbortHandle>,
}

struct Inner {
    client: Client,
    pools: Store<MachineConfigPool>,
    machine_configs: Store<MachineConfig>,
    controller_configs: Store<ControllerConfig>,
    kubeconfig_data: Store<ConfigMap>,
    machine_os_configs: Store<MachineOSConfig>,
    machine_os_builds: Store<MachineOSBuild>,
    registry_services: Store<Service>,
    machine_configurations: Store<MachineConfiguration>,
    os_image_streams: Store<OSImageStream>,
    node_kubeconfig: NodeKubeconfig,
    cache: Arc<BodyCache>,
    loaded: Mutex<HashMap<String, Loaded>>,
    /// Serializes snapshot builds so a burst of requests after a change copies the inputs once.
    reload: tokio::sync::Mutex<()>,
    refusal_events: Mutex<EventLimiter>,
}

struct Loaded {
    fingerprint: Fingerprint,
    snapshot: Arc<Snapshot>,
}

/// What a pool's body depends on: equal fingerprints mean equal bodies.
#[derive(Debug, Clone, PartialEq)]
struct Fingerprint {
    config_name: String,
    machine_config: Revision,
    controller_config: Revision,
    kubeconfig: Arc<Vec<u8>>,
    desired_image: String,
    /// Contents of [`SKEW_STATUS_FILE`], when the cluster has a skew status.
    skew_status: Option<Vec<u8>>,
}

/// An object's identity and version: a deleted and recreated object differs by uid.
#[derive(Debug, Clone, PartialEq)]
struct Revision {
    uid: Option<String>,
    resource_version: Option<String>,
}

impl Revision {
    fn of<K: Resource>(object: &K) -> Self {
        Revision { uid: object.meta().uid.clone(), resource_version: object.meta().resource_version.clone() }
    }
}

/// Everything a lookup read, taken from the watch caches at one moment.
struct Current {
    fingerprint: Fingerprint,
    machine_config: Arc<MachineConfig>,
    controller_config: Arc<ControllerConfig>,
}

impl ClusterSource {
    /// Starts the watches and waits until each has listed its objects. Fails at once when the
    /// token files cannot be read, and after `sync_timeout` when the API server does not answer.
    pub async fn start(client: Client, options: ClusterOptions, cache: Arc<BodyCache>) -> anyhow::Result<Self> {
        let node_kubeconfig = NodeKubeconfig::new(options.apiserver_url, options.bootstrap_token_dir);
        node_kubeconfig.get(None).context("reading the node-bootstrapper token")?;

        let (pools, pools_writer) = reflector::store();
        let (machine_configs, machine_configs_writer) = reflector::store();
        let (controller_configs, controller_configs_writer) = reflector::store();
        let (kubeconfig_data, kubeconfig_data_writer) = reflector::store();
        let (machine_os_configs, machine_os_configs_writer) = reflector::store();
        let (machine_os_builds, machine_os_builds_writer) = reflector::store();
        let (registry_services, registry_services_writer) = reflector::store();
        let (machine_configurations, machine_configurations_writer) = reflector::store();
        let (os_image_streams, os_image_streams_writer) = reflector::store();
        let inner = Arc::new(Inner {
            client: client.clone(),
            pools: pools.clone(),
            machine_configs: machine_configs.clone(),
            controller_configs: controller_configs.clone(),
            kubeconfig_data: kubeconfig_data.clone(),
            machine_os_configs: machine_os_configs.clone(),
            machine_os_builds: machine_os_builds.clone(),
            registry_services: registry_services.clone(),
            machine_configurations: machine_configurations.clone(),
            os_image_streams: os_image_streams.clone(),
            node_kubeconfig,
            cache,
            loaded: Mutex::default(),
            reload: tokio::sync::Mutex::new(()),
            refusal_events: Mutex::default(),
        });
        let all = watcher::Config::default();
        let config_map = watcher::Config::default().fields(&format!("metadata.name={KUBECONFIG_DATA_CONFIGMAP}"));
        let configuration = watcher::Config::default().fields(&format!("metadata.name={MACHINE_CONFIGURATION_NAME}"));
        let os_image_stream = watcher::Config::default().fields(&format!("metadata.name={OS_IMAGE_STREAM_NAME}"));
        let watches = vec![
            spawn_watch(&inner, pools_writer, Api::all(client.clone()), all.clone()),
            spawn_watch(&inner, machine_configs_writer, Api::all(client.clone()), all.clone()),
            spawn_watch(&inner, controller_configs_writer, Api::all(client.clone()), all.clone()),
            spawn_watch(&inner, kubeconfig_data_writer, Api::namespaced(client.clone(), MCO_NAMESPACE), config_map),
            spawn_watch(&inner, machine_os_configs_writer, Api::all(client.clone()), all.clone()),
            spawn_watch(&inner, machine_os_builds_writer, Api::all(client.clone()), all.clone()),
            spawn_watch(
                &inner,
                registry_services_writer,
                Api::namespaced(client.clone(), IMAGE_REGISTRY_NAMESPACE),
                all,
            ),
            spawn_watch(&inner, machine_configurations_writer, Api::all(client.clone()), configuration),
            spawn_watch(&inner, os_image_streams_writer, Api::all(client), os_image_stream),
        ];
        let source = ClusterSource { inner, watches };
        let timeout = options.sync_timeout;
        wait_ready("MachineConfigPools", &pools, timeout).await?;
        wait_ready("MachineConfigs", &machine_configs, timeout).await?;
        wait_ready("ControllerConfigs", &controller_configs, timeout).await?;
        wait_ready(&format!("ConfigMap {MCO_NAMESPACE}/{KUBECONFIG_DATA_CONFIGMAP}"), &kubeconfig_data, timeout)
            .await?;
        wait_ready("MachineOSConfigs", &machine_os_configs, timeout).await?;
        wait_ready("MachineOSBuilds", &machine_os_builds, timeout).await?;
        wait_ready(&format!("Services in {IMAGE_REGISTRY_NAMESPACE}"), &registry_services, timeout).await?;
        let configuration = format!("MachineConfiguration {MACHINE_CONFIGURATION_NAME}");
        wait_ready(&configuration, &machine_configurations, timeout).await?;
        wait_ready(&format!("OSImageStream {OS_IMAGE_STREAM_NAME}"), &os_image_streams, timeout).await?;
        Ok(source)
    }
}

impl Drop for ClusterSource {
    fn drop(&mut self) {
        for watch in &self.watches {
            watch.abort();
        }
    }
}

async fn wait_ready<K>(what: &str, store: &Store<K>, timeout: Duration) -> anyhow::Result<()>
where
    K: kube::runtime::reflector::Lookup + Clone + 'static,
    K::DynamicType: Eq + std::hash::Hash + Clone,
{
    tokio::time::timeout(timeout, store.wait_until_ready())
        .await
        .with_context(|| format!("the API server did not list {what} within {timeout:?} (see the warnings above)"))?
        .with_context(|| format!("watching {what}"))
}

/// Keeps `writer`'s store in sync with the API server; after every change, drops the snapshots
/// it made stale. Watch errors are retried with backoff (and logged).
fn spawn_watch<K>(
    inner: &Arc<Inner>,
    writer: reflector::store::Writer<K>,
    api: Api<K>,
    config: watcher::Config,
) -> tokio::task::AbortHandle
where
    K: Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned + Send + Sync + 'static,
    K::DynamicType: Eq + std::hash::Hash + Clone + Default,
{
    let inner: Weak<Inner> = Arc::downgrade(inner);
    // Managed fields are a large part of some objects and nothing here reads them.
    let events =
        watcher(api, config).default_backoff().map_ok(|event| event.modify(|o| o.managed_fields_mut().clear()));
    let events: std::pin::Pin<Box<dyn Stream<Item = _> + Send>> = Box::pin(reflector::reflector(writer, events));
    tokio::spawn(events.for_each(move |event| {
        match event {
            Ok(watcher::Event::Init | watcher::Event::InitApply(_)) => {}
            Ok(_) => {
                if let Some(inner) = inner.upgrade() {
                    inner.drop_stale();
                }
            }
            Err(e) => tracing::warn!(kind = %K::kind(&Default::default()), "watch failed (retrying): {e}"),
        }
        std::future::ready(())
    }))
    .abort_handle()
}

impl Inner {
    /// The inputs `pool`'s body would be built from now.
    fn current(&self, pool: &str) -> Result<Current, SourceError> {
        let mcp = self
            .pools
            .get(&ObjectRef::new(pool))
            .ok_or_else(|| SourceError::NotFound(format!("could not fetch pool {pool}: not found")))?;
        // A pool not rendered yet is expected to be soon: 500, which Ignition retries.
        let config_name = cluster_config_name(&mcp)
            .ok_or_else(|| anyhow::anyhow!("pool {pool} has no rendered config yet"))?
            .to_string();
        let machine_config = self
            .machine_configs
            .get(&ObjectRef::new(&config_name))
            .ok_or_else(|| anyhow::anyhow!("could not fetch config {config_name}: not found"))?;
        let controller_config = self
            .controller_configs
            .get(&ObjectRef::new(CONTROLLER_CONFIG_NAME))
            .ok_or_else(|| anyhow::anyhow!("could not get controllerconfig {CONTROLLER_CONFIG_NAME}: not found"))?;
        let kubeconfig_data =
            self.kubeconfig_data.get(&ObjectRef::new(KUBECONFIG_DATA_CONFIGMAP).within(MCO_NAMESPACE));
        let ca_override = kubeconfig_data
            .as_ref()
            .and_then(|cm| cm.binary_data.as_ref()?.get(KUBECONFIG_DATA_CA_KEY))
            .map(|ca| ca.0.as_slice());
        let kubeconfig = self.node_kubeconfig.get(ca_override)?;
        // Most pools are not layered: the builds are only looked at for those that are. A plain
        // pool's nodes run the image its tag was resolved to again, if it was.
        let desired_image = match self.machine_os_configs.find(|c| c.spec.machine_config_pool.name == pool) {
            None => resolved_image(&mcp, &config_name).unwrap_or_default().to_string(),
            Some(os_config) => layered_image(
                &mcp,
                &config_name,
                &[os_config],
                &self.machine_os_builds.state(),
                &internal_registry_hosts(&self.registry_services.state()),
            )
            .unwrap_or_default(),
        };
        let skew_status = self
            .skew_status()
            .map(|status| serde_json::to_vec(&status).context("serializing the boot image skew status"))
            .transpose()?;
        let fingerprint = Fingerprint {
            config_name,
            machine_config: Revision::of(&*machine_config),
            controller_config: Revision::of(&*controller_config),
            kubeconfig,
            desired_image,
            skew_status,
        };
        Ok(Current { fingerprint, machine_config, controller_config })
    }

    /// MachineConfiguration `cluster`'s `status.bootImageSkewEnforcementStatus`.
    fn skew_status(&self) -> Option<mco_api::operator::BootImageSkewEnforcementStatus> {
        let configuration = self.machine_configurations.get(&ObjectRef::new(MACHINE_CONFIGURATION_NAME))?;
        configuration.status.as_ref()?.boot_image_skew_enforcement_status.clone()
    }

    /// The OS stream of the image `pool`'s machines pivot to, when it is a stream's.
    fn pool_stream(&self, pool: &str) -> Option<String> {
        let current = self.current(pool).ok()?;
        let streams = self.os_image_streams.get(&ObjectRef::new(OS_IMAGE_STREAM_NAME))?;
        Some(streams.stream_of(&current.machine_config.spec.os_image_url)?.name.clone())
    }

    /// A Warning Event on the pool, unless this refusal was recorded lately. Sent in the
    /// background: the machine's answer does not wait for the API server.
    fn record_refusal(&self, pool: &str, boot_image_version: Option<&str>, message: &str) {
        let now = std::time::Instant::now();
        let allowed =
            self.refusal_events.lock().expect("not poisoned").allow(pool, boot_image_version.unwrap_or(""), now);
        let Some(mcp) = self.pools.get(&ObjectRef::new(pool)).filter(|_| allowed) else { return };
        let regarding: ObjectReference = mcp.object_ref(&());
        // The first line says it all; an Event note holds at most 1 KiB.
        let note: String = message.lines().next().unwrap_or_default().chars().take(1000).collect();
        let event = Event {
            type_: EventType::Warning,
            reason: skew::REFUSED_EVENT_REASON.to_string(),
            note: Some(note),
            action: "ServeConfig".to_string(),
            secondary: None,
        };
        let recorder =
            Recorder::new(self.client.clone(), Reporter { controller: EVENT_REPORTER.into(), instance: None });
        let pool = pool.to_string();
        tokio::spawn(async move {
            if let Err(e) = recorder.publish(&event, &regarding).await {
                tracing::warn!(pool, "recording event {}: {e}", skew::REFUSED_EVENT_REASON);
            }
        });
    }

    fn cached(&self, pool: &str, fingerprint: &Fingerprint) -> Option<Arc<Snapshot>> {
        let loaded = self.loaded.lock().expect("not poisoned");
        loaded.get(pool).filter(|l| l.fingerprint == *fingerprint).map(|l| Arc::clone(&l.snapshot))
    }

    /// Forgets the snapshots whose inputs changed, so their bodies are freed now rather than at
    /// the pool's next request.
    fn drop_stale(&self) {
        let pools: Vec<String> = self.loaded.lock().expect("not poisoned").keys().cloned().collect();
        for pool in pools {
            let fingerprint = self.current(&pool).ok().map(|c| c.fingerprint);
            let mut loaded = self.loaded.lock().expect("not poisoned");
            if loaded.get(&pool).is_some_and(|l| Some(&l.fingerprint) != fingerprint.as_ref()) {
                tracing::debug!(pool, "inputs changed; dropping the cached bodies");
                loaded.remove(&pool);
            }
        }
    }
}

impl ConfigSource for ClusterSource {
    async fn lookup(&self, pool: &str) -> Result<Arc<Snapshot>, SourceError> {
        let inner = &self.inner;
        let current = match inner.current(pool) {
            Ok(current) => current,
            Err(e) => {
                inner.loaded.lock().expect("not poisoned").remove(pool);
                return Err(e);
            }
        };
        if let Some(snapshot) = inner.cached(pool, &current.fingerprint) {
            return Ok(snapshot);
        }
        let _reloading = inner.reload.lock().await;
        if let Some(snapshot) = inner.cached(pool, &current.fingerprint) {
            return Ok(snapshot);
        }
        let Current { fingerprint, machine_config, controller_config } = current;
        let cache = Arc::clone(&inner.cache);
        // Copying a large config takes a while: keep it off the threads that serve requests.
        let snapshot = tokio::task::spawn_blocking(move || {
            let bytes = |b: &Option<k8s_openapi::ByteString>| b.as_ref().map(|b| b.0.clone()).unwrap_or_default();
            // New machines deploy the digest the controller pinned, as the pool's nodes do; a
            // config without one (a tag) is not served.
            let machine_config = machine_config.as_ref().clone().with_pinned_os_image()?;
            let inputs = Inputs {
                machine_config,
                config_name: fingerprint.config_name.clone(),
                kubeconfig: fingerprint.kubeconfig.to_vec(),
                kubelet_ca: bytes(&controller_config.spec.kube_api_server_serving_ca_data),
                cloud_provider_ca: bytes(&controller_config.spec.cloud_provider_ca_data),
                extra_files: fingerprint
                    .skew_status
                    .iter()
                    .map(|status| (SKEW_STATUS_FILE.to_string(), status.clone()))
                    .collect(),
                desired_image: fingerprint.desired_image.clone(),
                encapsulate_requested_version: true,
            };
            Ok((fingerprint, Arc::new(Snapshot::new(inputs, cache))))
        })
        .await;
        let (fingerprint, snapshot) = snapshot
            .map_err(|e| anyhow::anyhow!("loading pool {pool} panicked: {e}"))?
            .map_err(|e: mco_api::machineconfiguration::PinError| anyhow::Error::from(e))?;
        tracing::info!(pool, config = %fingerprint.config_name, "serving");
        let loaded = Loaded { fingerprint, snapshot: Arc::clone(&snapshot) };
        inner.loaded.lock().expect("not poisoned").insert(pool.to_string(), loaded);
        Ok(snapshot)
    }

    fn has_pool(&self, pool: &str) -> bool {
        self.inner.pools.get(&ObjectRef::new(pool)).is_some()
    }

    fn admit(&self, pool: &str, boot_image_version: Option<&str>) -> Admission {
        let stream = self.inner.pool_stream(pool);
        let admission = skew::judge(pool, self.inner.skew_status().as_ref(), boot_image_version, stream.as_deref());
        if let Admission::Refused(message) = &admission {
            self.inner.record_refusal(pool, boot_image_version, message);
        }
        admission
    }
}

/// The OS image a layered pool's new machines boot into (upstream `resolveDesiredImageForPool`):
/// the current image of the pool's MachineOSConfig, once a build of the served rendered config
/// succeeded and a machine of the pool has updated, unless the image is in the cluster's internal
/// registry (new machines cannot reach it before they join: no cluster DNS yet; they boot the
/// base image and update to the layered one after joining).
pub fn layered_image(
    pool: &MachineConfigPool,
    config_name: &str,
    configs: &[Arc<MachineOSConfig>],
    builds: &[Arc<MachineOSBuild>],
    internal_registry_hosts: &[String],
) -> Option<String> {
    let pool_name = pool.metadata.name.as_deref()?;
    let config = configs.iter().find(|c| c.spec.machine_config_pool.name == pool_name)?;
    let image = config.status.as_ref()?.current_image_pull_spec.as_deref().filter(|i| !i.is_empty())?;
    let config_os_name = config.metadata.name.as_deref()?;
    let build = builds
        .iter()
        .find(|b| b.spec.machine_os_config.name == config_os_name && b.spec.machine_config.name == config_name)?;
    let succeeded = build.status.as_ref().and_then(|s| s.conditions.as_ref()).is_some_and(|conditions| {
        conditions.iter().any(|c| c.type_ == machine_os_build_condition::SUCCEEDED && c.status == "True")
    });
    let updated = pool.status.as_ref().and_then(|s| s.updated_machine_count).unwrap_or(0);
    let internal = internal_registry_hosts.iter().any(|host| image.starts_with(host.as_str()));
    (succeeded && updated > 0 && !internal).then(|| image.to_string())
}

/// The OS image a plain pool's new machines boot into when its tag was resolved again on request
/// for the served config: once a machine of the pool runs it, as for a layered pool's build (until
/// then the rollout policy may still hold every node on the config's own pin).
pub fn resolved_image<'a>(pool: &'a MachineConfigPool, config_name: &str) -> Option<&'a str> {
    let updated = pool.status.as_ref().and_then(|s| s.updated_machine_count).unwrap_or(0);
    pool.resolved_os_image(config_name).filter(|_| updated > 0)
}

/// Host names of the internal registry: `<service>.<namespace>.svc:<first port>` of the Services
/// in its namespace, as upstream. (Upstream also counts the hosts of the registry's Routes; Routes
/// are an OpenShift API this server does not watch.)
fn internal_registry_hosts(services: &[Arc<Service>]) -> Vec<String> {
    services
        .iter()
        .map(|service| {
            let host = format!("{}.{}.svc", service.name_any(), service.namespace().unwrap_or_default());
            match service.spec.as_ref().and_then(|s| s.ports.as_ref()).and_then(|p| p.first()) {
                Some(port) => format!("{host}:{}", port.port),
                None => host,
            }
        })
        .collect()
}

/// The kubeconfig served to new nodes, rebuilt when the token files or the CA override change.
struct NodeKubeconfig {
    apiserver_url: String,
    token_dir: PathBuf,
    built: Mutex<Option<BuiltKubeconfig>>,
}

struct BuiltKubeconfig {
    stamps: [Stamp; 2],
    ca_override: Option<Vec<u8>>,
    yaml: Arc<Vec<u8>>,
}

impl NodeKubeconfig {
    fn new(apiserver_url: String, token_dir: PathBuf) -> Self {
        NodeKubeconfig { apiserver_url, token_dir, built: Mutex::new(None) }
    }

    fn get(&self, ca_override: Option<&[u8]>) -> anyhow::Result<Arc<Vec<u8>>> {
        let (token_path, ca_path) = (self.token_dir.join(TOKEN_FILE), self.token_dir.join(CA_FILE));
        let stamps = [stamp(&token_path)?, stamp(&ca_path)?];
        let mut built = self.built.lock().expect("not poisoned");
        if let Some(b) = built.as_ref().filter(|b| b.stamps == stamps && b.ca_override.as_deref() == ca_override) {
            return Ok(Arc::clone(&b.yaml));
        }
        let token = read(&token_path)?;
        let ca = match ca_override {
            Some(ca) => ca.to_vec(),
            None => read(&ca_path)?,
        };
        let yaml = Arc::new(node_kubeconfig(&self.apiserver_url, &ca, &String::from_utf8_lossy(&token))?);
        *built =
            Some(BuiltKubeconfig { stamps, ca_override: ca_override.map(<[u8]>::to_vec), yaml: Arc::clone(&yaml) });
        Ok(yaml)
    }
}

fn stamp(path: &Path) -> anyhow::Result<Stamp> {
    Stamp::of(path).with_context(|| format!("failed to read {}", path.display()))
}

fn read(path: &Path) -> anyhow::Result<Vec<u8>> {
    std::fs::read(path).with_context(|| format!("failed to read {}", path.display()))
}

/// Upstream's `kubeconfigFromSecret`: cluster `local` at `server` trusting `ca`, user `kubelet`
/// with the bootstrap `token`, as ghodss/yaml prints client-go's `clientcmdv1.Config` (sorted
/// keys, `preferences: {}`, no apiVersion/kind, empty CA or token omitted).
pub fn node_kubeconfig(server: &str, ca: &[u8], token: &str) -> anyhow::Result<Vec<u8>> {
    let mut cluster = serde_json::json!({ "server": server });
    if !ca.is_empty() {
        cluster["certificate-authority-data"] = base64::engine::general_purpose::STANDARD.encode(ca).into();
    }
    let mut user = serde_json::json!({});
    if !token.is_empty() {
        user["token"] = token.into();
    }
    let config = serde_json::json!({
        "preferences": {},
        "clusters": [{ "name": "local", "cluster": cluster }],
        "users": [{ "name": "kubelet", "user": user }],
        "contexts": [{ "name": "kubelet", "context": { "cluster": "local", "user": "kubelet" } }],
        "current-context": "kubelet",
    });
    Ok(mco_goser::ghodss_yaml(&config).context("printing the node kubeconfig")?.into_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tag_resolved_again_is_served_once_a_machine_runs_it() {
        use mco_api::constants::RESOLVED_OS_IMAGE_ANNOTATION;
        use mco_api::machineconfiguration::resolved_os_image_record;
        const IMAGE: &str = "quay.io/org/os@sha256:1111111111111111111111111111111111111111111111111111111111111111";
        let pool = |updated: i32| -> MachineConfigPool {
            let record = resolved_os_image_record("rendered-a", IMAGE);
            serde_json::from_value(serde_json::json!({
                "metadata": {"name": "worker", "annotations": {RESOLVED_OS_IMAGE_ANNOTATION: record}},
                "spec": {}, "status": {"updatedMachineCount": updated}
            }))
            .unwrap()
        };
        assert_eq!(resolved_image(&pool(1), "rendered-a"), Some(IMAGE));
        assert_eq!(resolved_image(&pool(0), "rendered-a"), None, "no machine runs it yet");
        assert_eq!(resolved_image(&pool(1), "rendered-b"), None, "resolved for another config");
    }

    #[test]
    fn layered_image_only_when_built_tested_and_reachable() {
        use serde_json::json;
        const IMAGE: &str = "quay.io/org/layered@sha256:1";
        const INTERNAL: &str = "image-registry.openshift-image-registry.svc:5000/ns/layered@sha256:1";
        let pool = |updated: i32| -> MachineConfigPool {
            serde_json::from_value(json!({
                "metadata": {"name": "worker"}, "spec": {}, "status": {"updatedMachineCount": updated}
            }))
            .unwrap()
        };
        let config = |pool: &str, image: Option<&str>| -> Arc<MachineOSConfig> {
            Arc::new(
                serde_json::from_value(json!({
                    "metadata": {"name": "layered"},
                    "spec": {
                        "machineConfigPool": {"name": pool},
                        "imageBuilder": {"imageBuilderType": "Job"},
                        "renderedImagePushSecret": {"name": "push"},
                        "renderedImagePushSpec": "quay.io/org/layered:latest"
                    },
                    "status": {"currentImagePullSpec": image}
                }))
                .unwrap(),
            )
        };
        let build = |config_name: &str, succeeded: &str| -> Arc<MachineOSBuild> {
            Arc::new(
                serde_json::from_value(json!({
                    "metadata": {"name": "layered-1"},
                    "spec": {
                        "machineConfig": {"name": config_name},
                        "machineOSConfig": {"name": "layered"},
                        "renderedImagePushSpec": "quay.io/org/layered:layered-1"
                    },
                    "status": {"conditions": [{
                        "type": "Succeeded", "status": succeeded, "reason": "x", "message": "",
                        "lastTransitionTime": "2026-01-01T00:00:00Z"
                    }]}
                }))
                .unwrap(),
            )
        };
        let registry = vec!["image-registry.openshift-image-registry.svc:5000".to_string()];
        for (name, updated, configs, builds, want) in [
            ("layered", 1, vec![config("worker", Some(IMAGE))], vec![build("rendered-a", "True")], Some(IMAGE)),
            ("not layered", 1, vec![], vec![build("rendered-a", "True")], None),
            ("another pool's", 1, vec![config("infra", Some(IMAGE))], vec![build("rendered-a", "True")], None),
            ("no image yet", 1, vec![config("worker", None)], vec![build("rendered-a", "True")], None),
            ("empty image", 1, vec![config("worker", Some(""))], vec![build("rendered-a", "True")], None),
            (
                "no build of the served config",
                1,
                vec![config("worker", Some(IMAGE))],
                vec![build("rendered-b", "True")],
                None,
            ),
            ("build not done", 1, vec![config("worker", Some(IMAGE))], vec![build("rendered-a", "False")], None),
            ("no machine updated", 0, vec![config("worker", Some(IMAGE))], vec![build("rendered-a", "True")], None),
            ("internal registry", 1, vec![config("worker", Some(INTERNAL))], vec![build("rendered-a", "True")], None),
        ] {
            let got = layered_image(&pool(updated), "rendered-a", &configs, &builds, &registry);
            assert_eq!(got.as_deref(), want, "{name}");
        }
    }

    #[test]
    fn internal_registry_hosts_from_services() {
        let service = |name: &str, ports: serde_json::Value| -> Arc<Service> {
            Arc::new(
                serde_json::from_value(serde_json::json!({
                    "metadata": {"name": name, "namespace": IMAGE_REGISTRY_NAMESPACE},
                    "spec": {"ports": ports}
                }))
                .unwrap(),
            )
        };
        let services = [
            service("image-registry", serde_json::json!([{"port": 5000}, {"port": 5001}])),
            service("headless", serde_json::json!([])),
        ];
        assert_eq!(
            internal_registry_hosts(&services),
            ["image-registry.openshift-image-registry.svc:5000", "headless.openshift-image-registry.svc"]
        );
    }

    #[test]
    fn node_kubeconfig_as_upstream_prints_it() {
        let yaml = node_kubeconfig("https://api-int.example.com:6443", b"CA\n", "abc.def").unwrap();
        assert_eq!(
            String::from_utf8(yaml).unwrap(),
            "clusters:
- cluster:
    certificate-authority-data: Q0EK
    server: https://api-int.example.com:6443
  name: local
contexts:
- context:
    cluster: local
    user: kubelet
  name: kubelet
current-context: kubelet
preferences: {}
users:
- name: kubelet
  user:
    token: abc.def
"
        );
        let empty = String::from_utf8(node_kubeconfig("https://x:6443", b"", "").unwrap()).unwrap();
        assert!(!empty.contains("certificate-authority-data") && empty.contains("  user: {}\n"), "{empty}");
    }

    #[test]
    fn node_kubeconfig_follows_the_files_and_the_ca_override() {
        let dir = tempfile::tempdir().unwrap();
        let kubeconfig = NodeKubeconfig::new("https://api:6443".into(), dir.path().into());
        let err = kubeconfig.get(None).unwrap_err();
        assert!(format!("{err:#}").starts_with(&format!("failed to read {}", dir.path().join("token").display())));
        std::fs::write(dir.path().join("token"), "one").unwrap();
        std::fs::write(dir.path().join("ca.crt"), "CA1").unwrap();
        let first = kubeconfig.get(None).unwrap();
        assert!(Arc::ptr_eq(&first, &kubeconfig.get(None).unwrap()), "unchanged files: the same bytes");
        let text = |k: &Arc<Vec<u8>>| String::from_utf8(k.to_vec()).unwrap();
        assert!(text(&first).contains("token: one") && text(&first).contains("Q0Ex"));

        let overridden = kubeconfig.get(Some(b"CA2")).unwrap();
        assert!(text(&overridden).contains("Q0Ey"), "{}", text(&overridden));
        std::fs::rename(dir.path().join("token"), dir.path().join("old")).unwrap();
        std::fs::write(dir.path().join("token"), "two").unwrap();
        assert!(text(&kubeconfig.get(None).unwrap()).contains("token: two"));
    }
}
