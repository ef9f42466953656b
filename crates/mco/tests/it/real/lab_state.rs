//! `mco lab down` on a stopped lab's state directory: everything, only the logs, or nothing kept,
//! the nodes' sysroots removed even though libostree made their deployments immutable (root).

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

use crate::common::mco;

/// A stopped lab's state directory: logs, a node's sysroot with an immutable deployment, a
/// registry blob and the state file.
fn stopped_lab(dir: &Path) {
    let deployment = dir.join("nodes/worker-0/sysroot/ostree/deploy/mco/deploy/0a1b.0");
    for (path, text) in [
        ("logs/supervisor.log", "started\n"),
        ("registry/blobs/sha256/0a1b", "blob"),
        ("state.json", "{}"),
        ("nodes/worker-0/sysroot/ostree/deploy/mco/deploy/0a1b.0/etc/hostname", "worker-0\n"),
    ] {
        let path = dir.join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
    let immutable = Command::new("chattr").arg("+i").arg(&deployment).status().unwrap();
    assert!(immutable.success(), "chattr +i {}", deployment.display());
}

fn entries(dir: &Path) -> Option<BTreeSet<String>> {
    let read = std::fs::read_dir(dir).ok()?;
    Some(read.map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect())
}

#[test]
fn lab_down_keeps_everything_only_the_logs_or_nothing() {
    let everything = ["logs", "nodes", "registry", "state.json"];
    let cases: [(&[&str], Option<&[&str]>); 3] =
        [(&["--keep"], Some(&everything)), (&["--keep-logs"], Some(&["logs"])), (&[], None)];
    for (flags, left) in cases {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("lab");
        stopped_lab(&dir);
        mco().args(["lab", "down", "--state-dir"]).arg(&dir).args(flags).assert().success();
        let want = left.map(|names| names.iter().map(|n| n.to_string()).collect());
        assert_eq!(entries(&dir), want, "lab down {flags:?}");
        if left.is_some() {
            assert_eq!(std::fs::read_to_string(dir.join("logs/supervisor.log")).unwrap(), "started\n");
        }
        if flags == ["--keep"] {
            mco_lab::node::remove_sysroot(&dir.join("nodes/worker-0/sysroot")).unwrap();
        }
    }
}
