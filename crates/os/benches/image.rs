//! Cost of the OS image operations on the test tree with the real libostree, ostree-ext and
//! skopeo: `cargo bench -p mco-os --bench image`. Prints the median of several runs.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use mco_os::image;
use mco_os::tree::{self, TreeSpec};

const RUNS: usize = 7;

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn main() {
    let spec = TreeSpec { kernel_version: "6.5.0-1.mco.x86_64".into(), version_id: "1".into() };
    let (mut commit, mut encapsulate, mut inspect) = (Vec::new(), Vec::new(), Vec::new());
    for i in 0..RUNS {
        let tmp = tempfile::tempdir().unwrap();
        let tree_dir = tmp.path().join("tree");
        tree::write_tree(&tree_dir, &spec).unwrap();
        let repo = tmp.path().join("repo");

        let t = Instant::now();
        tree::commit(&repo, "mco/os", &tree_dir, &i.to_string(), &BTreeMap::new()).unwrap();
        commit.push(t.elapsed());

        let dest = format!("oci:{}:{i}", tmp.path().join("oci").display());
        let t = Instant::now();
        mco_os::block_on(image::encapsulate(&repo, "mco/os", &dest)).unwrap().unwrap();
        encapsulate.push(t.elapsed());

        let t = Instant::now();
        mco_os::block_on(image::inspect(&dest)).unwrap().unwrap();
        inspect.push(t.elapsed());
    }
    println!("commit test tree (new bare-user repo): {:?}", median(commit));
    println!("encapsulate to oci dir:                {:?}", median(encapsulate));
    println!("inspect (import via skopeo proxy):     {:?}", median(inspect));
}
