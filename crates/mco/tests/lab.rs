//! The lab end to end: `mco lab up` with real etcd, kube-apiserver, kube-controller-manager,
//! kube-scheduler and kube-proxy, registry, images, Ignition, firstboot on OSTree sysroots, a real
//! kubelet and containerd and `mco daemon run` per node; then rollouts under a running workload,
//! watched through the API with the maxUnavailable invariant and the workload's disruption budget
//! checked at every observed moment. Needs root and the binaries `bash hack/setup.sh` and
//! `bash hack/kube-binaries.sh` provide.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt as _;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::authentication::v1::{BoundObjectReference, TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::{Node, Pod, ServiceAccount};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::{ApiResource, DynamicObject, ListParams, Patch, PatchParams};
use kube::runtime::{WatchStreamExt as _, watcher};
use kube::{Api, Client, ResourceExt as _};
use mco_api::constants::{
    CURRENT_CONFIG_ANNOTATION, CURRENT_IMAGE_ANNOTATION, DESIRED_CONFIG_ANNOTATION, MACHINE_API_NAMESPACE, MASTER_POOL,
    MCO_NAMESPACE, PINNED_OS_IMAGE_ANNOTATION, REASON_ANNOTATION, RESOLVE_OS_IMAGE_ANNOTATION,
    RESOLVED_OS_IMAGE_ANNOTATION, STATE_ANNOTATION, WORKER_POOL,
};
use mco_api::machineconfiguration::resolved_os_image_record;
use mco_api::operator::BootImageSkewEnforcementStatus;
use mco_api::{MachineConfigNode, MachineConfigPool, MachineConfiguration, OSImageStream};
use mco_os::signing::{SigningKey, lookaside_config};
use mco_testenv::{eventually, eventually_within, satisfying};
use serde_json::json;

mod common;
#[path = "common/transitions.rs"]
mod transitions;

use common::{mco, stderr, stdout};
use transitions::{Transitions, in_order};

/// Worker nodes; every lab also has one control-plane node, `master-0`.
const NODES: usize = 3;
const MASTER: &str = "master-0";
const ROLLOUT_TIMEOUT: Duration = Duration::from_secs(600);
/// One lab at a time: two would share the two cores and the timeouts.
static ONE_LAB: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

struct Lab {
    dir: tempfile::TempDir,
}

impl Lab {
    fn state_dir(&self) -> std::path::PathBuf {
        self.dir.path().join("lab")
    }

    fn mco(&self, args: &[&str]) -> assert_cmd::assert::Assert {
        mco().args(args).arg("--state-dir").arg(self.state_dir()).assert()
    }

    fn apply(&self, name: &str, manifest: &str) {
        let file = self.dir.path().join(format!("{name}.yaml"));
        std::fs::write(&file, manifest).unwrap();
        let assert = mco().args(["lab", "apply", "-f"]).arg(&file).arg("--state-dir").arg(self.state_dir()).assert();
        assert!(assert.get_output().status.success(), "lab apply {name}: {}", stderr(&assert));
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        let _ = mco().args(["lab", "down"]).arg("--state-dir").arg(self.state_dir()).output();
    }
}

fn file_mc(name: &str, path: &str, text: &str) -> String {
    files_mc(name, &[(path, text)])
}

/// A worker MachineConfig that writes each (path, text).
fn files_mc(name: &str, files: &[(&str, &str)]) -> String {
    role_files_mc("worker", name, files)
}

/// A MachineConfig of `role` that writes each (path, text).
fn role_files_mc(role: &str, name: &str, files: &[(&str, &str)]) -> String {
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
const SIGNING_KEY_PATH: &str = "/etc/machine-config-daemon/no-reboot/containers-gpg.pub";

/// Waits until every Node is Ready with `pods` as its pods capacity (what its kubelet read).
async fn pods_capacity(client: &Client, pods: &str) {
    let nodes: Api<Node> = Api::all(client.clone());
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
            seen.len() == NODES && seen.iter().all(|(_, ready, c)| *ready && c.as_deref() == Some(pods))
        })
    })
    .await;
}

/// Waits until every worker Node is Ready and its kubelet reports an OS image that `wanted`.
async fn workers_report_os(nodes: &Api<Node>, wanted: impl Fn(&str) -> bool) {
    eventually("every worker Node Ready on the OS expected", || async {
        let all = nodes.list(&workers()).await.unwrap().items;
        let seen: Vec<(String, bool, String)> = all
            .iter()
            .map(|n| {
                let os = n.status.as_ref().and_then(|s| s.node_info.as_ref()).map(|i| i.os_image.clone());
                (summary(n), mco_lab::node::is_ready(n), os.unwrap_or_default())
            })
            .collect();
        satisfying(seen, |seen| seen.len() == NODES && seen.iter().all(|(_, ready, os)| *ready && wanted(os)))
    })
    .await;
}

/// PRETTY_NAME of [`os_update`]'s image: what the kubelet reports as the node's OS image.
const UPDATED_OS: &str = "MCO Test OS (lab update)";

/// Builds an OS update named `pretty_name`, `FROM` the pools' image with a new os-release written
/// by a `RUN` step (the lab's OS images have a Debian userland), into the lab registry as
/// `mco/node:TAG`; returns it pinned by digest.
fn os_update(lab: &Lab, from: &str, tag: &str, pretty_name: &str) -> String {
    let context = lab.dir.path().join(format!("os-update-{tag}"));
    std::fs::create_dir_all(&context).unwrap();
    let containerfile = context.join("Containerfile");
    std::fs::write(
        &containerfile,
        format!(
            "FROM {from}\nRUN printf 'NAME=\"MCO Test OS\"\\nID=mco-test\\nPRETTY_NAME=\"{pretty_name}\"\\n' \
             > /usr/lib/os-release && test -s /var/lib/dpkg/status\n"
        ),
    )
    .unwrap();
    let (registry, _) = from.split_once('/').unwrap();
    let built = mco()
        .args(["image", "build", "-f"])
        .arg(&containerfile)
        .arg("--to")
        .arg(format!("docker://{registry}/mco/node:{tag}"))
        .arg(&context)
        .env("CONTAINERS_REGISTRIES_CONF", lab.state_dir().join("registries.conf"))
        .assert();
    assert!(built.get_output().status.success(), "{}", stderr(&built));
    format!("{registry}/mco/node@{}", stdout(&built).trim())
}

fn os_image_mc(name: &str, image: &str) -> String {
    format!(
        "apiVersion: machineconfiguration.openshift.io/v1\nkind: MachineConfig\nmetadata:\n  name: {name}\n  labels:\n    \
         machineconfiguration.openshift.io/role: worker\nspec:\n  osImageURL: {image}\n"
    )
}

async fn client(lab: &Lab) -> Client {
    let kubeconfig = lab.state_dir().join("kubeconfig");
    mco_controller::client(Some(&kubeconfig)).await.unwrap()
}

/// The most nodes of the worker pool seen unavailable at once, from every watch event.
#[derive(Default)]
struct Observed {
    max_unavailable: usize,
    nodes: BTreeMap<String, Node>,
}

