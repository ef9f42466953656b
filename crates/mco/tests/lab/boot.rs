//! The lab as it comes up: nodes booted with Ignition and pivoted, real kubelets and containerd,
//! mco's pods where upstream puts them, Prometheus scraping them, a workload on the real control
//! plane; and the lab taken down.

use std::path::Path;

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::ListParams;
use kube::{Api, ResourceExt as _};
use mco_api::constants::MCO_NAMESPACE;
use mco_testenv::eventually;
use serde_json::json;

use crate::common::{mco, stdout};
use crate::support::*;

pub async fn nodes_boot_with_ignition_pivot_and_join(lab: &mut Lab) {
    let client = lab.client.clone();
    // Every node booted with Ignition and pivoted on first boot: base config files in its root,
    // Done on the pool's first rendered config.
    let first = rolled_out(lab, "").await;
    for root in worker_roots(lab) {
        assert_eq!(read(&root.join("etc/mco-lab/role")), "worker\n");
        assert!(root.join("etc/ignition-machine-config-encapsulated.json.bak").is_file(), "{}", root.display());
    }
    // The lab for scripts: where its parts are, every node with its pool and directories.
    let lab_status = lab.mco(&["lab", "status", "-o", "json"]).success();
    let lab_status: serde_json::Value = serde_json::from_str(&stdout(&lab_status)).unwrap();
    assert_eq!(lab_status["kubeconfig"], json!(lab.state_dir().join("kubeconfig")));
    assert!(lab_status["registry"].as_str().is_some_and(|r| r.starts_with("127.0.0.1:")), "{lab_status}");
    assert!(lab_status["prometheus"].as_str().is_some(), "{lab_status}");
    let listed = lab_status["nodes"].as_array().unwrap();
    assert_eq!(listed.len(), NODES + 1, "{lab_status}");
    assert_eq!((&listed[0]["name"], &listed[0]["pool"]), (&json!(MASTER), &json!("master")), "{lab_status}");
    for (node, root) in listed[1..].iter().zip(worker_roots(lab)) {
        assert_eq!((&node["pool"], &node["state"], &node["root"]), (&json!("worker"), &json!("Joined"), &json!(root)));
        assert!(Path::new(node["sysroot"].as_str().unwrap()).join("ostree").is_dir(), "{node}");
    }
    let status = mco().args(["status", "--kubeconfig"]).arg(lab.state_dir().join("kubeconfig")).assert().success();
    let status = stdout(&status);
    // The nodes report the boot image they were installed from (the aleph file), not the image
    // they pivoted to.
    // The daemon reports it after the node's seeded annotations, so it may follow Done.
    let nodes: Api<Node> = Api::all(client.clone());
    eventually("every node reporting the boot image it was installed from", || async {
        let reported: Vec<(String, Option<serde_json::Value>)> = nodes
            .list(&workers())
            .await
            .unwrap()
            .iter()
            .map(|node| {
                let value = mco_rollout::node::annotation(node, mco_api::constants::BOOT_IMAGE_ANNOTATION);
                (summary(node), value.and_then(|v| serde_json::from_str(v).ok()))
            })
            .collect();
        let all = reported
            .iter()
            .all(|(_, image)| image.as_ref().is_some_and(|image| image["build"] == mco_lab::images::BOOT_VERSION));
        if all && reported.len() == NODES { Ok(()) } else { Err(reported) }
    })
    .await;
    for i in 0..NODES {
        let row = status.lines().find(|l| l.starts_with(&format!("worker-{i} "))).unwrap_or_else(|| panic!("{status}"));
        assert!(row.contains("Ready") && row.contains(&first) && row.contains("Done"), "{status}");
    }

    // The nodes are real: each Node was registered by its own kubelet, on its own containerd.
    for node in nodes.list(&Default::default()).await.unwrap() {
        let info = node.status.as_ref().and_then(|s| s.node_info.as_ref()).unwrap();
        assert_eq!(info.kubelet_version, "v1.36.3", "{}", summary(&node));
        // containerd 2, built by hack/kube-binaries.sh: not a containerd 1.x found on the host.
        assert!(info.container_runtime_version.starts_with("containerd://2."), "{info:?}");
    }
    // mco runs as it would on any cluster: each node's daemon is a pod of deploy/'s DaemonSet on
    // that node (which brought the node to Done above), under the daemon's own service account.
    let mco_pods: Api<Pod> = Api::namespaced(client.clone(), MCO_NAMESPACE);
    let daemons = mco_pods.list(&ListParams::default().labels("k8s-app=machine-config-daemon")).await.unwrap();
    let mut daemon_nodes: Vec<String> = daemons
        .iter()
        .map(|pod| {
            let owner = pod.owner_references().iter().find(|o| o.controller == Some(true)).map(|o| o.kind.as_str());
            let spec = pod.spec.as_ref().unwrap();
            // On Linux nodes only, as upstream's DaemonSet (its e2e TestOperatorLabel).
            let os = spec.node_selector.as_ref().and_then(|s| s.get("kubernetes.io/os")).map(String::as_str);
            assert_eq!(
                (owner, spec.service_account_name.as_deref(), os),
                (Some("DaemonSet"), Some("machine-config-daemon"), Some("linux")),
                "{}",
                pod.name_any()
            );
            spec.node_name.clone().unwrap_or_default()
        })
        .collect();
    daemon_nodes.sort();
    let every_node: Vec<String> =
        std::iter::once(MASTER.to_string()).chain((0..NODES).map(|i| format!("worker-{i}"))).collect();
    assert_eq!(daemon_nodes, every_node);
    // The server's pod on the control-plane node, as upstream's, serving machines that boot from
    // now on (the lab's load balancer sends them there: the bootstrap server has stopped).
    let servers = mco_pods.list(&ListParams::default().labels("k8s-app=machine-config-server")).await.unwrap();
    let server_nodes: Vec<Option<String>> =
        servers.iter().map(|p| p.spec.as_ref().and_then(|s| s.node_name.clone())).collect();
    assert_eq!(server_nodes, [Some(MASTER.to_string())]);
}

