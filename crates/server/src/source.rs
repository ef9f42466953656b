//! Where the served configs come from. The HTTP handler only sees [`ConfigSource`]: the
//! bootstrap mode reads upstream's directory layout ([`BootstrapSource`]); the cluster mode reads
//! pools and rendered configs from the API server and picks the config with
//! [`cluster_config_name`].
//!
//! A source hands out [`Snapshot`]s: the inputs of one pool's body; the encoded bodies are built
//! once per spec version and shared (`Bytes`) by every response through the size-capped
//! [`BodyCache`]. A source that sees its inputs change hands out a new snapshot, so the cache can
//! never serve stale bytes; the old snapshot's bodies leave the cache when it is dropped, and are
//! freed when the last response using them is done.

pub mod cluster;

use std::collections::HashMap;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use anyhow::Context;
use bytes::Bytes;
use mco_api::{ControllerConfig, MachineConfig, MachineConfigPool};
use mco_ignition::convert::Target;
use tokio::sync::Semaphore;

use crate::cache::BodyCache;
use crate::serve::{self, Inputs, ServeError};
use crate::skew::Admission;
use crate::stamp::Stamp;

/// Why a pool's config cannot be served.
#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    /// No such pool, or its config does not exist (HTTP 404: Ignition gives up at once).
    #[error("{0}")]
    NotFound(String),
    /// The pool exists but this server does not serve it (HTTP 500, as upstream).
    #[error("{0}")]
    Refused(String),
    /// Reading or parsing the inputs failed (HTTP 500).
    #[error(transparent)]
    Failed(#[from] anyhow::Error),
}

/// The configs a server hands out. Lookups are frequent (every request): implementations answer
/// from memory when nothing changed.
pub trait ConfigSource: Send + Sync + 'static {
    fn lookup(&self, pool: &str) -> impl Future<Output = Result<Arc<Snapshot>, SourceError>> + Send;

    /// Whether `pool` exists, servable or not (a cheap check, made for every config request: the
    /// metrics name only existing pools).
    fn has_pool(&self, pool: &str) -> bool;

    /// Whether a machine of `pool` that booted from `boot_image_version` (`None`: it did not
    /// say) may get its config. Sources without boot image skew enforcement allow every machine.
    fn admit(&self, _pool: &str, _boot_image_version: Option<&str>) -> Admission {
        Admission::Allowed
    }
}

/// Building a body of a large config takes a few hundred megabytes for a moment; one build at a
/// time keeps memory bounded when many versions or pools are asked for at once.
static BUILD_PERMITS: Semaphore = Semaphore::const_new(1);

/// Snapshot ids: a new one for every new set of inputs, so cached bodies are never stale.
static NEXT_SNAPSHOT: AtomicU64 = AtomicU64::new(1);

/// One pool's inputs at one moment. Its encoded bodies, one per spec version, are built on first
/// use and kept in the shared [`BodyCache`] (until evicted, or until the snapshot is replaced).
#[derive(Debug)]
pub struct Snapshot {
    id: u64,
    inputs: Inputs,
    cache: Arc<BodyCache>,
    /// One build per version at a time; a failed build is remembered (the inputs cannot change).
    builds: [tokio::sync::Mutex<Option<ServeError>>; Target::ALL.len()],
}

impl Snapshot {
    pub fn new(inputs: Inputs, cache: Arc<BodyCache>) -> Self {
        let id = NEXT_SNAPSHOT.fetch_add(1, Ordering::Relaxed);
        Snapshot { id, inputs, cache, builds: Default::default() }
    }

    pub fn inputs(&self) -> &Inputs {
        &self.inputs
    }

    /// The body for `version`; concurrent first requests wait for one build.
    pub async fn body(self: &Arc<Self>, version: Target) -> Result<Bytes, ServeError> {
        let key = (self.id, version);
        if let Some(body) = self.cache.get(key) {
            return Ok(body);
        }
        let index = Target::ALL.iter().position(|t| *t == version).expect("every target is in ALL");
        let mut failed = self.builds[index].lock().await;
        if let Some(e) = &*failed {
            return Err(e.clone());
        }
        if let Some(body) = self.cache.get(key) {
            return Ok(body);
        }
        let _permit = BUILD_PERMITS.acquire().await.expect("never closed");
        let this = Arc::clone(self);
        let built = tokio::task::spawn_blocking(move || serve::build(&this.inputs, version).map(Bytes::from))
            .await
            .unwrap_or_else(|e| Err(ServeError::Serialize(format!("building the body panicked: {e}"))));
        match built {
            Ok(body) => {
                if !self.cache.insert(key, body.clone()) {
                    tracing::warn!(
                        config = %self.inputs.config_name,
                        bytes = body.len(),
                        "the body is larger than the whole body cache: it is rebuilt for every request"
                    );
                }
                Ok(body)
            }
            Err(e) => {
                *failed = Some(e.clone());
                Err(e)
            }
        }
    }
}

