//! The IO half of the node controller: watches pools, nodes and the ControllerConfig into
//! caches, plans each pool with [`mco_rollout::plan`], writes the nodes it chose and the pool's
//! status.
//!
//! Plans are made from the caches, which lag behind our own writes by a watch round trip. A pool
//! synced again before its cache shows the nodes it just targeted would count them as available
//! and target more than `maxUnavailable`. So a sync ends only once the node cache holds every
//! node it targeted at (at least) the resourceVersion our write returned; syncs of one pool never
//! overlap. Writes that do not change any node's availability (taints, the topology annotation)
//! go to the [`super::background`] writer and are not waited for.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::{StreamExt as _, TryStreamExt as _};
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, ListParams, Patch};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::events::EventType;
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt as _, watcher};
use kube::{Api, Client, Resource as _, ResourceExt as _};
use mco_api::constants::{
    ARBITER_POOL, CONTROLLER_CONFIG_NAME, CURRENT_MACHINE_OS_BUILD_ANNOTATION, CUSTOM_POOL_LABELS_APPLIED_ANNOTATION,
    FIRST_PIVOT_CONFIG_ANNOTATION, MACHINE_CONFIGURATION_NAME, MASTER_POOL, MCO_NAMESPACE, OS_IMAGE_STREAM_NAME,
};
use mco_api::machineconfiguration::{MachineConfigPoolStatus, NameReference, is_by_digest, pool_condition};
use mco_api::{
    ControllerConfig, MachineConfig, MachineConfigNode, MachineConfigPool, MachineConfiguration, MachineOSBuild,
    MachineOSConfig, OSImageStream,
};
use mco_rollout::arbiter::{self, Coordination, HA_ARBITER_TOPOLOGY};
use mco_rollout::layering::{self, Layered};
use mco_rollout::node::annotation;
use mco_rollout::plan::{Update, pool_target};
use mco_rollout::policy::{self, CANARIES_DONE_ANNOTATION, HALTED_ON_ANNOTATION, Hold};
use mco_rollout::status::pool_synchronizers;
use mco_rollout::{Inputs, Plan, PlanError, calculate_status, nodes_for_pool, plan, pools_for_node};
use serde_json::json;

use mco_metrics::controller::{ControllerMetrics, SubControllerSync};

use super::background::BackgroundWrites;
use super::machineconfignodes::MachineConfigNodes;
use super::{node_patch, set_desired_event};
use crate::reconciler::{self, ReconcileError, Reconciler, Retries};
use crate::{KubeError, kube_error, logging_errors, patch_params, publish};

/// Label of the operator's pod: in the master pool its node updates last.
const OPERATOR_POD_SELECTOR: &str = "k8s-app=machine-config-operator";
/// Writes retried after a conflict before the sync fails (and is retried as a whole).
const CONFLICT_RETRIES: usize = 5;

/// Timing and parallelism of the node controller.
#[derive(Debug, Clone)]
pub struct Options {
    /// Delay before a pool whose sync failed is tried again.
    pub retry_delay: Duration,
    /// Writes to targeted nodes in flight at once.
    pub concurrent_writes: usize,
    /// Background writes (taints, topology) in flight at once. Few: a new rollout taints every
    /// waiting node, and a burst of thousands of node updates delays every watch, ours
    /// included, and so the next Done.
    pub background_writes: usize,
    /// How long a sync waits for the node cache to show its own writes.
    pub cache_timeout: Duration,
    /// The pools' machine counts are set here.
    pub metrics: ControllerMetrics,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            retry_delay: Duration::from_secs(5),
            concurrent_writes: 16,
            background_writes: 2,
            cache_timeout: Duration::from_secs(30),
            metrics: ControllerMetrics::default(),
        }
    }
}

/// Why one sync of a pool failed; the pool is retried after [`Options::retry_delay`], doubled
/// with each failure in a row.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Plan(#[from] PlanError),
    #[error(transparent)]
    Kube(#[from] KubeError),
    #[error("node {node}: the cache did not show our write (resourceVersion {version}) within {timeout:?}")]
    CacheLag { node: String, version: String, timeout: Duration },
    #[error("the control plane topology is {HA_ARBITER_TOPOLOGY} but there is no arbiter MachineConfigPool")]
    NoArbiterPool,
}

impl ReconcileError for Error {
    fn metric_label(&self) -> &'static str {
        match self {
            Error::Plan(_) => "plan",
            Error::Kube(_) => "kube",
            Error::CacheLag { .. } => "cache_lag",
            Error::NoArbiterPool => "no_arbiter_pool",
        }
    }
}

impl Reconciler<Error> for Context {
    fn retries(&self) -> &Retries {
        &self.retries
    }
}

