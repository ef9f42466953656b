//! `mco daemon apply` and `mco daemon validate` on directory roots: real files, real symlinks,
//! real owners (the tests run as root), the real binary killed at failpoints.

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use assert_cmd::Command;
use serde_json::{Value, json};

fn mco() -> Command {
    Command::cargo_bin("mco").unwrap()
}

mod escapes;

/// A node root: users, an OS-shipped `/etc/chrony.conf` (with its `/usr/etc` copy), a vendor unit,
/// the crio and chronyd units.
fn node_root() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    populate_node_root(dir.path());
    dir
}

fn populate_node_root(r: &Path) {
    for d in ["etc", "usr/etc", "usr/lib/systemd/system", "home/core", "run"] {
        fs::create_dir_all(r.join(d)).unwrap();
    }
    fs::write(r.join("etc/passwd"), "root:x:0:0:root:/root:/bin/sh\ncore:x:1000:1000::/home/core:/bin/sh\n").unwrap();
    fs::write(r.join("etc/group"), "root:x:0:\ncore:x:1000:\nwheel:x:10:core\n").unwrap();
    fs::write(r.join("etc/shadow"), "root:*:19000:0:99999:7:::\ncore:!:19000:0:99999:7:::\n").unwrap();
    fs::set_permissions(r.join("etc/shadow"), fs::Permissions::from_mode(0o640)).unwrap();
    std::os::unix::fs::chown(r.join("home/core"), Some(1000), Some(1000)).unwrap();
    fs::write(r.join("usr/etc/chrony.conf"), "pool 2.rhel.pool.ntp.org iburst\n").unwrap();
    fs::write(r.join("etc/chrony.conf"), "pool 2.rhel.pool.ntp.org iburst\n").unwrap();
    for unit in ["crio.service", "chronyd.service"] {
        fs::write(r.join("usr/lib/systemd/system").join(unit), "[Service]\nExecStart=/bin/true\n").unwrap();
    }
    fs::write(
        r.join("usr/lib/systemd/system/vendor.service"),
        "[Service]\nExecStart=/bin/true\n[Install]\nWantedBy=multi-user.target\n",
    )
    .unwrap();
}

fn data(text: &str) -> String {
    let escaped: String = text
        .bytes()
        .map(|b| if b.is_ascii_alphanumeric() { (b as char).to_string() } else { format!("%{b:02X}") })
        .collect();
    format!("data:,{escaped}")
}

/// Gzipped and base64-encoded by the system's gzip and base64.
fn gz_data(text: &str) -> String {
    let out = std::process::Command::new("sh")
        .args(["-c", "printf %s \"$0\" | gzip -c | base64 -w0", text])
        .output()
        .unwrap();
    assert!(out.status.success());
    format!("data:;base64,{}", String::from_utf8(out.stdout).unwrap())
}

fn mc(name: &str, config: Value, extra: Value) -> Value {
    let mut spec = json!({"config": config});
    spec.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
    json!({"apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineConfig",
           "metadata": {"name": name}, "spec": spec})
}

/// Config A: files (plain, gzip, mode+owner by name and id, an OS-owned file), units (enabled,
/// masked, drop-in), the core user's keys.
fn config_a() -> Value {
    mc(
        "rendered-worker-a",
        json!({
            "ignition": {"version": "3.5.0"},
            "passwd": {"users": [{"name": "core", "sshAuthorizedKeys": ["ssh-ed25519 AAAA a@x"]}]},
            "storage": {"files": [
                {"path": "/etc/mco/plain.conf", "mode": 420, "overwrite": true, "contents": {"source": data("plain a\n")}},
                {"path": "/etc/mco/zipped.conf", "mode": 420, "contents": {"compression": "gzip", "source": gz_data("zipped a\n")}},
                {"path": "/usr/local/bin/tool", "mode": 488, "user": {"name": "core"}, "group": {"id": 10},
                 "contents": {"source": data("#!/bin/sh\necho a\n")}},
                {"path": "/etc/chrony.conf", "mode": 420, "contents": {"source": data("server a iburst\n")}}
            ]},
            "systemd": {"units": [
                {"name": "mco-a.service", "enabled": true,
                 "contents": "[Service]\nExecStart=/bin/true\n[Install]\nWantedBy=multi-user.target\n"},
                {"name": "masked.service", "mask": true},
                {"name": "vendor.service", "dropins": [{"name": "10-mco.conf", "contents": "[Service]\nEnvironment=A=1\n"}]}
            ]}
        }),
        json!({}),
    )
}