impl Drop for Snapshot {
    fn drop(&mut self) {
        self.cache.remove_snapshot(self.id);
    }
}

/// Which rendered config new machines of a pool get in cluster mode: the pool's target once at
/// least one machine has updated to it, otherwise what all its machines run. New machines
/// never get an untested config (it may be broken, e.g. an expired pull secret).
pub fn cluster_config_name(pool: &MachineConfigPool) -> Option<&str> {
    let updated = pool.status.as_ref().and_then(|s| s.updated_machine_count).unwrap_or(0);
    let configuration = if updated > 0 {
        pool.spec.configuration.as_ref()
    } else {
        pool.status.as_ref().and_then(|s| s.configuration.as_ref())
    };
    configuration.and_then(|c| c.name.as_deref()).filter(|n| !n.is_empty())
}

/// Pools the bootstrap server serves: the control plane only (workers join the real cluster).
const BOOTSTRAP_POOLS: [&str; 2] = ["master", "arbiter"];

/// Serves from upstream's bootstrap directory: `machine-pools/<pool>.yaml` names the rendered
/// config in `status.configuration.name`, read from `machine-configs/<name>.yaml`; the CAs come
/// from `controller-config/machine-config-controller.yaml`. Files are re-read when their size,
/// mtime or inode changes (one `stat` each per request), so edits and atomic replacements are
/// served at once.
///
/// No boot image skew enforcement: the bootstrap server serves the control plane being
/// installed, from the installer's own (current) boot images, before any MachineConfiguration
/// exists.
#[derive(Debug)]
pub struct BootstrapSource {
    layout: Arc<Layout>,
    cache: Arc<BodyCache>,
    loaded: Mutex<HashMap<String, Arc<Loaded>>>,
    /// Serializes reloads so a burst of requests after a change reads the files once.
    reload: tokio::sync::Mutex<()>,
}

/// The files a bootstrap server reads.
#[derive(Debug)]
struct Layout {
    dir: PathBuf,
    kubeconfig: PathBuf,
    /// `(registry host, file relative to dir)` from `--bootstrap-certs host=file`.
    certs: Vec<(String, PathBuf)>,
}

#[derive(Debug)]
struct Loaded {
    stamps: Vec<(PathBuf, Stamp)>,
    snapshot: Arc<Snapshot>,
}

impl BootstrapSource {
    /// Checks that the kubeconfig exists (as upstream does at start) and that every
    /// `--bootstrap-certs` value is `host=file`. Bodies are kept in `cache`.
    pub fn new(dir: PathBuf, kubeconfig: PathBuf, certs: &[String], cache: Arc<BodyCache>) -> anyhow::Result<Self> {
        std::fs::metadata(&kubeconfig)
            .with_context(|| format!("kubeconfig not found at location: {}", kubeconfig.display()))?;
        let certs = certs
            .iter()
            .map(|c| match c.split_once('=') {
                Some((host, file)) if !host.is_empty() && !file.is_empty() && !file.contains('=') => {
                    Ok((host.to_string(), PathBuf::from(file)))
                }
                _ => anyhow::bail!("could not use cert, missing key or value {c}"),
            })
            .collect::<anyhow::Result<_>>()?;
        Ok(BootstrapSource {
            layout: Arc::new(Layout { dir, kubeconfig, certs }),
            cache,
            loaded: Mutex::default(),
            reload: tokio::sync::Mutex::new(()),
        })
    }

    /// The cached snapshot if none of its files changed.
    fn current(&self, pool: &str) -> Option<Arc<Snapshot>> {
        let loaded = self.loaded.lock().expect("not poisoned").get(pool).cloned()?;
        let fresh = loaded.stamps.iter().all(|(path, s)| Stamp::of(path).ok().as_ref() == Some(s));
        fresh.then(|| Arc::clone(&loaded.snapshot))
    }
}