struct Context {
    client: Client,
    nodes: Store<Node>,
    background: Arc<BackgroundWrites>,
    pools: Store<MachineConfigPool>,
    controller_configs: Store<ControllerConfig>,
    os_configs: Store<MachineOSConfig>,
    os_builds: Store<MachineOSBuild>,
    /// The Scheduler `cluster` (`config.openshift.io`), when the cluster has one.
    schedulers: Store<DynamicObject>,
    /// The nodes' progress on their PinnedImageSets, for the pools' synchronizer status.
    machine_config_node_store: Store<MachineConfigNode>,
    /// True once the node, ControllerConfig, MachineOSConfig, MachineOSBuild and MachineConfigNode caches hold their
    /// first full list. (One waiter per store, here, rather than one per sync: concurrent
    /// `Store::wait_until_ready` calls were seen to miss the wake-up.)
    caches_ready: tokio::sync::watch::Receiver<bool>,
    /// Wakes the MachineConfigNode sync after each pool sync.
    machine_config_nodes: Arc<tokio::sync::Notify>,
    options: Options,
    retries: Retries,
}

/// Runs the node controller until its watches end (they retry errors, so: forever).
pub async fn run(client: Client, options: Options) {
    let (nodes, node_writer) = reflector::store();
    let node_events = {
        let (metrics, nodes) = (options.metrics.clone(), nodes.clone());
        let forget_deleted = move || metrics.retain_nodes(|name| nodes.get(&ObjectRef::new(name)).is_some());
        let events = watcher(Api::<Node>::all(client.clone()), watcher::Config::default()).default_backoff();
        logging_errors("Nodes", after_removals(events.reflect(node_writer), forget_deleted).touched_objects())
    };
    let (controller_configs, controller_config_writer) = reflector::store();
    let controller_config_events = cache_events(
        "the ControllerConfig",
        Api::<ControllerConfig>::all(client.clone()),
        watcher::Config::default().fields(&format!("metadata.name={CONTROLLER_CONFIG_NAME}")),
        controller_config_writer,
    );
    // On-cluster layering: a pool moves once its MachineOSConfig shows a finished build.
    let (os_configs, os_config_writer) = reflector::store();
    let os_config_events = cache_events(
        "MachineOSConfigs",
        Api::<MachineOSConfig>::all(client.clone()),
        watcher::Config::default(),
        os_config_writer,
    );
    let (os_builds, os_build_writer) = reflector::store();
    let os_build_events = cache_events(
        "MachineOSBuilds",
        Api::<MachineOSBuild>::all(client.clone()),
        watcher::Config::default(),
        os_build_writer,
    );
    let (pools, pool_writer) = reflector::store();
    let pool_events = {
        let (metrics, pools) = (options.metrics.clone(), pools.clone());
        let forget_deleted = move || metrics.retain_pools(|name| pools.get(&ObjectRef::new(name)).is_some());
        let events =
            watcher(Api::<MachineConfigPool>::all(client.clone()), watcher::Config::default()).default_backoff();
        logging_errors(
            "MachineConfigPools",
            after_removals(events.reflect(pool_writer), forget_deleted).applied_objects(),
        )
    };
    let controller = Controller::for_stream(pool_events, pools.clone());
    let owners = PrimaryPools::default();
    let pools_for_nodes = pools.clone();
    let background = Arc::new(BackgroundWrites::new(
        Api::all(client.clone()),
        nodes.clone(),
        options.background_writes,
        options.retry_delay,
    ));
    // Master schedulability. Clusters without the Scheduler kind are fine: the watch keeps
    // failing quietly (`logging_errors`), the store stays empty and nothing waits for it.
    let scheduler_writer = reflector::store::Writer::new(scheduler_resource());
    let schedulers = scheduler_writer.as_reader();
    let scheduler_events = cache_events(
        "the Scheduler",
        Api::<DynamicObject>::all_with(client.clone(), &scheduler_resource()),
        watcher::Config::default().fields(&format!("metadata.name={SCHEDULER_NAME}")),
        scheduler_writer,
    );
    // A pool's synchronizer status follows its nodes' PinnedImageSets progress: only changes of
    // that part of a MachineConfigNode (they change at every update step) sync the pool.
    let (machine_config_node_store, machine_config_node_writer) = reflector::store();
    let machine_config_node_events = logging_errors(
        "MachineConfigNodes",
        watcher(Api::<MachineConfigNode>::all(client.clone()), watcher::Config::default())
            .default_backoff()
            .reflect(machine_config_node_writer)
            .touched_objects()
            .predicate_filter(pinned_image_set_progress, Default::default()),
    );
    let (caches_ready_tx, caches_ready) = tokio::sync::watch::channel(false);
    let stores = (
        nodes.clone(),
        controller_configs.clone(),
        os_configs.clone(),
        os_builds.clone(),
        machine_config_node_store.clone(),
    );
    let readiness = async move {
        let (nodes, controller_configs, os_configs, os_builds, machine_config_nodes) = stores;
        let ready = [
            nodes.wait_until_ready().await,
            controller_configs.wait_until_ready().await,
            os_configs.wait_until_ready().await,
            os_builds.wait_until_ready().await,
            machine_config_nodes.wait_until_ready().await,
        ];
        if ready.iter().all(Result::is_ok) {
            let _ = caches_ready_tx.send(true);
        }
        // Keep the sender: a dropped sender would end the waits of later syncs.
        std::future::pending::<()>().await;
    };
    let configs_for_builds = os_configs.clone();
    let wake_machine_config_nodes = Arc::new(tokio::sync::Notify::new());
    let machine_config_nodes = MachineConfigNodes::new(client.clone(), nodes.clone(), pools.clone())
        .run(wake_machine_config_nodes.clone(), caches_ready.clone());
    let skew_metric = skew_enforcement_metric(
        Api::all(client.clone()),
        controller_configs.clone(),
        caches_ready.clone(),
        options.metrics.clone(),
    );
    let os_image_stream_events = logging_errors(
        "OSImageStreams",
        watcher(Api::<OSImageStream>::all(client.clone()), watcher::Config::default())
            .default_backoff()
            .touched_objects(),
    );
    let context = Arc::new(Context {
        machine_config_nodes: wake_machine_config_nodes,
        client,
        nodes,
        background,
        pools: pools.clone(),
        controller_configs,
        os_configs: os_configs.clone(),
        os_builds: os_builds.clone(),
        schedulers,
        machine_config_node_store,
        caches_ready,
        retries: Retries::new("node", options.retry_delay, options.metrics.clone()),
        options,
    });
    let controller = controller
        .watches_stream(node_events, move |node| owners.pools_to_sync(&node, &pools_for_nodes.state()))
        .watches_stream(os_config_events, |config| Some(ObjectRef::new(&config.spec.machine_config_pool.name)))
        .watches_stream(os_build_events, move |build| {
            let config = configs_for_builds.get(&ObjectRef::new(&build.spec.machine_os_config.name))?;
            Some(ObjectRef::new(&config.spec.machine_config_pool.name))
        })
        .watches_stream(machine_config_node_events, |mcn| Some(ObjectRef::new(&mcn.spec.pool.name)))
        .watches_stream_with(scheduler_events, |_| Some(ObjectRef::new(MASTER_POOL)), scheduler_resource())
        // The topology is copied onto every node of every pool.
        .watches_stream(controller_config_events, crate::render::controller::every_pool(pools.clone()))
        // Each pool reports the stream it runs.
        .watches_stream(os_image_stream_events, crate::render::controller::every_pool(pools));
    let controller = reconciler::run(controller, reconcile, context);
    // The readiness future never ends: the controller's end ends the run.
    tokio::select! {
        () = controller => {}
        () = readiness => {}
        () = machine_config_nodes => {}
        () = skew_metric => {}
    }
}

