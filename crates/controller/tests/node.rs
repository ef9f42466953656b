//! The node and drain controllers against a real API server (mco-testenv), with the tests playing
//! the node daemons and the kubelet: rollouts complete and never take more than maxUnavailable
//! nodes at once (checked at every node event), paused pools wait, degraded nodes degrade the
//! pool, and restarts of the controller and of the API server mid-rollout change nothing of that.

mod common;

use std::time::Duration;

use common::{
    FakeDaemons, Unavailability, condition, create_nodes, create_pool, eventually, nodes, patch_pool, pool, rendered,
    wait_rollout,
};
use k8s_openapi::api::events::v1::Event;
use kube::api::ListParams;
use kube::{Api, Client};
use mco_api::constants::{DESIRED_CONFIG_ANNOTATION, UPDATE_IN_PROGRESS_TAINT_KEY};
use mco_controller::drain::controller as drain;
use mco_controller::node::controller as node;
use mco_rollout::drain::RetryPolicy;
use mco_rollout::node::annotation;
use mco_testenv::TestEnv;
use serde_json::json;

/// Both controllers, with test timings; aborted with the returned handles.
async fn start_controllers(env: &TestEnv) -> [tokio::task::JoinHandle<()>; 2] {
    let config = mco_controller::config(Some(env.kubeconfig())).await.unwrap();
    let node_options = node::Options { retry_delay: Duration::from_millis(500), ..Default::default() };
    let drain_options = drain::Options {
        retry: RetryPolicy { delay: Duration::from_millis(500), ..Default::default() },
        attempt_timeout: Duration::from_secs(10),
        eviction_retry: Duration::from_millis(200),
        deletion_poll: Duration::from_millis(100),
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

#[tokio::test]
async fn rollouts_never_exceed_max_unavailable() {
    common::init_logs();
    let env = TestEnv::start().await.unwrap();
    let client = env.client();
    create_pool(&client, &rendered(0), json!(1)).await;
    create_nodes(&client, 5, &rendered(0)).await;
    let monitor = Unavailability::default();
    monitor.set_limit(1);
    let watch = monitor.spawn(client.clone());
    let daemons = FakeDaemons { step: Duration::from_millis(50), ..Default::default() };
    let daemon_task = daemons.spawn(client.clone());
    let controllers = start_controllers(&env).await;

    // The pool's status appears before anything moves.
    eventually("the pool's status", || async {
        let pool = pool(&client).await;
        let status = pool.status.clone()?;
        (status.machine_count == Some(5) && status.updated_machine_count == Some(5)).then_some(())
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
        let tainted: Vec<_> = nodes(&client)
            .await
            .into_iter()
            .filter(|n| {
                n.spec
                    .as_ref()
                    .and_then(|s| s.taints.as_ref())
                    .is_some_and(|t| t.iter().any(|t| t.key == UPDATE_IN_PROGRESS_TAINT_KEY))
            })
            .collect();
        assert!(tainted.is_empty(), "the UpdateInProgress taint is gone once updated");
        assert!(nodes(&client).await.iter().all(|n| !n.spec.as_ref().unwrap().unschedulable.unwrap_or(false)));
    }
    let set_desired = events(&client, "SetDesiredConfig").await;
    let notes: Vec<_> = set_desired.iter().filter_map(|e| e.note.clone()).collect();
    assert!(
        notes
            .iter()
            .any(|n| n.starts_with("Targeted node worker-") && n.ends_with("to MachineConfig: rendered-worker-1")),
        "{notes:?}"
    );
    assert!(notes.iter().any(|n| n == "Set target for 2 nodes to MachineConfig: rendered-worker-2"), "{notes:?}");
    // Zone a before zone b, so the first node of round 1 is in zone a.
    let first = notes.iter().find(|n| n.ends_with("rendered-worker-1")).unwrap();
    let index: usize = first["Targeted node worker-".len()..].split(' ').next().unwrap().parse().unwrap();
    assert_eq!(index % 2, 0, "{first}: zone a first");

    stop(&controllers);
    daemon_task.abort();
    watch.abort();
}

#[tokio::test]
async fn paused_pools_wait_and_degraded_nodes_degrade_the_pool() {
    common::init_logs();
    let env = TestEnv::start().await.unwrap();
    let client = env.client();
    create_pool(&client, &rendered(0), json!(1)).await;
    create_nodes(&client, 3, &rendered(0)).await;
    let daemons = FakeDaemons::default();
    let daemon_task = daemons.spawn(client.clone());
    let controllers = start_controllers(&env).await;
    eventually("the pool's status", || async { pool(&client).await.status?.machine_count.filter(|c| *c == 3) }).await;

    // Paused: the status says so, and no node is targeted.
    patch_pool(&client, json!({"paused": true, "configuration": {"name": rendered(1)}})).await;
    let updating = eventually("Updating=False (paused)", || async {
        condition(&pool(&client).await, "Updating")
            .filter(|(status, _, message)| status == "False" && !message.is_empty())
    })
    .await;
    assert_eq!(updating.2, "Pool is paused; will not update to MachineConfig rendered-worker-1");
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(targeted(&client, &rendered(1)).await, 0, "a paused pool does not move");
    patch_pool(&client, json!({"paused": false})).await;
    wait_rollout(&client, &rendered(1)).await;

    // Every node fails rendered-worker-2: the first one holds the only slot, the pool degrades.
    for i in 0..3 {
        daemons.fail(&format!("worker-{i}"), "failed to write /etc/x: no space left on device");
    }
    patch_pool(&client, json!({"configuration": {"name": rendered(2)}})).await;
    let degraded = eventually("NodeDegraded=True", || async {
        condition(&pool(&client).await, "NodeDegraded").filter(|(status, _, _)| status == "True")
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

    // The node recovers: the rollout goes on and the pool is no longer degraded.
    daemons.recover_all();
    wait_rollout(&client, &rendered(2)).await;
    let pool_now = pool(&client).await;
    assert_eq!(condition(&pool_now, "NodeDegraded").unwrap().0, "False");
    assert_eq!(condition(&pool_now, "Degraded").unwrap().0, "False");

    stop(&controllers);
    daemon_task.abort();
}

#[tokio::test]
async fn rollouts_survive_controller_and_apiserver_restarts() {
    common::init_logs();
    let mut env = TestEnv::start().await.unwrap();
    let client = env.client();
    create_pool(&client, &rendered(0), json!(2)).await;
    create_nodes(&client, 5, &rendered(0)).await;
    let monitor = Unavailability::default();
    monitor.set_limit(2);
    let watch = monitor.spawn(client.clone());
    // Slow daemons, so that the restarts land mid-rollout.
    let daemons = FakeDaemons { step: Duration::from_millis(300), ..Default::default() };
    let daemon_task = daemons.spawn(client.clone());
    let controllers = start_controllers(&env).await;
    eventually("the pool's status", || async { pool(&client).await.status?.machine_count.filter(|c| *c == 5) }).await;

    patch_pool(&client, json!({"configuration": {"name": rendered(1)}})).await;
    eventually("two nodes targeted", || async { (targeted(&client, &rendered(1)).await >= 2).then_some(()) }).await;
    stop(&controllers);
    let controllers = start_controllers(&env).await;
    eventually("a third node targeted", || async { (targeted(&client, &rendered(1)).await >= 3).then_some(()) }).await;
    env.restart_apiserver().await.unwrap();
    wait_rollout(&client, &rendered(1)).await;
    assert_eq!(monitor.take_peak(), 2);

    stop(&controllers);
    daemon_task.abort();
    watch.abort();
}
