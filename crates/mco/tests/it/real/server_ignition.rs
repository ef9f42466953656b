//! The real Ignition client against a running `mco server` (bootstrap mode, and cluster mode on a
//! real API server): a machine boots from a stub made by `mco ignition stub`, fetches its config
//! over TLS trusting the CA from `mco certs create`, and Ignition's files stage writes it into a
//! directory root. Needs Debian's `ignition` package
//! (the binary is not on PATH: `/usr/lib/dracut/modules.d/30ignition/ignition`) and root (Ignition
//! creates the core user with `useradd --root`).

use std::ffi::OsString;
use std::io::{BufRead, BufReader, Write};
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
    /// Starts `mco server SOURCE_ARGS...` (the bootstrap or cluster mode flags).
    fn start(work: &Path, source_args: &[OsString]) -> RunningServer {
        let certs = work.join("certs");
        mco(&["certs", "create", "--dir", certs.to_str().unwrap(), "--san", "127.0.0.1,api-int.example.com"]);
        let log = work.join("server.log");
        let mut child = Command::new(MCO)
            .arg("server")
            .args(source_args)
            .arg("--tls-cert")
            .arg(certs.join("tls.crt"))
            .arg("--tls-key")
            .arg(certs.join("tls.key"))
            .args(["--listen", "127.0.0.1:0"])
            .env("MCO_LOG", "trace")
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stderr = BufReader::new(child.stderr.take().unwrap());
        let mut file = std::fs::File::create(&log).unwrap();
        let url = loop {
            let mut line = String::new();
            assert_ne!(stderr.read_line(&mut line).unwrap(), 0, "mco server exited:\n{}", read(&log));
            file.write_all(line.as_bytes()).unwrap();
            if let Some(url) = line.trim().strip_prefix("listening on ") {
                break url.to_string();
            }
        };
        // Keep draining the log so the server never blocks on a full pipe.
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
    stub_with(server, work, pool, &[])
}

