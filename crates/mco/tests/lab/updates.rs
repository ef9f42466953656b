//! Updates of every kind on the worker pool: a new OS booted by a real reboot, a KubeletConfig,
//! image mirrors, pinned images, a paused pool, a bad MachineConfig, a node that cannot apply, a daemon restarted
//! mid-update, and an upgrade of mco itself.

use std::path::Path;

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::{Api, ResourceExt as _};
use mco_api::constants::{DESIRED_CONFIG_ANNOTATION, MCO_NAMESPACE, STATE_ANNOTATION};
use mco_testenv::{eventually, satisfying};
use serde_json::json;

use crate::common::{stderr, stdout};
use crate::support::*;

pub async fn an_os_update_is_booted_by_a_real_reboot(lab: &mut Lab) {
    let client = lab.client.clone();
    let current = rolled_out(lab, "").await;
    ensure_workload(lab).await;
    // An OS update is booted by a real reboot: each node's machine is powered off (its kubelet
    // and containers die), boots the new deployment, whose kubelet brings the Node back, which
    // now reports the new OS image.
    let update = os_update(lab, lab.status()["osImage"].as_str().unwrap(), "update", UPDATED_OS);
    lab.apply("99-worker-os-update", &os_image_mc("99-worker-os-update", &update));
    rolled_out(lab, &current).await;
    workers_report_os(lab, |os| os == UPDATED_OS).await;
    workload_serving(&client).await;
}

pub async fn a_kubelet_config_reaches_the_kubelets(lab: &mut Lab) {
    let client = lab.client.clone();
    let mut current = rolled_out(lab, "").await;
    ensure_workload(lab).await;
    // A KubeletConfig reaches the kubelets: its generated MachineConfig (the pool's kubelet.conf
    // from upstream's template, maxPods 42) rolls out, and after their reboot every Node reports
    // the capacity its kubelet read; deleting it rolls back to the lab's kubelet.conf.
    let max_pods = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/lab/kubeletconfig-max-pods.yaml"),
    );
    lab.apply("kubeletconfig-max-pods", &max_pods.unwrap());
    current = rolled_out(lab, &current).await;
    pods_capacity(lab, "42").await;
    Api::<mco_api::KubeletConfig>::all(client.clone()).delete("max-pods", &Default::default()).await.unwrap();
    rolled_out(lab, &current).await;
    pods_capacity(lab, "110").await;
    workload_serving(&client).await;
}

pub async fn an_image_mirror_set_reaches_every_workers_registries_conf(lab: &mut Lab) {
    let client = lab.client.clone();
    let mut current = rolled_out(lab, "").await;
    ensure_workload(lab).await;
    // The cluster's image configuration: an ImageDigestMirrorSet becomes the worker pool's
    // 99-worker-generated-registries (registries.conf with the mirror, written by the image
    // configuration controller, on top of the pool's own) and reaches every worker. The workers
    // run containerd: the CRI-O
    // reload the change calls for is skipped, not failed. Deleting the set takes the mirror away.
    let set = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/image-config/image-digest-mirror-set.yaml"),
    );
    lab.apply("image-digest-mirror-set", &set.unwrap());
    current = rolled_out(lab, &current).await;
    // The pool's own registries.conf (the lab registry, insecure) is kept beside the mirror.
    let lab_registry = format!("location = \"{}\"", lab_registry(lab));
    for root in worker_roots(lab) {
        let conf = read(&root.join("etc/containers/registries.conf"));
        assert!(
            conf.contains("location = \"registry.example.com/team\"")
                && conf.contains("location = \"mirror.example.com/team\"")
                && conf.contains(&lab_registry),
            "{}: {conf}",
            root.display()
        );
    }
    Api::<mco_api::image_config::ImageDigestMirrorSet>::all(client.clone())
        .delete("example-mirrors", &Default::default())
        .await
        .unwrap();
    rolled_out(lab, &current).await;
    for root in worker_roots(lab) {
        let conf = std::fs::read_to_string(root.join("etc/containers/registries.conf")).unwrap_or_default();
        assert!(!conf.contains("mirror.example.com"), "{}: {conf}", root.display());
    }
    workload_serving(&client).await;
}

