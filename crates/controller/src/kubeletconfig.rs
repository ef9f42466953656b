//! The kubelet config and container runtime config controllers (upstream
//! `pkg/controller/kubelet-config` and `pkg/controller/container-runtime-config`): each
//! KubeletConfig and ContainerRuntimeConfig is synced by `mco-kubeletconfig`'s pure sync over the
//! cluster's pools, ControllerConfig and MachineConfigs (and, for both, the FeatureGate, APIServer
//! and Node `cluster` objects), and what the sync decided is written: the generated
//! MachineConfigs created or replaced, the stale ones deleted, the object's name suffix annotation
//! and finalizers, then its status. A deleted object takes its generated MachineConfigs with it,
//! one per sync, as upstream pops its finalizers. Like upstream, neither watches MachineConfigs.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt as _;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use k8s_openapi::serde::Serialize;
use k8s_openapi::serde::de::DeserializeOwned;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, Patch};
use kube::runtime::controller::Action;
use kube::runtime::{Controller, watcher};
use kube::{Api, Client, Resource, ResourceExt};
use mco_api::constants::{CONTROLLER_CONFIG_NAME, MACHINE_CONFIG_ROLE_LABEL, MC_NAME_SUFFIX_ANNOTATION};
use mco_api::{ContainerRuntimeConfig, ControllerConfig, KubeletConfig, MachineConfig, MachineConfigPool};
use mco_kubeletconfig::{Cluster, ClusterSettings};
use mco_metrics::controller::{ControllerMetrics, SubControllerSync};
use mco_render::ControllerVersion;
use serde_json::{Value, json};

use crate::generated::{delete_machine_config, write_machine_config};
use crate::reconciler::{self, ReconcileError, Reconciler, Retries};
use crate::{KubeError, events, kube_error, list_all, patch_params};

/// The config.openshift.io kinds whose `cluster` object the syncs read.
const CLUSTER_SETTINGS: [&str; 3] = ["FeatureGate", "APIServer", "Node"];

/// Timing and metrics of both controllers.
#[derive(Debug, Clone)]
pub struct Options {
    /// Delay before a failed sync is tried again.
    pub retry_delay: Duration,
    /// Where each pool's sync is recorded (`mcc_sub_controller_state`, as upstream's).
    pub metrics: ControllerMetrics,
}

impl Default for Options {
    fn default() -> Self {
        Options { retry_delay: Duration::from_secs(5), metrics: ControllerMetrics::default() }
    }
}

/// Why a sync failed; the object is synced again after [`Options::retry_delay`].
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Kube(#[from] KubeError),
    #[error("ControllerConfig {CONTROLLER_CONFIG_NAME} does not exist yet")]
    NoControllerConfig,
    #[error("{0}")]
    Settings(String),
    /// What upstream's sync returns (and retries).
    #[error("{kind} {name}: {error}")]
    Sync { kind: &'static str, name: String, error: String },
}

impl ReconcileError for Error {
    fn metric_label(&self) -> &'static str {
        match self {
            Error::Kube(_) => "kube",
            Error::NoControllerConfig => "no_controller_config",
            Error::Settings(_) => "settings",
            Error::Sync { .. } => "sync",
        }
    }
}

/// What differs between the two kinds.
trait ConfigKind:
    Resource<DynamicType = ()> + Clone + DeserializeOwned + Serialize + std::fmt::Debug + Send + std::marker::Sync + 'static
{
    const KIND: &'static str;
    /// What writing its MachineConfig for a pool records.
    const SYNCED: SubControllerSync;
    fn sync(cluster: &Cluster<Self>, settings: &ClusterSettings, config: &Self) -> mco_kubeletconfig::Sync;
    /// The status after a sync that ended with `outcome`.
    fn status(&self, outcome: Result<(), &str>, now: &Time) -> Value;
}

