//! The machine-config controller (`mco controller`): the render controller ([`render`]), the
//! node controller ([`node`]: rollouts and pool status), the drain controller ([`drain`]), the
//! build controller ([`build`]: on-cluster OS image builds) and
//! the kubelet config and container runtime config controllers ([`kubeletconfig`]), the image
//! configuration controller ([`registries`]: mirrors and registry policies), the
//! OSImageStream controller ([`osimagestream`]) and the PinnedImageSet controller
//! ([`pinnedimageset`]: which sets a pool's nodes pin), run by
//! whichever instance holds the leader Lease ([`leader`]).
//!
//! Decisions are pure functions ([`render::plan`], [`conditions`], [`leader::step`], and the
//! `mco-rollout` crate for nodes and drains) with table tests; the IO shells around them are thin
//! and tested against a real API server (`tests/`, through `mco-testenv`).

pub mod build;
pub mod conditions;
pub mod drain;
mod generated;
pub mod health;
pub mod kubeletconfig;
pub mod leader;
pub mod networkpolicy;
pub mod node;
pub mod osimagestream;
pub mod pinnedimageset;
pub mod reconciler;
pub mod registries;
pub mod render;

use std::path::PathBuf;

use anyhow::Context as _;
use fn_error_context::context;
use futures::{Stream, StreamExt as _};
use k8s_openapi::api::core::v1::ObjectReference;
use kube::Client;
use kube::api::PatchParams;
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::runtime::watcher;
use mco_render::ControllerVersion;

pub use mco_machine_os_build::BuildPod;

/// Upstream's name, used as field manager and event reporter.
pub(crate) const CONTROLLER_NAME: &str = "machine-config-controller";

/// A request to the API server that failed.
#[derive(Debug, thiserror::Error)]
pub enum KubeError {
    #[error("{action}: {source}")]
    Request {
        action: String,
        #[source]
        source: kube::Error,
    },
    #[error("{what}: still conflicting after {tries} tries")]
    Conflicts { what: String, tries: usize },
}

impl reconciler::ReconcileError for KubeError {
    fn metric_label(&self) -> &'static str {
        match self {
            KubeError::Request { .. } => "kube",
            KubeError::Conflicts { .. } => "conflicts",
        }
    }
}

pub(crate) fn kube_error(action: impl Into<String>) -> impl FnOnce(kube::Error) -> KubeError {
    let action = action.into();
    move |source| KubeError::Request { action, source }
}

pub(crate) fn patch_params() -> PatchParams {
    PatchParams { field_manager: Some(CONTROLLER_NAME.to_string()), ..Default::default() }
}

/// A watch stream for a kube [`Controller`](kube::runtime::Controller)'s triggers, with its errors
/// logged here and dropped. The watch retries by itself (give it `default_backoff`); an error that
/// reaches the Controller instead pauses *every* trigger stream, one backoff over all of them
/// growing to 30 s, so that a watch of a kind the cluster lacks (the Scheduler) or one watch
/// restarting held back node events that long.
pub(crate) fn logging_errors<T>(
    what: &'static str,
    events: impl Stream<Item = Result<T, watcher::Error>>,
) -> impl Stream<Item = Result<T, watcher::Error>> {
    events.filter_map(move |event| {
        if let Err(e) = &event {
            match e {
                // An optional kind this cluster does not serve: nothing to watch, nothing wrong.
                // (A missing API group answers a bare 404 that `is_not_found` does not recognise.)
                watcher::Error::InitialListFailed(kube::Error::Api(status)) if status.code == 404 => {
                    tracing::debug!("watching {what}: {e}")
                }
                // Expired resourceVersion: the watch lists afresh, as it should.
                watcher::Error::WatchError(status) if status.code == 410 => tracing::debug!("watching {what}: {e}"),
                _ => tracing::warn!("watching {what} (retrying): {e}"),
            }
        }
        std::future::ready(event.ok().map(Ok))
    })
}

