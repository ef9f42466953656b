//! Cluster mode against a real API server (mco-testenv): which rendered config a pool's new
//! machines get (its target only once a machine runs it), status codes when objects are missing,
//! bodies following every change through the watches, and a served kubeconfig that really
//! authenticates as the node-bootstrapper service account. Boot image skew enforcement: machines
//! whose boot image is too old are refused (403 and an Event), the served config carries the
//! skew status.

use crate::common;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use common::*;
use k8s_openapi::api::authentication::v1::{SelfSubjectReview, TokenRequest};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, ServiceAccount};
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use mco_api::constants::{
    CURRENT_IMAGE_ANNOTATION, DESIRED_IMAGE_ANNOTATION, MCO_NAMESPACE, PINNED_OS_IMAGE_ANNOTATION,
    RESOLVED_OS_IMAGE_ANNOTATION,
};
use mco_api::machineconfiguration::resolved_os_image_record;
use mco_api::{
    ControllerConfig, MachineConfig, MachineConfigPool, MachineConfiguration, MachineOSBuild, MachineOSConfig,
};
use mco_bootimage::skew::SKEW_STATUS_FILE;
use mco_server::serve::{ENCAPSULATED_PATH, KUBECONFIG_PATH, KUBELET_CA_PATH, NODE_ANNOTATIONS_PATH};
use mco_server::source::cluster::node_kubeconfig;
use mco_server::{BodyCache, ClusterOptions, ClusterSource, Limits};
use mco_testenv::TestEnv;
use mco_testenv::{eventually, satisfying};
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
            if r.status != 200 {
                return Err((r.status, String::from_utf8_lossy(&r.body).into_owned()));
            }
            let served = String::from_utf8_lossy(&contents(&r.json(), "/etc/generation")).into_owned();
            if served == generation { Ok(r.json()) } else { Err((r.status, served)) }
        })
        .await
    }

    async fn wait_for_status(&self, pool: &str, status: u16) {
        eventually(&format!("pool {pool} answering {status}"), || async {
            satisfying(self.get(pool).await.status, |s| *s == status)
        })
        .await;
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
    let mut registry = mco_metrics::Registry::default();
    let metrics = mco_metrics::server::ServerMetrics::register(&mut registry);
    let served =
        Served { addr: serve(source, Limits::default(), None, metrics).await, accept: format!("{IGN};version=3.3.0") };

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

    // A tag is served as the digest the controller pinned it to; without a pin it is not served.
    let pinned = format!("quay.io/os@sha256:{}", "3".repeat(64));
    let patch = json!({
        "metadata": {"annotations": {PINNED_OS_IMAGE_ANNOTATION: pinned}},
        "spec": {"osImageURL": "quay.io/os:9"},
    });
    mcs.patch("rendered-worker-new", &PatchParams::default(), &Patch::Merge(&patch)).await.unwrap();
    eventually("the pinned digest served", || async {
        satisfying(encapsulated_image(&served.get("worker").await.json()), |image| *image == pinned)
    })
    .await;
    // The tag resolved again on request: new machines boot the pool's record, with the image
    // annotations the node controller gives the pool's other nodes.
    let resolved = format!("quay.io/os@sha256:{}", "4".repeat(64));
    let record = resolved_os_image_record("rendered-worker-new", &resolved);
    let patch = json!({"metadata": {"annotations": {RESOLVED_OS_IMAGE_ANNOTATION: record}}});
    pools.patch("worker", &PatchParams::default(), &Patch::Merge(&patch)).await.unwrap();
    let body = eventually("the digest resolved again served", || async {
        let body = served.get("worker").await.json();
        satisfying(body, |body| encapsulated_image(body) == resolved)
    })
    .await;
    let seed: Value = serde_json::from_slice(&contents(&body, NODE_ANNOTATIONS_PATH)).unwrap();
    for key in [CURRENT_IMAGE_ANNOTATION, DESIRED_IMAGE_ANNOTATION] {
        assert_eq!(seed[key], resolved, "{key}");
    }
    // A record of another config is not the pool's.
    let other = resolved_os_image_record("rendered-worker-old", &resolved);
    let patch = json!({"metadata": {"annotations": {RESOLVED_OS_IMAGE_ANNOTATION: other}}});
    pools.patch("worker", &PatchParams::default(), &Patch::Merge(&patch)).await.unwrap();
    eventually("the config's own pin served again", || async {
        satisfying(encapsulated_image(&served.get("worker").await.json()), |image| *image == pinned)
    })
    .await;
    let unpin = json!({"metadata": {"annotations": {PINNED_OS_IMAGE_ANNOTATION: null}}});
    mcs.patch("rendered-worker-new", &PatchParams::default(), &Patch::Merge(&unpin)).await.unwrap();
    served.wait_for_status("worker", 500).await;
    let by_digest = json!({"spec": {"osImageURL": rendered("x", "x").spec.os_image_url}});
    mcs.patch("rendered-worker-new", &PatchParams::default(), &Patch::Merge(&by_digest)).await.unwrap();
    served.wait_for_status("worker", 200).await;

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
        let kubeconfig = contents(&served.get("worker").await.json(), KUBECONFIG_PATH);
        satisfying(String::from_utf8_lossy(&kubeconfig).into_owned(), |k| k.as_bytes() == want)
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
        let served_image = encapsulated_image(&body);
        if served_image == image { Ok(body) } else { Err(served_image) }
    })
    .await;
    let seed: Value = serde_json::from_slice(&contents(&body, NODE_ANNOTATIONS_PATH)).unwrap();
    assert_eq!(seed["machineconfiguration.openshift.io/desiredImage"], image);

    // Unknown pool: 404 (Ignition gives up). A pool without a rendered config yet: 500
    // (Ignition retries until the render controller has made one).
    assert_eq!(served.get("nosuchpool").await.status, 404);
    assert_eq!(served.get("infra").await.status, 500);
    // The metrics name the pool that exists, never the one a client made up.
    let text = mco_metrics::render(&registry);
    assert!(text.lines().any(|l| l == "mco_server_requests_total{pool=\"infra\",code=\"500\"} 1"), "{text}");
    assert!(text.lines().any(|l| l == "mco_server_requests_total{pool=\"\",code=\"404\"} 1"), "{text}");
    assert!(!text.contains("nosuchpool"), "{text}");

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

    // A deleted pool is not found, and no longer named in the metrics.
    pools.delete("worker", &DeleteParams::default()).await.unwrap();
    served.wait_for_status("worker", 404).await;
    let text = mco_metrics::render(&registry);
    let not_found = text.lines().find_map(|l| l.strip_prefix("mco_server_requests_total{pool=\"\",code=\"404\"} "));
    assert!(not_found.is_some_and(|n| n.parse::<u64>().unwrap() >= 2), "{text}");
    assert!(!text.contains("{pool=\"worker\",code=\"404\"}"), "{text}");
}

