//! How long a test environment takes: start (etcd, API server, CRDs established) and an API
//! server restart with data. `cargo bench -p mco-testenv` (needs `hack/kube-binaries.sh`).

use std::time::{Duration, Instant};

use mco_testenv::TestEnv;

const RUNS: usize = 3;

fn summary(name: &str, mut samples: Vec<Duration>) {
    samples.sort();
    println!(
        "{name:<28} min {:>7.2?}  median {:>7.2?}  max {:>7.2?}",
        samples[0],
        samples[samples.len() / 2],
        samples[samples.len() - 1]
    );
}

#[tokio::main]
async fn main() {
    let (mut starts, mut restarts) = (Vec::new(), Vec::new());
    for _ in 0..RUNS {
        let begin = Instant::now();
        let mut env = TestEnv::start().await.unwrap();
        starts.push(begin.elapsed());
        let begin = Instant::now();
        env.restart_apiserver().await.unwrap();
        restarts.push(begin.elapsed());
    }
    summary("start (with CRDs)", starts);
    summary("restart kube-apiserver", restarts);
}
