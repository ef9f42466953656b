//! `mco lab`: a whole cluster on this machine (see the mco-lab crate).

use std::path::{Path, PathBuf};
use std::process::{ExitCode, Stdio};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use mco_api::constants::MASTER_POOL;
use mco_lab::layout::{Layout, default_dir};
use mco_lab::manifests::Platform;
use mco_lab::request::{self, AddNode, BootImage};
use mco_lab::state::{self, LabState, Phase};
use mco_render::ControllerVersion;
use serde_json::json;

#[derive(Debug, clap::Subcommand)]
pub enum LabCommand {
    /// Start the lab in the background: API server, registry with OS images, controller, server,
    /// and N nodes that boot with Ignition, pivot to the pool's OS image and join. Returns when
    /// they have joined (progress on stderr).
    Up {
        /// Worker nodes.
        #[arg(long, default_value = "3")]
        nodes: usize,
        /// What the control plane believes it runs on: `gcp` gives the boot image controller
        /// MachineSets to manage (apply them with `mco lab apply`); the nodes are lab nodes either way.
        #[arg(long, value_enum, default_value = "none")]
        platform: PlatformArg,
        #[command(flatten)]
        dir: DirArg,
        /// Give up after this many seconds.
        #[arg(long, value_name = "SECONDS", default_value = "1800")]
        timeout: u64,
        /// Also run Prometheus (Debian's), scraping every mco pod and evaluating mco's alerting
        /// rules (deploy/components/monitoring); its address is in `mco lab status`.
        #[arg(long)]
        prometheus: bool,
    },
    /// Stop the lab and remove its state directory.
    Down {
        #[command(flatten)]
        dir: DirArg,
        /// Keep the state directory (logs, node roots and sysroots, etcd data).
        #[arg(long)]
        keep: bool,
        /// Keep only the logs (`logs/` in the state directory) and remove the rest, gigabytes of
        /// sysroots and images.
        #[arg(long, conflicts_with = "keep")]
        keep_logs: bool,
    },
    /// Apply manifests to the lab's API server (server-side apply, like `kubectl apply --server-side`).
    Apply {
        /// YAML or JSON files, multi-document.
        #[arg(short = 'f', long = "filename", required = true)]
        files: Vec<PathBuf>,
        #[command(flatten)]
        dir: DirArg,
    },
    /// Add a node to the running lab, installed from the lab's boot image or from one too old for
    /// boot image skew enforcement, booted with Ignition and firstboot like the others. Returns
    /// once it joined (exit 0) or did not (exit 1, with the reason: e.g. refused by the server or
    /// by firstboot). A node that did not join can be added again under its name: it is
    /// re-provisioned from scratch.
    AddNode {
        /// The pool (node role) the node joins.
        #[arg(long, default_value = "worker")]
        pool: String,
        /// The node's name [default: the first free POOL-N].
        #[arg(long)]
        name: Option<String>,
        /// The boot image it is installed from.
        #[arg(long, value_enum, default_value = "current")]
        boot_image: BootImageArg,
        /// The stub does not tell the server the boot image's version (X-MCO-Boot-Image-Version).
        #[arg(long)]
        no_version_header: bool,
        #[command(flatten)]
        dir: DirArg,
        /// Give up waiting after this many seconds.
        #[arg(long, value_name = "SECONDS", default_value = "600")]
        timeout: u64,
    },
    /// The lab's state: the nodes that joined, those being added, those that did not join and why.
    Status {
        /// `json`: everything, each node with its pool, root and sysroot, for scripts.
        #[arg(short, long, value_enum, default_value = "text")]
        output: crate::Report,
        #[command(flatten)]
        dir: DirArg,
    },
    /// Install this mco into the running lab, as an administrator upgrades mco on a cluster: its
    /// image built and pushed to the lab registry, deploy/'s lab overlay applied with the new
    /// digest. Returns once the controller's and the daemons' pods all run it (no node reboots).
    Install {
        /// The image's version label (a rebuild of the same binary then gets another digest).
        #[arg(long, value_name = "VERSION")]
        image_version: Option<String>,
        #[command(flatten)]
        dir: DirArg,
    },
    /// Print the path of the lab's kubeconfig (for kubectl and `mco status --kubeconfig`).
    Kubeconfig {
        #[command(flatten)]
        dir: DirArg,
    },
    /// Run the lab in the foreground (what `up` starts in the background).
    #[command(hide = true)]
    Supervise {
        #[arg(long)]
        nodes: usize,
        #[arg(long)]
        prometheus: bool,
        #[arg(long, value_enum)]
        platform: PlatformArg,
        #[command(flatten)]
        dir: DirArg,
    },
    /// PID 1 of a lab machine's new namespaces, started by its firmware: mounts the deployment
    /// the bootloader chose as the root and executes its systemd.
    #[command(hide = true)]
    MachineInit {
        #[arg(long)]
        sysroot: PathBuf,
        #[arg(long)]
        hostname: String,
        /// The daemon binary shared with the machine.
        #[arg(long)]
        daemon: PathBuf,
        /// The Ignition client the initramfs runs on a first boot.
        #[arg(long)]
        ignition: PathBuf,
    },
}

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum BootImageArg {
    /// The lab's boot image (RHCOS 9.6 style version).
    Current,
    /// A boot image from RHEL 8.6 days (412.86.…), below the skew limit.
    Old,
}

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum PlatformArg {
    /// No cloud: no MachineSets; boot image skew enforcement is Manual at the install version.
    None,
    /// Google Cloud: an Infrastructure of platform GCP, the MachineSet namespace, the
    /// `coreos-bootimages` ConfigMap (real rhcos-4.16 stream) and the worker user-data secret.
    Gcp,
}

