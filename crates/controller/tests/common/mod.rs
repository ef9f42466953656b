//! What the node and drain controller tests (and the rollout benchmark) share: a pool of Node
//! objects in a real API server, a stand-in for the node daemons and the kubelet (neither runs
//! against the test API server), and a watch that checks `maxUnavailable` at every event.

#![allow(dead_code)] // Each test binary uses a part.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt as _;
use k8s_openapi::api::core::v1::Node;
use kube::api::{ListParams, Patch, PatchParams, PostParams};
use kube::runtime::{WatchStreamExt as _, watcher};
use kube::{Api, Client, ResourceExt as _};
use mco_api::MachineConfigPool;
use mco_api::constants::{
    CURRENT_CONFIG_ANNOTATION, CURRENT_IMAGE_ANNOTATION, DESIRED_CONFIG_ANNOTATION, DESIRED_DRAIN_ANNOTATION,
    DESIRED_IMAGE_ANNOTATION, LAST_APPLIED_DRAIN_ANNOTATION, REASON_ANNOTATION, STATE_ANNOTATION, STATE_DEGRADED,
    STATE_DONE, STATE_WORKING,
};
use mco_rollout::node::{annotation, unavailable_for_update};
pub use mco_testenv::eventually;
use serde_json::json;

pub const WORKER_LABEL: &str = "node-role.kubernetes.io/worker";

/// Controller logs in the test output, filtered by `MCO_LOG` (e.g. `MCO_LOG=mco_controller=debug`).
pub fn init_logs() {
    let filter = tracing_subscriber::EnvFilter::try_from_env("MCO_LOG").unwrap_or_else(|_| "warn".into());
    let _ = tracing_subscriber::fmt().with_env_filter(filter).with_test_writer().try_init();
}

pub fn rendered(n: usize) -> String {
    format!("rendered-worker-{n}")
}

/// The `worker` pool selecting [`WORKER_LABEL`] nodes, targeting `config`.
pub async fn create_pool(client: &Client, config: &str, max_unavailable: serde_json::Value) -> MachineConfigPool {
    let pool: MachineConfigPool = serde_json::from_value(json!({
        "apiVersion": "machineconfiguration.openshift.io/v1",
        "kind": "MachineConfigPool",
        "metadata": {"name": "worker"},
        "spec": {
            "nodeSelector": {"matchLabels": {WORKER_LABEL: ""}},
            "machineConfigSelector": {"matchLabels": {"machineconfiguration.openshift.io/role": "worker"}},
            "maxUnavailable": max_unavailable,
            "configuration": {"name": config},
        },
    }))
    .unwrap();
    Api::<MachineConfigPool>::all(client.clone()).create(&PostParams::default(), &pool).await.unwrap()
}

/// Sets the pool's target (as the render controller would) and, if given, its maxUnavailable and
/// paused flag.
pub async fn patch_pool(client: &Client, spec: serde_json::Value) {
    Api::<MachineConfigPool>::all(client.clone())
        .patch("worker", &PatchParams::default(), &Patch::Merge(&json!({ "spec": spec })))
        .await
        .unwrap();
}

/// `count` worker nodes `worker-0..`, Ready, running `config` with the daemon Done. Zones a/b
/// alternate.
pub async fn create_nodes(client: &Client, count: usize, config: &str) {
    let api = Api::<Node>::all(client.clone());
    let creates = (0..count).map(|i| {
        let api = api.clone();
        async move {
            let node: Node = serde_json::from_value(json!({
                "metadata": {
                    "name": format!("worker-{i}"),
                    "labels": {WORKER_LABEL: "", "topology.kubernetes.io/zone": if i % 2 == 0 { "a" } else { "b" }},
                    "annotations": {
                        CURRENT_CONFIG_ANNOTATION: config,
                        DESIRED_CONFIG_ANNOTATION: config,
                        STATE_ANNOTATION: STATE_DONE,
                    },
                },
            }))
            .unwrap();
            let name = node.name_any();
            api.create(&PostParams::default(), &node).await.unwrap();
            // The kubelet's part: the node is Ready.
            let status = json!({"status": {"conditions": [{"type": "Ready", "status": "True"}]}});
            api.patch_status(&name, &PatchParams::default(), &Patch::Merge(&status)).await.unwrap();
        }
    });
    futures::stream::iter(creates).buffer_unordered(32).collect::<Vec<()>>().await;
}

