//! Throughput of the planners on real inputs: `cargo bench -p mco-bootimage`.
//!
//! A plain timing loop (no harness) keeps the dependency set small; each measurement runs for
//! at least a second after a warm-up and prints the mean time per call.

use std::hint::black_box;
use std::path::Path;
use std::time::{Duration, Instant};

use mco_api::MachineSet;
use mco_bootimage::ec2::KnownStreams;
use mco_bootimage::{Arch, PlanContext, Stream, plan};
use mco_ignition::Target;

fn testdata(name: &str) -> Vec<u8> {
    std::fs::read(Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata").join(name)).unwrap()
}

fn bench(name: &str, mut f: impl FnMut()) {
    for _ in 0..10 {
        f();
    }
    let start = Instant::now();
    let mut iterations = 0u64;
    while start.elapsed() < Duration::from_secs(1) {
        f();
        iterations += 1;
    }
    let per_call = start.elapsed() / u32::try_from(iterations).unwrap_or(u32::MAX);
    println!("{name:<45} {per_call:>12.2?} per call ({iterations} calls)");
}

fn main() {
    let json = testdata("rhcos-4.16-stream.json");
    bench("Stream::parse rhcos-4.16 (41 KB)", || {
        black_box(Stream::parse(black_box(&json)).unwrap());
    });
    let stream = Stream::parse(&json).unwrap();
    let old = Stream::parse(&testdata("rhcos-4.11-stream.json")).unwrap();
    let known = KnownStreams::new([&old, &stream]);
    let marketplace = Stream::parse(&testdata("rhcos-4.16-azure-marketplace.json")).unwrap();
    let ctx = PlanContext { stream: &stream, infrastructure: None, default_arch: Some(Arch::X86_64), amis: &known };
    let azure_ctx = PlanContext { stream: &marketplace, ..ctx };
    for (platform, ctx) in [("aws", &ctx), ("gcp", &ctx), ("azure", &azure_ctx), ("vsphere", &ctx)] {
        let text = String::from_utf8(testdata(&format!("machinesets/{platform}.yaml"))).unwrap();
        let ms: MachineSet = serde_yaml::from_str(&text).unwrap();
        bench(&format!("plan {platform} MachineSet"), || {
            black_box(plan(black_box(&ms), ctx).unwrap());
        });
    }
    let stub = testdata("stubs/stub-2.2.ign");
    bench("upgrade_stub 2.2 -> 3.1", || {
        black_box(mco_bootimage::stub::upgrade_stub(black_box(&stub), Target::V3_1).unwrap());
    });
}
