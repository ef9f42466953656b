//! The node and drain controllers against a real API server (mco-testenv), with the tests playing
//! the node daemons and the kubelet: rollouts complete and never take more than maxUnavailable
//! nodes at once (checked at every node event), paused pools wait, degraded nodes degrade the
//! pool, and restarts of the controller and of the API server mid-rollout change nothing of that.

use crate::common;

use std::time::Duration;

use common::{
    FakeDaemons, Unavailability, condition, create_nodes, create_pool, eventually, nodes, patch_pool, pool, rendered,
    wait_rollout,
};
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::events::v1::Event;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams, PostParams};
use kube::{Api, Client, ResourceExt as _};
use mco_api::constants::{
    CURRENT_CONFIG_ANNOTATION, CURRENT_IMAGE_ANNOTATION, CURRENT_MACHINE_OS_BUILD_ANNOTATION,
    CUSTOM_POOL_LABELS_APPLIED_ANNOTATION, DESIRED_CONFIG_ANNOTATION, DESIRED_IMAGE_ANNOTATION,
    FIRST_PIVOT_CONFIG_ANNOTATION, PRESTAGE_ANNOTATION, PRESTAGE_ERROR_ANNOTATION, PRESTAGED_ANNOTATION,
    STATE_ANNOTATION, STATE_DONE, UPDATE_IN_PROGRESS_TAINT_KEY,
};
use mco_api::{
    ControllerConfig, MachineConfig, MachineConfigNode, MachineConfigPool, MachineConfiguration, MachineOSBuild,
    MachineOSConfig,
};
use mco_controller::drain::controller as drain;
use mco_controller::node::controller as node;
use mco_metrics::Registry;
use mco_metrics::controller::ControllerMetrics;
use mco_rollout::drain::RetryPolicy;
use mco_rollout::node::annotation;
use mco_testenv::TestEnv;
use mco_testenv::satisfying;
use serde_json::json;

/// Both controllers, with test timings; aborted with the returned handles.
async fn start_controllers(env: &TestEnv) -> [tokio::task::JoinHandle<()>; 2] {
    start_controllers_with(env, ControllerMetrics::default()).await
}

/// [`start_controllers`] reporting to `metrics`.
async fn start_controllers_with(env: &TestEnv, metrics: ControllerMetrics) -> [tokio::task::JoinHandle<()>; 2] {
    let config = mco_controller::config(Some(env.kubeconfig())).await.unwrap();
    let node_options =
        node::Options { retry_delay: Duration::from_millis(500), metrics: metrics.clone(), ..Default::default() };
    let drain_options = drain::Options {
        retry: RetryPolicy { delay: Duration::from_millis(500), ..Default::default() },
        attempt_timeout: Duration::from_secs(10),
        eviction_retry: Duration::from_millis(200),
        deletion_poll: Duration::from_millis(100),
        own_pod: None,
        metrics,
    };
    [
        tokio::spawn(node::run(env.client(), node_options)),
        tokio::spawn(async move { drain::run(config, drain_options).await.unwrap() }),
    ]
}

fn stop(handles: &[tokio::task::JoinHandle<()>]) {
    handles.iter().for_each(|h| h.abort());
}

async fn targeted(client: &Client, config: &str) -> usize {
    nodes(client).await.iter().filter(|n| annotation(n, DESIRED_CONFIG_ANNOTATION) == Some(config)).count()
}

async fn events(client: &Client, reason: &str) -> Vec<Event> {
    let list = Api::<Event>::namespaced(client.clone(), "default").list(&ListParams::default()).await.unwrap();
    list.items.into_iter().filter(|e| e.reason.as_deref() == Some(reason)).collect()
}

/// An API server with the `worker` pool on `rendered-worker-0` and `nodes` nodes running it.
async fn worker_pool(nodes: usize, max_unavailable: serde_json::Value) -> (TestEnv, Client) {
    common::init_logs();
    let env = TestEnv::start().await.unwrap();
    let client = env.client();
    create_pool(&client, &rendered(0), max_unavailable).await;
    create_nodes(&client, nodes, &rendered(0)).await;
    (env, client)
}

#[tokio::test]
async fn rollouts_never_exceed_max_unavailable() {
    let (env, client) = worker_pool(5, json!(1)).await;
    let monitor = Unavailability::default();
    monitor.set_limit(1);
    let watch = monitor.spawn(client.clone());
    let daemons = FakeDaemons { step: Duration::from_millis(50), ..Default::default() };
    let daemon_task = daemons.spawn(client.clone());
    let controllers = start_controllers(&env).await;

    // The pool's status appears before anything moves.
    eventually("the pool's status: 5 machines, 5 updated", || async {
        satisfying(pool(&client).await.status, |status| {
            status.as_ref().is_some_and(|s| s.machine_count == Some(5) && s.updated_machine_count == Some(5))
        })
    })
    .await;
    let (updated, _, message) = condition(&pool(&client).await, "Updated").unwrap();
    assert_eq!(
        (updated.as_str(), message.as_str()),
        ("True", "All nodes are updated with MachineConfig rendered-worker-0")
    );

    // 5 nodes: 1, 2, and 50% rounded down = 2 at a time. Each time the slots are all used.
    for (round, max_unavailable, limit) in [(1, json!(1), 1), (2, json!(2), 2), (3, json!("50%"), 2)] {
        monitor.set_limit(limit);
        patch_pool(&client, json!({"maxUnavailable": max_unavailable, "configuration": {"name": rendered(round)}}))
            .await;
        wait_rollout(&client, &rendered(round)).await;
        assert_eq!(monitor.take_peak(), limit, "round {round}: maxUnavailable {max_unavailable}");
        // The taints are removed by a background writer, so after the pool says Updated.
        eventually("no UpdateInProgress taint and no cordoned node once updated", || async {
            let nodes = nodes(&client).await;
            let held: Vec<_> = nodes
                .iter()
                .filter(|n| has_update_taint(n) || n.spec.as_ref().unwrap().unschedulable.unwrap_or(false))
                .map(|n| (n.name_any(), n.spec.clone()))
                .collect();
            satisfying(held, Vec::is_empty)
        })
        .await;
    }
    // The controller publishes its Events after the writes the rollout waited for.
    let notes = eventually("SetDesiredConfig Events for rendered-worker-1 and -2", || async {
        let notes: Vec<_> = events(&client, "SetDesiredConfig").await.into_iter().filter_map(|e| e.note).collect();
        let round_1 = notes
            .iter()
            .any(|n| n.starts_with("Targeted node worker-") && n.ends_with("to MachineConfig: rendered-worker-1"));
        let round_2 = notes.iter().any(|n| n == "Set target for 2 nodes to MachineConfig: rendered-worker-2");
        if round_1 && round_2 { Ok(notes) } else { Err(notes) }
    })
    .await;
    // Zone a before zone b, so the first node of round 1 is in zone a.
    let first = notes.iter().find(|n| n.ends_with("rendered-worker-1")).unwrap();
    let index: usize = first["Targeted node worker-".len()..].split(' ').next().unwrap().parse().unwrap();
    assert_eq!(index % 2, 0, "{first}: zone a first");

    stop(&controllers);
    daemon_task.abort();
    watch.abort();
}