/// The events of a watch that keeps the cache behind `writer`, for the Controller's triggers.
fn cache_events<K>(
    what: &'static str,
    api: Api<K>,
    config: watcher::Config,
    writer: reflector::store::Writer<K>,
) -> impl futures::Stream<Item = Result<K, watcher::Error>> + Send
where
    K: kube::Resource + Clone + k8s_openapi::serde::de::DeserializeOwned + std::fmt::Debug + Send + Sync + 'static,
    K::DynamicType: Clone + Eq + std::hash::Hash,
{
    logging_errors(what, watcher(api, config).default_backoff().reflect(writer).touched_objects())
}

/// `events` (of a watch through a reflector), calling `removed` after each deletion and each
/// relist: then the store holds what remains.
fn after_removals<K>(
    events: impl futures::Stream<Item = Result<watcher::Event<K>, watcher::Error>> + Send,
    removed: impl Fn() + Send,
) -> impl futures::Stream<Item = Result<watcher::Event<K>, watcher::Error>> + Send {
    events.inspect(move |event| {
        if matches!(event, Ok(watcher::Event::Delete(_) | watcher::Event::InitDone)) {
            removed();
        }
    })
}

/// Keeps `mcc_boot_image_skew_enforcement_none` from the MachineConfiguration `cluster`, judged
/// with the cached ControllerConfig's Infrastructure (so once the caches are ready). As upstream,
/// only changes of the MachineConfiguration count.
async fn skew_enforcement_metric(
    api: Api<MachineConfiguration>,
    controller_configs: Store<ControllerConfig>,
    mut caches_ready: tokio::sync::watch::Receiver<bool>,
    metrics: ControllerMetrics,
) {
    caches_ready.wait_for(|ready| *ready).await.expect("the readiness task outlives the controller");
    let config = watcher::Config::default().fields(&format!("metadata.name={MACHINE_CONFIGURATION_NAME}"));
    let mut events = std::pin::pin!(logging_errors("the MachineConfiguration", watcher(api, config).default_backoff()));
    // Whether a (re)list found the object: one deleted while the watch was down has no Delete.
    let mut listed = false;
    while let Some(Ok(event)) = events.next().await {
        let controller_config = controller_configs.get(&ObjectRef::new(CONTROLLER_CONFIG_NAME));
        let none = match &event {
            watcher::Event::Apply(configuration) | watcher::Event::InitApply(configuration) => {
                listed = true;
                super::metrics::skew_enforcement_none(Some(configuration), controller_config.as_deref())
            }
            watcher::Event::Delete(_) => false,
            watcher::Event::Init => {
                listed = false;
                continue;
            }
            watcher::Event::InitDone if listed => continue,
            watcher::Event::InitDone => false,
        };
        metrics.set_boot_image_skew_enforcement_none(none);
    }
}

