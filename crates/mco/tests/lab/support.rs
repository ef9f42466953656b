//! What the scenarios share: the lab itself, manifests they apply, and waits on what the lab's
//! controllers, daemons and kubelets do.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt as _;
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::{ApiResource, DynamicObject, ListParams, Patch, PatchParams};
use kube::runtime::{WatchStreamExt as _, watcher};
use kube::{Api, Client, ResourceExt as _};
use mco_api::constants::{
    CURRENT_CONFIG_ANNOTATION, MACHINE_API_NAMESPACE, MASTER_POOL, MCO_NAMESPACE, REASON_ANNOTATION, STATE_ANNOTATION,
};
use mco_api::operator::BootImageSkewEnforcementStatus;
use mco_api::{MachineConfigNode, MachineConfigPool, MachineConfiguration};
use mco_testenv::{Verbatim, eventually, eventually_within, satisfying};
use serde::Deserialize as _;
use serde_json::json;

use crate::common::{mco, stderr, stdout};

/// Worker nodes the lab comes up with; every lab also has one control-plane node, `master-0`.
pub const NODES: usize = 3;
pub const MASTER: &str = "master-0";
pub const ROLLOUT_TIMEOUT: Duration = Duration::from_secs(600);

/// A running lab (`mco lab up`), taken down (`mco lab down`) when dropped.
pub struct Lab {
    pub dir: tempfile::TempDir,
    pub client: Client,
    down: bool,
}

impl Lab {
    /// `mco lab up` on GCP (whose MachineSets the boot image controller manages) with [`NODES`]
    /// workers and Prometheus with mco's rules.
    pub async fn up() -> Result<Lab, String> {
        let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
        let state_dir = dir.path().join("lab");
        let nodes = NODES.to_string();
        let args = ["lab", "up", "--platform", "gcp", "--nodes", &nodes, "--prometheus", "--timeout", "1200"];
        let up = mco().args(args).arg("--state-dir").arg(&state_dir).assert();
        // A lab that did not come up may have started some of its parts: take it down either way.
        let down = || {
            let _ = mco().args(["lab", "down", "--state-dir"]).arg(&state_dir).output();
        };
        if !up.get_output().status.success() {
            down();
            return Err(format!("lab up: {}\n{}", stdout(&up), stderr(&up)));
        }
        let kubeconfig = state_dir.join("kubeconfig");
        match mco_controller::client(Some(&kubeconfig)).await {
            Ok(client) => Ok(Lab { dir, client, down: false }),
            Err(e) => {
                down();
                Err(format!("a client from {}: {e:#}", kubeconfig.display()))
            }
        }
    }

    pub fn state_dir(&self) -> PathBuf {
        self.dir.path().join("lab")
    }

    pub fn kubeconfig(&self) -> PathBuf {
        self.state_dir().join("kubeconfig")
    }

    pub fn mco(&self, args: &[&str]) -> assert_cmd::assert::Assert {
        mco().args(args).arg("--state-dir").arg(self.state_dir()).assert()
    }

    pub fn apply(&self, name: &str, manifest: &str) {
        let file = self.dir.path().join(format!("{name}.yaml"));
        std::fs::write(&file, manifest).unwrap();
        let assert = self.mco(&["lab", "apply", "-f", file.to_str().unwrap()]);
        assert!(assert.get_output().status.success(), "lab apply {name}: {}", stderr(&assert));
    }

    /// `mco lab status -o json`.
    pub fn status(&self) -> serde_json::Value {
        serde_json::from_str(&stdout(&self.mco(&["lab", "status", "-o", "json"]).success())).unwrap()
    }

    /// The joined nodes of the worker pool, by name.
    pub fn workers(&self) -> Vec<String> {
        let status = self.status();
        let nodes = status["nodes"].as_array().unwrap();
        let workers = nodes.iter().filter(|n| n["pool"] == "worker" && n["state"] == "Joined");
        workers.map(|n| n["name"].as_str().unwrap().to_string()).collect()
    }

    /// `mco lab down`, which must succeed and remove the state directory.
    pub fn down(&mut self) {
        self.down = true;
        let down = self.mco(&["lab", "down"]);
        assert!(down.get_output().status.success(), "{}", stderr(&down));
        assert!(!self.state_dir().exists());
    }

    pub fn is_down(&self) -> bool {
        self.down
    }

    /// Takes the lab down keeping its state directory (logs, node roots, etcd data) for a look at
    /// what went wrong, or with `only_logs` its logs (a lab's state takes gigabytes: a run whose
    /// failed labs kept all of it would fill the disk); returns where they are.
    pub fn down_keeping(mut self, only_logs: bool) -> PathBuf {
        self.down = true;
        let _ = self.mco(&["lab", "down", if only_logs { "--keep-logs" } else { "--keep" }]);
        self.dir.disable_cleanup(true);
        self.state_dir()
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        if !self.down {
            let _ = mco().args(["lab", "down"]).arg("--state-dir").arg(self.state_dir()).output();
        }
    }
}

pub fn file_mc(name: &str, path: &str, text: &str) -> String {
    files_mc(name, &[(path, text)])
}

/// A worker MachineConfig that writes each (path, text).
pub fn files_mc(name: &str, files: &[(&str, &str)]) -> String {
    role_files_mc("worker", name, files)
}

/// A MachineConfig of `role` that writes each (path, text).
pub fn role_files_mc(role: &str, name: &str, files: &[(&str, &str)]) -> String {
    let files: String = files
        .iter()
        .map(|(path, text)| {
            let encoded: String = text.bytes().map(|b| format!("%{b:02X}")).collect();
            format!("      - path: {path}\n        mode: 420\n        contents:\n          source: data:,{encoded}\n")
        })
        .collect();
    format!(
        "apiVersion: machineconfiguration.openshift.io/v1\nkind: MachineConfig\nmetadata:\n  name: {name}\n  labels:\n    \
         machineconfiguration.openshift.io/role: {role}\nspec:\n  config:\n    ignition:\n      version: 3.4.0\n    \
         storage:\n      files:\n{files}"
    )
}