impl From<PlatformArg> for Platform {
    fn from(arg: PlatformArg) -> Platform {
        match arg {
            PlatformArg::None => Platform::None,
            PlatformArg::Gcp => Platform::Gcp,
        }
    }
}

#[derive(Debug, clap::Args)]
pub struct DirArg {
    /// The lab's state directory [default: $MCO_LAB_DIR or ~/.local/state/mco/lab].
    #[arg(long, value_name = "DIR")]
    state_dir: Option<PathBuf>,
}

impl DirArg {
    fn layout(&self) -> Layout {
        Layout::new(self.state_dir.clone().unwrap_or_else(default_dir))
    }
}

pub fn run(cmd: LabCommand) -> anyhow::Result<ExitCode> {
    match cmd {
        LabCommand::Up { nodes, platform, dir, timeout, prometheus } => {
            up(&dir.layout(), nodes, platform.into(), prometheus, Duration::from_secs(timeout))
        }
        LabCommand::Down { dir, keep, keep_logs } => {
            let kept = match (keep, keep_logs) {
                (true, _) => Kept::All,
                (false, true) => Kept::Logs,
                (false, false) => Kept::Nothing,
            };
            down(&dir.layout(), kept)
        }
        LabCommand::Apply { files, dir } => apply(&dir.layout(), &files),
        LabCommand::AddNode { pool, name, boot_image, no_version_header, dir, timeout } => {
            let boot_image = match boot_image {
                BootImageArg::Current => BootImage::Current,
                BootImageArg::Old => BootImage::Old,
            };
            add_node(&dir.layout(), pool, name, boot_image, !no_version_header, Duration::from_secs(timeout))
        }
        LabCommand::Status { output, dir } => status(&dir.layout(), output),
        LabCommand::Install { image_version, dir } => install(&dir.layout(), image_version.as_deref()),
        LabCommand::Kubeconfig { dir } => {
            let layout = dir.layout();
            running(&layout)?;
            println!("{}", layout.kubeconfig().display());
            Ok(ExitCode::SUCCESS)
        }
        LabCommand::MachineInit { sysroot, hostname, daemon, ignition } => {
            match mco_lab::boot::init(&sysroot, &hostname, &mco_lab::boot::Firmware { daemon, ignition })? {}
        }
        LabCommand::Supervise { nodes, prometheus, platform, dir } => {
            // Before the runtime starts its threads: they are created in the lab's namespace.
            let host_ports = mco_lab::supervisor::HostPorts::bind_and_enter_lab_namespace()?;
            let options = mco_lab::supervisor::Options {
                dir: dir.layout().dir,
                workers: nodes,
                platform: platform.into(),
                mco: std::env::current_exe().context("finding the mco binary")?,
                controller_version_raw: ControllerVersion::this_build().raw,
                deploy: mco_lab::install::default_deploy_dir(),
                prometheus,
            };
            runtime()?.block_on(mco_lab::supervisor::supervise(options, host_ports))?;
            Ok(ExitCode::SUCCESS)
        }
    }
}

fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Runtime::new().context("starting the async runtime")
}

/// The supervisor's pid if it runs.
fn supervisor_pid(layout: &Layout) -> Option<rustix::process::Pid> {
    let text = std::fs::read_to_string(layout.pid_file()).ok()?;
    let pid = rustix::process::Pid::from_raw(text.trim().parse().ok()?)?;
    rustix::process::test_kill_process(pid).is_ok().then_some(pid)
}

fn running(layout: &Layout) -> anyhow::Result<LabState> {
    match state::read(&layout.state_file())? {
        Some(state) if state.phase == Phase::Ready && supervisor_pid(layout).is_some() => Ok(state),
        Some(state) => {
            anyhow::bail!("the lab in {} is not running ({:?}: {})", layout.dir.display(), state.phase, state.message)
        }
        None => anyhow::bail!("no lab in {} (start one with `mco lab up`)", layout.dir.display()),
    }
}

fn up(
    layout: &Layout,
    nodes: usize,
    platform: Platform,
    prometheus: bool,
    timeout: Duration,
) -> anyhow::Result<ExitCode> {
    if let Some(pid) = supervisor_pid(layout) {
        anyhow::bail!(
            "a lab is already running in {} (pid {}); stop it with `mco lab down`",
            layout.dir.display(),
            pid.as_raw_nonzero()
        );
    }
    if layout.dir.exists() {
        anyhow::bail!(
            "{} holds a stopped lab; remove it with `mco lab down` (or `mco lab down --keep` keeps nothing running \
             and leaves it for inspection: pick another --state-dir)",
            layout.dir.display()
        );
    }
    mco_lab::check_host(prometheus)?;
    std::fs::create_dir_all(layout.logs()).with_context(|| format!("creating {}", layout.logs().display()))?;
    eprintln!("lab: preparing the userland of mco's and the OS images (Debian packages; built once, then cached)");
    let deploy = mco_lab::install::default_deploy_dir();
    runtime()?.block_on(mco_lab::install::prepare_userland(&deploy, layout))?;
    let log = layout.log("supervisor");
    let out = std::fs::File::create(&log).with_context(|| format!("creating {}", log.display()))?;
    let mut command = std::process::Command::new(std::env::current_exe()?);
    command
        .args(["lab", "supervise", "--nodes", &nodes.to_string(), "--platform", platform.name(), "--state-dir"])
        .arg(&layout.dir)
        .args(prometheus.then_some("--prometheus"))
        .env("MCO_LOG", std::env::var("MCO_LOG").unwrap_or_else(|_| "info".into()))
        .stdin(Stdio::null())
        .stdout(out.try_clone()?)
        .stderr(out);
    // Its own process group: the lab outlives this command and a Ctrl-C in its terminal.
    std::os::unix::process::CommandExt::process_group(&mut command, 0);
    command.spawn().context("starting the lab supervisor")?;

    let deadline = Instant::now() + timeout;
    let mut last_message = String::new();
    loop {
        if let Some(state) = state::read(&layout.state_file())? {
            if state.message != last_message {
                eprintln!("lab: {}", state.message);
                last_message = state.message.clone();
            }
            match state.phase {
                Phase::Ready => {
                    print_ready(layout, &state);
                    return Ok(ExitCode::SUCCESS);
                }
                Phase::Failed | Phase::Stopped => {
                    eprintln!("the lab did not start; logs are in {}", layout.logs().display());
                    return Ok(ExitCode::from(1));
                }
                Phase::Starting => {}
            }
        }
        if Instant::now() > deadline {
            anyhow::bail!("the lab is not ready after {timeout:?}; logs are in {}", layout.logs().display());
        }
        std::thread::sleep(Duration::from_millis(500));
    }
}

fn print_ready(layout: &Layout, state: &LabState) {
    println!("The lab is up: {} node(s): {}", state.nodes.len(), state.nodes.join(", "));
    println!("  kubeconfig:   {}", state.kubeconfig.display());
    println!("  platform:     {}", state.platform.name());
    if let Some(server) = &state.server {
        println!("  server:       {server}/config/worker");
    }
    if let Some(image) = &state.os_image {
        println!("  OS image:     {image}");
    }
    if let Some(prometheus) = &state.prometheus {
        println!("  Prometheus:   {prometheus}/alerts");
    }
    println!("  logs:         {}", layout.logs().display());
    println!("Try: mco status -w      mco lab apply -f FILE      mco lab add-node      mco lab down");
}