/// Each node's primary pool as last seen, so that a node leaving a pool (relabelled, deleted)
/// also updates the pool it left.
#[derive(Default)]
struct PrimaryPools(Mutex<HashMap<String, String>>);

impl PrimaryPools {
    fn pools_to_sync(&self, node: &Node, pools: &[Arc<MachineConfigPool>]) -> Vec<ObjectRef<MachineConfigPool>> {
        let owners = pools_for_node(node, pools).unwrap_or_else(|e| {
            tracing::warn!("{e}");
            Vec::new()
        });
        let mut names: Vec<String> = owners.iter().map(|p| p.name_any()).collect();
        // The master pool's sync moves the arbiter nodes (HA arbiter topology).
        if names.iter().any(|n| n == ARBITER_POOL) && !names.iter().any(|n| n == MASTER_POOL) {
            names.push(MASTER_POOL.to_string());
        }
        let mut primaries = self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let previous = match (node.metadata.deletion_timestamp.is_some(), names.first()) {
            (false, Some(primary)) => primaries.insert(node.name_any(), primary.clone()),
            _ => primaries.remove(&node.name_any()),
        };
        names.extend(previous.filter(|p| !names.contains(p)));
        names.iter().map(|name| ObjectRef::new(name)).collect()
    }
}

async fn reconcile(pool: Arc<MachineConfigPool>, context: Arc<Context>) -> Result<Action, Error> {
    // Planning over a partial node list would take missing nodes for available ones.
    let mut caches_ready = context.caches_ready.clone();
    caches_ready.wait_for(|ready| *ready).await.expect("the readiness task outlives the controller");
    let controller_config = context.controller_configs.get(&ObjectRef::new(CONTROLLER_CONFIG_NAME));
    let topology = controller_config.as_deref().and_then(control_plane_topology);
    let snapshot = Snapshot { nodes: context.nodes.state(), pools: context.pools.state(), topology };
    let master = context.pools.get(&ObjectRef::new(MASTER_POOL));
    let master_nodes = master.as_deref().map(|m| snapshot.nodes_of(m)).unwrap_or_default();
    let mut wake_at = None;
    match arbiter::coordination(&pool.name_any(), snapshot.topology.as_deref(), master.as_deref(), &master_nodes) {
        Coordination::Alone => {
            wake_at = sync_pool(&context, &snapshot, &pool, false).await?.wake_at;
        }
        Coordination::StatusOnly(why) => {
            tracing::debug!(pool = %pool.name_any(), "status only: {why}");
            let layered = pool_layering(&context, &pool).await?;
            sync_status(&context, pool.clone(), &snapshot.nodes_of(&pool), layered.as_ref()).await?;
        }
        Coordination::MasterThenArbiter => {
            let arbiter = context.pools.get(&ObjectRef::new(ARBITER_POOL)).ok_or(Error::NoArbiterPool)?;
            let arbiter_nodes = snapshot.nodes_of(&arbiter);
            let arbiter_unavailable = arbiter_nodes.iter().any(|n| mco_rollout::node::unavailable_for_update(n));
            let synced = sync_pool(&context, &snapshot, &pool, arbiter_unavailable).await?;
            let targeted = synced.targeted;
            wake_at = synced.wake_at;
            let unavailable = master_nodes.iter().filter(|n| mco_rollout::node::unavailable_for_update(n)).count();
            if pool.spec.paused == Some(true) {
                // The arbiter's own sync moves its nodes then; two syncs of one pool must not overlap.
            } else if arbiter::arbiter_waits(unavailable, targeted) {
                let layered = pool_layering(&context, &arbiter).await?;
                sync_status(&context, arbiter, &arbiter_nodes, layered.as_ref()).await?;
            } else {
                let arbiter_wake = sync_pool(&context, &snapshot, &arbiter, false).await?.wake_at;
                wake_at = wake_at.into_iter().chain(arbiter_wake).min();
            }
        }
    }
    context.machine_config_nodes.notify_one();
    // A soak that ends or a maintenance window that opens changes nothing the watches see.
    match wake_at.map(|at| Timestamp::now().duration_until(at)) {
        Some(wait) => Ok(Action::requeue(Duration::try_from(wait).unwrap_or_default() + Duration::from_secs(1))),
        None => Ok(Action::await_change()),
    }
}

/// What one sync of a pool did.
struct Synced {
    /// Nodes targeted.
    targeted: usize,
    /// When mco's rollout policy lets more nodes go by itself (a soak ends, a window opens).
    wake_at: Option<Timestamp>,
}

/// What one sync reads from the caches, shared by the pools it moves.
struct Snapshot {
    nodes: Vec<Arc<Node>>,
    pools: Vec<Arc<MachineConfigPool>>,
    topology: Option<String>,
}

impl Snapshot {
    fn nodes_of(&self, pool: &MachineConfigPool) -> Vec<&Node> {
        nodes_for_pool(pool, &self.nodes, &self.pools)
    }
}

