//! Every case of `testdata/kubelet` and `testdata/containerruntime` against what the original's
//! controllers did with the same input (`expected/`, written by the Go tests in
//! `testdata/oracle`): the MachineConfigs written, byte for byte in `spec.config`, the ones
//! deleted, the config object's name suffix, finalizers and status conditions, and the error.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use mco_api::config::TlsSecurityProfile;
use mco_api::constants::MC_NAME_SUFFIX_ANNOTATION;
use mco_api::{ContainerRuntimeConfig, ControllerConfig, KubeletConfig, MachineConfig, MachineConfigPool};
use mco_kubeletconfig::{
    Cluster, FeatureGates, KubeletInputs, Sync, sync, sync_container_runtime, updated_runtime_status, updated_status,
};
use serde::Deserialize;
use serde_json::{Value, json};

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Input {
    controller_config: ControllerConfig,
    pools: Vec<MachineConfigPool>,
    kubelet_configs: Vec<KubeletConfig>,
    #[serde(default)]
    machine_configs: Vec<MachineConfig>,
    #[serde(default)]
    api_server: Option<Value>,
    #[serde(default)]
    node_config: Option<Value>,
    feature_gates: Gates,
    sync: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RuntimeInput {
    controller_config: ControllerConfig,
    pools: Vec<MachineConfigPool>,
    container_runtime_configs: Vec<ContainerRuntimeConfig>,
    #[serde(default)]
    machine_configs: Vec<MachineConfig>,
    feature_gates: Gates,
    sync: String,
}

#[derive(Deserialize)]
struct Gates {
    enabled: Vec<String>,
    disabled: Vec<String>,
}

fn cases(kind: &str) -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata").join(kind);
    let mut cases: Vec<PathBuf> = std::fs::read_dir(&root).unwrap().map(|e| e.unwrap().path()).collect();
    cases.sort();
    assert!(cases.len() >= 20, "{} cases", cases.len());
    cases
}

const NOW: Time = Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH);

/// A status as the oracle records it: condition times left out.
fn without_times(status: impl serde::Serialize) -> Value {
    let mut status = serde_json::to_value(status).unwrap();
    for condition in status["conditions"].as_array_mut().unwrap() {
        condition["lastTransitionTime"] = Value::Null;
    }
    status
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The writes of one kind in the oracle's actions.
fn actions<'a>(all: &'a [Value], verb: &str, resource: &str, subresource: Option<&str>) -> Vec<&'a Value> {
    all.iter()
        .filter(|a| a["verb"] == verb && a["resource"] == resource && a["subresource"].as_str() == subresource)
        .collect()
}

/// An object without what Go writes as `null` in metadata (a zero creationTimestamp) and
/// without apiVersion/kind (the original's controller leaves them to the API server).
fn comparable(mut object: Value) -> Value {
    let object_map = object.as_object_mut().unwrap();
    object_map.remove("apiVersion");
    object_map.remove("kind");
    object["metadata"].as_object_mut().unwrap().retain(|_, v| !v.is_null());
    object
}

fn check_kubelet_case(dir: &Path) -> Result<(), String> {
    let input: Input = mco_goser::yaml_object(&read(&dir.join("input.yaml"))).map_err(|e| e.to_string())?;
    let tls: Option<TlsSecurityProfile> =
        input.api_server.as_ref().map(|a| serde_json::from_value(a["spec"]["tlsSecurityProfile"].clone()).unwrap());
    let latency = input.node_config.as_ref().and_then(|n| n["spec"]["workerLatencyProfile"].as_str());
    let gates = FeatureGates { enabled: input.feature_gates.enabled, disabled: input.feature_gates.disabled };
    let cluster = Cluster {
        controller_config: &input.controller_config,
        pools: &input.pools,
        configs: &input.kubelet_configs,
        machine_configs: &input.machine_configs,
        controller_version: "was-not-built-properly",
    };
    let inputs = KubeletInputs { api_server_tls: tls.as_ref(), worker_latency_profile: latency, feature_gates: &gates };
    let kc = input.kubelet_configs.iter().find(|k| k.metadata.name.as_deref() == Some(&input.sync)).unwrap();
    let got: Sync = sync(&cluster, &inputs, kc);

    let message = got.outcome.as_ref().err().map(|f| f.message.as_str());
    let status = updated_status(kc.status.as_ref(), kc.metadata.generation, message.map_or(Ok(()), Err), &NOW);
    let finalizers = kc.metadata.finalizers.clone().unwrap_or_default();
    compare(dir, "kubeletconfigs", &got, &finalizers, Some(without_times(status)))
}

fn check_runtime_case(dir: &Path) -> Result<(), String> {
    let input: RuntimeInput = mco_goser::yaml_object(&read(&dir.join("input.yaml"))).map_err(|e| e.to_string())?;
    let cluster = Cluster {
        controller_config: &input.controller_config,
        pools: &input.pools,
        configs: &input.container_runtime_configs,
        machine_configs: &input.machine_configs,
        controller_version: "was-not-built-properly",
    };
    let additional_storage = input.feature_gates.enabled.iter().any(|g| g == "AdditionalStorageConfig");
    let crc = input.container_runtime_configs.iter().find(|c| c.metadata.name.as_deref() == Some(&input.sync)).unwrap();
    let got = sync_container_runtime(&cluster, additional_storage, crc);
    let message = got.outcome.as_ref().err().map(|f| f.message.as_str());
    let status = (!got.up_to_date).then(|| {
        without_times(updated_runtime_status(
            crc.status.as_ref(),
            crc.metadata.generation,
            message.map_or(Ok(()), Err),
            &NOW,
        ))
    });
    let finalizers = crc.metadata.finalizers.clone().unwrap_or_default();
    compare(dir, "containerruntimeconfigs", &got, &finalizers, status)
}