/// Every change of `K`, for a Controller's triggers (see [`logging_errors`]).
pub(crate) fn events<K>(what: &'static str, api: kube::Api<K>) -> impl Stream<Item = Result<K, watcher::Error>> + Send
where
    K: kube::Resource + Clone + k8s_openapi::serde::de::DeserializeOwned + std::fmt::Debug + Send + 'static,
{
    use kube::runtime::WatchStreamExt as _;
    logging_errors(what, watcher(api, watcher::Config::default()).default_backoff().touched_objects())
}

/// A predicate's answer for `inputs`: what of an object a Controller reacts to, as one hash.
pub(crate) fn fingerprint(inputs: &impl std::hash::Hash) -> Option<u64> {
    use std::hash::Hasher as _;
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    inputs.hash(&mut hasher);
    Some(hasher.finish())
}

/// A Controller over the pools, triggered only when `inputs` of a pool change. Its users debounce,
/// and a debounce postpones an object's reconcile while triggers keep coming: the node controller
/// writes a rolling pool's status on every node's step, so status-only changes must not trigger,
/// or a new MachineConfig would wait for the rollout to end (upstream's queue renders 5 s after
/// the first change).
pub(crate) fn pool_controller(
    client: &Client,
    inputs: fn(&mco_api::MachineConfigPool) -> Option<u64>,
) -> kube::runtime::Controller<mco_api::MachineConfigPool> {
    use kube::runtime::{WatchStreamExt as _, reflector};
    let (reader, writer) = reflector::store();
    let changes = watcher(kube::Api::all(client.clone()), watcher::Config::default())
        .default_backoff()
        .reflect(writer)
        .touched_objects()
        .predicate_filter(inputs, Default::default());
    kube::runtime::Controller::for_stream(logging_errors("MachineConfigPools", changes), reader)
}

/// Every object of a cluster-scoped (or every namespace's) kind.
pub(crate) async fn list_all<K>(client: &Client, what: &str) -> Result<Vec<K>, KubeError>
where
    K: kube::Resource<DynamicType = ()> + Clone + k8s_openapi::serde::de::DeserializeOwned + std::fmt::Debug,
{
    let listed = kube::Api::<K>::all(client.clone()).list(&Default::default()).await;
    Ok(listed.map_err(kube_error(format!("listing {what}")))?.items)
}

/// Records an event. A new [`Recorder`] each time: a recorder folds every later event with the
/// same reason into a series of the first one, keeping the first note ("Targeted node A" would
/// be counted again for node B). Events are for people; failing to record one must not fail
/// the sync.
pub(crate) async fn publish(
    client: &Client,
    regarding: &ObjectReference,
    type_: EventType,
    reason: &str,
    note: &str,
    action: &str,
) {
    let event = Event {
        type_,
        reason: reason.to_string(),
        note: Some(note.to_string()),
        action: action.to_string(),
        secondary: None,
    };
    let reporter = Reporter { controller: CONTROLLER_NAME.to_string(), instance: None };
    if let Err(e) = Recorder::new(client.clone(), reporter).publish(&event, regarding).await {
        tracing::warn!(object = ?regarding.name, "recording event {reason}: {e}");
    }
}

/// Everything `mco controller` is configured with.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Without one: the in-cluster service account, or `$KUBECONFIG`/`~/.kube/config`.
    pub kubeconfig: Option<PathBuf>,
    pub version: ControllerVersion,
    pub render: render::controller::Options,
    pub node: node::controller::Options,
    pub drain: drain::controller::Options,
    pub kubelet_configs: kubeletconfig::Options,
    /// Where and with what image on-cluster builds run.
    pub builds: BuildSettings,
    /// The boot image controller's options; `None` leaves MachineSets alone.
    pub boot_images: Option<mco_bootimage_controller::Options>,
    pub lease: LeaseSettings,
    /// Where `/healthz` is answered for the pod's probes, if anywhere.
    pub health: Option<std::net::SocketAddr>,
    /// Where `/metrics` is answered for Prometheus, if anywhere.
    pub metrics: Option<std::net::SocketAddr>,
    /// Where `/metrics` is answered over HTTPS to authorized tokens, if anywhere.
    pub secure_metrics: Option<mco_metrics_auth::SecureListen>,
}

/// The build controller's settings, before its image is known.
#[derive(Debug, Clone)]
pub struct BuildSettings {
    /// Namespace of the build Jobs, their ConfigMaps and the MachineOSConfigs' Secrets.
    pub namespace: String,
    /// Image of the build pods; `None`: this controller's own, read from its pod (`own_pod`).
    pub image: Option<String>,
    /// This controller's pod (`namespace`, `name`), when it runs in one.
    pub own_pod: Option<(String, String)>,
    pub pod: BuildPod,
    pub retry_delay: std::time::Duration,
}

impl BuildSettings {
    /// The build controller's options, or `None` (and why) when no image can be found for builds.
    async fn options(
        &self,
        client: &Client,
        metrics: mco_metrics::controller::ControllerMetrics,
    ) -> anyhow::Result<build::Options> {
        let image = match (&self.image, &self.own_pod) {
            (Some(image), _) => image.clone(),
            (None, Some((namespace, pod))) => build::own_image(client, namespace, pod).await?,
            (None, None) => anyhow::bail!("no --build-image given and not running in a pod"),
        };
        Ok(build::Options {
            namespace: self.namespace.clone(),
            image,
            pod: self.pod,
            retry_delay: self.retry_delay,
            metrics,
        })
    }
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
pub async fn client(kubeconfig: Option<&std::path::Path>) -> anyhow::Result<Client> {
    Ok(Client::try_from(config(kubeconfig).await?)?)
}

/// The connection settings from `kubeconfig`, or the environment's default configuration.
#[context("Connecting to the API server")]
pub async fn config(kubeconfig: Option<&std::path::Path>) -> anyhow::Result<kube::Config> {
    Ok(match kubeconfig {
        Some(path) => {
            let kubeconfig = Kubeconfig::read_from(path).with_context(|| format!("reading {}", path.display()))?;
            kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default()).await?
        }
        None => kube::Config::infer().await?,
    })
}