/// Plans one pool, writes the plan and the pool's status. `arbiter_unavailable`: the master pool
/// of an HA arbiter topology gets no capacity.
async fn sync_pool(
    context: &Context,
    snapshot: &Snapshot,
    pool: &Arc<MachineConfigPool>,
    arbiter_unavailable: bool,
) -> Result<Synced, Error> {
    let name = pool.name_any();
    let nodes = snapshot.nodes_of(pool);
    tracing::debug!(pool = %name, nodes = nodes.len(), "syncing");
    let operator_node = if name == MASTER_POOL { operator_node(&context.client).await } else { None };
    let layered = pool_layering(context, pool).await?;
    // Records of mco's rollout policy about another target are dropped: that rollout is over.
    let stale = policy::stale_records(pool, &pool_target(pool, layered.as_ref()));
    let pool = &if stale.is_empty() {
        pool.clone()
    } else {
        let removed: serde_json::Map<String, serde_json::Value> =
            stale.iter().map(|key| (key.to_string(), serde_json::Value::Null)).collect();
        Arc::new(patch_pool(context, pool, &json!({"metadata": {"annotations": removed}})).await?)
    };
    let scheduler = context.schedulers.get(&ObjectRef::new_with(SCHEDULER_NAME, scheduler_resource()));
    let first_configs = first_config_pools(context, &nodes, &snapshot.pools).await;
    let os_image = prestage_image(context, pool, layered.as_ref()).await?;
    let first_configs: BTreeMap<String, &MachineConfigPool> =
        first_configs.iter().map(|(config, pool)| (config.clone(), &**pool)).collect();
    let inputs = Inputs {
        operator_node: operator_node.as_deref(),
        topology: snapshot.topology.as_deref(),
        layered: layered.as_ref(),
        masters_schedulable: scheduler.as_deref().map(masters_schedulable),
        first_config_pools: Some(&first_configs),
        arbiter_unavailable,
        now: Timestamp::now(),
        os_image: os_image.as_deref(),
    };
    let planned = match plan(pool, &nodes, &inputs) {
        Ok(planned) => planned,
        Err(e) => {
            // As upstream: the pool still reports its nodes.
            sync_status(context, pool.clone(), &nodes, layered.as_ref()).await?;
            return Err(e.into());
        }
    };
    let mut synced = Synced { targeted: 0, wake_at: None };
    let mut pool = pool.clone();
    match planned {
        Plan::NoRenderedConfig => return Ok(synced),
        Plan::SelectingAll => {
            let note = "This machineconfigpool is selecting all nodes. A non-empty selector is required.";
            tracing::warn!(pool = %name, "{note}");
            publish(&context.client, &pool.object_ref(&()), EventType::Warning, "SelectingAll", note, "Sync").await;
            return Ok(synced);
        }
        Plan::StatusOnly(why) => tracing::debug!(pool = %name, "status only: {why}"),
        Plan::Halt { target, failed } => {
            let note = Hold::Halt(failed).message(&target.config);
            tracing::warn!(pool = %name, "{note}");
            let record = policy::record_key(&target);
            let patch = json!({"metadata": {"annotations": {HALTED_ON_ANNOTATION: record}}, "spec": {"paused": true}});
            pool = Arc::new(patch_pool(context, &pool, &patch).await?);
            publish(&context.client, &pool.object_ref(&()), EventType::Warning, "RolloutHalted", &note, "Sync").await;
        }
        Plan::Update(update) => {
            if let Some(hold @ Hold::Soak { started: Some(at), .. }) = &update.hold {
                let record = format!("{} {at}", policy::record_key(&update.target));
                let patch = json!({"metadata": {"annotations": {CANARIES_DONE_ANNOTATION: record}}});
                pool = Arc::new(patch_pool(context, &pool, &patch).await?);
                let note = hold.message(&update.target.config);
                publish(&context.client, &pool.object_ref(&()), EventType::Normal, "CanariesUpdated", &note, "Sync")
                    .await;
            }
            carry_out(context, &pool, &nodes, &update).await?;
            synced = Synced { targeted: update.to_target.len(), wake_at: update.hold.as_ref().and_then(Hold::ends_at) };
        }
    }
    sync_status(context, pool, &nodes, layered.as_ref()).await?;
    Ok(synced)
}

/// For a pool that pre-stages ([`mco_rollout::prestage`]): the OS image its nodes deploy for its
/// target, by digest (a layered pool's built image, else the rendered config's pinned image).
async fn prestage_image(
    context: &Context,
    pool: &MachineConfigPool,
    layered: Option<&Layered>,
) -> Result<Option<String>, Error> {
    if !matches!(mco_rollout::prestage::concurrency(pool), Ok(Some(_))) {
        return Ok(None);
    }
    if let Some(layered) = layered {
        return Ok(Some(layered.image.clone()).filter(|image| !image.is_empty()));
    }
    let Some(config) = pool.spec.configuration.as_ref().and_then(|c| c.name.as_deref()) else { return Ok(None) };
    let rendered = Api::<MachineConfig>::all(context.client.clone())
        .get_opt(config)
        .await
        .map_err(kube_error(format!("reading MachineConfig {config}")))?;
    // Only registry images by digest are pulled ahead (not `oci:` directories on the node).
    Ok(rendered
        .as_ref()
        .and_then(|mc| mc.deployed_os_image().ok())
        .filter(|i| is_by_digest(i) && !i.starts_with("oci:"))
        .map(str::to_string))
}