fn has_update_taint(node: &Node) -> bool {
    node.spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .is_some_and(|t| t.iter().any(|t| t.key == UPDATE_IN_PROGRESS_TAINT_KEY))
}

/// The nodes targeted at `config`, and how many of the others carry the UpdateInProgress taint;
/// panics if a targeted node is tainted.
async fn targeted_and_tainted(client: &Client, config: &str) -> (Vec<String>, usize) {
    let nodes = nodes(client).await;
    let (targeted, waiting): (Vec<&Node>, Vec<&Node>) =
        nodes.iter().partition(|n| annotation(n, DESIRED_CONFIG_ANNOTATION) == Some(config));
    assert!(targeted.iter().all(|n| !has_update_taint(n)), "a targeted node is tainted");
    (targeted.iter().map(|n| n.name_any()).collect(), waiting.iter().filter(|n| has_update_taint(n)).count())
}

#[tokio::test]
async fn waiting_nodes_are_tainted_and_targeted_nodes_are_not() {
    let (env, client) = worker_pool(20, json!(1)).await;
    let controllers = start_controllers(&env).await;
    eventually("the pool's status: 20 machines", || async {
        satisfying(pool(&client).await.status, |s| s.as_ref().is_some_and(|s| s.machine_count == Some(20)))
    })
    .await;

    // The daemons are not running: the targeted node stays Working-to-be, holding the only slot.
    patch_pool(&client, json!({"configuration": {"name": rendered(1)}})).await;
    let (first, _) = eventually("one node targeted, the 19 others tainted", || async {
        let (targeted, tainted) = targeted_and_tainted(&client, &rendered(1)).await;
        satisfying((targeted, tainted), |(targeted, tainted)| targeted.len() == 1 && *tainted == 19)
    })
    .await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(targeted_and_tainted(&client, &rendered(1)).await, (first.clone(), 19), "nothing more moves");

    // The node reports Done: the next one is targeted, and untainted in the same write.
    let done =
        json!({"metadata": {"annotations": {CURRENT_CONFIG_ANNOTATION: rendered(1), STATE_ANNOTATION: STATE_DONE}}});
    Api::<Node>::all(client.clone()).patch(&first[0], &PatchParams::default(), &Patch::Merge(&done)).await.unwrap();
    eventually("a second node targeted, 18 tainted", || async {
        let (targeted, tainted) = targeted_and_tainted(&client, &rendered(1)).await;
        satisfying((targeted, tainted), |(targeted, tainted)| targeted.len() == 2 && *tainted == 18)
    })
    .await;

    stop(&controllers);
}

/// The metrics' lines starting with `prefix`.
fn series(registry: &Registry, prefix: &str) -> Vec<String> {
    mco_metrics::render(registry).lines().filter(|l| l.starts_with(prefix)).map(str::to_string).collect()
}

/// The worker pool's `mco_pool_nodes`: updated, updating, degraded, waiting (`None`: no series).
fn pool_nodes(registry: &Registry) -> [Option<i64>; 4] {
    let lines = series(registry, "mco_pool_nodes{pool=\"worker\",");
    ["updated", "updating", "degraded", "waiting"].map(|state| {
        let prefix = format!("mco_pool_nodes{{pool=\"worker\",state=\"{state}\"}} ");
        lines.iter().find_map(|l| l.strip_prefix(&prefix)).map(|n| n.parse().unwrap())
    })
}

/// Waits until the worker pool's `mco_pool_nodes` are `want` (updated, updating, degraded,
/// waiting).
async fn wait_pool_nodes(registry: &Registry, want: [i64; 4]) {
    let what = format!("mco_pool_nodes updated, updating, degraded, waiting = {want:?}");
    eventually(&what, || async { satisfying(pool_nodes(registry), |seen| *seen == want.map(Some)) }).await;
}

