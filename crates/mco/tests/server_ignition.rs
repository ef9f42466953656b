//! The real Ignition client against a running `mco server`: a machine boots from a stub made by
//! `mco ignition stub`, fetches its config over TLS trusting the CA from `mco certs create`, and
//! Ignition's files stage writes it into a directory root. Needs Debian's `ignition` package
//! (the binary is not on PATH: `/usr/lib/dracut/modules.d/30ignition/ignition`) and root (Ignition
//! creates the core user with `useradd --root`).

use std::io::{BufRead, BufReader};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

const IGNITION: &str = "/usr/lib/dracut/modules.d/30ignition/ignition";
const MCO: &str = env!("CARGO_BIN_EXE_mco");
const TOKEN: &str = "FIXTURE-BOOTSTRAP-TOKEN-must-never-appear-in-logs";

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../server/testdata/bootstrap")
}

/// `mco server` on an ephemeral port, logging everything (trace) to a file.
struct RunningServer {
    child: Child,
    url: String,
    drain: Option<std::thread::JoinHandle<std::io::Result<u64>>>,
}

impl RunningServer {
    fn start(work: &Path) -> RunningServer {
        let certs = work.join("certs");
        mco(&["certs", "create", "--dir", certs.to_str().unwrap(), "--san", "127.0.0.1,api-int.example.com"]);
        let log = work.join("server.log");
        let fixture = fixture();
        let mut child = Command::new(MCO)
            .args(["server", "--bootstrap-dir"])
            .arg(&fixture)
            .arg("--bootstrap-kubeconfig")
            .arg(fixture.join("kubeconfig"))
            .args(["--bootstrap-certs", "registry.example.com:5000=registry-ca.crt", "--tls-cert"])
            .arg(certs.join("tls.crt"))
            .arg("--tls-key")
            .arg(certs.join("tls.key"))
            .args(["--listen", "127.0.0.1:0"])
            .env("MCO_LOG", "trace")
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stderr = BufReader::new(child.stderr.take().unwrap());
        let mut line = String::new();
        stderr.read_line(&mut line).unwrap();
        let url = line.trim().strip_prefix("listening on ").unwrap_or_else(|| panic!("unexpected: {line}")).to_string();
        // Keep draining the log so the server never blocks on a full pipe.
        let mut file = std::fs::File::create(&log).unwrap();
        let drain = Some(std::thread::spawn(move || std::io::copy(&mut stderr, &mut file)));
        RunningServer { child, url, drain }
    }
}

impl Drop for RunningServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if let Some(drain) = self.drain.take() {
            let _ = drain.join();
        }
    }
}

