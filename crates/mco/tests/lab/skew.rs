//! Boot image skew enforced by hand (Manual): a machine from a too-old boot image refused by the
//! server or by firstboot until re-provisioned, an old recorded boot image blocking upgrades; and a
//! custom pool whose OS image has no kubelet leaving its new node not joined.

use k8s_openapi::api::core::v1::Node;
use kube::Api;
use mco_api::{MachineConfigPool, MachineConfiguration};
use mco_testenv::eventually;
use serde_json::json;

use crate::common::{stderr, stdout};
use crate::support::*;

pub async fn manual_skew_refuses_a_too_old_boot_image_until_reprovisioned(lab: &mut Lab) {
    let client = lab.client.clone();
    let configurations: Api<MachineConfiguration> = Api::all(client.clone());
    let nodes: Api<Node> = Api::all(client.clone());
    let old = mco_lab::images::OLD_BOOT_VERSION;
    // The next worker's name: the lab's workers are worker-0 to worker-N-1.
    let new = format!("worker-{}", lab.workers().len());

    // The admin enforces skew by hand, recording the cluster's boot images as current.
    lab.apply("skew-current", &skew_manual(mco_lab::images::BOOT_VERSION));
    wait_skew_recorded(&configurations, "the Manual skew status", mco_lab::images::BOOT_VERSION, |skew| {
        skew.manual.as_ref()?.rhcos_version.clone()
    })
    .await;

    // A machine from the old boot image that says its version: the server refuses its config.
    let add = lab.mco(&["lab", "add-node", "--name", &new, "--boot-image", "old"]);
    let said = stdout(&add);
    assert_eq!(add.get_output().status.code(), Some(1), "{said}\n{}", stderr(&add));
    assert!(
        said.contains(&format!("node {new} did not join: the Machine Config Server answered 403 Forbidden: ")),
        "{said}"
    );
    let too_old = format!(
        "this machine's boot image version is {old}: boot image is too old: RHCOS boot image version {old}(RHEL \
         version: 8.6) is below the minimum required RHEL version 9.2"
    );
    assert!(said.contains(&too_old), "{said}");
    let status = stdout(&lab.mco(&["lab", "status"]).success());
    assert!(
        status.contains(&format!("not joined: {new}: the Machine Config Server answered 403 Forbidden")),
        "{status}"
    );
    assert!(nodes.get_opt(&new).await.unwrap().is_none());

    // The same machine without the header gets its config, and firstboot refuses to pivot.
    let add = lab.mco(&["lab", "add-node", "--name", &new, "--boot-image", "old", "--no-version-header"]);
    let said = stdout(&add);
    assert_eq!(add.get_output().status.code(), Some(1), "{said}\n{}", stderr(&add));
    let reason = format!(
        "boot image is too old: RHCOS boot image version {old}(RHEL version: 8.6) is below the minimum required RHEL \
         version 9.2"
    );
    assert!(said.contains(&format!("node {new} did not join: firstboot: This machine was not provisioned: {reason}")));
    let root = disk_root(lab, &new);
    assert!(read(&root.join("etc/issue.d/mco-boot-image-skew.issue")).contains(&reason));
    assert!(root.join("etc/ignition-machine-config-encapsulated.json").is_file(), "firstboot must leave it");
    let served: serde_json::Value =
        serde_json::from_str(&read(&root.join("etc/machine-config-daemon/boot-image-skew-enforcement.json"))).unwrap();
    assert_eq!(served["mode"], "Manual", "{served}");
    assert!(nodes.get_opt(&new).await.unwrap().is_none());

    // Re-provisioned from the current boot image, it joins and the pool counts it updated.
    let add = lab.mco(&["lab", "add-node", "--name", &new]);
    assert!(add.get_output().status.success(), "{}\n{}", stdout(&add), stderr(&add));
    assert!(stdout(&add).contains(&format!("node {new} joined")));
    let workers = lab.workers();
    assert_eq!(workers.last(), Some(&new), "{workers:?}");
    eventually("every worker updated, the new one too", || async {
        let status = pool(&client).await.status.unwrap_or_default();
        let counts = (status.machine_count, status.updated_machine_count);
        let every = Some(workers.len() as i32);
        if counts == (every, every) { Ok(()) } else { Err(counts) }
    })
    .await;
    let status = stdout(&lab.mco(&["lab", "status"]).success());
    let joined = format!("nodes: {MASTER}, {}", workers.join(", "));
    assert!(status.contains(&joined) && !status.contains(&format!("not joined: {new}")), "{status}");
}