fn add_node(
    layout: &Layout,
    pool: String,
    name: Option<String>,
    boot_image: BootImage,
    version_header: bool,
    timeout: Duration,
) -> anyhow::Result<ExitCode> {
    let state = running(layout)?;
    let name = name.unwrap_or_else(|| request::next_name(&pool, &state));
    let add = AddNode { name: name.clone(), pool, boot_image, version_header };
    if let Err(problem) = request::check(&add, &state) {
        eprintln!("error: {problem}");
        return Ok(ExitCode::from(1));
    }
    request::submit(layout, &add)?;
    eprintln!("lab: adding node {name}");
    let deadline = Instant::now() + timeout;
    loop {
        if !request::waiting(layout, &name) {
            let state = running(layout)?;
            if state.nodes.contains(&name) {
                println!("node {name} joined");
                return Ok(ExitCode::SUCCESS);
            }
            if let Some(not_joined) = state.not_joined.iter().find(|n| n.name == name) {
                println!("node {name} did not join: {}", not_joined.reason);
                return Ok(ExitCode::from(1));
            }
        } else if supervisor_pid(layout).is_none() {
            anyhow::bail!("the lab supervisor stopped before taking the request for node {name}");
        }
        if Instant::now() > deadline {
            anyhow::bail!("node {name} has not joined after {timeout:?}; its log is {}", layout.log(&name).display());
        }
        std::thread::sleep(Duration::from_millis(500));
    }
}

fn status(layout: &Layout, output: crate::Report) -> anyhow::Result<ExitCode> {
    let Some(state) = state::read(&layout.state_file())? else {
        anyhow::bail!("no lab in {} (start one with `mco lab up`)", layout.dir.display());
    };
    let phase = if state.phase == Phase::Ready && supervisor_pid(layout).is_none() {
        "Stopped (the supervisor is gone)".to_string()
    } else {
        format!("{:?}", state.phase)
    };
    match output {
        crate::Report::Text => print!("{}", status_text(&phase, &state)),
        crate::Report::Json => println!("{}", serde_json::to_string_pretty(&status_json(&phase, &state, layout))?),
    }
    Ok(ExitCode::SUCCESS)
}

/// `mco lab status -o json` (pure): the state file's facts, and every node the lab knows with its
/// pool, its disk (sysroot), its running machine's root and where it is (`Joined`, `Adding`, or `NotJoined` or `Down` with the reason).
fn status_json(phase: &str, state: &LabState, layout: &Layout) -> serde_json::Value {
    let node = |name: &str, node_state: &str| {
        let dirs = layout.node(name);
        json!({
            "name": name,
            "pool": state.pools.get(name),
            "root": state.roots.get(name),
            "sysroot": dirs.sysroot,
            "state": node_state,
        })
    };
    let down = |name: &String| state.down.iter().find(|d| &d.name == name);
    let joined = state.nodes.iter().map(|name| match down(name) {
        None => node(name, "Joined"),
        Some(d) => {
            let mut value = node(name, "Down");
            value["reason"] = json!(d.reason);
            value
        }
    });
    let adding = state.pending.iter().map(|name| node(name, "Adding"));
    let not_joined = state.not_joined.iter().map(|n| {
        let mut value = node(&n.name, "NotJoined");
        value["reason"] = json!(n.reason);
        value
    });
    json!({
        "phase": phase,
        "message": state.message,
        "platform": state.platform.name(),
        "kubeconfig": state.kubeconfig,
        "server": state.server,
        "registry": state.registry,
        // Where images are signed into (`lookaside-staging: file://…`) and read from (`lookaside:`).
        "signatures": state.signatures,
        "signaturesDir": layout.signatures(),
        "prometheus": state.prometheus,
        "osImage": state.os_image,
        "nodes": joined.chain(adding).chain(not_joined).collect::<Vec<_>>(),
    })
}