/// Where the lab's policy has its signing key: upstream's path for one (a change there reloads
/// the container runtime instead of rebooting the node).
pub const SIGNING_KEY_PATH: &str = "/etc/machine-config-daemon/no-reboot/containers-gpg.pub";

/// Waits until every Node is Ready with `pods` as its pods capacity (what its kubelet read).
pub async fn pods_capacity(lab: &Lab, pods: &str) {
    let nodes: Api<Node> = Api::all(lab.client.clone());
    let count = lab.workers().len();
    eventually(&format!("every Node Ready with capacity.pods {pods}"), || async {
        let seen: Vec<(String, bool, Option<String>)> = nodes
            .list(&workers())
            .await
            .unwrap()
            .iter()
            .map(|n| {
                let capacity = n.status.as_ref().and_then(|s| s.capacity.as_ref()).and_then(|c| c.get("pods"));
                (summary(n), mco_lab::node::is_ready(n), capacity.map(|q| q.0.clone()))
            })
            .collect();
        satisfying(seen, |seen| {
            seen.len() == count && seen.iter().all(|(_, ready, c)| *ready && c.as_deref() == Some(pods))
        })
    })
    .await;
}

/// Waits until every worker Node is Ready and its kubelet reports an OS image that `wanted`.
pub async fn workers_report_os(lab: &Lab, wanted: impl Fn(&str) -> bool) {
    let nodes: Api<Node> = Api::all(lab.client.clone());
    let count = lab.workers().len();
    eventually("every worker Node Ready on the OS expected", || async {
        let all = nodes.list(&workers()).await.unwrap().items;
        let seen: Vec<(String, bool, String)> = all
            .iter()
            .map(|n| {
                let os = n.status.as_ref().and_then(|s| s.node_info.as_ref()).map(|i| i.os_image.clone());
                (summary(n), mco_lab::node::is_ready(n), os.unwrap_or_default())
            })
            .collect();
        satisfying(seen, |seen| seen.len() == count && seen.iter().all(|(_, ready, os)| *ready && wanted(os)))
    })
    .await;
}

/// PRETTY_NAME of [`os_update`]'s image: what the kubelet reports as the node's OS image.
pub const UPDATED_OS: &str = "MCO Test OS (lab update)";

/// Builds an OS update named `pretty_name`: the pools' image `from` plus a layer with a new
/// os-release (`mco image build --add`), into the lab registry as `mco/node:TAG`; returns it
/// pinned by digest. A layer rather than a Containerfile's `RUN` step: the base's layers are
/// neither pulled nor unpacked, so it takes a second where a build takes many (a full copy of the
/// OS tree in buildah's storage). The in-cluster build scenario derives with `RUN`.
pub fn os_update(lab: &Lab, from: &str, tag: &str, pretty_name: &str) -> String {
    let layer = lab.dir.path().join(format!("os-update-{tag}"));
    std::fs::create_dir_all(&layer).unwrap();
    let os_release = format!("NAME=\"MCO Test OS\"\nID=mco-test\nPRETTY_NAME=\"{pretty_name}\"\n");
    std::fs::write(layer.join("os-release"), os_release).unwrap();
    let (registry, _) = from.split_once('/').unwrap();
    let built = mco()
        .args(["image", "build", "--from"])
        .arg(format!("docker://{from}"))
        .arg("--add")
        .arg(format!("{}:/usr/lib", layer.display()))
        .arg("--to")
        .arg(format!("docker://{registry}/mco/node:{tag}"))
        .env("CONTAINERS_REGISTRIES_CONF", lab.state_dir().join("registries.conf"))
        .assert();
    assert!(built.get_output().status.success(), "{}", stderr(&built));
    format!("{registry}/mco/node@{}", stdout(&built).trim())
}

pub fn os_image_mc(name: &str, image: &str) -> String {
    format!(
        "apiVersion: machineconfiguration.openshift.io/v1\nkind: MachineConfig\nmetadata:\n  name: {name}\n  labels:\n    \
         machineconfiguration.openshift.io/role: worker\nspec:\n  osImageURL: {image}\n"
    )
}

/// The most nodes of the worker pool seen unavailable at once, from every watch event.
#[derive(Default)]
pub struct Observed {
    pub max_unavailable: usize,
    pub nodes: BTreeMap<String, Node>,
}

/// Watches the nodes until the returned task is aborted; once the lab is down the watch fails,
/// and the backoff keeps the task from spinning (it would stall the test runtime's shutdown).
pub fn observe(client: Client) -> (Arc<Mutex<Observed>>, tokio::task::JoinHandle<()>) {
    let observed = Arc::new(Mutex::new(Observed::default()));
    let shared = observed.clone();
    let task = tokio::spawn(async move {
        let nodes: Api<Node> = Api::all(client);
        let selector = watcher::Config::default().labels("node-role.kubernetes.io/worker");
        let mut events = watcher(nodes, selector).default_backoff().boxed();
        while let Some(event) = events.next().await {
            let Ok(event) = event else { continue };
            let mut observed = shared.lock().unwrap();
            match event {
                watcher::Event::Apply(node) | watcher::Event::InitApply(node) => {
                    observed.nodes.insert(node.metadata.name.clone().unwrap_or_default(), node);
                }
                watcher::Event::Delete(node) => {
                    observed.nodes.remove(&node.metadata.name.clone().unwrap_or_default());
                }
                watcher::Event::Init | watcher::Event::InitDone => {}
            }
            let unavailable = observed.nodes.values().filter(|n| mco_rollout::node::unavailable_for_update(n)).count();
            observed.max_unavailable = observed.max_unavailable.max(unavailable);
        }
    });
    (observed, task)
}

