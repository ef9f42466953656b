//! Upstream-shaped objects survive deserialize → serialize unchanged: nothing lost, nothing added.

use std::path::PathBuf;

use mco_api::config::TlsProfileType;
use mco_api::constants::default_pools;
use mco_api::machine::provider::{aws, gcp, user_data_secret_name};
use mco_api::machineconfiguration::{DefaultRuntime, config_condition, machine_config_node_condition};
use mco_api::{
    ContainerRuntimeConfig, ControllerConfig, KubeletConfig, MachineConfig, MachineConfigNode, MachineConfigPool,
    MachineConfiguration, MachineOSBuild, MachineOSConfig, MachineSet, OSImageStream, PinnedImageSet,
};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

fn fixture(name: &str) -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
}

/// Every YAML document of a fixture as JSON.
fn documents(name: &str) -> Vec<Value> {
    serde_yaml::Deserializer::from_str(&fixture(name))
        .map(|doc| Value::deserialize(doc).unwrap_or_else(|e| panic!("{name}: {e}")))
        .collect()
}

/// Deserializes every document of `name` as `T` and checks that it serializes back to the same
/// JSON value. Returns the typed objects for further checks.
fn assert_roundtrip<T: DeserializeOwned + Serialize>(name: &str) -> Vec<T> {
    let docs = documents(name);
    assert!(!docs.is_empty(), "{name} has no documents");
    docs.into_iter()
        .enumerate()
        .map(|(i, doc)| {
            let typed: T =
                serde_json::from_value(doc.clone()).unwrap_or_else(|e| panic!("{name}[{i}] does not deserialize: {e}"));
            let back = serde_json::to_value(&typed).unwrap();
            assert_eq!(back, doc, "{name}[{i}] changed in a round trip");
            typed
        })
        .collect()
}

#[test]
fn default_pools_roundtrip_and_match_constants() {
    let pools: Vec<MachineConfigPool> = assert_roundtrip("pools-default.yaml");
    assert_eq!(pools, default_pools());
}

#[test]
fn pool_with_full_status_roundtrips() {
    let [pool]: [MachineConfigPool; 1] = assert_roundtrip("mcp-worker-status.yaml").try_into().unwrap();
    let status = pool.status.unwrap();
    assert_eq!(status.machine_count, Some(3));
    assert_eq!(status.conditions.unwrap().last().unwrap().type_, "Updating");
    assert_eq!(status.configuration.unwrap().source.unwrap().len(), 4);
    assert_eq!(status.pool_synchronizers_status.unwrap()[0].pool_synchronizer_type, "PinnedImageSets");
}

#[test]
fn machine_config_with_every_field_roundtrips() {
    let [mc]: [MachineConfig; 1] = assert_roundtrip("mc-all-fields.yaml").try_into().unwrap();
    assert!(mc.spec.fips);
    assert_eq!(mc.spec.kernel_type, "realtime");
    assert_eq!(mc.spec.config.unwrap()["ignition"]["version"], "3.4.0");
}

#[test]
fn machine_config_without_fields_gains_go_zero_values() {
    // Go's encoding/json writes every MachineConfigSpec field; absent ones come back as zero values.
    let doc = documents("mc-00-worker.yaml").remove(0);
    let mc: MachineConfig = serde_json::from_value(doc.clone()).unwrap();
    let mut expected = doc;
    let spec = expected["spec"].as_object_mut().unwrap();
    let config = spec.remove("config").unwrap();
    *spec = json!({
        "osImageURL": "",
        "baseOSExtensionsContainerImage": "",
        "config": config,
        "kernelArguments": null,
        "extensions": null,
        "fips": false,
        "kernelType": "",
    })
    .as_object()
    .unwrap()
    .clone();
    assert_eq!(serde_json::to_value(&mc).unwrap(), expected);
}

#[test]
fn controller_config_roundtrips_with_unknown_fields_and_nulls() {
    let [cc]: [ControllerConfig; 1] = assert_roundtrip("controllerconfig.yaml").try_into().unwrap();
    assert_eq!(cc.spec.extra["futureSetting"], json!({"enabled": true}));
    assert_eq!(cc.spec.proxy, Some(Value::Null));
    assert_eq!(cc.spec.infra.unwrap()["status"]["controlPlaneTopology"], "HighlyAvailable");
    assert_eq!(cc.status.unwrap().controller_certificates.unwrap().len(), 2);
}

