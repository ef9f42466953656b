//! The daemon's PinnedImageSets against a real API server, a real containerd (v2) and a real
//! registry: the images of the node's pool's sets are pulled and pinned as the CRI reports them,
//! the MachineConfigNode says how far the node is (upstream's conditions and generations), a
//! failing pull names the image and keeps what was pinned, and images no set lists are unpinned.
//! The test plays the PinnedImageSet controller (it sets the pool's list) and the node controller
//! (it makes the MachineConfigNode).

use std::time::Duration;

use mco_agent::pinning::{self, Settings};
use mco_api::machineconfiguration::machine_config_node_condition::{
    PINNED_IMAGE_SETS_DEGRADED, PINNED_IMAGE_SETS_PROGRESSING,
};
use mco_api::{MachineConfigNode, MachineConfigNodeStatusPinnedImageSet, MachineConfigPool, PinnedImageSet};
use mco_cri::{CONTAINERD_SOCKET, Runtime};
use mco_mcn::Recorder;
use mco_os::registry::LocalRegistry;
use mco_testenv::containerd::{Containerd, push_buildah_image};
use mco_testenv::k8s_openapi::api::core::v1::Node;
use mco_testenv::kube::Api;
use mco_testenv::kube::api::{Patch, PatchParams, PostParams};
use mco_testenv::{TestEnv, eventually, satisfying};
use serde_json::json;

const NODE: &str = "worker-0";

fn status(
    name: &str,
    desired: i32,
    current: Option<i32>,
    failed: Option<i32>,
) -> (String, i32, Option<i32>, Option<i32>) {
    (name.to_string(), desired, current, failed)
}

fn summary(sets: &[MachineConfigNodeStatusPinnedImageSet]) -> Vec<(String, i32, Option<i32>, Option<i32>)> {
    sets.iter()
        .map(|s| (s.name.clone(), s.desired_generation.unwrap_or(0), s.current_generation, s.last_failed_generation))
        .collect()
}

/// The MachineConfigNode's sets, and its two PinnedImageSets conditions as `(status, message)`.
type Seen = (Vec<(String, i32, Option<i32>, Option<i32>)>, Option<(String, String)>, Option<(String, String)>, String);

async fn seen(api: &Api<MachineConfigNode>) -> Seen {
    let mcn = api.get(NODE).await.unwrap();
    let status = mcn.status.unwrap_or_default();
    let condition = |kind: &str| {
        status.conditions.iter().flatten().find(|c| c.type_ == kind).map(|c| (c.status.clone(), c.message.clone()))
    };
    let sets = status.pinned_image_sets.clone().unwrap_or_default();
    let error = sets.iter().find_map(|s| s.last_failed_generation_error.clone()).unwrap_or_default();
    (summary(&sets), condition(PINNED_IMAGE_SETS_PROGRESSING), condition(PINNED_IMAGE_SETS_DEGRADED), error)
}