impl ConfigKind for KubeletConfig {
    const KIND: &'static str = "KubeletConfig";
    const SYNCED: SubControllerSync = SubControllerSync::KubeletConfigSynced;
    fn sync(cluster: &Cluster<Self>, settings: &ClusterSettings, config: &Self) -> mco_kubeletconfig::Sync {
        mco_kubeletconfig::sync(cluster, &settings.kubelet_inputs(), config)
    }
    fn status(&self, outcome: Result<(), &str>, now: &Time) -> Value {
        let status = mco_kubeletconfig::updated_status(self.status.as_ref(), self.metadata.generation, outcome, now);
        serde_json::to_value(status).unwrap_or_default()
    }
}

impl ConfigKind for ContainerRuntimeConfig {
    const KIND: &'static str = "ContainerRuntimeConfig";
    const SYNCED: SubControllerSync = SubControllerSync::ContainerRuntimeConfigSynced;
    fn sync(cluster: &Cluster<Self>, settings: &ClusterSettings, config: &Self) -> mco_kubeletconfig::Sync {
        mco_kubeletconfig::sync_container_runtime(cluster, settings.additional_storage(), config)
    }
    fn status(&self, outcome: Result<(), &str>, now: &Time) -> Value {
        let previous = self.status.as_ref();
        let status = mco_kubeletconfig::updated_runtime_status(previous, self.metadata.generation, outcome, now);
        serde_json::to_value(status).unwrap_or_default()
    }
}

struct Context {
    client: Client,
    version: ControllerVersion,
    options: Options,
    retries: Retries,
}

impl Reconciler<Error> for Context {
    fn retries(&self) -> &Retries {
        &self.retries
    }
}

/// Runs both controllers until their watches end (they retry errors, so: forever).
pub async fn run(client: Client, version: ControllerVersion, options: Options) {
    let context = |controller| {
        let retries = Retries::new(controller, options.retry_delay, options.metrics.clone());
        Arc::new(Context { client: client.clone(), version: version.clone(), options: options.clone(), retries })
    };
    tokio::join!(
        run_kind::<KubeletConfig>(context("kubeletconfig")),
        run_kind::<ContainerRuntimeConfig>(context("containerruntimeconfig"))
    );
}

async fn run_kind<K: ConfigKind>(context: Arc<Context>) {
    let client = context.client.clone();
    // Every config object syncs again on any change of what all of them read.
    let mut triggers = vec![
        events("MachineConfigPools", Api::<MachineConfigPool>::all(client.clone())).map(|_| ()).boxed(),
        events("ControllerConfigs", Api::<ControllerConfig>::all(client.clone())).map(|_| ()).boxed(),
    ];
    for kind in CLUSTER_SETTINGS {
        let api = Api::<DynamicObject>::all_with(client.clone(), &cluster_setting(kind));
        triggers.push(events(kind, api).map(|_| ()).boxed());
    }
    let controller = Controller::new(Api::<K>::all(client.clone()), watcher::Config::default())
        .reconcile_all_on(futures::stream::select_all(triggers));
    reconciler::run(controller, reconcile::<K>, context).await;
}

fn cluster_setting(kind: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("config.openshift.io", "v1", kind),
        &format!("{}s", kind.to_lowercase()),
    )
}