pub async fn prometheus_scrapes_every_mco_pod(lab: &mut Lab) {
    let client = lab.client.clone();
    let prometheus = lab.status()["prometheus"].as_str().unwrap().to_string();
    let mco_pods: Api<Pod> = Api::namespaced(client.clone(), MCO_NAMESPACE);
    // The lab's Prometheus scrapes every mco pod that declares a `metrics` port (the daemons on
    // every node, both controllers, the server) and evaluates mco's rules from deploy/.
    let with_metrics_port = |pod: &Pod| {
        let containers = pod.spec.iter().flat_map(|s| &s.containers);
        containers.flat_map(|c| c.ports.iter().flatten()).any(|p| p.name.as_deref() == Some("metrics"))
    };
    let mut expected: Vec<String> = mco_pods
        .list(&ListParams::default())
        .await
        .unwrap()
        .iter()
        .filter(|p| with_metrics_port(p))
        .map(|p| p.name_any())
        .collect();
    expected.sort();
    assert!(expected.len() >= NODES + 1 + 2, "mco pods with a metrics port: {expected:?}");
    eventually("Prometheus scraping every mco pod", || async {
        let targets = prometheus_api(&prometheus, "/api/v1/targets?state=active").await;
        let mut up: Vec<String> = targets["activeTargets"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|t| t["health"] == "up")
            .map(|t| t["labels"]["pod"].as_str().unwrap_or_default().to_string())
            .collect();
        up.sort();
        if up == expected { Ok(()) } else { Err(targets) }
    })
    .await;
    let rules = prometheus_api(&prometheus, "/api/v1/rules").await;
    let groups: Vec<&str> = rules["groups"].as_array().unwrap().iter().filter_map(|g| g["name"].as_str()).collect();
    assert!(groups.contains(&"mcc-drain-error") && groups.contains(&"mcd-reboot-error"), "{groups:?}");
}

pub async fn a_workload_runs_on_the_real_control_plane(lab: &mut Lab) {
    let client = lab.client.clone();
    // The control plane is real: the workload's ReplicaSet makes its pods, the scheduler binds
    // them to the nodes, their kubelets run them from the lab registry's image, the disruption
    // controller computes the budget's status, kube-proxy makes the Services reachable from pods.
    ensure_workload(lab).await;
    let said = probe_pod(&client).await;
    let pages: Vec<&str> = said.lines().collect();
    let pods: Api<Pod> = Api::namespaced(client.clone(), WORKLOAD_NAMESPACE);
    let mut names: Vec<String> = pods
        .list(&ListParams::default().labels("app=web"))
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|p| p.metadata.name)
        .collect();
    names.sort();
    // Each pod's own page by its address, one of them again through the Service, then the API.
    let mut by_address = pages[..3].to_vec();
    by_address.sort();
    assert_eq!(by_address, names, "{said}");
    assert!(names.iter().any(|n| n == pages[3]) && pages[4..] == ["api-reachable"], "{said}");
}

pub async fn lab_down_stops_everything(lab: &mut Lab) {
    lab.down();
}
