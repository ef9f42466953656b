//! `mco daemon run` as a process against a real API server (mco-testenv), on a directory root:
//! the test answers the drain requests as the drain controller would; the process exits 0 when
//! the update needs a reboot, and started again (the "rebooted" node) it completes the update,
//! reporting each step as MachineConfigNode conditions and as Events on its Node.

use crate::transitions;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Child, Command, Stdio};

use assert_cmd::cargo::CommandCargoExt;
use mco_api::constants::{
    CURRENT_CONFIG_ANNOTATION, DESIRED_CONFIG_ANNOTATION, DESIRED_DRAIN_ANNOTATION, LAST_APPLIED_DRAIN_ANNOTATION,
    STATE_ANNOTATION,
};
use mco_api::{MachineConfig, MachineConfigNode};
use mco_testenv::k8s_openapi::api::core::v1::Node;
use mco_testenv::k8s_openapi::api::events::v1::Event;
use mco_testenv::kube::Api;
use mco_testenv::kube::api::{Patch, PatchParams, PostParams};
use mco_testenv::{TestEnv, Verbatim, eventually};
use serde_json::json;
use transitions::{Transitions, in_order};

/// The daemon process; killed if the test ends without it exiting.
struct Daemon(Child);

impl Daemon {
    fn start(kubeconfig: &Path, root: &Path, log: &Path, metrics: std::net::SocketAddr) -> Daemon {
        let child = Command::cargo_bin("mco")
            .unwrap()
            .args(["daemon", "run", "--node", "node-1", "--kubeconfig"])
            .arg(kubeconfig)
            .arg(format!("--metrics-listen={metrics}"))
            .arg("--root")
            .arg(root)
            .env("MCO_LOG", "info")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(log).unwrap())
            .spawn()
            .unwrap();
        Daemon(child)
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn app_config(name: &str, text: &str) -> MachineConfig {
    serde_json::from_value(json!({
        "apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineConfig", "metadata": {"name": name},
        "spec": {"config": {"ignition": {"version": "3.5.0"}, "storage": {"files": [
            {"path": "/etc/app.conf", "mode": 420, "contents": {"source": format!("data:,{text}")}}]}}},
    }))
    .unwrap()
}

async fn annotations(nodes: &Api<Node>) -> BTreeMap<String, String> {
    nodes.get("node-1").await.unwrap().metadata.annotations.unwrap_or_default()
}

async fn annotate(nodes: &Api<Node>, key: &str, value: &str) {
    let patch = json!({"metadata": {"annotations": {key: value}}});
    nodes.patch("node-1", &PatchParams::default(), &Patch::Merge(&patch)).await.unwrap();
}

fn daemon_log(log: &Path) -> Verbatim {
    Verbatim(format!("daemon log:\n{}", std::fs::read_to_string(log).unwrap_or_default()))
}

/// Waits until the node has `key=value`; `log` is shown if it never does.
async fn wait_for(nodes: &Api<Node>, key: &str, value: &str, log: &Path) {
    eventually(&format!("{key}={value} on node-1"), || async {
        let annotations = annotations(nodes).await;
        if annotations.get(key).map(String::as_str) == Some(value) {
            Ok(())
        } else {
            Err((annotations, daemon_log(log)))
        }
    })
    .await
}

/// `GET /metrics` from `addr` (the whole response; empty while nothing answers).
async fn scrape(addr: std::net::SocketAddr) -> String {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let Ok(mut stream) = tokio::net::TcpStream::connect(addr).await else { return String::new() };
    let request = "GET /metrics HTTP/1.1\r\nHost: metrics\r\nConnection: close\r\n\r\n";
    let mut response = String::new();
    if stream.write_all(request.as_bytes()).await.is_ok() {
        let _ = stream.read_to_string(&mut response).await;
    }
    response
}

/// Plays the drain controller for one request.
async fn answer_drain(nodes: &Api<Node>, request: &str, log: &Path) {
    wait_for(nodes, DESIRED_DRAIN_ANNOTATION, request, log).await;
    annotate(nodes, LAST_APPLIED_DRAIN_ANNOTATION, request).await;
}

#[tokio::test]
async fn mco_daemon_run_updates_through_a_reboot() {
    let env = TestEnv::start().await.unwrap();
    let configs: Api<MachineConfig> = Api::all(env.client());
    for mc in [app_config("rendered-a", "v1"), app_config("rendered-b", "v2")] {
        configs.create(&PostParams::default(), &mc).await.unwrap();
    }
    let nodes: Api<Node> = Api::all(env.client());
    let node: Node = serde_json::from_value(json!({"apiVersion": "v1", "kind": "Node", "metadata": {
        "name": "node-1", "annotations": {CURRENT_CONFIG_ANNOTATION: "rendered-a",
            DESIRED_CONFIG_ANNOTATION: "rendered-a", STATE_ANNOTATION: "Done"}}}))
    .unwrap();
    nodes.create(&PostParams::default(), &node).await.unwrap();
    // The node controller's part: the node's MachineConfigNode.
    let machine_config_nodes: Api<MachineConfigNode> = Api::all(env.client());
    let spec = mco_mcn::progress::spec_for("node-1", "worker", node.metadata.annotations.as_ref().unwrap());
    machine_config_nodes.create(&PostParams::default(), &MachineConfigNode::new("node-1", spec)).await.unwrap();
    let transitions = Transitions::watch(env.client());
    let root = tempfile::tempdir().unwrap();
    let r = root.path();
    std::fs::create_dir_all(r.join("etc")).unwrap();
    std::fs::write(r.join("etc/passwd"), "root:x:0:0:root:/root:/bin/sh\n").unwrap();
    std::fs::write(r.join("etc/group"), "root:x:0:\n").unwrap();
    std::fs::write(r.join("etc/app.conf"), "v1").unwrap();
    std::fs::write(
        r.join("etc/os-release"),
        "NAME=\"Red Hat Enterprise Linux CoreOS\"\nID=\"rhcos\"\nVERSION_ID=\"4.18\"\n",
    )
    .unwrap();
    // Each boot's id, as the lab's booter records it.
    std::fs::create_dir_all(r.join("run")).unwrap();
    std::fs::write(r.join("run/mco-boot-id"), "boot-1\n").unwrap();
    let log = env.dir().join("daemon.log");

    let metrics = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let mut daemon = Daemon::start(env.kubeconfig(), r, &log, metrics);
    answer_drain(&nodes, "uncordon-rendered-a", &log).await;
    annotate(&nodes, DESIRED_CONFIG_ANNOTATION, "rendered-b").await;
    answer_drain(&nodes, "drain-rendered-b", &log).await;
    let status = eventually("the daemon to exit for the reboot", || {
        let exited = daemon.0.try_wait().unwrap().ok_or_else(|| daemon_log(&log));
        async move { exited }
    })
    .await;
    assert!(status.success(), "{status}: {}", std::fs::read_to_string(&log).unwrap());
    assert_eq!(std::fs::read_to_string(r.join("etc/app.conf")).unwrap(), "v2");
    assert_eq!(
        std::fs::read_to_string(r.join("run/mco-reboot-requested")).unwrap(),
        "Node will reboot into config rendered-b\n"
    );

    std::fs::remove_dir_all(r.join("run")).unwrap();
    std::fs::create_dir_all(r.join("run")).unwrap();
    std::fs::write(r.join("run/mco-boot-id"), "boot-2\n").unwrap();
    let _daemon = Daemon::start(env.kubeconfig(), r, &log, metrics);
    answer_drain(&nodes, "uncordon-rendered-b", &log).await;
    wait_for(&nodes, CURRENT_CONFIG_ANNOTATION, "rendered-b", &log).await;
    wait_for(&nodes, STATE_ANNOTATION, "Done", &log).await;

    // Every step of the update through the reboot, in order. (The first process never settles on
    // rendered-a: its new desired config comes with the uncordon's answer.)
    let expected = [
        "Updated=False",
        "UpdatePrepared=True",
        "AppliedFilesAndOS=Unknown",
        "UpdateExecuted=Unknown",
        "AppliedFilesAndOS=True",
        "UpdateExecuted=True",
        "NodeDegraded=False",
        "RebootedNode=Unknown",
        "RebootedNode=True",
        "Resumed=True",
        "Updated=True",
    ];
    let seen = eventually("the MachineConfigNode to say node-1 is updated", || {
        let seen = transitions.of("node-1");
        let done = in_order(&seen, &expected);
        let log = daemon_log(&log);
        async move { if done { Ok(seen) } else { Err((seen, log)) } }
    })
    .await;
    let mcn = machine_config_nodes.get("node-1").await.unwrap();
    let status = mcn.status.unwrap();
    let version = status.config_version.unwrap();
    assert_eq!((version.current.as_deref(), version.desired.as_str()), (Some("rendered-b"), "rendered-b"));
    let not_false: Vec<_> =
        status.conditions.unwrap().into_iter().filter(|c| c.status != "False").map(|c| c.type_).collect();
    assert_eq!(not_false, ["Updated"], "after {seen:?}");

    // Its metrics, with the original's names: Done, the update to rendered-b completed, the
    // host's OS; and how long the reboot took (the drain and the deploy were observed by the
    // process that requested it).
    eventually("the daemon's metrics saying Done on rendered-b after a reboot", || async move {
        let scraped = scrape(metrics).await;
        let done = scraped.lines().any(|l| l.starts_with("mcd_state{state=\"Done\",reason=\"\"} "))
            && scraped.lines().any(|l| l.starts_with("mcd_update_state{config=\"rendered-b\",err=\"\"} "))
            && scraped.lines().any(|l| l == "mcd_host_os_and_version{os=\"RHCOS\",version=\"4.18\"} 1")
            && scraped.lines().any(|l| l == "mco_daemon_update_phase_seconds_count{phase=\"reboot\"} 1")
            && scraped.lines().any(|l| l == "mcd_reboots_failed_total 0")
            && scraped.lines().any(|l| l == "mcd_pivot_errors_total 0");
        if done { Ok(()) } else { Err(scraped) }
    })
    .await;

    // The Events on node-1, in the order they happened, with upstream's reasons and messages.
    let events: Api<Event> = Api::namespaced(env.client(), "default");
    let expected = [
        ("Cordon", "Cordoned node to apply update"),
        ("Drain", "Draining node to update config."),
        (
            "OSUpgradeSkipped",
            "OS upgrade skipped; new MachineConfig (rendered-b) has same OS image () as old MachineConfig (rendered-a)",
        ),
        ("Reboot", "Node will reboot into config rendered-b"),
        ("BootResync", "Booting node node-1, currentConfig rendered-a, desiredConfig rendered-b"),
        ("Uncordon", "Update completed for config rendered-b and node has been uncordoned"),
        ("NodeDone", "Setting node node-1, currentConfig rendered-b to Done"),
        ("ConfigDriftMonitorStarted", "Config Drift Monitor started, watching against rendered-b"),
    ];
    let expected: Vec<String> = expected.iter().map(|(reason, note)| format!("{reason}: {note}")).collect();
    let expected: Vec<&str> = expected.iter().map(String::as_str).collect();
    eventually("node-1's Events", || async {
        let mut listed = events.list(&Default::default()).await.unwrap().items;
        listed.retain(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("node-1"));
        listed.sort_by(|a, b| a.event_time.as_ref().map(|t| t.0).cmp(&b.event_time.as_ref().map(|t| t.0)));
        let seen: Vec<String> = listed
            .iter()
            .map(|e| format!("{}: {}", e.reason.as_deref().unwrap_or(""), e.note.as_deref().unwrap_or("")))
            .collect();
        if in_order(&seen, &expected) { Ok(()) } else { Err(seen) }
    })
    .await;

    // The original's log lines for its config drift monitor, which its e2e tests read from the
    // daemon's log: started once settled, shut down when the next update begins.
    let logged = |line: &'static str| {
        let log = log.clone();
        move || {
            let found = std::fs::read_to_string(&log).unwrap_or_default().rfind(line).ok_or_else(|| daemon_log(&log));
            async move { found }
        }
    };
    let started =
        eventually("the daemon to log that its drift monitor started", logged("Config Drift Monitor started")).await;
    annotate(&nodes, DESIRED_CONFIG_ANNOTATION, "rendered-a").await;
    let stopped =
        eventually("the daemon to log that its drift monitor shut down", logged("Config Drift Monitor has shut down"))
            .await;
    assert!(stopped > started, "{}", daemon_log(&log).0);
}