pub async fn an_old_recorded_boot_image_blocks_upgrades(lab: &mut Lab) {
    let old = mco_lab::images::OLD_BOOT_VERSION;
    // Recording an older boot image blocks cluster upgrades, with upstream's message.
    lab.apply("skew-old", &skew_manual(old));
    let kubeconfig = lab.state_dir().join("kubeconfig");
    let blocked = format!(
        "Upgradeable: False (ClusterBootImageSkewError): Upgrades have been disabled because the cluster is using \
         RHCOS boot image version {old}(RHEL version: 8.6), which is below the minimum required RHEL version 9.2. To \
         enable upgrades, please update your boot images or disable boot image skew enforcement by following the \
         documentation at https://docs.redhat.com/en/documentation/openshift_container_platform/4.22/html/\
         machine_configuration/mco-update-boot-skew-mgmt"
    );
    status_showing(&kubeconfig, &blocked).await;
}

pub async fn a_pool_whose_image_has_no_kubelet_leaves_its_new_node_not_joined(lab: &mut Lab) {
    let client = lab.client.clone();
    let nodes: Api<Node> = Api::all(client.clone());
    // A pool whose OS image has no kubelet (the base image, without the node layer): its new node
    // pivots and reboots into it, cannot start a kubelet, and is reported as not joined, with
    // the reason; the lab's other nodes run on. (A custom pool of no node yet, as an admin makes
    // one for infrastructure nodes: it serves the config it rendered at once.)
    let base = base_os_image(lab);
    let infra = json!({
        "apiVersion": "machineconfiguration.openshift.io/v1",
        "kind": "MachineConfigPool",
        "metadata": {"name": "infra"},
        "spec": {
            "machineConfigSelector": {"matchExpressions": [{
                "key": "machineconfiguration.openshift.io/role", "operator": "In", "values": ["worker", "infra"],
            }]},
            "nodeSelector": {"matchLabels": {"node-role.kubernetes.io/infra": ""}},
        },
    });
    lab.apply("infra-pool", &infra.to_string());
    lab.apply("99-infra-base-os", &os_image_mc("99-infra-base-os", &base).replace("role: worker", "role: infra"));
    eventually("the infra pool to serve the base image", || async {
        let pools: Api<MachineConfigPool> = Api::all(client.clone());
        let served = pools.get("infra").await.unwrap().status.and_then(|s| s.configuration?.name).unwrap_or_default();
        let mcs = Api::<mco_api::MachineConfig>::all(client.clone());
        let rendered = if served.is_empty() { None } else { mcs.get_opt(&served).await.unwrap() };
        let image = rendered.map(|mc| mc.spec.os_image_url);
        if image.as_deref() == Some(base.as_str()) { Ok(()) } else { Err((served, image)) }
    })
    .await;
    let add = lab.mco(&["lab", "add-node", "--pool", "infra", "--name", "infra-0"]);
    let said = stdout(&add);
    assert_eq!(add.get_output().status.code(), Some(1), "{said}\n{}", stderr(&add));
    assert!(
        said.contains("node infra-0 did not join: ") && said.contains("has no kubelet (/usr/bin/kubelet)"),
        "{said}"
    );
    assert!(nodes.get_opt("infra-0").await.unwrap().is_none());
    let status = stdout(&lab.mco(&["lab", "status"]).success());
    assert!(
        status.contains("not joined: infra-0: ")
            && status.contains(&format!("nodes: {MASTER}, {}", lab.workers().join(", "))),
        "{status}"
    );
    let worker = nodes.get("worker-0").await.unwrap();
    assert!(mco_lab::node::is_ready(&worker), "{}", summary(&worker));
}
