//! Cluster mode against a real API server (mco-testenv): which rendered config a pool's new
//! machines get (its target only once a machine runs it), status codes when objects are missing,
//! bodies following every change through the watches, and a served kubeconfig that really
//! authenticates as the node-bootstrapper service account.

mod common;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use common::*;
use k8s_openapi::api::authentication::v1::{SelfSubjectReview, TokenRequest};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, ServiceAccount};
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use mco_api::constants::MCO_NAMESPACE;
use mco_api::{ControllerConfig, MachineConfig, MachineConfigPool, MachineOSBuild, MachineOSConfig};
use mco_server::serve::{ENCAPSULATED_PATH, KUBECONFIG_PATH, KUBELET_CA_PATH, NODE_ANNOTATIONS_PATH};
use mco_server::source::cluster::node_kubeconfig;
use mco_server::{BodyCache, ClusterOptions, ClusterSource, Limits};
use mco_testenv::TestEnv;
use mco_testenv::eventually;
use serde_json::{Value, json};

const TIMEOUT: Duration = Duration::from_secs(30);
const SERVICE_ACCOUNT: &str = "node-bootstrapper";

fn from_json<T: serde::de::DeserializeOwned>(value: Value) -> T {
    serde_json::from_value(value).unwrap()
}

/// A rendered config whose one file says `generation`.
fn rendered(name: &str, generation: &str) -> MachineConfig {
    from_json(json!({
        "apiVersion": "machineconfiguration.openshift.io/v1",
        "kind": "MachineConfig",
        "metadata": {"name": name},
        "spec": {
            "config": {"ignition": {"version": "3.5.0"}, "storage": {"files": [
                {"path": "/etc/generation", "mode": 420, "contents": {"source": format!("data:,{generation}")}}
            ]}},
            "kernelArguments": ["nosmt"],
            "osImageURL": "quay.io/os@sha256:1111111111111111111111111111111111111111111111111111111111111111"
        }
    }))
}

fn pool(name: &str) -> MachineConfigPool {
    from_json(json!({
        "apiVersion": "machineconfiguration.openshift.io/v1",
        "kind": "MachineConfigPool",
        "metadata": {"name": name},
        "spec": {"machineConfigSelector": {"matchLabels": {"machineconfiguration.openshift.io/role": name}}}
    }))
}

/// Sets the pool's target (spec), what its machines run (status) and how many run the target.
async fn set_pool(pools: &Api<MachineConfigPool>, name: &str, target: &str, current: Option<&str>, updated: i32) {
    let spec = json!({"spec": {"configuration": {"name": target}}});
    pools.patch(name, &PatchParams::default(), &Patch::Merge(&spec)).await.unwrap();
    let status = json!({"status": {
        "configuration": current.map(|c| json!({"name": c})),
        "updatedMachineCount": updated,
        "machineCount": 3,
    }});
    pools.patch_status(name, &PatchParams::default(), &Patch::Merge(&status)).await.unwrap();
}

/// The node-bootstrapper service account's token (from the TokenRequest API) and the cluster
/// CA, laid out as upstream mounts its token secret.
async fn bootstrap_token(env: &TestEnv, dir: &Path) -> String {
    let client = env.client();
    let namespace: Namespace = from_json(json!({"metadata": {"name": MCO_NAMESPACE}}));
    Api::<Namespace>::all(client.clone()).create(&PostParams::default(), &namespace).await.unwrap();
    let accounts: Api<ServiceAccount> = Api::namespaced(client, MCO_NAMESPACE);
    let account: ServiceAccount = from_json(json!({"metadata": {"name": SERVICE_ACCOUNT}}));
    accounts.create(&PostParams::default(), &account).await.unwrap();
    let request =
        accounts.create_token_request(SERVICE_ACCOUNT, &PostParams::default(), &TokenRequest::default()).await.unwrap();
    let token = request.status.unwrap().token.unwrap();
    std::fs::write(dir.join("token"), &token).unwrap();
    std::fs::copy(env.dir().join("ca.crt"), dir.join("ca.crt")).unwrap();
    token
}

