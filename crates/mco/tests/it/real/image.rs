//! `mco image` run as a user runs it, against the real libostree, ostree-ext, skopeo and a real
//! OCI registry (docker-registry) on loopback.

use std::path::{Path, PathBuf};
use std::process::Command as StdCommand;

use crate::common;

use common::{mco, stderr, stdout};
use mco_os::registry::LocalRegistry;
use serde_json::Value;

const KVER: &str = "6.6.1-100.mco.x86_64";

fn skopeo_inspect(image: &str, env: &[(&str, &Path)]) -> Value {
    // skopeo 1.9 ignores CONTAINERS_REGISTRIES_CONF: hand it the file as a flag.
    let mut cmd = StdCommand::new("skopeo");
    for (_, conf) in env.iter().filter(|(k, _)| *k == "CONTAINERS_REGISTRIES_CONF") {
        cmd.arg("--registries-conf").arg(conf);
    }
    cmd.args(["inspect", image]);
    let out = cmd.output().unwrap();
    assert!(out.status.success(), "skopeo inspect {image}: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

/// `mco image test-tree` + `mco image commit`: returns the repo and the commit.
fn commit(tmp: &Path, version: &str) -> (PathBuf, String) {
    commit_with(tmp, version, |_| {})
}

/// [`commit`], with `prepare` adding to the tree before it is committed.
fn commit_with(tmp: &Path, version: &str, prepare: impl FnOnce(&Path)) -> (PathBuf, String) {
    let tree = tmp.join(format!("tree-{version}"));
    mco().args(["image", "test-tree", "--kernel", KVER, "--version-id", version]).arg(&tree).assert().success();
    prepare(&tree);
    let repo = tmp.join("repo");
    let assert = mco()
        .args(["image", "commit", "--ref", "mco/os", "--version", version, "--label", "io.mco.test=yes"])
        .arg("--repo")
        .arg(&repo)
        .arg("--tree")
        .arg(&tree)
        .assert()
        .success();
    let checksum = stdout(&assert).trim().to_string();
    assert_eq!(checksum.len(), 64, "{checksum}");
    (repo, checksum)
}

fn encapsulate(repo: &Path, to: &str, env: &[(&str, &Path)]) -> String {
    let mut cmd = mco();
    cmd.args(["image", "encapsulate", "--ref", "mco/os", "--to", to]).arg("--repo").arg(repo);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let assert = cmd.assert().success();
    stdout(&assert).trim().to_string()
}

fn inspect(image: &str, env: &[(&str, &Path)]) -> Value {
    let mut cmd = mco();
    cmd.args(["image", "inspect", "-o", "json", image]);
    for (k, v) in env {
        cmd.env(k, v);
    }
    serde_json::from_str(&stdout(&cmd.assert().success())).unwrap()
}

#[test]
fn commit_encapsulate_inspect_oci_dir() {
    let tmp = tempfile::tempdir().unwrap();
    let (repo, checksum) = commit(tmp.path(), "9.6.1");
    let image = format!("oci:{}:9.6.1", tmp.path().join("oci").display());
    let digest = encapsulate(&repo, &image, &[]);
    assert_eq!(skopeo_inspect(&image, &[])["Digest"], digest.as_str());

    let info = inspect(&image, &[]);
    assert_eq!(info["digest"], digest.as_str());
    assert_eq!(info["commit"], checksum.as_str());
    assert_eq!(info["version"], "9.6.1");
    assert_eq!(info["kernel"], KVER);
    assert_eq!(info["labels"]["io.mco.test"], "yes");
    assert_eq!(info["labels"]["ostree.bootable"], "true");
    let files: Vec<&str> = info["files"].as_array().unwrap().iter().map(|f| f.as_str().unwrap()).collect();
    assert!(files.iter().any(|f| f.ends_with(&format!(" /usr/lib/modules/{KVER}/vmlinuz"))), "{files:?}");
    assert!(
        files.iter().any(|f| f.starts_with("l00777 ") && f.ends_with("/usr/etc/os-release -> ../usr/lib/os-release"))
    );

    // The text form carries the same facts for a human.
    let text = stdout(&mco().args(["image", "inspect", &image]).assert().success());
    assert!(text.contains(&format!("Commit:  {checksum}\n")), "{text}");
    assert!(text.contains(&format!("Kernel:  {KVER}\n")), "{text}");
}

#[test]
fn bad_input_exits_1_with_the_reason() {
    let tmp = tempfile::tempdir().unwrap();
    let (repo, _) = commit(tmp.path(), "1");
    let untagged = format!("oci:{}", tmp.path().join("oci").display());
    let assert = mco()
        .args(["image", "encapsulate", "--ref", "mco/os", "--to", &untagged])
        .arg("--repo")
        .arg(&repo)
        .assert()
        .code(1);
    assert!(stderr(&assert).contains("a destination needs a tag"), "{}", stderr(&assert));
    let assert = mco().args(["image", "inspect", "quay.io/x/y:1"]).assert().code(1);
    assert!(stderr(&assert).contains("transport must be oci:DIR[:TAG] or docker://"), "{}", stderr(&assert));
    let assert = mco()
        .args(["image", "test-tree", "--kernel", "a/b", "--version-id", "1"])
        .arg(tmp.path().join("t"))
        .assert()
        .code(1);
    assert!(stderr(&assert).contains("kernel version \"a/b\""), "{}", stderr(&assert));
}

#[test]
fn encapsulate_to_a_registry_and_inspect_by_tag_and_digest() {
    let tmp = tempfile::tempdir().unwrap();
    let registry = LocalRegistry::start(&tmp.path().join("registry")).unwrap();
    let env = [("CONTAINERS_REGISTRIES_CONF", registry.registries_conf.as_path())];
    let (repo, checksum) = commit(tmp.path(), "2.0");
    let image = format!("docker://127.0.0.1:{}/mco/os:2.0", registry.port);
    let digest = encapsulate(&repo, &image, &env);
    assert_eq!(skopeo_inspect(&image, &env)["Digest"], digest.as_str());

    let by_tag = inspect(&image, &env);
    assert_eq!(by_tag["digest"], digest.as_str());
    assert_eq!(by_tag["commit"], checksum.as_str());
    let pinned = format!("docker://127.0.0.1:{}/mco/os@{digest}", registry.port);
    assert_eq!(by_tag["pinned"], pinned.as_str());
    // The pinned reference names the same image.
    let by_digest = inspect(&pinned, &env);
    assert_eq!(by_digest["commit"], checksum.as_str());
    assert_eq!(by_digest["digest"], digest.as_str());
}

#[test]
fn build_a_derived_image_from_an_encapsulated_one() {
    let tmp = tempfile::tempdir().unwrap();
    let (repo, checksum) = commit(tmp.path(), "3.0");
    let base = format!("oci:{}:base", tmp.path().join("oci").display());
    encapsulate(&repo, &base, &[]);
    let extra = tmp.path().join("extra");
    std::fs::create_dir_all(&extra).unwrap();
    std::fs::write(extra.join("policy.conf"), "x\n").unwrap();
    let derived = format!("oci:{}:derived", tmp.path().join("oci").display());
    let assert = mco()
        .args(["image", "build", "--from", &base, "--label", "io.mco.layer=1", "--to", &derived])
        .arg("--add")
        .arg(format!("{}:/usr/share/policy", extra.display()))
        .assert()
        .success();
    let digest = stdout(&assert).trim().to_string();
    assert_eq!(skopeo_inspect(&derived, &[])["Digest"], digest.as_str());
    let info = inspect(&derived, &[]);
    assert_eq!(info["commit"], checksum.as_str());
    assert_eq!(info["labels"]["io.mco.layer"], "1");
    let files: Vec<&str> = info["files"].as_array().unwrap().iter().map(|f| f.as_str().unwrap()).collect();
    assert!(files.contains(&"-00644 0 0      2 /usr/share/policy/policy.conf"), "{files:?}");

    let assert =
        mco().args(["image", "build", "--from", &base, "--add", "x:/var/lib/x", "--to", &derived]).assert().code(1);
    assert!(stderr(&assert).contains("under /usr or /etc"), "{}", stderr(&assert));
}

#[test]
fn build_an_image_from_a_containerfile() {
    let tmp = tempfile::tempdir().unwrap();
    let registry = LocalRegistry::start(&tmp.path().join("registry")).unwrap();
    let env = [("CONTAINERS_REGISTRIES_CONF", registry.registries_conf.as_path())];
    let (repo, checksum) = commit(tmp.path(), "3.1");
    encapsulate(&repo, &format!("docker://{}/mco/os:3.1", registry.host()), &env);
    let context = tmp.path().join("context");
    std::fs::create_dir_all(&context).unwrap();
    std::fs::write(context.join("policy.conf"), "x\n").unwrap();
    let containerfile = context.join("Containerfile");
    std::fs::write(
        &containerfile,
        format!(
            "FROM {}/mco/os:3.1\nARG NOTE=none\nCOPY policy.conf /usr/share/policy/\nLABEL io.mco.note=$NOTE\n",
            registry.host()
        ),
    )
    .unwrap();
    let derived = format!("docker://{}/mco/os:3.1-derived", registry.host());
    let assert = mco()
        .args(["image", "build", "--build-arg", "NOTE=from-arg", "--label", "io.mco.layer=1", "--to", &derived, "-f"])
        .arg(&containerfile)
        .arg(&context)
        .envs(env)
        .assert()
        .success();
    let digest = stdout(&assert).trim().to_string();
    assert_eq!(skopeo_inspect(&derived, &env)["Digest"], digest.as_str());
    let info = inspect(&derived, &env);
    assert_eq!(info["commit"], checksum.as_str());
    assert_eq!(info["labels"]["io.mco.note"], "from-arg");
    assert_eq!(info["labels"]["io.mco.layer"], "1");
    let files: Vec<&str> = info["files"].as_array().unwrap().iter().map(|f| f.as_str().unwrap()).collect();
    assert!(files.contains(&"-00644 0 0      2 /usr/share/policy/policy.conf"), "{files:?}");

    // A step that fails (this base has no shell) is reported with the step; nothing is pushed.
    std::fs::write(&containerfile, format!("FROM {}/mco/os:3.1\nRUN true\n", registry.host())).unwrap();
    let failed = format!("docker://{}/mco/os:3.1-failed", registry.host());
    let assert = mco().args(["image", "build", "--to", &failed, "-f"]).arg(&containerfile).envs(env).assert().failure();
    assert!(stderr(&assert).contains("building at STEP \"RUN true\""), "{}", stderr(&assert));
    let pushed = StdCommand::new("skopeo")
        .arg("--registries-conf")
        .arg(&registry.registries_conf)
        .args(["inspect", &failed])
        .output()
        .unwrap();
    assert!(!pushed.status.success(), "{failed} was pushed");
    assert!(String::from_utf8_lossy(&pushed.stderr).contains("manifest unknown"), "{pushed:?}");

    // A Containerfile and directories to add are two different builds.
    let assert =
        mco().args(["image", "build", "--from", &derived, "--to", &failed, "-f"]).arg(&containerfile).assert().code(2);
    assert!(stderr(&assert).contains("cannot be used with"), "{}", stderr(&assert));
}

/// A test OS tree gets a shell for `RUN` steps: Debian's static busybox as /usr/bin/sh, ...
fn add_busybox(tree: &Path) {
    let bin = tree.join("usr/bin");
    std::fs::copy("/bin/busybox", bin.join("busybox")).unwrap();
    for applet in ["sh", "test", "cp", "false"] {
        std::os::unix::fs::symlink("busybox", bin.join(applet)).unwrap();
    }
    std::os::unix::fs::symlink("usr/bin", tree.join("bin")).unwrap();
}

fn gzip(data: &[u8]) -> Vec<u8> {
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    std::io::Write::write_all(&mut gz, data).unwrap();
    gz.finish().unwrap()
}

/// The build pod's command: the rendered MachineConfig baked into the context, the
/// controller's Containerfile built (a RUN step reads a baked file) and pushed, the pushed image
/// by digest in the termination log.
#[test]
fn build_machine_os_bakes_the_config_and_reports_the_digest() {
    let tmp = tempfile::tempdir().unwrap();
    let registry = LocalRegistry::start(&tmp.path().join("registry")).unwrap();
    let env = [("CONTAINERS_REGISTRIES_CONF", registry.registries_conf.as_path())];
    let (repo, _) = commit_with(tmp.path(), "5.0", add_busybox);
    let base = format!("{}/mco/os:5.0", registry.host());
    encapsulate(&repo, &format!("docker://{base}"), &env);

    let unit = "[Service]\nExecStart=/bin/true\n[Install]\nWantedBy=multi-user.target\n";
    let mc = serde_json::json!({
        "apiVersion": "machineconfiguration.openshift.io/v1",
        "kind": "MachineConfig",
        "metadata": {"name": "rendered-worker-abc"},
        "spec": {"config": {
            "ignition": {"version": "3.5.0"},
            "storage": {"files": [{"path": "/etc/hello", "mode": 0o644, "contents": {"source": "data:,hello%0A"}}]},
            "systemd": {"units": [{"name": "hello.service", "enabled": true, "contents": unit}]},
        }},
    });
    let mc_file = tmp.path().join("machineconfig.json.gz");
    std::fs::write(&mc_file, gzip(mc.to_string().as_bytes())).unwrap();
    let containerfile = tmp.path().join("Containerfile");
    let write_containerfile = |admin: &str| {
        let text = format!(
            "FROM {base} AS configs\nCOPY ./machineconfig/ /\nLABEL machineconfig=rendered-worker-abc\n\
             LABEL machineconfigpool=worker\nLABEL baseOSContainerImage={base}\n\n{admin}\n"
        );
        std::fs::write(&containerfile, text).unwrap();
    };
    // Credentials: the pull file for another registry (unused), the push file missing (skipped).
    let creds = tmp.path().join("pull-creds.json");
    std::fs::write(&creds, r#"{"auths": {"quay.example.com": {"auth": "dTpw"}}}"#).unwrap();
    let termination_log = tmp.path().join("termination-log");
    let build = |to: &str, machine_config: &Path| {
        let mut cmd = mco();
        cmd.args(["image", "build-machine-os", "--to", to, "--machine-config"])
            .arg(machine_config)
            .arg("--containerfile")
            .arg(&containerfile)
            .arg("--pull-authfile")
            .arg(&creds)
            .arg("--push-authfile")
            .arg(tmp.path().join("push-creds-missing.json"))
            .arg("--termination-log")
            .arg(&termination_log)
            .env("MCO_LOG", "info")
            .envs(env);
        cmd.assert()
    };
    let log = || std::fs::read_to_string(&termination_log).unwrap();

    write_containerfile("RUN test -f /etc/hello && cp /etc/hello /etc/hello-copy");
    let assert = build(&format!("{}/mco/os:5.0-worker", registry.host()), &mc_file).success();
    let pushed = stdout(&assert).trim().to_string();
    assert!(pushed.starts_with(&format!("{}/mco/os@sha256:", registry.host())), "{pushed}");
    assert_eq!(log(), pushed);
    // buildah's output is in the log (`kubectl logs` of the build pod).
    assert!(stderr(&assert).contains("STEP 6/6: RUN test -f /etc/hello"), "{}", stderr(&assert));
    let info = inspect(&format!("docker://{pushed}"), &env);
    assert_eq!(info["labels"]["machineconfig"], "rendered-worker-abc");
    assert_eq!(info["labels"]["machineconfigpool"], "worker");
    assert_eq!(info["labels"]["baseOSContainerImage"], base.as_str());
    let files: Vec<&str> = info["files"].as_array().unwrap().iter().map(|f| f.as_str().unwrap()).collect();
    // ostree-ext keeps the image's /etc as /usr/etc.
    for want in [
        " /usr/etc/hello",
        " /usr/etc/hello-copy",
        " /usr/etc/systemd/system/hello.service",
        " /usr/etc/systemd/system/multi-user.target.wants/hello.service -> /etc/systemd/system/hello.service",
    ] {
        assert!(files.iter().any(|f| f.ends_with(want)), "{want} in {files:?}");
    }
    // The daemon's own record of a node is not baked into an image.
    assert!(!files.iter().any(|f| f.contains("/machine-config-daemon")), "{files:?}");

    // A failing step: the termination log names it, nothing is pushed.
    write_containerfile("RUN false");
    let failed = format!("{}/mco/os:5.0-failed", registry.host());
    let assert = build(&failed, &mc_file).failure();
    assert!(log().contains("building at STEP \"RUN false\""), "{}", log());
    assert!(stderr(&assert).contains("building at STEP \"RUN false\""), "{}", stderr(&assert));
    let pushed = StdCommand::new("skopeo")
        .arg("--registries-conf")
        .arg(&registry.registries_conf)
        .args(["inspect", &format!("docker://{failed}")])
        .output()
        .unwrap();
    assert!(!pushed.status.success(), "{failed} was pushed");

    // A MachineConfig file that is not gzip, or gzip of something else, is refused by name.
    let plain = tmp.path().join("plain.json");
    std::fs::write(&plain, mc.to_string()).unwrap();
    let pod = tmp.path().join("pod.json.gz");
    std::fs::write(&pod, gzip(br#"{"kind": "Pod"}"#)).unwrap();
    for (file, reason) in [(&plain, "not a gzipped MachineConfig"), (&pod, "not a MachineConfig: kind is Pod")] {
        let assert = build(&failed, file).code(1);
        let want = format!("{}: {reason}", file.display());
        assert!(stderr(&assert).contains(&want), "{}", stderr(&assert));
        assert!(log().contains(&want), "{}", log());
    }
}

/// htpasswd lines for docker-registry (bcrypt only; cost 4, a test password), and the `auth`
/// value (base64 of `USER:PASSWORD`) of a containers-auth.json entry with the right and a wrong
/// password.
const PULLER: (&str, &str, &str) = (
    "puller:$2b$04$wO1oV49V8GKxAzYwET3csO68HsS93mmLg2QafN8lUGhW/DP1I9Itu\n",
    "cHVsbGVyOnB1bGwtcHc=", // puller:pull-pw
    "cHVsbGVyOndyb25n",     // puller:wrong
);
const PUSHER: (&str, &str, &str) = (
    "pusher:$2b$04$1g1id.SRU1WhKUXDI3ahL.cfLcG7I9GWxR9I63Qq57BwQru87xhUy\n",
    "cHVzaGVyOnB1c2gtcHc=", // pusher:push-pw
    "cHVzaGVyOndyb25n",     // pusher:wrong
);

/// The build pod's credentials, as upstream uses them: the base image pull secret for the build's
/// pulls, the push secret for the push. The base is in registry A (user `puller`), the image goes
/// to registry B (user `pusher`); the push secret's entry for A is wrong, so a pull with the push
/// credentials (or with both files merged, the push file winning) would fail.
#[test]
fn build_machine_os_pulls_with_the_pull_credentials_and_pushes_with_the_push_credentials() {
    let tmp = tempfile::tempdir().unwrap();
    let a = LocalRegistry::start_authenticated(&tmp.path().join("registry-a"), PULLER.0).unwrap();
    let b = LocalRegistry::start_authenticated(&tmp.path().join("registry-b"), PUSHER.0).unwrap();
    let (a_host, b_host) = (a.host(), b.host());
    let registries_conf = tmp.path().join("registries.conf");
    let both = [&a, &b].map(|r| std::fs::read_to_string(&r.registries_conf).unwrap()).join("\n");
    std::fs::write(&registries_conf, both).unwrap();
    // `skopeo SUBCOMMAND CREDENTIALS ARGS...`.
    let skopeo = |subcommand: &str, creds: &str, args: &[&str]| {
        let mut cmd = StdCommand::new("skopeo");
        cmd.arg("--registries-conf").arg(&registries_conf).args([subcommand, creds]).args(args).output().unwrap()
    };
    // The base image, pushed to A with A's credentials.
    let (repo, _) = commit(tmp.path(), "6.0");
    let oci = format!("oci:{}:base", tmp.path().join("oci").display());
    encapsulate(&repo, &oci, &[]);
    let base = format!("{a_host}/mco/os:6.0");
    let copied = skopeo("copy", "--dest-creds=puller:pull-pw", &[&oci, &format!("docker://{base}")]);
    assert!(copied.status.success(), "{copied:?}");

    let mc = serde_json::json!({
        "apiVersion": "machineconfiguration.openshift.io/v1",
        "kind": "MachineConfig",
        "metadata": {"name": "rendered-worker-def"},
        "spec": {"config": {
            "ignition": {"version": "3.5.0"},
            "storage": {"files": [{"path": "/etc/hello", "mode": 0o644, "contents": {"source": "data:,hello%0A"}}]},
        }},
    });
    let mc_file = tmp.path().join("machineconfig.json.gz");
    std::fs::write(&mc_file, gzip(mc.to_string().as_bytes())).unwrap();
    let containerfile = tmp.path().join("Containerfile");
    std::fs::write(&containerfile, format!("FROM {base} AS configs\nCOPY ./machineconfig/ /\n")).unwrap();
    let auth_json = |name: &str, entries: &[(&str, &str)]| {
        let auths: serde_json::Map<String, Value> =
            entries.iter().map(|(host, auth)| (host.to_string(), serde_json::json!({ "auth": auth }))).collect();
        let path = tmp.path().join(name);
        std::fs::write(&path, serde_json::json!({ "auths": auths }).to_string()).unwrap();
        path
    };
    let pull_creds = auth_json("pull.json", &[(&a_host, PULLER.1)]);
    let push_creds = auth_json("push.json", &[(&a_host, PULLER.2), (&b_host, PUSHER.1)]);
    let wrong_push_creds = auth_json("push-wrong.json", &[(&b_host, PUSHER.2)]);
    let termination_log = tmp.path().join("termination-log");
    let build = |to: &str, push: Option<&Path>| {
        let mut cmd = mco();
        cmd.args(["image", "build-machine-os", "--to", to, "--machine-config"])
            .arg(&mc_file)
            .arg("--containerfile")
            .arg(&containerfile)
            .arg("--pull-authfile")
            .arg(&pull_creds)
            .arg("--termination-log")
            .arg(&termination_log)
            .env("CONTAINERS_REGISTRIES_CONF", &registries_conf);
        if let Some(push) = push {
            cmd.arg("--push-authfile").arg(push);
        }
        cmd.assert()
    };
    let log = || std::fs::read_to_string(&termination_log).unwrap();
    let in_b = |image: &str| skopeo("inspect", "--creds=pusher:push-pw", &[&format!("docker://{image}")]);

    let assert = build(&format!("{b_host}/mco/os:6.0-worker"), Some(&push_creds)).success();
    let pushed = stdout(&assert).trim().to_string();
    assert!(pushed.starts_with(&format!("{b_host}/mco/os@sha256:")), "{pushed}");
    assert_eq!(log(), pushed);
    let inspected = in_b(&pushed);
    assert!(inspected.status.success(), "{inspected:?}");
    let digest = serde_json::from_slice::<Value>(&inspected.stdout).unwrap()["Digest"].clone();
    assert!(pushed.ends_with(&format!("@{}", digest.as_str().unwrap())), "{pushed} {digest}");

    // B refuses a wrong password, and the pull credentials when there is no push file: the build
    // fails at the push, the termination log says why, nothing is pushed.
    for (tag, push) in [("wrong", Some(wrong_push_creds.as_path())), ("none", None)] {
        let to = format!("{b_host}/mco/os:6.0-{tag}");
        let assert = build(&to, push).failure();
        let log = log();
        assert!(log.contains("buildah push failed"), "{tag}: {log}");
        assert!(log.contains("unauthorized") || log.contains("authentication required"), "{tag}: {log}");
        assert!(stderr(&assert).contains("buildah push failed"), "{tag}: {}", stderr(&assert));
        let absent = in_b(&to);
        assert!(!absent.status.success(), "{to} was pushed");
        assert!(String::from_utf8_lossy(&absent.stderr).contains("manifest unknown"), "{absent:?}");
    }
}

#[test]
fn install_from_a_registry_by_digest_boot_and_status() {
    let tmp = tempfile::tempdir().unwrap();
    let registry = LocalRegistry::start(&tmp.path().join("registry")).unwrap();
    let env = [("CONTAINERS_REGISTRIES_CONF", registry.registries_conf.as_path())];
    let (repo, _) = commit(tmp.path(), "4.0");
    let digest = encapsulate(&repo, &format!("docker://{}/mco/os:4.0", registry.host()), &env);
    let sysroot = tempfile::Builder::new().prefix("mco-image-sysroot-").tempdir_in("/dev/shm").unwrap();
    let install = |image: &str| {
        let mut cmd = mco();
        cmd.args(["image", "install", "--image", image, "--karg", "root=UUID=7", "--karg", "rw", "--sysroot"])
            .arg(sysroot.path())
            .env("CONTAINERS_REGISTRIES_CONF", &registry.registries_conf);
        cmd.assert()
    };
    // Nodes run images by digest: a tag is refused before anything is written.
    let refused = install(&format!("{}/mco/os:4.0", registry.host())).code(1);
    assert!(stderr(&refused).contains("pinned by digest"), "{}", stderr(&refused));
    assert!(!sysroot.path().join("ostree").exists());

    let image = format!("{}/mco/os@{digest}", registry.host());
    install(&image).success();
    let cmdline = std::fs::read_to_string(sysroot.path().join(".mco-cmdline")).unwrap();
    assert!(cmdline.starts_with("root=UUID=7 rw ostree=/ostree/deploy/mco/deploy/"), "{cmdline}");
    let status = stdout(&mco().args(["image", "status", "--sysroot"]).arg(sysroot.path()).assert().success());
    // The deployed commit is ostree-ext's merge commit of the image, not the encapsulated one.
    assert!(status.starts_with("* mco ") && !status.contains("(staged)"), "{status}");
    assert!(status.contains(&format!("image: {image}\n")) && status.contains("kargs: root=UUID=7 rw\n"), "{status}");
    // Booting again changes nothing: the default deployment is the booted one.
    let line = stdout(&mco().args(["image", "boot", "--sysroot"]).arg(sysroot.path()).assert().success());
    assert_eq!(line, cmdline);
    let again = install(&image).code(1);
    assert!(stderr(&again).contains("already holds deployments"), "{}", stderr(&again));
    // libostree makes deployments immutable: the sysroot goes only through sysroot::remove.
    mco_os::sysroot::remove(sysroot.path()).unwrap();
    assert!(!sysroot.path().exists());
}