pub async fn a_pinned_image_set_is_pulled_and_pinned_on_every_worker(lab: &mut Lab) {
    let client = lab.client.clone();
    rolled_out(lab, "").await;
    let worker_count = lab.workers().len();
    // A PinnedImageSet for the worker pool (by its role label, as upstream selects them): every
    // worker's containerd really pulls the image from the lab registry (by a name no pod uses)
    // and pins it, its MachineConfigNode and the pool's synchronizer say so; deleting the set
    // unpins it. No rollout: pinning needs no new config.
    let registry = lab_registry(lab);
    let pinned_image =
        format!("{registry}/lab/workload@{}", registry_digest(lab, &format!("{registry}/lab/workload:1")));
    lab.apply("pinnedimageset-workload", &pinned_image_set("workload", &pinned_image));
    eventually("every worker's MachineConfigNode to have the set at generation 1", || async {
        satisfying(workers_pinned_image_sets(&client).await, |seen| {
            seen.len() == worker_count && seen.iter().all(|sets| sets == &[("workload".to_string(), Some(1), Some(1))])
        })
    })
    .await;
    eventually("every worker's containerd to report the image pinned", || async {
        satisfying(workers_pinned(lab, &pinned_image).await, |seen| seen.iter().all(|p| p == &Ok(Some(true))))
    })
    .await;
    eventually("the worker pool's PinnedImageSets synchronizer to count every worker", || async {
        let status = pool(&client).await.status.unwrap_or_default();
        let synchronizer = status.pool_synchronizers_status.unwrap_or_default();
        let counts: Vec<(String, i64, i64)> = synchronizer
            .into_iter()
            .map(|s| (s.pool_synchronizer_type, s.machine_count, s.updated_machine_count))
            .collect();
        satisfying(counts, |c| c == &[("PinnedImageSets".to_string(), worker_count as i64, worker_count as i64)])
    })
    .await;
    Api::<mco_api::PinnedImageSet>::all(client.clone()).delete("workload", &Default::default()).await.unwrap();
    eventually("the image unpinned on every worker", || async {
        satisfying(workers_pinned(lab, &pinned_image).await, |seen| seen.iter().all(|p| p == &Ok(Some(false))))
    })
    .await;
    eventually("no worker's MachineConfigNode to list a set", || async {
        satisfying(workers_pinned_image_sets(&client).await, |seen| seen.iter().all(Vec::is_empty))
    })
    .await;
}

pub async fn a_paused_pool_moves_no_node(lab: &mut Lab) {
    let client = lab.client.clone();
    let current = rolled_out(lab, "").await;
    // A paused pool gets a new target but no node moves; unpausing resumes.
    set_pool(&client, json!({ "paused": true })).await;
    lab.apply("99-worker-paused", &file_mc("99-worker-paused", "/etc/lab/paused", "paused\n"));
    // The node controller's status carries the generation it planned for: once it is the one
    // with the new target, the controller has seen the target and moved no node for it.
    let paused_target = eventually("the node controller's status of the paused pool's new target", || async {
        let pool = pool(&client).await;
        let observed = pool.status.as_ref().and_then(|s| s.observed_generation);
        satisfying((target(&pool), pool.metadata.generation, observed), |(target, generation, observed)| {
            *target != current && generation == observed
        })
    })
    .await
    .0;
    let nodes: Api<Node> = Api::all(client.clone());
    let targeted: Vec<String> = nodes
        .list(&workers())
        .await
        .unwrap()
        .iter()
        .filter(|n| mco_rollout::node::annotation(n, DESIRED_CONFIG_ANNOTATION) == Some(&paused_target))
        .map(summary)
        .collect();
    assert!(targeted.is_empty(), "nodes of the paused pool targeted: {targeted:?}");
    for root in worker_roots(lab) {
        assert!(!root.join("etc/lab/paused").exists(), "a node of the paused pool updated: {}", root.display());
    }
    set_pool(&client, json!({ "paused": false })).await;
    rolled_out(lab, &current).await;
    for root in worker_roots(lab) {
        assert_eq!(read(&root.join("etc/lab/paused")), "paused\n");
    }
}

pub async fn a_bad_machine_config_degrades_the_render_and_touches_no_node(lab: &mut Lab) {
    let client = lab.client.clone();
    let current = rolled_out(lab, "").await;
    // A bad MachineConfig: the pool is RenderDegraded with the reason and no node is touched;
    // deleting it clears the condition.
    lab.apply("99-worker-bad", &file_mc("99-worker-bad", "relative/path", "bad\n"));
    let message = wait_condition(&client, "RenderDegraded", true).await;
    assert!(message.contains("99-worker-bad"), "{message}");
    assert_eq!(target(&pool(&client).await), current);
    let nodes: Api<Node> = Api::all(client.clone());
    for node in nodes.list(&workers()).await.unwrap() {
        let desired = mco_rollout::node::annotation(&node, mco_api::constants::DESIRED_CONFIG_ANNOTATION);
        assert_eq!(desired, Some(current.as_str()), "{}", summary(&node));
    }
    Api::<mco_api::MachineConfig>::all(client.clone()).delete("99-worker-bad", &Default::default()).await.unwrap();
    wait_condition(&client, "RenderDegraded", false).await;
}

