//! The node controller over 2,000 Node objects in one pool, in a real API server:
//! - from a new rendered config on the pool to every maxUnavailable slot targeted;
//! - from a node reporting Done to the next node targeted (p50/p99 over many nodes);
//! - the controller's memory (peak RSS of a process that runs only the node controller).
//!
//! `cargo bench -p mco-controller --bench rollout` (needs `hack/kube-binaries.sh`);
//! `MCO_BENCH_NODES` and `MCO_BENCH_MAX_UNAVAILABLE` change the pool (default 2000 and 10).
//! The benchmark plays the daemons: a targeted node reports Done directly (no drain).

#[path = "../tests/common/mod.rs"]
mod common;

use std::collections::HashSet;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt as _;
use k8s_openapi::api::core::v1::Node;
use kube::api::{Patch, PatchParams};
use kube::runtime::{WatchStreamExt as _, watcher};
use kube::{Api, ResourceExt as _};
use mco_api::constants::{
    CURRENT_CONFIG_ANNOTATION, DESIRED_CONFIG_ANNOTATION, STATE_ANNOTATION, STATE_DONE, UPDATE_IN_PROGRESS_TAINT_KEY,
};
use mco_rollout::node::annotation;
use mco_testenv::TestEnv;
use serde_json::json;
use tokio::sync::mpsc;

const CONTROLLER_ARG: &str = "--run-node-controller";
/// Nodes reported Done one after the other to measure the next targeting.
const SAMPLES: usize = 200;

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    match args.iter().position(|a| a == CONTROLLER_ARG) {
        Some(i) => runtime.block_on(controller(PathBuf::from(&args[i + 1]))),
        None => runtime.block_on(bench()),
    }
}

/// The child process: the node controller alone (its logs on stderr with `MCO_LOG`, e.g.
/// `MCO_LOG=mco_controller=debug`).
async fn controller(kubeconfig: PathBuf) {
    if let Ok(filter) = tracing_subscriber::EnvFilter::try_from_env("MCO_LOG") {
        tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).init();
    }
    let client = mco_controller::client(Some(&kubeconfig)).await.unwrap();
    mco_controller::node::controller::run(client, Default::default()).await;
}

/// Peak and current resident memory of a process, from /proc.
fn memory(pid: u32) -> String {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let field = |name: &str| {
        status.lines().find(|l| l.starts_with(name)).map(|l| l[name.len()..].trim().to_string()).unwrap_or_default()
    };
    format!("peak {}, now {}", field("VmHWM:"), field("VmRSS:"))
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 * p).ceil() as usize).clamp(1, sorted.len()) - 1]
}

async fn bench() {
    let count = env_usize("MCO_BENCH_NODES", 2000);
    let max_unavailable = env_usize("MCO_BENCH_MAX_UNAVAILABLE", 10);
    let env = TestEnv::start().await.unwrap();
    let client = env.client();
    let (old, new) = (common::rendered(0), common::rendered(1));
    common::create_pool(&client, &old, json!(max_unavailable)).await;
    let begin = Instant::now();
    common::create_nodes(&client, count, &old).await;
    println!("created {count} nodes in {:.2?}", begin.elapsed());

    let mut child = Command::new(std::env::current_exe().unwrap())
        .arg(CONTROLLER_ARG)
        .arg(env.kubeconfig())
        .stdout(Stdio::null())
        .stderr(if std::env::var_os("MCO_LOG").is_some() { Stdio::inherit() } else { Stdio::null() })
        .spawn()
        .unwrap();
    let begin = Instant::now();
    common::eventually("the pool's status", || async {
        let status = common::pool(&client).await.status;
        mco_testenv::satisfying(status, |status| {
            status
                .as_ref()
                .is_some_and(|s| s.machine_count == Some(count as i32) && s.updated_machine_count == Some(count as i32))
        })
    })
    .await;
    println!("controller up, pool status written, in {:.2?}; memory: {}", begin.elapsed(), memory(child.id()));

    // Every node the controller targets at the new config, as the watch reports it, and how many
    // nodes got the UpdateInProgress taint, the last when.
    let (targeted_tx, mut targeted) = mpsc::unbounded_channel::<(String, Instant)>();
    let last_taint = Arc::new(Mutex::new(None::<(usize, Instant)>));
    let watch_config = new.clone();
    let nodes_api = Api::<Node>::all(client.clone());
    let tainted_at = last_taint.clone();
    let watch = tokio::spawn(async move {
        let (mut seen, mut tainted) = (HashSet::new(), HashSet::new());
        let mut events = watcher(nodes_api, watcher::Config::default()).default_backoff().applied_objects().boxed();
        while let Some(Ok(node)) = events.next().await {
            let name = node.name_any();
            if annotation(&node, DESIRED_CONFIG_ANNOTATION) == Some(watch_config.as_str()) && seen.insert(name.clone())
            {
                let _ = targeted_tx.send((name.clone(), Instant::now()));
            }
            let taints = node.spec.as_ref().and_then(|s| s.taints.as_deref()).unwrap_or_default();
            if taints.iter().any(|t| t.key == UPDATE_IN_PROGRESS_TAINT_KEY) && tainted.insert(name) {
                *tainted_at.lock().unwrap() = Some((tainted.len(), Instant::now()));
            }
        }
    });
    tokio::time::sleep(Duration::from_secs(2)).await; // the watch's initial list

    let start = Instant::now();
    common::patch_pool(&client, json!({"configuration": {"name": new}})).await;
    let mut in_flight = Vec::new();
    while in_flight.len() < max_unavailable {
        let (name, _) = targeted.recv().await.unwrap();
        in_flight.push(name);
    }
    let slots = start.elapsed();
    println!("new config -> all {max_unavailable} maxUnavailable slots targeted: {slots:.2?}");

    let api = Api::<Node>::all(client.clone());
    let done = json!({"metadata": {"annotations": {CURRENT_CONFIG_ANNOTATION: new, STATE_ANNOTATION: STATE_DONE}}});
    let mut latencies = Vec::new();
    for _ in 0..SAMPLES.min(count - max_unavailable) {
        let node = in_flight.remove(0);
        let reported = Instant::now();
        api.patch(&node, &PatchParams::default(), &Patch::Merge(&done)).await.unwrap();
        let Ok(Some((next, at))) = tokio::time::timeout(Duration::from_secs(30), targeted.recv()).await else {
            panic!("{node} Done at {:.2?} after the new config: no next node within 30 s", reported - start);
        };
        let latency = at - reported;
        if latency > Duration::from_millis(200) {
            println!("  slow: {node} Done at {:.2?} -> {next} after {latency:.2?}", reported - start);
        }
        latencies.push(latency);
        in_flight.push(next);
    }
    if let Some((tainted, at)) = *last_taint.lock().unwrap() {
        println!("{tainted} nodes tainted, the last {:.2?} after the new config", at - start);
    }
    latencies.sort();
    println!(
        "node Done -> next node targeted ({} samples): p50 {:.1?}, p99 {:.1?}, max {:.1?}",
        latencies.len(),
        percentile(&latencies, 0.5),
        percentile(&latencies, 0.99),
        latencies[latencies.len() - 1]
    );
    println!("controller memory after the run: {}", memory(child.id()));
    watch.abort();
    child.kill().unwrap();
    child.wait().unwrap();
}
