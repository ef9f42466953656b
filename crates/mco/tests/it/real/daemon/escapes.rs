//! Hostile roots and configs: links the root holds that point out of it (absolute and relative,
//! at every depth, on every path the daemon writes), and a failed apply that must not wedge
//! the node.

use std::os::unix::fs::symlink;

use super::*;

/// What the links below point at, outside the root: checked entry by entry after every apply.
fn sentinel(outer: &Path) -> PathBuf {
    let s = outer.join("sentinel");
    for d in ["mcd/orig/etc", "varlib/txn", "run", "usrlocal/bin", "home/core/.ssh", "wants"] {
        fs::create_dir_all(s.join(d)).unwrap();
    }
    for f in ["plain.conf", "zipped.conf", "usrlocal/bin/tool", "mcd/currentconfig", "run/mco-reboot-requested"] {
        fs::write(s.join(f), "sentinel\n").unwrap();
    }
    fs::write(s.join("home/core/.ssh/authorized_keys"), "sentinel\n").unwrap();
    s
}

#[test]
fn nothing_a_config_writes_or_removes_leaves_the_root() {
    let outer = tempfile::tempdir().unwrap();
    let r = outer.path().join("root");
    fs::create_dir(&r).unwrap();
    populate_node_root(&r);
    let sentinel = sentinel(outer.path());
    let before = tree(&sentinel);
    // Links already in the root, on every path the daemon writes: absolute ones name the
    // sentinel by its host path, relative ones climb out of the root to it (read from the
    // host); inside the root both stay inside.
    let abs = |p: &str| sentinel.join(p);
    fs::remove_dir_all(r.join("home")).unwrap();
    fs::create_dir_all(r.join("var/lib")).unwrap();
    fs::create_dir_all(r.join("etc/systemd/system")).unwrap();
    fs::remove_dir_all(r.join("run")).unwrap();
    let links: [(&str, PathBuf); 7] = [
        ("etc/mco", "../../sentinel".into()),
        ("etc/machine-config-daemon", abs("mcd")),
        ("var/lib/machine-config-daemon", "../../../sentinel/varlib".into()),
        ("run", abs("run")),
        ("usr/local", "../../sentinel/usrlocal".into()),
        ("etc/systemd/system/multi-user.target.wants", "../../../../sentinel/wants".into()),
        ("home", abs("home")),
    ];
    for (at, to) in &links {
        symlink(to, r.join(at)).unwrap();
    }
    let cfg = tempfile::tempdir().unwrap();
    let (a, b) = (write_mc(cfg.path(), &config_a()), write_mc(cfg.path(), &config_b()));
    let empty =
        write_mc(cfg.path(), &mc("rendered-worker-empty", json!({"ignition": {"version": "3.5.0"}}), json!({})));

    apply(&r, None, &a).assert().success();
    assert_eq!(tree(&sentinel), before, "config A wrote outside the root");
    // Inside the root, where the node itself (chrooted) finds them.
    let in_root = |p: &Path| r.join(p.strip_prefix("/").unwrap_or(p));
    let read_in = |p: PathBuf| fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    assert_eq!(read_in(r.join("sentinel/plain.conf")), "plain a\n");
    assert_eq!(read_in(r.join("sentinel/usrlocal/bin/tool")), "#!/bin/sh\necho a\n");
    assert_eq!(read_in(in_root(&abs("mcd/orig/etc/chrony.conf.mcdorig"))), "pool 2.rhel.pool.ntp.org iburst\n");
    assert_eq!(read_in(in_root(&abs("run/mco-reboot-requested"))), "Node will reboot into config rendered-worker-a\n");
    assert_eq!(read_in(in_root(&abs("home/core/.ssh/authorized_keys.d/ignition"))), "ssh-ed25519 AAAA a@x\n");
    assert_eq!(
        fs::read_link(r.join("sentinel/wants/mco-a.service")).unwrap(),
        Path::new("/etc/systemd/system/mco-a.service")
    );
    validate(&r, &a).success().stdout("node matches rendered-worker-a\n");

    // Removals and restores go through the same links.
    apply(&r, Some(&a), &b).assert().success();
    assert_eq!(tree(&sentinel), before, "config B wrote or removed outside the root");
    assert!(!r.join("sentinel/wants/mco-a.service").exists(), "disabled inside the root");
    apply(&r, Some(&b), &empty).assert().success();
    assert_eq!(tree(&sentinel), before, "the empty config removed outside the root");
    assert!(!r.join("sentinel/plain.conf").exists() && !r.join("sentinel/usrlocal/bin/tool").exists());
    for (at, to) in &links {
        assert_eq!(&fs::read_link(r.join(at)).unwrap(), to, "the root's own link {at} is kept");
    }
}