/// Waits until each node has one `mco_state` series, for the worker pool, in one of `states`.
async fn wait_node_states(registry: &Registry, nodes: &[&str], states: &[&str]) -> Vec<String> {
    let what = format!("mco_state of {nodes:?} in {states:?}");
    eventually(&what, || async {
        let lines = series(registry, "mco_state{");
        let in_state = |node: &str| {
            let of_node: Vec<&String> = lines.iter().filter(|l| l.contains(&format!("node=\"{node}\""))).collect();
            of_node.len() == 1 && states.iter().any(|s| of_node[0].contains(&format!("pool=\"worker\",state=\"{s}\"")))
        };
        satisfying(lines.clone(), |_| lines.len() == nodes.len() && nodes.iter().all(|n| in_state(n)))
    })
    .await
}

#[tokio::test]
async fn paused_pools_wait_and_degraded_nodes_degrade_the_pool() {
    let (env, client) = worker_pool(3, json!(1)).await;
    let daemons = FakeDaemons::default();
    let daemon_task = daemons.spawn(client.clone());
    let mut registry = Registry::default();
    let controllers = start_controllers_with(&env, ControllerMetrics::register(&mut registry)).await;
    let all = ["worker-0", "worker-1", "worker-2"];
    eventually("the pool's status: 3 machines", || async {
        satisfying(pool(&client).await.status, |s| s.as_ref().is_some_and(|s| s.machine_count == Some(3)))
    })
    .await;

    // Paused: the status says so, and no node is targeted.
    patch_pool(&client, json!({"paused": true, "configuration": {"name": rendered(1)}})).await;
    let updating = eventually("Updating=False (paused)", || async {
        let updating = condition(&pool(&client).await, "Updating");
        match updating {
            Some((status, reason, message)) if status == "False" && !message.is_empty() => {
                Ok((status, reason, message))
            }
            other => Err(other),
        }
    })
    .await;
    assert_eq!(updating.2, "Pool is paused; will not update to MachineConfig rendered-worker-1");
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(targeted(&client, &rendered(1)).await, 0, "a paused pool does not move");
    wait_pool_nodes(&registry, [0, 0, 0, 3]).await;
    patch_pool(&client, json!({"paused": false})).await;
    // At most 1 (maxUnavailable) node updating at any reading. (A reading can catch the four
    // gauges half set, so their sum is not checked; which node counts where is the pure
    // `pool_nodes`'s table test.)
    let watch_counts = async {
        let mut seen = Vec::new();
        loop {
            let counts = pool_nodes(&registry);
            if seen.last() != Some(&counts) {
                seen.push(counts);
            }
            if counts == [Some(3), Some(0), Some(0), Some(0)] {
                return seen;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    };
    let watch_counts = tokio::time::timeout(Duration::from_secs(120), watch_counts);
    let target = rendered(1);
    let ((), seen) = tokio::join!(wait_rollout(&client, &target), watch_counts);
    let seen = seen.expect("mco_pool_nodes to reach 3 updated");
    for counts in &seen {
        assert!(counts[1].unwrap_or_default() <= 1, "{seen:?}");
    }
    wait_node_states(&registry, &all, &["Updated"]).await;

    // Every node fails rendered-worker-2: the first one holds the only slot, the pool degrades.
    for i in 0..3 {
        daemons.fail(&format!("worker-{i}"), "failed to write /etc/x: no space left on device");
    }
    patch_pool(&client, json!({"configuration": {"name": rendered(2)}})).await;
    let degraded = eventually("NodeDegraded=True", || async {
        let degraded = condition(&pool(&client).await, "NodeDegraded");
        match degraded {
            Some((status, reason, message)) if status == "True" => Ok((status, reason, message)),
            other => Err(other),
        }
    })
    .await;
    assert_eq!(degraded.1, "1 nodes are reporting degraded status on sync");
    assert!(
        degraded.2.starts_with("Node worker-")
            && degraded.2.ends_with(" is reporting: \"failed to write /etc/x: no space left on device\""),
        "{}",
        degraded.2
    );
    let pool_now = pool(&client).await;
    assert_eq!(condition(&pool_now, "Degraded").unwrap().0, "True");
    assert_eq!(pool_now.status.as_ref().unwrap().degraded_machine_count, Some(1));
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(targeted(&client, &rendered(2)).await, 1, "a node failing this config holds the slot");
    wait_pool_nodes(&registry, [0, 0, 1, 2]).await;
    // Conditions are stamped in whole seconds: Updating went true in the same second as the
    // degradation, and on a tie upstream reports the condition listed first.
    wait_node_states(&registry, &all, &["Updating", "NodeDegraded", "Degraded"]).await;

    // The node recovers: the rollout goes on and the pool is no longer degraded.
    daemons.recover_all();
    wait_rollout(&client, &rendered(2)).await;
    let pool_now = pool(&client).await;
    assert_eq!(condition(&pool_now, "NodeDegraded").unwrap().0, "False");
    assert_eq!(condition(&pool_now, "Degraded").unwrap().0, "False");
    wait_pool_nodes(&registry, [3, 0, 0, 0]).await;
    wait_node_states(&registry, &all, &["Updated"]).await;
    assert_eq!(series(&registry, "mcc_pool_alert{node=\"worker-0\"}"), ["mcc_pool_alert{node=\"worker-0\"} 0"]);

    // A deleted node's series go, and so do a deleted pool's.
    Api::<Node>::all(client.clone()).delete("worker-2", &Default::default()).await.unwrap();
    wait_pool_nodes(&registry, [2, 0, 0, 0]).await;
    wait_node_states(&registry, &all[..2], &["Updated"]).await;
    assert_eq!(series(&registry, "mcc_pool_alert{node=\"worker-2\"}"), Vec::<String>::new());
    Api::<MachineConfigPool>::all(client.clone()).delete("worker", &Default::default()).await.unwrap();
    eventually("no series of the deleted pool or of its nodes", || async {
        let left: Vec<String> = mco_metrics::render(&registry)
            .lines()
            .filter(|l| ["pool=\"worker\"", "object=\"worker\"", "node=\"worker-"].iter().any(|s| l.contains(s)))
            .map(str::to_string)
            .collect();
        satisfying(left, Vec::is_empty)
    })
    .await;

    stop(&controllers);
    daemon_task.abort();
}

#[tokio::test]
async fn rollouts_survive_controller_and_apiserver_restarts() {
    let (mut env, client) = worker_pool(5, json!(2)).await;
    let monitor = Unavailability::default();
    monitor.set_limit(2);
    let watch = monitor.spawn(client.clone());
    // Slow daemons, so that the restarts land mid-rollout.
    let daemons = FakeDaemons { step: Duration::from_millis(300), ..Default::default() };
    let daemon_task = daemons.spawn(client.clone());
    let controllers = start_controllers(&env).await;
    eventually("the pool's status: 5 machines", || async {
        satisfying(pool(&client).await.status, |s| s.as_ref().is_some_and(|s| s.machine_count == Some(5)))
    })
    .await;

    patch_pool(&client, json!({"configuration": {"name": rendered(1)}})).await;
    eventually("two nodes targeted", || async { satisfying(targeted(&client, &rendered(1)).await, |n| *n >= 2) }).await;
    stop(&controllers);
    let controllers = start_controllers(&env).await;
    eventually("a third node targeted", || async { satisfying(targeted(&client, &rendered(1)).await, |n| *n >= 3) })
        .await;
    env.restart_apiserver().await.unwrap();
    wait_rollout(&client, &rendered(1)).await;
    assert_eq!(monitor.take_peak(), 2);

    stop(&controllers);
    daemon_task.abort();
    watch.abort();
}

/// A build of `rendered` for the `worker` MachineOSConfig.
fn os_build(name: &str, rendered: &str) -> MachineOSBuild {
    serde_json::from_value(json!({
        "apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineOSBuild",
        "metadata": {"name": name},
        "spec": {"machineConfig": {"name": rendered}, "machineOSConfig": {"name": "worker"},
                 "renderedImagePushSpec": format!("registry.local/os:{name}")},
    }))
    .unwrap()
}

fn succeeded(image: &str) -> serde_json::Value {
    json!({"status": {"digestedImagePushSpec": image, "conditions": [{
        "type": "Succeeded", "status": "True", "reason": "Succeeded", "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z",
    }]}})
}

#[tokio::test]
async fn layered_pools_move_to_the_built_image_once_it_is_built() {
    let (env, client) = worker_pool(3, json!(1)).await;
    let image = format!("registry.local/os@sha256:{}", "1".repeat(64));
    let builds = Api::<MachineOSBuild>::all(client.clone());
    let configs = Api::<MachineOSConfig>::all(client.clone());
    builds.create(&PostParams::default(), &os_build("worker-0", &rendered(0))).await.unwrap();
    builds.create(&PostParams::default(), &os_build("worker-1", &rendered(1))).await.unwrap();
    // The MachineOSConfig still names the build of the pool's previous config.
    let config: MachineOSConfig = serde_json::from_value(json!({
        "apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineOSConfig",
        "metadata": {"name": "worker", "annotations": {CURRENT_MACHINE_OS_BUILD_ANNOTATION: "worker-0"}},
        "spec": {"machineConfigPool": {"name": "worker"}, "imageBuilder": {"imageBuilderType": "Job"},
                 "renderedImagePushSecret": {"name": "push"}, "renderedImagePushSpec": "registry.local/os:latest"},
    }))
    .unwrap();
    configs.create(&PostParams::default(), &config).await.unwrap();
    let daemons = FakeDaemons { step: Duration::from_millis(50), ..Default::default() };
    let daemon_task = daemons.spawn(client.clone());
    let controllers = start_controllers(&env).await;

    // The build of rendered-worker-1 has not finished: nothing moves, the stale annotation goes.
    patch_pool(&client, json!({"configuration": {"name": rendered(1)}})).await;
    eventually("the stale build annotation removed", || async {
        let config = configs.get("worker").await.unwrap();
        satisfying(config.annotations().get(CURRENT_MACHINE_OS_BUILD_ANNOTATION).cloned(), Option::is_none)
    })
    .await;
    // The build runs: the pool says so.
    let params = PatchParams::default();
    let running = json!({"status": {"conditions": [{
        "type": "Building", "status": "True", "reason": "Building", "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z",
    }]}});
    builds.patch_status("worker-1", &params, &Patch::Merge(&running)).await.unwrap();
    eventually("the pool waiting for the build", || async {
        satisfying(condition(&pool(&client).await, "Updating"), |updating| {
            updating.as_ref().is_some_and(|(status, _, message)| {
                status == "True" && message == "Pool is waiting for OS image build to complete (mosb: worker-1)"
            })
        })
    })
    .await;
    assert_eq!(targeted(&client, &rendered(1)).await, 0, "no node moves before the image is built");
    assert_eq!(condition(&pool(&client).await, "Updated").unwrap().0, "False");

    // Built and published: every node moves to the config and the image.
    builds.patch_status("worker-1", &params, &Patch::Merge(&succeeded(&image))).await.unwrap();
    let published = json!({"status": {"currentImagePullSpec": image}});
    configs.patch_status("worker", &params, &Patch::Merge(&published)).await.unwrap();
    eventually("every node on the image and the pool Updated", || async {
        let not_on_image: Vec<_> = nodes(&client)
            .await
            .into_iter()
            .filter(|n| {
                annotation(n, CURRENT_CONFIG_ANNOTATION) != Some(rendered(1).as_str())
                    || annotation(n, DESIRED_IMAGE_ANNOTATION) != Some(image.as_str())
                    || annotation(n, CURRENT_IMAGE_ANNOTATION) != Some(image.as_str())
            })
            .map(|n| (n.name_any(), n.metadata.annotations))
            .collect();
        let updated = condition(&pool(&client).await, "Updated");
        satisfying((not_on_image, updated), |(not_on_image, updated)| {
            not_on_image.is_empty() && updated.as_ref().is_some_and(|(status, _, _)| status == "True")
        })
    })
    .await;
    let (_, _, message) = condition(&pool(&client).await, "Updated").unwrap();
    assert_eq!(message, format!("All nodes are updated with MachineConfig {} / Image {image}", rendered(1)));
    eventually("a SetDesiredConfigAndOSImage Event naming the image", || async {
        let notes: Vec<_> =
            events(&client, "SetDesiredConfigAndOSImage").await.into_iter().filter_map(|e| e.note).collect();
        satisfying(notes, |notes| {
            notes.iter().any(|n| {
                n.starts_with("Targeted node worker-")
                    && n.ends_with(&format!(" to MachineConfig: {} / Image: {image}", rendered(1)))
            })
        })
    })
    .await;

    stop(&controllers);
    daemon_task.abort();
}

async fn set_masters_schedulable(client: &Client, schedulable: bool) {
    let resource = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("config.openshift.io", "v1", "Scheduler"),
        "schedulers",
    );
    let api = Api::<DynamicObject>::all_with(client.clone(), &resource);
    let scheduler = json!({"apiVersion": "config.openshift.io/v1", "kind": "Scheduler", "metadata": {"name": "cluster"},
                           "spec": {"mastersSchedulable": schedulable}});
    api.patch("cluster", &PatchParams::apply("test").force(), &Patch::Apply(&scheduler)).await.unwrap();
}

/// (worker role label, control-plane role label, master NoSchedule taint) of node `name`.
async fn master_roles(client: &Client, name: &str) -> (bool, bool, bool) {
    let node = Api::<Node>::all(client.clone()).get(name).await.unwrap();
    let labels = node.labels();
    let tainted = node
        .spec
        .as_ref()
        .and_then(|s| s.taints.as_deref())
        .unwrap_or_default()
        .iter()
        .any(|t| t.key == "node-role.kubernetes.io/master" && t.effect == "NoSchedule");
    (
        labels.contains_key("node-role.kubernetes.io/worker"),
        labels.contains_key("node-role.kubernetes.io/control-plane"),
        tainted,
    )
}

#[tokio::test]
async fn master_nodes_follow_the_scheduler() {
    common::init_logs();
    let env = TestEnv::start().await.unwrap();
    let client = env.client();
    mco_testenv::install_crds(&client, &[mco_testenv::config_openshift_crd("Scheduler", "schedulers")]).await.unwrap();
    let master_pool: MachineConfigPool = serde_json::from_value(json!({
        "metadata": {"name": "master"},
        "spec": {"nodeSelector": {"matchLabels": {"node-role.kubernetes.io/master": ""}}, "configuration": {"name": "rendered-master-0"}},
    }))
    .unwrap();
    Api::<MachineConfigPool>::all(client.clone()).create(&PostParams::default(), &master_pool).await.unwrap();
    let master: Node = serde_json::from_value(json!({
        "metadata": {"name": "master-0", "labels": {"node-role.kubernetes.io/master": ""},
                     "annotations": {CURRENT_CONFIG_ANNOTATION: "rendered-master-0", DESIRED_CONFIG_ANNOTATION: "rendered-master-0",
                                     STATE_ANNOTATION: STATE_DONE}},
    }))
    .unwrap();
    Api::<Node>::all(client.clone()).create(&PostParams::default(), &master).await.unwrap();
    let controllers = start_controllers(&env).await;

    // No Scheduler yet: only the control-plane role.
    eventually("the control-plane label", || async {
        satisfying(master_roles(&client, "master-0").await, |roles| *roles == (false, true, false))
    })
    .await;
    set_masters_schedulable(&client, true).await;
    eventually("a schedulable master", || async {
        satisfying(master_roles(&client, "master-0").await, |roles| *roles == (true, true, false))
    })
    .await;
    set_masters_schedulable(&client, false).await;
    eventually("an unschedulable master", || async {
        satisfying(master_roles(&client, "master-0").await, |roles| *roles == (false, true, true))
    })
    .await;

    stop(&controllers);
}

#[tokio::test]
async fn a_node_booted_into_a_custom_pool_gets_its_labels_and_joins_it() {
    let (env, client) = worker_pool(3, json!(2)).await;
    let infra: MachineConfigPool = serde_json::from_value(json!({
        "metadata": {"name": "infra"},
        "spec": {"nodeSelector": {"matchLabels": {"node-role.kubernetes.io/infra": ""}}, "configuration": {"name": "rendered-infra-1"}},
    }))
    .unwrap();
    let infra = Api::<MachineConfigPool>::all(client.clone()).create(&PostParams::default(), &infra).await.unwrap();
    // The rendered config the node booted with belongs to the infra pool, as the render controller
    // records it.
    let first: MachineConfig = serde_json::from_value(json!({
        "metadata": {"name": "rendered-infra-1", "ownerReferences": [{
            "apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineConfigPool",
            "name": "infra", "uid": infra.uid().unwrap(), "controller": true,
        }]},
        "spec": {},
    }))
    .unwrap();
    Api::<MachineConfig>::all(client.clone()).create(&PostParams::default(), &first).await.unwrap();
    let booted = json!({"metadata": {"annotations": {FIRST_PIVOT_CONFIG_ANNOTATION: "rendered-infra-1"}}});
    Api::<Node>::all(client.clone()).patch("worker-1", &PatchParams::default(), &Patch::Merge(&booted)).await.unwrap();
    let controllers = start_controllers(&env).await;

    patch_pool(&client, json!({"configuration": {"name": rendered(1)}})).await;
    let moved = eventually("worker-1 labelled for infra and targeted by it", || async {
        let node = Api::<Node>::all(client.clone()).get("worker-1").await.unwrap();
        let labelled = node.labels().contains_key("node-role.kubernetes.io/infra")
            && node.annotations().contains_key(CUSTOM_POOL_LABELS_APPLIED_ANNOTATION);
        let targeted = annotation(&node, DESIRED_CONFIG_ANNOTATION) == Some("rendered-infra-1");
        if labelled && targeted { Ok(node) } else { Err(node.metadata) }
    })
    .await;
    assert_eq!(annotation(&moved, CURRENT_CONFIG_ANNOTATION), Some(rendered(0).as_str()));
    eventually("both other workers targeted: worker-1 did not take a worker slot", || async {
        satisfying(targeted(&client, &rendered(1)).await, |n| *n == 2)
    })
    .await;

    stop(&controllers);
}

/// `node`'s MachineConfigNode as `(pool, desired config, owner's kind/name/uid)`, once it exists.
async fn machine_config_node(client: &Client, node: &str) -> Option<(String, String, Vec<String>)> {
    let mcn = Api::<MachineConfigNode>::all(client.clone()).get_opt(node).await.unwrap()?;
    let owners = mcn.owner_references().iter().map(|o| format!("{}/{}/{}", o.kind, o.name, o.uid)).collect();
    Some((mcn.spec.pool.name, mcn.spec.config_version.desired, owners))
}

#[tokio::test]
async fn every_node_of_a_pool_has_its_machine_config_node() {
    let (env, client) = worker_pool(2, json!(1)).await;
    // Left over from a Node deleted while no controller ran.
    let spec = mco_mcn::progress::spec_for("gone", "worker", &Default::default());
    let machine_config_nodes = Api::<MachineConfigNode>::all(client.clone());
    machine_config_nodes.create(&PostParams::default(), &MachineConfigNode::new("gone", spec)).await.unwrap();
    let daemon_task = FakeDaemons::default().spawn(client.clone());
    let controllers = start_controllers(&env).await;

    let uid = Api::<Node>::all(client.clone()).get("worker-1").await.unwrap().uid().unwrap();
    let want = |config: &str| Some(("worker".to_string(), config.to_string(), vec![format!("Node/worker-1/{uid}")]));
    eventually("worker-1's MachineConfigNode, owned by its Node", || async {
        satisfying(machine_config_node(&client, "worker-1").await, |seen| *seen == want(&rendered(0)))
    })
    .await;
    eventually("the leftover MachineConfigNode deleted", || async {
        satisfying(machine_config_node(&client, "gone").await, Option::is_none)
    })
    .await;

    // The desired config follows the node's.
    patch_pool(&client, json!({"configuration": {"name": rendered(1)}})).await;
    wait_rollout(&client, &rendered(1)).await;
    eventually("worker-1's MachineConfigNode desiring rendered-worker-1", || async {
        satisfying(machine_config_node(&client, "worker-1").await, |seen| *seen == want(&rendered(1)))
    })
    .await;

    // A deleted Node's goes too (there is no garbage collector here).
    Api::<Node>::all(client.clone()).delete("worker-1", &Default::default()).await.unwrap();
    eventually("worker-1's MachineConfigNode deleted with its Node", || async {
        satisfying(machine_config_node(&client, "worker-1").await, Option::is_none)
    })
    .await;
    assert!(machine_config_node(&client, "worker-0").await.is_some());

    stop(&controllers);
    daemon_task.abort();
}

#[tokio::test]
async fn boot_image_skew_enforcement_none_is_reported_where_scaling_needs_it() {
    common::init_logs();
    let env = TestEnv::start().await.unwrap();
    let client = env.client();
    // The Infrastructure, as the ControllerConfig copies it: a highly available cluster on no
    // particular platform (neither single-node nor bare metal, where None is expected).
    let examples = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/cluster");
    let controller_config: ControllerConfig =
        serde_yaml::from_str(&std::fs::read_to_string(examples.join("controllerconfig.yaml")).unwrap()).unwrap();
    Api::<ControllerConfig>::all(client.clone()).create(&PostParams::default(), &controller_config).await.unwrap();
    let mut registry = Registry::default();
    let controllers = start_controllers_with(&env, ControllerMetrics::register(&mut registry)).await;
    let skew_none = |value: &'static str| {
        let registry = &registry;
        move || async move {
            let seen = series(registry, "mcc_boot_image_skew_enforcement_none ");
            satisfying(seen, |seen| *seen == [format!("mcc_boot_image_skew_enforcement_none {value}")])
        }
    };

    let configurations = Api::<MachineConfiguration>::all(client.clone());
    let configuration = json!({
        "apiVersion": "operator.openshift.io/v1",
        "kind": "MachineConfiguration",
        "metadata": {"name": "cluster"},
        "spec": {"managementState": "Managed"},
    });
    configurations.create(&PostParams::default(), &serde_json::from_value(configuration).unwrap()).await.unwrap();
    let none = json!({"status": {"bootImageSkewEnforcementStatus": {"mode": "None"}}});
    configurations.patch_status("cluster", &PatchParams::default(), &Patch::Merge(&none)).await.unwrap();
    eventually("mcc_boot_image_skew_enforcement_none 1 with mode None", skew_none("1")).await;
    configurations.delete("cluster", &Default::default()).await.unwrap();
    eventually("mcc_boot_image_skew_enforcement_none 0 without a MachineConfiguration", skew_none("0")).await;

    stop(&controllers);
}