pub fn reset(observed: &Mutex<Observed>) {
    observed.lock().unwrap().max_unavailable = 0;
}

pub async fn pool(client: &Client) -> MachineConfigPool {
    Api::<MachineConfigPool>::all(client.clone()).get("worker").await.unwrap()
}

pub fn target(pool: &MachineConfigPool) -> String {
    pool.spec.configuration.as_ref().and_then(|c| c.name.clone()).unwrap_or_default()
}

/// Sets (a value) or removes (`null`) annotations of the worker pool: its rollout policy.
pub async fn annotate_pool(client: &Client, annotations: serde_json::Value) {
    Api::<MachineConfigPool>::all(client.clone())
        .patch("worker", &PatchParams::default(), &Patch::Merge(json!({ "metadata": {"annotations": annotations} })))
        .await
        .unwrap();
}

/// Waits until the worker pool's `RolloutHeld` condition is True for `reason`; returns its message.
pub async fn wait_held(client: &Client, reason: &str) -> String {
    eventually(&format!("RolloutHeld=True ({reason}) on the worker pool"), || async {
        let conditions = pool(client).await.status.and_then(|s| s.conditions).unwrap_or_default();
        let held = conditions.iter().find(|c| c.type_ == "RolloutHeld" && c.status == "True");
        match held {
            Some(c) if c.reason.as_deref() == Some(reason) => Ok(c.message.clone().unwrap_or_default()),
            _ => Err(conditions),
        }
    })
    .await
}

/// The workers' `(name, Done on config, OS the kubelet reports)`.
pub async fn workers_os(nodes: &Api<Node>, config: &str) -> Vec<(String, bool, String)> {
    let all = nodes.list(&workers()).await.unwrap().items;
    all.iter()
        .map(|n| {
            let os = n.status.as_ref().and_then(|s| s.node_info.as_ref()).map(|i| i.os_image.clone());
            (n.name_any(), done_on(n, config), os.unwrap_or_default())
        })
        .collect()
}

/// The worker pool's maxUnavailable as each scenario starts: every worker at once. Most scenarios
/// show what a rollout does, not its pace (the rollout scenarios show that), and one worker after
/// another made each rollout a third longer (a file to three workers under the workload's budget:
/// 17 s one at a time, 12.5 s all at once).
pub const EVERY_WORKER: &str = "100%";

pub async fn set_pool(client: &Client, spec: serde_json::Value) {
    Api::<MachineConfigPool>::all(client.clone())
        .patch("worker", &PatchParams::default(), &Patch::Merge(json!({ "spec": spec })))
        .await
        .unwrap();
}

/// Whether `node` runs `config` and says Done.
pub fn done_on(node: &Node, config: &str) -> bool {
    let get = |k| mco_rollout::node::annotation(node, k);
    get(CURRENT_CONFIG_ANNOTATION) == Some(config) && get(STATE_ANNOTATION) == Some("Done")
}

/// Waits until the pool's target is not `old` and every worker runs it (Done).
pub async fn rolled_out(lab: &Lab, old: &str) -> String {
    let client = &lab.client;
    let nodes: Api<Node> = Api::all(client.clone());
    let count = lab.workers().len();
    eventually_within(ROLLOUT_TIMEOUT, &format!("the rollout from {old:?} on every node"), || async {
        let pool = pool(client).await;
        let new = target(&pool);
        let all = nodes.list(&workers()).await.unwrap().items;
        let done = all.iter().filter(|n| done_on(n, &new)).count();
        let updated = pool.status.as_ref().and_then(|s| s.updated_machine_count);
        if new != old && done == count && updated == Some(count as i32) {
            Ok(new)
        } else {
            Err((format!("target {new}, updatedMachineCount {updated:?}"), all.iter().map(summary).collect::<Vec<_>>()))
        }
    })
    .await
}

/// Waits until the master pool's target is not `old` and master-0 runs it (Done); returns it.
pub async fn master_rolled_out(client: &Client, old: &str) -> String {
    let (pools, nodes) = (Api::<MachineConfigPool>::all(client.clone()), Api::<Node>::all(client.clone()));
    eventually_within(ROLLOUT_TIMEOUT, &format!("the master pool's rollout from {old:?}"), || async {
        let pool = pools.get(MASTER_POOL).await.unwrap();
        let new = target(&pool);
        let master = nodes.get(MASTER).await.unwrap();
        let updated = pool.status.as_ref().and_then(|s| s.updated_machine_count);
        if new != old && done_on(&master, &new) && updated == Some(1) { Ok(new) } else { Err((new, summary(&master))) }
    })
    .await
}

/// Waits until the worker pool's condition `kind` has `status`; returns its message.
pub async fn wait_condition(client: &Client, kind: &str, status: bool) -> String {
    let want = if status { "True" } else { "False" };
    eventually(&format!("{kind}={want} on the worker pool"), || async {
        let conditions = pool(client).await.status.and_then(|s| s.conditions).unwrap_or_default();
        match conditions.iter().find(|c| c.type_ == kind && c.status == want) {
            Some(c) => Ok(c.message.clone().unwrap_or_default()),
            None => Err(conditions),
        }
    })
    .await
}

pub fn summary(node: &Node) -> String {
    let get = |k| mco_rollout::node::annotation(node, k).unwrap_or_default();
    format!(
        "{}: {} {} {}",
        node.metadata.name.as_deref().unwrap_or_default(),
        get(CURRENT_CONFIG_ANNOTATION),
        get(STATE_ANNOTATION),
        get(REASON_ANNOTATION)
    )
}