/// Watches the nodes until the returned task is aborted; once the lab is down the watch fails,
/// and the backoff keeps the task from spinning (it would stall the test runtime's shutdown).
fn observe(client: Client) -> (Arc<Mutex<Observed>>, tokio::task::JoinHandle<()>) {
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

fn reset(observed: &Mutex<Observed>) {
    observed.lock().unwrap().max_unavailable = 0;
}

async fn pool(client: &Client) -> MachineConfigPool {
    Api::<MachineConfigPool>::all(client.clone()).get("worker").await.unwrap()
}

fn target(pool: &MachineConfigPool) -> String {
    pool.spec.configuration.as_ref().and_then(|c| c.name.clone()).unwrap_or_default()
}

/// Sets (a value) or removes (`null`) annotations of the worker pool: its rollout policy.
async fn annotate_pool(client: &Client, annotations: serde_json::Value) {
    Api::<MachineConfigPool>::all(client.clone())
        .patch("worker", &PatchParams::default(), &Patch::Merge(json!({ "metadata": {"annotations": annotations} })))
        .await
        .unwrap();
}

/// Waits until the worker pool's `RolloutHeld` condition is True for `reason`; returns its message.
async fn wait_held(client: &Client, reason: &str) -> String {
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
async fn workers_os(nodes: &Api<Node>, config: &str) -> Vec<(String, bool, String)> {
    let all = nodes.list(&workers()).await.unwrap().items;
    all.iter()
        .map(|n| {
            let os = n.status.as_ref().and_then(|s| s.node_info.as_ref()).map(|i| i.os_image.clone());
            (n.name_any(), done_on(n, config), os.unwrap_or_default())
        })
        .collect()
}

async fn set_pool(client: &Client, spec: serde_json::Value) {
    Api::<MachineConfigPool>::all(client.clone())
        .patch("worker", &PatchParams::default(), &Patch::Merge(json!({ "spec": spec })))
        .await
        .unwrap();
}

/// Whether `node` runs `config` and says Done.
fn done_on(node: &Node, config: &str) -> bool {
    let get = |k| mco_rollout::node::annotation(node, k);
    get(CURRENT_CONFIG_ANNOTATION) == Some(config) && get(STATE_ANNOTATION) == Some("Done")
}

/// Waits until the pool's target is not `old` and every node runs it (Done).
async fn rolled_out(client: &Client, old: &str) -> String {
    let nodes: Api<Node> = Api::all(client.clone());
    eventually_within(ROLLOUT_TIMEOUT, &format!("the rollout from {old:?} on every node"), || async {
        let pool = pool(client).await;
        let new = target(&pool);
        let all = nodes.list(&workers()).await.unwrap().items;
        let done = all.iter().filter(|n| done_on(n, &new)).count();
        let updated = pool.status.as_ref().and_then(|s| s.updated_machine_count);
        if new != old && done == NODES && updated == Some(NODES as i32) {
            Ok(new)
        } else {
            Err((format!("target {new}, updatedMachineCount {updated:?}"), all.iter().map(summary).collect::<Vec<_>>()))
        }
    })
    .await
}

/// Waits until the master pool's target is not `old` and master-0 runs it (Done); returns it.
async fn master_rolled_out(client: &Client, old: &str) -> String {
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
async fn wait_condition(client: &Client, kind: &str, status: bool) -> String {
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

fn summary(node: &Node) -> String {
    let get = |k| mco_rollout::node::annotation(node, k).unwrap_or_default();
    format!(
        "{}: {} {} {}",
        node.metadata.name.as_deref().unwrap_or_default(),
        get(CURRENT_CONFIG_ANNOTATION),
        get(STATE_ANNOTATION),
        get(REASON_ANNOTATION)
    )
}

const WORKLOAD_NAMESPACE: &str = "lab-workload";
/// What the Eviction API answers when a disruption budget refuses.
const REFUSED_BY_BUDGET: &str = "Cannot evict pod as it would violate the pod's disruption budget.";

/// Whether the pod runs, Ready, and is not being deleted.
fn serving(pod: &Pod) -> bool {
    let conditions = pod.status.as_ref().and_then(|s| s.conditions.as_ref());
    pod.metadata.deletion_timestamp.is_none()
        && conditions.is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// Waits until examples/lab/workload.yaml's three pods run, Ready, each on a lab node; returns
/// pod uid -> node name.
async fn workload_serving(client: &Client) -> BTreeMap<String, String> {
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
struct Serving {
    pods: BTreeMap<String, Pod>,
    fewest: Option<usize>,
}

fn observe_workload(client: Client) -> (Arc<Mutex<Serving>>, tokio::task::JoinHandle<()>) {
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
async fn probe_pod(client: &Client) -> String {
    let pods: Api<Pod> = Api::namespaced(client.clone(), WORKLOAD_NAMESPACE);
    let web = pods.list(&ListParams::default().labels("app=web")).await.unwrap().items;
    let addresses: Vec<String> = web.iter().filter_map(|p| p.status.as_ref()?.pod_ip.clone()).collect();
    // Retried for a while: kube-proxy programs a new Service asynchronously. (`timeout`, not
    // wget's -T, which crashes Debian's busybox wget.)
    let script = format!(
        "for ip in {}; do timeout 5 wget -q -O- http://$ip:8080/ || exit 1; done; \
         i=0; until timeout 5 wget -q -O- http://$WEB_SERVICE_HOST:$WEB_SERVICE_PORT/; do \
           i=$((i+1)); [ $i -lt 60 ] || exit 1; sleep 1; done; \
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

async fn set_min_available(client: &Client, min_available: i32) {
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
async fn prometheus_api(prometheus: &str, path: &str) -> serde_json::Value {
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
async fn prometheus_alerts(prometheus: &str) -> Vec<serde_json::Value> {
    prometheus_api(prometheus, "/api/v1/alerts").await["alerts"].as_array().unwrap().clone()
}

/// The daemon's pod on `node`, unless it is being deleted.
async fn daemon_pod(client: &Client, node: &str) -> Option<Pod> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), MCO_NAMESPACE);
    let listed = pods.list(&ListParams::default().labels("k8s-app=machine-config-daemon")).await.unwrap();
    listed.items.into_iter().find(|p| {
        p.metadata.deletion_timestamp.is_none() && p.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some(node)
    })
}

/// Where a lab node's boot id is (a new one at every boot).
const BOOT_ID: &str = mco_daemon::journal::DIRECTORY_ROOT_BOOT_ID;

/// The worker pool's nodes (the lab's control-plane node is in the master pool).
fn workers() -> ListParams {
    ListParams::default().labels("node-role.kubernetes.io/worker")
}

/// The digest of `image` (a tag in the lab registry).
fn registry_digest(lab: &Lab, image: &str) -> String {
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

/// A PinnedImageSet of `image` for the worker pool.
fn pinned_image_set(name: &str, image: &str) -> String {
    format!(
        "apiVersion: machineconfiguration.openshift.io/v1\nkind: PinnedImageSet\nmetadata:\n  name: {name}\n  labels:\n    \
         machineconfiguration.openshift.io/role: worker\nspec:\n  pinnedImages:\n    - name: {image}\n"
    )
}

/// Each worker's PinnedImageSets as its MachineConfigNode reports them: (name, desired, current).
async fn workers_pinned_image_sets(client: &Client) -> Vec<Vec<(String, Option<i32>, Option<i32>)>> {
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
async fn workers_pinned(lab: &Lab, image: &str) -> Vec<Result<Option<bool>, String>> {
    let mut seen = Vec::new();
    for root in worker_roots(lab) {
        let socket = mco_daemon::fsutil::host_path(&root, mco_cri::CONTAINERD_SOCKET);
        let asked =
            async { anyhow::Ok(mco_cri::Runtime::connect(&socket).await?.image(image).await?.map(|i| i.pinned)) };
        seen.push(asked.await.map_err(|e| format!("{e:#}")));
    }
    seen
}

fn worker_roots(lab: &Lab) -> Vec<std::path::PathBuf> {
    (0..NODES).map(|i| lab.state_dir().join(format!("nodes/worker-{i}/root"))).collect()
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Compares what `user` asked the lab's API server for (its audit log) with what the manifests the
/// lab applied from deploy/ grant it, both ways. `unexercised` lists (verb, resource, why) grants
/// the run is known not to use; with `only_roles`, only those roles' grants must have been used.
fn assert_rbac_matches_use(lab: &Lab, user: &str, unexercised: &[(&str, &str, &str)], only_roles: Option<&[&str]>) {
    use mco_lab::rbac_audit::{check, grants, parse_audit_log};
    use serde::Deserialize as _;
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
    let requests = parse_audit_log(&read(&audit_dir.join("audit.log"))).unwrap();
    assert!(requests.iter().any(|r| r.user == user), "no request of {user} in the audit log");
    let exempt: Vec<_> = grants
        .iter()
        .filter(|g| unexercised.iter().any(|(verb, resource, _)| g.verb == *verb && g.resource == *resource))
        .collect();
    let findings = check(&grants, &requests, &[user], &exempt);
    let missing: Vec<String> = findings.missing.iter().map(ToString::to_string).collect();
    let unused: Vec<String> = findings
        .unused
        .iter()
        .filter(|g| only_roles.is_none_or(|roles| roles.contains(&g.role.as_str())))
        .map(ToString::to_string)
        .collect();
    assert!(
        missing.is_empty() && unused.is_empty(),
        "refused or not granted:\n{missing:#?}\ngranted, never used:\n{unused:#?}"
    );
}

const CONTROLLER_ACCOUNT: &str = "system:serviceaccount:openshift-machine-config-operator:machine-config-controller";
const SERVER_ACCOUNT: &str = "system:serviceaccount:openshift-machine-config-operator:machine-config-server";
const DAEMON_ACCOUNT: &str = "system:serviceaccount:openshift-machine-config-operator:machine-config-daemon";

/// The logs of mco's controller pods (the leader's and the other's), through the API server and
/// their kubelets.
async fn controller_log(client: &kube::Client) -> String {
    let pods: Api<Pod> = Api::namespaced(client.clone(), MCO_NAMESPACE);
    let listed = pods.list(&ListParams::default().labels("k8s-app=machine-config-controller")).await.unwrap();
    let mut text = String::new();
    for pod in listed.items {
        text += &pods.logs(&pod.name_any(), &Default::default()).await.unwrap_or_default();
    }
    text
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lab_boots_nodes_and_rolls_out_within_max_unavailable() {
    let _one = ONE_LAB.lock().await;
    let lab = Lab { dir: tempfile::tempdir().unwrap() };
    let up = lab.mco(&["lab", "up", "--nodes", &NODES.to_string(), "--timeout", "1200", "--prometheus"]);
    assert!(up.get_output().status.success(), "lab up: {}\n{}", stdout(&up), stderr(&up));
    let client = client(&lab).await;

    // Every node booted with Ignition and pivoted on first boot: base config files in its root,
    // Done on the pool's first rendered config.
    let first = rolled_out(&client, "").await;
    for root in worker_roots(&lab) {
        assert_eq!(read(&root.join("etc/mco-lab/role")), "worker\n");
        assert!(root.join("etc/ignition-machine-config-encapsulated.json.bak").is_file(), "{}", root.display());
    }
    // The lab for scripts: where its parts are, every node with its pool and directories.
    let lab_status = lab.mco(&["lab", "status", "-o", "json"]).success();
    let lab_status: serde_json::Value = serde_json::from_str(&stdout(&lab_status)).unwrap();
    assert_eq!(lab_status["kubeconfig"], json!(lab.state_dir().join("kubeconfig")));
    assert!(lab_status["registry"].as_str().is_some_and(|r| r.starts_with("127.0.0.1:")), "{lab_status}");
    let prometheus = lab_status["prometheus"].as_str().unwrap_or_else(|| panic!("{lab_status}")).to_string();
    let listed = lab_status["nodes"].as_array().unwrap();
    assert_eq!(listed.len(), NODES + 1, "{lab_status}");
    assert_eq!((&listed[0]["name"], &listed[0]["pool"]), (&json!(MASTER), &json!("master")), "{lab_status}");
    for (node, root) in listed[1..].iter().zip(worker_roots(&lab)) {
        assert_eq!((&node["pool"], &node["state"], &node["root"]), (&json!("worker"), &json!("Joined"), &json!(root)));
        assert!(Path::new(node["sysroot"].as_str().unwrap()).join("ostree").is_dir(), "{node}");
    }
    let status = mco().args(["status", "--kubeconfig"]).arg(lab.state_dir().join("kubeconfig")).assert().success();
    let status = stdout(&status);
    // The nodes report the boot image they were installed from (the aleph file), not the image
    // they pivoted to.
    // The daemon reports it after the node's seeded annotations, so it may follow Done.
    let nodes: Api<Node> = Api::all(client.clone());
    eventually("every node reporting the boot image it was installed from", || async {
        let reported: Vec<(String, Option<serde_json::Value>)> = nodes
            .list(&workers())
            .await
            .unwrap()
            .iter()
            .map(|node| {
                let value = mco_rollout::node::annotation(node, mco_api::constants::BOOT_IMAGE_ANNOTATION);
                (summary(node), value.and_then(|v| serde_json::from_str(v).ok()))
            })
            .collect();
        let all = reported
            .iter()
            .all(|(_, image)| image.as_ref().is_some_and(|image| image["build"] == mco_lab::images::BOOT_VERSION));
        if all && reported.len() == NODES { Ok(()) } else { Err(reported) }
    })
    .await;
    for i in 0..NODES {
        let row = status.lines().find(|l| l.starts_with(&format!("worker-{i} "))).unwrap_or_else(|| panic!("{status}"));
        assert!(row.contains("Ready") && row.contains(&first) && row.contains("Done"), "{status}");
    }

    // The nodes are real: each Node was registered by its own kubelet, on its own containerd.
    for node in nodes.list(&Default::default()).await.unwrap() {
        let info = node.status.as_ref().and_then(|s| s.node_info.as_ref()).unwrap();
        assert_eq!(info.kubelet_version, "v1.36.3", "{}", summary(&node));
        // containerd 2, built by hack/kube-binaries.sh: not a containerd 1.x found on the host.
        assert!(info.container_runtime_version.starts_with("containerd://2."), "{info:?}");
    }
    // mco runs as it would on any cluster: each node's daemon is a pod of deploy/'s DaemonSet on
    // that node (which brought the node to Done above), under the daemon's own service account.
    let mco_pods: Api<Pod> = Api::namespaced(client.clone(), MCO_NAMESPACE);
    let daemons = mco_pods.list(&ListParams::default().labels("k8s-app=machine-config-daemon")).await.unwrap();
    let mut daemon_nodes: Vec<String> = daemons
        .iter()
        .map(|pod| {
            let owner = pod.owner_references().iter().find(|o| o.controller == Some(true)).map(|o| o.kind.as_str());
            let spec = pod.spec.as_ref().unwrap();
            assert_eq!(
                (owner, spec.service_account_name.as_deref()),
                (Some("DaemonSet"), Some("machine-config-daemon")),
                "{}",
                pod.name_any()
            );
            spec.node_name.clone().unwrap_or_default()
        })
        .collect();
    daemon_nodes.sort();
    let every_node: Vec<String> =
        std::iter::once(MASTER.to_string()).chain((0..NODES).map(|i| format!("worker-{i}"))).collect();
    assert_eq!(daemon_nodes, every_node);
    // The server's pod on the control-plane node, as upstream's, serving machines that boot from
    // now on (the lab's load balancer sends them there: the bootstrap server has stopped).
    let servers = mco_pods.list(&ListParams::default().labels("k8s-app=machine-config-server")).await.unwrap();
    let server_nodes: Vec<Option<String>> =
        servers.iter().map(|p| p.spec.as_ref().and_then(|s| s.node_name.clone())).collect();
    assert_eq!(server_nodes, [Some(MASTER.to_string())]);

    // The lab's Prometheus scrapes every mco pod that declares a `metrics` port (the daemons on
    // every node, both controllers, the server) and evaluates mco's rules from deploy/.
    let with_metrics_port = |pod: &Pod| {
        let containers = pod.spec.iter().flat_map(|s| &s.containers);
        containers.flat_map(|c| c.ports.iter().flatten()).any(|p| p.name.as_deref() == Some("metrics"))
    };
    let mut expected: Vec<String> = mco_pods
        .list(&ListParams::default())
        .await
        .unwrap()
        .iter()
        .filter(|p| with_metrics_port(p))
        .map(|p| p.name_any())
        .collect();
    expected.sort();
    assert!(expected.len() >= NODES + 1 + 2, "mco pods with a metrics port: {expected:?}");
    eventually("Prometheus scraping every mco pod", || async {
        let targets = prometheus_api(&prometheus, "/api/v1/targets?state=active").await;
        let mut up: Vec<String> = targets["activeTargets"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|t| t["health"] == "up")
            .map(|t| t["labels"]["pod"].as_str().unwrap_or_default().to_string())
            .collect();
        up.sort();
        if up == expected { Ok(()) } else { Err(targets) }
    })
    .await;
    let rules = prometheus_api(&prometheus, "/api/v1/rules").await;
    let groups: Vec<&str> = rules["groups"].as_array().unwrap().iter().filter_map(|g| g["name"].as_str()).collect();
    assert!(groups.contains(&"mcc-drain-error") && groups.contains(&"mcd-reboot-error"), "{groups:?}");

    // The control plane is real: the workload's ReplicaSet makes its pods, the scheduler binds
    // them to the nodes, their kubelets run them from the lab registry's image, the disruption
    // controller computes the budget's status, kube-proxy makes the Services reachable from pods.
    let workload =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/lab/workload.yaml"));
    lab.apply("workload", &workload.unwrap());
    let serving_before = workload_serving(&client).await;
    let (workload_seen, workload_observer) = observe_workload(client.clone());
    set_min_available(&client, 2).await;
    let said = probe_pod(&client).await;
    let pages: Vec<&str> = said.lines().collect();
    let pods: Api<Pod> = Api::namespaced(client.clone(), WORKLOAD_NAMESPACE);
    let mut names: Vec<String> = pods
        .list(&ListParams::default().labels("app=web"))
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|p| p.metadata.name)
        .collect();
    names.sort();
    // Each pod's own page by its address, one of them again through the Service, then the API.
    let mut by_address = pages[..3].to_vec();
    by_address.sort();
    assert_eq!(by_address, names, "{said}");
    assert!(names.iter().any(|n| n == pages[3]) && pages[4..] == ["api-reachable"], "{said}");

    let (observed, observer) = observe(client.clone());
    let transitions = Transitions::watch(client.clone());
    let mut current = first;
    for (step, max_unavailable) in [(1, json!(1)), (2, json!(2)), (3, json!("50%"))] {
        set_pool(&client, json!({ "maxUnavailable": max_unavailable })).await;
        tokio::time::sleep(Duration::from_secs(1)).await;
        reset(&observed);
        let name = format!("99-worker-step-{step}");
        lab.apply(&name, &file_mc(&name, &format!("/etc/lab/step-{step}"), &format!("step {step}\n")));
        current = rolled_out(&client, &current).await;
        // The watch delivers every change in order; once it has seen the end of the rollout, it
        // has seen every moment of it.
        eventually("the node watch to see the rollout's end", || async {
            let observed = observed.lock().unwrap();
            let seen: Vec<String> = observed.nodes.values().map(summary).collect();
            let caught_up = observed.nodes.len() == NODES && observed.nodes.values().all(|n| done_on(n, &current));
            if caught_up { Ok(()) } else { Err(seen) }
        })
        .await;
        let limit = match step {
            2 => 2,
            _ => 1,
        };
        let seen = observed.lock().unwrap().max_unavailable;
        assert!(seen <= limit, "step {step}: {seen} nodes unavailable at once, maxUnavailable {max_unavailable}");
        assert!(seen >= 1, "step {step}: the watch saw no node updating");
        for root in worker_roots(&lab) {
            assert_eq!(read(&root.join(format!("etc/lab/step-{step}"))), format!("step {step}\n"));
        }
    }

    // Each node's MachineConfigNode followed its updates step by step: the daemon's steps, the
    // drain controller's cordon, drain and uncordon, the reboot, in upstream's order.
    let update = [
        "Updated=False",
        "UpdatePrepared=True",
        "Cordoned=True",
        "Drained=Unknown",
        "Drained=True",
        "AppliedFilesAndOS=Unknown",
        "AppliedFilesAndOS=True",
        "RebootedNode=Unknown",
        "RebootedNode=True",
        "Uncordoned=True",
        "Resumed=True",
        "Updated=True",
    ];
    let three_updates = [update, update, update].concat();
    for i in 0..NODES {
        let node = format!("worker-{i}");
        eventually(&format!("{node}'s MachineConfigNode through three updates"), || {
            let seen = transitions.of(&node);
            let done = in_order(&seen, &three_updates);
            async move { if done { Ok(()) } else { Err(seen) } }
        })
        .await;
    }
    // `kubectl get machineconfignodes` prints upstream's columns; `mco status` each node's phase.
    let [kubectl] = mco_testenv::find_binaries(["kubectl"]).unwrap();
    let listed = std::process::Command::new(kubectl)
        .arg("--kubeconfig")
        .arg(lab.state_dir().join("kubeconfig"))
        .args(["get", "machineconfignodes"])
        .output()
        .unwrap();
    let listed = String::from_utf8_lossy(&listed.stdout).to_string();
    let header: Vec<&str> = listed.lines().next().unwrap_or_default().split_whitespace().collect();
    assert_eq!(header, ["NAME", "POOLNAME", "DESIREDCONFIG", "CURRENTCONFIG", "UPDATED", "AGE"], "{listed}");
    for i in 0..NODES {
        let row = listed.lines().find(|l| l.starts_with(&format!("worker-{i} "))).unwrap_or_else(|| panic!("{listed}"));
        let columns: Vec<&str> = row.split_whitespace().collect();
        assert_eq!(columns[1..5], ["worker", current.as_str(), current.as_str(), "True"], "{listed}");
    }
    let status = mco().args(["status", "--kubeconfig"]).arg(lab.state_dir().join("kubeconfig")).assert().success();
    let status = stdout(&status);
    for i in 0..NODES {
        let row = status.lines().find(|l| l.starts_with(&format!("worker-{i} "))).unwrap_or_else(|| panic!("{status}"));
        assert!(row.contains("Updated=True"), "{status}");
    }

    // Every node was drained by real evictions: every pod that was on a worker was evicted and
    // replaced, the workload never went below its budget, and it serves in full again.
    let serving_after = workload_serving(&client).await;
    let kept: Vec<_> = serving_after.keys().filter(|uid| serving_before.contains_key(*uid)).collect();
    assert!(
        kept.is_empty(),
        "pods that outlived three drains of every node: {kept:?} ({serving_before:?} -> {serving_after:?})"
    );
    let fewest = workload_seen.lock().unwrap().fewest;
    assert_eq!(fewest, Some(2), "the fewest pods serving at once during the rollouts (budget: 2)");
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), WORKLOAD_NAMESPACE);
    eventually("the web Deployment fully available", || async {
        let status = deployments.get("web").await.unwrap().status;
        satisfying(status, |s| s.as_ref().is_some_and(|s| s.available_replicas == Some(3)))
    })
    .await;

    // A budget that allows no disruption holds the drain of the first node (cordoned, its pod
    // still there, no node on the new config) until it is relaxed.
    set_min_available(&client, 3).await;
    set_pool(&client, json!({ "maxUnavailable": 1 })).await;
    lab.apply("99-worker-held", &file_mc("99-worker-held", "/etc/lab/held", "held\n"));
    let cordoned = eventually("a node cordoned for its drain", || async {
        let all = nodes.list(&workers()).await.unwrap().items;
        let cordoned = all.iter().find(|n| n.spec.as_ref().and_then(|s| s.unschedulable) == Some(true));
        cordoned.and_then(|n| n.metadata.name.clone()).ok_or_else(|| all.iter().map(summary).collect::<Vec<_>>())
    })
    .await;
    let held: Vec<String> =
        serving_after.iter().filter(|(_, node)| **node == cordoned).map(|(uid, _)| uid.clone()).collect();
    assert!(!held.is_empty(), "no workload pod on {cordoned}: {serving_after:?}");
    // The drain controller reports the refused eviction when its attempt times out (90 s), with
    // the API's own words, as it does today; the pod is still there then.
    eventually_within(Duration::from_secs(240), "the drain controller's report of the refused eviction", || async {
        let text = controller_log(&client).await;
        let reported = text
            .lines()
            .any(|line| line.contains("drain failed") && line.contains(&cordoned) && line.contains(REFUSED_BY_BUDGET));
        let tail: Vec<&str> = text.lines().rev().take(5).collect();
        if reported { Ok(()) } else { Err(mco_testenv::Verbatim(tail.join("\n"))) }
    })
    .await;
    let still = workload_serving(&client).await;
    assert!(held.iter().all(|uid| still.contains_key(uid)), "a budget of 3 of 3 let {held:?} go: {still:?}");
    // Past the lab's --drain-failed-after, the controller's mcc_drain_err for the node makes the
    // lab's Prometheus fire upstream's MCCDrainError, naming the node.
    let firing = eventually_within(Duration::from_secs(240), "MCCDrainError firing in Prometheus", || async {
        let alerts = prometheus_alerts(&prometheus).await;
        let firing = alerts.iter().find(|a| a["labels"]["alertname"] == "MCCDrainError" && a["state"] == "firing");
        firing.cloned().ok_or(alerts)
    })
    .await;
    assert_eq!(
        (&firing["labels"]["exported_node"], &firing["labels"]["severity"]),
        (&json!(cordoned), &json!("warning")),
        "{firing}"
    );
    let held_target = target(&pool(&client).await);
    let moved: Vec<String> =
        nodes.list(&workers()).await.unwrap().iter().filter(|n| done_on(n, &held_target)).map(summary).collect();
    assert!(moved.is_empty(), "nodes updated while the drain was held: {moved:?}");
    set_min_available(&client, 2).await;
    current = rolled_out(&client, &current).await;
    for root in worker_roots(&lab) {
        assert_eq!(read(&root.join("etc/lab/held")), "held\n");
    }
    // The drain succeeded: the controller dropped the node's series and the alert resolved.
    eventually("MCCDrainError resolved in Prometheus", || async {
        let alerts = prometheus_alerts(&prometheus).await;
        let drain = alerts.iter().any(|a| a["labels"]["alertname"] == "MCCDrainError");
        if drain { Err(alerts) } else { Ok(()) }
    })
    .await;
    // Every daemon's kubelet health checks found its own node's kubelet all along (master-0's
    // daemon has run since the install, checking every 30 s).
    let kubelet_states =
        prometheus_api(&prometheus, "/api/v1/query?query=max_over_time(mcd_kubelet_state%5B30m%5D)").await;
    let worst: Vec<(String, String)> = kubelet_states["result"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["metric"]["node"].as_str().unwrap_or_default().into(), r["value"][1].as_str().unwrap().into()))
        .collect();
    let checked: std::collections::BTreeSet<&str> = worst.iter().map(|(node, _)| node.as_str()).collect();
    assert_eq!(
        checked.into_iter().collect::<Vec<_>>(),
        [MASTER, "worker-0", "worker-1", "worker-2"],
        "{kubelet_states}"
    );
    assert!(worst.iter().all(|(_, failures)| failures == "0"), "kubelet health checks failed: {worst:?}");
    workload_observer.abort();

    // Two OS streams (upstream's OSImageStream): mco's controller found the release's streams by
    // its images' labels, and every pool renders from the default one. The worker pool names the
    // other stream: its nodes reboot into that stream's image while the master pool stays on the
    // default, and each pool reports the stream it runs; then both pools roll out a change side by
    // side, each on its stream. Naming none brings the workers back.
    let streams: Api<OSImageStream> = Api::all(client.clone());
    let stream = eventually("the OSImageStream with the lab's two streams", || async {
        let stream = streams.get_opt("cluster").await.unwrap();
        let names = stream.as_ref().and_then(|s| s.status.as_ref()).map(|s| {
            let names: Vec<&str> = s.available_streams.iter().map(|set| set.name.as_str()).collect();
            (names.join(","), s.default_stream.clone())
        });
        if names == Some(("rhel-10,rhel-9".into(), "rhel-9".into())) { Ok(stream.unwrap()) } else { Err(names) }
    })
    .await;
    let sets = stream.status.unwrap().available_streams;
    assert_eq!(sets[1].os_image, lab_status["osImage"].as_str().unwrap(), "the default stream runs the lab's image");
    let pool_streams = || async {
        let pools = Api::<MachineConfigPool>::all(client.clone());
        let stream_of = |pool: MachineConfigPool| pool.status.and_then(|s| s.os_image_stream).map(|r| r.name);
        (stream_of(pools.get(MASTER_POOL).await.unwrap()), stream_of(pools.get(WORKER_POOL).await.unwrap()))
    };
    eventually("both pools reporting the default stream", || async {
        satisfying(pool_streams().await, |s| *s == (Some("rhel-9".into()), Some("rhel-9".into())))
    })
    .await;
    set_pool(&client, json!({"osImageStream": {"name": "rhel-10"}})).await;
    current = rolled_out(&client, &current).await;
    let rendered = Api::<mco_api::MachineConfig>::all(client.clone()).get(&current).await.unwrap();
    assert_eq!(rendered.spec.os_image_url, sets[0].os_image);
    assert_eq!(rendered.spec.base_os_extensions_container_image, sets[0].os_extensions_image);
    workers_report_os(&nodes, |os| os == mco_lab::images::OTHER_STREAM_OS).await;
    eventually("the worker pool on rhel-10, the master pool on rhel-9", || async {
        satisfying(pool_streams().await, |s| *s == (Some("rhel-9".into()), Some("rhel-10".into())))
    })
    .await;
    // A new machine of the pool booted from the lab's (RHEL 9) boot image cannot pivot to RHEL 10:
    // the server refuses its config, saying why.
    let add = lab.mco(&["lab", "add-node", "--name", "worker-9"]);
    let said = stdout(&add);
    assert_eq!(add.get_output().status.code(), Some(1), "{said}\n{}", stderr(&add));
    let why = format!(
        "node worker-9 did not join: the Machine Config Server answered 403 Forbidden: refusing to serve the config \
         of pool worker: this machine's boot image version is {boot}: boot image is of another RHEL major: RHCOS boot \
         image version {boot}(RHEL version: 9.6) cannot pivot to the pool's OS stream rhel-10 (RHEL 10)",
        boot = mco_lab::images::BOOT_VERSION
    );
    assert!(said.contains(&why), "{said}");
    assert!(nodes.get_opt("worker-9").await.unwrap().is_none());
    // Both pools roll out a change side by side, each rendered from its own stream (after the
    // new machine's refusal: the server on master-0 is down while master-0 reboots).
    let master_config = target(&Api::<MachineConfigPool>::all(client.clone()).get(MASTER_POOL).await.unwrap());
    let stream_file = "/etc/lab/stream";
    lab.apply("99-master-stream", &role_files_mc("master", "99-master-stream", &[(stream_file, "master\n")]));
    lab.apply("99-worker-stream", &files_mc("99-worker-stream", &[(stream_file, "worker\n")]));
    current = rolled_out(&client, &current).await;
    let master_config = master_rolled_out(&client, &master_config).await;
    let rendered_image = |name: String| {
        let configs = Api::<mco_api::MachineConfig>::all(client.clone());
        async move { configs.get(&name).await.unwrap().spec.os_image_url }
    };
    assert_eq!(rendered_image(master_config).await, sets[1].os_image, "the master pool renders from rhel-9");
    assert_eq!(rendered_image(current.clone()).await, sets[0].os_image, "the worker pool renders from rhel-10");
    let master_root = lab.state_dir().join(format!("nodes/{MASTER}/root"));
    assert_eq!(read(&mco_daemon::fsutil::host_path(&master_root, stream_file)), "master\n");
    for root in worker_roots(&lab) {
        assert_eq!(read(&mco_daemon::fsutil::host_path(&root, stream_file)), "worker\n");
    }
    workers_report_os(&nodes, |os| os == mco_lab::images::OTHER_STREAM_OS).await;
    set_pool(&client, json!({"osImageStream": null})).await;
    current = rolled_out(&client, &current).await;
    workers_report_os(&nodes, |os| os != mco_lab::images::OTHER_STREAM_OS).await;
    eventually("both pools back on the default stream", || async {
        satisfying(pool_streams().await, |s| *s == (Some("rhel-9".into()), Some("rhel-9".into())))
    })
    .await;

    // An OS update is booted by a real reboot: each node's machine is powered off (its kubelet
    // and containers die), boots the new deployment, whose kubelet brings the Node back, which
    // now reports the new OS image.
    let update = os_update(&lab, lab_status["osImage"].as_str().unwrap(), "update", UPDATED_OS);
    lab.apply("99-worker-os-update", &os_image_mc("99-worker-os-update", &update));
    current = rolled_out(&client, &current).await;
    workers_report_os(&nodes, |os| os == UPDATED_OS).await;
    workload_serving(&client).await;

    // A KubeletConfig reaches the kubelets: its generated MachineConfig (the pool's kubelet.conf
    // from upstream's template, maxPods 42) rolls out, and after their reboot every Node reports
    // the capacity its kubelet read; deleting it rolls back to the lab's kubelet.conf.
    let max_pods = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/lab/kubeletconfig-max-pods.yaml"),
    );
    lab.apply("kubeletconfig-max-pods", &max_pods.unwrap());
    current = rolled_out(&client, &current).await;
    pods_capacity(&client, "42").await;
    Api::<mco_api::KubeletConfig>::all(client.clone()).delete("max-pods", &Default::default()).await.unwrap();
    current = rolled_out(&client, &current).await;
    pods_capacity(&client, "110").await;
    workload_serving(&client).await;

    // A PinnedImageSet for the worker pool (by its role label, as upstream selects them): every
    // worker's containerd really pulls the image from the lab registry (by a name no pod uses)
    // and pins it, its MachineConfigNode and the pool's synchronizer say so; deleting the set
    // unpins it. No rollout: pinning needs no new config.
    let registry = lab_registry(&lab);
    let pinned_image =
        format!("{registry}/lab/workload@{}", registry_digest(&lab, &format!("{registry}/lab/workload:1")));
    lab.apply("pinnedimageset-workload", &pinned_image_set("workload", &pinned_image));
    eventually("every worker's MachineConfigNode to have the set at generation 1", || async {
        satisfying(workers_pinned_image_sets(&client).await, |seen| {
            seen.len() == NODES && seen.iter().all(|sets| sets == &[("workload".to_string(), Some(1), Some(1))])
        })
    })
    .await;
    eventually("every worker's containerd to report the image pinned", || async {
        satisfying(workers_pinned(&lab, &pinned_image).await, |seen| seen.iter().all(|p| p == &Ok(Some(true))))
    })
    .await;
    eventually("the worker pool's PinnedImageSets synchronizer to count every worker", || async {
        let status = pool(&client).await.status.unwrap_or_default();
        let synchronizer = status.pool_synchronizers_status.unwrap_or_default();
        let counts: Vec<(String, i64, i64)> = synchronizer
            .into_iter()
            .map(|s| (s.pool_synchronizer_type, s.machine_count, s.updated_machine_count))
            .collect();
        satisfying(counts, |c| c == &[("PinnedImageSets".to_string(), NODES as i64, NODES as i64)])
    })
    .await;
    Api::<mco_api::PinnedImageSet>::all(client.clone()).delete("workload", &Default::default()).await.unwrap();
    eventually("the image unpinned on every worker", || async {
        satisfying(workers_pinned(&lab, &pinned_image).await, |seen| seen.iter().all(|p| p == &Ok(Some(false))))
    })
    .await;
    eventually("no worker's MachineConfigNode to list a set", || async {
        satisfying(workers_pinned_image_sets(&client).await, |seen| seen.iter().all(Vec::is_empty))
    })
    .await;

    // A paused pool gets a new target but no node moves; unpausing resumes.
    set_pool(&client, json!({ "paused": true })).await;
    lab.apply("99-worker-paused", &file_mc("99-worker-paused", "/etc/lab/paused", "paused\n"));
    eventually("the paused pool to target a new rendered config", || async {
        let target = target(&pool(&client).await);
        if target == current { Err(target) } else { Ok(()) }
    })
    .await;
    tokio::time::sleep(Duration::from_secs(10)).await;
    for root in worker_roots(&lab) {
        assert!(!root.join("etc/lab/paused").exists(), "a node of the paused pool updated: {}", root.display());
    }
    set_pool(&client, json!({ "paused": false })).await;
    current = rolled_out(&client, &current).await;
    for root in worker_roots(&lab) {
        assert_eq!(read(&root.join("etc/lab/paused")), "paused\n");
    }

    // A bad MachineConfig: the pool is RenderDegraded with the reason and no node is touched;
    // deleting it clears the condition.
    lab.apply("99-worker-bad", &file_mc("99-worker-bad", "relative/path", "bad\n"));
    let message = wait_condition(&client, "RenderDegraded", true).await;
    assert!(message.contains("99-worker-bad"), "{message}");
    assert_eq!(target(&pool(&client).await), current);
    let nodes: Api<Node> = Api::all(client.clone());
    for node in nodes.list(&workers()).await.unwrap() {
        let desired = mco_rollout::node::annotation(&node, mco_api::constants::DESIRED_CONFIG_ANNOTATION);
        assert_eq!(desired, Some(current.as_str()), "{}", summary(&node));
    }
    Api::<mco_api::MachineConfig>::all(client.clone()).delete("99-worker-bad", &Default::default()).await.unwrap();
    wait_condition(&client, "RenderDegraded", false).await;

    // A node that cannot apply goes Degraded with the reason; the pool says NodeDegraded; the
    // daemon retries and the rollout completes once the cause is gone.
    set_pool(&client, json!({ "maxUnavailable": 1 })).await;
    let blocked = worker_roots(&lab)[0].join("etc/lab/blocked");
    std::fs::create_dir_all(blocked.join("in-the-way")).unwrap();
    lab.apply("99-worker-blocked", &file_mc("99-worker-blocked", "/etc/lab/blocked", "blocked\n"));
    let message = wait_condition(&client, "NodeDegraded", true).await;
    assert!(message.contains("worker-0"), "{message}");
    std::fs::remove_dir_all(&blocked).unwrap();
    rolled_out(&client, &current).await;
    assert_eq!(read(&blocked), "blocked\n");

    // A daemon restarted in the middle of its node's update (its pod deleted, as an upgrade of mco
    // or an administrator would) leaves no half-done node: the DaemonSet's new pod takes the
    // update up from the node's journal and the rollout completes.
    lab.apply("99-worker-restart", &file_mc("99-worker-restart", "/etc/lab/restart", "restart\n"));
    let (updating, deleted) = eventually("a node Working on the new config, with its daemon's pod", || async {
        let listed = nodes.list(&workers()).await.unwrap().items;
        let working = listed.iter().find(|n| mco_rollout::node::annotation(n, STATE_ANNOTATION) == Some("Working"));
        let pod = match working {
            Some(node) => daemon_pod(&client, &node.name_any()).await,
            None => None,
        };
        match (working, pod) {
            (Some(node), Some(pod)) => Ok((node.name_any(), pod.name_any())),
            _ => Err(listed.iter().map(summary).collect::<Vec<_>>()),
        }
    })
    .await;
    let mco_pods: Api<Pod> = Api::namespaced(client.clone(), MCO_NAMESPACE);
    mco_pods.delete(&deleted, &Default::default()).await.unwrap();
    current = rolled_out(&client, &current).await;
    for root in worker_roots(&lab) {
        assert_eq!(read(&root.join("etc/lab/restart")), "restart\n", "{}", root.display());
    }
    let replacement = daemon_pod(&client, &updating).await.map(|p| p.name_any());
    assert!(replacement.is_some_and(|name| name != deleted), "{updating}'s daemon pod {deleted} was not replaced");

    // Upgrading mco itself: a new image digest applied with deploy/ rolls the controller's and the
    // daemons' pods, and no node is updated or rebooted for it.
    let boot_ids: Vec<String> =
        worker_roots(&lab).iter().map(|root| read(&mco_daemon::fsutil::host_path(root, BOOT_ID))).collect();
    let installed = lab.mco(&["lab", "install", "--image-version", "lab-upgrade"]);
    assert!(installed.get_output().status.success(), "lab install: {}", stderr(&installed));
    let digest = stdout(&installed).trim().to_string();
    assert!(digest.starts_with("sha256:"), "{digest}");
    eventually("every mco pod on the new image", || async {
        let pods = mco_pods.list(&Default::default()).await.unwrap().items;
        let images: Vec<(String, String)> = pods
            .iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .map(|p| (p.name_any(), p.spec.as_ref().unwrap().containers[0].image.clone().unwrap_or_default()))
            .collect();
        let on_new = images.iter().filter(|(_, image)| image.ends_with(&format!("@{digest}"))).count();
        // Two controller pods, a daemon on every node and the control-plane node's server.
        if on_new == images.len() && images.len() == 2 + (NODES + 1) + 1 { Ok(()) } else { Err(images) }
    })
    .await;
    for (root, before) in worker_roots(&lab).iter().zip(&boot_ids) {
        assert_eq!(&read(&mco_daemon::fsutil::host_path(root, BOOT_ID)), before, "{} rebooted", root.display());
    }
    for node in nodes.list(&workers()).await.unwrap() {
        assert!(done_on(&node, &current), "{}", summary(&node));
    }
    assert_eq!(target(&pool(&client).await), current);

    // Least privilege, both ways: every request the controller's pods made in all of the above
    // (the API server's audit log) was granted, and deploy/ grants them nothing they did not use
    // apart from what this run cannot exercise.
    let unexercised = [
        ("watch", "apiservers", "the lab has no APIServer kind: the list is answered 404, no watch follows"),
        ("watch", "featuregates", "the lab has no FeatureGate kind (as above)"),
        ("watch", "nodes", "the lab has no config.openshift.io Node kind (as above); core Nodes are watched"),
        ("watch", "schedulers", "the lab has no Scheduler kind (as above)"),
        ("patch", "containerruntimeconfigs", "no ContainerRuntimeConfig in this run"),
        ("patch", "containerruntimeconfigs/status", "no ContainerRuntimeConfig in this run"),
        ("update", "containerruntimeconfigs/finalizers", "owner references: see machineconfigpools/finalizers"),
        ("update", "kubeletconfigs/finalizers", "owner references: see machineconfigpools/finalizers"),
        (
            "update",
            "machineconfigpools/finalizers",
            "checked by the OwnerReferencesPermissionEnforcement admission plugin (OpenShift's) when an owner \
             reference blocks its owner's deletion, never a request of its own",
        ),
        ("update", "machineconfigs", "only when a generated config's owner was re-created"),
        ("patch", "machineosconfigs", "no MachineOSConfig in this run"),
        ("create", "leases", "the bootstrap controller created the Lease; a cluster without one has a pod create it"),
        ("create", "osimagestreams", "the bootstrap controller made it before the handover"),
        ("patch", "osimagestreams", "its annotations change with mco's version only"),
        ("patch", "osimagestreams/status", "the streams change with the release only"),
        ("patch", "events", "a repeated event within 6 minutes, which this run does not have"),
        // The boot image controller's writes: the bootstrap controller made them before the
        // handover; the GCP lab test checks them with the Machine API component.
        ("create", "machineconfigurations", "MachineConfiguration cluster exists"),
        ("patch", "machineconfigurations", "its status and opt-in were written by the bootstrap controller"),
        ("update", "machineconfigurations/status", "(as above)"),
        ("get", "configmaps", "coreos-bootimages: only read on platforms with boot image support"),
        ("create", "machineconfignodes", "the bootstrap controller may have made every Node's before the handover"),
        ("delete", "machineconfignodes", "only a gone Node's: this run deletes no Node"),
        // On-cluster builds: lab_builds_a_pools_os_image_in_the_cluster checks these grants.
        ("create", "machineosbuilds", "no MachineOSConfig in this run"),
        ("delete", "machineosbuilds", "(as above)"),
        ("patch", "machineosbuilds/status", "(as above)"),
        ("patch", "machineosconfigs/status", "(as above)"),
        ("get", "jobs", "(as above)"),
        ("create", "jobs", "(as above)"),
        ("delete", "jobs", "(as above)"),
        ("list", "configmaps", "(as above)"),
        ("create", "configmaps", "(as above)"),
        ("delete", "configmaps", "(as above)"),
        ("get", "secrets", "(as above)"),
    ];
    assert_rbac_matches_use(&lab, CONTROLLER_ACCOUNT, &unexercised, None);
    // The daemons' pods too: no Node access of their own (they write their Node with the kubelet's
    // credentials, which are not in this audit), the rest used.
    let unexercised = [("get", "configmaps", "image-registry-override-drain: only read when registries.conf changes")];
    assert_rbac_matches_use(&lab, DAEMON_ACCOUNT, &unexercised, Some(&["machine-config-daemon"]));
    // And the server's pod on the control-plane node.
    assert_rbac_matches_use(&lab, SERVER_ACCOUNT, &[], Some(&["machine-config-server"]));

    // A daemon pod's own credentials (a token bound to the pod, as the kubelet mounts it) may not
    // touch any Node, its own or another: the daemon writes its Node with the kubelet's.
    // (Last: the audit checks above would count these refusals.)
    let daemon = daemon_pod(&client, "worker-0").await.expect("worker-0's daemon pod");
    let bound = TokenRequest {
        spec: Some(TokenRequestSpec {
            bound_object_ref: Some(BoundObjectReference {
                api_version: Some("v1".into()),
                kind: Some("Pod".into()),
                name: Some(daemon.name_any()),
                uid: daemon.uid(),
            }),
            expiration_seconds: Some(600),
            ..Default::default()
        }),
        ..Default::default()
    };
    let token = Api::<ServiceAccount>::namespaced(client.clone(), MCO_NAMESPACE)
        .create_token_request("machine-config-daemon", &Default::default(), &bound)
        .await
        .unwrap()
        .status
        .and_then(|status| status.token)
        .unwrap();
    let mut as_daemon = kube::Config::from_custom_kubeconfig(
        kube::config::Kubeconfig::read_from(lab.state_dir().join("kubeconfig")).unwrap(),
        &Default::default(),
    )
    .await
    .unwrap();
    as_daemon.auth_info = kube::config::AuthInfo { token: Some(token.into()), ..Default::default() };
    let daemon_nodes_api: Api<Node> = Api::all(Client::try_from(as_daemon).unwrap());
    let annotate = json!({"metadata": {"annotations": {"lab.mco/written-by": "a daemon pod"}}});
    for node in ["worker-0", "worker-1"] {
        match daemon_nodes_api.patch(node, &PatchParams::default(), &Patch::Merge(&annotate)).await {
            Err(kube::Error::Api(response)) => assert_eq!(response.code, 403, "{node}: {response:?}"),
            other => panic!("a daemon pod's token annotating Node {node}: {other:?}"),
        }
    }
    // It writes its own Node's MachineConfigNode status, not another's (deploy/'s mcn-guards). The
    // write sets what is there already, under a field manager of its own.
    let daemon_mcns: Api<MachineConfigNode> = Api::all(daemon_nodes_api.into_client());
    let own_mcn = Api::<MachineConfigNode>::all(client.clone()).get("worker-0").await.unwrap();
    let desired = own_mcn.status.and_then(|s| s.config_version).map(|v| v.desired).unwrap();
    let as_is = json!({
        "apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineConfigNode",
        "status": {"configVersion": {"desired": desired}},
    });
    let apply = PatchParams::apply("lab-test").force();
    let own = daemon_mcns.patch_status("worker-0", &apply, &Patch::Apply(&as_is)).await;
    assert!(own.is_ok(), "worker-0's daemon writing its own MachineConfigNode: {own:?}");
    match daemon_mcns.patch_status("worker-1", &apply, &Patch::Apply(&as_is)).await {
        Err(kube::Error::Api(response)) => assert!(
            response.message.contains("updates to MCN worker-1 can only be done from the MCN's owner node"),
            "{response:?}"
        ),
        other => panic!("worker-0's daemon writing worker-1's MachineConfigNode: {other:?}"),
    }

    observer.abort();
    let down = lab.mco(&["lab", "down"]);
    assert!(down.get_output().status.success(), "{}", stderr(&down));
    assert!(!lab.state_dir().exists());
}

/// Waits until MachineConfiguration `cluster`'s skew status records `want` where `recorded` reads.
async fn wait_skew_recorded(
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
fn skew_manual(rhcos_version: &str) -> String {
    format!(
        "apiVersion: operator.openshift.io/v1\nkind: MachineConfiguration\nmetadata:\n  name: cluster\nspec:\n  \
         bootImageSkewEnforcement:\n    mode: Manual\n    manual:\n      mode: RHCOSVersion\n      rhcosVersion: {rhcos_version}\n"
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lab_refuses_a_too_old_boot_image_until_the_node_is_reprovisioned() {
    let _one = ONE_LAB.lock().await;
    let lab = Lab { dir: tempfile::tempdir().unwrap() };
    let up = lab.mco(&["lab", "up", "--nodes", "1", "--timeout", "1200"]);
    assert!(up.get_output().status.success(), "lab up: {}\n{}", stdout(&up), stderr(&up));
    let client = client(&lab).await;
    let configurations: Api<MachineConfiguration> = Api::all(client.clone());
    let nodes: Api<Node> = Api::all(client.clone());
    let old = mco_lab::images::OLD_BOOT_VERSION;

    // The admin enforces skew by hand, recording the cluster's boot images as current.
    lab.apply("skew-current", &skew_manual(mco_lab::images::BOOT_VERSION));
    wait_skew_recorded(&configurations, "the Manual skew status", mco_lab::images::BOOT_VERSION, |skew| {
        skew.manual.as_ref()?.rhcos_version.clone()
    })
    .await;

    // A machine from the old boot image that says its version: the server refuses its config.
    let add = lab.mco(&["lab", "add-node", "--name", "worker-1", "--boot-image", "old"]);
    let said = stdout(&add);
    assert_eq!(add.get_output().status.code(), Some(1), "{said}\n{}", stderr(&add));
    assert!(said.contains("node worker-1 did not join: the Machine Config Server answered 403 Forbidden: "), "{said}");
    let too_old = format!(
        "this machine's boot image version is {old}: boot image is too old: RHCOS boot image version {old}(RHEL \
         version: 8.6) is below the minimum required RHEL version 9.2"
    );
    assert!(said.contains(&too_old), "{said}");
    let status = stdout(&lab.mco(&["lab", "status"]).success());
    assert!(status.contains("not joined: worker-1: the Machine Config Server answered 403 Forbidden"), "{status}");
    assert!(nodes.get_opt("worker-1").await.unwrap().is_none());

    // The same machine without the header gets its config, and firstboot refuses to pivot.
    let add = lab.mco(&["lab", "add-node", "--name", "worker-1", "--boot-image", "old", "--no-version-header"]);
    let said = stdout(&add);
    assert_eq!(add.get_output().status.code(), Some(1), "{said}\n{}", stderr(&add));
    let reason = format!(
        "boot image is too old: RHCOS boot image version {old}(RHEL version: 8.6) is below the minimum required RHEL \
         version 9.2"
    );
    assert!(
        said.contains(&format!("node worker-1 did not join: firstboot: This machine was not provisioned: {reason}"))
    );
    let root = lab.state_dir().join("nodes/worker-1/root");
    assert!(read(&root.join("etc/issue.d/mco-boot-image-skew.issue")).contains(&reason));
    assert!(root.join("etc/ignition-machine-config-encapsulated.json").is_file(), "firstboot must leave it");
    let served: serde_json::Value =
        serde_json::from_str(&read(&root.join("etc/machine-config-daemon/boot-image-skew-enforcement.json"))).unwrap();
    assert_eq!(served["mode"], "Manual", "{served}");
    assert!(nodes.get_opt("worker-1").await.unwrap().is_none());

    // Re-provisioned from the current boot image, it joins and the pool counts it updated.
    let add = lab.mco(&["lab", "add-node", "--name", "worker-1"]);
    assert!(add.get_output().status.success(), "{}\n{}", stdout(&add), stderr(&add));
    assert!(stdout(&add).contains("node worker-1 joined"));
    eventually("both workers updated", || async {
        let status = pool(&client).await.status.unwrap_or_default();
        let counts = (status.machine_count, status.updated_machine_count);
        if counts == (Some(2), Some(2)) { Ok(()) } else { Err(counts) }
    })
    .await;
    let status = stdout(&lab.mco(&["lab", "status"]).success());
    assert!(status.contains("nodes: master-0, worker-0, worker-1") && !status.contains("not joined"), "{status}");

    // Recording an older boot image blocks cluster upgrades, with upstream's message.
    lab.apply("skew-old", &skew_manual(old));
    let kubeconfig = lab.state_dir().join("kubeconfig");
    let blocked = format!(
        "Upgradeable: False (ClusterBootImageSkewError): Upgrades have been disabled because the cluster is using \
         RHCOS boot image version {old}(RHEL version: 8.6), which is below the minimum required RHEL version 9.2. To \
         enable upgrades, please update your boot images or disable boot image skew enforcement by following the \
         documentation at https://docs.redhat.com/en/documentation/openshift_container_platform/4.22/html/\
         machine_configuration/mco-update-boot-skew-mgmt"
    );
    status_showing(&kubeconfig, &blocked).await;

    // A pool whose OS image has no kubelet (the base image, without the node layer): its new node
    // pivots and reboots into it, cannot start a kubelet, and is reported as not joined, with
    // the reason; the lab's other nodes run on. (A custom pool of no node yet, as an admin makes
    // one for infrastructure nodes: it serves the config it rendered at once.)
    let registry = lab_registry(&lab);
    let inspected = mco()
        .args(["image", "inspect", "-o", "json", &format!("docker://{registry}/mco/os:base")])
        .env("CONTAINERS_REGISTRIES_CONF", lab.state_dir().join("registries.conf"))
        .assert()
        .success();
    let digest = serde_json::from_str::<serde_json::Value>(&stdout(&inspected)).unwrap()["digest"].clone();
    let base = format!("{registry}/mco/os@{}", digest.as_str().unwrap());
    let infra = json!({
        "apiVersion": "machineconfiguration.openshift.io/v1",
        "kind": "MachineConfigPool",
        "metadata": {"name": "infra"},
        "spec": {
            "machineConfigSelector": {"matchExpressions": [{
                "key": "machineconfiguration.openshift.io/role", "operator": "In", "values": ["worker", "infra"],
            }]},
            "nodeSelector": {"matchLabels": {"node-role.kubernetes.io/infra": ""}},
        },
    });
    lab.apply("infra-pool", &infra.to_string());
    lab.apply("99-infra-base-os", &os_image_mc("99-infra-base-os", &base).replace("role: worker", "role: infra"));
    eventually("the infra pool to serve the base image", || async {
        let pools: Api<MachineConfigPool> = Api::all(client.clone());
        let served = pools.get("infra").await.unwrap().status.and_then(|s| s.configuration?.name).unwrap_or_default();
        let mcs = Api::<mco_api::MachineConfig>::all(client.clone());
        let rendered = if served.is_empty() { None } else { mcs.get_opt(&served).await.unwrap() };
        let image = rendered.map(|mc| mc.spec.os_image_url);
        if image.as_deref() == Some(base.as_str()) { Ok(()) } else { Err((served, image)) }
    })
    .await;
    let add = lab.mco(&["lab", "add-node", "--pool", "infra", "--name", "infra-0"]);
    let said = stdout(&add);
    assert_eq!(add.get_output().status.code(), Some(1), "{said}\n{}", stderr(&add));
    assert!(
        said.contains("node infra-0 did not join: ") && said.contains("has no kubelet (/usr/bin/kubelet)"),
        "{said}"
    );
    assert!(nodes.get_opt("infra-0").await.unwrap().is_none());
    let status = stdout(&lab.mco(&["lab", "status"]).success());
    assert!(
        status.contains("not joined: infra-0: ") && status.contains("nodes: master-0, worker-0, worker-1"),
        "{status}"
    );
    let worker = nodes.get("worker-0").await.unwrap();
    assert!(mco_lab::node::is_ready(&worker), "{}", summary(&worker));

    // An OS image named by a tag is resolved once, before any node gets it: the rendered config
    // keeps the tag (upstream's name and content) and carries the digest every worker deploys.
    let configs = Api::<mco_api::MachineConfig>::all(client.clone());
    let workers_done_on = |config: String, note: &'static str| {
        let nodes = nodes.clone();
        async move {
            eventually(&format!("every worker Done on {config} and schedulable{note}"), || async {
                let all = nodes.list(&workers()).await.unwrap().items;
                let done = all
                    .iter()
                    .all(|n| done_on(n, &config) && !n.spec.as_ref().and_then(|s| s.unschedulable).unwrap_or(false));
                if done { Ok(()) } else { Err(all.iter().map(summary).collect::<Vec<_>>()) }
            })
            .await
        }
    };
    let before = target(&pool(&client).await);
    let pool_image = configs.get(&before).await.unwrap().spec.os_image_url;
    let tag = format!("{registry}/mco/node:latest");
    lab.apply("99-worker-tag", &os_image_mc("99-worker-tag", &tag));
    let tagged = eventually("the worker pool to target the tag's config", || async {
        satisfying(target(&pool(&client).await), |t| *t != before)
    })
    .await;
    let rendered = configs.get(&tagged).await.unwrap();
    assert_eq!(rendered.spec.os_image_url, tag);
    assert_eq!(rendered.annotations().get(PINNED_OS_IMAGE_ANNOTATION), Some(&pool_image), "the tag's digest");
    workers_done_on(tagged.clone(), "").await;

    // An image the registry does not have targets no node: the pool says which and why.
    let missing = format!("{registry}/mco/node:missing");
    lab.apply("99-worker-tag", &os_image_mc("99-worker-tag", &missing));
    let message = wait_condition(&client, "RenderDegraded", true).await;
    assert!(message.contains(&format!("OS image {missing} of rendered-worker-")), "{message}");
    assert!(message.contains("refused before any node gets it: it cannot be read"), "{message}");
    status_showing(&lab.state_dir().join("kubeconfig"), &format!("OS image {missing}")).await;
    assert_eq!(target(&pool(&client).await), tagged, "no new target");
    let all = nodes.list(&workers()).await.unwrap().items;
    assert!(all.iter().all(|n| done_on(n, &tagged)), "{:?}", all.iter().map(summary).collect::<Vec<_>>());
    configs.delete("99-worker-tag", &Default::default()).await.unwrap();
    wait_condition(&client, "RenderDegraded", false).await;
    workers_done_on(before.clone(), "").await;

    // Signed OS images: MachineConfigs give the workers a containers policy that requires the lab
    // registry's images to be signed with the lab's GPG key, the key, and where the signatures are
    // (the lab's signature store). The controller's pod checks the signatures (with gpg in mco's
    // image) before any node gets an image: the signed tag (the image the workers run, so they
    // only write the files; the daemon test shows a node's own check) rolls out, an unsigned
    // image targets no node.
    let lab_status: serde_json::Value =
        serde_json::from_str(&stdout(&lab.mco(&["lab", "status", "-o", "json"]).success())).unwrap();
    let signatures = lab_status["signatures"].as_str().unwrap().to_string();
    let key = SigningKey::generate("mco-lab").unwrap();
    let registries_conf = lab.state_dir().join("registries.conf");
    let signatures_dir = Path::new(lab_status["signaturesDir"].as_str().unwrap());
    key.sign(&registries_conf, signatures_dir, &pool_image, &tag).unwrap();
    let policy = json!({
        "default": [{"type": "insecureAcceptAnything"}],
        "transports": {"docker": {registry.clone(): [{
            "type": "signedBy", "keyType": "GPGKeys", "keyPath": SIGNING_KEY_PATH,
            "signedIdentity": {"type": "matchRepoDigestOrExact"},
        }]}},
    });
    let signature_files = files_mc(
        "99-worker-signatures",
        &[
            ("/etc/containers/policy.json", &policy.to_string()),
            (SIGNING_KEY_PATH, &String::from_utf8(key.public_key().unwrap()).unwrap()),
            ("/etc/containers/registries.d/mco-lab.yaml", &lookaside_config(&registry, &signatures)),
        ],
    );
    // The lab's nodes run containerd, not CRI-O: upstream's default policy for these paths
    // (reload crio.service) has nothing to reload, so the admin says so, as one would.
    let no_action = |path: &str| json!({"path": path, "actions": [{"type": "None"}]});
    let policies = json!({"spec": {"nodeDisruptionPolicy": {"files": [
        no_action("/etc/containers/policy.json"),
        no_action(SIGNING_KEY_PATH),
        no_action("/etc/containers/registries.d/mco-lab.yaml"),
    ]}}});
    Api::<MachineConfiguration>::all(client.clone())
        .patch("cluster", &PatchParams::default(), &Patch::Merge(&policies))
        .await
        .unwrap();
    lab.apply("99-worker-signatures", &signature_files);
    lab.apply("99-worker-tag", &os_image_mc("99-worker-tag", &tag));
    let signed = eventually("the worker pool to target the signed tag's config with the policy", || async {
        let current = target(&pool(&client).await);
        let rendered = configs.get(&current).await.unwrap();
        let files = rendered.spec.config.as_ref().map(ToString::to_string).unwrap_or_default();
        let complete = rendered.spec.os_image_url == tag && files.contains("/etc/containers/policy.json");
        if complete { Ok(current) } else { Err(current) }
    })
    .await;
    let rendered = configs.get(&signed).await.unwrap();
    assert_eq!(rendered.annotations().get(PINNED_OS_IMAGE_ANNOTATION), Some(&pool_image));
    workers_done_on(signed.clone(), " with the signature policy").await;
    let unsigned = format!("{registry}/mco/os:base");
    lab.apply("99-worker-tag", &os_image_mc("99-worker-tag", &unsigned));
    let message = wait_condition(&client, "RenderDegraded", true).await;
    let why = "refused before any node gets it: it does not satisfy the pool's signature policy \
               (/etc/containers/policy.json): Source image rejected: A signature was required, but no signature exists";
    assert!(
        message.contains(&format!("OS image {unsigned} of rendered-worker-")) && message.contains(why),
        "{message}"
    );
    assert_eq!(target(&pool(&client).await), signed, "no new target");
    for name in ["99-worker-tag", "99-worker-signatures"] {
        configs.delete(name, &Default::default()).await.unwrap();
    }
    wait_condition(&client, "RenderDegraded", false).await;
    workers_done_on(before.clone(), " without the signature policy").await;

    // A canary and a soak: the first worker (by name) takes a new OS image first, then the pool
    // waits, as `mco status` says. The image is a tag, and the tag moves while the canary soaks:
    // the other worker still gets the digest the tag had when the config was rendered, so both
    // run the same OS.
    let kubeconfig = lab.state_dir().join("kubeconfig");
    annotate_pool(&client, json!({"mco.dev/canary": "1", "mco.dev/canary-soak": "1h"})).await;
    let moving = format!("{registry}/mco/node:moving");
    let first_image = os_update(&lab, &pool_image, "moving", "MCO Test OS (moving 1)");
    lab.apply("99-worker-tag", &os_image_mc("99-worker-tag", &moving));
    let canaried = eventually("the worker pool to target the moving tag's config", || async {
        satisfying(target(&pool(&client).await), |t| *t != before)
    })
    .await;
    let rendered = configs.get(&canaried).await.unwrap();
    assert_eq!(rendered.annotations().get(PINNED_OS_IMAGE_ANNOTATION), Some(&first_image), "the tag's digest");
    let soaking = wait_held(&client, "CanarySoak").await;
    assert!(soaking.starts_with(&format!("canaries are on {canaried}: soaking")), "{soaking}");
    status_showing(&kubeconfig, &format!("canaries are on {canaried}: soaking")).await;
    let seen = eventually("the canary's kubelet reporting the new OS", || async {
        satisfying(workers_os(&nodes, &canaried).await, |seen| seen[0].2 == "MCO Test OS (moving 1)")
    })
    .await;
    let done: Vec<(&str, bool)> = seen.iter().map(|(name, done, _)| (name.as_str(), *done)).collect();
    assert_eq!(done, [("worker-0", true), ("worker-1", false)], "only the canary updated: {seen:?}");
    let second_image = os_update(&lab, &pool_image, "moving", "MCO Test OS (moving 2)");
    assert_ne!(second_image, first_image, "the tag moved");
    // The admin cuts the soak short; the rest of the pool follows, on the first digest.
    annotate_pool(&client, json!({"mco.dev/canary-soak": "1s"})).await;
    workers_done_on(canaried.clone(), " after the soak").await;
    eventually("every worker's kubelet reporting the canary's OS", || async {
        let seen = workers_os(&nodes, &canaried).await;
        satisfying(seen, |seen| seen.iter().all(|(_, done, os)| *done && os == "MCO Test OS (moving 1)"))
    })
    .await;
    assert_eq!(target(&pool(&client).await), canaried, "the same rendered config all along");
    let rendered = configs.get(&canaried).await.unwrap();
    assert_eq!(rendered.annotations().get(PINNED_OS_IMAGE_ANNOTATION), Some(&first_image), "resolved once");

    // The admin asks for the moved tag to be resolved again: the pool records the digest it
    // names now, and its workers move to it under the same rendered config.
    annotate_pool(&client, json!({RESOLVE_OS_IMAGE_ANNOTATION: "now"})).await;
    let record = resolved_os_image_record(&canaried, &second_image);
    eventually("the request done and the tag's new digest recorded on the pool", || async {
        let pool = pool(&client).await;
        let get = |key: &str| pool.annotations().get(key).cloned();
        satisfying((get(RESOLVE_OS_IMAGE_ANNOTATION), get(RESOLVED_OS_IMAGE_ANNOTATION)), |seen| {
            *seen == (None, Some(record.clone()))
        })
    })
    .await;
    eventually("every worker on the tag's new digest", || async {
        let all = nodes.list(&workers()).await.unwrap().items;
        let seen: Vec<(String, bool, Option<String>, String)> = all
            .iter()
            .map(|n| {
                let image = mco_rollout::node::annotation(n, CURRENT_IMAGE_ANNOTATION).map(str::to_string);
                let os = n.status.as_ref().and_then(|s| s.node_info.as_ref()).map(|i| i.os_image.clone());
                (n.name_any(), mco_rollout::node::node_done(n), image, os.unwrap_or_default())
            })
            .collect();
        satisfying(seen, |seen| {
            seen.iter().all(|(_, done, image, os)| {
                *done && image.as_deref() == Some(second_image.as_str()) && os == "MCO Test OS (moving 2)"
            })
        })
    })
    .await;
    assert_eq!(target(&pool(&client).await), canaried, "the same rendered config");

    // A maintenance window: outside it no node starts an update, and `mco status` says when it
    // opens (a daily window six hours from now, in a named time zone); without it the pool goes on.
    let utc_hour = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() / 3600 % 24;
    // Pacific/Kiritimati is UTC+14 all year.
    let opens = (utc_hour + 14 + 6) % 24;
    let window = format!("Mon-Sun {opens:02}:00-{:02}:00", (opens + 1) % 24);
    annotate_pool(
        &client,
        json!({
            "mco.dev/canary": null, "mco.dev/canary-soak": null,
            "mco.dev/maintenance-windows": window, "mco.dev/maintenance-time-zone": "Pacific/Kiritimati",
        }),
    )
    .await;
    configs.delete("99-worker-tag", &Default::default()).await.unwrap();
    let waiting = wait_held(&client, "MaintenanceWindow").await;
    assert!(
        waiting.starts_with("waiting for maintenance window (opens at ") && waiting.ends_with("[Pacific/Kiritimati])"),
        "{waiting}"
    );
    status_showing(&kubeconfig, "waiting for maintenance window (opens at ").await;
    assert_eq!(target(&pool(&client).await), before, "the pool targets the reverted config");
    let all = nodes.list(&workers()).await.unwrap().items;
    let started: Vec<String> = all
        .iter()
        .filter(|n| mco_rollout::node::annotation(n, DESIRED_CONFIG_ANNOTATION) != Some(canaried.as_str()))
        .map(summary)
        .collect();
    assert!(started.is_empty(), "nodes started outside the window: {started:?}");
    annotate_pool(&client, json!({"mco.dev/maintenance-windows": null, "mco.dev/maintenance-time-zone": null})).await;
    workers_done_on(before.clone(), " once no window holds the pool").await;
    // Back on a config of its own image (by digest), the workers left the tag's resolved digest.
    let all = nodes.list(&workers()).await.unwrap().items;
    let images: Vec<Option<&str>> =
        all.iter().map(|n| mco_rollout::node::annotation(n, CURRENT_IMAGE_ANNOTATION)).collect();
    assert_eq!(images, [None, None], "{:?}", all.iter().map(summary).collect::<Vec<_>>());
    assert_eq!(pool(&client).await.annotations().get(RESOLVED_OS_IMAGE_ANNOTATION), None, "the record dropped");

    // A change that fails on the node after its drain (a file where the node has a directory)
    // strands the first worker it reaches (cordoned, Degraded) and, with a halt after one failed
    // node, pauses the pool: no other worker is touched, and `mco status` says why and how to go
    // on. Deleting the MachineConfig and resuming heals the worker with no one touching its
    // annotations: the controller retargets it to the pool's config.
    annotate_pool(&client, json!({"mco.dev/halt-after-failures": "1"})).await;
    lab.apply("99-worker-bad-file", &file_mc("99-worker-bad-file", "/etc/containers", "not a directory\n"));
    let stranded = eventually("a worker Degraded on the file", || async {
        let all = nodes.list(&workers()).await.unwrap().items;
        let degraded = all.iter().find(|n| mco_rollout::node::annotation(n, STATE_ANNOTATION) == Some("Degraded"));
        degraded.map(|n| n.name_any()).ok_or_else(|| all.iter().map(summary).collect::<Vec<_>>())
    })
    .await;
    let bad = target(&pool(&client).await);
    let halted = wait_held(&client, "Halted").await;
    assert_eq!(
        halted,
        format!(
            "halted: {stranded} failed updating to {bad}; fix or revert the change, then resume the pool \
             (spec.paused: false)"
        )
    );
    assert_eq!(pool(&client).await.spec.paused, Some(true));
    status_showing(&kubeconfig, &halted).await;
    let all = nodes.list(&workers()).await.unwrap().items;
    let touched: Vec<String> = all
        .iter()
        .filter(|n| {
            n.name_any() != stranded && mco_rollout::node::annotation(n, DESIRED_CONFIG_ANNOTATION) == Some(&bad)
        })
        .map(summary)
        .collect();
    assert!(touched.is_empty(), "nodes given the config after the halt: {touched:?}");
    configs.delete("99-worker-bad-file", &Default::default()).await.unwrap();
    annotate_pool(&client, json!({"mco.dev/halt-after-failures": null})).await;
    set_pool(&client, json!({ "paused": false })).await;
    workers_done_on(before.clone(), " (the stranded worker healed)").await;

    // An OS update without a kubelet takes the first worker that reboots into it down for good, as
    // such a machine would be: `mco lab status` says which and why (its kubelet never comes back,
    // so the rollout goes no further).
    lab.apply("99-worker-base-os", &os_image_mc("99-worker-base-os", &base));
    let down = eventually("a worker reported down", || async {
        let status = lab.mco(&["lab", "status", "-o", "json"]).success();
        let status: serde_json::Value = serde_json::from_str(&stdout(&status)).unwrap();
        let down: Vec<serde_json::Value> =
            status["nodes"].as_array().unwrap().iter().filter(|n| n["state"] == "Down").cloned().collect();
        satisfying((down, status), |(down, _)| !down.is_empty())
    })
    .await
    .0;
    assert_eq!(down.len(), 1, "{down:?}");
    assert!(down[0]["reason"].as_str().unwrap().contains("has no kubelet (/usr/bin/kubelet)"), "{down:?}");
    let text = stdout(&lab.mco(&["lab", "status"]).success());
    assert!(text.contains(&format!("down: {}: ", down[0]["name"].as_str().unwrap())), "{text}");
}

/// The lab registry's `host:port`, from `mco lab status -o json`.
fn lab_registry(lab: &Lab) -> String {
    let status = lab.mco(&["lab", "status", "-o", "json"]).success();
    let status: serde_json::Value = serde_json::from_str(&stdout(&status)).unwrap();
    status["registry"].as_str().unwrap().to_string()
}

/// An RHCOS image of GCP's public boot images, from 4.11 (RHEL 8.6): the controller may replace it.
const OLD_RHCOS_GCP_IMAGE: &str = "projects/rhcos-cloud/global/images/rhcos-411-86-202205051017-0-gcp-x86-64";
/// An image of the admin's own project: the controller must leave it alone.
const GOLDEN_GCP_IMAGE: &str = "projects/mco-lab/global/images/golden-rhcos";

/// The installer-shaped GCP MachineSet of the boot image tests, named `name`, in the lab's
/// project, booting `image`.
fn gcp_machineset(name: &str, image: &str) -> serde_json::Value {
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

/// A MachineSet as the API server holds it, every field.
async fn machineset(client: &Client, name: &str) -> serde_json::Value {
    let resource = ApiResource::erase::<mco_api::MachineSet>(&());
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), MACHINE_API_NAMESPACE, &resource);
    serde_json::to_value(api.get(name).await.unwrap()).unwrap()
}

async fn wait_boot_image(client: &Client, name: &str, image: &str) {
    eventually(&format!("MachineSet {name} booting {image}"), || async {
        let machineset = machineset(client, name).await;
        let booting = machineset.pointer("/spec/template/spec/providerSpec/value/disks/0/image");
        if booting == Some(&json!(image)) { Ok(()) } else { Err(booting.cloned()) }
    })
    .await;
}

/// `mco status` until its output contains `expected`; returns the output.
async fn status_showing(kubeconfig: &Path, expected: &str) -> String {
    eventually(&format!("mco status showing {expected:?}"), || async {
        let status = mco().args(["status", "--kubeconfig"]).arg(kubeconfig).output().unwrap();
        let status = String::from_utf8_lossy(&status.stdout).into_owned();
        if status.contains(expected) { Ok(status) } else { Err(status) }
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lab_on_gcp_blocks_upgrades_while_a_machineset_keeps_a_too_old_boot_image() {
    let _one = ONE_LAB.lock().await;
    let lab = Lab { dir: tempfile::tempdir().unwrap() };
    let up = lab.mco(&["lab", "up", "--platform", "gcp", "--nodes", "1", "--timeout", "1200"]);
    assert!(up.get_output().status.success(), "lab up: {}\n{}", stdout(&up), stderr(&up));
    let status = stdout(&lab.mco(&["lab", "status"]).success());
    assert!(status.contains("\nplatform: gcp\n"), "{status}");
    let client = client(&lab).await;
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
    assert_rbac_matches_use(&lab, CONTROLLER_ACCOUNT, &unexercised, Some(&boot_image_roles));
}

/// The file examples/lab/machineosconfig.yaml's Containerfile writes with `RUN`.
const LAYERED_FILE: &str = "usr/share/mco-lab/layered";

/// What each worker's booted deployment holds at [`LAYERED_FILE`] (`None`: nothing).
fn layered_file_on_workers(lab: &Lab) -> Vec<Option<String>> {
    (0..2)
        .map(|i| {
            let sysroot = lab.state_dir().join(format!("nodes/worker-{i}/sysroot"));
            let status = mco_os::sysroot::status(&sysroot, &mco_os::sysroot::default_cmdline(&sysroot)).unwrap();
            let booted = sysroot.join(&status.booted().expect("a booted deployment").path);
            std::fs::read_to_string(booted.join(LAYERED_FILE)).ok()
        })
        .collect()
}

/// Waits until the MachineOSBuild `name` has condition `kind` True; returns it.
async fn machine_os_build(client: &Client, name: &str, kind: &str) -> mco_api::MachineOSBuild {
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
async fn new_machine_os_build(client: &Client, old: Option<&str>) -> String {
    let configs: Api<mco_api::MachineOSConfig> = Api::all(client.clone());
    eventually("a new MachineOSBuild named on the MachineOSConfig", || async {
        let config = configs.get("worker").await.unwrap();
        let current = config.annotations().get(mco_api::constants::CURRENT_MACHINE_OS_BUILD_ANNOTATION).cloned();
        satisfying(current, |c| c.is_some() && c.as_deref() != old).map(Option::unwrap)
    })
    .await
}

/// Waits until every worker runs `image` (`None`: its config's own), Done, and the pool is Updated.
async fn workers_on_image(client: &Client, image: Option<&str>) {
    let nodes: Api<Node> = Api::all(client.clone());
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
        if on_image && updated && seen.len() == 2 { Ok(()) } else { Err((updated, seen)) }
    })
    .await
}

fn desired_images(nodes: &[Node]) -> Vec<Option<String>> {
    nodes
        .iter()
        .map(|n| mco_rollout::node::annotation(n, mco_api::constants::DESIRED_IMAGE_ANNOTATION).map(str::to_string))
        .collect()
}

/// On-cluster layering in the lab (examples/lab/machineosconfig.yaml): the worker pool's OS image
/// is built in the cluster by a Job running buildah in mco's image (the Containerfile `RUN`s a
/// shell command), pushed to the lab registry and rolled out: the file is in each worker's booted
/// deployment. A Containerfile that fails leaves a Failed build, the pool ImageBuildDegraded
/// naming it and the failing step, and touches no node; fixing it builds again, clears the
/// condition and rolls out; deleting the MachineOSConfig takes the builds with it and the nodes
/// back to the pool's own image.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lab_builds_a_pools_os_image_in_the_cluster() {
    let _one = ONE_LAB.lock().await;
    let lab = Lab { dir: tempfile::tempdir().unwrap() };
    let up = lab.mco(&["lab", "up", "--nodes", "2", "--timeout", "1200"]);
    assert!(up.get_output().status.success(), "lab up: {}\n{}", stdout(&up), stderr(&up));
    let client = client(&lab).await;
    let lab_status: serde_json::Value =
        serde_json::from_str(&stdout(&lab.mco(&["lab", "status", "-o", "json"]))).unwrap();
    let registry = lab_status["registry"].as_str().unwrap().to_string();
    let example = read(&Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/lab/machineosconfig.yaml"));
    let configs: Api<mco_api::MachineOSConfig> = Api::all(client.clone());
    let nodes: Api<Node> = Api::all(client.clone());

    let applied = std::time::Instant::now();
    lab.apply("machineosconfig", &example.replace("LAB_REGISTRY", &registry));
    let first = new_machine_os_build(&client, None).await;
    let built = machine_os_build(&client, &first, "Succeeded").await;
    let image = built.status.unwrap().digested_image_push_spec.unwrap();
    assert!(image.starts_with(&format!("{registry}/mco/layered@sha256:")), "{image}");
    // `kubectl logs` of the build shows the builder's output.
    let pods: Api<Pod> = Api::namespaced(client.clone(), MCO_NAMESPACE);
    let selector = format!("batch.kubernetes.io/job-name=build-{first}");
    let build_pod = pods.list(&ListParams::default().labels(&selector)).await.unwrap().items.remove(0);
    let log = pods.logs(&build_pod.name_any(), &Default::default()).await.unwrap();
    assert!(log.contains("STEP") && log.contains("RUN mkdir -p /usr/share/mco-lab"), "{log}");
    workers_on_image(&client, Some(&image)).await;
    let rolled_out_in = applied.elapsed();
    let published = configs.get("worker").await.unwrap().status.unwrap().current_image_pull_spec;
    assert_eq!(published.as_deref(), Some(image.as_str()));
    for file in layered_file_on_workers(&lab) {
        let file = file.expect("the file the build's RUN wrote, in every worker's booted deployment");
        assert!(file.starts_with("built in the cluster on top of PRETTY_NAME="), "{file}");
    }
    eprintln!("MachineOSConfig applied -> last of 2 workers on the built image: {rolled_out_in:?}");

    // A Containerfile that fails: the build says so, the pool too (naming the build and the
    // step), and no node is touched.
    let failing = "FROM configs AS final\nRUN echo about to fail && exit 3\n";
    let patch = json!({"spec": {"containerFile": [{"containerfileArch": "NoArch", "content": failing}]}});
    configs.patch("worker", &PatchParams::default(), &Patch::Merge(patch)).await.unwrap();
    let second = new_machine_os_build(&client, Some(&first)).await;
    machine_os_build(&client, &second, "Failed").await;
    let message = wait_condition(&client, "ImageBuildDegraded", true).await;
    assert!(
        message.starts_with(&format!("Failed to build OS image for pool worker (MachineOSBuild: {second}): ")),
        "{message}"
    );
    assert!(message.contains("RUN echo about to fail && exit 3") && message.contains("exit status 3"), "{message}");
    let all = nodes.list(&workers()).await.unwrap().items;
    assert_eq!(desired_images(&all), [Some(image.clone()), Some(image.clone())], "a failed build targets no node");
    assert!(all.iter().all(|n| summary(n).ends_with(" Done ")), "{:?}", all.iter().map(summary).collect::<Vec<_>>());

    // Fixed: built again, the condition cleared, rolled out; the failed build is cleaned up.
    let fixed = "FROM configs AS final\nRUN mkdir -p /usr/share/mco-lab && echo fixed > /usr/share/mco-lab/layered\n";
    let patch = json!({"spec": {"containerFile": [{"containerfileArch": "NoArch", "content": fixed}]}});
    configs.patch("worker", &PatchParams::default(), &Patch::Merge(patch)).await.unwrap();
    let third = new_machine_os_build(&client, Some(&second)).await;
    let built = machine_os_build(&client, &third, "Succeeded").await;
    let fixed_image = built.status.unwrap().digested_image_push_spec.unwrap();
    wait_condition(&client, "ImageBuildDegraded", false).await;
    workers_on_image(&client, Some(&fixed_image)).await;
    assert_eq!(layered_file_on_workers(&lab), [Some("fixed\n".to_string()), Some("fixed\n".to_string())]);
    let builds: Api<mco_api::MachineOSBuild> = Api::all(client.clone());
    eventually("only the current build left", || async {
        let names: Vec<String> = builds.list(&Default::default()).await.unwrap().iter().map(|b| b.name_any()).collect();
        satisfying(names, |n| *n == [third.clone()])
    })
    .await;

    // Deleting the MachineOSConfig: its builds go (owner references), the nodes go back.
    configs.delete("worker", &Default::default()).await.unwrap();
    workers_on_image(&client, None).await;
    assert_eq!(layered_file_on_workers(&lab), [None, None]);
    eventually("the builds deleted with their MachineOSConfig", || async {
        satisfying(builds.list(&Default::default()).await.unwrap().items.len(), |n| *n == 0)
    })
    .await;

    // The build controller's grants, each used in this run, and nothing it asked for refused.
    let build_roles = [
        "ClusterRole/machine-config-controller-builds",
        "Role/openshift-machine-config-operator/machine-config-controller-builds",
    ];
    assert_rbac_matches_use(&lab, CONTROLLER_ACCOUNT, &[], Some(&build_roles));
}
