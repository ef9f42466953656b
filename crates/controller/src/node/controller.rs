//! The IO half of the node controller: watches pools, nodes and the ControllerConfig into
//! caches, plans each pool with [`mco_rollout::plan`], writes the nodes it chose and the pool's
//! status.
//!
//! Plans are made from the caches, which lag behind our own writes by a watch round trip. A pool
//! synced again before its cache shows the nodes it just targeted would count them as available
//! and target more than `maxUnavailable`. So a sync ends only once the node cache holds every
//! node at (at least) the resourceVersion our write returned; syncs of one pool never overlap.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::{StreamExt as _, TryStreamExt as _};
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::api::{ListParams, Patch};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::events::EventType;
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt as _, watcher};
use kube::{Api, Client, Resource as _, ResourceExt as _};
use mco_api::constants::{CONTROLLER_CONFIG_NAME, MASTER_POOL, MCO_NAMESPACE};
use mco_api::{ControllerConfig, MachineConfigPool};
use mco_rollout::plan::Update;
use mco_rollout::{Plan, PlanError, calculate_status, nodes_for_pool, plan, pools_for_node};
use serde_json::json;

use super::{node_patch, set_desired_config_note};
use crate::{KubeError, kube_error, patch_params, publish};

/// Label of the operator's pod: in the master pool its node updates last.
const OPERATOR_POD_SELECTOR: &str = "k8s-app=machine-config-operator";
/// Writes retried after a conflict before the sync fails (and is retried as a whole).
const CONFLICT_RETRIES: usize = 5;

/// Timing and parallelism of the node controller.
#[derive(Debug, Clone)]
pub struct Options {
    /// Delay before a pool whose sync failed is tried again.
    pub retry_delay: Duration,
    /// Node writes in flight at once (a new rollout taints every waiting node).
    pub concurrent_writes: usize,
    /// How long a sync waits for the node cache to show its own writes.
    pub cache_timeout: Duration,
}

impl Default for Options {
    fn default() -> Self {
        Options { retry_delay: Duration::from_secs(5), concurrent_writes: 16, cache_timeout: Duration::from_secs(30) }
    }
}

/// Why one sync of a pool failed; the pool is retried after [`Options::retry_delay`].
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Plan(#[from] PlanError),
    #[error(transparent)]
    Kube(#[from] KubeError),
    #[error("node {node}: the cache did not show our write (resourceVersion {version}) within {timeout:?}")]
    CacheLag { node: String, version: String, timeout: Duration },
}

struct Context {
    client: Client,
    nodes: Store<Node>,
    pools: Store<MachineConfigPool>,
    controller_configs: Store<ControllerConfig>,
    options: Options,
}

/// Runs the node controller until its watches end (they retry errors, so: forever).
pub async fn run(client: Client, options: Options) {
    let (nodes, node_writer) = reflector::store();
    let node_events = watcher(Api::<Node>::all(client.clone()), watcher::Config::default())
        .default_backoff()
        .reflect(node_writer)
        .touched_objects();
    let (controller_configs, controller_config_writer) = reflector::store();
    let controller_config_events = watcher(
        Api::<ControllerConfig>::all(client.clone()),
        watcher::Config::default().fields(&format!("metadata.name={CONTROLLER_CONFIG_NAME}")),
    )
    .default_backoff()
    .reflect(controller_config_writer)
    .touched_objects();
    let controller = Controller::new(Api::<MachineConfigPool>::all(client.clone()), watcher::Config::default());
    let pools = controller.store();
    let owners = PrimaryPools::default();
    let pools_for_nodes = pools.clone();
    let context = Arc::new(Context { client, nodes, pools: pools.clone(), controller_configs, options });
    controller
        .watches_stream(node_events, move |node| owners.pools_to_sync(&node, &pools_for_nodes.state()))
        // The topology is copied onto every node of every pool.
        .watches_stream(controller_config_events, crate::render::controller::every_pool(pools))
        .run(reconcile, error_policy, context)
        .for_each(|result| async move {
            match result {
                Ok((pool, _)) => tracing::trace!(pool = %pool.name, "synced"),
                Err(e) => tracing::debug!("{e}"),
            }
        })
        .await;
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
        let mut primaries = self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let previous = match (node.metadata.deletion_timestamp.is_some(), names.first()) {
            (false, Some(primary)) => primaries.insert(node.name_any(), primary.clone()),
            _ => primaries.remove(&node.name_any()),
        };
        names.extend(previous.filter(|p| !names.contains(p)));
        names.iter().map(|name| ObjectRef::new(name)).collect()
    }
}