/// Merge-patches `pool` with mco's rollout policy records or the halt, on the version the plan
/// was made from (a conflict fails the sync, which plans again).
async fn patch_pool(
    context: &Context,
    pool: &MachineConfigPool,
    patch: &serde_json::Value,
) -> Result<MachineConfigPool, Error> {
    let name = pool.name_any();
    let mut patch = patch.clone();
    patch["metadata"]["resourceVersion"] = json!(pool.resource_version());
    Api::<MachineConfigPool>::all(context.client.clone())
        .patch(&name, &patch_params(), &Patch::Merge(&patch))
        .await
        .map_err(|e| kube_error(format!("updating MachineConfigPool {name}"))(e).into())
}

/// For the nodes that may have booted straight into a custom pool (a `firstPivotConfig`, no
/// `customPoolLabelsApplied`): the pool that rendered that config (its first ownerReference), by
/// config name. Only the configs' metadata is read; a config that cannot be read is skipped.
async fn first_config_pools(
    context: &Context,
    nodes: &[&Node],
    pools: &[Arc<MachineConfigPool>],
) -> BTreeMap<String, Arc<MachineConfigPool>> {
    let api = Api::<MachineConfig>::all(context.client.clone());
    let mut found = BTreeMap::new();
    for node in nodes {
        let Some(config) = annotation(node, FIRST_PIVOT_CONFIG_ANNOTATION) else { continue };
        if annotation(node, CUSTOM_POOL_LABELS_APPLIED_ANNOTATION).is_some() || found.contains_key(config) {
            continue;
        }
        let owner = match api.get_metadata_opt(config).await {
            Ok(meta) => meta.and_then(|m| m.metadata.owner_references?.into_iter().next()),
            Err(e) => {
                tracing::warn!(node = %node.name_any(), "reading MachineConfig {config}: {e}");
                None
            }
        };
        let pool =
            owner.filter(|o| o.kind == "MachineConfigPool").and_then(|o| pools.iter().find(|p| p.name_any() == o.name));
        if let Some(pool) = pool {
            found.insert(config.to_string(), Arc::clone(pool));
        }
    }
    found
}

/// The pool's image build if the pool is layered (has a MachineOSConfig), else the image its OS
/// image tag was resolved to again, if it was. A `current-machine-os-build` annotation naming a
/// build of another rendered config is removed from the MachineOSConfig.
async fn pool_layering(context: &Context, pool: &MachineConfigPool) -> Result<Option<Layered>, Error> {
    let configs = context.os_configs.state();
    let Some(config) = layering::config_for_pool(&pool.name_any(), &configs) else {
        return Ok(layering::resolved(pool));
    };
    let target = pool.spec.configuration.as_ref().and_then(|c| c.name.as_deref()).unwrap_or_default();
    let builds = context.os_builds.state();
    let (build, stale) = layering::choose_build(config, &builds, target);
    if stale {
        let name = config.name_any();
        let patch = json!({"metadata": {"annotations": {CURRENT_MACHINE_OS_BUILD_ANNOTATION: null}}});
        Api::<MachineOSConfig>::all(context.client.clone())
            .patch(&name, &patch_params(), &Patch::Merge(&patch))
            .await
            .map_err(kube_error(format!("removing the stale build annotation of MachineOSConfig {name}")))?;
    }
    Ok(Some(layering::layered(config, build)))
}

/// The Scheduler `cluster` (`config.openshift.io/v1`), read as a dynamic object: nothing else of
/// that API group is needed here.
const SCHEDULER_NAME: &str = "cluster";

fn scheduler_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk("config.openshift.io", "v1", "Scheduler"), "schedulers")
}

/// `spec.mastersSchedulable` (false when unset, as upstream's Go zero value).
fn masters_schedulable(scheduler: &DynamicObject) -> bool {
    scheduler.data.pointer("/spec/mastersSchedulable").and_then(serde_json::Value::as_bool).unwrap_or(false)
}

/// `spec.infra.status.controlPlaneTopology` of the ControllerConfig.
fn control_plane_topology(cc: &ControllerConfig) -> Option<String> {
    let infra = cc.spec.infra.as_ref()?;
    infra.pointer("/status/controlPlaneTopology")?.as_str().map(str::to_string)
}

/// The node of the operator's pod. Not finding it only means no node is held back.
async fn operator_node(client: &Client) -> Option<String> {
    let pods = Api::<Pod>::namespaced(client.clone(), MCO_NAMESPACE);
    match pods.list(&ListParams::default().labels(OPERATOR_POD_SELECTOR)).await {
        Ok(list) => list.items.into_iter().find_map(|p| p.spec?.node_name),
        Err(e) => {
            tracing::warn!("finding the operator's node (continuing without): {e}");
            None
        }
    }
}

