//! Rollouts under a running workload: maxUnavailable and the disruption budget kept at every
//! observed moment, every MachineConfigNode following upstream's steps, a budget holding a drain
//! and the alert it fires, the daemons' kubelet health checks.

use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Node;
use kube::Api;
use mco_testenv::{eventually, eventually_within, satisfying};
use serde_json::json;

use crate::common::{mco, stdout};
use crate::support::*;
use crate::transitions::{Transitions, in_order};

pub async fn rollouts_keep_max_unavailable_and_the_disruption_budget(lab: &mut Lab) {
    let client = lab.client.clone();
    let serving_before = ensure_workload(lab).await;
    let (workload_seen, workload_observer) = observe_workload(client.clone());
    let (observed, observer) = observe(client.clone());
    let transitions = Transitions::watch(client.clone());
    let workers = lab.workers();
    let mut current = rolled_out(lab, "").await;
    for (step, max_unavailable) in [(1, json!(1)), (2, json!(2)), (3, json!("50%"))] {
        set_pool(&client, json!({ "maxUnavailable": max_unavailable })).await;
        tokio::time::sleep(Duration::from_secs(1)).await;
        reset(&observed);
        let name = format!("99-worker-step-{step}");
        lab.apply(&name, &file_mc(&name, &format!("/etc/lab/step-{step}"), &format!("step {step}\n")));
        current = rolled_out(lab, &current).await;
        // The watch delivers every change in order; once it has seen the end of the rollout, it
        // has seen every moment of it.
        eventually("the node watch to see the rollout's end", || async {
            let observed = observed.lock().unwrap();
            let seen: Vec<String> = observed.nodes.values().map(summary).collect();
            let caught_up =
                observed.nodes.len() == workers.len() && observed.nodes.values().all(|n| done_on(n, &current));
            if caught_up { Ok(()) } else { Err(seen) }
        })
        .await;
        let limit = match step {
            2 => 2,
            _ => 1,
        };
        let seen = observed.lock().unwrap().max_unavailable;
        assert!(seen <= limit, "step {step}: {seen} nodes unavailable at once, maxUnavailable {max_unavailable}");
        assert!(seen >= 1, "step {step}: the watch saw no node updating");
        for root in worker_roots(lab) {
            assert_eq!(read(&root.join(format!("etc/lab/step-{step}"))), format!("step {step}\n"));
        }
    }

    // Each node's MachineConfigNode followed its updates step by step: the daemon's steps, the
    // drain controller's cordon, drain and uncordon, the reboot, in upstream's order.
    let update = [
        "Updated=False",
        "UpdatePrepared=True",
        "Cordoned=True",
        "Drained=Unknown",
        "Drained=True",
        "AppliedFilesAndOS=Unknown",
        "AppliedFilesAndOS=True",
        "RebootedNode=Unknown",
        "RebootedNode=True",
        "Uncordoned=True",
        "Resumed=True",
        "Updated=True",
    ];
    let three_updates = [update, update, update].concat();
    for node in &workers {
        eventually(&format!("{node}'s MachineConfigNode through three updates"), || {
            let seen = transitions.of(node);
            let done = in_order(&seen, &three_updates);
            // Should it fail: the writes the daemon gave up on, if any.
            let unrecorded = if done { vec![] } else { unrecorded_conditions(lab, node) };
            async move { if done { Ok(()) } else { Err((seen, unrecorded)) } }
        })
        .await;
    }
    // `kubectl get machineconfignodes` prints upstream's columns; `mco status` each node's phase.
    let [kubectl] = mco_testenv::find_binaries(["kubectl"]).unwrap();
    let listed = std::process::Command::new(kubectl)
        .arg("--kubeconfig")
        .arg(lab.state_dir().join("kubeconfig"))
        .args(["get", "machineconfignodes"])
        .output()
        .unwrap();
    let listed = String::from_utf8_lossy(&listed.stdout).to_string();
    let header: Vec<&str> = listed.lines().next().unwrap_or_default().split_whitespace().collect();
    assert_eq!(header, ["NAME", "POOLNAME", "DESIREDCONFIG", "CURRENTCONFIG", "UPDATED", "AGE"], "{listed}");
    for node in &workers {
        let row = listed.lines().find(|l| l.starts_with(&format!("{node} "))).unwrap_or_else(|| panic!("{listed}"));
        let columns: Vec<&str> = row.split_whitespace().collect();
        assert_eq!(columns[1..5], ["worker", current.as_str(), current.as_str(), "True"], "{listed}");
    }
    let status = mco().args(["status", "--kubeconfig"]).arg(lab.state_dir().join("kubeconfig")).assert().success();
    let status = stdout(&status);
    for node in &workers {
        let row = status.lines().find(|l| l.starts_with(&format!("{node} "))).unwrap_or_else(|| panic!("{status}"));
        assert!(row.contains("Updated=True"), "{status}");
    }

    // Every node was drained by real evictions: every pod that was on a worker was evicted and
    // replaced, the workload never went below its budget, and it serves in full again.
    let serving_after = workload_serving(&client).await;
    let kept: Vec<_> = serving_after.keys().filter(|uid| serving_before.contains_key(*uid)).collect();
    assert!(
        kept.is_empty(),
        "pods that outlived three drains of every node: {kept:?} ({serving_before:?} -> {serving_after:?})"
    );
    let fewest = workload_seen.lock().unwrap().fewest;
    assert_eq!(fewest, Some(2), "the fewest pods serving at once during the rollouts (budget: 2)");
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), WORKLOAD_NAMESPACE);
    eventually("the web Deployment fully available", || async {
        let status = deployments.get("web").await.unwrap().status;
        satisfying(status, |s| s.as_ref().is_some_and(|s| s.available_replicas == Some(3)))
    })
    .await;

    workload_observer.abort();
    observer.abort();
}