/// `got` against `dir`'s expected writes; `resource` is the config object's, `finalizers` its
/// finalizers before the sync, `status` the status we would write.
fn compare(dir: &Path, resource: &str, got: &Sync, finalizers: &[String], status: Option<Value>) -> Result<(), String> {
    let expected: Vec<Value> = serde_json::from_str(&read(&dir.join("expected/actions.json"))).unwrap_or_default();
    let expected_error = read(&dir.join("expected/error.txt"));
    let error = got.outcome.as_ref().err().map(|f| f.error.clone()).unwrap_or_default();
    if error != expected_error {
        return Err(format!("error:\n  got  {error}\n  want {expected_error}"));
    }

    // In order; a taken-over pre-4.7 MachineConfig is created with its old config, then written.
    let written: Vec<&Value> = expected
        .iter()
        .filter(|a| (a["verb"] == "create" || a["verb"] == "update") && a["resource"] == "machineconfigs")
        .collect();
    let got_names: Vec<&str> = got.machine_configs.iter().map(|m| m.metadata.name.as_deref().unwrap()).collect();
    let want_names: BTreeSet<&str> =
        written.iter().map(|w| w["object"]["metadata"]["name"].as_str().unwrap()).collect();
    if got_names.iter().copied().collect::<BTreeSet<_>>() != want_names {
        return Err(format!("machine configs: got {got_names:?}, want {want_names:?}"));
    }
    for mc in &got.machine_configs {
        let name = mc.metadata.name.as_deref().unwrap();
        let want = written.iter().rev().find(|w| w["object"]["metadata"]["name"] == name).unwrap();
        let bytes = mco_goser::to_go_json(&mc.spec.config, mco_goser::Escaping::Legacy).unwrap();
        let want_bytes = std::fs::read(dir.join(format!("expected/config-{name}.json"))).unwrap();
        if bytes != want_bytes {
            return Err(format!(
                "{name}: spec.config differs\n  got  {}\n  want {}",
                String::from_utf8_lossy(&bytes),
                String::from_utf8_lossy(&want_bytes)
            ));
        }
        // spec.config was compared byte for byte above.
        let mut ours = comparable(serde_json::to_value(mc).unwrap());
        ours["spec"]["config"] = Value::Null;
        let theirs = comparable(want["object"].clone());
        if ours != theirs {
            return Err(format!("{name}: object differs\n  got  {ours}\n  want {theirs}"));
        }
    }

    let deleted: BTreeSet<&str> =
        actions(&expected, "delete", "machineconfigs", None).iter().map(|d| d["name"].as_str().unwrap()).collect();
    let got_deleted: BTreeSet<&str> = got.deletions.iter().map(String::as_str).collect();
    if deleted != got_deleted {
        return Err(format!("deletions: got {got_deleted:?}, want {deleted:?}"));
    }

    let suffix = actions(&expected, "update", resource, None)
        .last()
        .map(|u| u["object"]["metadata"]["annotations"][MC_NAME_SUFFIX_ANNOTATION].as_str().unwrap().to_string());
    if got.name_suffix != suffix {
        return Err(format!("name suffix: got {:?}, want {suffix:?}", got.name_suffix));
    }

    // Each pool's finalizer patch; with several pools the original computes each from the
    // KubeletConfig as it was when the sync began (`docs/compatibility.md#known-differences`),
    // so every patched name must be among ours.
    let patches: Vec<Vec<String>> = actions(&expected, "patch", resource, None)
        .iter()
        .map(|p| {
            let patch: Value = serde_json::from_str(p["patch"].as_str().unwrap()).unwrap();
            let unchanged = json!(finalizers);
            serde_json::from_value(patch["metadata"]["finalizers"].clone())
                .unwrap_or_else(|_| serde_json::from_value(unchanged).unwrap())
        })
        .collect();
    let got_finalizers = got.finalizers.clone().unwrap_or_default();
    let finalizers_ok = match patches.as_slice() {
        [] => got.finalizers.is_none(),
        [only] => *only == got_finalizers,
        several => several.iter().flatten().all(|f| got_finalizers.contains(f)),
    };
    if !finalizers_ok {
        return Err(format!("finalizers: got {:?}, want {patches:?}", got.finalizers));
    }

    let want_status =
        actions(&expected, "update", resource, Some("status")).last().map(|u| u["object"]["status"].clone());
    if status != want_status {
        return Err(format!("status:\n  got  {status:?}\n  want {want_status:?}"));
    }
    Ok(())
}

#[test]
fn every_kubelet_config_case_does_what_the_original_did() {
    check_all("kubelet", check_kubelet_case);
}

#[test]
fn every_container_runtime_config_case_does_what_the_original_did() {
    check_all("containerruntime", check_runtime_case);
}

fn check_all(kind: &str, check: fn(&Path) -> Result<(), String>) {
    let failures: Vec<String> = cases(kind)
        .iter()
        .filter_map(|dir| check(dir).err().map(|e| format!("{}: {e}", dir.file_name().unwrap().to_string_lossy())))
        .collect();
    assert!(failures.is_empty(), "{} cases differ:\n{}", failures.len(), failures.join("\n\n"));
}