pub const WORKLOAD_NAMESPACE: &str = "lab-workload";
/// What the Eviction API answers when a disruption budget refuses.
pub const REFUSED_BY_BUDGET: &str = "Cannot evict pod as it would violate the pod's disruption budget.";

/// Whether the pod runs, Ready, and is not being deleted.
pub fn serving(pod: &Pod) -> bool {
    let conditions = pod.status.as_ref().and_then(|s| s.conditions.as_ref());
    pod.metadata.deletion_timestamp.is_none()
        && conditions.is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// Waits until examples/lab/workload.yaml's three pods run, Ready, each on a lab node; returns
/// pod uid -> node name.
pub async fn workload_serving(client: &Client) -> BTreeMap<String, String> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), WORKLOAD_NAMESPACE);
    eventually("the workload's 3 pods Ready, each on a node", || async {
        let listed = pods.list(&ListParams::default().labels("app=web")).await.unwrap().items;
        let ready: BTreeMap<String, String> = listed
            .iter()
            .filter(|p| serving(p))
            .filter_map(|p| Some((p.metadata.uid.clone()?, p.spec.as_ref()?.node_name.clone()?)))
            .collect();
        if listed.len() == 3 && ready.len() == 3 && ready.values().all(|n| n.starts_with("worker-")) {
            Ok(ready)
        } else {
            let seen = listed.iter().map(|p| (&p.metadata.name, p.spec.as_ref().map(|s| &s.node_name), &p.status));
            Err(seen.map(|s| format!("{s:?}")).collect::<Vec<_>>())
        }
    })
    .await
}

/// The fewest of the workload's pods seen serving at once, from every watch event after all
/// three first served.
#[derive(Default)]
pub struct Serving {
    pub pods: BTreeMap<String, Pod>,
    pub fewest: Option<usize>,
}

pub fn observe_workload(client: Client) -> (Arc<Mutex<Serving>>, tokio::task::JoinHandle<()>) {
    let observed = Arc::new(Mutex::new(Serving::default()));
    let shared = observed.clone();
    let task = tokio::spawn(async move {
        let pods: Api<Pod> = Api::namespaced(client, WORKLOAD_NAMESPACE);
        let config = watcher::Config::default().labels("app=web");
        let mut events = watcher(pods, config).default_backoff().boxed();
        while let Some(event) = events.next().await {
            let Ok(event) = event else { continue };
            let mut observed = shared.lock().unwrap();
            match event {
                watcher::Event::Apply(pod) | watcher::Event::InitApply(pod) => {
                    observed.pods.insert(pod.metadata.uid.clone().unwrap_or_default(), pod);
                }
                watcher::Event::Delete(pod) => {
                    observed.pods.remove(&pod.metadata.uid.clone().unwrap_or_default());
                }
                watcher::Event::Init | watcher::Event::InitDone => continue,
            }
            let now = observed.pods.values().filter(|p| serving(p)).count();
            observed.fewest = match observed.fewest {
                None if now == 3 => Some(3),
                None => None,
                Some(fewest) => Some(fewest.min(now)),
            };
        }
    });
    (observed, task)
}

/// Runs a pod that fetches every workload pod's page by its pod IP (pods on other nodes among
/// them), then the workload's page through its Service, and reaches the API server
/// through the `kubernetes` Service (by the addresses the kubelet puts in its environment: the
/// lab has no cluster DNS; busybox speaks no TLS the API server accepts, so it asks in plain
/// HTTP, which the API server answers with its "400 Bad Request"); returns its log once it has
/// succeeded.
pub async fn probe_pod(client: &Client) -> String {
    let pods: Api<Pod> = Api::namespaced(client.clone(), WORKLOAD_NAMESPACE);
    let web = pods.list(&ListParams::default().labels("app=web")).await.unwrap().items;
    let addresses: Vec<String> = web.iter().filter_map(|p| p.status.as_ref()?.pod_ip.clone()).collect();
    // Retried for a while: kube-proxy programs a new Service asynchronously (until then, "No route
    // to host": the failed attempts' words stay out of the pages, but for the last one's). (`timeout`, not wget's -T,
    // which crashes Debian's busybox wget.)
    let script = format!(
        "for ip in {}; do timeout 5 wget -q -O- http://$ip:8080/ || exit 1; done; \
         i=0; until timeout 5 wget -q -O- http://$WEB_SERVICE_HOST:$WEB_SERVICE_PORT/ 2>/dev/null; do \
           i=$((i+1)); [ $i -lt 60 ] || {{ timeout 5 wget -q -O- http://$WEB_SERVICE_HOST:$WEB_SERVICE_PORT/; exit 1; }}; \
           sleep 1; done; \
         timeout 5 wget -O- http://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT/ 2>&1 | \
         grep -q '400 Bad Request' && echo api-reachable",
        addresses.join(" ")
    );
    let pod: Pod = serde_json::from_value(json!({
        "metadata": { "name": "probe" },
        "spec": {
            "restartPolicy": "Never",
            "containers": [{
                "name": "probe",
                "image": mco_lab::images::WORKLOAD_IMAGE,
                "command": ["/bin/sh", "-c", script],
            }],
        },
    }))
    .unwrap();
    pods.create(&Default::default(), &pod).await.unwrap();
    let (phase, status) = eventually("the probe pod to end", || async {
        let status = pods.get("probe").await.unwrap().status;
        let phase = status.as_ref().and_then(|s| s.phase.clone()).unwrap_or_default();
        satisfying((phase, status), |(phase, _)| phase == "Succeeded" || phase == "Failed")
    })
    .await;
    let said = pods.logs("probe", &Default::default()).await.unwrap();
    assert_eq!(phase, "Succeeded", "the probe pod said:\n{said}\n{status:?}");
    let node_of = |pod: &Pod| pod.spec.as_ref().and_then(|s| s.node_name.clone());
    let probe_node = node_of(&pods.get("probe").await.unwrap());
    let web_nodes: Vec<_> = web.iter().map(node_of).collect();
    assert!(
        web_nodes.iter().any(|n| *n != probe_node),
        "no web pod on another node than {probe_node:?}: {web_nodes:?}"
    );
    said
}