fn apiserver_url(env: &TestEnv) -> String {
    let kubeconfig = kube::config::Kubeconfig::read_from(env.kubeconfig()).unwrap();
    kubeconfig.clusters[0].cluster.as_ref().unwrap().server.clone().unwrap()
}

fn file<'a>(body: &'a Value, path: &str) -> Option<&'a Value> {
    body["storage"]["files"].as_array().unwrap().iter().find(|f| f["path"] == path)
}

fn contents(body: &Value, path: &str) -> Vec<u8> {
    let source = file(body, path).unwrap_or_else(|| panic!("no {path}"))["contents"]["source"].as_str().unwrap();
    mco_ignition::dataurl::decode(source).unwrap().data
}

struct Served {
    addr: std::net::SocketAddr,
    accept: String,
}

impl Served {
    async fn get(&self, pool: &str) -> Response {
        get(self.addr, &format!("/config/{pool}"), Some(&self.accept)).await
    }

    /// The body once it is served with `/etc/generation` = `generation`.
    async fn wait_for_generation(&self, pool: &str, generation: &str) -> Value {
        eventually(&format!("pool {pool} serving {generation}"), || async {
            let r = self.get(pool).await;
            (r.status == 200 && contents(&r.json(), "/etc/generation") == generation.as_bytes()).then(|| r.json())
        })
        .await
    }