/// `mco ignition stub` for `pool` with `extra` flags.
fn stub_with(server: &RunningServer, work: &Path, pool: &str, extra: &[&str]) -> PathBuf {
    let ca = work.join("certs/ca.crt");
    let mut args = vec![
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
    ];
    args.extend_from_slice(extra);
    let text = mco(&args);
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

/// Runs Ignition's fetch and files stages for `pool` against `server`; returns the OS root.
fn boot(server: &RunningServer, work: &Path, pool: &str) -> PathBuf {
    boot_from(work, pool, &stub(server, work, pool))
}

/// Runs Ignition's fetch and files stages from `pool_stub`; returns the OS root.
fn boot_from(work: &Path, pool: &str, pool_stub: &Path) -> PathBuf {
    let fetch = ignition(work, "fetch", pool_stub, &["-neednet", work.join("run/neednet").to_str().unwrap()]);
    let fetch_log = String::from_utf8_lossy(&fetch.stdout);
    assert!(
        fetch.status.success(),
        "Ignition fetch failed:\n{fetch_log}{}\n--- server log ---\n{}",
        String::from_utf8_lossy(&fetch.stderr),
        read(&work.join("server.log"))
    );
    assert!(fetch_log.contains(&format!("/config/{pool}: attempt #1")), "{fetch_log}");

    let root = os_root(work);
    let files = ignition(work, "files", pool_stub, &["-root", root.to_str().unwrap()]);
    let files_log = String::from_utf8_lossy(&files.stdout);
    assert!(files.status.success(), "Ignition files failed:\n{files_log}{}", String::from_utf8_lossy(&files.stderr));
    root
}

/// The fixture's rendered config is on the machine: files with their modes, units, a drop-in,
/// the core user's SSH key, and what the server adds (the encapsulated config, whose Ignition
/// version is `encapsulated_version`, the node annotations seed, the kubelet CA).
fn assert_fixture_applied(root: &Path, encapsulated_version: &str) {
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
    let name = rendered_name();
    let encapsulated: serde_json::Value =
        serde_json::from_str(&read(&root.join("etc/ignition-machine-config-encapsulated.json"))).unwrap();
    assert_eq!(encapsulated["metadata"]["name"], name.as_str());
    assert_eq!(encapsulated["spec"]["config"], serde_json::json!({"ignition": {"version": encapsulated_version}}));
    assert_eq!(encapsulated["spec"]["kernelArguments"], serde_json::json!(["nosmt"]));
    assert_eq!(mode(&root.join("etc/ignition-machine-config-encapsulated.json")), 0o644);
    let seed: serde_json::Value =
        serde_json::from_str(&read(&root.join("etc/machine-config-daemon/node-annotations.json"))).unwrap();
    assert_eq!(seed["machineconfiguration.openshift.io/desiredConfig"], name.as_str());
    assert!(read(&root.join("etc/kubernetes/kubelet-ca.crt")).starts_with("-----BEGIN CERTIFICATE-----"));
}

/// The fixture's rendered config name, from its pool.
fn rendered_name() -> String {
    read(&fixture().join("machine-pools/master.yaml"))
        .lines()
        .find_map(|l| l.trim().strip_prefix("name: ").filter(|n| n.starts_with("rendered-")).map(str::to_string))
        .unwrap()
}

/// Stops the server; everything was logged at trace level, and yet the bootstrap token never was.
fn assert_token_never_logged(server: RunningServer, work: &Path) {
    drop(server);
    let log = read(&work.join("server.log"));
    assert!(log.contains("config requested"), "{log}");
    assert!(!log.contains(TOKEN), "the server log holds the kubeconfig token:\n{log}");
}

#[test]
fn ignition_boots_from_the_server() {
    let work = tempfile::tempdir().unwrap();
    let work = work.path();
    let fixture = fixture();
    let server = RunningServer::start(
        work,
        &[
            "--bootstrap-dir".into(),
            fixture.clone().into(),
            "--bootstrap-kubeconfig".into(),
            fixture.join("kubeconfig").into(),
            "--bootstrap-certs".into(),
            "registry.example.com:5000=registry-ca.crt".into(),
        ],
    );
    let root = boot(&server, work, "master");
    assert_fixture_applied(&root, "3.5.0");
    assert_eq!(read(&root.join("etc/kubernetes/kubeconfig")), read(&fixture.join("kubeconfig")));
    assert_eq!(
        read(&root.join("etc/docker/certs.d/registry.example.com:5000/ca.crt")),
        read(&fixture.join("registry-ca.crt"))
    );

    // An unknown pool is a 404, which Ignition gives up on at once instead of retrying.
    let unknown = stub(&server, work, "nosuchpool");
    let failed = ignition(work, "fetch", &unknown, &["-neednet", work.join("run/neednet2").to_str().unwrap()]);
    let log = String::from_utf8_lossy(&failed.stdout);
    assert!(!failed.status.success(), "{log}");
    assert_ne!(failed.status.code(), Some(124), "Ignition kept retrying (timed out):\n{log}");
    assert!(log.contains("config/nosuchpool: attempt #1") && !log.contains("attempt #2"), "{log}");

    assert_token_never_logged(server, work);
}

/// Cluster mode: the fixture's rendered config, ControllerConfig and pool live in a real API
/// server; the served kubeconfig is built from the node-bootstrapper token files.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ignition_boots_from_the_cluster_mode_server() {
    let env = mco_testenv::TestEnv::start().await.unwrap();
    let work = tempfile::tempdir().unwrap();
    let work = work.path();
    let apiserver_url = "https://api-int.example.com:6443";
    let server = cluster_mode_server(&env, work, apiserver_url).await;
    // (Blocking in the test's runtime is fine: nothing async runs meanwhile.)
    let root = boot(&server, work, "master");
    // Cluster mode encapsulates an empty config of the version the client asked for.
    assert_fixture_applied(&root, "3.3.0");
    let ca = std::fs::read(env.dir().join("ca.crt")).unwrap();
    let kubeconfig = mco_server::source::cluster::node_kubeconfig(apiserver_url, &ca, TOKEN).unwrap();
    assert_eq!(std::fs::read(root.join("etc/kubernetes/kubeconfig")).unwrap(), kubeconfig);
    assert!(!root.join("etc/machine-config-daemon/boot-image-skew-enforcement.json").exists(), "no skew status");
    assert_token_never_logged(server, work);
}