/// Waits for the leader Lease, then runs the controllers until leadership is lost (an error:
/// the process must exit so that it cannot act on stale state) or SIGINT/SIGTERM arrives (the
/// Lease is then released so that another instance takes over at once).
pub async fn run(mut settings: Settings) -> anyhow::Result<()> {
    if let Some(addr) = settings.health {
        tokio::spawn(health::listen(addr, None).await?);
    }
    let mut registry = mco_metrics::Registry::default();
    let metrics = mco_metrics::controller::ControllerMetrics::register(&mut registry);
    settings.render.metrics = metrics.clone();
    settings.node.metrics = metrics.clone();
    settings.kubelet_configs.metrics = metrics.clone();
    settings.drain.metrics = metrics.clone();
    let config = config(settings.kubeconfig.as_deref()).await?;
    let client = Client::try_from(config.clone())?;
    let registry = std::sync::Arc::new(registry);
    if let Some(addr) = settings.metrics {
        tokio::spawn(health::listen(addr, Some(registry.clone())).await?);
    }
    if let Some(secure) = &settings.secure_metrics {
        tokio::spawn(mco_metrics_auth::start(secure, client.clone(), registry).await?);
    }
    let lease = &settings.lease;
    let elector =
        leader::LeaderElector::new(client.clone(), &lease.namespace, &lease.name, &lease.identity, lease.timing);
    tracing::info!(lease = %format!("{}/{}", lease.namespace, lease.name), identity = %lease.identity, "waiting to become the leader");
    tokio::select! {
        () = elector.acquire() => {}
        signal = shutdown_signal() => return signal,
    }
    tracing::info!(
        "became the leader; starting the render, node, drain, build, kubelet config, container runtime config, \
         image configuration, OSImageStream, PinnedImageSet, NetworkPolicy and boot image controllers"
    );
    let builds = async {
        match settings.builds.options(&client, metrics.clone()).await {
            Ok(options) => {
                tracing::info!(image = %options.image, namespace = %options.namespace, "on-cluster builds run with mco's image");
                build::run(client.clone(), options).await
            }
            Err(e) => {
                tracing::warn!("the build controller is off (MachineOSConfigs are not built): {e:#}");
                std::future::pending().await
            }
        }
    };
    let boot_images = async {
        match settings.boot_images {
            Some(options) => mco_bootimage_controller::run(client.clone(), options).await,
            None => std::future::pending().await,
        }
    };
    tokio::select! {
        lost = elector.hold() => Err(lost.into()),
        () = render::controller::run(client.clone(), settings.version.clone(), settings.render) => {
            anyhow::bail!("the render controller stopped")
        }
        () = osimagestream::run(
            client.clone(),
            settings.version.clone(),
            osimagestream::Options { metrics: metrics.clone(), ..Default::default() },
        ) => {
            anyhow::bail!("the OSImageStream controller stopped")
        }
        // Upstream's container runtime config controller syncs the image configuration too.
        () = registries::run(
            client.clone(),
            settings.version.clone(),
            settings.kubelet_configs.retry_delay,
            metrics.clone(),
        ) => {
            anyhow::bail!("the image configuration controller stopped")
        }
        () = kubeletconfig::run(client.clone(), settings.version, settings.kubelet_configs) => {
            anyhow::bail!("the kubelet config controllers stopped")
        }
        () = pinnedimageset::run(client.clone(), metrics.clone()) => {
            anyhow::bail!("the PinnedImageSet controller stopped")
        }
        () = networkpolicy::run(client.clone()) => anyhow::bail!("the NetworkPolicy controller stopped"),
        () = node::controller::run(client.clone(), settings.node) => anyhow::bail!("the node controller stopped"),
        () = builds => anyhow::bail!("the build controller stopped"),
        drained = drain::controller::run(config, settings.drain) => {
            drained?;
            anyhow::bail!("the drain controller stopped")
        }
        booted = boot_images => {
            booted?;
            anyhow::bail!("the boot image controller stopped")
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

#[cfg(test)]
mod tests {
    use kube::core::Status;

    use super::*;

    #[tokio::test]
    async fn watch_errors_never_reach_the_controller() {
        let missing_kind = Status { code: 404, message: "404 page not found".into(), ..Status::default() };
        let expired = Status { code: 410, reason: "Expired".into(), ..Status::default() };
        let events = futures::stream::iter([
            Ok(1),
            Err(watcher::Error::InitialListFailed(kube::Error::Api(Box::new(missing_kind)))),
            Ok(2),
            Err(watcher::Error::WatchError(Box::new(expired))),
            Err(watcher::Error::NoResourceVersion),
            Ok(3),
        ]);
        let passed: Vec<u32> = logging_errors("test objects", events).map(Result::unwrap).collect().await;
        assert_eq!(passed, [1, 2, 3]);
    }
}
