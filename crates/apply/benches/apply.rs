//! File-only update of 100 files on a directory root: time from the start of `apply` to done
//! (validation of the current state, journal of the 100 originals, 100 atomic writes, record).
//! `cargo bench -p mco-apply --bench apply`; the target is under 100 ms.

use std::time::{Duration, Instant};

use mco_api::{MachineConfig, MachineConfigSpec};
use mco_apply::apply::{Disruption, Node, apply};
use mco_apply::failpoint::Failpoints;
use mco_disruption::default_cluster_policies;
use serde_json::json;

const FILES: usize = 100;

fn config(name: &str, version: usize) -> MachineConfig {
    let files: Vec<_> = (0..FILES)
        .map(|i| {
            json!({"path": format!("/etc/bench/{}/file-{i}.conf", i % 10), "mode": 420,
                   "contents": {"source": format!("data:,version%20{version}%20of%20file%20{i}%0A{}", "x".repeat(2000))}})
        })
        .collect();
    let spec = MachineConfigSpec {
        config: Some(json!({"ignition": {"version": "3.5.0"}, "storage": {"files": files}})),
        ..Default::default()
    };
    MachineConfig::new(name, spec)
}

fn main() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_path_buf();
    std::fs::create_dir_all(root.join("etc")).unwrap();
    std::fs::write(root.join("etc/passwd"), "root:x:0:0::/root:/bin/sh\n").unwrap();
    std::fs::write(root.join("etc/group"), "root:x:0:\n").unwrap();
    let node = Node::directory_root(root.clone(), None);
    let fp = Failpoints::default();
    // Files under /etc/bench have no policy: every update reboots (a request file in this root).
    let disruption = Disruption::Cluster { policies: default_cluster_policies(), skip_registry_drain: false };
    let empty = MachineConfig::new("empty", MachineConfigSpec::default());
    let configs = [config("rendered-a", 1), config("rendered-b", 2)];
    apply(&node, &empty, &configs[0], &disruption, &fp).unwrap();
    let mut times: Vec<Duration> = Vec::new();
    for i in 0..40 {
        let (old, new) = (&configs[i % 2], &configs[(i + 1) % 2]);
        let start = Instant::now();
        let done = apply(&node, old, new, &disruption, &fp).unwrap();
        times.push(start.elapsed());
        assert_eq!(done.steps, FILES);
    }
    times.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    println!(
        "apply: file-only update of {FILES} files (2 KiB each), {} runs: min {:.2} ms, median {:.2} ms, max {:.2} ms",
        times.len(),
        ms(times[0]),
        ms(times[times.len() / 2]),
        ms(times[times.len() - 1])
    );
}