pub async fn nodes(client: &Client) -> Vec<Node> {
    Api::<Node>::all(client.clone()).list(&ListParams::default()).await.unwrap().items
}

pub async fn pool(client: &Client) -> MachineConfigPool {
    Api::<MachineConfigPool>::all(client.clone()).get("worker").await.unwrap()
}

/// The pool's condition `kind`: (status, reason, message).
pub fn condition(pool: &MachineConfigPool, kind: &str) -> Option<(String, String, String)> {
    let status = pool.status.as_ref()?;
    let c = mco_rollout::status::condition_of(status, kind)?;
    Some((c.status.clone(), c.reason.clone().unwrap_or_default(), c.message.clone().unwrap_or_default()))
}

/// Waits until every node runs `config` and the pool says so.
pub async fn wait_rollout(client: &Client, config: &str) {
    eventually(&format!("every node on {config} and the pool Updated"), || async {
        let nodes = nodes(client).await;
        let on_config = nodes.iter().all(|n| {
            annotation(n, CURRENT_CONFIG_ANNOTATION) == Some(config)
                && annotation(n, STATE_ANNOTATION) == Some(STATE_DONE)
        });
        let pool = pool(client).await;
        let updated = condition(&pool, "Updated");
        let target = pool.status.as_ref().and_then(|s| s.configuration.as_ref()?.name.clone());
        if on_config
            && updated.as_ref().is_some_and(|(status, _, _)| status == "True")
            && target.as_deref() == Some(config)
        {
            return Ok(());
        }
        let node_states: Vec<_> = nodes
            .iter()
            .map(|n| {
                (
                    n.name_any(),
                    annotation(n, CURRENT_CONFIG_ANNOTATION).map(str::to_string),
                    annotation(n, STATE_ANNOTATION).map(str::to_string),
                )
            })
            .collect();
        Err((node_states, updated, target))
    })
    .await;
}

/// Plays every node's daemon (`docs/behaviour.md#the-node-handshake`): on a new `desiredConfig` it
/// goes Working and asks for a drain, applies once the drain is acknowledged, asks for the
/// uncordon, then reports Done on the new config. Nodes listed in `failing` go Degraded with that
/// reason instead, until removed.
#[derive(Clone, Default)]
pub struct FakeDaemons {
    pub failing: Arc<Mutex<HashMap<String, String>>>,
    /// Time each step takes (an apply on a real node takes a while).
    pub step: Duration,
}

impl FakeDaemons {
    pub fn fail(&self, node: &str, reason: &str) {
        self.failing.lock().unwrap().insert(node.to_string(), reason.to_string());
    }

    pub fn recover_all(&self) {
        self.failing.lock().unwrap().clear();
    }

    /// Reacts to node events until the task is aborted; every half second it also retries
    /// degraded nodes, as a daemon retries a failed update.
    pub fn spawn(&self, client: Client) -> tokio::task::JoinHandle<()> {
        let daemons = self.clone();
        tokio::spawn(async move {
            let api = Api::<Node>::all(client);
            let mut events =
                watcher(api.clone(), watcher::Config::default()).default_backoff().applied_objects().boxed();
            let mut latest: BTreeMap<String, Node> = BTreeMap::new();
            let mut retry = tokio::time::interval(Duration::from_millis(500));
            loop {
                let nodes: Vec<Node> = tokio::select! {
                    event = events.next() => match event {
                        Some(Ok(node)) => {
                            latest.insert(node.name_any(), node.clone());
                            vec![node]
                        }
                        Some(Err(_)) => continue,
                        None => return,
                    },
                    _ = retry.tick() => latest
                        .values()
                        .filter(|n| annotation(n, STATE_ANNOTATION) == Some(STATE_DEGRADED))
                        .cloned()
                        .collect(),
                };
                for node in nodes {
                    if let Some(patch) = daemons.next_step(&node) {
                        tokio::time::sleep(daemons.step).await;
                        // Errors (API server restarting) are retried.
                        let _ = api.patch(&node.name_any(), &PatchParams::default(), &Patch::Merge(&patch)).await;
                    }
                }
            }
        })
    }

