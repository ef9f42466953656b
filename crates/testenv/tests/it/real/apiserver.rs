//! mco's CRDs and types against a real kube-apiserver (built by `hack/kube-binaries.sh`).

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{ApiResource, DynamicObject, Patch, PatchParams, PostParams};
use kube::{Api, Client, Resource};
use mco_api::machineconfiguration::pool_condition;
use mco_api::{ControllerConfig, MachineConfig, MachineConfigPool};
use mco_testenv::TestEnv;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

/// The upstream-style manifests of `examples/cluster`, as JSON, with their file names.
fn examples() -> Vec<(String, Value)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples/cluster");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).collect();
    files.sort();
    files
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .map(|p| {
            let value: Value = serde_yaml::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
            (p.file_name().unwrap().to_string_lossy().into_owned(), value)
        })
        .collect()
}

fn dynamic_api<K: Resource<DynamicType = ()>>(client: &Client) -> Api<DynamicObject> {
    Api::all_with(client.clone(), &ApiResource::erase::<K>(&()))
}

fn api_for_kind(client: &Client, kind: &str) -> Api<DynamicObject> {
    match kind {
        "MachineConfig" => dynamic_api::<MachineConfig>(client),
        "MachineConfigPool" => dynamic_api::<MachineConfigPool>(client),
        "ControllerConfig" => dynamic_api::<ControllerConfig>(client),
        other => panic!("no example kind {other}"),
    }
}

/// The typed reading of what the server returned must equal the typed reading of the manifest.
fn assert_typed_equal<K: DeserializeOwned + PartialEq + std::fmt::Debug>(file: &str, served: &Value, example: &Value) {
    let served: K = serde_json::from_value(served.clone()).unwrap();
    let example: K = serde_json::from_value(example.clone()).unwrap();
    assert_eq!(served, example, "{file}: typed spec differs after a round trip through the API server");
}

#[tokio::test]
async fn crds_are_established_and_examples_round_trip_unchanged() {
    let env = TestEnv::shared().await.unwrap();
    let client = env.client();

    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let served: BTreeSet<String> =
        crds.list(&Default::default()).await.unwrap().into_iter().filter_map(|c| c.metadata.name).collect();
    for crd in mco_api::crds() {
        let name = crd.metadata.name.unwrap();
        assert!(served.contains(&name), "CRD {name} not installed");
        let status = crds.get(&name).await.unwrap().status.unwrap();
        let established = status.conditions.unwrap().into_iter().find(|c| c.type_ == "Established").unwrap();
        assert_eq!(established.status, "True", "CRD {name}");
    }

    let examples = examples();
    assert!(examples.len() >= 9, "examples/cluster has {} manifests", examples.len());
    // Each under a name of this test's (on the shared server): the name is no part of the round
    // trip, and nothing here reads the ControllerConfig as the cluster's singleton.
    let mut names = BTreeMap::new();
    for (file, example) in &examples {
        let kind = example["kind"].as_str().unwrap();
        let api = api_for_kind(&client, kind);
        let mut object: DynamicObject = serde_json::from_value(example.clone()).unwrap();
        let example_name = object.metadata.name.clone().unwrap();
        let name = env.unique_name(&example_name);
        object.metadata.name = Some(name.clone());
        names.insert(example_name, name.clone());
        api.create(&PostParams::default(), &object).await.unwrap_or_else(|e| panic!("{file}: create refused: {e}"));

        let served = api.get(&name).await.unwrap();
        let served = serde_json::to_value(&served).unwrap();
        // The schema neither rejects, prunes nor defaults any field of the upstream manifest.
        assert_eq!(served["spec"], example["spec"], "{file}: spec changed by the API server");
        for key in ["labels", "annotations"] {
            assert_eq!(served["metadata"][key], example["metadata"][key], "{file}: metadata.{key}");
        }
        match kind {
            "MachineConfig" => {
                assert_typed_equal::<mco_api::MachineConfigSpec>(file, &served["spec"], &example["spec"])
            }
            "MachineConfigPool" => assert_typed_equal::<mco_api::machineconfiguration::MachineConfigPoolSpec>(
                file,
                &served["spec"],
                &example["spec"],
            ),
            _ => assert_typed_equal::<mco_api::machineconfiguration::ControllerConfigSpec>(
                file,
                &served["spec"],
                &example["spec"],
            ),
        }
    }

    // A typed object written by mco reads back identical (no field lost or added on the way).
    let mcs: Api<MachineConfig> = Api::all(client.clone());
    let mut typed = mcs.get(&names["00-worker"]).await.unwrap();
    let copy = env.unique_name("00-worker-copy");
    typed.metadata = kube::api::ObjectMeta { name: Some(copy.clone()), ..Default::default() };
    let created = mcs.create(&PostParams::default(), &typed).await.unwrap();
    assert_eq!(created.spec, typed.spec);
    assert_eq!(mcs.get(&copy).await.unwrap().spec, typed.spec);
}

