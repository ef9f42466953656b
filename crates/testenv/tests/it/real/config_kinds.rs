//! KubeletConfig, ContainerRuntimeConfig, PinnedImageSet and OSImageStream on a real
//! kube-apiserver: upstream-shaped manifests are stored unchanged, and what upstream's CRD rules
//! refuse is refused with upstream's messages; so are the status rules of MachineOSBuild and
//! MachineConfigPool that mco has from upstream.

use std::path::PathBuf;

use kube::api::{ApiResource, DynamicObject, Patch, PatchParams, PostParams};
use kube::{Api, Client, Resource};
use mco_api::{
    ContainerRuntimeConfig, KubeletConfig, MachineConfigPool, MachineOSBuild, OSImageStream, PinnedImageSet,
};
use mco_testenv::TestEnv;
use serde::Deserialize;
use serde_json::{Value, json};

fn api_for(client: &Client, kind: &str) -> Api<DynamicObject> {
    fn erased<K: Resource<DynamicType = ()>>(client: &Client) -> Api<DynamicObject> {
        Api::all_with(client.clone(), &ApiResource::erase::<K>(&()))
    }
    match kind {
        "KubeletConfig" => erased::<KubeletConfig>(client),
        "ContainerRuntimeConfig" => erased::<ContainerRuntimeConfig>(client),
        "PinnedImageSet" => erased::<PinnedImageSet>(client),
        "OSImageStream" => erased::<OSImageStream>(client),
        other => panic!("no kind {other}"),
    }
}

/// The documents of mco-api's round-trip fixtures for these kinds.
fn fixtures() -> Vec<Value> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../api/tests/fixtures");
    ["kubeletconfigs.yaml", "containerruntimeconfigs.yaml", "pinnedimagesets.yaml", "osimagestreams.yaml"]
        .iter()
        .flat_map(|file| {
            let text = std::fs::read_to_string(dir.join(file)).unwrap();
            serde_yaml::Deserializer::from_str(&text).map(|doc| Value::deserialize(doc).unwrap()).collect::<Vec<_>>()
        })
        .collect()
}

async fn create(client: &Client, object: &Value) -> Result<DynamicObject, kube::Error> {
    let api = api_for(client, object["kind"].as_str().unwrap());
    api.create(&PostParams::default(), &serde_json::from_value(object.clone()).unwrap()).await
}

fn kubelet_config(name: &str, spec: Value) -> Value {
    json!({"apiVersion": "machineconfiguration.openshift.io/v1", "kind": "KubeletConfig", "metadata": {"name": name}, "spec": spec})
}

fn container_runtime_config(name: &str, runtime: Value) -> Value {
    json!({
        "apiVersion": "machineconfiguration.openshift.io/v1",
        "kind": "ContainerRuntimeConfig",
        "metadata": {"name": name},
        "spec": {"containerRuntimeConfig": runtime},
    })
}

fn pinned_image_set(name: &str, image: &str) -> Value {
    json!({
        "apiVersion": "machineconfiguration.openshift.io/v1",
        "kind": "PinnedImageSet",
        "metadata": {"name": name},
        "spec": {"pinnedImages": [{"name": image}]},
    })
}

fn os_image_stream(name: &str, default_stream: &str) -> Value {
    json!({
        "apiVersion": "machineconfiguration.openshift.io/v1",
        "kind": "OSImageStream",
        "metadata": {"name": name},
        "spec": {"defaultStream": default_stream},
    })
}