#[test]
fn a_link_loop_in_the_root_is_refused_with_its_name() {
    let node = node_root();
    let r = node.path();
    symlink("/etc/mco", r.join("etc/mco")).unwrap();
    let before = tree(r);
    let cfg = tempfile::tempdir().unwrap();
    let a = write_mc(cfg.path(), &config_a());
    let out = apply(r, None, &a).assert().code(1);
    let err = String::from_utf8(out.get_output().stderr.clone()).unwrap();
    assert!(err.contains("Resolving /etc/mco/") && err.contains("more than 40 symbolic links"), "{err}");
    assert_eq!(tree(r), before, "nothing written");
}

/// `base` renamed, with one more file under a path that is a regular file: it fails after the
/// update started writing.
fn under_a_regular_file(mut base: Value) -> Value {
    base["metadata"]["name"] = json!("rendered-worker-bad");
    base["spec"]["config"]["storage"]["files"]
        .as_array_mut()
        .unwrap()
        .push(json!({"path": "/etc/chrony.conf/sub.conf", "contents": {"source": data("x\n")}}));
    base
}

/// Applying `bad` over `current` fails for the file, rolls back completely (the tree is `before`
/// again) and names no failed rollback.
fn fails_cleanly(r: &Path, current: &Path, bad: &Path, before: &BTreeMap<String, String>, attempt: &str) {
    let out = apply(r, Some(current), bad).assert().code(1);
    let err = String::from_utf8(out.get_output().stderr.clone()).unwrap();
    assert!(err.contains("/etc/chrony.conf is not a directory"), "{attempt}: {err}");
    assert!(!err.contains("rolling back also failed"), "{attempt}: {err}");
    assert_eq!(&tree(r), before, "{attempt}: rolled back to the identical old state");
}

#[test]
fn a_failed_apply_never_wedges_the_node() {
    let node = node_root();
    let r = node.path();
    let cfg = tempfile::tempdir().unwrap();
    let (a, b) = (write_mc(cfg.path(), &config_a()), write_mc(cfg.path(), &config_b()));
    apply(r, None, &a).assert().success();
    let before = tree(r);
    let bad = write_mc(cfg.path(), &under_a_regular_file(config_a()));
    for attempt in ["first", "second"] {
        fails_cleanly(r, &a, &bad, &before, attempt);
    }
    // The same config as before, and a new one, apply.
    apply(r, Some(&a), &a).assert().success();
    apply(r, Some(&a), &b).assert().success();
    validate(r, &b).success();
}

/// A crash at every point of a failing apply and of its rollback: the next run of the same bad
/// config rolls back to the identical old state and fails as before, and a good config applies.
#[test]
fn a_crash_anywhere_in_a_failing_apply_or_its_rollback_converges() {
    let cfg = tempfile::tempdir().unwrap();
    let (a, b) = (write_mc(cfg.path(), &config_a()), write_mc(cfg.path(), &config_b()));
    let bad = write_mc(cfg.path(), &under_a_regular_file(config_b()));
    let clean = node_root();
    apply(clean.path(), None, &a).assert().success();
    apply(clean.path(), Some(&a), &b).assert().success();
    let want = tree(clean.path());
    let mut points = 0;
    for n in 1.. {
        let node = node_root();
        let r = node.path();
        apply(r, None, &a).assert().success();
        let before = tree(r);
        let out = apply(r, Some(&a), &bad).env("MCO_FAILPOINT", format!("{n}:crash")).output().unwrap();
        assert!(!out.status.success(), "failpoint {n}: the bad config applied");
        if !String::from_utf8_lossy(&out.stderr).contains(&format!("failpoint {n} (")) {
            break;
        }
        fails_cleanly(r, &a, &bad, &before, &format!("failpoint {n}"));
        apply(r, Some(&a), &b).assert().success();
        assert_eq!(tree(r), want, "failpoint {n}: the good config after the crash");
        points = n;
    }
    assert!(points >= 15, "only {points} failpoints in the failing apply and its rollback");
}