/// Writes what `update` decided: the targeted nodes, waiting until the cache shows them (the next
/// sync counts them as unavailable); everything else in the background.
async fn carry_out(context: &Context, pool: &MachineConfigPool, nodes: &[&Node], update: &Update) -> Result<(), Error> {
    let by_name: HashMap<&str, &Node> = nodes.iter().map(|n| (mco_rollout::node::name(n), *n)).collect();
    let mut targeted = update.node_changes();
    let others = targeted.split_off(update.to_target.len());
    context.background.cancel(&update.to_target);
    let reference = pool.object_ref(&());
    if let Some(operator) = &update.deferred_operator_node {
        let note = format!("Deferring update of machine config operator node {operator}");
        tracing::info!(pool = %pool.name_any(), "{note}");
        publish(&context.client, &reference, EventType::Normal, "DeferringOperatorNodeUpdate", &note, "Sync").await;
    }
    let written = write_nodes(context, &by_name, &targeted).await?;
    if !update.to_target.is_empty() {
        let (reason, note) = set_desired_event(&update.to_target, &update.target);
        tracing::info!(pool = %pool.name_any(), nodes = ?update.to_target, "{note}");
        publish(&context.client, &reference, EventType::Normal, reason, &note, "Sync").await;
        let now = mco_metrics::unix_seconds(std::time::SystemTime::now());
        context.options.metrics.set_sub_controller_state(SubControllerSync::PoolTargeted, &pool.name_any(), now);
    }
    tracing::debug!(pool = %pool.name_any(), targeted = written.len(), "targeted nodes written");
    let queued = context.background.submit(others);
    tracing::debug!(pool = %pool.name_any(), queued, "background node writes");
    wait_for_cache(context, &written).await
}

/// Writes each node's change, [`Options::concurrent_writes`] at a time; returns the
/// resourceVersions written.
async fn write_nodes(
    context: &Context,
    nodes: &HashMap<&str, &Node>,
    changes: &[(String, mco_rollout::plan::NodeChange)],
) -> Result<Vec<(String, String)>, Error> {
    let writes: Vec<_> = changes
        .iter()
        .filter_map(|(name, change)| nodes.get(name.as_str()).map(|node| write_node(context, node, change)))
        .collect();
    let written: Vec<Option<(String, String)>> =
        futures::stream::iter(writes).buffer_unordered(context.options.concurrent_writes.max(1)).try_collect().await?;
    Ok(written.into_iter().flatten().collect())
}

/// Patches one node, redoing the patch on the fresh node after a conflict.
async fn write_node(
    context: &Context,
    node: &Node,
    change: &mco_rollout::plan::NodeChange,
) -> Result<Option<(String, String)>, Error> {
    let api = Api::<Node>::all(context.client.clone());
    let name = node.name_any();
    let mut current = Cow::Borrowed(node);
    for _ in 0..CONFLICT_RETRIES {
        let Some(patch) = node_patch(&current, change) else { return Ok(None) };
        match api.patch(&name, &patch_params(), &Patch::Merge(&patch)).await {
            Ok(updated) => return Ok(Some((name, updated.resource_version().unwrap_or_default()))),
            Err(kube::Error::Api(status)) if status.is_conflict() => {
                current = Cow::Owned(api.get(&name).await.map_err(kube_error(format!("reading node {name}")))?);
            }
            // Deleted since: nothing left to update.
            Err(kube::Error::Api(status)) if status.is_not_found() => return Ok(None),
            Err(e) => return Err(kube_error(format!("updating node {name}"))(e).into()),
        }
    }
    Err(KubeError::Conflicts { what: format!("node {name}"), tries: CONFLICT_RETRIES }.into())
}