/// Config B: a changed file, a removed OS-owned file, a disabled unit, a removed drop-in, new keys.
fn config_b() -> Value {
    mc(
        "rendered-worker-b",
        json!({
            "ignition": {"version": "3.5.0"},
            "passwd": {"users": [{"name": "core", "sshAuthorizedKeys": ["ssh-ed25519 AAAA a@x", "ssh-rsa BBBB b@x"],
                                  "passwordHash": "$6$salt$b"}]},
            "storage": {"files": [
                {"path": "/etc/mco/plain.conf", "mode": 384, "overwrite": true, "contents": {"source": data("plain b\n")}},
                {"path": "/etc/mco/zipped.conf", "mode": 420, "contents": {"compression": "gzip", "source": gz_data("zipped a\n")}},
                {"path": "/usr/local/bin/tool", "mode": 488, "user": {"name": "core"}, "group": {"id": 10},
                 "contents": {"source": data("#!/bin/sh\necho b\n")}},
                {"path": "/etc/mco/new.conf", "contents": {"source": data("new\n")}}
            ]},
            "systemd": {"units": [
                {"name": "mco-a.service", "enabled": false,
                 "contents": "[Service]\nExecStart=/bin/false\n[Install]\nWantedBy=multi-user.target\n"},
                {"name": "masked.service", "mask": true}
            ]}
        }),
        json!({}),
    )
}

fn write_mc(dir: &Path, mc: &Value) -> PathBuf {
    let path = dir.join(format!("{}.yaml", mc["metadata"]["name"].as_str().unwrap()));
    fs::write(&path, serde_json::to_string_pretty(mc).unwrap()).unwrap();
    path
}

fn apply(root: &Path, current: Option<&Path>, desired: &Path) -> Command {
    let mut cmd = mco();
    cmd.args(["daemon", "apply", "--root"]).arg(root).arg("--desired").arg(desired);
    if let Some(c) = current {
        cmd.arg("--current").arg(c);
    }
    cmd
}

fn validate(root: &Path, config: &Path) -> assert_cmd::assert::Assert {
    mco().args(["daemon", "validate", "--root"]).arg(root).arg("--config").arg(config).assert()
}

/// Everything under a root: kind, mode, owner and contents (or link target) of every entry.
fn tree(root: &Path) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for e in fs::read_dir(&dir).unwrap() {
            let p = e.unwrap().path();
            let m = fs::symlink_metadata(&p).unwrap();
            let rel = p.strip_prefix(root).unwrap().display().to_string();
            let owner = format!("{:o} {}:{}", m.permissions().mode() & 0o7777, m.uid(), m.gid());
            let what = if m.file_type().is_symlink() {
                format!("link -> {}", fs::read_link(&p).unwrap().display())
            } else if m.is_dir() {
                stack.push(p.clone());
                format!("dir {owner}")
            } else {
                format!("file {owner} {:?}", String::from_utf8_lossy(&fs::read(&p).unwrap()))
            };
            out.insert(rel, what);
        }
    }
    out
}

fn read(root: &Path, p: &str) -> String {
    fs::read_to_string(root.join(p.trim_start_matches('/'))).unwrap_or_else(|e| panic!("{p}: {e}"))
}

fn meta(root: &Path, p: &str) -> (u32, u32, u32) {
    let m = fs::symlink_metadata(root.join(p.trim_start_matches('/'))).unwrap();
    (m.permissions().mode() & 0o7777, m.uid(), m.gid())
}

fn exists(root: &Path, p: &str) -> bool {
    fs::symlink_metadata(root.join(p.trim_start_matches('/'))).is_ok()
}

