//! How long a test environment takes: a fresh start (etcd, API server, CRDs created and
//! established), a start from the prepared etcd directory (the CRDs already there: what
//! `TestEnv::start` does), a shared server's handle after the first, and an API server restart
//! with data. `cargo bench -p mco-testenv` (needs `hack/kube-binaries.sh`).

use std::future::Future;
use std::time::{Duration, Instant};

use mco_testenv::TestEnv;

const RUNS: usize = 5;

fn summary(name: &str, mut samples: Vec<Duration>) {
    samples.sort();
    println!(
        "{name:<34} min {:>9.2?}  median {:>9.2?}  max {:>9.2?}",
        samples[0],
        samples[samples.len() / 2],
        samples[samples.len() - 1]
    );
}

/// The time of each of [`RUNS`] calls of `start`, each environment kept until the next is made.
async fn timed<F, Fut>(mut start: F) -> (Vec<Duration>, TestEnv)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = TestEnv>,
{
    let mut samples = Vec::new();
    let mut last = None;
    for _ in 0..RUNS {
        let begin = Instant::now();
        last = Some(start().await);
        samples.push(begin.elapsed());
    }
    (samples, last.expect("at least one run"))
}

#[tokio::main]
async fn main() {
    let (fresh, _) = timed(|| async { TestEnv::start_fresh().await.unwrap() }).await;
    summary("start, CRDs created", fresh);
    // The first also makes the prepared directory (once per machine and CRD set).
    let (prepared, mut env) = timed(|| async { TestEnv::start().await.unwrap() }).await;
    summary("start from the prepared directory", prepared[1..].to_vec());
    let _shared = TestEnv::shared().await.unwrap();
    let (handles, _) = timed(|| async { TestEnv::shared().await.unwrap() }).await;
    summary("a shared server's handle", handles);
    let mut restarts = Vec::new();
    for _ in 0..RUNS {
        let begin = Instant::now();
        env.restart_apiserver().await.unwrap();
        restarts.push(begin.elapsed());
    }
    summary("restart kube-apiserver", restarts);
}