/// `mco lab status` (pure).
fn status_text(phase: &str, state: &LabState) -> String {
    let list = |names: &[String]| if names.is_empty() { "-".to_string() } else { names.join(", ") };
    let mut text = format!(
        "phase: {phase}: {}\nplatform: {}\nnodes: {}\n",
        state.message,
        state.platform.name(),
        list(&state.nodes)
    );
    if !state.pending.is_empty() {
        text += &format!("adding: {}\n", list(&state.pending));
    }
    for node in &state.not_joined {
        text += &format!("not joined: {}: {}\n", node.name, node.reason);
    }
    for node in &state.down {
        text += &format!("down: {}: {}\n", node.name, node.reason);
    }
    text
}

/// What `lab down` leaves of the state directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kept {
    All,
    Logs,
    Nothing,
}

fn down(layout: &Layout, kept: Kept) -> anyhow::Result<ExitCode> {
    if let Some(pid) = supervisor_pid(layout) {
        rustix::process::kill_process(pid, rustix::process::Signal::TERM).context("stopping the lab supervisor")?;
        let deadline = Instant::now() + Duration::from_secs(120);
        while rustix::process::test_kill_process(pid).is_ok() {
            if Instant::now() > deadline {
                eprintln!("the supervisor (pid {}) did not stop in 120 s; killing it", pid.as_raw_nonzero());
                let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
                break;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    } else if !layout.dir.exists() {
        eprintln!("no lab in {}", layout.dir.display());
        return Ok(ExitCode::SUCCESS);
    }
    match kept {
        Kept::All => eprintln!("stopped; state kept in {}", layout.dir.display()),
        Kept::Logs => {
            remove_state(layout, Some(&layout.logs()))?;
            eprintln!("stopped; logs kept in {}", layout.logs().display());
        }
        Kept::Nothing => {
            remove_state(layout, None)?;
            eprintln!("stopped and removed {}", layout.dir.display());
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Removes the state directory but `keep`; each node's and each disk's OSTree sysroot first (libostree marks
/// deployment directories immutable, which stops even root from deleting them). Side by side: a
/// lab's state is gigabytes in many files, and one removal after the other was most of `lab down`.
fn remove_state(layout: &Layout, keep: Option<&Path>) -> anyhow::Result<()> {
    let mut sysroots = Vec::new();
    if let Ok(nodes) = std::fs::read_dir(layout.nodes()) {
        for node in nodes {
            sysroots.push(layout.node(&node?.file_name().to_string_lossy()).sysroot);
        }
    }
    if let Ok(disks) = std::fs::read_dir(layout.disks()) {
        for disk in disks {
            sysroots.push(disk?.path());
        }
    }
    remove_in_parallel(&sysroots, mco_lab::node::remove_sysroot)?;
    let mut rest = Vec::new();
    for entry in std::fs::read_dir(&layout.dir).with_context(|| format!("reading {}", layout.dir.display()))? {
        let path = entry?.path();
        if Some(path.as_path()) != keep {
            rest.push(path);
        }
    }
    remove_in_parallel(&rest, |path| {
        let removed = if path.is_dir() && !path.is_symlink() {
            std::fs::remove_dir_all(path)
        } else {
            std::fs::remove_file(path)
        };
        removed.with_context(|| format!("removing {}", path.display()))
    })?;
    if keep.is_none() {
        std::fs::remove_dir(&layout.dir).with_context(|| format!("removing {}", layout.dir.display()))?;
    }
    Ok(())
}

/// `remove` on every path, each on a thread of its own; the first error.
fn remove_in_parallel(paths: &[PathBuf], remove: impl Fn(&Path) -> anyhow::Result<()> + Sync) -> anyhow::Result<()> {
    std::thread::scope(|scope| {
        let removals: Vec<_> = paths.iter().map(|path| scope.spawn(|| remove(path))).collect();
        removals
            .into_iter()
            .try_for_each(|removal| removal.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic)))
    })
}

fn install(layout: &Layout, image_version: Option<&str>) -> anyhow::Result<ExitCode> {
    use mco_lab::install;
    let state = running(layout)?;
    let registry = state.registry.as_deref().context("the lab's state names no registry")?;
    let mut overlay = install::applied_overlay(layout)?;
    let deploy = install::default_deploy_dir();
    let mco = std::env::current_exe().context("finding the mco binary")?;
    let kubectl = install::kubectl()?;
    runtime()?.block_on(async {
        eprintln!("lab: building mco's image from {}", mco.display());
        overlay.digest = install::build_image(&mco, &deploy, layout, registry, image_version).await?;
        eprintln!("lab: applying {} with image {}", deploy.join("overlays/lab").display(), overlay.digest);
        install::apply(&kubectl, &state.kubeconfig, &deploy, layout, &overlay).await?;
        let client = mco_controller::client(Some(&state.kubeconfig)).await?;
        let up: Vec<&String> = state.nodes.iter().filter(|n| !state.down.iter().any(|d| &d.name == *n)).collect();
        let masters = up.iter().filter(|n| state.pools.get(**n).is_some_and(|p| p == MASTER_POOL)).count();
        install::wait_controller(&client).await?;
        install::wait_daemons(&client, up.len()).await?;
        install::wait_servers(&client, masters).await
    })?;
    println!("{}", overlay.digest);
    Ok(ExitCode::SUCCESS)
}

fn apply(layout: &Layout, files: &[PathBuf]) -> anyhow::Result<ExitCode> {
    let state = running(layout)?;
    let mut objects = Vec::new();
    for file in files {
        objects.extend(mco_lab::apply::read_manifests(file)?);
    }
    runtime()?.block_on(async {
        let client = mco_controller::client(Some(&state.kubeconfig)).await?;
        for applied in mco_lab::apply::apply(&client, &objects).await? {
            println!("{applied} applied");
        }
        anyhow::Ok(())
    })?;
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use mco_lab::state::NodeReason;

    use super::*;

    #[test]
    fn status_lists_nodes_and_why_some_did_not_join() {
        let mut state = LabState {
            phase: Phase::Ready,
            message: "ready: 1 nodes".into(),
            kubeconfig: PathBuf::new(),
            platform: Platform::None,
            server: None,
            registry: None,
            signatures: None,
            prometheus: None,
            os_image: None,
            nodes: vec!["worker-0".into()],
            pending: vec![],
            not_joined: vec![],
            down: vec![],
            pools: Default::default(),
            roots: Default::default(),
        };
        assert_eq!(status_text("Ready", &state), "phase: Ready: ready: 1 nodes\nplatform: none\nnodes: worker-0\n");
        state.platform = Platform::Gcp;
        state.pending.push("worker-2".into());
        state.not_joined.push(NodeReason { name: "worker-1".into(), reason: "firstboot: too old".into() });
        state.down.push(NodeReason { name: "worker-0".into(), reason: "no kubelet".into() });
        assert_eq!(
            status_text("Ready", &state),
            "phase: Ready: ready: 1 nodes\nplatform: gcp\nnodes: worker-0\nadding: worker-2\nnot joined: worker-1: firstboot: too old\n\
             down: worker-0: no kubelet\n"
        );

        // The same for scripts, each node with its pool and directories.
        state.pools = [("worker-0", "worker"), ("worker-1", "worker"), ("worker-2", "infra")]
            .map(|(n, p)| (n.to_string(), p.to_string()))
            .into();
        state.registry = Some("127.0.0.1:5000".into());
        state.signatures = Some("http://127.0.0.1:5001".into());
        state.prometheus = Some("http://127.0.0.1:9090".into());
        state.kubeconfig = PathBuf::from("/lab/kubeconfig");
        // A running machine's root is seen through its PID 1.
        state.roots.insert("worker-0".into(), PathBuf::from("/proc/42/root"));
        let node = |name: &str, pool: &str, state: &str| {
            let root = (name == "worker-0").then_some("/proc/42/root");
            json!({"name": name, "pool": pool, "root": root,
                   "sysroot": format!("/lab/nodes/{name}/sysroot"), "state": state})
        };
        let mut not_joined = node("worker-1", "worker", "NotJoined");
        not_joined["reason"] = json!("firstboot: too old");
        let mut down = node("worker-0", "worker", "Down");
        down["reason"] = json!("no kubelet");
        assert_eq!(
            status_json("Ready", &state, &Layout::new("/lab")),
            json!({
                "phase": "Ready", "message": "ready: 1 nodes", "platform": "gcp", "kubeconfig": "/lab/kubeconfig",
                "server": null, "registry": "127.0.0.1:5000",
                "signatures": "http://127.0.0.1:5001", "signaturesDir": "/lab/signatures",
                "prometheus": "http://127.0.0.1:9090", "osImage": null,
                "nodes": [down, node("worker-2", "infra", "Adding"), not_joined],
            })
        );
    }
}