    /// The annotations the daemon writes next on `node`, if any.
    fn next_step(&self, node: &Node) -> Option<serde_json::Value> {
        let desired = annotation(node, DESIRED_CONFIG_ANNOTATION)?;
        let current = annotation(node, CURRENT_CONFIG_ANNOTATION);
        let state = annotation(node, STATE_ANNOTATION);
        let (drain, uncordon) = (format!("drain-{desired}"), format!("uncordon-{desired}"));
        let last_drain = annotation(node, LAST_APPLIED_DRAIN_ANNOTATION);
        let set = |pairs: &[(&str, &str)]| {
            let annotations: BTreeMap<&str, &str> = pairs.iter().copied().collect();
            Some(json!({ "metadata": { "annotations": annotations } }))
        };
        if current == Some(desired) && state == Some(STATE_DONE) {
            return None;
        }
        if let Some(reason) = self.failing.lock().unwrap().get(&node.name_any()) {
            return (state != Some(STATE_DEGRADED))
                .then(|| set(&[(STATE_ANNOTATION, STATE_DEGRADED), (REASON_ANNOTATION, reason)]))
                .flatten();
        }
        match state {
            Some(STATE_DONE | STATE_DEGRADED) => {
                set(&[(STATE_ANNOTATION, STATE_WORKING), (REASON_ANNOTATION, ""), (DESIRED_DRAIN_ANNOTATION, &drain)])
            }
            Some(STATE_WORKING) if last_drain == Some(drain.as_str()) => set(&[(DESIRED_DRAIN_ANNOTATION, &uncordon)]),
            Some(STATE_WORKING) if last_drain == Some(uncordon.as_str()) => {
                let done =
                    [(CURRENT_CONFIG_ANNOTATION, desired), (STATE_ANNOTATION, STATE_DONE), (REASON_ANNOTATION, "")];
                // A layered target: the node now runs the image too.
                let image = annotation(node, DESIRED_IMAGE_ANNOTATION).map(|image| (CURRENT_IMAGE_ANNOTATION, image));
                set(&done.into_iter().chain(image).collect::<Vec<_>>())
            }
            _ => None,
        }
    }
}

/// Watches the nodes and checks, at every event, that at most `limit` of them are unavailable
/// (`mco_rollout::node::unavailable_for_update`). Keeps the peak seen and every violation.
#[derive(Clone, Default)]
pub struct Unavailability {
    pub limit: Arc<AtomicUsize>,
    peak: Arc<AtomicUsize>,
    violations: Arc<Mutex<Vec<String>>>,
}

impl Unavailability {
    pub fn spawn(&self, client: Client) -> tokio::task::JoinHandle<()> {
        let this = self.clone();
        tokio::spawn(async move {
            let mut nodes: BTreeMap<String, Node> = BTreeMap::new();
            // A (re)list is judged once complete, not half-way through.
            let mut listing: Option<BTreeMap<String, Node>> = None;
            let mut events = watcher(Api::<Node>::all(client), watcher::Config::default()).default_backoff().boxed();
            while let Some(event) = events.next().await {
                match event {
                    Ok(watcher::Event::Init) => listing = Some(BTreeMap::new()),
                    Ok(watcher::Event::InitApply(node)) => {
                        listing.get_or_insert_default().insert(node.name_any(), node);
                        continue;
                    }
                    Ok(watcher::Event::InitDone) => nodes = listing.take().unwrap_or_default(),
                    Ok(watcher::Event::Apply(node)) => {
                        nodes.insert(node.name_any(), node);
                    }
                    Ok(watcher::Event::Delete(node)) => {
                        nodes.remove(&node.name_any());
                    }
                    Err(_) => continue,
                }
                let unavailable: Vec<&str> = nodes
                    .values()
                    .filter(|n| unavailable_for_update(n))
                    .map(|n| n.metadata.name.as_deref().unwrap())
                    .collect();
                let limit = this.limit.load(Ordering::SeqCst);
                this.peak.fetch_max(unavailable.len(), Ordering::SeqCst);
                if unavailable.len() > limit {
                    this.violations.lock().unwrap().push(format!("{unavailable:?} unavailable, limit {limit}"));
                }
            }
        })
    }

    pub fn set_limit(&self, limit: usize) {
        self.limit.store(limit, Ordering::SeqCst);
    }

    /// The peak since the last call; panics on any violation.
    pub fn take_peak(&self) -> usize {
        let violations = self.violations.lock().unwrap();
        assert!(violations.is_empty(), "maxUnavailable exceeded: {violations:#?}");
        self.peak.swap(0, Ordering::SeqCst)
    }
}