pub async fn a_node_that_cannot_apply_degrades_and_recovers(lab: &mut Lab) {
    let client = lab.client.clone();
    let current = rolled_out(lab, "").await;
    // A node that cannot apply goes Degraded with the reason; the pool says NodeDegraded; the
    // daemon retries and the rollout completes once the cause is gone.
    set_pool(&client, json!({ "maxUnavailable": 1 })).await;
    let blocked = node_root(lab, "worker-0").join("etc/lab/blocked");
    std::fs::create_dir_all(blocked.join("in-the-way")).unwrap();
    lab.apply("99-worker-blocked", &file_mc("99-worker-blocked", "/etc/lab/blocked", "blocked\n"));
    let message = wait_condition(&client, "NodeDegraded", true).await;
    assert!(message.contains("worker-0"), "{message}");
    std::fs::remove_dir_all(&blocked).unwrap();
    rolled_out(lab, &current).await;
    // Seen through the machine as it runs now (it rebooted for the file).
    assert_eq!(read(&node_root(lab, "worker-0").join("etc/lab/blocked")), "blocked\n");
}

pub async fn a_daemon_restarted_mid_update_leaves_no_half_done_node(lab: &mut Lab) {
    let client = lab.client.clone();
    let nodes: Api<Node> = Api::all(client.clone());
    let current = rolled_out(lab, "").await;
    // A daemon restarted in the middle of its node's update (its pod deleted, as an upgrade of mco
    // or an administrator would) leaves no half-done node: the DaemonSet's new pod takes the
    // update up from the node's journal and the rollout completes.
    lab.apply("99-worker-restart", &file_mc("99-worker-restart", "/etc/lab/restart", "restart\n"));
    let (updating, deleted) = eventually("a node Working on the new config, with its daemon's pod", || async {
        let listed = nodes.list(&workers()).await.unwrap().items;
        let working = listed.iter().find(|n| mco_rollout::node::annotation(n, STATE_ANNOTATION) == Some("Working"));
        let pod = match working {
            Some(node) => daemon_pod(&client, &node.name_any()).await,
            None => None,
        };
        match (working, pod) {
            (Some(node), Some(pod)) => Ok((node.name_any(), pod.name_any())),
            _ => Err(listed.iter().map(summary).collect::<Vec<_>>()),
        }
    })
    .await;
    let mco_pods: Api<Pod> = Api::namespaced(client.clone(), MCO_NAMESPACE);
    mco_pods.delete(&deleted, &Default::default()).await.unwrap();
    rolled_out(lab, &current).await;
    for root in worker_roots(lab) {
        assert_eq!(read(&root.join("etc/lab/restart")), "restart\n", "{}", root.display());
    }
    let replacement = daemon_pod(&client, &updating).await.map(|p| p.name_any());
    assert!(replacement.is_some_and(|name| name != deleted), "{updating}'s daemon pod {deleted} was not replaced");
}

pub async fn upgrading_mco_rolls_its_pods_and_reboots_no_node(lab: &mut Lab) {
    let client = lab.client.clone();
    let nodes: Api<Node> = Api::all(client.clone());
    let current = rolled_out(lab, "").await;
    let worker_count = lab.workers().len();
    let mco_pods: Api<Pod> = Api::namespaced(client.clone(), MCO_NAMESPACE);
    // Upgrading mco itself: a new image digest applied with deploy/ rolls the controller's and the
    // daemons' pods, and no node is updated or rebooted for it.
    let boot_ids: Vec<String> =
        worker_roots(lab).iter().map(|root| read(&mco_apply::fsutil::host_path(root, BOOT_ID).unwrap())).collect();
    let installed = lab.mco(&["lab", "install", "--image-version", "lab-upgrade"]);
    assert!(installed.get_output().status.success(), "lab install: {}", stderr(&installed));
    let digest = stdout(&installed).trim().to_string();
    assert!(digest.starts_with("sha256:"), "{digest}");
    eventually("every mco pod on the new image", || async {
        let pods = mco_pods.list(&Default::default()).await.unwrap().items;
        let images: Vec<(String, String)> = pods
            .iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .map(|p| (p.name_any(), p.spec.as_ref().unwrap().containers[0].image.clone().unwrap_or_default()))
            .collect();
        let on_new = images.iter().filter(|(_, image)| image.ends_with(&format!("@{digest}"))).count();
        // Two controller pods, a daemon on every node and the control-plane node's server.
        if on_new == images.len() && images.len() == 2 + (worker_count + 1) + 1 { Ok(()) } else { Err(images) }
    })
    .await;
    for (root, before) in worker_roots(lab).iter().zip(&boot_ids) {
        assert_eq!(&read(&mco_apply::fsutil::host_path(root, BOOT_ID).unwrap()), before, "{} rebooted", root.display());
    }
    for node in nodes.list(&workers()).await.unwrap() {
        assert!(done_on(&node, &current), "{}", summary(&node));
    }
    assert_eq!(target(&pool(&client).await), current);
}