#[test]
fn controller_config_render_input_roundtrips() {
    let [cc]: [ControllerConfig; 1] = assert_roundtrip("controllerconfig-render-input.yaml").try_into().unwrap();
    assert_eq!(cc.spec.os_image_url.as_deref(), Some(""));
}

#[test]
fn machine_configurations_roundtrip() {
    let mcs: Vec<MachineConfiguration> = assert_roundtrip("machineconfigurations.yaml");
    assert_eq!(mcs.len(), 5);
    // The legacy opt-out (an explicit empty list) stays distinct from "unset".
    let opt_out = mcs[3].spec.managed_boot_images.as_ref().unwrap();
    assert_eq!(opt_out.machine_managers.as_deref(), Some(&[][..]));
    assert_eq!(mcs[0].spec.observed_config, Some(Value::Null));
}

#[test]
fn machine_os_config_and_build_roundtrip() {
    let [mosc]: [MachineOSConfig; 1] = assert_roundtrip("machineosconfig.yaml").try_into().unwrap();
    assert_eq!(mosc.spec.containerfile.unwrap().len(), 2);
    let [mosb]: [MachineOSBuild; 1] = assert_roundtrip("machineosbuild.yaml").try_into().unwrap();
    assert_eq!(mosb.status.unwrap().builder.unwrap().job.unwrap().resource, "jobs");
}

#[test]
fn kubelet_configs_roundtrip() {
    let [kc, old]: [KubeletConfig; 2] = assert_roundtrip("kubeletconfigs.yaml").try_into().unwrap();
    assert_eq!(kc.spec.kubelet_config.unwrap()["maxPods"], 42);
    assert_eq!(kc.spec.tls_security_profile.unwrap().type_, Some(TlsProfileType::Custom));
    let conditions = kc.status.unwrap().conditions.unwrap();
    assert_eq!(conditions[0].type_, config_condition::ACCEPTED);
    assert!(old.spec.tls_security_profile.unwrap().old.is_some());
    // Go writes a zero lastTransitionTime as null, and so do we.
    assert_eq!(old.status.unwrap().conditions.unwrap()[0].last_transition_time, None);
}

#[test]
fn container_runtime_config_pinned_image_set_and_os_image_stream_roundtrip() {
    let [crc]: [ContainerRuntimeConfig; 1] = assert_roundtrip("containerruntimeconfigs.yaml").try_into().unwrap();
    let runtime = crc.spec.container_runtime_config;
    assert_eq!(runtime.default_runtime, Some(DefaultRuntime::Runc));
    assert_eq!(runtime.overlay_size.unwrap().0, "10G");
    let [pis]: [PinnedImageSet; 1] = assert_roundtrip("pinnedimagesets.yaml").try_into().unwrap();
    assert_eq!(pis.spec.pinned_images.len(), 2);
    let [stream]: [OSImageStream; 1] = assert_roundtrip("osimagestreams.yaml").try_into().unwrap();
    assert_eq!(stream.status.unwrap().available_streams[1].name, "rhel-10");
}

#[test]
fn machine_config_nodes_roundtrip() {
    let [updated, updating]: [MachineConfigNode; 2] = assert_roundtrip("machineconfignodes.yaml").try_into().unwrap();
    assert_eq!(updated.spec.node.name, updated.metadata.name.clone().unwrap());
    assert_eq!(updated.spec.pool.name, "worker");
    let status = updated.status.unwrap();
    let version = status.config_version.unwrap();
    assert_eq!(version.current.as_deref(), Some(version.desired.as_str()));
    assert_eq!(version.desired, updated.spec.config_version.desired);
    let conditions = status.conditions.unwrap();
    let is_true = |type_: &str| conditions.iter().any(|c| c.type_ == type_ && c.status == "True");
    assert!(is_true(machine_config_node_condition::UPDATED));
    assert!(!is_true(machine_config_node_condition::NODE_DEGRADED));

    let status = updating.status.unwrap();
    let version = status.config_version.unwrap();
    assert_ne!(version.current.unwrap(), version.desired);
    let conditions = status.conditions.unwrap();
    let drained = conditions.iter().find(|c| c.type_ == machine_config_node_condition::DRAINED).unwrap();
    assert_eq!((drained.status.as_str(), drained.observed_generation), ("Unknown", Some(2)));
    let sets = status.pinned_image_sets.unwrap();
    assert_eq!((sets[0].current_generation, sets[0].desired_generation), (Some(1), Some(2)));
    assert_eq!(sets[0].last_failed_generation, None);
}