fn error_policy(pool: Arc<MachineConfigPool>, error: &Error, context: Arc<Context>) -> Action {
    tracing::warn!(pool = %pool.name_any(), "{error}");
    Action::requeue(context.options.retry_delay)
}

async fn reconcile(pool: Arc<MachineConfigPool>, context: Arc<Context>) -> Result<Action, Error> {
    // Planning over a partial node list would take missing nodes for available ones.
    for ready in [context.nodes.wait_until_ready().await, context.controller_configs.wait_until_ready().await] {
        ready.expect("the reflectors live as long as the controller");
    }
    let name = pool.name_any();
    let all_nodes = context.nodes.state();
    let pools = context.pools.state();
    let nodes = nodes_for_pool(&pool, &all_nodes, &pools);
    let controller_config = context.controller_configs.get(&ObjectRef::new(CONTROLLER_CONFIG_NAME));
    let topology = controller_config.as_deref().and_then(control_plane_topology);
    let operator_node = if name == MASTER_POOL { operator_node(&context.client).await } else { None };
    match plan(&pool, &nodes, operator_node.as_deref(), topology.as_deref())? {
        Plan::NoRenderedConfig => return Ok(Action::await_change()),
        Plan::SelectingAll => {
            let note = "This machineconfigpool is selecting all nodes. A non-empty selector is required.";
            tracing::warn!(pool = %name, "{note}");
            publish(&context.client, &pool.object_ref(&()), EventType::Warning, "SelectingAll", note, "Sync").await;
            return Ok(Action::await_change());
        }
        Plan::StatusOnly(why) => tracing::debug!(pool = %name, "status only: {why}"),
        Plan::Update(update) => carry_out(&context, &pool, &nodes, &update).await?,
    }
    sync_status(&context, pool, &nodes).await?;
    Ok(Action::await_change())
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

/// Writes what `update` decided: targeted nodes first, so that the slots are taken before the
/// (on a new rollout, many) taint writes; then waits for the cache to show all of it.
async fn carry_out(context: &Context, pool: &MachineConfigPool, nodes: &[&Node], update: &Update) -> Result<(), Error> {
    let by_name: HashMap<&str, &Node> = nodes.iter().map(|n| (mco_rollout::node::name(n), *n)).collect();
    let changes = update.node_changes();
    let (targeted, others) = changes.split_at(update.to_target.len());
    let reference = pool.object_ref(&());
    if let Some(operator) = &update.deferred_operator_node {
        let note = format!("Deferring update of machine config operator node {operator}");
        tracing::info!(pool = %pool.name_any(), "{note}");
        publish(&context.client, &reference, EventType::Normal, "DeferringOperatorNodeUpdate", &note, "Sync").await;
    }
    let mut written = write_nodes(context, &by_name, targeted).await?;
    if !update.to_target.is_empty() {
        let note = set_desired_config_note(&update.to_target, &update.target);
        tracing::info!(pool = %pool.name_any(), nodes = ?update.to_target, "{note}");
        publish(&context.client, &reference, EventType::Normal, "SetDesiredConfig", &note, "Sync").await;
    }
    written.extend(write_nodes(context, &by_name, others).await?);
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

/// Writes the pool's status if it differs from what the nodes say. The write is conditional on
/// the pool's resourceVersion, so conditions the render controller set meanwhile are not lost:
/// after a conflict the status is recomputed from the fresh pool.
async fn sync_status(context: &Context, pool: Arc<MachineConfigPool>, nodes: &[&Node]) -> Result<(), Error> {
    let api = Api::<MachineConfigPool>::all(context.client.clone());
    let name = pool.name_any();
    let mut pool = pool;
    for _ in 0..CONFLICT_RETRIES {
        let status = calculate_status(&pool, nodes, &Time(Timestamp::now()));
        if pool.status.as_ref() == Some(&status) {
            return Ok(());
        }
        let patch = json!({ "metadata": { "resourceVersion": pool.resource_version() }, "status": status });
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