#[test]
fn applies_a_config_and_then_an_update() {
    let node = node_root();
    let r = node.path();
    let cfg = tempfile::tempdir().unwrap();
    let (a, b) = (write_mc(cfg.path(), &config_a()), write_mc(cfg.path(), &config_b()));

    apply(r, None, &a).assert().success().stdout(
        "applied mco-empty-mc -> rendered-worker-a (11 steps)\nactions: Reboot\ndrain: yes (the actions reboot or drain the node)\n",
    );
    assert_eq!(read(r, "/run/mco-reboot-requested"), "Node will reboot into config rendered-worker-a\n");
    assert_eq!(read(r, "/etc/mco/plain.conf"), "plain a\n");
    assert_eq!(read(r, "/etc/mco/zipped.conf"), "zipped a\n", "gzip contents are inflated");
    assert_eq!(meta(r, "/usr/local/bin/tool"), (0o750, 1000, 10), "mode 488, owner by name, group by id");
    assert_eq!(meta(r, "/etc/mco/plain.conf"), (0o644, 0, 0));
    assert_eq!(read(r, "/etc/machine-config-daemon/orig/etc/chrony.conf.mcdorig"), "pool 2.rhel.pool.ntp.org iburst\n");
    assert_eq!(read(r, "/etc/machine-config-daemon/noorig/etc/mco/plain.conf.mcdnoorig"), "");
    assert_eq!(
        fs::read_link(r.join("etc/systemd/system/multi-user.target.wants/mco-a.service")).unwrap(),
        Path::new("/etc/systemd/system/mco-a.service")
    );
    assert_eq!(fs::read_link(r.join("etc/systemd/system/masked.service")).unwrap(), Path::new("/dev/null"));
    assert_eq!(read(r, "/etc/systemd/system/vendor.service.d/10-mco.conf"), "[Service]\nEnvironment=A=1\n");
    assert_eq!(
        fs::read_link(r.join("etc/systemd/system/multi-user.target.wants/vendor.service")).unwrap(),
        Path::new("/usr/lib/systemd/system/vendor.service"),
        "a unit without `enabled` gets its preset (default: enable)"
    );
    assert_eq!(read(r, "/home/core/.ssh/authorized_keys.d/ignition"), "ssh-ed25519 AAAA a@x\n");
    assert_eq!(meta(r, "/home/core/.ssh/authorized_keys.d/ignition"), (0o600, 1000, 1000));
    assert_eq!(meta(r, "/home/core/.ssh"), (0o700, 1000, 1000));
    // No passwordHash: no password login (upstream's `usermod -p '*'`), the file's mode kept.
    assert_eq!(read(r, "/etc/shadow"), "root:*:19000:0:99999:7:::\ncore:*:19000:0:99999:7:::\n");
    assert_eq!(meta(r, "/etc/shadow"), (0o640, 0, 0));
    let recorded: Value = serde_json::from_str(&read(r, "/etc/machine-config-daemon/currentconfig")).unwrap();
    assert_eq!(recorded["metadata"]["name"], "rendered-worker-a");
    assert!(!exists(r, "/var/lib/machine-config-daemon/txn"), "the journal is gone after success");
    validate(r, &a).success().stdout("node matches rendered-worker-a\n");

    apply(r, Some(&a), &b).assert().success();
    assert_eq!(read(r, "/etc/mco/plain.conf"), "plain b\n");
    assert_eq!(meta(r, "/etc/mco/plain.conf"), (0o600, 0, 0));
    assert_eq!(read(r, "/usr/local/bin/tool"), "#!/bin/sh\necho b\n");
    assert_eq!(read(r, "/etc/chrony.conf"), "pool 2.rhel.pool.ntp.org iburst\n", "the OS original is restored");
    assert!(!exists(r, "/etc/machine-config-daemon/orig/etc/chrony.conf.mcdorig"));
    assert!(!exists(r, "/etc/systemd/system/multi-user.target.wants/mco-a.service"), "disabled");
    assert!(!exists(r, "/etc/systemd/system/vendor.service.d/10-mco.conf"), "removed drop-in");
    assert_eq!(read(r, "/home/core/.ssh/authorized_keys.d/ignition"), "ssh-ed25519 AAAA a@x\nssh-rsa BBBB b@x\n");
    assert_eq!(read(r, "/etc/shadow"), "root:*:19000:0:99999:7:::\ncore:$6$salt$b:19000:0:99999:7:::\n");
    validate(r, &b).success();
    let drift = validate(r, &a).failure();
    let out = String::from_utf8(drift.get_output().stdout.clone()).unwrap();
    assert!(
        out.contains("mode mismatch for file: \"/etc/mco/plain.conf\"; expected: -rw-r--r--; received: -rw-------"),
        "{out}"
    );
    assert!(out.contains("content mismatch for file \"/usr/local/bin/tool\""), "{out}");

    // Dropping every file and unit leaves only what the OS shipped.
    let empty =
        write_mc(cfg.path(), &mc("rendered-worker-empty", json!({"ignition": {"version": "3.5.0"}}), json!({})));
    apply(r, None, &empty).assert().success();
    for gone in ["/etc/mco/plain.conf", "/etc/mco/new.conf", "/usr/local/bin/tool", "/etc/systemd/system/mco-a.service"]
    {
        assert!(!exists(r, gone), "{gone}");
    }
    // A user the config no longer names gets no password (upstream's empty field would allow
    // a login without one).
    assert_eq!(read(r, "/etc/shadow"), "root:*:19000:0:99999:7:::\ncore:*:19000:0:99999:7:::\n");
    assert!(!exists(r, "/etc/machine-config-daemon/noorig/etc/mco/plain.conf.mcdnoorig"));
}

/// A unit the config enables or disables without contents is enabled or disabled when a unit file
/// for it is on the node, and skipped when there is none (upstream's TestIgn3Cfg: such a unit must
/// not fail the update).
#[test]
fn units_without_contents_are_enabled_only_when_the_node_has_them() {
    let node = node_root();
    let r = node.path();
    let cfg = tempfile::tempdir().unwrap();
    let config = mc(
        "rendered-worker-empty-units",
        json!({
            "ignition": {"version": "3.5.0"},
            "systemd": {"units": [
                {"name": "new-empty-svc.service", "enabled": true},
                {"name": "gone-svc.service", "enabled": false, "contents": ""},
                {"name": "vendor.service", "enabled": true}
            ]}
        }),
        json!({}),
    );
    let path = write_mc(cfg.path(), &config);
    apply(r, None, &path).assert().success();
    assert_eq!(
        fs::read_link(r.join("etc/systemd/system/multi-user.target.wants/vendor.service")).unwrap(),
        Path::new("/usr/lib/systemd/system/vendor.service"),
        "the OS's unit is enabled"
    );
    for absent in ["/etc/systemd/system/new-empty-svc.service", "/etc/systemd/system/gone-svc.service"] {
        assert!(!exists(r, absent), "{absent} is not written");
    }
    validate(r, &path).success().stdout("node matches rendered-worker-empty-units\n");
}