/// A served cluster-mode server for pool `worker` (one rendered config, run by its machines).
async fn serve_worker_pool(env: &TestEnv, token_dir: &Path) -> Served {
    let client = env.client();
    bootstrap_token(env, token_dir).await;
    let controller_config: ControllerConfig = serde_yaml::from_str(
        &std::fs::read_to_string(fixture().join("controller-config/machine-config-controller.yaml")).unwrap(),
    )
    .unwrap();
    Api::<ControllerConfig>::all(client.clone()).create(&PostParams::default(), &controller_config).await.unwrap();
    let mcs: Api<MachineConfig> = Api::all(client.clone());
    mcs.create(&PostParams::default(), &rendered("rendered-worker-a", "a")).await.unwrap();
    let pools: Api<MachineConfigPool> = Api::all(client.clone());
    pools.create(&PostParams::default(), &pool("worker")).await.unwrap();
    set_pool(&pools, "worker", "rendered-worker-a", Some("rendered-worker-a"), 3).await;
    let options = ClusterOptions {
        apiserver_url: apiserver_url(env),
        bootstrap_token_dir: token_dir.into(),
        sync_timeout: TIMEOUT,
    };
    let source = ClusterSource::start(client, options, Arc::new(BodyCache::default())).await.unwrap();
    Served {
        addr: serve(source, Limits::default(), None, Default::default()).await,
        accept: format!("{IGN};version=3.3.0"),
    }
}