/// The fixture's rendered config, ControllerConfig and pool `master` in `env`, one machine
/// running the config, and `mco server` in cluster mode serving them.
async fn cluster_mode_server(env: &mco_testenv::TestEnv, work: &Path, apiserver_url: &str) -> RunningServer {
    use mco_testenv::kube::Api;
    use mco_testenv::kube::api::{Patch, PatchParams};

    let fixture = fixture();
    let manifests = work.join("manifests");
    std::fs::create_dir_all(&manifests).unwrap();
    for (from, to) in [
        (format!("machine-configs/{}.yaml", rendered_name()), "1-rendered.yaml"),
        ("controller-config/machine-config-controller.yaml".to_string(), "2-controller-config.yaml"),
        ("machine-pools/master.yaml".to_string(), "3-pool.yaml"),
    ] {
        std::fs::copy(fixture.join(from), manifests.join(to)).unwrap();
    }
    env.create_manifests(&manifests).await.unwrap();
    // The pool targets the fixture's rendered config and one machine runs it (status is not
    // written on create).
    let pools = Api::<mco_api::MachineConfigPool>::all(env.client());
    let configuration = serde_json::json!({"name": rendered_name()});
    let spec = serde_json::json!({"spec": {"configuration": configuration}});
    pools.patch("master", &PatchParams::default(), &Patch::Merge(&spec)).await.unwrap();
    let status = serde_json::json!({"status": {"configuration": configuration, "updatedMachineCount": 1}});
    pools.patch_status("master", &PatchParams::default(), &Patch::Merge(&status)).await.unwrap();
    let token_dir = work.join("bootstrap-token");
    std::fs::create_dir_all(&token_dir).unwrap();
    std::fs::write(token_dir.join("token"), TOKEN).unwrap();
    std::fs::copy(env.dir().join("ca.crt"), token_dir.join("ca.crt")).unwrap();

    RunningServer::start(
        work,
        &[
            "--kubeconfig".into(),
            env.kubeconfig().into(),
            "--apiserver-url".into(),
            apiserver_url.into(),
            "--bootstrap-token-dir".into(),
            token_dir.into(),
        ],
    )
}

/// Boot image skew enforcement with the real client: a machine booted from a too-old boot image
/// (its stub says so in a header) gets no config, and the server's 403 says why and what to do;
/// the pool gets a Warning Event; a current boot image boots, and its config carries the skew
/// status firstboot checks again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ignition_is_refused_a_too_old_boot_image() {
    use mco_testenv::kube::Api;
    use mco_testenv::kube::api::{Patch, PatchParams, PostParams};

    let env = mco_testenv::TestEnv::start().await.unwrap();
    let work = tempfile::tempdir().unwrap();
    let work = work.path();
    let configurations = Api::<mco_api::MachineConfiguration>::all(env.client());
    let configuration = serde_json::from_value(serde_json::json!({
        "apiVersion": "operator.openshift.io/v1", "kind": "MachineConfiguration",
        "metadata": {"name": "cluster"}, "spec": {}
    }))
    .unwrap();
    configurations.create(&PostParams::default(), &configuration).await.unwrap();
    let skew_status =
        serde_json::json!({"mode": "Manual", "manual": {"mode": "RHCOSVersion", "rhcosVersion": "9.6.20251023-0"}});
    let patch = serde_json::json!({"status": {"bootImageSkewEnforcementStatus": skew_status}});
    configurations.patch_status("cluster", &PatchParams::default(), &Patch::Merge(&patch)).await.unwrap();
    let server = cluster_mode_server(&env, work, "https://api-int.example.com:6443").await;

    // The old machine's Ignition gives up after its stub's 5 s (it retries a 403 until then).
    const OLD: &str = "412.86.202301010000-0";
    let old_stub = stub_with(&server, work, "master", &["--boot-image-version", OLD, "--http-total-timeout", "5"]);
    let fetch = ignition(work, "fetch", &old_stub, &["-neednet", work.join("run/neednet").to_str().unwrap()]);
    let log = String::from_utf8_lossy(&fetch.stdout);
    assert!(!fetch.status.success(), "{log}");
    assert_ne!(fetch.status.code(), Some(124), "Ignition did not give up by itself:\n{log}");
    assert!(log.contains("GET result: Forbidden"), "{log}");
    assert!(!work.join("run/ignition.json").exists(), "no config was cached:\n{log}");

    // What the refusal says, as any HTTP client gets it.
    let url = format!("{}/config/master", server.url);
    let ca = work.join("certs/ca.crt");
    let curl = |header: &str| {
        let out = Command::new("curl")
            .args(["-sS", "--cacert", ca.to_str().unwrap(), "-H", header, "-w", "\n%{http_code}", &url])
            .output()
            .unwrap();
        assert!(out.status.success(), "curl: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap()
    };
    let refusal = curl(&format!("X-MCO-Boot-Image-Version: {OLD}"));
    assert!(refusal.ends_with("\n403"), "{refusal}");
    for part in [
        "refusing to serve the config of pool master",
        "RHCOS boot image version 412.86.202301010000-0(RHEL version: 8.6) is below the minimum required RHEL version 9.2",
        "update the boot images",
        "spec.bootImageSkewEnforcement.mode: None on machineconfiguration/cluster",
    ] {
        assert!(refusal.contains(part), "{part:?} missing:\n{refusal}");
    }
    assert!(curl("X-MCO-Boot-Image-Version: nine").ends_with("\n400"));

    // The pool gets a Warning Event saying so; the server records it in the background.
    let events = Api::<mco_testenv::k8s_openapi::api::events::v1::Event>::all(env.client());
    let refused = mco_testenv::eventually("the BootImageSkewRefused Event", || async {
        let items = events.list(&Default::default()).await.map_err(|e| vec![e.to_string()])?.items;
        let reasons: Vec<String> = items.iter().filter_map(|e| e.reason.clone()).collect();
        items.into_iter().find(|e| e.reason.as_deref() == Some("BootImageSkewRefused")).ok_or(reasons)
    })
    .await;
    assert_eq!(refused.type_.as_deref(), Some("Warning"));
    assert_eq!(refused.regarding.as_ref().and_then(|r| r.name.as_deref()), Some("master"));
    assert!(refused.note.as_deref().unwrap_or_default().contains(OLD), "{refused:?}");

    // A current boot image boots, and gets the skew status for firstboot.
    let current_stub = stub_with(&server, work, "master", &["--boot-image-version", "9.6.20260101-0"]);
    let root = boot_from(work, "master", &current_stub);
    assert_fixture_applied(&root, "3.3.0");
    let skew_file = root.join("etc/machine-config-daemon/boot-image-skew-enforcement.json");
    assert_eq!(mode(&skew_file), 0o644);
    assert_eq!(serde_json::from_str::<serde_json::Value>(&read(&skew_file)).unwrap(), skew_status);
    // The server process writes its log on its own time.
    mco_testenv::eventually("the refusal in the server's log", || async {
        let log = read(&work.join("server.log"));
        if log.contains("boot image is too old") { Ok(()) } else { Err(log) }
    })
    .await;
    assert_token_never_logged(server, work);
}