impl Layout {
    fn pool_path(&self, pool: &str) -> PathBuf {
        self.dir.join("machine-pools").join(format!("{pool}.yaml"))
    }

    fn load(&self, pool: &str, cache: Arc<BodyCache>) -> Result<Loaded, SourceError> {
        let mut stamps = Vec::new();
        let pool_path = self.pool_path(pool);
        let mcp: PoolFile = read_yaml(&pool_path, &mut stamps)?
            .ok_or_else(|| SourceError::NotFound(format!("could not find file: {}", pool_path.display())))?;
        if !BOOTSTRAP_POOLS.contains(&pool) {
            return Err(SourceError::Refused(format!("refusing to serve bootstrap configuration to pool {pool:?}")));
        }
        let config_name = mcp.status.configuration.name;
        let mc_path = self.dir.join("machine-configs").join(format!("{config_name}.yaml"));
        let machine_config: MachineConfig = read_yaml(&mc_path, &mut stamps)?
            .ok_or_else(|| SourceError::NotFound(format!("could not find file: {}", mc_path.display())))?;
        let cc_path = self.dir.join("controller-config").join("machine-config-controller.yaml");
        let cc: ControllerConfig = read_yaml(&cc_path, &mut stamps)?
            .ok_or_else(|| anyhow::anyhow!("could not find controller config on initial bootstrap"))?;
        let kubeconfig = read(&self.kubeconfig, &mut stamps)?;
        let extra_files = self
            .certs
            .iter()
            .map(|(host, file)| {
                let data = read(&self.dir.join(file), &mut stamps).context("could not read cert file")?;
                Ok((format!("/etc/docker/certs.d/{host}/ca.crt"), data))
            })
            .collect::<anyhow::Result<_>>()?;
        let bytes = |b: Option<k8s_openapi::ByteString>| b.map(|b| b.0).unwrap_or_default();
        let inputs = Inputs {
            machine_config,
            config_name,
            kubeconfig,
            kubelet_ca: bytes(cc.spec.kube_api_server_serving_ca_data),
            cloud_provider_ca: bytes(cc.spec.cloud_provider_ca_data),
            extra_files,
            desired_image: String::new(),
            encapsulate_requested_version: false,
        };
        Ok(Loaded { stamps, snapshot: Arc::new(Snapshot::new(inputs, cache)) })
    }
}

impl ConfigSource for BootstrapSource {
    async fn lookup(&self, pool: &str) -> Result<Arc<Snapshot>, SourceError> {
        if let Some(snapshot) = self.current(pool) {
            return Ok(snapshot);
        }
        let _reloading = self.reload.lock().await;
        if let Some(snapshot) = self.current(pool) {
            return Ok(snapshot);
        }
        // Parsing a large config takes a while: keep it off the threads that serve requests.
        let (layout, name, cache) = (Arc::clone(&self.layout), pool.to_string(), Arc::clone(&self.cache));
        let loaded = tokio::task::spawn_blocking(move || layout.load(&name, cache))
            .await
            .unwrap_or_else(|e| Err(SourceError::Failed(anyhow::anyhow!("loading pool {pool} panicked: {e}"))));
        let mut cache = self.loaded.lock().expect("not poisoned");
        match loaded {
            Ok(loaded) => {
                let snapshot = Arc::clone(&loaded.snapshot);
                cache.insert(pool.to_string(), Arc::new(loaded));
                Ok(snapshot)
            }
            Err(e) => {
                cache.remove(pool);
                Err(e)
            }
        }
    }

    fn has_pool(&self, pool: &str) -> bool {
        self.layout.pool_path(pool).is_file()
    }
}

/// The part of a pool file the bootstrap server reads; like upstream's Go decoding, anything
/// else may be missing.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(default)]
struct PoolFile {
    status: PoolFileStatus,
}

#[derive(Debug, Default, serde::Deserialize)]
#[serde(default)]
struct PoolFileStatus {
    configuration: PoolFileConfiguration,
}

#[derive(Debug, Default, serde::Deserialize)]
#[serde(default)]
struct PoolFileConfiguration {
    name: String,
}

/// Reads a file, recording its stamp (taken first, so a change during the read is seen next time).
fn read(path: &Path, stamps: &mut Vec<(PathBuf, Stamp)>) -> anyhow::Result<Vec<u8>> {
    read_optional(path, stamps)?.ok_or_else(|| anyhow::anyhow!("{}: file not found", path.display()))
}