/// Applies examples/lab/workload.yaml (again: the same objects) with its budget at 2 of 3 pods,
/// and waits until its three pods serve; returns pod uid -> node name.
pub async fn ensure_workload(lab: &Lab) -> BTreeMap<String, String> {
    let workload = read(&Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/lab/workload.yaml"));
    lab.apply("workload", &workload);
    set_min_available(&lab.client, 2).await;
    workload_serving(&lab.client).await
}

pub async fn set_min_available(client: &Client, min_available: i32) {
    let budgets: Api<PodDisruptionBudget> = Api::namespaced(client.clone(), WORKLOAD_NAMESPACE);
    let patch = json!({ "spec": { "minAvailable": min_available } });
    budgets.patch("web", &PatchParams::default(), &Patch::Merge(patch)).await.unwrap();
    eventually(
        &format!("the disruption controller's status of the web budget at minAvailable {min_available}"),
        || async {
            let budget = budgets.get("web").await.unwrap();
            let status = budget.status.clone();
            let observed = status.as_ref().and_then(|s| s.observed_generation) == budget.metadata.generation;
            let allowed = 3 - min_available;
            satisfying(status, |s| {
                observed
                    && s.as_ref().is_some_and(|s| s.expected_pods == Some(3) && s.disruptions_allowed == Some(allowed))
            })
        },
    )
    .await;
}

/// `GET {prometheus}{path}`'s `data` (Prometheus's HTTP API, over HTTP/1.0 so that the body is
/// not chunked).
pub async fn prometheus_api(prometheus: &str, path: &str) -> serde_json::Value {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let address = prometheus.trim_start_matches("http://");
    let mut stream = tokio::net::TcpStream::connect(address).await.unwrap();
    stream.write_all(format!("GET {path} HTTP/1.0\r\nHost: {address}\r\n\r\n").as_bytes()).await.unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).await.unwrap();
    let (head, body) = response.split_once("\r\n\r\n").unwrap_or_else(|| panic!("{response}"));
    assert!(head.starts_with("HTTP/1.0 200 "), "GET {path}: {response}");
    let answer: serde_json::Value = serde_json::from_str(body).unwrap();
    answer["data"].clone()
}

/// The alerts pending or firing in the lab's Prometheus.
pub async fn prometheus_alerts(prometheus: &str) -> Vec<serde_json::Value> {
    prometheus_api(prometheus, "/api/v1/alerts").await["alerts"].as_array().unwrap().clone()
}

/// The daemon's pod on `node`, unless it is being deleted.
pub async fn daemon_pod(client: &Client, node: &str) -> Option<Pod> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), MCO_NAMESPACE);
    let listed = pods.list(&ListParams::default().labels("k8s-app=machine-config-daemon")).await.unwrap();
    listed.items.into_iter().find(|p| {
        p.metadata.deletion_timestamp.is_none() && p.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some(node)
    })
}

/// Where a lab node's boot id is (a new one at every boot).
pub const BOOT_ID: &str = "/proc/sys/kernel/random/boot_id";

/// The worker pool's nodes (the lab's control-plane node is in the master pool).
pub fn workers() -> ListParams {
    ListParams::default().labels("node-role.kubernetes.io/worker")
}

/// The digest of `image` (a tag in the lab registry).
pub fn registry_digest(lab: &Lab, image: &str) -> String {
    // Debian's skopeo ignores CONTAINERS_REGISTRIES_CONF: the lab's settings are passed as a flag.
    let inspected = std::process::Command::new("skopeo")
        .arg("--registries-conf")
        .arg(lab.state_dir().join("registries.conf"))
        .args(["inspect", "--format", "{{.Digest}}", &format!("docker://{image}")])
        .output()
        .unwrap();
    assert!(inspected.status.success(), "skopeo inspect {image}: {}", String::from_utf8_lossy(&inspected.stderr));
    String::from_utf8(inspected.stdout).unwrap().trim().to_string()
}

/// Tags `image` (the pool's OS image, by digest) as `mco/node:pool` in the lab registry and
/// returns that tag: whatever the scenarios before rolled out, the tag names the image the workers
/// run.
pub fn pool_tag(lab: &Lab, image: &str) -> String {
    let registry = lab_registry(lab);
    let tag = format!("{registry}/mco/node:pool");
    let copied = std::process::Command::new("skopeo")
        .arg("--registries-conf")
        .arg(lab.state_dir().join("registries.conf"))
        .args(["copy", "--quiet", "--preserve-digests", &format!("docker://{image}"), &format!("docker://{tag}")])
        .output()
        .unwrap();
    assert!(copied.status.success(), "skopeo copy {image} {tag}: {}", String::from_utf8_lossy(&copied.stderr));
    assert_eq!(format!("{registry}/mco/node@{}", registry_digest(lab, &tag)), image, "the tag names the image");
    tag
}

/// A PinnedImageSet of `image` for the worker pool.
pub fn pinned_image_set(name: &str, image: &str) -> String {
    format!(
        "apiVersion: machineconfiguration.openshift.io/v1\nkind: PinnedImageSet\nmetadata:\n  name: {name}\n  labels:\n    \
         machineconfiguration.openshift.io/role: worker\nspec:\n  pinnedImages:\n    - name: {image}\n"
    )
}