/// Sets MachineConfiguration `cluster`'s `status.bootImageSkewEnforcementStatus` (server-side
/// apply: fields of the previous status left out are removed).
async fn set_skew_status(configurations: &Api<MachineConfiguration>, status: &Value) {
    let patch = json!({
        "apiVersion": "operator.openshift.io/v1", "kind": "MachineConfiguration",
        "status": {"bootImageSkewEnforcementStatus": status}
    });
    let params = PatchParams::apply("skew-test").force();
    configurations.patch_status("cluster", &params, &Patch::Apply(&patch)).await.unwrap();
}

fn manual_rhcos(version: &str) -> Value {
    json!({"mode": "Manual", "manual": {"mode": "RHCOSVersion", "rhcosVersion": version}})
}

const OLD_BOOT_IMAGE: &str = "412.86.202301010000-0";
const CURRENT_BOOT_IMAGE: &str = "9.6.20260101-0";

impl Served {
    async fn get_with(&self, path: &str, headers: &[(&str, &str)]) -> Response {
        let mut headers = headers.to_vec();
        headers.push(("Accept", &self.accept));
        send(self.addr, &request("GET", path, &headers)).await
    }

    /// The answer to a machine of `worker` saying it booted from `version`, once it has `status`.
    async fn wait_for_boot_image(&self, version: Option<&str>, status: u16) -> Response {
        let headers: Vec<(&str, &str)> = version.map(|v| vec![("X-MCO-Boot-Image-Version", v)]).unwrap_or_default();
        eventually(&format!("boot image {version:?} answered {status}"), || async {
            let r = self.get_with("/config/worker", &headers).await;
            if r.status == status { Ok(r) } else { Err((r.status, String::from_utf8_lossy(&r.body).into_owned())) }
        })
        .await
    }
}