pub async fn a_budget_holds_the_drain_and_mcc_drain_error_fires(lab: &mut Lab) {
    let client = lab.client.clone();
    let nodes: Api<Node> = Api::all(client.clone());
    let prometheus = lab.status()["prometheus"].as_str().unwrap().to_string();
    let serving_after = ensure_workload(lab).await;
    let current = rolled_out(lab, "").await;
    // A budget that allows no disruption holds the drain of the first node (cordoned, its pod
    // still there, no node on the new config) until it is relaxed.
    set_min_available(&client, 3).await;
    set_pool(&client, json!({ "maxUnavailable": 1 })).await;
    lab.apply("99-worker-held", &file_mc("99-worker-held", "/etc/lab/held", "held\n"));
    let cordoned = eventually("a node cordoned for its drain", || async {
        let all = nodes.list(&workers()).await.unwrap().items;
        let cordoned = all.iter().find(|n| n.spec.as_ref().and_then(|s| s.unschedulable) == Some(true));
        cordoned.and_then(|n| n.metadata.name.clone()).ok_or_else(|| all.iter().map(summary).collect::<Vec<_>>())
    })
    .await;
    let held: Vec<String> =
        serving_after.iter().filter(|(_, node)| **node == cordoned).map(|(uid, _)| uid.clone()).collect();
    assert!(!held.is_empty(), "no workload pod on {cordoned}: {serving_after:?}");
    // The drain controller reports the refused eviction when its attempt times out (the lab's
    // --drain-timeout, 15 s), with the API's own words; the pod is still there then.
    eventually_within(Duration::from_secs(240), "the drain controller's report of the refused eviction", || async {
        let text = controller_log(&client).await;
        let reported = text
            .lines()
            .any(|line| line.contains("drain failed") && line.contains(&cordoned) && line.contains(REFUSED_BY_BUDGET));
        let tail: Vec<&str> = text.lines().rev().take(5).collect();
        if reported { Ok(()) } else { Err(mco_testenv::Verbatim(tail.join("\n"))) }
    })
    .await;
    let still = workload_serving(&client).await;
    assert!(held.iter().all(|uid| still.contains_key(uid)), "a budget of 3 of 3 let {held:?} go: {still:?}");
    // Past the lab's --drain-failed-after, the controller's mcc_drain_err for the node makes the
    // lab's Prometheus fire upstream's MCCDrainError, naming the node.
    let firing = eventually_within(Duration::from_secs(240), "MCCDrainError firing in Prometheus", || async {
        let alerts = prometheus_alerts(&prometheus).await;
        let firing = alerts.iter().find(|a| a["labels"]["alertname"] == "MCCDrainError" && a["state"] == "firing");
        firing.cloned().ok_or(alerts)
    })
    .await;
    assert_eq!(
        (&firing["labels"]["exported_node"], &firing["labels"]["severity"]),
        (&json!(cordoned), &json!("warning")),
        "{firing}"
    );
    let held_target = target(&pool(&client).await);
    let moved: Vec<String> =
        nodes.list(&workers()).await.unwrap().iter().filter(|n| done_on(n, &held_target)).map(summary).collect();
    assert!(moved.is_empty(), "nodes updated while the drain was held: {moved:?}");
    set_min_available(&client, 2).await;
    rolled_out(lab, &current).await;
    for root in worker_roots(lab) {
        assert_eq!(read(&root.join("etc/lab/held")), "held\n");
    }
    // The drain succeeded: the controller dropped the node's series and the alert resolved.
    eventually("MCCDrainError resolved in Prometheus", || async {
        let alerts = prometheus_alerts(&prometheus).await;
        let drain = alerts.iter().any(|a| a["labels"]["alertname"] == "MCCDrainError");
        if drain { Err(alerts) } else { Ok(()) }
    })
    .await;
}

