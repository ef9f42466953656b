//! Boot images on GCP: MachineSets on an old RHCOS image moved to the stream's image, one on a
//! custom image left alone and blocking upgrades until the admin puts RHCOS on it.

use kube::Api;
use mco_api::MachineConfiguration;
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