/// Each worker's PinnedImageSets as its MachineConfigNode reports them: (name, desired, current).
pub async fn workers_pinned_image_sets(client: &Client) -> Vec<Vec<(String, Option<i32>, Option<i32>)>> {
    let mcns = Api::<MachineConfigNode>::all(client.clone()).list(&ListParams::default()).await.unwrap();
    mcns.items
        .into_iter()
        .filter(|m| m.name_any().starts_with("worker-"))
        .map(|m| {
            let sets = m.status.and_then(|s| s.pinned_image_sets).unwrap_or_default();
            sets.into_iter().map(|s| (s.name, s.desired_generation, s.current_generation)).collect()
        })
        .collect()
}

/// Whether each worker's containerd has `image` and reports it pinned (the CRI's answer), or why
/// it could not be asked.
pub async fn workers_pinned(lab: &Lab, image: &str) -> Vec<Result<Option<bool>, String>> {
    let mut seen = Vec::new();
    for root in worker_roots(lab) {
        let socket = mco_apply::fsutil::host_path(&root, mco_cri::CONTAINERD_SOCKET).unwrap();
        let asked =
            async { anyhow::Ok(mco_cri::Runtime::connect(&socket).await?.image(image).await?.map(|i| i.pinned)) };
        seen.push(asked.await.map_err(|e| format!("{e:#}")));
    }
    seen
}

/// The joined workers' running machines' `/` (`lab status`'s `root`: through each machine's PID 1).
pub fn worker_roots(lab: &Lab) -> Vec<PathBuf> {
    lab.workers().iter().map(|name| node_root(lab, name)).collect()
}

/// Node `name`'s running machine's `/` (`lab status`'s `root`).
pub fn node_root(lab: &Lab, name: &str) -> PathBuf {
    let status = lab.status();
    let node = status["nodes"].as_array().unwrap().iter().find(|n| n["name"] == name);
    let root =
        node.and_then(|n| n["root"].as_str()).unwrap_or_else(|| panic!("{name} has no running machine: {status}"));
    PathBuf::from(root)
}

/// Runs `args` on node `name`'s running machine, as a shell on the host would (in its PID
/// namespace: systemd answers a caller outside it only at times).
pub async fn on_node(lab: &Lab, name: &str, args: &[&str]) -> Result<String, String> {
    let root = node_root(lab, name);
    let pid = root.to_str().and_then(|r| r.strip_prefix("/proc/")?.strip_suffix("/root")?.parse().ok());
    let pid = pid.and_then(rustix::process::Pid::from_raw).unwrap_or_else(|| panic!("{name}: root {root:?}"));
    crate::common::machine::in_machine(pid, args).await
}

/// What `mco diff` says of the move from rendered config `old` to `new` under the cluster's node
/// disruption policies (for a failure's message).
pub async fn rendered_diff(lab: &Lab, old: &str, new: &str) -> String {
    let configs: Api<mco_api::MachineConfig> = Api::all(lab.client.clone());
    let dir = tempfile::tempdir().unwrap();
    let mut paths = Vec::new();
    for name in [old, new] {
        let config = configs.get(name).await.unwrap();
        let path = dir.path().join(format!("{name}.json"));
        std::fs::write(&path, serde_json::to_vec(&config).unwrap()).unwrap();
        paths.push(path.to_string_lossy().into_owned());
    }
    let policies = Api::<MachineConfiguration>::all(lab.client.clone()).get("cluster").await.unwrap();
    let policies_path = dir.path().join("machineconfiguration.json");
    std::fs::write(&policies_path, serde_json::to_vec(&policies).unwrap()).unwrap();
    let diff = lab.mco(&["diff", "--policies", &policies_path.to_string_lossy(), &paths[0], &paths[1]]);
    format!("{}{}", stdout(&diff), stderr(&diff))
}

/// The `/` node `name`'s disk boots (its default deployment, its `/etc`), running or not.
pub fn disk_root(lab: &Lab, name: &str) -> PathBuf {
    let sysroot = lab.state_dir().join(format!("nodes/{name}/sysroot"));
    let status = mco_os::sysroot::status(&sysroot, &mco_os::sysroot::default_cmdline(&sysroot)).unwrap();
    sysroot.join(&status.booted().expect("a booted deployment").path)
}

pub fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Compares what `user` asked the lab's API server for (its audit log) with what the manifests the
/// lab applied from deploy/ grant it, both ways. `unexercised` lists (verb, resource, why) grants
/// the run is known not to use; with `only_roles`, only those roles' grants must have been used.
/// The audit log is read again until both agree or a bound passes: a watch is logged only once
/// it has started, which a loaded machine may delay past the scenario's end.
pub async fn assert_rbac_matches_use(
    lab: &Lab,
    user: &str,
    unexercised: &[(&str, &str, &str)],
    only_roles: Option<&[&str]>,
) {
    use mco_lab::rbac_audit::{check, grants, parse_audit_log};
    let [kubectl] = mco_testenv::find_binaries(["kubectl"]).unwrap();
    let rendered =
        std::process::Command::new(kubectl).args(["kustomize"]).arg(lab.state_dir().join("install")).output().unwrap();
    assert!(rendered.status.success(), "{}", String::from_utf8_lossy(&rendered.stderr));
    let objects: Vec<serde_json::Value> = serde_yaml::Deserializer::from_slice(&rendered.stdout)
        .map(|doc| serde_json::Value::deserialize(doc).unwrap())
        .collect();
    let grants = grants(&objects).unwrap();
    let audit_dir = std::fs::read_dir(lab.state_dir())
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.file_name().is_some_and(|n| n.to_string_lossy().starts_with("apiserver-")))
        .expect("the lab's API server directory");
    let exempt: Vec<_> = grants
        .iter()
        .filter(|g| unexercised.iter().any(|(verb, resource, _)| g.verb == *verb && g.resource == *resource))
        .collect();
    let what = format!("the requests of {user} in the audit log to match its grants");
    eventually_within(Duration::from_secs(180), &what, || async {
        let requests = parse_audit_log(&read(&audit_dir.join("audit.log"))).unwrap();
        assert!(requests.iter().any(|r| r.user == user), "no request of {user} in the audit log");
        let findings = check(&grants, &requests, &[user], &exempt);
        let missing: Vec<String> = findings.missing.iter().map(ToString::to_string).collect();
        let unused: Vec<String> = findings
            .unused
            .iter()
            .filter(|g| only_roles.is_none_or(|roles| roles.contains(&g.role.as_str())))
            .map(ToString::to_string)
            .collect();
        if missing.is_empty() && unused.is_empty() {
            Ok(())
        } else {
            Err(Verbatim(format!("refused or not granted:\n{missing:#?}\ngranted, never used:\n{unused:#?}")))
        }
    })
    .await;
}