    async fn wait_for_status(&self, pool: &str, status: u16) {
        eventually(&format!("pool {pool} answering {status}"), || async {
            (self.get(pool).await.status == status).then_some(())
        })
        .await
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_mode_against_a_real_apiserver() {
    let env = TestEnv::start().await.unwrap();
    let client = env.client();
    let token_dir = tempfile::tempdir().unwrap();
    let token = bootstrap_token(&env, token_dir.path()).await;
    let controller_config: ControllerConfig = serde_yaml::from_str(
        &std::fs::read_to_string(fixture().join("controller-config/machine-config-controller.yaml")).unwrap(),
    )
    .unwrap();
    Api::<ControllerConfig>::all(client.clone()).create(&PostParams::default(), &controller_config).await.unwrap();
    let mcs: Api<MachineConfig> = Api::all(client.clone());
    for (name, generation) in [("rendered-worker-old", "old"), ("rendered-worker-new", "new")] {
        mcs.create(&PostParams::default(), &rendered(name, generation)).await.unwrap();
    }
    let pools: Api<MachineConfigPool> = Api::all(client.clone());
    for name in ["worker", "infra"] {
        pools.create(&PostParams::default(), &pool(name)).await.unwrap();
    }
    // The target is new, but no machine runs it yet.
    set_pool(&pools, "worker", "rendered-worker-new", Some("rendered-worker-old"), 0).await;

    let url = apiserver_url(&env);
    let options = ClusterOptions {
        apiserver_url: url.clone(),
        bootstrap_token_dir: token_dir.path().into(),
        sync_timeout: TIMEOUT,
    };
    let source = ClusterSource::start(client.clone(), options, Arc::new(BodyCache::default())).await.unwrap();
    let served = Served { addr: serve(source, Limits::default(), None).await, accept: format!("{IGN};version=3.3.0") };

    // New machines get what the pool's machines run, not the untested target.
    let body = served.wait_for_generation("worker", "old").await;
    assert_eq!(body["ignition"]["version"], "3.3.0");
    let seed: Value = serde_json::from_slice(&contents(&body, NODE_ANNOTATIONS_PATH)).unwrap();
    assert_eq!(seed["machineconfiguration.openshift.io/currentConfig"], "rendered-worker-old");
    let encapsulated: Value = serde_json::from_slice(&contents(&body, ENCAPSULATED_PATH)).unwrap();
    assert_eq!(encapsulated["metadata"]["name"], "rendered-worker-old");
    assert_eq!(
        encapsulated["spec"]["config"],
        json!({"ignition": {"version": "3.3.0"}}),
        "cluster mode: the asked version"
    );
    let kubelet_ca = controller_config.spec.kube_api_server_serving_ca_data.clone().unwrap().0;
    assert_eq!(contents(&body, KUBELET_CA_PATH), kubelet_ca);
    let cluster_ca = std::fs::read(env.dir().join("ca.crt")).unwrap();
    let kubeconfig = contents(&body, KUBECONFIG_PATH);
    assert_eq!(kubeconfig, node_kubeconfig(&url, &cluster_ca, &token).unwrap());

    // The served kubeconfig is a working node-bootstrapper credential.
    let user = whoami(&kubeconfig).await;
    assert_eq!(user, format!("system:serviceaccount:{MCO_NAMESPACE}:{SERVICE_ACCOUNT}"));

    // Once one machine runs the target, new machines get it too.
    set_pool(&pools, "worker", "rendered-worker-new", Some("rendered-worker-old"), 1).await;
    let body = served.wait_for_generation("worker", "new").await;
    let seed: Value = serde_json::from_slice(&contents(&body, NODE_ANNOTATIONS_PATH)).unwrap();
    assert_eq!(seed["machineconfiguration.openshift.io/desiredConfig"], "rendered-worker-new");
    // Every version is served from the same inputs; no Accept gets 2.2.0.
    let r = get(served.addr, "/config/worker", None).await;
    assert_eq!((r.status, r.json()["ignition"]["version"].as_str()), (200, Some("2.2.0")));

    // A change to the served rendered config is served at once.
    let patch = json!({"spec": {"config": {"ignition": {"version": "3.5.0"}, "storage": {"files": [
        {"path": "/etc/generation", "mode": 420, "contents": {"source": "data:,new-edited"}}
    ]}}}});
    mcs.patch("rendered-worker-new", &PatchParams::default(), &Patch::Merge(&patch)).await.unwrap();
    served.wait_for_generation("worker", "new-edited").await;

    // The ConfigMap kubeconfig-data's CA bundle replaces the token secret's CA.
    let config_map: ConfigMap = from_json(json!({
        "metadata": {"name": "kubeconfig-data", "namespace": MCO_NAMESPACE},
        "binaryData": {"ca-bundle.crt": base64(b"ROTATED CA BUNDLE\n")}
    }));
    Api::<ConfigMap>::namespaced(client.clone(), MCO_NAMESPACE)
        .create(&PostParams::default(), &config_map)
        .await
        .unwrap();
    let want = node_kubeconfig(&url, b"ROTATED CA BUNDLE\n", &token).unwrap();
    eventually("the kubeconfig with the ConfigMap's CA", || async {
        (contents(&served.get("worker").await.json(), KUBECONFIG_PATH) == want).then_some(())
    })
    .await;

    // A layered pool's new machines boot its image once a build of the served config succeeded.
    let image = "quay.io/org/worker-layered@sha256:2222222222222222222222222222222222222222222222222222222222222222";
    let os_configs: Api<MachineOSConfig> = Api::all(client.clone());
    let os_config: MachineOSConfig = from_json(json!({
        "apiVersion": "machineconfiguration.openshift.io/v1",
        "kind": "MachineOSConfig",
        "metadata": {"name": "worker"},
        "spec": {
            "machineConfigPool": {"name": "worker"},
            "imageBuilder": {"imageBuilderType": "Job"},
            "renderedImagePushSecret": {"name": "push-secret"},
            "renderedImagePushSpec": "quay.io/org/worker-layered:latest"
        }
    }));
    os_configs.create(&PostParams::default(), &os_config).await.unwrap();
    let status = json!({"status": {"currentImagePullSpec": image}});
    os_configs.patch_status("worker", &PatchParams::default(), &Patch::Merge(&status)).await.unwrap();
    let builds: Api<MachineOSBuild> = Api::all(client.clone());
    let build: MachineOSBuild = from_json(json!({
        "apiVersion": "machineconfiguration.openshift.io/v1",
        "kind": "MachineOSBuild",
        "metadata": {"name": "worker-1"},
        "spec": {
            "machineConfig": {"name": "rendered-worker-new"},
            "machineOSConfig": {"name": "worker"},
            "renderedImagePushSpec": "quay.io/org/worker-layered:worker-1"
        }
    }));
    builds.create(&PostParams::default(), &build).await.unwrap();
    assert_eq!(
        encapsulated_image(&served.get("worker").await.json()),
        "quay.io/os@sha256:1111111111111111111111111111111111111111111111111111111111111111",
        "not built yet"
    );
    let succeeded = json!({"status": {"conditions": [{
        "type": "Succeeded", "status": "True", "reason": "Built", "message": "",
        "lastTransitionTime": "2026-01-01T00:00:00Z"
    }]}});
    builds.patch_status("worker-1", &PatchParams::default(), &Patch::Merge(&succeeded)).await.unwrap();
    let body = eventually("the layered image", || async {
        let body = served.get("worker").await.json();
        (encapsulated_image(&body) == image).then_some(body)
    })
    .await;
    let seed: Value = serde_json::from_slice(&contents(&body, NODE_ANNOTATIONS_PATH)).unwrap();
    assert_eq!(seed["machineconfiguration.openshift.io/desiredImage"], image);

    // Unknown pool: 404 (Ignition gives up). A pool without a rendered config yet: 500
    // (Ignition retries until the render controller has made one).
    assert_eq!(served.get("nosuchpool").await.status, 404);
    assert_eq!(served.get("infra").await.status, 500);

    // The served rendered config deleted: 500, as upstream (the render controller recreates
    // it); back to 200 when it is there again.
    mcs.delete("rendered-worker-new", &DeleteParams::default()).await.unwrap();
    served.wait_for_status("worker", 500).await;
    mcs.create(&PostParams::default(), &rendered("rendered-worker-new", "recreated")).await.unwrap();
    served.wait_for_generation("worker", "recreated").await;

    // No ControllerConfig: 500.
    Api::<ControllerConfig>::all(client.clone())
        .delete(&controller_config.metadata.name.clone().unwrap(), &DeleteParams::default())
        .await
        .unwrap();
    served.wait_for_status("worker", 500).await;

    // A deleted pool is not found.
    pools.delete("worker", &DeleteParams::default()).await.unwrap();
    served.wait_for_status("worker", 404).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_mode_refuses_to_start_without_the_token() {
    let env = TestEnv::start().await.unwrap();
    let empty = tempfile::tempdir().unwrap();
    let options = ClusterOptions {
        apiserver_url: apiserver_url(&env),
        bootstrap_token_dir: empty.path().into(),
        sync_timeout: TIMEOUT,
    };
    let err = ClusterSource::start(env.client(), options, Arc::default()).await.err().unwrap();
    let message = format!("{err:#}");
    assert!(message.starts_with("reading the node-bootstrapper token: failed to read "), "{message}");
    assert!(message.contains(&empty.path().join("token").display().to_string()), "{message}");
}

/// The OS image of the encapsulated MachineConfig new machines apply at first boot.
fn encapsulated_image(body: &Value) -> String {
    let encapsulated: Value = serde_json::from_slice(&contents(body, ENCAPSULATED_PATH)).unwrap();
    encapsulated["spec"]["osImageURL"].as_str().unwrap().to_string()
}

fn base64(data: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(data)
}

/// Who the API server says `kubeconfig`'s credentials belong to.
async fn whoami(kubeconfig: &[u8]) -> String {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("kubeconfig");
    std::fs::write(&path, kubeconfig).unwrap();
    let client: Client = mco_testenv::client_from_kubeconfig(&path).await.unwrap();
    let review = Api::<SelfSubjectReview>::all(client)
        .create(&PostParams::default(), &SelfSubjectReview::default())
        .await
        .unwrap();
    review.status.unwrap().user_info.unwrap().username.unwrap()
}