#[test]
fn drift_is_refused_until_the_force_file_exists() {
    let node = node_root();
    let r = node.path();
    let cfg = tempfile::tempdir().unwrap();
    let (a, b) = (write_mc(cfg.path(), &config_a()), write_mc(cfg.path(), &config_b()));
    apply(r, None, &a).assert().success();
    fs::write(r.join("etc/mco/zipped.conf"), "edited by hand\n").unwrap();
    let before = tree(r);
    let refused = apply(r, Some(&a), &b).assert().code(1);
    let err = String::from_utf8(refused.get_output().stderr.clone()).unwrap();
    assert!(
        err.contains("state: Degraded\nreason: unexpected on-disk state validating against rendered-worker-a: content mismatch for file \"/etc/mco/zipped.conf\""),
        "{err}"
    );
    assert_eq!(tree(r), before, "nothing written");
    fs::write(r.join("run/machine-config-daemon-force"), "").unwrap();
    apply(r, Some(&a), &b).assert().success();
    assert_eq!(read(r, "/etc/mco/zipped.conf"), "zipped a\n", "force rewrites unchanged files");
    assert!(!exists(r, "/run/machine-config-daemon-force"), "the force file is consumed");
    validate(r, &b).success();
}

#[test]
fn refusals_name_the_problem_and_write_nothing() {
    let node = node_root();
    let r = node.path();
    let cfg = tempfile::tempdir().unwrap();
    let a = write_mc(cfg.path(), &config_a());
    apply(r, None, &a).assert().success();
    let before = tree(r);
    let cases = [
        (
            mc("os", config_a()["spec"]["config"].clone(), json!({"osImageURL": "quay.io/os@sha256:2"})),
            "state: Degraded\nreason: config os changes the OS",
        ),
        (
            mc(
                "dirs",
                json!({"ignition": {"version": "3.5.0"}, "storage": {"directories": [{"path": "/etc/d"}]}}),
                json!({}),
            ),
            "state: Unreconcilable\nreason: can't reconcile config rendered-worker-a with dirs: ignition directories section contains changes",
        ),
        (
            mc(
                "http",
                json!({"ignition": {"version": "3.5.0"}, "storage": {"files": [
                {"path": "/etc/x", "contents": {"source": "https://example.com/x"}}]}}),
                json!({}),
            ),
            "reason: file \"/etc/x\": contents.source: only data URLs are supported",
        ),
        (
            mc(
                "nouser",
                json!({"ignition": {"version": "3.5.0"}, "storage": {"files": [
                {"path": "/etc/x", "user": {"name": "nobody-here"}, "contents": {"source": "data:,x"}}]}}),
                json!({}),
            ),
            "user \"nobody-here\" not found in /etc/passwd",
        ),
        (
            mc(
                "colon",
                json!({"ignition": {"version": "3.5.0"}, "passwd": {"users": [
                {"name": "core", "passwordHash": "x:0:0:99999:7:::"}]}}),
                json!({}),
            ),
            "passwordHash of user core contains ':'",
        ),
    ];
    for (desired, want) in cases {
        let path = write_mc(cfg.path(), &desired);
        let out = apply(r, None, &path).assert().code(1);
        let err = String::from_utf8(out.get_output().stderr.clone()).unwrap();
        assert!(err.contains(want), "{err}");
        assert_eq!(tree(r), before, "{want}");
    }
    // An object of another kind is not read as a MachineConfig, whatever fields they share.
    let mut pool = config_a();
    pool["kind"] = json!("MachineConfigPool");
    let pool = write_mc(cfg.path(), &pool);
    let out = apply(r, None, &pool).assert().code(2);
    let err = String::from_utf8(out.get_output().stderr.clone()).unwrap();
    assert!(
        err.contains(
            "a \"MachineConfigPool\" of apiVersion \"machineconfiguration.openshift.io/v1\", not a MachineConfig \
             (machineconfiguration.openshift.io/v1)"
        ),
        "{err}"
    );
    assert_eq!(tree(r), before);
    // A tag without the digest a controller pins is no config a node applies (bad input: 2).
    let tag =
        write_mc(cfg.path(), &mc("tag", config_a()["spec"]["config"].clone(), json!({"osImageURL": "quay.io/os:9"})));
    let out = apply(r, None, &tag).assert().code(2);
    let err = String::from_utf8(out.get_output().stderr.clone()).unwrap();
    assert!(
        err.contains(
            "MachineConfig tag names its OS image by tag (quay.io/os:9) and has no digest pinned by the controller \
             (mco.dev/pinned-os-image): not deploying it"
        ),
        "{err}"
    );
    assert_eq!(tree(r), before);
}

