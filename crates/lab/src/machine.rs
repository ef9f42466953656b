//! A lab node's machine, as its cloud runs it: booted by the lab's firmware ([`crate::boot`]) from
//! its disk (its OSTree sysroot), with systemd as PID 1 starting containerd, the kubelet and
//! whatever the pool's config enables; plugged into the lab's network as its node's address, the
//! lab's loopback services (the API server, the registry, the Machine Config Server) forwarded to
//! its loopback. The lab sees how each boot ends (a reboot, a power-off, a crash) and powers it on
//! again or leaves it off; powering off pulls the plug on every process of the machine.
//!
//! The kubelet's settings are the ones found to work on machines with cgroups v1 and without
//! CAP_SYS_RESOURCE ([`crate::node_os`]).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use fn_error_context::context;

use crate::boot::{BootSpec, Booted, CGROUP_ROOT, Halt};
use crate::network;

/// The cgroup v1 hierarchy a machine's processes are listed (and killed) by.
const PIDS_HIERARCHY: &str = "/sys/fs/cgroup/pids";
/// Where Debian's containernetworking-plugins are.
pub const CNI_BIN_DIR: &str = "/usr/lib/cni";
/// containerd and its runc shim, built by `hack/kube-binaries.sh` beside the kubelet.
pub const CONTAINERD_BINARIES: [&str; 2] = ["containerd", "containerd-shim-runc-v2"];
/// The kubelet's hard limit of open files here (`ulimit -Hn`): it fails to raise it further.
pub(crate) const MAX_OPEN_FILES: u64 = 20000;
/// How long a machine's firmware gets to start its PID 1.
const FIRMWARE_TIMEOUT: Duration = Duration::from_secs(60);

/// What a machine is: its node's name and network index, its disk, and the lab's ports it reaches
/// on its loopback.
#[derive(Debug, Clone)]
pub struct MachineSpec {
    pub boot: BootSpec,
    /// Picks its address (and pod subnet).
    pub index: usize,
    /// The lab's loopback ports forwarded to the machine's.
    pub ports: Vec<u16>,
    /// Where the lab logs plugging its cable in.
    pub network_log: PathBuf,
}

/// A powered-on machine.
pub struct Machine {
    booted: Booted,
    init: rustix::process::Pid,
    forwarding: Vec<tokio::task::JoinHandle<()>>,
}

impl Machine {
    /// Powers the machine on (the bootloader's default deployment), forwards the lab's ports into
    /// it and plugs its cable in (it boots once it has a network).
    #[context("Powering on machine {}", spec.boot.name)]
    pub async fn power_on(mco: &Path, spec: &MachineSpec) -> anyhow::Result<Machine> {
        let mut booted = Booted::power_on(mco, &spec.boot).await?;
        let deadline = Instant::now() + FIRMWARE_TIMEOUT;
        let init = loop {
            if let Some(init) = booted.init_pid() {
                break init;
            }
            if let Some(halt) = booted.halted()? {
                anyhow::bail!(
                    "the firmware ended ({halt:?}) before the machine's init started:\n{}",
                    booted.console_tail()
                );
            }
            anyhow::ensure!(
                Instant::now() < deadline,
                "no init after {FIRMWARE_TIMEOUT:?}:\n{}",
                booted.console_tail()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        let mut machine = Machine { booted, init, forwarding: Vec::new() };
        let plugged = async {
            machine.forwarding = network::forward_into(init, &spec.ports)?;
            network::plug_in(init, spec.index, &spec.network_log).await
        };
        if let Err(e) = plugged.await {
            machine.power_off().await;
            return Err(e);
        }
        Ok(machine)
    }

    /// How the boot ended, once it has.
    pub fn halted(&mut self) -> anyhow::Result<Option<Halt>> {
        self.booted.halted()
    }

    /// The machine's `/` as the lab sees it (through its PID 1).
    pub fn root(&self) -> PathBuf {
        PathBuf::from(format!("/proc/{}/root", self.init.as_raw_nonzero()))
    }

    /// Why the machine, booted, can never be a node, as its console would show: the OS image it
    /// booted has no kubelet.
    pub fn fault(&self) -> Option<String> {
        let root = self.root();
        // Until its init pivots into the deployment, the machine's root is the host's.
        let booted = root.join("run/ostree-booted").exists();
        (booted && !root.join("usr/bin/kubelet").exists())
            .then(|| "the booted OS image has no kubelet (/usr/bin/kubelet): kubelet.service cannot start".to_string())
    }

    /// The end of the machine's console.
    pub fn console_tail(&self) -> String {
        self.booted.console_tail()
    }

    /// Pulls the plug: every process of the machine killed (its containers are in its cgroup),
    /// its cgroups removed, its ports no longer forwarded.
    pub async fn power_off(self) {
        self.forwarding.iter().for_each(tokio::task::JoinHandle::abort);
        let name = self.booted.spec.name.clone();
        if let Err(e) = self.booted.power_off().await {
            tracing::warn!(node = name, "powering off: {e:#}");
        }
    }
}

/// Powers off whatever is left of the machines under `cgroup_parent` and removes it: the lab's
/// last step, so that nothing it started outlives it.
pub async fn power_off_all(cgroup_parent: &str) -> anyhow::Result<()> {
    kill_cgroup(cgroup_parent).await
}

/// Kills every process in the cgroup `cgroup` of every hierarchy until none is left, then
/// removes its directories.
pub(crate) async fn kill_cgroup(cgroup: &str) -> anyhow::Result<()> {
    let top = Path::new(PIDS_HIERARCHY).join(cgroup);
    for _ in 0..100 {
        let pids = cgroup_pids(&top)?;
        if pids.is_empty() {
            break;
        }
        for pid in pids {
            if let Some(pid) = rustix::process::Pid::from_raw(pid) {
                let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    for hierarchy in std::fs::read_dir(CGROUP_ROOT)? {
        let dir = hierarchy?.path().join(cgroup);
        if dir.is_dir() {
            remove_cgroup(&dir).await.with_context(|| format!("removing cgroup {}", dir.display()))?;
        }
    }
    Ok(())
}

/// The pids in `dir` and its descendants.
fn cgroup_pids(dir: &Path) -> anyhow::Result<Vec<i32>> {
    let mut pids = Vec::new();
    let Ok(procs) = std::fs::read_to_string(dir.join("cgroup.procs")) else { return Ok(pids) };
    pids.extend(procs.lines().filter_map(|line| line.trim().parse::<i32>().ok()));
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        if entry.file_type()?.is_dir() {
            pids.extend(cgroup_pids(&entry.path())?);
        }
    }
    Ok(pids)
}

/// Removes an empty cgroup tree, deepest first (a cgroup's directory holds only control files,
/// which rmdir takes with it). A cgroup whose last process is exiting is busy for a moment.
async fn remove_cgroup(dir: &Path) -> anyhow::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        if entry.file_type()?.is_dir() {
            Box::pin(remove_cgroup(&entry.path())).await?;
        }
    }
    let mut attempts = 0;
    loop {
        match std::fs::remove_dir(dir) {
            Ok(()) => return Ok(()),
            Err(e) if e.raw_os_error() == Some(rustix::io::Errno::BUSY.raw_os_error()) && attempts < 50 => {
                attempts += 1;
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(e) => return Err(e.into()),
        }
    }
}