/// The BootImageSkewRefused Events on pool `worker`.
async fn refusal_events(client: &Client) -> Vec<k8s_openapi::api::events::v1::Event> {
    let events: Api<k8s_openapi::api::events::v1::Event> = Api::all(client.clone());
    let list = events.list(&Default::default()).await.unwrap();
    list.items
        .into_iter()
        .filter(|e| {
            let regarding = e.regarding.as_ref();
            e.reason.as_deref() == Some("BootImageSkewRefused")
                && regarding.and_then(|r| r.kind.as_deref()) == Some("MachineConfigPool")
                && regarding.and_then(|r| r.name.as_deref()) == Some("worker")
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_mode_refuses_too_old_boot_images() {
    let env = TestEnv::start().await.unwrap();
    let client = env.client();
    let configurations: Api<MachineConfiguration> = Api::all(client.clone());
    let configuration: MachineConfiguration = from_json(json!({
        "apiVersion": "operator.openshift.io/v1", "kind": "MachineConfiguration",
        "metadata": {"name": "cluster"}, "spec": {}
    }));
    configurations.create(&PostParams::default(), &configuration).await.unwrap();
    let status = manual_rhcos("9.6.20251023-0");
    set_skew_status(&configurations, &status).await;
    let token_dir = tempfile::tempdir().unwrap();
    let served = serve_worker_pool(&env, token_dir.path()).await;

    // A machine booted from a RHEL 8.6 boot image: refused, with a text saying why and what to do.
    let refused = served.wait_for_boot_image(Some(OLD_BOOT_IMAGE), 403).await;
    assert_eq!(refused.header("content-type"), Some("text/plain; charset=utf-8"));
    let text = String::from_utf8(refused.body.clone()).unwrap();
    for part in [
        "refusing to serve the config of pool worker",
        "this machine's boot image version is 412.86.202301010000-0",
        "RHCOS boot image version 412.86.202301010000-0(RHEL version: 8.6) is below the minimum required RHEL version 9.2",
        "update the boot images",
        "set spec.bootImageSkewEnforcement.mode: None on machineconfiguration/cluster",
    ] {
        assert!(text.contains(part), "{part:?} missing from:\n{text}");
    }
    // A Warning Event on the pool; the machine retrying does not add more.
    let events = eventually("the refusal Event", || async {
        let events = refusal_events(&client).await;
        if events.is_empty() { Err("no BootImageSkewRefused Event") } else { Ok(events) }
    })
    .await;
    assert_eq!(events[0].type_.as_deref(), Some("Warning"));
    assert!(events[0].note.as_deref().unwrap().contains(OLD_BOOT_IMAGE), "{:?}", events[0].note);
    let again = served.get_with("/config/worker", &[("X-MCO-Boot-Image-Version", OLD_BOOT_IMAGE)]).await;
    assert_eq!(again.status, 403);
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(refusal_events(&client).await.len(), 1, "one Event per pool and version per 10 minutes");

    // Spec 2.x stubs send the version as a query parameter; the header wins over it.
    let query = format!("/config/worker?bootImageVersion={OLD_BOOT_IMAGE}");
    assert_eq!(served.get_with(&query, &[]).await.status, 403);
    let both = served.get_with(&query, &[("X-MCO-Boot-Image-Version", CURRENT_BOOT_IMAGE)]).await;
    assert_eq!(both.status, 200);

    // A current boot image gets its config, which carries the skew status for firstboot.
    let served_config = served.wait_for_boot_image(Some(CURRENT_BOOT_IMAGE), 200).await.json();
    let skew_file = file(&served_config, SKEW_STATUS_FILE).unwrap();
    assert_eq!(skew_file["mode"], 420);
    assert_eq!(serde_json::from_slice::<Value>(&contents(&served_config, SKEW_STATUS_FILE)).unwrap(), status);
    // A machine that does not say: the cluster's recorded boot image is current.
    served.wait_for_boot_image(None, 200).await;

    // An unreadable version: 400, naming it.
    let invalid = served.get_with("/config/worker", &[("X-MCO-Boot-Image-Version", "nine")]).await;
    assert_eq!(invalid.status, 400);
    assert!(String::from_utf8_lossy(&invalid.body).contains("invalid OCP version \"nine\""), "{invalid:?}");

    // The admin records an old boot image: machines that do not say theirs are refused.
    let old_record = json!({"mode": "Manual", "manual": {"mode": "OCPVersion", "ocpVersion": "4.12.0"}});
    set_skew_status(&configurations, &old_record).await;
    let silent = served.wait_for_boot_image(None, 403).await;
    let text = String::from_utf8(silent.body).unwrap();
    assert!(text.contains("did not send its boot image version"), "{text}");
    assert!(
        text.contains("OCP boot image version 4.12.0, which is below the minimum required version 4.13.0"),
        "{text}"
    );

    // Enforcement off: the old boot image is served, and the served status follows.
    set_skew_status(&configurations, &json!({"mode": "None"})).await;
    let served_config = served.wait_for_boot_image(Some(OLD_BOOT_IMAGE), 200).await.json();
    let skew_status: Value = serde_json::from_slice(&contents(&served_config, SKEW_STATUS_FILE)).unwrap();
    assert_eq!(skew_status, json!({"mode": "None"}));

    // No MachineConfiguration: no enforcement, no skew file.
    configurations.delete("cluster", &DeleteParams::default()).await.unwrap();
    let served_config = eventually("no skew file", || async {
        let body = served.get_with("/config/worker", &[("X-MCO-Boot-Image-Version", OLD_BOOT_IMAGE)]).await;
        if body.status != 200 {
            return Err((body.status, String::from_utf8_lossy(&body.body).into_owned()));
        }
        match file(&body.json(), SKEW_STATUS_FILE) {
            None => Ok(body.json()),
            Some(skew) => Err((body.status, skew.to_string())),
        }
    })
    .await;
    assert_eq!(contents(&served_config, "/etc/generation"), b"a");
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
