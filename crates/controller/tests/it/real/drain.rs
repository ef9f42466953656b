//! The drain controller against a real API server (mco-testenv): cordon, evictions through the
//! Eviction API held by a PodDisruptionBudget, DaemonSet and mirror pods left alone, the warning
//! events of a drain that keeps failing, the controller's own pod evicted only once every other
//! pod is gone, uncordon, and a request it does not understand; each step also as the node's
//! MachineConfigNode conditions.

use crate::common;

use std::time::Duration;

use common::eventually;
use k8s_openapi::api::core::v1::{Namespace, Node, Pod, ServiceAccount};
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use mco_api::MachineConfigNode;
use mco_api::constants::{DESIRED_DRAIN_ANNOTATION, LAST_APPLIED_DRAIN_ANNOTATION};
use mco_controller::drain::controller::{Options, run};
use mco_metrics::controller::ControllerMetrics;
use mco_rollout::drain::RetryPolicy;
use mco_rollout::node::annotation;
use mco_testenv::TestEnv;
use serde::de::DeserializeOwned;
use serde_json::json;

const NAMESPACE: &str = "apps";

fn object<T: DeserializeOwned>(value: serde_json::Value) -> T {
    serde_json::from_value(value).unwrap()
}

async fn create_pod(client: &Client, name: &str, node: &str, metadata: serde_json::Value, volumes: serde_json::Value) {
    let mut pod = json!({
        "metadata": {"name": name, "labels": {"app": name}},
        "spec": {
            "nodeName": node,
            "terminationGracePeriodSeconds": 0,
            "containers": [{"name": "main", "image": "example.com/app:1"}],
            "volumes": volumes,
        },
    });
    pod["metadata"].as_object_mut().unwrap().extend(metadata.as_object().unwrap().clone());
    let api = Api::<Pod>::namespaced(client.clone(), NAMESPACE);
    api.create(&PostParams::default(), &object(pod)).await.unwrap();
    // The kubelet's part: running and ready (a disruption budget only protects such pods).
    let status = json!({"status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}});
    api.patch_status(name, &PatchParams::default(), &Patch::Merge(&status)).await.unwrap();
}

async fn pod_names(client: &Client) -> Vec<String> {
    let pods = Api::<Pod>::namespaced(client.clone(), NAMESPACE).list(&ListParams::default()).await.unwrap();
    let mut names: Vec<String> = pods.items.into_iter().filter_map(|p| p.metadata.name).collect();
    names.sort();
    names
}

async fn node(client: &Client) -> Node {
    Api::<Node>::all(client.clone()).get("worker-0").await.unwrap()
}

fn cordoned(node: &Node) -> bool {
    node.spec.as_ref().and_then(|s| s.unschedulable).unwrap_or(false)
}

async fn request(client: &Client, value: &str) {
    let patch = json!({"metadata": {"annotations": {DESIRED_DRAIN_ANNOTATION: value}}});
    Api::<Node>::all(client.clone()).patch("worker-0", &PatchParams::default(), &Patch::Merge(&patch)).await.unwrap();
}

/// Waits until worker-0's MachineConfigNode has condition `kind` with `status` and a message
/// containing `message`; returns the message.
async fn mcn_condition(client: &Client, kind: &str, status: &str, message: &str) -> String {
    let api = Api::<MachineConfigNode>::all(client.clone());
    eventually(&format!("MachineConfigNode worker-0: {kind}={status} saying {message:?}"), || async {
        let mcn = api.get("worker-0").await.unwrap();
        let conditions = mcn.status.and_then(|s| s.conditions).unwrap_or_default();
        match conditions.iter().find(|c| c.type_ == kind) {
            Some(c) if c.status == status && c.message.contains(message) => Ok(c.message.clone()),
            other => Err(other.map(|c| (c.status.clone(), c.message.clone()))),
        }
    })
    .await
}

/// The note of worker-0's first `reason` warning, or every warning seen for it so far.
async fn warning(client: &Client, reason: &str) -> Result<String, Vec<(Option<String>, Option<String>)>> {
    let events = Api::<Event>::namespaced(client.clone(), "default").list(&ListParams::default()).await.unwrap();
    let warnings: Vec<_> = events
        .items
        .into_iter()
        .filter(|e| e.type_.as_deref() == Some("Warning"))
        .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("worker-0"))
        .map(|e| (e.reason, e.note))
        .collect();
    warnings
        .iter()
        .find_map(|(r, note)| (r.as_deref() == Some(reason)).then(|| note.clone().unwrap_or_default()))
        .ok_or(warnings)
}

/// The notes of every Warning about worker-0 with `reason`.
async fn warning_notes(client: &Client, reason: &str) -> Vec<String> {
    let events = Api::<Event>::namespaced(client.clone(), "default").list(&ListParams::default()).await.unwrap();
    events
        .items
        .into_iter()
        .filter(|e| e.type_.as_deref() == Some("Warning") && e.reason.as_deref() == Some(reason))
        .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("worker-0"))
        .map(|e| e.note.unwrap_or_default())
        .collect()
}

