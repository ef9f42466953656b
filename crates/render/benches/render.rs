//! Render benchmark: a pool of 200 MachineConfigs carrying 5 MB of file content (1,000 files,
//! mixed spec versions and encodings). Prints the median wall time of a render and the peak heap
//! the render allocates (a counting allocator; input generation is excluded).
//!
//! 5 MB is over the 1.5 MB rendered-config limit, so the render ends, as the original's does,
//! with the size refusal after all the work (parse, convert, merge, serialize, hash) is done.
//!
//! Run with `cargo bench -p mco-render`. `cargo bench -p mco-render -- --write-inputs DIR` writes the
//! same pool and MachineConfigs as manifest files instead, for the whole-process benchmark of
//! `mco render` (hack/bench-render.sh).

use std::alloc::{GlobalAlloc, Layout, System};
use std::io::Write;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use base64::Engine;
use mco_api::{ControllerConfig, MachineConfig, MachineConfigPool};
use mco_render::{ControllerVersion, Inputs, RenderError, StorageOverrides, render};
use serde_json::{Value, json};

struct Counting;
static CURRENT: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

// SAFETY: delegates to the system allocator and only adds bookkeeping.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let now = CURRENT.fetch_add(layout.size(), Ordering::Relaxed) + layout.size();
        PEAK.fetch_max(now, Ordering::Relaxed);
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        CURRENT.fetch_sub(layout.size(), Ordering::Relaxed);
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

const MACHINE_CONFIGS: usize = 200;
const FILES_PER_MC: usize = 5;
const FILE_BYTES: usize = 5_000;

/// Deterministic text that gzip cannot shrink to nothing.
fn content(seed: usize) -> String {
    let mut x = seed as u64 * 6364136223846793005 + 1442695040888963407;
    let alphabet = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 =_-";
    (0..FILE_BYTES)
        .map(|i| {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            if i % 64 == 63 { '\n' } else { alphabet[(x >> 33) as usize % alphabet.len()] as char }
        })
        .collect()
}

fn file(version: &str, mc: usize, n: usize) -> Value {
    let text = content(mc * FILES_PER_MC + n);
    let b64 = base64::engine::general_purpose::STANDARD;
    let (source, compression) = match n % 3 {
        0 => (format!("data:,{}", text.replace(' ', "%20").replace('\n', "%0A")), None),
        1 => (format!("data:text/plain;charset=utf-8;base64,{}", b64.encode(&text)), None),
        _ => {
            let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
            gz.write_all(text.as_bytes()).unwrap();
            (format!("data:;base64,{}", b64.encode(gz.finish().unwrap())), Some("gzip"))
        }
    };
    let path = format!("/etc/bench/mc{mc:03}/file{n}.conf");
    if version.starts_with('2') {
        json!({"filesystem": "root", "path": path, "mode": 420,
               "contents": {"source": source, "compression": compression.unwrap_or_default()}})
    } else {
        let mut contents = json!({"source": source});
        if let Some(c) = compression {
            contents["compression"] = json!(c);
        }
        json!({"path": path, "mode": 420, "contents": contents})
    }
}

fn machine_configs() -> Vec<MachineConfig> {
    let versions = ["2.2.0", "3.1.0", "3.2.0", "3.4.0", "3.5.0"];
    (0..MACHINE_CONFIGS)
        .map(|mc| {
            let version = versions[mc % versions.len()];
            let files: Vec<Value> = (0..FILES_PER_MC).map(|n| file(version, mc, n)).collect();
            serde_json::from_value(json!({
                "apiVersion": "machineconfiguration.openshift.io/v1",
                "kind": "MachineConfig",
                "metadata": {"name": format!("{mc:03}-bench"), "labels": {"machineconfiguration.openshift.io/role": "worker"}},
                "spec": {"config": {"ignition": {"version": version}, "storage": {"files": files}},
                         "kernelArguments": [format!("bench.arg{mc}=1")]}
            }))
            .unwrap()
        })
        .collect()
}

fn main() {
    let pool: MachineConfigPool = serde_json::from_value(json!({
        "apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineConfigPool",
        "metadata": {"name": "worker", "uid": "bench"},
        "spec": {"machineConfigSelector": {"matchLabels": {"machineconfiguration.openshift.io/role": "worker"}}}
    }))
    .unwrap();
    let version = ControllerVersion::this_build();
    let cc: ControllerConfig = serde_json::from_value(json!({
        "apiVersion": "machineconfiguration.openshift.io/v1", "kind": "ControllerConfig",
        "metadata": {"name": "machine-config-controller",
                     "annotations": {"machineconfiguration.openshift.io/generated-by-version": version.raw}},
        "spec": {"baseOSContainerImage": "registry.example/os@sha256:0000000000000000000000000000000000000000000000000000000000000000"}
    }))
    .unwrap();
    let mcs = machine_configs();
    let args: Vec<String> = std::env::args().collect();
    if let Some(dir) = args.iter().position(|a| a == "--write-inputs").and_then(|i| args.get(i + 1)) {
        write_inputs(std::path::Path::new(dir), &pool, &mcs);
        return;
    }
    let content_bytes: usize = mcs.iter().map(|m| serde_json::to_string(&m.spec.config).unwrap().len()).sum();
    let inputs = Inputs {
        pool: &pool,
        machine_configs: &mcs,
        controller_config: &cc,
        version: &version,
        current: None,
        storage_overrides: StorageOverrides::default(),
        streams: Default::default(),
        offline: false,
    };

    let baseline = CURRENT.load(Ordering::Relaxed);
    PEAK.store(baseline, Ordering::Relaxed);
    let first = render(inputs);
    let peak = PEAK.load(Ordering::Relaxed) - baseline;
    let Err(RenderError::TooLarge { size, .. }) = first else { panic!("expected the size refusal, got {first:?}") };
    drop(first);
    let files = MACHINE_CONFIGS * FILES_PER_MC;

    let mut times: Vec<Duration> = (0..15)
        .map(|_| {
            let start = Instant::now();
            let rendered = render(inputs);
            let elapsed = start.elapsed();
            drop(rendered);
            elapsed
        })
        .collect();
    times.sort();
    println!(
        "render: {MACHINE_CONFIGS} MachineConfigs, {files} files, {:.1} MB of configs ({:.1} MB rendered): median {:.1} ms (min {:.1} ms), peak heap {:.1} MB",
        content_bytes as f64 / 1e6,
        size as f64 / 1e6,
        times[times.len() / 2].as_secs_f64() * 1e3,
        times[0].as_secs_f64() * 1e3,
        peak as f64 / 1e6,
    );
}

/// The pool and every MachineConfig as a YAML manifest file each, as `mco render DIR` reads them.
fn write_inputs(dir: &std::path::Path, pool: &MachineConfigPool, mcs: &[MachineConfig]) {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join("pool.yaml"), serde_yaml::to_string(pool).unwrap()).unwrap();
    for mc in mcs {
        let name = mc.metadata.name.as_deref().unwrap();
        std::fs::write(dir.join(format!("{name}.yaml")), serde_yaml::to_string(mc).unwrap()).unwrap();
    }
    println!("wrote the pool and {} MachineConfigs to {}", mcs.len(), dir.display());
}
