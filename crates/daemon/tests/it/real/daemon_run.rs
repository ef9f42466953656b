//! `mco daemon run` against a real API server (mco-testenv) on a node root in a temp directory,
//! without an OS backend. The tests play the node controller (they set `desiredConfig`) and the
//! drain controller (a task that answers every `desiredDrain` with `lastAppliedDrain`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use mco_api::constants::{
    BOOT_IMAGE_ANNOTATION, CURRENT_CONFIG_ANNOTATION, CURRENT_IMAGE_ANNOTATION, DESIRED_CONFIG_ANNOTATION,
    DESIRED_DRAIN_ANNOTATION, DESIRED_IMAGE_ANNOTATION, LAST_APPLIED_DRAIN_ANNOTATION, PINNED_OS_IMAGE_ANNOTATION,
    POST_CONFIG_ACTION_ANNOTATION, PRESTAGE_ANNOTATION, PRESTAGE_ERROR_ANNOTATION, PRESTAGED_ANNOTATION,
    REASON_ANNOTATION, STATE_ANNOTATION,
};
use mco_api::{ControllerConfig, MachineConfig, MachineConfiguration};
use mco_apply::Node;
use mco_apply::apply::REBOOT_REQUEST;
use mco_apply::journal::DIRECTORY_ROOT_BOOT_ID;
use mco_apply::os::{OsBackend, OsStatus};
use mco_apply::plan::OsChanges;
use mco_apply::units::ACTIONS_LOG;
use mco_daemon::{Settings, Stopped, Timing};
use mco_metrics::Registry;
use mco_metrics::daemon::DaemonMetrics;
use mco_testenv::TestEnv;
use mco_testenv::k8s_openapi::api::core::v1::Node as KubeNode;
use mco_testenv::kube::api::{Patch, PatchParams, PostParams};
use mco_testenv::kube::{Api, Client};
use mco_testenv::{data_url, eventually};
use serde_json::{Value, json};
use tokio::task::JoinHandle;

/// The drain requests answered, each with /etc/app.conf as it was then.
type Answered = Arc<Mutex<Vec<(String, String)>>>;

const TIMEOUT: Duration = Duration::from_secs(60);
const APP_CONF: &str = "/etc/app.conf";
const APP_UNIT: &str = "/usr/lib/systemd/system/app.service";

fn host(root: &Path, node_path: &str) -> PathBuf {
    root.join(node_path.trim_start_matches('/'))
}

fn read(root: &Path, node_path: &str) -> Option<String> {
    std::fs::read_to_string(host(root, node_path)).ok()
}

fn write(root: &Path, node_path: &str, contents: &str) {
    let path = host(root, node_path);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, contents).unwrap();
}

/// A node root with users and `/etc/app.conf` as config `a` has it; `unit`: app.service exists.
fn node_root(app_conf: &str, unit: bool) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let r = dir.path();
    write(r, "/etc/passwd", "root:x:0:0:root:/root:/bin/sh\ncore:x:1000:1000::/home/core:/bin/sh\n");
    write(r, "/etc/group", "root:x:0:\ncore:x:1000:\n");
    write(r, APP_CONF, app_conf);
    std::fs::set_permissions(host(r, APP_CONF), std::os::unix::fs::PermissionsExt::from_mode(0o644)).unwrap();
    if unit {
        write(r, APP_UNIT, "[Service]\nExecStart=/bin/true\n");
    }
    dir
}

/// A rendered config writing `files` (path, contents), with `storage` extras merged in.
fn config(name: &str, files: &[(&str, &str)], storage_extra: Value) -> MachineConfig {
    let files: Vec<Value> = files
        .iter()
        .map(|(path, text)| json!({"path": path, "mode": 420, "contents": {"source": data_url(text)}}))
        .collect();
    let mut storage = json!({"files": files});
    storage.as_object_mut().unwrap().extend(storage_extra.as_object().unwrap().clone());
    serde_json::from_value(json!({
        "apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineConfig",
        "metadata": {"name": name},
        "spec": {"config": {"ignition": {"version": "3.5.0"}, "storage": storage}},
    }))
    .unwrap()
}

/// MCO_LOG=debug shows the daemon's decisions.
fn log_to_test() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_env("MCO_LOG"))
        .with_test_writer()
        .try_init();
}

struct Cluster {
    env: TestEnv,
    client: Client,
    nodes: Api<KubeNode>,
    /// The test's node (`node-N`): the one [`Cluster::start_node`] starts and the helpers below
    /// wait on.
    node: String,
    /// The test's configs `rendered-a-N` (app.conf "v1") and `rendered-b-N` (app.conf "v2").
    rendered_a: String,
    rendered_b: String,
    /// The test's own directory (the nodes' kubeconfigs), not the shared server's.
    dir: tempfile::TempDir,
}

struct RunningNode {
    root: tempfile::TempDir,
    answered: Answered,
    agent: JoinHandle<Stopped>,
    /// The daemon's metrics.
    registry: Registry,
}

impl Cluster {
    /// The API server this test binary shares, with the test's node name and configs.
    async fn start() -> Cluster {
        log_to_test();
        Self::on(TestEnv::shared().await.unwrap()).await
    }

    /// An API server of the test's own: for tests that create a cluster-wide singleton
    /// (MachineConfiguration `cluster`, ControllerConfig `machine-config-controller`), which
    /// every daemon on the server would read.
    async fn start_own() -> Cluster {
        log_to_test();
        Self::on(TestEnv::start().await.unwrap()).await
    }

    async fn on(env: TestEnv) -> Cluster {
        let client = env.client();
        let cluster = Cluster {
            nodes: Api::all(client.clone()),
            client,
            node: env.unique_name("node"),
            rendered_a: env.unique_name("rendered-a"),
            rendered_b: env.unique_name("rendered-b"),
            dir: tempfile::tempdir().unwrap(),
            env,
        };
        cluster.create_config(config(&cluster.rendered_a, &[(APP_CONF, "v1\n")], json!({}))).await;
        cluster.create_config(config(&cluster.rendered_b, &[(APP_CONF, "v2\n")], json!({}))).await;
        cluster
    }