/// Waits until the node cache holds each written node at its written resourceVersion or later
/// (or no longer holds it). resourceVersions are etcd revisions, compared as numbers; one that
/// is not a number cannot be compared and is not waited for.
async fn wait_for_cache(context: &Context, written: &[(String, String)]) -> Result<(), Error> {
    let deadline = Instant::now() + context.options.cache_timeout;
    for (node, version) in written {
        let Ok(wanted) = version.parse::<u64>() else { continue };
        loop {
            let cached = context.nodes.get(&ObjectRef::new(node));
            let seen = cached.as_ref().and_then(|n| n.resource_version()).and_then(|v| v.parse::<u64>().ok());
            if cached.is_none() || seen.is_some_and(|seen| seen >= wanted) {
                break;
            }
            if Instant::now() > deadline {
                let timeout = context.options.cache_timeout;
                return Err(Error::CacheLag { node: node.clone(), version: version.clone(), timeout });
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    }
    Ok(())
}

/// The pool's gauges, and its nodes' series, from the status just computed.
fn record_metrics(
    context: &Context,
    pool: &MachineConfigPool,
    nodes: &[&Node],
    layered: Option<&Layered>,
    status: &MachineConfigPoolStatus,
) {
    let (metrics, name) = (&context.options.metrics, pool.name_any());
    metrics.set_pool(&name, status);
    metrics.set_pool_nodes(&name, &super::metrics::pool_nodes(nodes, &pool_target(pool, layered)));
    let members = super::metrics::pool_members(&name, nodes, &context.pools.state());
    let now = mco_metrics::unix_seconds(std::time::SystemTime::now());
    metrics.set_pool_members(&name, &members, super::metrics::pool_state(status), now);
    // A sync (this one, or the render controller's) that began before a deletion may have
    // written the deleted object's series after the watch removed them.
    metrics.retain_pools(|pool| context.pools.get(&ObjectRef::new(pool)).is_some());
    metrics.retain_nodes(|node| context.nodes.get(&ObjectRef::new(node)).is_some());
}

/// The pool's `status.osImageStream` given the rest of its new `status`: read only for an updated,
/// not degraded pool of a cluster that has an OSImageStream.
async fn os_image_stream_status(
    context: &Context,
    status: &MachineConfigPoolStatus,
) -> Result<Option<NameReference>, Error> {
    let conditions = status.conditions.as_deref().unwrap_or_default();
    let is_true = |kind: &str| conditions.iter().any(|c| c.type_ == kind && c.status == "True");
    let settled = is_true(pool_condition::UPDATED) && !is_true(pool_condition::DEGRADED);
    let Some(configuration) = status.configuration.as_ref().filter(|_| settled) else { return Ok(None) };
    let stream = Api::<OSImageStream>::all(context.client.clone())
        .get_opt(OS_IMAGE_STREAM_NAME)
        .await
        .map_err(kube_error(format!("reading OSImageStream {OS_IMAGE_STREAM_NAME}")))?;
    let (Some(stream), Some(name)) = (stream, configuration.name.as_deref()) else { return Ok(None) };
    let configs = Api::<MachineConfig>::all(context.client.clone());
    let read = |name: String| {
        let configs = configs.clone();
        async move { configs.get_opt(&name).await.map_err(kube_error(format!("reading MachineConfig {name}"))) }
    };
    let rendered = read(name.to_string()).await?;
    let mut overridden = false;
    // A source that is gone counts for nothing, as upstream's.
    for source in configuration.source.iter().flatten().filter_map(|s| s.name.clone()) {
        overridden |= read(source).await?.is_some_and(|mc| !mc.spec.os_image_url.is_empty());
    }
    Ok(mco_render::streams::pool_status(settled, rendered.as_ref(), overridden, Some(&stream)))
}

/// What of a MachineConfigNode the pool's synchronizer status reads.
fn pinned_image_set_progress(mcn: &MachineConfigNode) -> Option<u64> {
    use std::hash::{Hash as _, Hasher as _};
    let status = mcn.status.as_ref();
    let sets = status.and_then(|s| s.pinned_image_sets.as_ref());
    let started = status.is_some_and(|s| s.conditions.as_ref().is_some_and(|c| !c.is_empty()));
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    (serde_json::to_string(&sets).unwrap_or_default(), started, &mcn.spec.pool.name).hash(&mut hasher);
    Some(hasher.finish())
}

/// Writes the pool's status if it differs from what the nodes say. The write is conditional on
/// the pool's resourceVersion, so conditions the render controller set meanwhile are not lost:
/// after a conflict the status is recomputed from the fresh pool.
async fn sync_status(
    context: &Context,
    pool: Arc<MachineConfigPool>,
    nodes: &[&Node],
    layered: Option<&Layered>,
) -> Result<(), Error> {
    let api = Api::<MachineConfigPool>::all(context.client.clone());
    let name = pool.name_any();
    let mut pool = pool;
    for _ in 0..CONFLICT_RETRIES {
        let mut status = calculate_status(&pool, nodes, layered, &Time(Timestamp::now()));
        let machine_config_nodes = context.machine_config_node_store.state();
        let machine_config_nodes: Vec<&MachineConfigNode> = machine_config_nodes.iter().map(|m| &**m).collect();
        status.pool_synchronizers_status = Some(pool_synchronizers(nodes, &machine_config_nodes, &status));
        // Informational: a failed read keeps what the pool said.
        status.os_image_stream = os_image_stream_status(context, &status).await.unwrap_or_else(|e| {
            tracing::warn!(pool = %name, "reading the pool's OS image stream: {e}");
            pool.status.as_ref().and_then(|s| s.os_image_stream.clone())
        });
        record_metrics(context, &pool, nodes, layered, &status);
        if pool.status.as_ref() == Some(&status) {
            return Ok(());
        }
        let mut patch = json!({ "metadata": { "resourceVersion": pool.resource_version() }, "status": status });
        if status.os_image_stream.is_none() {
            // A merge patch keeps what it does not name.
            patch["status"]["osImageStream"] = serde_json::Value::Null;
        }
        match api.patch_status(&name, &patch_params(), &Patch::Merge(&patch)).await {
            Ok(_) => return Ok(()),
            Err(kube::Error::Api(status)) if status.is_conflict() => {
                pool = Arc::new(api.get(&name).await.map_err(kube_error(format!("reading MachineConfigPool {name}")))?);
            }
            Err(e) => return Err(kube_error(format!("updating the status of MachineConfigPool {name}"))(e).into()),
        }
    }
    Err(KubeError::Conflicts { what: format!("the status of MachineConfigPool {name}"), tries: CONFLICT_RETRIES }
        .into())
}
