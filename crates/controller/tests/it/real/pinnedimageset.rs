//! The PinnedImageSet controller against a real API server: each pool lists, sorted, the sets its
//! machineConfigSelector selects, follows labels, creations and deletions, and reports an invalid
//! selector as `PinnedImageSetsDegraded` with upstream's message.

use kube::Api;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use mco_api::{MachineConfigPool, PinnedImageSet};
use mco_controller::pinnedimageset;
use mco_testenv::{TestEnv, eventually, satisfying};
use serde_json::json;

fn set(name: &str, role: &str) -> PinnedImageSet {
    serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {"machineconfiguration.openshift.io/role": role}},
        "spec": {"pinnedImages": [{"name": format!("quay.io/a/{name}@sha256:{}", "0".repeat(64))}]},
    }))
    .unwrap()
}

fn pool(name: &str, selector: serde_json::Value) -> MachineConfigPool {
    serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {"nodeSelector": {"matchLabels": {format!("node-role.kubernetes.io/{name}"): ""}}, "machineConfigSelector": selector},
    }))
    .unwrap()
}

/// A pool's list and its `PinnedImageSetsDegraded` as `(status, message)`.
async fn seen(pools: &Api<MachineConfigPool>, name: &str) -> (Vec<String>, Option<(String, String)>) {
    let pool = pools.get(name).await.unwrap();
    let sets = pool.spec.pinned_image_sets.iter().flatten().map(|r| r.name.clone()).collect();
    let degraded =
        pool.status.and_then(|s| s.conditions).into_iter().flatten().find(|c| c.type_ == "PinnedImageSetsDegraded");
    (sets, degraded.map(|c| (c.status, c.message.unwrap_or_default())))
}

#[tokio::test]
async fn pools_list_the_pinned_image_sets_their_selector_selects() {
    let env = TestEnv::start().await.unwrap();
    let client = env.client();
    let pools = Api::<MachineConfigPool>::all(client.clone());
    let sets = Api::<PinnedImageSet>::all(client.clone());
    let role = |r: &str| json!({"matchLabels": {"machineconfiguration.openshift.io/role": r}});
    pools.create(&PostParams::default(), &pool("worker", role("worker"))).await.unwrap();
    pools.create(&PostParams::default(), &pool("master", role("master"))).await.unwrap();
    for (name, r) in [("zeta", "worker"), ("alpha", "worker"), ("control", "master")] {
        sets.create(&PostParams::default(), &set(name, r)).await.unwrap();
    }
    let controller = tokio::spawn(pinnedimageset::run(client.clone(), Default::default()));
    let ok = Some(("False".to_string(), String::new()));
    let names = |n: &[&str]| n.iter().map(|s| s.to_string()).collect::<Vec<_>>();

    eventually("the worker pool to list its two sets, sorted", || async {
        satisfying(seen(&pools, "worker").await, |s| s.0 == names(&["alpha", "zeta"]) && s.1 == ok)
    })
    .await;
    eventually("the master pool to list its set", || async {
        satisfying(seen(&pools, "master").await, |s| s.0 == names(&["control"]) && s.1 == ok)
    })
    .await;

    // A set relabelled for the master pool moves there; a deleted one leaves its pool.
    let relabel = json!({"metadata": {"labels": {"machineconfiguration.openshift.io/role": "master"}}});
    sets.patch("zeta", &PatchParams::default(), &Patch::Merge(&relabel)).await.unwrap();
    sets.delete("alpha", &DeleteParams::default()).await.unwrap();
    eventually("the worker pool to list no set", || async {
        satisfying(seen(&pools, "worker").await, |s| s.0.is_empty())
    })
    .await;
    eventually("the master pool to list both", || async {
        satisfying(seen(&pools, "master").await, |s| s.0 == names(&["control", "zeta"]))
    })
    .await;

    // A selector the controller cannot use is the pool's condition, with upstream's message.
    let bad = json!({"spec": {"machineConfigSelector": {"matchExpressions": [
        {"key": "machineconfiguration.openshift.io/role", "operator": "In", "values": []},
    ]}}});
    pools.patch("master", &PatchParams::default(), &Patch::Merge(&bad)).await.unwrap();
    let degraded = eventually("PinnedImageSetsDegraded on the master pool", || async {
        satisfying(seen(&pools, "master").await, |s| s.1.as_ref().is_some_and(|d| d.0 == "True"))
    })
    .await;
    let message = degraded.1.unwrap().1;
    assert!(message.starts_with("Failed to populate pinned image sets for pool master: "), "{message}");
    pools
        .patch(
            "master",
            &PatchParams::default(),
            &Patch::Merge(&json!({"spec": {"machineConfigSelector": {
                // A merge patch merges the selector's fields: the bad expressions are removed by name.
                "matchExpressions": null,
                "matchLabels": {"machineconfiguration.openshift.io/role": "master"},
            }}})),
        )
        .await
        .unwrap();
    eventually("the master pool healthy again", || async {
        satisfying(seen(&pools, "master").await, |s| s.1 == ok && s.0 == names(&["control", "zeta"]))
    })
    .await;
    controller.abort();
}