/// Runs A then B with the n-th failpoint armed; returns whether the point was reached.
fn run_with_failpoint(r: &Path, a: &Path, b: &Path, n: usize, action: &str) -> bool {
    let out = apply(r, Some(a), b).env("MCO_FAILPOINT", format!("{n}:{action}")).output().unwrap();
    if out.status.success() {
        return false;
    }
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(&format!("failpoint {n} (")), "{n}:{action}: {err}");
    true
}

#[test]
fn a_failure_at_any_point_rolls_back_to_the_identical_old_state() {
    let cfg = tempfile::tempdir().unwrap();
    let (a, b) = (write_mc(cfg.path(), &config_a()), write_mc(cfg.path(), &config_b()));
    let mut points = 0;
    for n in 1.. {
        let node = node_root();
        let r = node.path();
        apply(r, None, &a).assert().success();
        let before = tree(r);
        if !run_with_failpoint(r, &a, &b, n, "error") {
            break;
        }
        assert_eq!(tree(r), before, "failpoint {n}");
        validate(r, &a).success();
        points = n;
    }
    assert!(points >= 10, "only {points} failpoints");
}

#[test]
fn a_crash_at_any_point_converges_on_the_next_run() {
    let cfg = tempfile::tempdir().unwrap();
    let (a, b) = (write_mc(cfg.path(), &config_a()), write_mc(cfg.path(), &config_b()));
    let clean = node_root();
    apply(clean.path(), None, &a).assert().success();
    apply(clean.path(), Some(&a), &b).assert().success();
    let want = tree(clean.path());
    let (mut points, mut sealed_points) = (0, 0);
    for n in 1.. {
        let node = node_root();
        let r = node.path();
        apply(r, None, &a).assert().success();
        if !run_with_failpoint(r, &a, &b, n, "crash") {
            break;
        }
        assert!(exists(r, "/var/lib/machine-config-daemon/txn"), "failpoint {n}: the crash left its journal");
        let rerun = apply(r, Some(&a), &b).assert().success();
        let err = String::from_utf8(rerun.get_output().stderr.clone()).unwrap();
        // Once sealed for its reboot, the update stands and only the reboot is requested again.
        let sealed = err.contains("an interrupted update was complete: requested its reboot");
        assert!(sealed || err.contains("rolled back an interrupted update first"), "failpoint {n}: {err}");
        sealed_points += usize::from(sealed);
        let got = tree(r);
        let temps: Vec<&String> = got.keys().filter(|k| k.ends_with(".mcotmp")).collect();
        assert!(temps.is_empty(), "failpoint {n}: half-written files {temps:?}");
        assert_eq!(got, want, "failpoint {n}");
        points = n;
    }
    assert!(points >= 10, "only {points} failpoints");
    assert_eq!(sealed_points, 1, "the point between sealing and the reboot request");
}

/// A config of plain files and units.
fn files_mc(name: &str, files: &[(&str, &str)], units: Value) -> Value {
    let files: Vec<Value> =
        files.iter().map(|(p, d)| json!({"path": p, "mode": 420, "contents": {"source": data(d)}})).collect();
    mc(
        name,
        json!({"ignition": {"version": "3.5.0"}, "storage": {"files": files}, "systemd": {"units": units}}),
        json!({}),
    )
}

const REBOOT_REQUEST: &str = "/run/mco-reboot-requested";
const ACTIONS_LOG: &str = "/run/mco/actions.log";

/// Applies `base` to a fresh root and clears what its post-update actions left (its reboot).
fn node_on(cfg: &Path, base: &Value) -> tempfile::TempDir {
    let node = node_root();
    apply(node.path(), None, &write_mc(cfg, base)).assert().success();
    for p in [REBOOT_REQUEST, ACTIONS_LOG] {
        let _ = fs::remove_file(node.path().join(p.trim_start_matches('/')));
    }
    node
}

fn stdout(assert: &assert_cmd::assert::Assert) -> String {
    String::from_utf8(assert.get_output().stdout.clone()).unwrap()
}

#[test]
fn a_policy_json_change_reloads_crio_and_does_not_reboot() {
    let cfg = tempfile::tempdir().unwrap();
    let base = files_mc("rendered-base", &[("/etc/containers/policy.json", "{}"), ("/etc/motd", "hi")], json!([]));
    let node = node_on(cfg.path(), &base);
    let r = node.path();
    let new = files_mc(
        "rendered-new",
        &[("/etc/containers/policy.json", "{\"default\":[]}"), ("/etc/motd", "hi")],
        json!([]),
    );
    let out = apply(r, None, &write_mc(cfg.path(), &new)).env("MCO_LOG", "info").assert().success();
    assert!(
        stdout(&out).ends_with("actions: Reload crio.service\ndrain: no (no action disrupts workloads)\n"),
        "{}",
        stdout(&out)
    );
    assert_eq!(read(r, ACTIONS_LOG), "reload crio.service\n");
    let logged = String::from_utf8(out.get_output().stderr.clone()).unwrap();
    assert!(logged.contains("Performing post config change action: Reload for config rendered-new"), "{logged}");
    assert!(!exists(r, REBOOT_REQUEST), "no reboot");
    assert_eq!(read(r, "/etc/containers/policy.json"), "{\"default\":[]}");
}