    async fn create_config(&self, mc: MachineConfig) {
        Api::<MachineConfig>::all(self.client.clone()).create(&PostParams::default(), &mc).await.unwrap();
    }

    /// The `cluster` MachineConfiguration with these file policies.
    async fn create_policies(&self, files: Value) {
        let configuration: MachineConfiguration = serde_json::from_value(json!({
            "apiVersion": "operator.openshift.io/v1", "kind": "MachineConfiguration",
            "metadata": {"name": "cluster"},
            "spec": {"nodeDisruptionPolicy": {"files": files}},
        }))
        .unwrap();
        Api::<MachineConfiguration>::all(self.client.clone())
            .create(&PostParams::default(), &configuration)
            .await
            .unwrap();
    }

    async fn create_node(&self, name: &str, annotations: &[(&str, &str)]) {
        let annotations: BTreeMap<&str, &str> = annotations.iter().copied().collect();
        let node: KubeNode = serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "annotations": annotations},
        }))
        .unwrap();
        self.nodes.create(&PostParams::default(), &node).await.unwrap();
    }

    /// A Node as the node controller leaves it: on the test's `rendered-a-N`, Done.
    async fn create_done_node(&self, name: &str) {
        self.create_node(
            name,
            &[
                (CURRENT_CONFIG_ANNOTATION, &self.rendered_a),
                (DESIRED_CONFIG_ANNOTATION, &self.rendered_a),
                (STATE_ANNOTATION, "Done"),
            ],
        )
        .await;
    }

    /// The test's node, Done on `rendered-a-N`, with a root whose `/etc/app.conf` says `app_conf`,
    /// the drain controller answering it, and its daemon started. `settled`: once the daemon
    /// reports Done on `rendered-a-N` (even starting on its desired config, the node goes through
    /// the uncordon handshake).
    async fn start_node(&self, app_conf: &str, unit: bool, settled: bool) -> RunningNode {
        self.create_done_node(&self.node).await;
        let root = node_root(app_conf, unit);
        let answered = self.drain_controller(&self.node, root.path());
        let mut registry = Registry::default();
        let metrics = DaemonMetrics::register(&mut registry);
        let agent = self.agent_with(&self.node, root.path(), TIMEOUT, metrics, None);
        if settled {
            self.wait_for_state(&self.node, "Done", &self.rendered_a).await;
        }
        RunningNode { root, answered, agent, registry }
    }

    async fn annotations(&self, name: &str) -> BTreeMap<String, String> {
        self.nodes.get(name).await.unwrap().metadata.annotations.unwrap_or_default()
    }

    /// Plays the node controller.
    async fn set_desired(&self, name: &str, config: &str) {
        let patch = json!({"metadata": {"annotations": {DESIRED_CONFIG_ANNOTATION: config}}});
        self.nodes.patch(name, &PatchParams::default(), &Patch::Merge(&patch)).await.unwrap();
    }

    /// Waits until the node reports `state` on `config` (with the handshake settled when Done).
    async fn wait_for_state(&self, name: &str, state: &str, config: &str) -> BTreeMap<String, String> {
        eventually(&format!("{name} to be {state} on {config}"), || async {
            let a = self.annotations(name).await;
            let on = |key: &str, value: &str| a.get(key).map(String::as_str) == Some(value);
            let settled = state != "Done"
                || (on(DESIRED_DRAIN_ANNOTATION, &format!("uncordon-{config}"))
                    && a.get(LAST_APPLIED_DRAIN_ANNOTATION) == a.get(DESIRED_DRAIN_ANNOTATION));
            if on(STATE_ANNOTATION, state) && on(CURRENT_CONFIG_ANNOTATION, config) && settled { Ok(a) } else { Err(a) }
        })
        .await
    }

    /// Plays the drain controller for `name`: answers every `desiredDrain`, and records each
    /// request with `/etc/app.conf` as it was at that moment (to show what ran before the drain).
    fn drain_controller(&self, name: &str, root: &Path) -> Answered {
        let answered = Arc::new(Mutex::new(Vec::new()));
        let (nodes, name, root, log) = (self.nodes.clone(), name.to_string(), root.to_path_buf(), answered.clone());
        tokio::spawn(async move {
            // Until the test's runtime ends (or an own API server is gone).
            while let Ok(node) = nodes.get(&name).await {
                let a = node.metadata.annotations.unwrap_or_default();
                if let Some(request) = a.get(DESIRED_DRAIN_ANNOTATION)
                    && a.get(LAST_APPLIED_DRAIN_ANNOTATION) != Some(request)
                {
                    let app_conf = read(&root, APP_CONF).unwrap_or_default();
                    log.lock().unwrap().push((request.clone(), app_conf));
                    let patch = json!({"metadata": {"annotations": {LAST_APPLIED_DRAIN_ANNOTATION: request}}});
                    if nodes.patch(&name, &PatchParams::default(), &Patch::Merge(&patch)).await.is_err() {
                        return;
                    }
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        });
        answered
    }

    /// Starts `mco daemon run` for `name` on `root` (a directory root, no OS backend).
    fn agent(&self, name: &str, root: &Path) -> JoinHandle<Stopped> {
        self.agent_with(name, root, TIMEOUT, DaemonMetrics::default(), None)
    }

    /// The daemon with its metrics kept by the test and an OS backend.
    fn agent_with(
        &self,
        name: &str,
        root: &Path,
        drain_timeout: Duration,
        metrics: DaemonMetrics,
        os: Option<Box<dyn OsBackend>>,
    ) -> JoinHandle<Stopped> {
        let settings = Settings {
            node_name: name.to_string(),
            aleph: host(root, "/sysroot/.coreos-aleph-version.json"),
            timing: Timing {
                poll: Duration::from_millis(500),
                drain_timeout,
                uncordon_timeout: TIMEOUT,
                retry: Duration::from_millis(100),
                retry_max: Duration::from_secs(1),
                drift_check: Duration::from_millis(500),
            },
            metrics,
        };
        let node = Node::directory_root(root.to_path_buf(), os);
        let client = self.client.clone();
        let node_kubeconfig = self.node_kubeconfig(name);
        tokio::spawn(async move {
            let node_client = mco_testenv::client_from_kubeconfig(&node_kubeconfig).await.unwrap();
            mco_daemon::run(client, node_client, node, settings).await
        })
    }

    /// The kubelet's credentials of Node `name` (`system:node:NAME` in `system:nodes`), which the
    /// daemon writes its Node with.
    fn node_kubeconfig(&self, name: &str) -> PathBuf {
        let path = self.dir.path().join(format!("{name}.kubeconfig"));
        self.env.write_client_kubeconfig(&path, &format!("system:node:{name}"), Some("system:nodes")).unwrap();
        path
    }
}

#[tokio::test]
async fn a_nodes_own_credentials_write_its_node_and_no_other() {
    let cluster = Cluster::start().await;
    let (node_1, node_2) = (&cluster.node, &cluster.env.unique_name("node"));
    cluster.create_node(node_1, &[]).await;
    cluster.create_node(node_2, &[]).await;
    let as_node_1: Api<KubeNode> =
        Api::all(mco_testenv::client_from_kubeconfig(&cluster.node_kubeconfig(node_1)).await.unwrap());
    let patch = json!({"metadata": {"annotations": {"example.com/written-by": node_1}}});
    as_node_1.patch(node_1, &PatchParams::default(), &Patch::Merge(&patch)).await.unwrap();
    let refused = as_node_1.patch(node_2, &PatchParams::default(), &Patch::Merge(&patch)).await.unwrap_err();
    match refused {
        kube::Error::Api(status) => {
            assert_eq!(status.code, 403, "{status:?}");
            let message = format!("node \"{node_1}\" is not allowed to modify node \"{node_2}\"");
            assert!(status.message.contains(&message), "{status:?}");
        }
        other => panic!("expected a 403 from NodeRestriction, got {other:?}"),
    }
    let node_2 = cluster.nodes.get(node_2).await.unwrap();
    assert!(!node_2.metadata.annotations.unwrap_or_default().contains_key("example.com/written-by"));
}

/// Waits until the daemon's metrics have every line of `lines`.
async fn wait_for_metrics(registry: &Registry, lines: &[&str]) -> String {
    eventually(&format!("the daemon's metrics to have {lines:?}"), || async {
        let text = mco_metrics::render(registry);
        if lines.iter().all(|line| text.lines().any(|l| l == *line)) { Ok(text) } else { Err(text) }
    })
    .await
}

/// The boot id of the directory root, as the lab's booter records it at each boot.
fn boot(root: &Path, id: &str) {
    write(root, DIRECTORY_ROOT_BOOT_ID, &format!("{id}\n"));
}

/// Waits until the test's node's reason contains `text`; returns its annotations.
async fn reason_containing(cluster: &Cluster, text: &str) -> BTreeMap<String, String> {
    let node = &cluster.node;
    eventually(&format!("{node}'s reason to contain {text:?}"), || async {
        let a = cluster.annotations(node).await;
        if a[REASON_ANNOTATION].contains(text) { Ok(a) } else { Err(a[REASON_ANNOTATION].clone()) }
    })
    .await
}

/// Waits for the daemon to end its run asking for a reboot.
async fn stops_for_reboot(agent: JoinHandle<Stopped>) {
    let stopped = tokio::time::timeout(TIMEOUT, agent).await.expect("the daemon stops for the reboot").unwrap();
    assert_eq!(stopped, Stopped::RebootRequested);
}

fn requests(answered: &Answered) -> Vec<(String, String)> {
    answered.lock().unwrap().clone()
}

fn pair(request: &str, app_conf: &str) -> (String, String) {
    (request.to_string(), app_conf.to_string())
}

/// Policies: /etc/app.conf changes drain and restart app.service, /etc/other.conf changes need nothing.
fn drain_and_restart_app() -> Value {
    json!([
        {"path": APP_CONF, "actions": [{"type": "Drain"}, {"type": "Restart", "restart": {"serviceName": "app.service"}}]},
        {"path": "/etc/other.conf", "actions": [{"type": "None"}]},
    ])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_update_drains_applies_and_reports_done() {
    let cluster = Cluster::start_own().await;
    let (node, rendered_a, rendered_b) =
        (cluster.node.as_str(), cluster.rendered_a.as_str(), cluster.rendered_b.as_str());
    cluster.create_policies(drain_and_restart_app()).await;
    let RunningNode { root, answered, agent, registry } = cluster.start_node("v1\n", true, true).await;
    let r = root.path();

    cluster.set_desired(node, rendered_b).await;
    let a = cluster.wait_for_state(node, "Done", rendered_b).await;

    assert_eq!(a[REASON_ANNOTATION], "");
    assert_eq!(read(r, APP_CONF).as_deref(), Some("v2\n"));
    let metrics = wait_for_metrics(
        &registry,
        &[
            "mco_daemon_update_phase_seconds_count{phase=\"drain\"} 1",
            "mco_daemon_update_phase_seconds_count{phase=\"deploy\"} 1",
            "mcd_pivot_errors_total 0",
            "mcd_reboots_failed_total 0",
        ],
    )
    .await;
    assert!(!metrics.contains("phase=\"pull\""), "no OS image pulled:\n{metrics}");
    assert!(!metrics.contains("phase=\"reboot\""), "no reboot:\n{metrics}");
    assert_eq!(
        requests(&answered),
        [
            pair(&format!("uncordon-{rendered_a}"), "v1\n"),
            pair(&format!("drain-{rendered_b}"), "v1\n"),
            pair(&format!("uncordon-{rendered_b}"), "v2\n")
        ],
        "drained before the write, uncordoned after it"
    );
    assert_eq!(read(r, ACTIONS_LOG).as_deref(), Some("restart app.service\n"));
    assert_eq!(read(r, REBOOT_REQUEST), None);
    assert!(!agent.is_finished(), "the daemon keeps running");
    agent.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reboot_ends_the_run_and_the_restarted_daemon_completes_the_handshake() {
    let cluster = Cluster::start().await;
    let (node, rendered_a, rendered_b) =
        (cluster.node.as_str(), cluster.rendered_a.as_str(), cluster.rendered_b.as_str());
    let RunningNode { root, answered, agent, .. } = cluster.start_node("v1\n", true, true).await;
    let r = root.path();
    boot(r, "boot-1");

    // /etc/app.conf has no policy: the change reboots.
    cluster.set_desired(node, rendered_b).await;
    stops_for_reboot(agent).await;
    assert_eq!(
        read(r, REBOOT_REQUEST).as_deref(),
        Some(format!("Node will reboot into config {rendered_b}\n").as_str())
    );
    assert_eq!(read(r, APP_CONF).as_deref(), Some("v2\n"));
    let a = cluster.annotations(node).await;
    assert_eq!(a[STATE_ANNOTATION], "Working");
    assert_eq!(a[CURRENT_CONFIG_ANNOTATION], rendered_a, "current only after the reboot");
    assert_eq!(a[POST_CONFIG_ACTION_ANNOTATION], "Rebooting");
    assert_eq!(a[DESIRED_DRAIN_ANNOTATION], format!("drain-{rendered_b}"));

    // The "reboot": /run is emptied and the daemon starts again.
    std::fs::remove_dir_all(host(r, "/run")).unwrap();
    boot(r, "boot-2");
    let mut registry = Registry::default();
    let metrics = DaemonMetrics::register(&mut registry);
    let agent = cluster.agent_with(node, r, TIMEOUT, metrics, None);
    let a = cluster.wait_for_state(node, "Done", rendered_b).await;
    wait_for_metrics(&registry, &["mco_daemon_update_phase_seconds_count{phase=\"reboot\"} 1"]).await;
    assert_eq!(a[POST_CONFIG_ACTION_ANNOTATION], "");
    assert_eq!(a[REASON_ANNOTATION], "");
    assert_eq!(
        requests(&answered),
        [
            pair(&format!("uncordon-{rendered_a}"), "v1\n"),
            pair(&format!("drain-{rendered_b}"), "v1\n"),
            pair(&format!("uncordon-{rendered_b}"), "v2\n")
        ]
    );
    assert_eq!(read(r, REBOOT_REQUEST), None, "no second reboot");
    agent.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreconcilable_change_is_reported_and_nothing_is_written() {
    let cluster = Cluster::start().await;
    let (node, rendered_a) = (cluster.node.as_str(), cluster.rendered_a.as_str());
    let rendered_dirs = cluster.env.unique_name("rendered-dirs");
    let dirs = json!({"directories": [{"path": "/etc/d"}]});
    cluster.create_config(config(&rendered_dirs, &[(APP_CONF, "v2\n")], dirs)).await;
    let RunningNode { root, answered, agent, .. } = cluster.start_node("v1\n", true, true).await;
    let r = root.path();

    cluster.set_desired(node, &rendered_dirs).await;
    let a = cluster.wait_for_state(node, "Unreconcilable", rendered_a).await;
    assert_eq!(
        a[REASON_ANNOTATION],
        format!(
            "can't reconcile config {rendered_a} with {rendered_dirs}: ignition directories section contains changes"
        )
    );
    assert_eq!(read(r, APP_CONF).as_deref(), Some("v1\n"));
    assert!(!host(r, "/etc/d").exists());
    assert_eq!(requests(&answered), [pair(&format!("uncordon-{rendered_a}"), "v1\n")], "no drain");

    // The controller moves the node back to its config: Done again.
    cluster.set_desired(node, rendered_a).await;
    let a = cluster.wait_for_state(node, "Done", rendered_a).await;
    assert_eq!(a[REASON_ANNOTATION], "");
    agent.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_apply_degrades_rolls_back_and_recovers_when_the_cause_is_fixed() {
    let cluster = Cluster::start_own().await;
    let (node, rendered_a) = (cluster.node.as_str(), cluster.rendered_a.as_str());
    let rendered_c = cluster.env.unique_name("rendered-c");
    cluster.create_config(config(&rendered_c, &[(APP_CONF, "v2\n"), ("/etc/other.conf", "new\n")], json!({}))).await;
    cluster.create_policies(drain_and_restart_app()).await;
    // app.service does not exist: restarting it fails after the files are written.
    let RunningNode { root, agent, .. } = cluster.start_node("v1\n", false, true).await;
    let r = root.path();

    cluster.set_desired(node, &rendered_c).await;
    let a = cluster.wait_for_state(node, "Degraded", rendered_a).await;
    assert!(a[REASON_ANNOTATION].contains("Unit app.service not found."), "{}", a[REASON_ANNOTATION]);
    assert_eq!(read(r, APP_CONF).as_deref(), Some("v1\n"), "rolled back");
    assert_eq!(read(r, "/etc/other.conf"), None, "rolled back");

    write(r, APP_UNIT, "[Service]\nExecStart=/bin/true\n");
    let a = cluster.wait_for_state(node, "Done", &rendered_c).await;
    assert_eq!(a[REASON_ANNOTATION], "");
    assert_eq!(read(r, "/etc/other.conf").as_deref(), Some("new\n"));
    agent.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drift_found_at_start_degrades_naming_the_mismatch_until_it_is_fixed() {
    let cluster = Cluster::start().await;
    let (node, rendered_a) = (cluster.node.as_str(), cluster.rendered_a.as_str());
    let RunningNode { root, answered, agent, .. } = cluster.start_node("edited by hand\n", true, false).await;
    let r = root.path();

    let a = cluster.wait_for_state(node, "Degraded", rendered_a).await;
    assert_eq!(
        a[REASON_ANNOTATION],
        format!(
            "unexpected on-disk state validating against {rendered_a}: content mismatch for file \"/etc/app.conf\""
        )
    );
    assert!(requests(&answered).is_empty(), "nothing happens on a drifted node");

    write(r, APP_CONF, "v1\n");
    let a = cluster.wait_for_state(node, "Done", rendered_a).await;
    assert_eq!(a[REASON_ANNOTATION], "");
    agent.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_edited_by_hand_between_updates_degrades_the_node_until_it_is_put_back() {
    let cluster = Cluster::start().await;
    let (node, rendered_a) = (cluster.node.as_str(), cluster.rendered_a.as_str());
    let RunningNode { root, answered, agent, .. } = cluster.start_node("v1\n", true, true).await;
    let r = root.path();

    write(r, APP_CONF, "edited by hand\n");
    let a = cluster.wait_for_state(node, "Degraded", rendered_a).await;
    assert_eq!(
        a[REASON_ANNOTATION],
        format!(
            "unexpected on-disk state validating against {rendered_a}: content mismatch for file \"/etc/app.conf\""
        )
    );
    assert_eq!(requests(&answered), [pair(&format!("uncordon-{rendered_a}"), "v1\n")], "no drain for drift");

    write(r, APP_CONF, "v1\n");
    let a = cluster.wait_for_state(node, "Done", rendered_a).await;
    assert_eq!(a[REASON_ANNOTATION], "");
    agent.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_first_update_after_a_first_boot_diffs_against_the_clusters_config() {
    // The first boot records its config as the server sent it encapsulated: without its Ignition
    // config (as upstream's). The next update is decided against the cluster's copy, so a file
    // both configs keep is no change, and the policy's restart is all that happens: no reboot.
    let cluster = Cluster::start_own().await;
    let node = cluster.node.as_str();
    cluster.create_policies(drain_and_restart_app()).await;
    let kept = ("/etc/kept.conf", "kept\n");
    let (first, next) = (cluster.env.unique_name("rendered-first"), cluster.env.unique_name("rendered-next"));
    cluster.create_config(config(&first, &[(APP_CONF, "v1\n"), kept], json!({}))).await;
    cluster.create_config(config(&next, &[(APP_CONF, "v2\n"), kept], json!({}))).await;
    let annotations =
        [(CURRENT_CONFIG_ANNOTATION, first.as_str()), (DESIRED_CONFIG_ANNOTATION, &first), (STATE_ANNOTATION, "Done")];
    cluster.create_node(node, &annotations).await;
    let root = node_root("v1\n", true);
    let r = root.path();
    write(r, kept.0, kept.1);
    let first_boots_record = config(&first, &[], json!({}));
    write(r, mco_apply::state::CURRENT_CONFIG, &serde_json::to_string(&first_boots_record).unwrap());
    let answered = cluster.drain_controller(node, r);
    let agent = cluster.agent(node, r);
    cluster.wait_for_state(node, "Done", &first).await;

    cluster.set_desired(node, &next).await;
    let a = cluster.wait_for_state(node, "Done", &next).await;
    assert_eq!(a[REASON_ANNOTATION], "");
    assert_eq!(read(r, APP_CONF).as_deref(), Some("v2\n"));
    assert_eq!(read(r, ACTIONS_LOG).as_deref(), Some("restart app.service\n"));
    assert_eq!(read(r, REBOOT_REQUEST), None, "rebooted for a file both configs keep");
    assert_eq!(requests(&answered).last(), Some(&pair(&format!("uncordon-{next}"), "v2\n")));
    agent.abort();
}

/// A stand-in OS (the daemon's part is tested here) booted on a built image, that no update may
/// change.
struct BootedOn(String);

impl OsBackend for BootedOn {
    fn status(&self) -> anyhow::Result<OsStatus> {
        Ok(OsStatus { booted_image: Some(self.0.clone()), ..Default::default() })
    }

    fn apply(&self, changes: &OsChanges) -> anyhow::Result<()> {
        anyhow::bail!("not reached: the node runs its built image already, asked to apply {changes:?}")
    }

    fn discard_staged(&self) -> anyhow::Result<()> {
        Ok(())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_update_on_a_layered_node_keeps_the_image_it_runs() {
    // The node runs its pool's built image, as its own record says; a file change of the pool's
    // config restarts the service and leaves the OS alone (the cluster's copy of the config
    // names the base image, the node's record the built one).
    let cluster = Cluster::start_own().await;
    let (node, rendered_a, rendered_b) =
        (cluster.node.as_str(), cluster.rendered_a.as_str(), cluster.rendered_b.as_str());
    cluster.create_policies(drain_and_restart_app()).await;
    let built = format!("registry.example/built@sha256:{}", "7".repeat(64));
    let annotations = [
        (CURRENT_CONFIG_ANNOTATION, rendered_a),
        (DESIRED_CONFIG_ANNOTATION, rendered_a),
        (STATE_ANNOTATION, "Done"),
        (CURRENT_IMAGE_ANNOTATION, built.as_str()),
        (DESIRED_IMAGE_ANNOTATION, &built),
    ];
    cluster.create_node(node, &annotations).await;
    let root = node_root("v1\n", true);
    let r = root.path();
    let mut record = config(rendered_a, &[(APP_CONF, "v1\n")], json!({}));
    mco_apply::state::with_layered_image(&mut record, &built);
    write(r, mco_apply::state::CURRENT_CONFIG, &serde_json::to_string(&record).unwrap());
    cluster.drain_controller(node, r);
    let os = Box::new(BootedOn(built.clone()));
    let agent = cluster.agent_with(node, r, TIMEOUT, DaemonMetrics::default(), Some(os));
    cluster.wait_for_state(node, "Done", rendered_a).await;

    cluster.set_desired(node, rendered_b).await;
    let a = cluster.wait_for_state(node, "Done", rendered_b).await;
    assert_eq!(a[REASON_ANNOTATION], "");
    assert_eq!(read(r, APP_CONF).as_deref(), Some("v2\n"));
    assert_eq!(read(r, ACTIONS_LOG).as_deref(), Some("restart app.service\n"));
    assert_eq!(read(r, REBOOT_REQUEST), None);
    agent.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_force_file_skips_validation_and_reapplies_the_config_with_a_reboot() {
    let cluster = Cluster::start().await;
    let (node, rendered_a) = (cluster.node.as_str(), cluster.rendered_a.as_str());
    cluster.create_done_node(node).await;
    let root = node_root("edited by hand\n", true);
    let r = root.path();
    write(r, "/run/machine-config-daemon-force", "");
    let answered = cluster.drain_controller(node, r);
    let agent = cluster.agent(node, r);

    stops_for_reboot(agent).await;
    assert_eq!(read(r, APP_CONF).as_deref(), Some("v1\n"), "the config is written again");
    assert_eq!(
        read(r, REBOOT_REQUEST).as_deref(),
        Some(format!("Node will reboot into config {rendered_a}\n").as_str())
    );
    assert_eq!(requests(&answered), [pair(&format!("drain-{rendered_a}"), "edited by hand\n")]);

    std::fs::remove_dir_all(host(r, "/run")).unwrap();
    let agent = cluster.agent(node, r);
    let a = cluster.wait_for_state(node, "Done", rendered_a).await;
    assert_eq!(a[REASON_ANNOTATION], "");
    agent.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_node_takes_its_seed_annotations_and_reports_its_boot_image() {
    let cluster = Cluster::start().await;
    let (node, rendered_a) = (cluster.node.as_str(), cluster.rendered_a.as_str());
    let seed = json!({CURRENT_CONFIG_ANNOTATION: rendered_a, DESIRED_CONFIG_ANNOTATION: rendered_a,
        STATE_ANNOTATION: "Done"});
    let aleph = r#"{"build": "416.94.202405211741-0", "imgid": "rhcos-416.94.202405211741-0-metal.x86_64.raw",
        "ostree-commit": "3d8e3c0f3e9f", "ref": ""}"#;
    let node_2 = cluster.env.unique_name("node");
    let mut agents = Vec::new();
    let mut roots = Vec::new();
    for (name, aleph) in [(node, aleph), (node_2.as_str(), "not json")] {
        cluster.create_node(name, &[]).await;
        let root = node_root("v1\n", true);
        write(root.path(), "/etc/machine-config-daemon/node-annotations.json", &seed.to_string());
        write(root.path(), "/sysroot/.coreos-aleph-version.json", aleph);
        cluster.drain_controller(name, root.path());
        agents.push(cluster.agent(name, root.path()));
        roots.push(root);
    }

    let a = cluster.wait_for_state(node, "Done", rendered_a).await;
    assert_eq!(a[DESIRED_CONFIG_ANNOTATION], rendered_a);
    assert_eq!(a[BOOT_IMAGE_ANNOTATION], r#"{"build":"416.94.202405211741-0","ostree-commit":"3d8e3c0f3e9f"}"#);
    let r = roots[0].path();
    assert_eq!(read(r, "/etc/machine-config-daemon/node-annotations.json"), None);
    assert_eq!(read(r, "/etc/machine-config-daemon/node-annotation.json.bak"), Some(seed.to_string()));

    // An unreadable aleph file is only logged.
    let a = cluster.wait_for_state(&node_2, "Done", rendered_a).await;
    assert!(!a.contains_key(BOOT_IMAGE_ANNOTATION));
    for agent in agents {
        agent.abort();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_single_replica_cluster_does_not_drain() {
    let cluster = Cluster::start_own().await;
    let (node, rendered_a, rendered_b) =
        (cluster.node.as_str(), cluster.rendered_a.as_str(), cluster.rendered_b.as_str());
    let example = std::fs::read_to_string(
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples/cluster/controllerconfig.yaml"),
    )
    .unwrap();
    let mut controller_config: ControllerConfig = serde_yaml::from_str(&example).unwrap();
    controller_config.spec.infra = Some(json!({"apiVersion": "config.openshift.io/v1", "kind": "Infrastructure",
        "metadata": {"name": "cluster"}, "status": {"controlPlaneTopology": "SingleReplica"}}));
    Api::<ControllerConfig>::all(cluster.client.clone())
        .create(&PostParams::default(), &controller_config)
        .await
        .unwrap();
    let RunningNode { root, answered, agent, .. } = cluster.start_node("v1\n", true, true).await;
    let r = root.path();

    // A change that reboots: no drain on a single node.
    cluster.set_desired(node, rendered_b).await;
    stops_for_reboot(agent).await;
    assert_eq!(read(r, APP_CONF).as_deref(), Some("v2\n"));
    assert_eq!(requests(&answered), [pair(&format!("uncordon-{rendered_a}"), "v1\n")]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drain_that_takes_too_long_degrades_the_node_until_it_completes() {
    let cluster = Cluster::start_own().await;
    let (node, rendered_a, rendered_b) =
        (cluster.node.as_str(), cluster.rendered_a.as_str(), cluster.rendered_b.as_str());
    cluster.create_policies(drain_and_restart_app()).await;
    cluster
        .create_node(
            node,
            &[
                (CURRENT_CONFIG_ANNOTATION, rendered_a),
                (DESIRED_CONFIG_ANNOTATION, rendered_b),
                (STATE_ANNOTATION, "Done"),
            ],
        )
        .await;
    let root = node_root("v1\n", true);
    let r = root.path();
    let agent = cluster.agent_with(node, r, Duration::from_secs(1), DaemonMetrics::default(), None);

    // Nobody answers the drain.
    let a = cluster.wait_for_state(node, "Degraded", rendered_a).await;
    assert_eq!(a[DESIRED_DRAIN_ANNOTATION], format!("drain-{rendered_b}"));
    assert_eq!(
        a[REASON_ANNOTATION],
        format!(
            "failed to drain node: {node} after 1s (drain-{rendered_b} is not answered by lastAppliedDrain). Please \
             see machine-config-controller logs for more information"
        )
    );
    assert_eq!(read(r, APP_CONF).as_deref(), Some("v1\n"), "nothing applied before the drain");

    // The drain completes late: the update goes on.
    cluster.drain_controller(node, r);
    let a = cluster.wait_for_state(node, "Done", rendered_b).await;
    assert_eq!(a[REASON_ANNOTATION], "");
    assert_eq!(read(r, APP_CONF).as_deref(), Some("v2\n"));
    agent.abort();
}

/// An OS whose image cannot be pulled (its registry is unreachable).
struct UnreachableRegistry;

impl OsBackend for UnreachableRegistry {
    fn status(&self) -> anyhow::Result<OsStatus> {
        Ok(OsStatus::default())
    }

    fn pull_ahead(&self, image: &str) -> anyhow::Result<bool> {
        anyhow::bail!("pinging container registry for {image}: connection refused")
    }

    fn apply(&self, changes: &OsChanges) -> anyhow::Result<()> {
        anyhow::bail!("staging {:?} after writing the files: connection refused", changes.image)
    }

    fn discard_staged(&self) -> anyhow::Result<()> {
        Ok(())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_os_image_pull_degrades_the_node_and_counts_as_a_pivot_error() {
    let cluster = Cluster::start().await;
    let (node, rendered_a) = (cluster.node.as_str(), cluster.rendered_a.as_str());
    // A tag, with the digest the controller pinned it to: the digest is what the node pulls.
    let pinned = format!("registry.example/os@sha256:{}", "2".repeat(64));
    let with_pin = |name: &str, pin: &str, files: &[(&str, &str)]| {
        let mut mc = config(name, files, json!({}));
        mc.spec.os_image_url = "registry.example/os:latest".to_string();
        mc.metadata.annotations = Some([(PINNED_OS_IMAGE_ANNOTATION.to_string(), pin.to_string())].into());
        mc
    };
    let [rendered_os, rendered_mirror, rendered_unpinned, rendered_other_pin] =
        ["rendered-os", "rendered-mirror", "rendered-unpinned", "rendered-other-pin"]
            .map(|n| cluster.env.unique_name(n));
    cluster.create_config(with_pin(&rendered_os, &pinned, &[(APP_CONF, "v1\n")])).await;
    // The same image, with the registries configuration it is to be pulled with.
    let mirror = [(APP_CONF, "v1\n"), ("/etc/containers/registries.conf", "[[registry]]\nlocation = \"mirror\"\n")];
    cluster.create_config(with_pin(&rendered_mirror, &pinned, &mirror)).await;
    let mut unpinned = config(&rendered_unpinned, &[(APP_CONF, "v1\n")], json!({}));
    unpinned.spec.os_image_url = "registry.example/os:latest".to_string();
    cluster.create_config(unpinned).await;
    cluster
        .create_config(with_pin(
            &rendered_other_pin,
            &format!("elsewhere.example/os@sha256:{}", "2".repeat(64)),
            &[(APP_CONF, "v1\n")],
        ))
        .await;
    cluster.create_done_node(node).await;
    let root = node_root("v1\n", true);
    let r = root.path();
    cluster.drain_controller(node, r);
    let mut registry = Registry::default();
    let metrics = DaemonMetrics::register(&mut registry);
    let agent = cluster.agent_with(node, r, TIMEOUT, metrics, Some(Box::new(UnreachableRegistry)));
    cluster.wait_for_state(node, "Done", rendered_a).await;

    // A pin of another repository (edited by hand) is refused before anything is pulled.
    cluster.set_desired(node, &rendered_other_pin).await;
    let a = cluster.wait_for_state(node, "Degraded", rendered_a).await;
    assert!(
        a[REASON_ANNOTATION].contains(&format!(
            "MachineConfig {rendered_other_pin}: annotation mco.dev/pinned-os-image \"elsewhere.example/os@sha256:"
        )),
        "{}",
        a[REASON_ANNOTATION]
    );

    // A tag the controller has not pinned is not deployed: the node says so before any drain.
    cluster.set_desired(node, &rendered_unpinned).await;
    let a = reason_containing(&cluster, &rendered_unpinned).await;
    assert_eq!(
        a[REASON_ANNOTATION],
        format!(
            "MachineConfig {rendered_unpinned} names its OS image by tag (registry.example/os:latest) and has no \
             digest pinned by the controller (mco.dev/pinned-os-image): not deploying it"
        )
    );
    let uncordoned = format!("uncordon-{rendered_a}");
    assert_eq!(a.get(DESIRED_DRAIN_ANNOTATION), Some(&uncordoned), "no drain asked");
    let text = mco_metrics::render(&registry);
    assert!(text.lines().any(|l| l == "mcd_pivot_errors_total 0"), "a refused pin is no pivot error:\n{text}");

    cluster.set_desired(node, &rendered_os).await;
    let a = reason_containing(&cluster, "connection refused").await;
    let reason = &a[REASON_ANNOTATION];
    assert!(reason.contains(&format!("pinging container registry for {pinned}: connection refused")), "{reason}");
    let metrics = eventually("a pivot error counted", || async {
        let text = mco_metrics::render(&registry);
        let errors = text.lines().find_map(|l| l.strip_prefix("mcd_pivot_errors_total ")).map(str::to_string);
        if errors.as_deref().is_some_and(|n| n != "0") { Ok(text) } else { Err(text) }
    })
    .await;
    assert!(!metrics.contains("phase=\"pull\""), "a failed pull is no pull duration:\n{metrics}");
    assert!(!metrics.contains("phase=\"deploy\""), "nothing deployed:\n{metrics}");
    assert!(metrics.lines().any(|l| l == "mcd_reboots_failed_total 0"), "{metrics}");

    // An update that brings the files its pull reads is not pulled apart first (the pull would
    // miss them): the deployment pulls, after writing them.
    cluster.set_desired(node, &rendered_mirror).await;
    let a = reason_containing(&cluster, "after writing the files").await;
    assert!(a[REASON_ANNOTATION].contains(&pinned), "{}", a[REASON_ANNOTATION]);
    assert_eq!(read(r, "/etc/containers/registries.conf"), None, "the files rolled back");
    agent.abort();
}

/// Waits until the test's node's annotation `key` is `value`; returns its annotations.
async fn annotated(cluster: &Cluster, key: &str, value: &str) -> BTreeMap<String, String> {
    let node = &cluster.node;
    eventually(&format!("{node}'s {key}: {value}"), || async {
        let a = cluster.annotations(node).await;
        if a.get(key).map(String::as_str) == Some(value) { Ok(a) } else { Err(a) }
    })
    .await
}

/// A stand-in OS (the daemon's part is tested here; the real sysroot's pulls and removals are in
/// mco-apply's ostree tests) that records the images pulled ahead and not yet removed; images
/// of `missing.example` cannot be pulled.
struct RecordingPulls(Arc<Mutex<Vec<String>>>);

impl OsBackend for RecordingPulls {
    fn status(&self) -> anyhow::Result<OsStatus> {
        Ok(OsStatus::default())
    }

    fn pull_ahead(&self, image: &str) -> anyhow::Result<bool> {
        if image.starts_with("missing.example/") {
            anyhow::bail!("reading manifest of {image}: manifest unknown");
        }
        self.0.lock().unwrap().push(image.to_string());
        Ok(true)
    }

    fn drop_pulled(&self) -> anyhow::Result<Vec<String>> {
        Ok(std::mem::take(&mut *self.0.lock().unwrap()))
    }

    fn apply(&self, _: &OsChanges) -> anyhow::Result<()> {
        anyhow::bail!("not reached: no update here")
    }

    fn discard_staged(&self) -> anyhow::Result<()> {
        Ok(())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_node_pulls_ahead_what_the_controller_asks_and_answers() {
    let cluster = Cluster::start().await;
    let (node, rendered_a) = (cluster.node.as_str(), cluster.rendered_a.as_str());
    cluster.create_done_node(node).await;
    let root = node_root("v1\n", true);
    let r = root.path();
    cluster.drain_controller(node, r);
    let pulls = Arc::new(Mutex::new(Vec::new()));
    let mut registry = Registry::default();
    let metrics = DaemonMetrics::register(&mut registry);
    let os: Box<dyn OsBackend> = Box::new(RecordingPulls(pulls.clone()));
    let agent = cluster.agent_with(node, r, TIMEOUT, metrics, Some(os));
    cluster.wait_for_state(node, "Done", rendered_a).await;
    let ask = |image: String| {
        let nodes = cluster.nodes.clone();
        async move {
            let patch = json!({"metadata": {"annotations": {PRESTAGE_ANNOTATION: image}}});
            nodes.patch(node, &PatchParams::default(), &Patch::Merge(&patch)).await.unwrap();
        }
    };

    // Pulled ahead and answered; the node stays Done on its config, no drain is asked.
    let image = format!("registry.example/os@sha256:{}", "3".repeat(64));
    ask(image.clone()).await;
    let a = annotated(&cluster, PRESTAGED_ANNOTATION, &image).await;
    assert_eq!(*pulls.lock().unwrap(), vec![image.clone()]);
    assert_eq!(a[STATE_ANNOTATION], "Done");
    assert_eq!(a[DESIRED_DRAIN_ANNOTATION], format!("uncordon-{rendered_a}"), "no drain");
    assert!(!a.contains_key(PRESTAGE_ERROR_ANNOTATION), "{a:?}");

    // A pull that fails is answered with the image and the registry's error: not a failed update.
    let missing = format!("missing.example/os@sha256:{}", "4".repeat(64));
    ask(missing.clone()).await;
    let why = format!("{missing}: reading manifest of {missing}: manifest unknown");
    let a = annotated(&cluster, PRESTAGE_ERROR_ANNOTATION, &why).await;
    assert_eq!(a[STATE_ANNOTATION], "Done");
    assert_eq!(a[PRESTAGED_ANNOTATION], image, "the last image pulled");
    assert_eq!(pulls.lock().unwrap().len(), 1);
    // Neither is an update: no update phase timed, no pivot error counted (no MCDPivotError).
    let metrics = mco_metrics::render(&registry);
    assert!(!metrics.contains("phase=\"pull\""), "{metrics}");
    assert!(metrics.lines().any(|l| l == "mcd_pivot_errors_total 0"), "{metrics}");

    // The request withdrawn (its update superseded): what was pulled for it is removed, and the
    // answers with it.
    let withdraw = json!({"metadata": {"annotations": {PRESTAGE_ANNOTATION: null}}});
    cluster.nodes.patch(node, &PatchParams::default(), &Patch::Merge(&withdraw)).await.unwrap();
    let a = eventually(&format!("{node}'s answers to the withdrawn request removed"), || async {
        let a = cluster.annotations(node).await;
        let answered = a.contains_key(PRESTAGED_ANNOTATION) || a.contains_key(PRESTAGE_ERROR_ANNOTATION);
        if answered { Err(a) } else { Ok(a) }
    })
    .await;
    assert!(pulls.lock().unwrap().is_empty(), "the pulled image removed: {:?}", pulls.lock().unwrap());
    assert_eq!(a[STATE_ANNOTATION], "Done");
    agent.abort();
}