#[tokio::test]
async fn pool_status_server_side_apply() {
    let env = TestEnv::shared().await.unwrap();
    let pools: Api<MachineConfigPool> = Api::all(env.client());
    let (_, worker) = examples().into_iter().find(|(f, _)| f == "worker-pool.yaml").unwrap();
    let mut worker: MachineConfigPool = serde_json::from_value(worker).unwrap();
    // The example's `worker`, under a name of this test's (on the shared server).
    let name = env.unique_name("worker");
    worker.metadata.name = Some(name.clone());
    pools.create(&PostParams::default(), &worker).await.unwrap();

    let manager = PatchParams::apply("mco-test-controller").force();
    let status = |fields: Value| {
        let mut patch = json!({
            "apiVersion": "machineconfiguration.openshift.io/v1",
            "kind": "MachineConfigPool",
            "status": {
                "conditions": [{
                    "type": pool_condition::RENDER_DEGRADED,
                    "status": "False",
                    "lastTransitionTime": "2026-01-02T03:04:05Z",
                    "reason": "",
                    "message": "",
                }],
            },
        });
        patch["status"].as_object_mut().unwrap().extend(fields.as_object().unwrap().clone());
        patch
    };
    pools.patch_status(&name, &manager, &Patch::Apply(status(json!({"machineCount": 3})))).await.unwrap();
    let applied = pools.get(&name).await.unwrap();
    let applied_status = applied.status.clone().unwrap();
    assert_eq!(applied_status.machine_count, Some(3));
    let conditions = applied_status.conditions.unwrap();
    assert_eq!(conditions.len(), 1);
    assert_eq!(conditions[0].type_, pool_condition::RENDER_DEGRADED);
    assert_eq!(conditions[0].status, "False");
    assert_eq!(conditions[0].message.as_deref(), Some(""));
    assert_eq!(applied.spec, worker.spec, "a status apply must not touch the spec");
    let managers: Vec<_> = applied
        .metadata
        .managed_fields
        .unwrap()
        .into_iter()
        .map(|m| (m.manager.unwrap_or_default(), m.subresource.unwrap_or_default()))
        .collect();
    assert!(managers.contains(&("mco-test-controller".into(), "status".into())), "{managers:?}");

    // A field the manager no longer applies is removed; the others stay.
    pools.patch_status(&name, &manager, &Patch::Apply(status(json!({"degradedMachineCount": 1})))).await.unwrap();
    let reapplied = pools.get(&name).await.unwrap().status.unwrap();
    assert_eq!(reapplied.machine_count, None);
    assert_eq!(reapplied.degraded_machine_count, Some(1));
    assert_eq!(reapplied.conditions.unwrap().len(), 1);

    // The status subresource ignores spec changes.
    let spec_change = json!({
        "apiVersion": "machineconfiguration.openshift.io/v1",
        "kind": "MachineConfigPool",
        "spec": {"paused": true},
    });
    pools.patch_status(&name, &PatchParams::apply("intruder").force(), &Patch::Apply(spec_change)).await.unwrap();
    assert_eq!(pools.get(&name).await.unwrap().spec.paused, None);
}

#[tokio::test]
async fn restarting_the_apiserver_keeps_objects() {
    let mut env = TestEnv::start().await.unwrap();
    // A second client from the kubeconfig file, as `--kubeconfig` users get it.
    let file_client = mco_testenv::client_from_kubeconfig(env.kubeconfig()).await.unwrap();
    let mcs: Api<MachineConfig> = Api::all(env.client());
    let (_, ssh) = examples().into_iter().find(|(f, _)| f == "99-worker-ssh.yaml").unwrap();
    let ssh: MachineConfig = serde_json::from_value(ssh).unwrap();
    let before = mcs.create(&PostParams::default(), &ssh).await.unwrap();

    env.stop_apiserver();
    assert!(mcs.get("99-worker-ssh").await.is_err(), "the API server still answers after being killed");
    env.start_apiserver().await.unwrap();

    for api in [mcs, Api::all(file_client)] {
        let after = api.get("99-worker-ssh").await.unwrap();
        assert_eq!(after.metadata.uid, before.metadata.uid);
        assert_eq!(after.metadata.resource_version, before.metadata.resource_version);
        assert_eq!(after.spec, ssh.spec);
    }

    env.restart_apiserver().await.unwrap();
    let mcs: Api<MachineConfig> = Api::all(env.client());
    assert_eq!(mcs.list(&Default::default()).await.unwrap().items.len(), 1);
}