#[test]
fn machinesets_roundtrip_with_unknown_keys() {
    let [aws]: [MachineSet; 1] = assert_roundtrip("machineset-aws.yaml").try_into().unwrap();
    assert_eq!(aws.spec.extra["authoritativeAPI"], "MachineAPI");
    let [gcp]: [MachineSet; 1] = assert_roundtrip("machineset-gcp.yaml").try_into().unwrap();
    assert_eq!(gcp.spec.min_ready_seconds, Some(30));
}

/// Applies `edit` to the provider spec of the fixture and checks that the serialized MachineSet
/// differs from the original only by `expected_change` applied to the original JSON.
fn assert_provider_edit(name: &str, edit: impl FnOnce(&mut Value), expected_change: impl FnOnce(&mut Value)) {
    let original = documents(name).remove(0);
    let mut machineset: MachineSet = serde_json::from_value(original.clone()).unwrap();
    edit(machineset.provider_spec_mut().unwrap());
    let mut expected = original;
    expected_change(&mut expected["spec"]["template"]["spec"]["providerSpec"]["value"]);
    assert_eq!(serde_json::to_value(&machineset).unwrap(), expected);
}

#[test]
fn aws_boot_image_fields_are_read_and_written_in_place() {
    let ms: MachineSet = serde_json::from_value(documents("machineset-aws.yaml").remove(0)).unwrap();
    let spec = ms.provider_spec().unwrap();
    assert_eq!(aws::ami_id(spec), Some("ami-0abcdef1234567890"));
    assert_eq!(aws::region(spec), Some("us-east-1"));
    assert_eq!(user_data_secret_name(spec), Some("worker-user-data"));
    assert_eq!(ms.template_label("machine.openshift.io/cluster-api-machine-role"), Some("worker"));

    assert_provider_edit(
        "machineset-aws.yaml",
        |spec| aws::set_ami_id(spec, "ami-0fedcba9876543210").unwrap(),
        |value| value["ami"]["id"] = json!("ami-0fedcba9876543210"),
    );
}

#[test]
fn gcp_boot_disk_images_are_read_and_written_in_place() {
    let doc = documents("machineset-gcp.yaml").remove(0);
    let ms: MachineSet = serde_json::from_value(doc).unwrap();
    let spec = ms.provider_spec().unwrap();
    assert_eq!(gcp::boot_disk_images(spec), ["projects/rhcos-cloud/global/images/rhcos-9-6-20250402-0-gcp-x86-64"]);
    assert_eq!(user_data_secret_name(spec), Some("worker-user-data-managed"));

    let image = "projects/rhcos-cloud/global/images/rhcos-9-6-20251023-0-gcp-x86-64";
    assert_provider_edit(
        "machineset-gcp.yaml",
        |spec| assert_eq!(gcp::set_boot_disk_images(spec, image).unwrap(), 1),
        |value| value["disks"][0]["image"] = json!(image),
    );
}

#[test]
fn missing_or_null_optional_specs_read_as_empty() {
    // Upstream's MachineConfig and MachineSet specs are optional; one spec-less object must not
    // make a whole list unreadable.
    for spec in [None, Some(Value::Null)] {
        let mut mc = json!({"apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineConfig", "metadata": {"name": "empty"}});
        let mut ms = json!({"apiVersion": "machine.openshift.io/v1beta1", "kind": "MachineSet", "metadata": {"name": "empty", "namespace": "openshift-machine-api"}});
        if let Some(spec) = &spec {
            mc["spec"] = spec.clone();
            ms["spec"] = spec.clone();
        }
        let mc: MachineConfig = serde_json::from_value(mc).unwrap();
        assert_eq!(mc.spec, Default::default());
        let ms: MachineSet = serde_json::from_value(ms).unwrap();
        assert_eq!(ms.spec, Default::default());
    }
    let list = "items:\n- metadata: {name: a}\n- metadata: {name: b}\n  spec: {fips: true}\n";
    #[derive(Deserialize)]
    struct List {
        items: Vec<MachineConfig>,
    }
    let list: List = serde_yaml::from_str(list).unwrap();
    assert!(!list.items[0].spec.fips && list.items[1].spec.fips);
}