#[track_caller]
fn assert_no_drain_err(metrics: &str) {
    assert!(!metrics.lines().any(|l| l.starts_with("mcc_drain_err{node=\"worker-0\"}")), "{metrics}");
}

#[tokio::test]
async fn drains_hold_for_disruption_budgets() {
    common::init_logs();
    let env = TestEnv::start().await.unwrap();
    let client = env.client();
    common::create_nodes(&client, 2, "rendered-worker-0").await;
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &object(json!({"metadata": {"name": NAMESPACE}})))
        .await
        .unwrap();
    // No controller-manager creates it; pods need it.
    Api::<ServiceAccount>::namespaced(client.clone(), NAMESPACE)
        .create(&PostParams::default(), &object(json!({"metadata": {"name": "default"}})))
        .await
        .unwrap();
    let daemon_set_owner = json!({"ownerReferences": [
        {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "agent", "uid": "6c1b6a5e-0000-4000-8000-000000000001", "controller": true}
    ]});
    create_pod(&client, "web", "worker-0", json!({}), json!([])).await;
    create_pod(&client, "cache", "worker-0", json!({}), json!([{"name": "scratch", "emptyDir": {}}])).await;
    create_pod(&client, "agent", "worker-0", daemon_set_owner, json!([])).await;
    create_pod(
        &client,
        "static",
        "worker-0",
        json!({"annotations": {"kubernetes.io/config.mirror": "abc"}}),
        json!([]),
    )
    .await;
    create_pod(&client, "elsewhere", "worker-1", json!({}), json!([])).await;
    // The drain controller's own pod, on the node it drains.
    create_pod(&client, "controller", "worker-0", json!({}), json!([])).await;
    let budgets = Api::<PodDisruptionBudget>::namespaced(client.clone(), NAMESPACE);
    budgets
        .create(
            &PostParams::default(),
            &object(json!({"metadata": {"name": "web"}, "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "web"}}}})),
        )
        .await
        .unwrap();
    // No disruption controller computes it: without a status the API server keeps the eviction
    // request waiting instead of refusing it.
    let status = json!({"status": {
        "observedGeneration": 1, "disruptionsAllowed": 0, "currentHealthy": 1, "desiredHealthy": 1, "expectedPods": 1
    }});
    budgets.patch_status("web", &PatchParams::default(), &Patch::Merge(&status)).await.unwrap();

    let mut registry = mco_metrics::Registry::default();
    let options = Options {
        retry: RetryPolicy {
            delay: Duration::from_millis(300),
            failing_threshold: Duration::from_secs(2),
            failing_delay: Duration::from_millis(300),
            timeout: Duration::from_secs(4),
        },
        attempt_timeout: Duration::from_secs(1),
        eviction_retry: Duration::from_millis(200),
        deletion_poll: Duration::from_millis(100),
        own_pod: Some((NAMESPACE.to_string(), "controller".to_string())),
        metrics: ControllerMetrics::register(&mut registry),
    };
    // The node controller's part: worker-0's MachineConfigNode.
    let spec =
        mco_mcn::progress::spec_for("worker-0", "worker", node(&client).await.metadata.annotations.as_ref().unwrap());
    Api::<MachineConfigNode>::all(client.clone())
        .create(&PostParams::default(), &MachineConfigNode::new("worker-0", spec))
        .await
        .unwrap();
    let config = mco_controller::config(Some(env.kubeconfig())).await.unwrap();
    let controller = tokio::spawn(run(config, options));

    // The budget holds the drain: cordoned, the unprotected pod evicted, `web` still there and
    // the drain not acknowledged, with warnings once it has failed for a while.
    let requested = std::time::Instant::now();
    request(&client, "drain-rendered-worker-1").await;
    eventually("the emptyDir pod evicted", || async {
        let pods = pod_names(&client).await;
        if pods.contains(&"cache".to_string()) { Err(pods) } else { Ok(()) }
    })
    .await;
    assert!(cordoned(&node(&client).await));
    // Failing, but for less than the drain timeout (4 s): not a drain error yet (checked only if
    // this machine got here that fast).
    let rendered = mco_metrics::render(&registry);
    if requested.elapsed() < Duration::from_secs(4) {
        assert_no_drain_err(&rendered);
    }
    // Awaited by the budget's words: on a loaded machine an attempt may time out (1 s) before the
    // eviction's answer, and its warning say so instead.
    let budget = "evicting pod apps/web: Cannot evict pod as it would violate the pod's disruption budget.";
    let threshold = eventually("a DrainThresholdExceeded warning naming the budget", || async {
        let notes = warning_notes(&client, "DrainThresholdExceeded").await;
        notes.iter().find(|note| note.ends_with(budget)).cloned().ok_or(notes)
    })
    .await;
    assert!(threshold.starts_with("Drain failed. Drain has been failing for more than "), "{threshold}");
    let failed = eventually("a DrainFailed warning", || warning(&client, "DrainFailed")).await;
    assert_eq!(failed, "node worker-0: drain exceeded timeout: 4s. Will continue to retry.");
    // Set before the event is published.
    let metrics = mco_metrics::render(&registry);
    assert!(metrics.lines().any(|l| l == "mcc_drain_err{node=\"worker-0\"} 1"), "{metrics}");
    let now = node(&client).await;
    assert_eq!(annotation(&now, LAST_APPLIED_DRAIN_ANNOTATION), None, "not drained while the budget holds");
    assert!(cordoned(&now));
    // The controller's own pod waits for the others to go: evicting itself would end it.
    assert_eq!(pod_names(&client).await, ["agent", "controller", "elsewhere", "static", "web"]);
    mcn_condition(&client, "Cordoned", "True", "Cordoned node. The node is reporting Unschedulable = false").await;
    // Awaited by the budget's words: on a loaded machine an attempt may time out (1 s) before the
    // eviction's answer, and say so instead, until a later attempt gets the answer.
    let draining = mcn_condition(&client, "Drained", "Unknown", "would violate the pod's disruption budget.").await;
    assert!(draining.contains("Error: Node Drain has not succeeded."), "{draining}");
    mcn_condition(&client, "UpdateExecuted", "Unknown", "Node Drain has not succeeded").await;

    // Without the budget the drain completes; DaemonSet and mirror pods stay, as do other nodes' pods.
    budgets.delete("web", &DeleteParams::default()).await.unwrap();
    eventually("lastAppliedDrain = drain-rendered-worker-1", || async {
        let node = node(&client).await;
        match annotation(&node, LAST_APPLIED_DRAIN_ANNOTATION) {
            Some("drain-rendered-worker-1") => Ok(()),
            other => Err(other.map(str::to_string)),
        }
    })
    .await;
    assert_eq!(pod_names(&client).await, ["agent", "elsewhere", "static"]);
    assert!(cordoned(&node(&client).await));
    // A drain that succeeded leaves no drain error series (upstream deletes it).
    assert_no_drain_err(&mco_metrics::render(&registry));
    let metrics = mco_metrics::render(&registry);
    assert!(metrics.lines().any(|l| l == "mcc_drain_err{node=\"initialize\"} 0"), "{metrics}");
    mcn_condition(
        &client,
        "Drained",
        "True",
        "Drained node. The drain is complete as the desired drainer matches current drainer: drain-rendered-worker-1",
    )
    .await;

    request(&client, "uncordon-rendered-worker-1").await;
    let uncordoned = eventually("lastAppliedDrain = uncordon-rendered-worker-1", || async {
        let node = node(&client).await;
        match annotation(&node, LAST_APPLIED_DRAIN_ANNOTATION) {
            Some("uncordon-rendered-worker-1") => Ok(node),
            other => Err(other.map(str::to_string)),
        }
    })
    .await;
    assert!(!cordoned(&uncordoned));
    // Recorded once the controller's patch has returned: after the annotation is visible.
    eventually("the drain controller's drain and uncordon states", || async {
        let metrics = mco_metrics::render(&registry);
        let recorded = ["drain", "uncordon"].iter().all(|completed| {
            let series = format!(
                "mcc_sub_controller_state{{subcontroller=\"machine-config-controller-drain\",state=\"{completed}\",object=\"worker-0\"}} "
            );
            metrics.lines().any(|l| l.starts_with(&series))
        });
        if recorded { Ok(()) } else { Err(mco_testenv::Verbatim(metrics)) }
    })
    .await;
    mcn_condition(&client, "Uncordoned", "True", "UnCordoned node. The node is reporting Unschedulable = true").await;
    mcn_condition(&client, "UpdateComplete", "True", "Uncordoned Node as part of completing upgrade phase").await;

    // A request it does not understand: a warning, nothing done.
    request(&client, "reboot-rendered-worker-1").await;
    let invalid = eventually("an InvalidDrainRequest warning", || warning(&client, "InvalidDrainRequest")).await;
    assert_eq!(
        invalid,
        "node worker-0: unknown drain request \"reboot-rendered-worker-1\" (expected drain-<config> or uncordon-<config>)"
    );
    let now = node(&client).await;
    assert_eq!(annotation(&now, LAST_APPLIED_DRAIN_ANNOTATION), Some("uncordon-rendered-worker-1"));
    assert!(!cordoned(&now));

    controller.abort();
}