pub const CONTROLLER_ACCOUNT: &str =
    "system:serviceaccount:openshift-machine-config-operator:machine-config-controller";
pub const SERVER_ACCOUNT: &str = "system:serviceaccount:openshift-machine-config-operator:machine-config-server";
pub const DAEMON_ACCOUNT: &str = "system:serviceaccount:openshift-machine-config-operator:machine-config-daemon";

/// The logs of mco's controller pods (the leader's and the other's), through the API server and
/// their kubelets.
pub async fn controller_log(client: &kube::Client) -> String {
    let pods: Api<Pod> = Api::namespaced(client.clone(), MCO_NAMESPACE);
    let listed = pods.list(&ListParams::default().labels("k8s-app=machine-config-controller")).await.unwrap();
    let mut text = String::new();
    for pod in listed.items {
        text += &pods.logs(&pod.name_any(), &Default::default()).await.unwrap_or_default();
    }
    text
}

/// Waits until MachineConfiguration `cluster`'s skew status records `want` where `recorded` reads.
pub async fn wait_skew_recorded(
    configurations: &Api<MachineConfiguration>,
    what: &str,
    want: &str,
    recorded: impl Fn(&BootImageSkewEnforcementStatus) -> Option<String>,
) {
    eventually(what, || async {
        let status = configurations.get("cluster").await.unwrap().status;
        let skew = status.as_ref().and_then(|s| s.boot_image_skew_enforcement_status.as_ref());
        if skew.and_then(&recorded).as_deref() == Some(want) { Ok(()) } else { Err(status) }
    })
    .await;
}

/// MachineConfiguration `cluster` with Manual skew enforcement at `rhcos_version`.
pub fn skew_manual(rhcos_version: &str) -> String {
    format!(
        "apiVersion: operator.openshift.io/v1\nkind: MachineConfiguration\nmetadata:\n  name: cluster\nspec:\n  \
         bootImageSkewEnforcement:\n    mode: Manual\n    manual:\n      mode: RHCOSVersion\n      rhcosVersion: {rhcos_version}\n"
    )
}

/// Waits until every worker is Done on `config` and schedulable (`note` says what for).
pub async fn workers_done_on(lab: &Lab, config: &str, note: &str) {
    let nodes: Api<Node> = Api::all(lab.client.clone());
    eventually(&format!("every worker Done on {config} and schedulable{note}"), || async {
        let all = nodes.list(&workers()).await.unwrap().items;
        let done =
            all.iter().all(|n| done_on(n, config) && !n.spec.as_ref().and_then(|s| s.unschedulable).unwrap_or(false));
        if done { Ok(()) } else { Err(all.iter().map(summary).collect::<Vec<_>>()) }
    })
    .await
}

/// The lab's base OS image (without the node layer: no kubelet), by digest.
pub fn base_os_image(lab: &Lab) -> String {
    let registry = lab_registry(lab);
    let inspected = mco()
        .args(["image", "inspect", "-o", "json", &format!("docker://{registry}/mco/os:base")])
        .env("CONTAINERS_REGISTRIES_CONF", lab.state_dir().join("registries.conf"))
        .assert()
        .success();
    let digest = serde_json::from_str::<serde_json::Value>(&stdout(&inspected)).unwrap()["digest"].clone();
    format!("{registry}/mco/os@{}", digest.as_str().unwrap())
}

/// The lab registry's `host:port`, from `mco lab status -o json`.
pub fn lab_registry(lab: &Lab) -> String {
    let status = lab.mco(&["lab", "status", "-o", "json"]).success();
    let status: serde_json::Value = serde_json::from_str(&stdout(&status)).unwrap();
    status["registry"].as_str().unwrap().to_string()
}

/// An RHCOS image of GCP's public boot images, from 4.11 (RHEL 8.6): the controller may replace it.
pub const OLD_RHCOS_GCP_IMAGE: &str = "projects/rhcos-cloud/global/images/rhcos-411-86-202205051017-0-gcp-x86-64";
/// An image of the admin's own project: the controller must leave it alone.
pub const GOLDEN_GCP_IMAGE: &str = "projects/mco-lab/global/images/golden-rhcos";

/// The installer-shaped GCP MachineSet of the boot image tests, named `name`, in the lab's
/// project, booting `image`.
pub fn gcp_machineset(name: &str, image: &str) -> serde_json::Value {
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("../bootimage/testdata/machinesets/gcp.yaml");
    let mut machineset: serde_json::Value = serde_yaml::from_str(&read(&fixture)).unwrap();
    machineset["metadata"]["name"] = json!(name);
    for labels in ["/spec/selector/matchLabels", "/spec/template/metadata/labels"] {
        machineset.pointer_mut(labels).unwrap()["machine.openshift.io/cluster-api-machineset"] = json!(name);
    }
    let provider = machineset.pointer_mut("/spec/template/spec/providerSpec/value").unwrap();
    provider["projectID"] = json!(mco_lab::manifests::GCP_PROJECT_ID);
    provider["disks"][0]["image"] = json!(image);
    machineset
}