pub async fn kubelet_health_checks_never_failed(lab: &mut Lab) {
    let prometheus = lab.status()["prometheus"].as_str().unwrap().to_string();
    // Every daemon's kubelet health checks found its own node's kubelet all along (master-0's
    // daemon has run since the install, checking every 30 s).
    let kubelet_states =
        prometheus_api(&prometheus, "/api/v1/query?query=max_over_time(mcd_kubelet_state%5B30m%5D)").await;
    let worst: Vec<(String, String)> = kubelet_states["result"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["metric"]["node"].as_str().unwrap_or_default().into(), r["value"][1].as_str().unwrap().into()))
        .collect();
    let checked: std::collections::BTreeSet<&str> = worst.iter().map(|(node, _)| node.as_str()).collect();
    assert_eq!(
        checked.into_iter().collect::<Vec<_>>(),
        [MASTER, "worker-0", "worker-1", "worker-2"],
        "{kubelet_states}"
    );
    assert!(worst.iter().all(|(_, failures)| failures == "0"), "kubelet health checks failed: {worst:?}");
}

/// The daemon's warnings of MachineConfigNode conditions it could not write, from every container
/// of its pods on `node` (the node's pod logs, in its root).
fn unrecorded_conditions(lab: &Lab, node: &str) -> Vec<String> {
    let pods = lab.state_dir().join("nodes").join(node).join("root/var/log/pods");
    let daemon_pods = std::fs::read_dir(&pods).into_iter().flatten().flatten().filter(|pod| {
        pod.file_name().to_string_lossy().starts_with("openshift-machine-config-operator_machine-config-daemon")
    });
    let logs = daemon_pods.flat_map(|pod| walk_files(&pod.path()));
    logs.flat_map(|log| {
        std::fs::read_to_string(log).unwrap_or_default().lines().map(str::to_string).collect::<Vec<_>>()
    })
    .filter(|line| line.contains("condition not recorded"))
    .collect()
}

fn walk_files(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let entries = std::fs::read_dir(dir).into_iter().flatten().flatten();
    entries.flat_map(|e| if e.path().is_dir() { walk_files(&e.path()) } else { vec![e.path()] }).collect()
}
