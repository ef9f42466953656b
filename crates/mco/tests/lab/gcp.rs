//! Boot images on GCP: MachineSets on an old RHCOS image moved to the stream's image, one on a
//! custom image left alone and blocking upgrades until the admin puts RHCOS on it; the
//! ControlPlaneMachineSet moved once the admin opts it in.

use kube::Api;
use kube::api::{Patch, PatchParams};
use mco_api::constants::MACHINE_API_NAMESPACE;
use mco_api::operator::{MachineManagerResource, MachineManagerSelectorMode};
use mco_api::{ControlPlaneMachineSet, MachineConfiguration};
use mco_testenv::eventually;
use serde_json::json;

use crate::common::stdout;
use crate::support::*;

pub async fn an_old_rhcos_machineset_is_moved_and_a_custom_one_blocks_upgrades(lab: &mut Lab) {
    let status = stdout(&lab.mco(&["lab", "status"]).success());
    assert!(status.contains("\nplatform: gcp\n"), "{status}");
    let client = lab.client.clone();
    let kubeconfig = lab.state_dir().join("kubeconfig");
    let arch: mco_bootimage::Arch = std::env::consts::ARCH.parse().unwrap();
    let stream = mco_bootimage::Stream::parse(mco_lab::manifests::BOOT_IMAGES_STREAM.as_bytes()).unwrap();
    let stream_image = stream.gcp_image(arch).unwrap();

    // The cluster was installed at 4.12 and upgraded since (the lab's release is the newest entry).
    let release = mco_lab::manifests::LAB_RELEASE;
    lab.apply(
        "clusterversion",
        &json!({
            "apiVersion": "config.openshift.io/v1",
            "kind": "ClusterVersion",
            "metadata": {"name": "version"},
            "status": {
                "desired": {"version": release},
                "history": [{"version": release, "state": "Completed"}, {"version": "4.12.0", "state": "Completed"}],
            },
        })
        .to_string(),
    );
    // A MachineSet on an old RHCOS image, and one on the admin's own image.
    let golden = gcp_machineset("lab-worker-golden", GOLDEN_GCP_IMAGE);
    let rhcos = gcp_machineset("lab-worker-rhcos", OLD_RHCOS_GCP_IMAGE);
    lab.apply("machinesets", &format!("{golden}\n---\n{rhcos}\n"));

    // The controller moves the RHCOS one to the stream's image and skips the golden one; with a
    // MachineSet skipped, the boot images in use may be as old as the install (4.12.0): below
    // the limit, upgrades are blocked.
    wait_boot_image(&client, "lab-worker-rhcos", &stream_image).await;
    let blocked = "Upgradeable: False (ClusterBootImageSkewError): Upgrades have been disabled because the cluster \
                   is using OCP boot image version 4.12.0, which is below the minimum required version 4.13.0. To \
                   enable upgrades, please update your boot images or disable boot image skew enforcement by \
                   following the documentation at https://docs.redhat.com/en/documentation/\
                   openshift_container_platform/4.22/html/machine_configuration/mco-update-boot-skew-mgmt";
    status_showing(&kubeconfig, blocked).await;
    let configurations: Api<MachineConfiguration> = Api::all(client.clone());
    let progressing = eventually("the pass over both MachineSets", || async {
        let conditions = configurations.get("cluster").await.unwrap().status.and_then(|s| s.conditions);
        let passed = conditions.iter().flatten().find(|c| {
            c.type_ == "BootImageUpdateProgressing"
                && c.status == "False"
                && c.message.starts_with("Reconciled 1 of 2 MAPI MachineSets (1 skipped) | ")
        });
        passed.map(|c| c.message.clone()).ok_or(conditions)
    })
    .await;
    assert!(
        progressing.contains(&format!("lab-worker-golden: custom image: boot disk image {GOLDEN_GCP_IMAGE}")),
        "{progressing}"
    );
    // The skipped MachineSet is exactly as applied: its spec never changed.
    let held = machineset(&client, "lab-worker-golden").await;
    assert_eq!(held["spec"], golden["spec"]);
    assert_eq!(held["metadata"]["generation"], 1, "{held:#}");
    assert_eq!(held["metadata"]["labels"], golden["metadata"]["labels"]);

    // The admin's way out: an RHCOS image on it. The controller moves it to the stream's image,
    // nothing is skipped, and the boot image version recorded is the stream's release.
    lab.apply("golden-to-rhcos", &gcp_machineset("lab-worker-golden", OLD_RHCOS_GCP_IMAGE).to_string());
    wait_boot_image(&client, "lab-worker-golden", &stream_image).await;
    let status = status_showing(&kubeconfig, "Upgradeable: True").await;
    assert!(!status.contains("Upgradeable: False"), "{status}");
    let release = mco_lab::manifests::BOOT_IMAGES_RELEASE;
    wait_skew_recorded(&configurations, "the stream's release recorded as the boot image version", release, |skew| {
        skew.automatic.as_ref()?.ocp_version.clone()
    })
    .await;

    // The ControlPlaneMachineSet on an old RHCOS image: left alone (its manager is `None` unless
    // the admin opts in), then moved once opted in.
    let control_planes: Api<ControlPlaneMachineSet> = Api::namespaced(client.clone(), MACHINE_API_NAMESPACE);
    lab.apply("controlplanemachineset", &gcp_control_plane(OLD_RHCOS_GCP_IMAGE).to_string());
    let managed = |status: &Option<mco_api::operator::MachineConfigurationStatus>| {
        let managers = status.as_ref()?.managed_boot_images_status.as_ref()?.machine_managers.clone()?;
        let cpms = managers.into_iter().find(|m| m.resource == MachineManagerResource::ControlPlaneMachineSets)?;
        Some(cpms.selection.mode)
    };
    assert_eq!(managed(&configurations.get("cluster").await.unwrap().status), Some(MachineManagerSelectorMode::None));
    let opt_in = json!({"spec": {"managedBootImages": {"machineManagers": [
        {"resource": "controlplanemachinesets", "apiGroup": "machine.openshift.io", "selection": {"mode": "All"}},
    ]}}});
    configurations.patch("cluster", &PatchParams::default(), &Patch::Merge(&opt_in)).await.unwrap();
    eventually("the ControlPlaneMachineSet on the stream's image", || async {
        let cpms = serde_json::to_value(control_planes.get("cluster").await.unwrap()).unwrap();
        let image = cpms.pointer(&format!("{CONTROL_PLANE_PROVIDER_SPEC}/disks/0/image")).cloned();
        if image == Some(json!(stream_image)) { Ok(()) } else { Err(image) }
    })
    .await;
    eventually("the pass over the ControlPlaneMachineSet", || async {
        let conditions = configurations.get("cluster").await.unwrap().status.and_then(|s| s.conditions);
        let passed = conditions.iter().flatten().any(|c| {
            c.type_ == "BootImageUpdateProgressing"
                && c.status == "False"
                && c.message.contains(" | Reconciled 1 of 1 ControlPlaneMachineSets | ")
        });
        if passed { Ok(()) } else { Err(conditions) }
    })
    .await;

    // The boot image controller's grants (deploy/ with components/machine-api), each used by the
    // controller's pods in this run, and nothing they asked for refused.
    let boot_image_roles = [
        "ClusterRole/machine-config-controller-boot-images",
        "Role/openshift-machine-config-operator/machine-config-controller-boot-images",
        "Role/openshift-machine-api/machine-config-controller-machine-api",
    ];
    let unexercised = [
        ("create", "machineconfigurations", "MachineConfiguration cluster exists"),
        ("patch", "machineconfigurations", "the bootstrap controller wrote its opt-in before the handover"),
        ("update", "secrets", "the lab's stub user-data is spec 3 already: nothing to upgrade"),
    ];
    assert_rbac_matches_use(lab, CONTROLLER_ACCOUNT, &unexercised, Some(&boot_image_roles)).await;
}