async fn reconcile<K: ConfigKind>(config: Arc<K>, context: Arc<Context>) -> Result<Action, Error> {
    let client = &context.client;
    let name = config.name_any();
    if config.meta().deletion_timestamp.is_some() {
        cascade_delete(client, &*config).await?;
        return Ok(Action::await_change());
    }
    let machine_configs = list_all::<MachineConfig>(client, "MachineConfigs").await?;
    let pools = list_all::<MachineConfigPool>(client, "MachineConfigPools").await?;
    let configs = list_all::<K>(client, K::KIND).await?;
    let controller_config = Api::<ControllerConfig>::all(client.clone())
        .get_opt(CONTROLLER_CONFIG_NAME)
        .await
        .map_err(kube_error(format!("reading ControllerConfig {CONTROLLER_CONFIG_NAME}")))?
        .ok_or(Error::NoControllerConfig)?;
    let settings = cluster_settings(client).await?;
    let cluster = Cluster {
        controller_config: &controller_config,
        pools: &pools,
        configs: &configs,
        machine_configs: &machine_configs,
        controller_version: &context.version.hash,
    };
    let synced = K::sync(&cluster, &settings, &config);

    let machine_configs_api = Api::<MachineConfig>::all(client.clone());
    for generated in &synced.machine_configs {
        write_machine_config(&machine_configs_api, generated).await?;
        if let Some(pool) = generated.labels().get(MACHINE_CONFIG_ROLE_LABEL) {
            let now = mco_metrics::unix_seconds(std::time::SystemTime::now());
            context.options.metrics.set_sub_controller_state(K::SYNCED, pool, now);
        }
    }
    for stale in &synced.deletions {
        delete_machine_config(&machine_configs_api, stale).await?;
    }
    let api = Api::<K>::all(client.clone());
    let mut metadata = serde_json::Map::new();
    if let Some(suffix) = &synced.name_suffix {
        metadata.insert("annotations".into(), json!({ MC_NAME_SUFFIX_ANNOTATION: suffix }));
    }
    if let Some(finalizers) = &synced.finalizers {
        metadata.insert("finalizers".into(), json!(finalizers));
    }
    if !metadata.is_empty() {
        api.patch(&name, &patch_params(), &Patch::Merge(json!({ "metadata": metadata })))
            .await
            .map_err(kube_error(format!("updating {} {name}", K::KIND)))?;
    }
    if synced.up_to_date {
        return Ok(Action::await_change());
    }
    let now = Time(Timestamp::now());
    let outcome = synced.outcome.as_ref().map(|_| ()).map_err(|failure| failure.message.as_str());
    let status = config.status(outcome, &now);
    api.patch_status(&name, &patch_params(), &Patch::Merge(json!({ "status": status })))
        .await
        .map_err(kube_error(format!("updating the status of {} {name}", K::KIND)))?;
    match synced.outcome {
        Ok(()) => {
            tracing::info!(
                kind = K::KIND,
                name,
                "synced: {:?}",
                synced.machine_configs.iter().map(ResourceExt::name_any).collect::<Vec<_>>()
            );
            Ok(Action::await_change())
        }
        Err(failure) if failure.retry => Err(Error::Sync { kind: K::KIND, name, error: failure.error }),
        // Invalid as it is: waits for a change (the status says why).
        Err(failure) => {
            tracing::warn!(kind = K::KIND, name, "{}", failure.error);
            Ok(Action::await_change())
        }
    }
}

/// A deleted config object: the generated MachineConfig its first finalizer names goes, then the
/// finalizer (the update brings the next sync, for the next one).
async fn cascade_delete<K: ConfigKind>(client: &Client, config: &K) -> Result<(), Error> {
    let Some((first, rest)) = config.finalizers().split_first() else { return Ok(()) };
    delete_machine_config(&Api::all(client.clone()), first).await?;
    let name = config.name_any();
    Api::<K>::all(client.clone())
        .patch(&name, &patch_params(), &Patch::Merge(json!({ "metadata": { "finalizers": rest } })))
        .await
        .map_err(kube_error(format!("removing finalizer {first} of {} {name}", K::KIND)))?;
    Ok(())
}

/// The FeatureGate, APIServer and Node `cluster` objects, each absent when the cluster does not
/// serve its kind or has none.
async fn cluster_settings(client: &Client) -> Result<ClusterSettings, Error> {
    let mut objects = Vec::new();
    for kind in CLUSTER_SETTINGS {
        let api = Api::<DynamicObject>::all_with(client.clone(), &cluster_setting(kind));
        let object = match api.get_opt("cluster").await {
            Ok(object) => object,
            Err(kube::Error::Api(status)) if status.code == 404 => None,
            Err(e) => return Err(kube_error(format!("reading {kind} cluster"))(e).into()),
        };
        objects.push(object.map(|o| serde_json::to_value(o).unwrap_or_default()));
    }
    let [feature_gate, api_server, node] = [&objects[0], &objects[1], &objects[2]];
    ClusterSettings::read(feature_gate.as_ref(), api_server.as_ref(), node.as_ref()).map_err(Error::Settings)
}