#[tokio::test]
async fn a_nodes_pinned_image_sets_are_pulled_pinned_reported_and_unpinned() {
    let env = TestEnv::start().await.unwrap();
    let client = env.client();
    let tmp = tempfile::tempdir().unwrap();
    let registry = LocalRegistry::start(&tmp.path().join("registry")).unwrap();
    let push = |name: &str| {
        let label = format!("name={name}");
        let digest = push_buildah_image(
            tmp.path(),
            &registry.host(),
            &registry.registries_conf,
            &format!("lab/{name}:1"),
            &["--label", &label],
            None,
        );
        format!("{}/lab/{name}@{digest}", registry.host())
    };
    let (first, second) = (push("first"), push("second"));
    let missing = format!("{}/lab/missing@sha256:{}", registry.host(), "2".repeat(64));
    let root = tmp.path().join("root");
    let socket = root.join(CONTAINERD_SOCKET.trim_start_matches('/'));
    let containerd = Containerd::start(&tmp.path().join("containerd"), &socket, &[&registry.host()]).unwrap();
    let runtime = eventually("containerd's CRI to answer", || async {
        let runtime = Runtime::connect(&socket).await.map_err(|e| format!("{e:#}\n{}", containerd.log()))?;
        runtime.image("127.0.0.1:1/none:1").await.map_err(|e| format!("{e:#}\n{}", containerd.log()))?;
        Ok::<_, String>(runtime)
    })
    .await;

    // The Node (Ready, with storage to spare), its pool and its MachineConfigNode.
    let nodes = Api::<Node>::all(client.clone());
    let node: Node = serde_json::from_value(json!({
        "metadata": {"name": NODE, "labels": {"node-role.kubernetes.io/worker": ""}},
    }))
    .unwrap();
    let node = nodes.create(&PostParams::default(), &node).await.unwrap();
    let ready = json!({"status": {
        "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "ready"}],
        "allocatable": {"ephemeral-storage": "100Gi"}, "capacity": {"ephemeral-storage": "100Gi"},
    }});
    nodes.patch_status(NODE, &PatchParams::default(), &Patch::Merge(&ready)).await.unwrap();
    let pools = Api::<MachineConfigPool>::all(client.clone());
    let pool: MachineConfigPool = serde_json::from_value(json!({
        "apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineConfigPool",
        "metadata": {"name": "worker"},
        "spec": {
            "nodeSelector": {"matchLabels": {"node-role.kubernetes.io/worker": ""}},
            "machineConfigSelector": {"matchLabels": {"machineconfiguration.openshift.io/role": "worker"}},
            "pinnedImageSets": [{"name": "tools"}],
        },
    }))
    .unwrap();
    pools.create(&PostParams::default(), &pool).await.unwrap();
    Recorder::new(client.clone()).ensure_spec(&node, "worker").await.unwrap();
    let sets = Api::<PinnedImageSet>::all(client.clone());
    let set = |images: &[&String]| {
        let images: Vec<_> = images.iter().map(|i| json!({"name": i})).collect();
        json!({
            "apiVersion": "machineconfiguration.openshift.io/v1", "kind": "PinnedImageSet",
            "metadata": {"name": "tools", "labels": {"machineconfiguration.openshift.io/role": "worker"}},
            "spec": {"pinnedImages": images},
        })
    };
    sets.create(&PostParams::default(), &serde_json::from_value(set(&[&first, &second])).unwrap()).await.unwrap();

    let mut settings = Settings::new(NODE.to_string(), root.clone());
    settings.recheck = Duration::from_secs(3600);
    let daemon = tokio::spawn(pinning::run(client.clone(), client.clone(), settings));
    let mcns = Api::<MachineConfigNode>::all(client.clone());
    let pinned = |image: &String| {
        let (runtime, image) = (&runtime, image.clone());
        async move { runtime.image(&image).await.unwrap().map(|i| i.pinned) }
    };
    let complete = Some(("False".to_string(), "All pinned image sets complete".to_string()));
    let healthy = Some(("False".to_string(), "All is good".to_string()));

    let first_seen = eventually("generation 1 pulled, pinned and reported", || async {
        satisfying(seen(&mcns).await, |s| {
            s.0 == [status("tools", 1, Some(1), None)] && s.1 == complete && s.2 == healthy
        })
    })
    .await;
    assert_eq!(first_seen.3, "");
    for image in [&first, &second] {
        eventually("the CRI to report the image pinned", || async {
            satisfying(pinned(image).await, |p| *p == Some(true))
        })
        .await;
    }

    // A digest the registry does not have: the set fails at generation 2, naming the image; what
    // generation 1 pinned stays pinned.
    let replace = |images: &[&String]| {
        let patch = json!({"spec": set(images)["spec"]});
        let sets = sets.clone();
        async move { sets.patch("tools", &PatchParams::default(), &Patch::Merge(&patch)).await.unwrap() }
    };
    replace(&[&first, &missing]).await;
    let failed = eventually("generation 2 to fail", || async {
        satisfying(seen(&mcns).await, |s| {
            s.0 == [status("tools", 2, Some(1), Some(2))] && s.2.as_ref().is_some_and(|d| d.0 == "True")
        })
    })
    .await;
    assert!(failed.3.contains(&missing) && failed.3.contains("not found"), "{}", failed.3);
    assert_eq!(
        failed.2.unwrap().1,
        "One or more PinnedImageSet is experiencing an error. See PinnedImageSet list for more details."
    );
    assert_eq!(pinned(&second).await, Some(true), "a failed generation unpins nothing");

    // Fixed: generation 3 lists the first image only; the second is unpinned.
    replace(&[&first]).await;
    eventually("generation 3 pinned and the node healthy again", || async {
        satisfying(seen(&mcns).await, |s| s.0 == [status("tools", 3, Some(3), None)] && s.2 == healthy)
    })
    .await;
    eventually("the second image unpinned", || async { satisfying(pinned(&second).await, |p| *p == Some(false)) })
        .await;
    assert_eq!(pinned(&first).await, Some(true));

    // The pool no longer lists the set: nothing is reported and nothing stays pinned.
    let unlisted = json!({"spec": {"pinnedImageSets": null}});
    pools.patch("worker", &PatchParams::default(), &Patch::Merge(&unlisted)).await.unwrap();
    eventually("no set reported", || async { satisfying(seen(&mcns).await, |s| s.0.is_empty() && s.1 == complete) })
        .await;
    eventually("the first image unpinned", || async { satisfying(pinned(&first).await, |p| *p == Some(false)) }).await;
    assert!(runtime.pinned_by_mco().await.unwrap().is_empty());
    daemon.abort();
}