/// The fixture ControlPlaneMachineSet `cluster` booting `image`, with the lab's project, and the
/// lab's one stub secret (the lab's control plane machines are not the Machine API's).
pub fn gcp_control_plane(image: &str) -> serde_json::Value {
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("../bootimage/testdata/controlplanemachinesets/gcp.yaml");
    let mut cpms: serde_json::Value = serde_yaml::from_str(&read(&fixture)).unwrap();
    let provider = cpms.pointer_mut(CONTROL_PLANE_PROVIDER_SPEC).unwrap();
    provider["projectID"] = json!(mco_lab::manifests::GCP_PROJECT_ID);
    provider["disks"][0]["image"] = json!(image);
    provider["userDataSecret"]["name"] = json!("worker-user-data");
    cpms
}

/// Where a ControlPlaneMachineSet's provider spec is.
pub const CONTROL_PLANE_PROVIDER_SPEC: &str =
    "/spec/template/machines_v1beta1_machine_openshift_io/spec/providerSpec/value";

/// A MachineSet as the API server holds it, every field.
pub async fn machineset(client: &Client, name: &str) -> serde_json::Value {
    let resource = ApiResource::erase::<mco_api::MachineSet>(&());
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), MACHINE_API_NAMESPACE, &resource);
    serde_json::to_value(api.get(name).await.unwrap()).unwrap()
}

pub async fn wait_boot_image(client: &Client, name: &str, image: &str) {
    eventually(&format!("MachineSet {name} booting {image}"), || async {
        let machineset = machineset(client, name).await;
        let booting = machineset.pointer("/spec/template/spec/providerSpec/value/disks/0/image");
        if booting == Some(&json!(image)) { Ok(()) } else { Err(booting.cloned()) }
    })
    .await;
}

/// `mco status` until its output contains `expected`; returns the output.
pub async fn status_showing(kubeconfig: &Path, expected: &str) -> String {
    eventually(&format!("mco status showing {expected:?}"), || async {
        let status = mco().args(["status", "--kubeconfig"]).arg(kubeconfig).output().unwrap();
        let status = String::from_utf8_lossy(&status.stdout).into_owned();
        if status.contains(expected) { Ok(status) } else { Err(status) }
    })
    .await
}

/// The file examples/lab/machineosconfig.yaml's Containerfile writes with `RUN`.
pub const LAYERED_FILE: &str = "usr/share/mco-lab/layered";

/// What each worker's booted deployment holds at [`LAYERED_FILE`] (`None`: nothing).
pub fn layered_file_on_workers(lab: &Lab) -> Vec<Option<String>> {
    lab.workers().iter().map(|name| std::fs::read_to_string(disk_root(lab, name).join(LAYERED_FILE)).ok()).collect()
}

/// Waits until the MachineOSBuild `name` has condition `kind` True; returns it.
pub async fn machine_os_build(client: &Client, name: &str, kind: &str) -> mco_api::MachineOSBuild {
    let builds: Api<mco_api::MachineOSBuild> = Api::all(client.clone());
    eventually_within(ROLLOUT_TIMEOUT, &format!("MachineOSBuild {name} {kind}"), || async {
        let build = builds.get_opt(name).await.unwrap();
        let conditions = build.as_ref().and_then(|b| b.status.clone()).and_then(|s| s.conditions).unwrap_or_default();
        match conditions.iter().any(|c| c.type_ == kind && c.status == "True") {
            true => Ok(build.unwrap()),
            false => Err(conditions.iter().map(|c| format!("{}={}", c.type_, c.status)).collect::<Vec<_>>()),
        }
    })
    .await
}

/// Waits until the MachineOSConfig names a new current build (not `old`); returns its name.
pub async fn new_machine_os_build(client: &Client, old: Option<&str>) -> String {
    let configs: Api<mco_api::MachineOSConfig> = Api::all(client.clone());
    eventually("a new MachineOSBuild named on the MachineOSConfig", || async {
        let config = configs.get("worker").await.unwrap();
        let current = config.annotations().get(mco_api::constants::CURRENT_MACHINE_OS_BUILD_ANNOTATION).cloned();
        satisfying(current, |c| c.is_some() && c.as_deref() != old).map(Option::unwrap)
    })
    .await
}

/// Waits until every worker runs `image` (`None`: its config's own), Done, and the pool is Updated.
pub async fn workers_on_image(lab: &Lab, image: Option<&str>) {
    let client = &lab.client;
    let nodes: Api<Node> = Api::all(client.clone());
    let count = lab.workers().len();
    let what = format!("every worker Done on image {image:?} and the pool Updated");
    eventually_within(ROLLOUT_TIMEOUT, &what, || async {
        let all = nodes.list(&workers()).await.unwrap().items;
        let seen: Vec<(String, Option<String>)> = all
            .iter()
            .map(|n| {
                let current = mco_rollout::node::annotation(n, mco_api::constants::CURRENT_IMAGE_ANNOTATION);
                (summary(n), current.map(str::to_string))
            })
            .collect();
        let pool = pool(client).await;
        let updated = pool
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|c| c.iter().any(|c| c.type_ == "Updated" && c.status == "True"));
        let on_image = seen.iter().all(|(s, current)| s.ends_with(" Done ") && current.as_deref() == image);
        if on_image && updated && seen.len() == count { Ok(()) } else { Err((updated, seen)) }
    })
    .await
}

pub fn desired_images(nodes: &[Node]) -> Vec<Option<String>> {
    nodes
        .iter()
        .map(|n| mco_rollout::node::annotation(n, mco_api::constants::DESIRED_IMAGE_ANNOTATION).map(str::to_string))
        .collect()
}