#[tokio::test]
async fn upstream_manifests_are_kept_and_upstream_rules_enforced() {
    let env = TestEnv::start().await.unwrap();
    let client = env.client();

    for object in fixtures() {
        let name = &object["metadata"]["name"];
        let created = create(&client, &object).await.unwrap_or_else(|e| panic!("{name}: refused: {e}"));
        let created = serde_json::to_value(created).unwrap();
        assert_eq!(created["spec"], object["spec"], "{name}: spec changed by the API server");
    }

    let digest = format!("@sha256:{}", "a".repeat(64));
    let refused = [
        (
            kubelet_config("loud", json!({"logLevel": 11})),
            "spec.logLevel: Invalid value: 11: spec.logLevel in body should be less than or equal to 10",
        ),
        (
            kubelet_config(
                "bad-tls",
                json!({"tlsSecurityProfile": {"type": "Custom", "custom": {"minTLSVersion": "VersionTLS14"}}}),
            ),
            "Unsupported value: \"VersionTLS14\"",
        ),
        (container_runtime_config("kata", json!({"defaultRuntime": "kata"})), "Unsupported value: \"kata\""),
        (
            container_runtime_config("twice", json!({"additionalImageStores": [{"path": "/a"}, {"path": "/a"}]})),
            "additionalImageStores must not contain duplicate paths",
        ),
        (
            container_runtime_config("relative", json!({"additionalLayerStores": [{"path": "var/lib/x"}]})),
            "path must be absolute and contain only alphanumeric characters, '/', '.', '_', and '-'",
        ),
        (
            container_runtime_config("slashes", json!({"additionalArtifactStores": [{"path": "/a//b"}]})),
            "path must not contain consecutive forward slashes",
        ),
        (container_runtime_config("small", json!({"logSizeMax": "lots"})), "spec.containerRuntimeConfig.logSizeMax"),
        (
            json!({"apiVersion": "machineconfiguration.openshift.io/v1", "kind": "ContainerRuntimeConfig", "metadata": {"name": "empty"}, "spec": {}}),
            "spec.containerRuntimeConfig: Required value",
        ),
        (
            pinned_image_set("tagged", "quay.io/openshift/tool:latest"),
            "the OCI Image reference must end with a valid '@sha256:<digest>' suffix, where '<digest>' is 64 characters long",
        ),
        (
            pinned_image_set("no-host", &format!("tool{digest}")),
            "the OCI Image name should follow the host[:port][/namespace]/name format, resembling a valid URL without the scheme",
        ),
        (os_image_stream("other", "rhel-9"), "osimagestream is a singleton, .metadata.name must be 'cluster'"),
        (
            os_image_stream("upper", "RHEL_9"),
            "a RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character.",
        ),
    ];
    for (object, message) in refused {
        let name = object["metadata"]["name"].clone();
        match create(&client, &object).await {
            Err(kube::Error::Api(status)) => {
                assert!(
                    status.message.contains(message),
                    "{name}: refused with {:?}, expected {message:?}",
                    status.message
                )
            }
            other => panic!("{name}: expected a refusal with {message:?}, got {other:?}"),
        }
    }
}

/// The refusal of a status merge patch, or a panic naming what happened instead.
async fn status_refusal(api: &Api<DynamicObject>, name: &str, status: Value) -> String {
    match api.patch_status(name, &PatchParams::default(), &Patch::Merge(json!({"status": status}))).await {
        Err(kube::Error::Api(e)) => e.message,
        other => panic!("{name}: expected the status {status} refused, got {other:?}"),
    }
}

#[tokio::test]
async fn build_and_pool_status_rules_are_upstreams() {
    let env = TestEnv::start().await.unwrap();
    let client = env.client();
    let text = std::fs::read_to_string(
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../api/tests/fixtures/machineosbuild.yaml"),
    )
    .unwrap();
    let mut build: Value = serde_yaml::from_str(&text).unwrap();
    let status = build.as_object_mut().unwrap().remove("status").unwrap();
    let builds = Api::<DynamicObject>::all_with(client.clone(), &ApiResource::erase::<MachineOSBuild>(&()));
    builds.create(&PostParams::default(), &serde_json::from_value(build.clone()).unwrap()).await.unwrap();
    let name = build["metadata"]["name"].as_str().unwrap();

    let mut jobless = status["builder"].clone();
    jobless.as_object_mut().unwrap().remove("job");
    let refusal = status_refusal(&builds, name, json!({"builder": jobless})).await;
    assert!(refusal.contains("job is required when imageBuilderType is Job, and forbidden otherwise"), "{refusal}");
    let mut unknown = status["conditions"].clone();
    unknown[0]["status"] = "Maybe".into();
    let refusal = status_refusal(&builds, name, json!({"conditions": unknown})).await;
    assert!(refusal.contains("Unsupported value: \"Maybe\""), "{refusal}");

    // Succeeded: from then on the conditions stay as they are.
    builds.patch_status(name, &PatchParams::default(), &Patch::Merge(json!({"status": status}))).await.unwrap();
    let mut changed = status["conditions"].clone();
    changed[0]["message"] = "prepared again".into();
    let refusal = status_refusal(&builds, name, json!({"conditions": changed})).await;
    assert!(refusal.contains("once an Succeeded condition is set, conditions are immutable"), "{refusal}");

    let pools = Api::<DynamicObject>::all_with(client.clone(), &ApiResource::erase::<MachineConfigPool>(&()));
    let pool = json!({"apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineConfigPool", "metadata": {"name": "infra"}, "spec": {}});
    pools.create(&PostParams::default(), &serde_json::from_value(pool).unwrap()).await.unwrap();
    let counts = json!({"machineCount": 0, "updatedMachineCount": 0, "readyMachineCount": 0, "availableMachineCount": 0, "unavailableMachineCount": 0});
    let synchronizer = |kind: &str| {
        let mut status = counts.clone();
        status["poolSynchronizerType"] = kind.into();
        json!({"poolSynchronizersStatus": [status]})
    };
    let refusal = status_refusal(&pools, "infra", synchronizer("Images")).await;
    assert!(refusal.contains("Unsupported value: \"Images\""), "{refusal}");
    pools
        .patch_status(
            "infra",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": synchronizer("PinnedImageSets")})),
        )
        .await
        .unwrap();
}