#[test]
fn a_file_without_a_policy_reboots() {
    let cfg = tempfile::tempdir().unwrap();
    let base = files_mc("rendered-base", &[("/etc/motd", "hi")], json!([]));
    let node = node_on(cfg.path(), &base);
    let r = node.path();
    let new = files_mc("rendered-motd", &[("/etc/motd", "hello")], json!([]));
    let out = apply(r, None, &write_mc(cfg.path(), &new)).assert().success();
    assert!(
        stdout(&out).ends_with("actions: Reboot\ndrain: yes (the actions reboot or drain the node)\n"),
        "{}",
        stdout(&out)
    );
    assert_eq!(read(r, REBOOT_REQUEST), "Node will reboot into config rendered-motd\n");
    assert!(!exists(r, ACTIONS_LOG), "no service action");
    assert!(read(r, "/etc/machine-config-daemon/currentconfig").contains("rendered-motd"));
}

fn policies_file(dir: &Path, service: &str) -> PathBuf {
    let configuration = json!({"apiVersion": "operator.openshift.io/v1", "kind": "MachineConfiguration",
        "metadata": {"name": "cluster"},
        "spec": {"nodeDisruptionPolicy": {"files": [{"path": "/etc/chrony.conf",
            "actions": [{"type": "Restart", "restart": {"serviceName": service}}]}]}}});
    let path = dir.join(format!("policies-{service}.yaml"));
    fs::write(&path, serde_json::to_string(&configuration).unwrap()).unwrap();
    path
}

#[test]
fn a_user_policy_restarts_chronyd_instead_of_rebooting() {
    let cfg = tempfile::tempdir().unwrap();
    let base = files_mc("rendered-base", &[("/etc/chrony.conf", "server a iburst\n")], json!([]));
    let new =
        write_mc(cfg.path(), &files_mc("rendered-chrony", &[("/etc/chrony.conf", "server b iburst\n")], json!([])));

    let node = node_on(cfg.path(), &base);
    let r = node.path();
    let out =
        apply(r, None, &new).arg("--policies").arg(policies_file(cfg.path(), "chronyd.service")).assert().success();
    assert!(stdout(&out).contains("actions: Restart chronyd.service\n"), "{}", stdout(&out));
    assert_eq!(read(r, ACTIONS_LOG), "restart chronyd.service\n");
    assert!(!exists(r, REBOOT_REQUEST));

    // The same change under the default policies reboots.
    let node = node_on(cfg.path(), &base);
    apply(node.path(), None, &new).assert().success();
    assert!(exists(node.path(), REBOOT_REQUEST));
    assert!(!exists(node.path(), ACTIONS_LOG));
}

#[test]
fn a_failing_action_rolls_the_update_back() {
    let cfg = tempfile::tempdir().unwrap();
    let base = files_mc("rendered-base", &[("/etc/chrony.conf", "server a iburst\n")], json!([]));
    let node = node_on(cfg.path(), &base);
    let r = node.path();
    let before = tree(r);
    let new =
        write_mc(cfg.path(), &files_mc("rendered-chrony", &[("/etc/chrony.conf", "server b iburst\n")], json!([])));
    let out = apply(r, None, &new).arg("--policies").arg(policies_file(cfg.path(), "missing.service")).assert().code(1);
    let err = String::from_utf8(out.get_output().stderr.clone()).unwrap();
    assert!(
        err.contains("state: Degraded\nreason: could not apply update: restarting missing.service service failed: Unit missing.service not found."),
        "{err}"
    );
    assert_eq!(tree(r), before, "files and the recorded config are rolled back");
    validate(r, &write_mc(cfg.path(), &base)).success();
}

#[test]
fn first_boot_rules_reboot_for_units() {
    let cfg = tempfile::tempdir().unwrap();
    let base = files_mc("rendered-base", &[], json!([]));
    let unit = json!([{"name": "iri-registry.service", "contents": "[Service]\nExecStart=/bin/true\n"}]);
    let new = write_mc(cfg.path(), &files_mc("rendered-unit", &[], unit));

    let node = node_on(cfg.path(), &base);
    let out = apply(node.path(), None, &new).arg("--firstboot").assert().success();
    assert!(stdout(&out).ends_with("actions: Reboot\ndrain: yes (the node reboots)\n"), "{}", stdout(&out));
    assert_eq!(read(node.path(), REBOOT_REQUEST), "Node will reboot into config rendered-unit\n");

    // In the cluster this unit has a policy: reload systemd and restart it, no reboot.
    let node = node_on(cfg.path(), &base);
    apply(node.path(), None, &new).assert().success();
    assert_eq!(read(node.path(), ACTIONS_LOG), "daemon-reload\nrestart iri-registry.service\n");
    assert!(!exists(node.path(), REBOOT_REQUEST));
}

