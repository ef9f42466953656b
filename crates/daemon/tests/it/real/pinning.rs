//! The daemon's PinnedImageSets against a real API server, a real containerd (v2) and a real
//! registry: the images of the node's pool's sets are pulled and pinned as the CRI reports them
//! (one named as containerd renames it: `docker.io/<name>`), the MachineConfigNode says how far
//! the node is (upstream's conditions and generations, a set listed or dropped with nothing to
//! pull, a set made again at generation 1), a failing pull names the image and keeps what was
//! pinned, and images no set lists are unpinned. The daemon reads its Node with the node's own
//! credentials. The test plays the PinnedImageSet controller (it sets the pool's list) and the
//! node controller (it makes the MachineConfigNode).

use std::time::Duration;

use mco_api::machineconfiguration::machine_config_node_condition::{
    PINNED_IMAGE_SETS_DEGRADED, PINNED_IMAGE_SETS_PROGRESSING,
};
use mco_api::{MachineConfigNode, MachineConfigNodeStatusPinnedImageSet, MachineConfigPool, PinnedImageSet};
use mco_cri::{CONTAINERD_SOCKET, Runtime};
use mco_daemon::pinning::{self, Settings};
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
    let host = registry.host();
    let push = |repository: &str| {
        let label = format!("name={repository}");
        let name_tag = format!("{repository}:1");
        push_buildah_image(tmp.path(), &host, &registry.registries_conf, &name_tag, &["--label", &label], None)
    };
    let first = format!("{host}/lab/first@{}", push("lab/first"));
    let second = format!("{host}/lab/second@{}", push("lab/second"));
    // Served as Docker Hub's `library/official`: containerd names it `docker.io/library/official@...`.
    let official = format!("docker.io/official@{}", push("library/official"));
    let missing = format!("{host}/lab/missing@sha256:{}", "2".repeat(64));
    let root = tmp.path().join("root");
    let socket = root.join(CONTAINERD_SOCKET.trim_start_matches('/'));
    let registries = [(host.as_str(), host.as_str()), ("docker.io", host.as_str())];
    let containerd = Containerd::start(&tmp.path().join("containerd"), &socket, &registries, None).unwrap();
    let runtime = containerd
        .eventually_serving(|| async {
            let runtime = Runtime::connect(&socket).await?;
            runtime.image("127.0.0.1:1/none:1").await?;
            Ok(runtime)
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
    let list = |names: &[&str]| {
        let refs: Vec<_> = names.iter().map(|n| json!({"name": n})).collect();
        let pools = pools.clone();
        let patch =
            json!({"spec": {"pinnedImageSets": if refs.is_empty() { serde_json::Value::Null } else { json!(refs) }}});
        async move { pools.patch("worker", &PatchParams::default(), &Patch::Merge(&patch)).await.unwrap() }
    };
    Recorder::new(client.clone()).ensure_spec(&node, "worker").await.unwrap();
    let sets = Api::<PinnedImageSet>::all(client.clone());
    let set = |name: &str, images: &[&String]| -> PinnedImageSet {
        let images: Vec<_> = images.iter().map(|i| json!({"name": i})).collect();
        serde_json::from_value(json!({
            "apiVersion": "machineconfiguration.openshift.io/v1", "kind": "PinnedImageSet",
            "metadata": {"name": name, "labels": {"machineconfiguration.openshift.io/role": "worker"}},
            "spec": {"pinnedImages": images},
        }))
        .unwrap()
    };
    sets.create(&PostParams::default(), &set("tools", &[&first, &second, &official])).await.unwrap();

    let mut settings = Settings::new(NODE.to_string(), root.clone());
    settings.recheck = Duration::from_secs(3600);
    let node_kubeconfig = tmp.path().join("node.kubeconfig");
    env.write_client_kubeconfig(&node_kubeconfig, &format!("system:node:{NODE}"), Some("system:nodes")).unwrap();
    let node_client = mco_testenv::client_from_kubeconfig(&node_kubeconfig).await.unwrap();
    let daemon = tokio::spawn(pinning::run(client.clone(), node_client, settings));
    let mcns = Api::<MachineConfigNode>::all(client.clone());
    let pinned = |image: &String| {
        let (runtime, image) = (&runtime, image.clone());
        async move { runtime.image(&image).await.unwrap().map(|i| i.pinned) }
    };
    let all_pinned = |images: Vec<String>, wanted: bool| {
        let pinned = &pinned;
        async move {
            let mut seen = Vec::new();
            for image in images {
                let state = pinned(&image).await;
                seen.push((image, state));
            }
            satisfying(seen, |seen| seen.iter().all(|(_, p)| *p == Some(wanted)))
        }
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
    eventually("the CRI to report the images pinned", || {
        all_pinned(vec![first.clone(), second.clone(), official.clone()], true)
    })
    .await;

    // A second set of an image already pinned: nothing to pull or pin, but it is listed, and
    // dropped again when the pool no longer lists it.
    sets.create(&PostParams::default(), &set("more", &[&first])).await.unwrap();
    list(&["tools", "more"]).await;
    eventually("the second set listed", || async {
        satisfying(seen(&mcns).await, |s| s.0 == [status("tools", 1, Some(1), None), status("more", 1, Some(1), None)])
    })
    .await;
    list(&["tools"]).await;
    sets.delete("more", &Default::default()).await.unwrap();
    eventually("the second set dropped", || async {
        satisfying(seen(&mcns).await, |s| s.0 == [status("tools", 1, Some(1), None)])
    })
    .await;

    // A digest the registry does not have: the set fails at generation 2, naming the image; what
    // generation 1 pinned stays pinned.
    let replace = |images: &[&String]| {
        let patch = json!({"spec": {"pinnedImages": images.iter().map(|i| json!({"name": i})).collect::<Vec<_>>()}});
        let sets = sets.clone();
        async move { sets.patch("tools", &PatchParams::default(), &Patch::Merge(&patch)).await.unwrap() }
    };
    replace(&[&first, &missing, &official]).await;
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

    // Fixed: generation 3 no longer lists the second image, which is unpinned; the image
    // containerd renamed stays pinned.
    replace(&[&first, &official]).await;
    eventually("generation 3 pinned and the node healthy again", || async {
        satisfying(seen(&mcns).await, |s| s.0 == [status("tools", 3, Some(3), None)] && s.2 == healthy)
    })
    .await;
    eventually("the second image unpinned", || all_pinned(vec![second.clone()], false)).await;
    assert_eq!(pinned(&first).await, Some(true));
    assert_eq!(pinned(&official).await, Some(true), "an image containerd renamed stays pinned");

    // The set deleted and made again: generation 1 again, below what the MachineConfigNode had.
    sets.delete("tools", &Default::default()).await.unwrap();
    sets.create(&PostParams::default(), &set("tools", &[&first])).await.unwrap();
    eventually("the set made again reported at generation 1", || async {
        satisfying(seen(&mcns).await, |s| s.0 == [status("tools", 1, Some(1), None)] && s.2 == healthy)
    })
    .await;
    eventually("the renamed image unpinned", || all_pinned(vec![official.clone()], false)).await;

    // The pool no longer lists the set: nothing is reported and nothing stays pinned.
    list(&[]).await;
    eventually("no set reported", || async { satisfying(seen(&mcns).await, |s| s.0.is_empty() && s.1 == complete) })
        .await;
    eventually("the first image unpinned", || all_pinned(vec![first.clone()], false)).await;
    assert!(runtime.pinned_by_mco().await.unwrap().is_empty());
    daemon.abort();
}
