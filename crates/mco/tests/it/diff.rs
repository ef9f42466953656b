//! `mco diff` on configs rendered from the bundled examples, as an administrator would use it
//! before rolling out a change.

use std::fs;
use std::path::{Path, PathBuf};

use assert_cmd::Command;
use predicates::prelude::*;
use serde_json::Value;

fn mco() -> Command {
    Command::cargo_bin("mco").unwrap()
}

fn examples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/cluster")
}

/// Renders the worker pool from the examples plus `extra` MachineConfig YAML documents.
fn render_worker(dir: &Path, name: &str, extra: &str) -> PathBuf {
    let inputs = dir.join(format!("{name}-inputs"));
    fs::create_dir_all(&inputs).unwrap();
    for entry in fs::read_dir(examples()).unwrap() {
        let path = entry.unwrap().path();
        fs::copy(&path, inputs.join(path.file_name().unwrap())).unwrap();
    }
    fs::write(inputs.join("zz-extra.yaml"), extra).unwrap();
    let out = mco()
        .args(["render", "--pool", "worker", "--controller-version-raw", "v0.0.0-was-not-built-properly"])
        .arg(&inputs)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let path = dir.join(format!("{name}.yaml"));
    fs::write(&path, out.stdout).unwrap();
    path
}

fn worker_mc(name: &str, spec: &str) -> String {
    format!(
        "apiVersion: machineconfiguration.openshift.io/v1\nkind: MachineConfig\nmetadata:\n  name: {name}\n  labels:\n    machineconfiguration.openshift.io/role: worker\nspec:\n{spec}"
    )
}

fn chrony(contents: &str) -> String {
    worker_mc(
        "50-worker-chrony",
        &format!(
            "  config:\n    ignition:\n      version: 3.2.0\n    storage:\n      files:\n      - path: /etc/chrony.conf\n        mode: 420\n        contents:\n          source: data:,{contents}\n"
        ),
    )
}

#[test]
fn file_change_reboots_by_default_and_follows_policies() {
    let dir = tempfile::tempdir().unwrap();
    let old = render_worker(dir.path(), "old", &chrony("pool%20a"));
    let new = render_worker(dir.path(), "new", &chrony("pool%20b"));

    mco()
        .arg("diff")
        .args([&old, &new])
        .assert()
        .success()
        .stdout(predicate::str::contains("files:\n  ~ /etc/chrony.conf\n"))
        .stdout(predicate::str::contains("reconcilable: yes\nactions: Reboot\ndrain: yes"));

    let policies = dir.path().join("machineconfiguration.yaml");
    fs::write(
        &policies,
        "apiVersion: operator.openshift.io/v1\nkind: MachineConfiguration\nmetadata:\n  name: cluster\nspec:\n  nodeDisruptionPolicy:\n    files:\n    - path: /etc/chrony.conf\n      actions:\n      - type: Restart\n        restart:\n          serviceName: chronyd.service\n",
    )
    .unwrap();
    let out =
        mco().arg("diff").args([&old, &new]).arg("--policies").arg(&policies).args(["-o", "json"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["files"]["changed"], serde_json::json!(["/etc/chrony.conf"]));
    assert_eq!(
        report["actions"],
        serde_json::json!([{"type": "Restart", "restart": {"serviceName": "chronyd.service"}}])
    );
    assert_eq!(report["drain"], false);

    // At first boot the cluster's policies are out of reach: any other file reboots.
    mco()
        .arg("diff")
        .args([&old, &new])
        .arg("--policies")
        .arg(&policies)
        .arg("--firstboot")
        .assert()
        .success()
        .stdout(predicate::str::contains("actions: Reboot\n"));
}

#[test]
fn os_changes_and_identical_configs() {
    let dir = tempfile::tempdir().unwrap();
    let old = render_worker(dir.path(), "old", &chrony("x"));
    let new = render_worker(
        dir.path(),
        "new",
        &format!(
            "{}---\n{}",
            chrony("x"),
            worker_mc("60-kargs", "  kernelArguments:\n  - nosmt\n  kernelType: realtime\n")
        ),
    );
    mco()
        .arg("diff")
        .args([&old, &new])
        .assert()
        .success()
        .stdout(predicate::str::contains("kernelArguments: [] -> [\"nosmt\"]\nkernelType: default -> realtime\n"))
        .stdout(predicate::str::contains("actions: Reboot\ndrain: yes"));
    mco()
        .arg("diff")
        .args([&old, &old])
        .assert()
        .success()
        .stdout(predicate::str::contains("no changes\n"))
        .stdout(predicate::str::contains("actions: None\ndrain: no"));
}

#[test]
fn unreconcilable_change_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let old = render_worker(dir.path(), "old", &chrony("x"));
    let user = worker_mc(
        "70-user",
        "  config:\n    ignition:\n      version: 3.2.0\n    passwd:\n      users:\n      - name: alice\n",
    );
    let new = render_worker(dir.path(), "new", &format!("{}---\n{user}", chrony("x")));
    mco().arg("diff").args([&old, &new]).assert().code(1).stdout(predicate::str::contains(
        "reconcilable: no: ignition passwd user section contains unsupported changes",
    ));
}

#[test]
fn bad_input_names_the_problem() {
    let dir = tempfile::tempdir().unwrap();
    let old = render_worker(dir.path(), "old", &chrony("x"));
    let not_mc = dir.path().join("pool.yaml");
    fs::copy(examples().join("worker-pool.yaml"), &not_mc).unwrap();
    mco()
        .arg("diff")
        .args([&old, &not_mc])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("pool.yaml: no MachineConfig in the file"));
    let broken = dir.path().join("broken.yaml");
    fs::write(&broken, worker_mc("rendered-worker-x", "  config:\n    ignition:\n      version: 4.0.0\n")).unwrap();
    mco()
        .arg("diff")
        .args([&old, &broken])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("parsing the Ignition config of MachineConfig rendered-worker-x"));
}
