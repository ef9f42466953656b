//! The boot image controller against a real API server (GCP MachineSets and
//! ControlPlaneMachineSets: no cloud API needed; AWS is in `ec2.rs`).

use crate::common;

use std::time::Duration;

use common::{
    Cluster, control_plane, eventually, gcp_boot_image, machineset, satisfying, set_gcp_boot_image, testdata,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::ResourceExt as _;
use kube::api::{Patch, PatchParams, PostParams};
use mco_api::constants::{BOOT_IMAGE_UPDATES_OPTED_IN_AT_ANNOTATION, STUB_IGNITION_UPGRADED_TO_ANNOTATION};
use mco_api::machine::ProviderSpecHolder as _;
use mco_api::operator::{
    BootImageSkewEnforcementModeStatus as Mode, MachineManagerResource, MachineManagerSelectorMode,
};
use mco_bootimage::Arch;
use mco_bootimage_controller::Options;
use serde_json::json;

const OLD_IMAGE: &str = "projects/rhcos-cloud/global/images/rhcos-411-86-202205051017-0-gcp-x86-64";
const NEW_IMAGE: &str = "projects/rhcos-cloud/global/images/rhcos-416-94-202405291527-0-gcp-x86-64";
const CUSTOM_IMAGE: &str = "projects/my-project/global/images/golden-rhcos";
const PROGRESSING: &str = "BootImageUpdateProgressing";
const DEGRADED: &str = "BootImageUpdateDegraded";

fn options() -> Options {
    Options { retry_delay: Duration::from_secs(1), control_plane_arch: Arch::X86_64, ec2_endpoint_url: None }
}

fn stream_416() -> String {
    std::fs::read_to_string(testdata("rhcos-4.16-stream.json")).unwrap()
}

/// A stable GCP cluster installed at `install` and now at 4.16, with the 4.16 boot images and
/// the worker stub secret.
async fn gcp_cluster(install: &str) -> Cluster {
    let history: Vec<(&str, &str)> = if install == "4.16.0" {
        vec![("4.16.0", "Completed")]
    } else {
        vec![("4.16.0", "Completed"), (install, "Completed")]
    };
    let cluster = Cluster::start("GCP", &history).await;
    cluster.set_boot_images(&stream_416(), "4.16.0").await;
    cluster.create_user_data_secret().await;
    cluster
}

async fn wait_image(cluster: &Cluster, name: &str, image: &str) {
    eventually(&format!("{name} on {image}"), || async {
        let ms = cluster.machinesets().get(name).await.unwrap();
        satisfying(gcp_boot_image(&ms), |current| current == image)
    })
    .await;
}

#[tokio::test]
async fn patches_rhcos_machinesets_skips_others_and_upgrades_the_stub() {
    let mut cluster = gcp_cluster("4.12.0").await;
    let ours = cluster.create_machineset(&machineset("gcp.yaml", "worker-a")).await;
    let mut custom = machineset("gcp.yaml", "worker-custom");
    set_gcp_boot_image(&mut custom, CUSTOM_IMAGE);
    let custom = cluster.create_machineset(&custom).await;
    let mut owned = machineset("gcp.yaml", "worker-owned");
    owned.metadata.owner_references = Some(vec![OwnerReference {
        api_version: "hive.openshift.io/v1".into(),
        kind: "MachinePool".into(),
        name: "pool".into(),
        uid: "0c1d2e3f-0000-0000-0000-000000000001".into(),
        ..Default::default()
    }]);
    let owned = cluster.create_machineset(&owned).await;
    cluster.start_controller(options());

    wait_image(&cluster, "worker-a", NEW_IMAGE).await;
    let patched = cluster.machinesets().get("worker-a").await.unwrap();
    let spec = patched.provider_spec().unwrap();
    // Only the boot disk's image changed: unknown keys and the data disk are kept.
    let mut expected = ours.provider_spec().unwrap().clone();
    expected["disks"][0]["image"] = json!(NEW_IMAGE);
    assert_eq!(spec, &expected);
    assert_eq!(spec["futureProviderKey"], "keep-me");

    // The status of an earlier sync (before the patch) is False too: wait for this sync's.
    let message = cluster
        .condition(PROGRESSING, |status, message| {
            status == "False" && message.starts_with("Reconciled 1 of 3 MAPI MachineSets (2 skipped) | ")
        })
        .await;
    assert!(message.contains(&format!("worker-custom: custom image: boot disk image {CUSTOM_IMAGE}")), "{message}");
    assert!(message.contains("worker-owned: has OwnerReference MachinePool/pool"), "{message}");
    cluster.condition(DEGRADED, |status, _| status == "False").await;
    // Skipped MachineSets are left exactly as they were.
    for before in [custom, owned] {
        let after = cluster.machinesets().get(&before.name_any()).await.unwrap();
        assert_eq!(after.spec, before.spec);
        assert_eq!(after.resource_version(), before.resource_version());
    }

    // The stub was upgraded to spec 3 before the MachineSet moved to a spec-3-only boot image.
    let secret = cluster.secrets().get("worker-user-data").await.unwrap();
    assert_eq!(secret.annotations().get(STUB_IGNITION_UPGRADED_TO_ANNOTATION).map(String::as_str), Some("3.5.0"));
    let stub: serde_json::Value = serde_json::from_slice(&secret.data.unwrap()["userData"].0).unwrap();
    assert_eq!(stub["ignition"]["version"], "3.5.0");
    assert_eq!(stub["ignition"]["config"]["merge"][0]["source"], "https://api-int.ci.example.com:22623/config/worker");

    // Default-on platform: opted in, Automatic skew; skips reset the recorded version to the
    // install version, 4.12.0, below the limit: upgrades are blocked.
    // The operator part of the sync writes these after the MachineSets' pass: wait for them.
    let configuration = eventually("the opt-in annotation and the skew status", || async {
        let configuration = cluster.configuration().await;
        satisfying(configuration, |configuration| {
            configuration.as_ref().is_some_and(|c| {
                c.annotations().contains_key(BOOT_IMAGE_UPDATES_OPTED_IN_AT_ANNOTATION)
                    && c.status
                        .as_ref()
                        .and_then(|s| s.boot_image_skew_enforcement_status.as_ref()?.automatic.as_ref())
                        .is_some()
            })
        })
        .map(Option::unwrap)
    })
    .await;
    let skew = configuration.status.unwrap().boot_image_skew_enforcement_status.unwrap();
    assert_eq!(skew.mode, Some(Mode::Automatic));
    assert_eq!(skew.automatic.unwrap().ocp_version.as_deref(), Some("4.12.0"));
    let blocked = cluster.condition("Upgradeable", |status, _| status == "False").await;
    assert!(blocked.contains("OCP boot image version 4.12.0, which is below the minimum required version 4.13.0"));
    assert!(blocked.contains("/openshift_container_platform/4.16/html/"), "{blocked}");

    // Once nothing is skipped, the boot images in use are the ConfigMap's (4.16.0): upgradeable.
    cluster.machinesets().delete("worker-custom", &Default::default()).await.unwrap();
    cluster.machinesets().delete("worker-owned", &Default::default()).await.unwrap();
    cluster.condition("Upgradeable", |status, _| status == "True").await;
    let skew = cluster.configuration().await.unwrap().status.unwrap().boot_image_skew_enforcement_status.unwrap();
    assert_eq!(skew.automatic.unwrap().ocp_version.as_deref(), Some("4.16.0"));
    // The status of an earlier sync (before the patch) is False too: wait for this sync's.
    cluster
        .condition(PROGRESSING, |status, message| {
            status == "False" && message.starts_with("Reconciled 1 of 1 MAPI MachineSets | ")
        })
        .await;
}

#[tokio::test]
async fn partial_selection_and_opt_out() {
    let mut cluster = gcp_cluster("4.16.0").await;
    let mut selected = machineset("gcp.yaml", "selected");
    selected.metadata.labels.get_or_insert_default().insert("boot-images".into(), "managed".into());
    cluster.create_machineset(&selected).await;
    let other = cluster.create_machineset(&machineset("gcp.yaml", "other")).await;
    let configuration = json!({
        "apiVersion": "operator.openshift.io/v1",
        "kind": "MachineConfiguration",
        "metadata": {"name": "cluster"},
        "spec": {"managementState": "Managed", "managedBootImages": {"machineManagers": [{
            "resource": "machinesets", "apiGroup": "machine.openshift.io",
            "selection": {"mode": "Partial", "partial": {"machineResourceSelector": {"matchLabels": {"boot-images": "managed"}}}},
        }]}},
    });
    let apply = PatchParams::apply("admin").force();
    cluster.configurations().patch("cluster", &apply, &Patch::Apply(&configuration)).await.unwrap();
    cluster.start_controller(options());

    wait_image(&cluster, "selected", NEW_IMAGE).await;
    // The status of an earlier sync (before the patch) is False too: wait for this sync's.
    cluster
        .condition(PROGRESSING, |status, message| {
            status == "False" && message.starts_with("Reconciled 1 of 1 MAPI MachineSets | ")
        })
        .await;
    let after = cluster.machinesets().get("other").await.unwrap();
    assert_eq!(after.resource_version(), other.resource_version());
    // Partial is not every MachineSet: skew enforcement falls back to Manual at the install version.
    let configuration = cluster.configuration().await.unwrap();
    assert!(!configuration.annotations().contains_key(BOOT_IMAGE_UPDATES_OPTED_IN_AT_ANNOTATION));
    let skew = configuration.status.unwrap().boot_image_skew_enforcement_status.unwrap();
    assert_eq!(skew.mode, Some(Mode::Manual));

    // Opt out: a MachineSet put back on the old image stays there.
    let none = json!({
        "apiVersion": "operator.openshift.io/v1",
        "kind": "MachineConfiguration",
        "metadata": {"name": "cluster"},
        "spec": {"managementState": "Managed", "managedBootImages": {"machineManagers": [{
            "resource": "machinesets", "apiGroup": "machine.openshift.io", "selection": {"mode": "None"},
        }]}},
    });
    cluster.configurations().patch("cluster", &apply, &Patch::Apply(&none)).await.unwrap();
    eventually("the None selection in the status", || async {
        let status = cluster.configuration().await.and_then(|c| c.status);
        satisfying(status, |status| {
            status
                .as_ref()
                .and_then(|s| s.managed_boot_images_status.as_ref()?.machine_managers.as_ref())
                .is_some_and(|managers| managers[0].selection.mode == MachineManagerSelectorMode::None)
        })
    })
    .await;
    let mut reverted = cluster.machinesets().get("selected").await.unwrap();
    set_gcp_boot_image(&mut reverted, OLD_IMAGE);
    cluster.machinesets().replace("selected", &PostParams::default(), &reverted).await.unwrap();
    tokio::time::sleep(Duration::from_secs(3)).await;
    let after = cluster.machinesets().get("selected").await.unwrap();
    assert_eq!(gcp_boot_image(&after), OLD_IMAGE);
}

#[tokio::test]
async fn mid_upgrade_defers_until_the_cluster_is_stable() {
    let mut cluster = Cluster::start("GCP", &[("4.17.0", "Partial"), ("4.16.0", "Completed")]).await;
    cluster.set_boot_images(&stream_416(), "4.16.0").await;
    cluster.create_user_data_secret().await;
    let before = cluster.create_machineset(&machineset("gcp.yaml", "worker-a")).await;
    cluster.start_controller(options());

    // The effective configuration is written right away; the MachineSet is not touched.
    eventually("the effective configuration", || async {
        let status = cluster.configuration().await.and_then(|c| c.status);
        satisfying(status, |s| s.as_ref().is_some_and(|s| s.managed_boot_images_status.is_some()))
    })
    .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let after = cluster.machinesets().get("worker-a").await.unwrap();
    assert_eq!(after.resource_version(), before.resource_version());
    let secret = cluster.secrets().get("worker-user-data").await.unwrap();
    assert!(!secret.annotations().contains_key(STUB_IGNITION_UPGRADED_TO_ANNOTATION));

    cluster.set_history(&[("4.17.0", "Completed"), ("4.16.0", "Completed")]).await;
    wait_image(&cluster, "worker-a", NEW_IMAGE).await;
}

#[tokio::test]
async fn hot_loop_degrades_instead_of_fighting() {
    let mut cluster = gcp_cluster("4.16.0").await;
    cluster.create_machineset(&machineset("gcp.yaml", "worker-a")).await;
    cluster.start_controller(options());
    // Something keeps putting the old image back; the controller patches three times, then refuses.
    for round in 0..3 {
        wait_image(&cluster, "worker-a", NEW_IMAGE).await;
        let mut ms = cluster.machinesets().get("worker-a").await.unwrap();
        set_gcp_boot_image(&mut ms, OLD_IMAGE);
        cluster.machinesets().replace("worker-a", &PostParams::default(), &ms).await.unwrap_or_else(|e| {
            panic!("round {round}: {e}");
        });
    }
    let message = cluster.condition(DEGRADED, |status, _| status == "True").await;
    assert!(
        message.starts_with("1 Degraded MAPI MachineSets | ")
            && message.contains("refusing to reconcile machineset worker-a, hot loop detected"),
        "{message}"
    );
    assert_eq!(gcp_boot_image(&cluster.machinesets().get("worker-a").await.unwrap()), OLD_IMAGE);
    // A degraded controller blocks upgrades.
    let blocked = cluster.condition("Upgradeable", |status, _| status == "False").await;
    assert!(blocked.starts_with("Upgrades have been disabled due to boot image update failures"), "{blocked}");
}

#[tokio::test]
async fn bad_stream_degrades_and_writes_nothing() {
    let mut cluster = gcp_cluster("4.16.0").await;
    cluster.set_boot_images("{not json", "4.16.0").await;
    let before = cluster.create_machineset(&machineset("gcp.yaml", "worker-a")).await;
    let secret = cluster.secrets().get("worker-user-data").await.unwrap();
    cluster.start_controller(options());
    let message = cluster.condition(DEGRADED, |status, _| status == "True").await;
    assert!(message.contains("ConfigMap openshift-machine-config-operator/coreos-bootimages"), "{message}");
    assert_eq!(cluster.machinesets().get("worker-a").await.unwrap().resource_version(), before.resource_version());
    assert_eq!(cluster.secrets().get("worker-user-data").await.unwrap().resource_version(), secret.resource_version());

    // Fixing the stream recovers.
    cluster.set_boot_images(&stream_416(), "4.16.0").await;
    wait_image(&cluster, "worker-a", NEW_IMAGE).await;
    cluster.condition(DEGRADED, |status, _| status == "False").await;
}

#[tokio::test]
async fn manual_skew_enforcement_blocks_upgrades_until_acknowledged() {
    let mut cluster = gcp_cluster("4.16.0").await;
    let manual = |enforcement: serde_json::Value| {
        json!({
            "apiVersion": "operator.openshift.io/v1",
            "kind": "MachineConfiguration",
            "metadata": {"name": "cluster"},
            "spec": {"managementState": "Managed", "bootImageSkewEnforcement": enforcement},
        })
    };
    let apply = PatchParams::apply("admin").force();
    let old =
        manual(json!({"mode": "Manual", "manual": {"mode": "RHCOSVersion", "rhcosVersion": "411.86.202205051017-0"}}));
    cluster.configurations().patch("cluster", &apply, &Patch::Apply(&old)).await.unwrap();
    cluster.start_controller(options());
    let blocked = cluster.condition("Upgradeable", |status, _| status == "False").await;
    assert!(
        blocked.contains(
            "RHCOS boot image version 411.86.202205051017-0(RHEL version: 8.6), which is below the minimum required RHEL version 9.2"
        ),
        "{blocked}"
    );
    let skew = cluster.configuration().await.unwrap().status.unwrap().boot_image_skew_enforcement_status.unwrap();
    assert_eq!(skew.mode, Some(Mode::Manual));

    // The admin records newer boot images: upgrades are allowed again.
    let current =
        manual(json!({"mode": "Manual", "manual": {"mode": "RHCOSVersion", "rhcosVersion": "9.6.20251023-0"}}));
    cluster.configurations().patch("cluster", &apply, &Patch::Apply(&current)).await.unwrap();
    cluster.condition("Upgradeable", |status, _| status == "True").await;
    // Opting out of enforcement (None) never blocks, whatever was recorded.
    cluster.configurations().patch("cluster", &apply, &Patch::Apply(&manual(json!({"mode": "None"})))).await.unwrap();
    eventually("skew mode None", || async {
        let skew = cluster.configuration().await.and_then(|c| c.status?.boot_image_skew_enforcement_status);
        satisfying(skew, |skew| skew.as_ref().is_some_and(|skew| skew.mode == Some(Mode::None)))
    })
    .await;
    cluster.condition("Upgradeable", |status, _| status == "True").await;
}

/// The first boot disk image of a GCP ControlPlaneMachineSet.
fn control_plane_image(cpms: &mco_api::ControlPlaneMachineSet) -> String {
    cpms.provider_spec().unwrap()["disks"][0]["image"].as_str().unwrap().to_string()
}

#[tokio::test]
async fn a_control_plane_machineset_moves_only_once_opted_in_and_a_hot_loop_degrades() {
    let mut cluster = gcp_cluster("4.16.0").await;
    cluster.create_user_data_secret_named("master-user-data").await;
    let created = cluster.control_planes().create(&PostParams::default(), &control_plane("gcp.yaml")).await.unwrap();
    cluster.start_controller(options());

    // Managed only when the admin opts in: the effective status says `None` for it, and it stays.
    let configuration = eventually("the ControlPlaneMachineSet manager at None in the status", || async {
        let configuration = cluster.configuration().await;
        let managers = configuration
            .as_ref()
            .and_then(|c| c.status.as_ref()?.managed_boot_images_status.as_ref()?.machine_managers.clone());
        let cpms = managers.iter().flatten().find(|m| m.resource == MachineManagerResource::ControlPlaneMachineSets);
        match cpms {
            Some(m) if m.selection.mode == MachineManagerSelectorMode::None => Ok(configuration.unwrap()),
            _ => Err(managers),
        }
    })
    .await;
    assert_eq!(configuration.spec.managed_boot_images, None);
    let unchanged = cluster.control_planes().get("cluster").await.unwrap();
    assert_eq!(unchanged.resource_version(), created.resource_version());

    // Opted in (the only mode besides None the API takes for them is All).
    let opt_in = json!({"spec": {"managedBootImages": {"machineManagers": [
        {"resource": "controlplanemachinesets", "apiGroup": "machine.openshift.io", "selection": {"mode": "All"}},
    ]}}});
    cluster.configurations().patch("cluster", &PatchParams::default(), &Patch::Merge(&opt_in)).await.unwrap();
    eventually(&format!("ControlPlaneMachineSet cluster on {NEW_IMAGE}"), || async {
        satisfying(control_plane_image(&cluster.control_planes().get("cluster").await.unwrap()), |i| i == NEW_IMAGE)
    })
    .await;
    // Only the boot disk's image changed: the rest of the provider spec (unknown keys too) and of
    // the object are kept.
    let patched = cluster.control_planes().get("cluster").await.unwrap();
    let mut expected = created.clone();
    expected.provider_spec_mut().unwrap()["disks"][0]["image"] = json!(NEW_IMAGE);
    assert_eq!(patched.spec, expected.spec);
    assert_eq!(patched.provider_spec().unwrap()["futureProviderKey"], "keep-me");
    // Its stub was upgraded first.
    let secret = cluster.secrets().get("master-user-data").await.unwrap();
    assert_eq!(secret.annotations().get(STUB_IGNITION_UPGRADED_TO_ANNOTATION).map(String::as_str), Some("3.5.0"));
    cluster
        .condition(PROGRESSING, |status, message| {
            status == "False"
                && message
                    .starts_with("Reconciled 0 of 0 MAPI MachineSets | Reconciled 1 of 1 ControlPlaneMachineSets | ")
        })
        .await;

    // Something keeps putting the old image back: patched three times, then refused.
    for round in 0..3 {
        eventually(&format!("round {round}: ControlPlaneMachineSet cluster on {NEW_IMAGE}"), || async {
            satisfying(control_plane_image(&cluster.control_planes().get("cluster").await.unwrap()), |i| i == NEW_IMAGE)
        })
        .await;
        let mut cpms = cluster.control_planes().get("cluster").await.unwrap();
        cpms.provider_spec_mut().unwrap()["disks"][0]["image"] = json!(OLD_IMAGE);
        cluster.control_planes().replace("cluster", &PostParams::default(), &cpms).await.unwrap();
    }
    let message = cluster.condition(DEGRADED, |status, _| status == "True").await;
    assert!(
        message.starts_with("0 Degraded MAPI MachineSets | 1 Degraded ControlPlaneMachineSets | ")
            && message.contains(
                "error syncing ControlPlaneMachineSet cluster: refusing to reconcile ControlPlaneMachineSet cluster, \
                 hot loop detected"
            ),
        "{message}"
    );
    assert_eq!(control_plane_image(&cluster.control_planes().get("cluster").await.unwrap()), OLD_IMAGE);
}