/// OS images in an `oci:` directory: (boot image, pool image) as osImageURLs.
fn oci_images(dir: &Path) -> (String, String) {
    (oci_image(dir, "1"), oci_image(dir, "2"))
}

/// An OS image of `version` (its commit version, the build a sysroot installed from it reports).
fn oci_image(dir: &Path, version: &str) -> String {
    let repo = dir.join("repo");
    let tree = dir.join(format!("tree-{version}"));
    let spec = mco_os::tree::TreeSpec { kernel_version: "6.8.1-1.mco.x86_64".into(), version_id: version.to_string() };
    mco_os::tree::write_tree(&tree, &spec).unwrap();
    mco_os::tree::commit(&repo, "mco/os", &tree, version, &BTreeMap::new()).unwrap();
    let image = format!("oci:{}:{version}", dir.join("oci").display());
    mco_os::block_on(mco_os::image::encapsulate(&repo, "mco/os", &image)).unwrap().unwrap();
    image
}

/// A sysroot in a temporary directory, removed with [`mco_os::sysroot::remove`] (libostree makes
/// deployments immutable).
struct TempSysroot(tempfile::TempDir);

impl TempSysroot {
    fn new() -> Self {
        TempSysroot(tempfile::Builder::new().prefix("mco-sysroot-").tempdir_in("/dev/shm").unwrap())
    }

    fn path(&self) -> &Path {
        self.0.path()
    }
}

impl Drop for TempSysroot {
    fn drop(&mut self) {
        mco_os::sysroot::remove(self.0.path()).unwrap();
    }
}

/// A node root with Ignition's leftovers for `encapsulated`, and a sysroot with `boot_image`
/// installed by `mco image install`.
fn first_boot_node(boot_image: &str, encapsulated: &Value) -> (tempfile::TempDir, TempSysroot) {
    let node = node_root();
    let r = node.path();
    fs::write(r.join("etc/ignition-machine-config-encapsulated.json"), encapsulated.to_string()).unwrap();
    fs::create_dir_all(r.join("etc/mco")).unwrap();
    fs::write(r.join("etc/mco/pool.conf"), "pool\n").unwrap();
    let sysroot = TempSysroot::new();
    mco()
        .args(["image", "install", "--image", boot_image, "--karg", "root=UUID=1", "--sysroot"])
        .arg(sysroot.path())
        .assert()
        .success();
    (node, sysroot)
}

fn firstboot(root: &Path, sysroot: &Path) -> Command {
    let mut cmd = mco();
    cmd.args(["daemon", "firstboot", "--root"]).arg(root).arg("--sysroot").arg(sysroot);
    cmd
}

fn image_status(sysroot: &Path) -> String {
    stdout(&mco().args(["image", "status", "--sysroot"]).arg(sysroot).assert().success())
}

/// The deployments by image and kernel arguments (each import writes its own merge commit).
fn deployments(sysroot: &Path) -> Vec<String> {
    let status = mco_os::sysroot::status(sysroot, &mco_os::sysroot::default_cmdline(sysroot)).unwrap();
    let pending = status.pending().len();
    status
        .deployments
        .iter()
        .map(|d| format!("{} {:?} {:?} pending={}", d.index, d.image, d.kargs, d.index < pending))
        .collect()
}

#[test]
fn firstboot_on_a_sysroot_pivots_and_a_crash_at_any_point_converges() {
    let images = tempfile::Builder::new().prefix("mco-images-").tempdir_in("/dev/shm").unwrap();
    let (boot_image, pool_image) = oci_images(images.path());
    let mut pool = files_mc("rendered-worker-1", &[("/etc/mco/pool.conf", "pool\n")], json!([]));
    pool["spec"]["osImageURL"] = json!(pool_image);
    pool["spec"]["kernelArguments"] = json!(["nosmt"]);

    let (clean, clean_sysroot) = first_boot_node(&boot_image, &pool);
    let out = firstboot(clean.path(), clean_sysroot.path()).assert().success();
    assert!(stdout(&out).contains("applied rendered-worker-1"), "{}", stdout(&out));
    let status = image_status(clean_sysroot.path());
    assert!(status.contains(&format!("image: {pool_image}")) && status.contains("(staged)"), "{status}");
    assert!(status.contains("kargs: root=UUID=1 nosmt"), "{status}");
    let (want_root, want_os) = (tree(clean.path()), deployments(clean_sysroot.path()));
    assert!(want_root.contains_key("etc/ignition-machine-config-encapsulated.json.bak"));
    assert!(!want_root.contains_key("etc/ignition-machine-config-encapsulated.json"));
    assert!(want_root.contains_key(REBOOT_REQUEST.trim_start_matches('/')));
    // The next boot runs the pool's image; the first boot is done.
    fs::remove_file(clean.path().join(REBOOT_REQUEST.trim_start_matches('/'))).unwrap();
    mco().args(["image", "boot", "--sysroot"]).arg(clean_sysroot.path()).assert().success();
    let status = image_status(clean_sysroot.path());
    assert!(status.starts_with("* mco ") && status.contains(&format!("image: {pool_image}")), "{status}");
    let again = firstboot(clean.path(), clean_sysroot.path()).assert().success();
    assert!(stdout(&again).contains("not a first boot"), "{}", stdout(&again));

    let mut points = 0;
    for n in 1.. {
        let (node, sysroot) = first_boot_node(&boot_image, &pool);
        let (r, s) = (node.path(), sysroot.path());
        let out = firstboot(r, s).env("MCO_FAILPOINT", format!("{n}:crash")).output().unwrap();
        if out.status.success() {
            break;
        }
        assert!(String::from_utf8_lossy(&out.stderr).contains(&format!("failpoint {n} (")), "failpoint {n}");
        firstboot(r, s).assert().success();
        let got = tree(r);
        let temps: Vec<&String> = got.keys().filter(|k| k.ends_with(".mcotmp")).collect();
        assert!(temps.is_empty(), "failpoint {n}: half-written files {temps:?}");
        assert_eq!(got, want_root, "failpoint {n}");
        assert_eq!(deployments(s), want_os, "failpoint {n}");
        points = n;
    }
    assert!(points >= 4, "only {points} failpoints");
}