fn read_optional(path: &Path, stamps: &mut Vec<(PathBuf, Stamp)>) -> anyhow::Result<Option<Vec<u8>>> {
    let s = match Stamp::of(path) {
        Ok(s) => s,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(anyhow::Error::new(e).context(format!("could not read file {}", path.display()))),
    };
    let data = std::fs::read(path).with_context(|| format!("could not read file {}", path.display()))?;
    stamps.push((path.to_path_buf(), s));
    Ok(Some(data))
}

fn read_yaml<T: serde::de::DeserializeOwned>(
    path: &Path,
    stamps: &mut Vec<(PathBuf, Stamp)>,
) -> Result<Option<T>, SourceError> {
    let Some(data) = read_optional(path, stamps)? else { return Ok(None) };
    let text = std::str::from_utf8(&data).with_context(|| format!("could not unmarshal file {}", path.display()))?;
    let value = mco_goser::yaml_object(text).with_context(|| format!("could not unmarshal file {}", path.display()))?;
    Ok(Some(value))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pool(spec: Option<&str>, status: Option<&str>, updated: i32) -> MachineConfigPool {
        serde_json::from_value(json!({
            "apiVersion": "machineconfiguration.openshift.io/v1",
            "kind": "MachineConfigPool",
            "metadata": {"name": "worker"},
            "spec": {"configuration": spec.map(|n| json!({"name": n}))},
            "status": {"configuration": status.map(|n| json!({"name": n})), "updatedMachineCount": updated}
        }))
        .unwrap()
    }

    #[test]
    fn bootstrap_flags_are_checked_at_start() {
        let dir = tempfile::tempdir().unwrap();
        let kubeconfig = dir.path().join("kubeconfig");
        let err = BootstrapSource::new(dir.path().into(), kubeconfig.clone(), &[], Arc::default()).unwrap_err();
        assert!(format!("{err:#}").starts_with("kubeconfig not found at location: "), "{err:#}");
        std::fs::write(&kubeconfig, "").unwrap();
        for bad in ["registry", "=ca.crt", "registry=", "a=b=c"] {
            let err = BootstrapSource::new(dir.path().into(), kubeconfig.clone(), &[bad.to_string()], Arc::default())
                .unwrap_err();
            assert_eq!(err.to_string(), format!("could not use cert, missing key or value {bad}"));
        }
        assert!(
            BootstrapSource::new(dir.path().into(), kubeconfig, &["r:5000=certs/ca.crt".to_string()], Arc::default())
                .is_ok()
        );
    }

    #[test]
    fn bootstrap_files_are_read_as_kubectl_reads_them() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("mc.yaml");
        let mc = "---\napiVersion: machineconfiguration.openshift.io/v1\nkind: MachineConfig\nmetadata:\n  name: m\n\
                  spec:\n  config:\n    ignition: {version: 3.2.0}\n    storage:\n      files:\n\
                  \x20     - {path: /etc/motd, mode: 0644}\n";
        std::fs::write(&path, mc).unwrap();
        let mut stamps = Vec::new();
        let read: MachineConfig = read_yaml(&path, &mut stamps).unwrap().unwrap();
        // YAML 1.1, as upstream's sigs.k8s.io/yaml: 0644 is octal.
        assert_eq!(read.spec.config.as_ref().unwrap()["storage"]["files"][0]["mode"], json!(420));
        std::fs::write(&path, format!("{mc}---\n{mc}")).unwrap();
        let err = read_yaml::<MachineConfig>(&path, &mut stamps).unwrap_err();
        assert!(format!("{err:#}").contains("expected one object, found 2 documents"), "{err:#}");
    }

    #[test]
    fn cluster_serves_the_target_only_after_one_machine_updated() {
        for (spec, status, updated, want) in [
            (Some("rendered-new"), Some("rendered-old"), 0, Some("rendered-old")),
            (Some("rendered-new"), Some("rendered-old"), 1, Some("rendered-new")),
            (Some("rendered-new"), Some("rendered-old"), 5, Some("rendered-new")),
            (Some("rendered-new"), None, 0, None),
            (None, Some("rendered-old"), 1, None),
            (Some(""), Some("rendered-old"), 1, None),
        ] {
            assert_eq!(cluster_config_name(&pool(spec, status, updated)), want, "{spec:?} {status:?} {updated}");
        }
    }
}