/// Sets mco's rollout policy annotations on the worker pool (`None` removes one).
async fn set_policy(client: &Client, annotations: serde_json::Value) {
    let patch = json!({"metadata": {"annotations": annotations}});
    Api::<MachineConfigPool>::all(client.clone())
        .patch("worker", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
}

/// Waits for the pool's `RolloutHeld` condition with `status` and `reason`; returns its message.
async fn wait_held(client: &Client, status: &str, reason: &str) -> String {
    eventually(&format!("RolloutHeld={status} ({reason})"), || async {
        let held = condition(&pool(client).await, "RolloutHeld");
        match held {
            Some((s, r, message)) if s == status && r == reason => Ok(message),
            other => Err(other),
        }
    })
    .await
}

#[tokio::test]
async fn rollout_policies_hold_canaries_soak_halt_and_wait_for_windows() {
    let (env, client) = worker_pool(3, json!(3)).await;
    let daemons = FakeDaemons { step: Duration::from_millis(200), ..Default::default() };
    let daemon_task = daemons.spawn(client.clone());
    let controllers = start_controllers(&env).await;

    // One canary (the first node by name), soaking 8 s, before the other two (maxUnavailable 3).
    set_policy(&client, json!({"mco.dev/canary": "1", "mco.dev/canary-soak": "8s"})).await;
    patch_pool(&client, json!({"configuration": {"name": rendered(1)}})).await;
    let message = wait_held(&client, "True", "CanarySoak").await;
    assert!(message.starts_with("canaries are on rendered-worker-1: soaking "), "{message}");
    let all = nodes(&client).await;
    let on_new: Vec<String> = all
        .iter()
        .filter(|n| annotation(n, DESIRED_CONFIG_ANNOTATION) == Some(&rendered(1)))
        .map(|n| n.name_any())
        .collect();
    assert_eq!(on_new, ["worker-0"], "only the canary during the soak");
    let recorded = pool(&client).await.annotations().get("mco.dev/canaries-done").cloned().unwrap_or_default();
    assert!(recorded.starts_with("rendered-worker-1 "), "{recorded}");
    assert_eq!(events(&client, "CanariesUpdated").await.len(), 1);
    wait_rollout(&client, &rendered(1)).await;
    wait_held(&client, "False", "").await;

    // Two failed nodes halt the pool: paused, with the reason; resumed by hand it is not halted
    // again for the same config, and finishes once the nodes recover.
    set_policy(
        &client,
        json!({"mco.dev/canary": null, "mco.dev/canary-soak": null, "mco.dev/halt-after-failures": "2"}),
    )
    .await;
    for i in 0..3 {
        daemons.fail(&format!("worker-{i}"), "failed to write /etc/x: no space left on device");
    }
    patch_pool(&client, json!({"configuration": {"name": rendered(2)}})).await;
    let message = wait_held(&client, "True", "Halted").await;
    assert!(message.starts_with("halted: worker-"), "{message}");
    assert!(
        message.ends_with(
            " failed updating to rendered-worker-2; fix or revert the change, then resume the pool (spec.paused: false)"
        ),
        "{message}"
    );
    let halted = pool(&client).await;
    assert_eq!(halted.spec.paused, Some(true));
    assert_eq!(halted.annotations().get("mco.dev/halted-on").map(String::as_str), Some(rendered(2).as_str()));
    let halt_events = events(&client, "RolloutHalted").await;
    assert_eq!(halt_events.len(), 1, "{halt_events:?}");
    // Resumed while the nodes still fail: not halted again for this config.
    patch_pool(&client, json!({"paused": false})).await;
    wait_held(&client, "False", "").await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(pool(&client).await.spec.paused, Some(false), "not halted again for rendered-worker-2");
    assert_eq!(events(&client, "RolloutHalted").await.len(), 1);
    daemons.recover_all();
    wait_rollout(&client, &rendered(2)).await;

    // Outside its maintenance window a pool starts no node; the window opening lets it go.
    let now = k8s_openapi::jiff::Timestamp::now().to_zoned(k8s_openapi::jiff::tz::TimeZone::UTC);
    let later = now.checked_add(k8s_openapi::jiff::SignedDuration::from_hours(3)).unwrap();
    let window = format!("Mon-Sun {:02}:00-{:02}:30", later.hour(), later.hour());
    set_policy(&client, json!({"mco.dev/halt-after-failures": null, "mco.dev/maintenance-windows": window})).await;
    patch_pool(&client, json!({"configuration": {"name": rendered(3)}})).await;
    let message = wait_held(&client, "True", "MaintenanceWindow").await;
    // A new target: the records of the last rollout are dropped (a config rendered again later
    // soaks, and may halt, again).
    eventually("the halt record dropped", || async {
        satisfying(pool(&client).await.annotations().get("mco.dev/halted-on").cloned(), |r| r.is_none())
    })
    .await;
    assert!(message.starts_with("waiting for maintenance window (opens at "), "{message}");
    assert!(message.contains(&format!("T{:02}:00:00+00:00[UTC])", later.hour())), "{message}");
    assert_eq!(targeted(&client, &rendered(3)).await, 0, "no node outside the window");
    set_policy(&client, json!({"mco.dev/maintenance-windows": "Mon-Sun 00:00-24:00"})).await;
    wait_rollout(&client, &rendered(3)).await;

    // A policy that does not fit the pool says so and moves no node.
    set_policy(&client, json!({"mco.dev/maintenance-windows": null, "mco.dev/canary": "5"})).await;
    patch_pool(&client, json!({"configuration": {"name": rendered(4)}})).await;
    let message = wait_held(&client, "True", "InvalidPolicy").await;
    assert_eq!(message, "MachineConfigPool worker: annotation mco.dev/canary: 5 canaries, but the pool has 3 nodes");
    assert_eq!(targeted(&client, &rendered(4)).await, 0);
    set_policy(&client, json!({"mco.dev/canary": null})).await;
    wait_rollout(&client, &rendered(4)).await;
    wait_held(&client, "False", "").await;

    stop(&controllers);
    daemon_task.abort();
}

/// Plays the daemons' pre-staging: answers each node asked to pull an image ahead after `delay`,
/// with the image pulled, or an error for the nodes in `failing`; records the most nodes seen
/// pulling at once.
fn prestaging_daemons(
    client: Client,
    delay: Duration,
    failing: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
    most_pulling: std::sync::Arc<std::sync::Mutex<usize>>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let api = Api::<Node>::all(client.clone());
        loop {
            let all = nodes(&client).await;
            // A failed pull is retried (as the daemon does) once the node no longer fails.
            let pulling: Vec<(String, String)> = all
                .iter()
                .filter_map(|n| {
                    let asked = annotation(n, PRESTAGE_ANNOTATION)?;
                    let failed = annotation(n, PRESTAGE_ERROR_ANNOTATION).is_some_and(|e| e.starts_with(asked))
                        && failing.lock().unwrap().contains(&n.name_any());
                    let answered = annotation(n, PRESTAGED_ANNOTATION) == Some(asked) || failed;
                    (!answered).then(|| (n.name_any(), asked.to_string()))
                })
                .collect();
            {
                let mut most = most_pulling.lock().unwrap();
                *most = (*most).max(pulling.len());
            }
            for (name, image) in pulling {
                tokio::time::sleep(delay).await;
                let answer = if failing.lock().unwrap().contains(&name) {
                    json!({PRESTAGE_ERROR_ANNOTATION: format!("{image}: reading manifest: manifest unknown")})
                } else {
                    json!({PRESTAGED_ANNOTATION: image, PRESTAGE_ERROR_ANNOTATION: null})
                };
                let patch = json!({"metadata": {"annotations": answer}});
                api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch)).await.unwrap();
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
}

#[tokio::test]
async fn prestaging_pulls_ahead_a_few_nodes_at_a_time_and_holds_nodes_whose_pull_failed() {
    let (env, client) = worker_pool(4, json!(1)).await;
    let daemons = FakeDaemons { step: Duration::from_millis(300), ..Default::default() };
    let daemon_task = daemons.spawn(client.clone());
    let failing = std::sync::Arc::new(std::sync::Mutex::new(vec!["worker-3".to_string()]));
    let most_pulling = std::sync::Arc::new(std::sync::Mutex::new(0));
    let prestage_task =
        prestaging_daemons(client.clone(), Duration::from_millis(300), failing.clone(), most_pulling.clone());
    let controllers = start_controllers(&env).await;
    // The target's OS image, pinned by digest, is what the nodes pull ahead.
    let image = format!("registry.example/os@sha256:{}", "5".repeat(64));
    let target: MachineConfig = serde_json::from_value(json!({
        "apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineConfig",
        "metadata": {"name": rendered(1)}, "spec": {"osImageURL": image},
    }))
    .unwrap();
    Api::<MachineConfig>::all(client.clone()).create(&PostParams::default(), &target).await.unwrap();
    set_policy(&client, json!({"mco.dev/prestage-concurrency": "2"})).await;
    patch_pool(&client, json!({"configuration": {"name": rendered(1)}})).await;

    // worker-3 cannot pull: the pool says so, and it is never given the config.
    let (_, reason, message) = eventually("PrestageFailed naming worker-3", || async {
        let failed = condition(&pool(&client).await, "PrestageFailed");
        satisfying(failed, |c| c.as_ref().is_some_and(|(status, _, _)| status == "True"))
    })
    .await
    .unwrap();
    assert_eq!(reason, "PullFailed");
    assert_eq!(
        message,
        format!(
            "pulling OS image {image} ahead failed on 1 node(s), which are not updated until it succeeds: worker-3: \
             reading manifest: manifest unknown"
        )
    );
    eventually("the other workers on the new config", || async {
        let all = nodes(&client).await;
        let on: Vec<String> = all
            .iter()
            .filter(|n| annotation(n, CURRENT_CONFIG_ANNOTATION) == Some(&rendered(1)))
            .map(|n| n.name_any())
            .collect();
        satisfying(on, |on| on.len() == 3)
    })
    .await;
    let stuck = Api::<Node>::all(client.clone()).get("worker-3").await.unwrap();
    assert_eq!(annotation(&stuck, DESIRED_CONFIG_ANNOTATION), Some(rendered(0).as_str()), "worker-3 not targeted");
    assert_eq!(*most_pulling.lock().unwrap(), 2, "two pulls at once, never more");
    // Every node that was not targeted at once pulled ahead of its slot.
    let pulled: Vec<String> = nodes(&client)
        .await
        .iter()
        .filter(|n| annotation(n, PRESTAGED_ANNOTATION) == Some(&image))
        .map(|n| n.name_any())
        .collect();
    assert!(pulled.len() >= 2, "{pulled:?}");

    // The registry is fixed: the daemon's retry pulls, the node gets its slot, the condition clears.
    failing.lock().unwrap().clear();
    wait_rollout(&client, &rendered(1)).await;
    eventually("PrestageFailed cleared", || async {
        let failed = condition(&pool(&client).await, "PrestageFailed");
        satisfying(failed, |c| c.as_ref().is_some_and(|(status, _, _)| status == "False"))
    })
    .await;
    stop(&controllers);
    daemon_task.abort();
    prestage_task.abort();
}