#[test]
fn firstboot_refuses_a_boot_image_too_old_for_skew_enforcement() {
    let images = tempfile::Builder::new().prefix("mco-images-").tempdir_in("/dev/shm").unwrap();
    let (old, current) =
        (oci_image(images.path(), "412.86.202301010000-0"), oci_image(images.path(), "9.6.20260101-0"));
    let mut pool = files_mc("rendered-worker-1", &[("/etc/mco/pool.conf", "pool\n")], json!([]));
    pool["spec"]["osImageURL"] = json!(oci_image(images.path(), "9.6.20261101-0"));
    // What the server serves with the config when the cluster enforces boot image skew.
    let served = |boot_image: &str| {
        let (node, sysroot) = first_boot_node(boot_image, &pool);
        let skew = node.path().join("etc/machine-config-daemon/boot-image-skew-enforcement.json");
        fs::create_dir_all(skew.parent().unwrap()).unwrap();
        fs::write(&skew, r#"{"mode":"Manual","manual":{"mode":"RHCOSVersion","rhcosVersion":"9.6.20260101-0"}}"#)
            .unwrap();
        (node, sysroot)
    };
    let issue = "etc/issue.d/mco-boot-image-skew.issue";

    // Too old: refused with the reason on the console; nothing else changes.
    let (node, sysroot) = served(&old);
    let (root_before, os_before) = (tree(node.path()), deployments(sysroot.path()));
    let out = firstboot(node.path(), sysroot.path()).assert().code(1);
    let reason = "boot image is too old: RHCOS boot image version 412.86.202301010000-0(RHEL version: 8.6) is below \
                  the minimum required RHEL version 9.2";
    let said = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    assert!(said.contains(&format!("refused to pivot to rendered-worker-1: {reason}")), "{said}");
    let mut root_after = tree(node.path());
    let console = root_after.remove(issue).unwrap_or_else(|| panic!("no {issue}"));
    assert!(console.contains(&format!("This machine was not provisioned: {reason}")), "{console}");
    root_after.remove("etc/issue.d");
    assert_eq!(root_after, root_before);
    assert_eq!(deployments(sysroot.path()), os_before);
    // Without the aleph file the boot image cannot be judged: refused, naming the file.
    fs::remove_file(sysroot.path().join(mco_os::aleph::ALEPH_FILE)).unwrap();
    let out = firstboot(node.path(), sysroot.path()).assert().code(1);
    let said = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    assert!(said.contains(".coreos-aleph-version.json does not exist"), "{said}");
    assert_eq!(deployments(sysroot.path()), os_before);

    // A current boot image pivots.
    let (node, sysroot) = served(&current);
    let out = firstboot(node.path(), sysroot.path()).assert().success();
    assert!(stdout(&out).contains("applied rendered-worker-1"), "{}", stdout(&out));
    assert!(!node.path().join(issue).exists());
    assert!(image_status(sysroot.path()).contains("(staged)"));
}

#[test]
fn sysroot_flags_are_checked() {
    let node = node_root();
    let out = mco()
        .args(["daemon", "firstboot", "--os-backend", "rpm-ostree", "--sysroot", "/nonexistent", "--root"])
        .arg(node.path())
        .assert()
        .code(2);
    assert!(String::from_utf8_lossy(&out.get_output().stderr).contains("cannot be used with"));
    let out = mco().args(["daemon", "firstboot", "--cmdline", "/x", "--root"]).arg(node.path()).assert().code(2);
    assert!(String::from_utf8_lossy(&out.get_output().stderr).contains("--sysroot"));
    // No encapsulated config: not a first boot, nothing to do even without a sysroot.
    let out = mco().args(["daemon", "firstboot", "--root"]).arg(node.path()).assert().success();
    assert!(stdout(&out).contains("not a first boot"));
}