fn mco(args: &[&str]) -> String {
    let out = Command::new(MCO).args(args).output().unwrap();
    assert!(out.status.success(), "mco {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

fn ignition_binary() -> &'static str {
    assert!(
        Path::new(IGNITION).is_file(),
        "{IGNITION} is missing: install Debian's `ignition` package (hack/setup.sh does); this test needs the real client"
    );
    IGNITION
}

/// Runs one Ignition stage under `timeout` (a 500 would be retried forever).
fn ignition(work: &Path, stage: &str, stub: &Path, extra: &[&str]) -> std::process::Output {
    let run = work.join("run");
    std::fs::create_dir_all(&run).unwrap();
    let path = format!("{}:{}", work.join("bin").display(), std::env::var("PATH").unwrap_or_default());
    Command::new("timeout")
        .args(["120", ignition_binary(), "-platform", "file", "-stage", stage, "-log-to-stdout", "-config-cache"])
        .arg(run.join("ignition.json"))
        .arg("-state-file")
        .arg(run.join("state"))
        .args(extra)
        .env("IGNITION_CONFIG_FILE", stub)
        .env("PATH", path)
        .output()
        .unwrap()
}

/// A directory Ignition accepts as an OS root (see TESTING.md): passwd/group files with root,
/// an SELinux config, a no-op `setfiles` first on PATH, every directory traversable.
fn os_root(work: &Path) -> PathBuf {
    let root = work.join("root");
    std::fs::create_dir_all(root.join("etc/selinux")).unwrap();
    std::fs::create_dir_all(work.join("bin")).unwrap();
    for (file, text) in [
        ("etc/selinux/config", "SELINUXTYPE=targeted\n"),
        ("etc/passwd", "root:x:0:0:root:/root:/bin/sh\n"),
        ("etc/group", "root:x:0:\n"),
        ("etc/shadow", "root:*:19000:0:99999:7:::\n"),
        ("etc/gshadow", "root:*::\n"),
    ] {
        std::fs::write(root.join(file), text).unwrap();
    }
    let setfiles = work.join("bin/setfiles");
    std::fs::write(&setfiles, "#!/bin/sh\ncat >/dev/null\n").unwrap();
    std::fs::set_permissions(&setfiles, std::fs::Permissions::from_mode(0o755)).unwrap();
    for dir in [work, &root, &root.join("etc")] {
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    root
}

fn stub(server: &RunningServer, work: &Path, pool: &str) -> PathBuf {
    let ca = work.join("certs/ca.crt");
    let text = mco(&[
        "ignition",
        "stub",
        "--pool",
        pool,
        "--url",
        &server.url,
        "--ca",
        ca.to_str().unwrap(),
        "--version",
        "3.3.0",
    ]);
    let path = work.join(format!("stub-{pool}.ign"));
    std::fs::write(&path, text).unwrap();
    path
}

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap_or_else(|e| panic!("{}: {e}", path.display())).permissions().mode() & 0o7777
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn ignition_boots_from_the_server() {
    let work = tempfile::tempdir().unwrap();
    let work = work.path();
    let server = RunningServer::start(work);
    let master_stub = stub(&server, work, "master");

    let fetch = ignition(work, "fetch", &master_stub, &["-neednet", work.join("run/neednet").to_str().unwrap()]);
    let fetch_log = String::from_utf8_lossy(&fetch.stdout);
    assert!(fetch.status.success(), "Ignition fetch failed:\n{fetch_log}{}", String::from_utf8_lossy(&fetch.stderr));
    assert!(fetch_log.contains("/config/master: attempt #1"), "{fetch_log}");

    let root = os_root(work);
    let files = ignition(work, "files", &master_stub, &["-root", root.to_str().unwrap()]);
    let files_log = String::from_utf8_lossy(&files.stdout);
    assert!(files.status.success(), "Ignition files failed:\n{files_log}{}", String::from_utf8_lossy(&files.stderr));

    // The MachineConfig's files, with their modes.
    assert!(read(&root.join("etc/chrony.conf")).starts_with("# Use public servers from the pool.ntp.org project.\n"));
    assert_eq!(mode(&root.join("etc/chrony.conf")), 0o644);
    assert_eq!(
        read(&root.join("usr/local/bin/master-helper.sh")),
        "#!/bin/bash\nset -euo pipefail\necho \"hello from master\" >&2\n"
    );
    assert_eq!(mode(&root.join("usr/local/bin/master-helper.sh")), 0o755);
    // Units, their enablement and a drop-in.
    let system = root.join("etc/systemd/system");
    assert!(read(&system.join("kubelet.service")).contains("Description=Kubernetes Kubelet (oracle fixture)"));
    assert!(read(&system.join("master-helper.service")).contains("ExecStart=/usr/local/bin/master-helper.sh"));
    assert_eq!(
        read(&system.join("crio.service.d/10-mco-default-env.conf")),
        "[Service]\nEnvironment=GODEBUG=x509ignoreCN=0,madvdontneed=1\n"
    );
    let presets = read(&root.join("etc/systemd/system-preset/20-ignition.preset"));
    assert!(
        presets.contains("enable kubelet.service") && presets.contains("disable master-helper.service"),
        "{presets}"
    );
    // The core user and its SSH key.
    assert!(read(&root.join("etc/passwd")).contains("\ncore:"));
    assert_eq!(
        read(&root.join("home/core/.ssh/authorized_keys.d/ignition")).trim(),
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAICKR2M3DEEEefsJzeKZhyTUYfAfk1WNum8PEALJyRLjN admin@example.com"
    );
    // What the server adds.
    let name = read(&fixture().join("machine-pools/master.yaml"))
        .lines()
        .find_map(|l| l.trim().strip_prefix("name: ").filter(|n| n.starts_with("rendered-")).map(str::to_string))
        .unwrap();
    let encapsulated: serde_json::Value =
        serde_json::from_str(&read(&root.join("etc/ignition-machine-config-encapsulated.json"))).unwrap();
    assert_eq!(encapsulated["metadata"]["name"], name.as_str());
    assert_eq!(encapsulated["spec"]["config"], serde_json::json!({"ignition": {"version": "3.5.0"}}));
    assert_eq!(encapsulated["spec"]["kernelArguments"], serde_json::json!(["nosmt"]));
    assert_eq!(mode(&root.join("etc/ignition-machine-config-encapsulated.json")), 0o644);
    let seed: serde_json::Value =
        serde_json::from_str(&read(&root.join("etc/machine-config-daemon/node-annotations.json"))).unwrap();
    assert_eq!(seed["machineconfiguration.openshift.io/desiredConfig"], name.as_str());
    assert_eq!(read(&root.join("etc/kubernetes/kubeconfig")), read(&fixture().join("kubeconfig")));
    assert_eq!(
        read(&root.join("etc/docker/certs.d/registry.example.com:5000/ca.crt")),
        read(&fixture().join("registry-ca.crt"))
    );
    assert!(read(&root.join("etc/kubernetes/kubelet-ca.crt")).starts_with("-----BEGIN CERTIFICATE-----"));

    // An unknown pool is a 404, which Ignition gives up on at once instead of retrying.
    let unknown = stub(&server, work, "nosuchpool");
    let failed = ignition(work, "fetch", &unknown, &["-neednet", work.join("run/neednet2").to_str().unwrap()]);
    let log = String::from_utf8_lossy(&failed.stdout);
    assert!(!failed.status.success(), "{log}");
    assert_ne!(failed.status.code(), Some(124), "Ignition kept retrying (timed out):\n{log}");
    assert!(log.contains("config/nosuchpool: attempt #1") && !log.contains("attempt #2"), "{log}");

    // Everything was logged at trace level, and yet the bootstrap token never was.
    drop(server);
    let log = read(&work.join("server.log"));
    assert!(log.contains("config requested"), "{log}");
    assert!(!log.contains(TOKEN), "the server log holds the kubeconfig token:\n{log}");
}