/// `mco server` takes exactly one source, and says what is missing before it listens.
#[test]
fn server_flags_are_checked() {
    let run = |args: &[&str]| {
        let out =
            Command::new(MCO).arg("server").args(args).args(["--tls-cert", "c", "--tls-key", "k"]).output().unwrap();
        (out.status.code(), String::from_utf8_lossy(&out.stderr).into_owned())
    };
    let (code, stderr) = run(&[]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("--bootstrap-dir <DIR>|--kubeconfig <FILE>"), "{stderr}");
    let (code, stderr) = run(&["--bootstrap-dir", "d", "--bootstrap-kubeconfig", "k", "--kubeconfig", "k"]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("cannot be used with"), "{stderr}");
    let (code, stderr) = run(&["--bootstrap-dir", "d"]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("--bootstrap-kubeconfig <FILE>"), "{stderr}");
    let (code, stderr) = run(&["--kubeconfig", "k", "--bootstrap-certs", "r=ca.crt"]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("'--kubeconfig <FILE>' cannot be used with '--bootstrap-certs <HOST=FILE>'"), "{stderr}");
    // In a pod: the service account's API server address is no use to booting machines.
    let (code, stderr) = run(&["--in-cluster"]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("--apiserver-url <URL>"), "{stderr}");
    let (code, stderr) = run(&["--in-cluster", "--kubeconfig", "k"]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("cannot be used with"), "{stderr}");
    let (code, stderr) = run(&["--bootstrap-dir", "d", "--bootstrap-kubeconfig", "k", "--apiserver-url", "https://x"]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("'--bootstrap-dir <DIR>' cannot be used with '--apiserver-url <URL>'"), "{stderr}");

    // Cluster mode without the node-bootstrapper token: refused at start, naming the file.
    let work = tempfile::tempdir().unwrap();
    let certs = work.path().join("certs");
    mco(&["certs", "create", "--dir", certs.to_str().unwrap(), "--san", "127.0.0.1"]);
    let kubeconfig = work.path().join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        "apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: 'https://127.0.0.1:1'}}]\n\
         users: [{name: u, user: {token: t}}]\ncontexts: [{name: x, context: {cluster: c, user: u}}]\ncurrent-context: x\n",
    )
    .unwrap();
    let out = Command::new(MCO)
        .arg("server")
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .arg("--bootstrap-token-dir")
        .arg(work.path())
        .arg("--tls-cert")
        .arg(certs.join("tls.crt"))
        .arg("--tls-key")
        .arg(certs.join("tls.key"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "reading the node-bootstrapper token: failed to read {}",
            work.path().join("token").display()
        )),
        "{stderr}"
    );
}
