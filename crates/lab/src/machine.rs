//! A lab node's machine: the node software beside mco's daemon, a real container runtime
//! (containerd with runc and the CNI bridge plugin) and a real kubelet, run as a machine would run
//! them. Each machine has
//! - its own mount namespace (held by a process that does nothing else), which containerd and the
//!   kubelet join: container root filesystems, pod network namespaces and volumes are mounted
//!   there and vanish with it;
//! - its own cgroup, holding those processes and the containerd shims; runc puts the containers
//!   in cgroups of their own (`k8s.io/<id>`, the kubelet's `cgroupRoot` notwithstanding), which
//!   powering off finds in containerd's state directory: it kills the machine's cgroup, then each
//!   of its containers', as pulling the plug would (a container left running would hold its
//!   host-network ports against its successor after the "reboot");
//! - its own address on the lab bridge and pod bridge, and its state in the node's root
//!   (`/var/lib/kubelet`, `/var/lib/containerd`, `/run/containerd`, `/etc/cni/net.d`, ...).
//!
//! The settings are the ones found to work on machines with
//! cgroups v1 and without CAP_SYS_RESOURCE (`failCgroupV1: false`, `cgroupsPerQOS: false`,
//! containerd's `restrict_oom_score_adj`, ...).

use std::ffi::CString;
use std::os::fd::{AsFd as _, OwnedFd};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use fn_error_context::context;
use rustix::fs::{Mode, OFlags};
use rustix::thread::LinkNameSpaceType;
use serde_json::json;
use tokio::process::Command;

use crate::boot::CGROUP_ROOT;
use crate::manifests::{KUBELET_CONFIG, KUBELET_CONFIG_DIR};
use crate::network;
use crate::process::Service;

/// The kubelet's healthz port (upstream's, the daemon's default).
const KUBELET_HEALTHZ_PORT: u16 = 10248;
/// The containerd namespace of the kubelet's containers, and the parent of their cgroups.
const CONTAINERD_NAMESPACE: &str = "k8s.io";
/// The cgroup v1 hierarchy the machine's processes are listed (and killed) by.
const PIDS_HIERARCHY: &str = "/sys/fs/cgroup/pids";
/// Where Debian's containernetworking-plugins are.
pub const CNI_BIN_DIR: &str = "/usr/lib/cni";
/// Host directories each machine has a private (tmpfs) copy of: containerd names pod network
/// namespaces in the first, the kubelet links container logs in the second, both by names that
/// only make sense on one machine.
const PRIVATE_DIRS: [&str; 2] = ["/run/netns", "/var/log/containers"];
/// Where each machine sees its node's root and sysroot, whichever node it is: the paths the lab
/// overlay's daemon DaemonSet mounts (`deploy/overlays/lab`), as a host's `/` and `/sysroot` are
/// the same paths on every node of a real cluster.
pub const MACHINE_ROOT: &str = "/run/mco-lab/machine/root";
pub const MACHINE_SYSROOT: &str = "/run/mco-lab/machine/sysroot";
/// containerd and its runc shim, built by `hack/kube-binaries.sh` beside the kubelet.
pub const CONTAINERD_BINARIES: [&str; 2] = ["containerd", "containerd-shim-runc-v2"];
/// Where each machine's containerd reads `hosts.toml` files, one directory per registry host, in
/// the node's root.
const REGISTRY_HOSTS: &str = "etc/containerd/certs.d";
/// How long containerd gets to serve its socket.
const RUNTIME_TIMEOUT: Duration = Duration::from_secs(30);
/// The kubelet's hard limit of open files here (`ulimit -Hn`): it fails to raise it further.
pub(crate) const MAX_OPEN_FILES: u64 = 20000;
/// The kubelet's static pod directory, in the node's root.
const STATIC_PODS: &str = "etc/kubernetes/manifests";
/// The machine's kubelet configuration drop-in, in the node's root.
const KUBELET_DROP_IN: &str = "etc/kubernetes/kubelet.conf.d/50-lab-machine.conf";

/// What a machine is: the node it runs and what it needs from the lab.
#[derive(Debug, Clone)]
pub struct MachineSpec {
    pub name: String,
    /// Picks its address and pod subnet.
    pub index: usize,
    pub zone: String,
    /// The node's root filesystem (where its state lives).
    pub root: PathBuf,
    /// The node's OSTree sysroot: the kubelet is the booted deployment's.
    pub sysroot: PathBuf,
    /// The kubelet's kubeconfig (client certificate `system:node:<name>`).
    pub kubeconfig: PathBuf,
    /// The CA that signs the API server's clients (the kubelet trusts it for its own clients).
    pub client_ca: PathBuf,
    /// `127.0.0.1:<port>`: the lab registry, plain HTTP, also reachable as [`crate::images::REGISTRY_ALIAS`].
    pub registry: String,
    /// The sandbox ("pause") image, by digest.
    pub sandbox_image: String,
    /// The cgroup (relative to each hierarchy's root) every machine's cgroup goes under.
    pub cgroup_parent: String,
    /// Where `<name>-kubelet.log` and `<name>-containerd.log` go.
    pub logs: PathBuf,
    /// `KEY[=VALUE]:EFFECT` taints the kubelet registers its Node with (a control-plane node's).
    pub taints: Vec<String>,
}

impl MachineSpec {
    fn cgroup(&self) -> String {
        format!("{}/{}", self.cgroup_parent, self.name)
    }

    fn path(&self, path: &str) -> PathBuf {
        self.root.join(path.trim_start_matches('/'))
    }

    fn containerd_socket(&self) -> PathBuf {
        self.path("run/containerd/containerd.sock")
    }
}

/// A powered-on machine.
pub struct Machine {
    spec: MachineSpec,
    holder: Service,
    mount_namespace: OwnedFd,
    containerd: Service,
    /// The booted deployment's kubelet binary.
    kubelet_binary: PathBuf,
    kubelet: Option<Service>,
}

impl Machine {
    /// Powers the machine on: its cgroup and mount namespace, containerd (waiting for its socket),
    /// then the kubelet, which registers the Node.
    #[context("Starting the kubelet and containerd of node {}", spec.name)]
    pub async fn power_on(spec: &MachineSpec) -> anyhow::Result<Machine> {
        let booted = booted_deployment(&spec.sysroot)?;
        let kubelet = booted.join("usr/bin/kubelet");
        if !kubelet.is_file() {
            anyhow::bail!(
                "the booted deployment {} has no kubelet (/usr/bin/kubelet): the node runs an OS image without the \
                 node software (its boot image, or a base image)",
                booted.display()
            );
        }
        let cgroup = Path::new(PIDS_HIERARCHY).join(spec.cgroup());
        std::fs::create_dir_all(&cgroup).with_context(|| format!("creating cgroup {}", cgroup.display()))?;
        write_files(spec)?;

        // Pod network namespaces and the kubelet's container log links are the machine's own,
        // on file systems that go with its mount namespace.
        for dir in PRIVATE_DIRS.iter().chain(&[MACHINE_ROOT, MACHINE_SYSROOT]) {
            std::fs::create_dir_all(dir).with_context(|| format!("creating {dir}"))?;
        }
        let mut mounts: Vec<String> =
            PRIVATE_DIRS.iter().map(|dir| format!("mount -t tmpfs mco-lab {dir} && ")).collect();
        for (dir, at) in [(&spec.root, MACHINE_ROOT), (&spec.sysroot, MACHINE_SYSROOT)] {
            // Recursive: the sysroot's /boot is a file system of its own.
            mounts.push(format!("mount --rbind '{}' {at} && ", dir.display()));
        }
        // And the kubelet reports the booted OS (its os-release) as the node's OS image.
        let os_release = booted.join("usr/lib/os-release");
        mounts.push(format!("mount --bind '{}' /etc/os-release && ", os_release.display()));
        let mut holder_cmd = Command::new("sh");
        holder_cmd.arg("-c").arg(format!("{}exec sleep infinity", mounts.concat()));
        let holder = spawn_in(spec, holder_cmd, "machine", None)?;
        let holder_pid = holder.pid().context("the machine's holder process has no pid")?;
        let mount_namespace = rustix::fs::open(
            format!("/proc/{holder_pid}/ns/mnt").as_str(),
            OFlags::RDONLY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .context("opening the machine's mount namespace")?;

        let [containerd_binary, _] = mco_testenv::find_binaries(CONTAINERD_BINARIES)?;
        let mut containerd_cmd = Command::new(&containerd_binary);
        containerd_cmd.arg("--config").arg(spec.path("etc/containerd/config.toml"));
        // containerd looks its shim up on PATH before beside itself: an older shim installed on
        // the host must not win over the one built with it.
        let bin_dir = containerd_binary.parent().context("containerd's path has a directory")?;
        let path = std::env::var_os("PATH").unwrap_or_default();
        let path = std::env::join_paths(std::iter::once(bin_dir.to_path_buf()).chain(std::env::split_paths(&path)))?;
        containerd_cmd.env("PATH", path);
        let mut containerd = spawn_in(spec, containerd_cmd, "containerd", Some(&mount_namespace))?;
        wait_for_socket(&mut containerd, &spec.containerd_socket()).await?;
        let mut machine =
            Machine { spec: spec.clone(), holder, mount_namespace, containerd, kubelet_binary: kubelet, kubelet: None };
        machine.start_kubelet()?;
        Ok(machine)
    }

    fn start_kubelet(&mut self) -> anyhow::Result<()> {
        let spec = &self.spec;
        let mut command = Command::new(&self.kubelet_binary);
        command
            .arg(format!("--config={}", spec.path(KUBELET_CONFIG).display()))
            .arg(format!("--config-dir={}", spec.path(KUBELET_CONFIG_DIR).display()))
            .arg(format!("--kubeconfig={}", spec.kubeconfig.display()))
            .arg(format!("--hostname-override={}", spec.name))
            .arg(format!("--node-ip={}", network::node_address(spec.index)))
            .arg(format!("--root-dir={}", spec.path("var/lib/kubelet").display()))
            .arg(format!("--cert-dir={}", spec.path("var/lib/kubelet/pki").display()))
            .arg(format!("--node-labels=topology.kubernetes.io/zone={}", spec.zone));
        if !spec.taints.is_empty() {
            command.arg(format!("--register-with-taints={}", spec.taints.join(",")));
        }
        self.kubelet = Some(spawn_in(spec, command, "kubelet", Some(&self.mount_namespace))?);
        Ok(())
    }

    /// Why the machine cannot run its node, if a process of it has exited (its log's end).
    pub fn failure(&mut self) -> anyhow::Result<Option<String>> {
        for service in [Some(&mut self.holder), Some(&mut self.containerd), self.kubelet.as_mut()].into_iter().flatten()
        {
            if let Some(status) = service.exited()? {
                return Ok(Some(format!("{} exited ({status}):\n{}", service.name, service.tail())));
            }
        }
        Ok(None)
    }

    /// Starts again a kubelet that has exited, as systemd would. What else has exited (containerd,
    /// the machine's holder) takes a power cycle: the returned reason.
    pub fn look_after(&mut self) -> anyhow::Result<Option<String>> {
        if let Some(kubelet) = self.kubelet.as_mut()
            && let Some(status) = kubelet.exited()?
        {
            tracing::warn!(node = self.spec.name, %status, "the kubelet exited; starting it again:\n{}", kubelet.tail());
            self.start_kubelet()?;
        }
        for service in [&mut self.holder, &mut self.containerd] {
            if let Some(status) = service.exited()? {
                return Ok(Some(format!("{} exited ({status}):\n{}", service.name, service.tail())));
            }
        }
        Ok(None)
    }

    /// Pulls the plug: every process and container of the machine is killed (SIGKILL), its
    /// mounts go with its mount namespace, its cgroups are removed.
    pub async fn power_off(self) {
        let spec = self.spec.clone();
        drop(self);
        // The machine's processes first (containerd and the kubelet can start no container after
        // that), then its containers, listed once it is down.
        if let Err(e) = kill_cgroup(&spec.cgroup()).await {
            tracing::warn!(node = spec.name, "powering off: {e:#}");
        }
        for cgroup in container_cgroups(&spec.root) {
            if let Err(e) = kill_cgroup(&cgroup).await {
                tracing::warn!(node = spec.name, "powering off: {e:#}");
            }
        }
    }
}

/// Powers off whatever is left of the machines under `cgroup_parent` (their roots in `nodes`,
/// one directory per node) and removes it: the lab's last step, so that nothing it started
/// outlives it.
pub async fn power_off_all(cgroup_parent: &str, nodes: &Path) -> anyhow::Result<()> {
    // Every container is tried even when something could not be killed.
    let mut result = kill_cgroup(cgroup_parent).await;
    let roots = std::fs::read_dir(nodes).into_iter().flatten().flatten().map(|node| node.path().join("root"));
    for cgroup in roots.flat_map(|root| container_cgroups(&root)) {
        if let Err(e) = kill_cgroup(&cgroup).await {
            result = result.and(Err(e));
        }
    }
    result
}

/// The cgroups of the containers the containerd of the machine with root `root` has run (its
/// state directory keeps one directory per task, named as its cgroup).
fn container_cgroups(root: &Path) -> Vec<String> {
    let tasks = root.join("run/containerd/io.containerd.runtime.v2.task").join(CONTAINERD_NAMESPACE);
    let entries = std::fs::read_dir(tasks).into_iter().flatten().flatten();
    entries.map(|task| format!("{CONTAINERD_NAMESPACE}/{}", task.file_name().to_string_lossy())).collect()
}

/// The absolute path of the deployment the sysroot booted.
fn booted_deployment(sysroot: &Path) -> anyhow::Result<PathBuf> {
    let status = mco_os::sysroot::status(sysroot, &mco_os::sysroot::default_cmdline(sysroot))?;
    let booted = status.booted().with_context(|| format!("{} has booted no deployment", sysroot.display()))?;
    Ok(sysroot.join(&booted.path))
}

/// Starts `command` in the machine's cgroup (and mount namespace), logging to the machine's log.
fn spawn_in(
    spec: &MachineSpec,
    mut command: Command,
    what: &str,
    mount_namespace: Option<&OwnedFd>,
) -> anyhow::Result<Service> {
    let procs = CString::new(format!("{PIDS_HIERARCHY}/{}/cgroup.procs", spec.cgroup()))?;
    let namespace = mount_namespace.map(|fd| fd.try_clone()).transpose()?;
    // SAFETY: the closure runs between fork and exec and only makes system calls (no allocation).
    unsafe {
        command.pre_exec(move || {
            let procs = rustix::fs::open(procs.as_c_str(), OFlags::WRONLY, Mode::empty())?;
            rustix::io::write(&procs, b"0")?;
            if let Some(namespace) = &namespace {
                rustix::thread::move_into_link_name_space(namespace.as_fd(), Some(LinkNameSpaceType::Mount))?;
            } else {
                // The holder: a new mount namespace, private to the host, shared inside (the
                // kubelet wants mount propagation between its volumes and the containers).
                rustix::thread::unshare_unsafe(rustix::thread::UnshareFlags::NEWNS)?;
                rustix::mount::mount_change(
                    c"/",
                    rustix::mount::MountPropagationFlags::PRIVATE | rustix::mount::MountPropagationFlags::REC,
                )?;
                rustix::mount::mount_change(
                    c"/",
                    rustix::mount::MountPropagationFlags::SHARED | rustix::mount::MountPropagationFlags::REC,
                )?;
            }
            Ok(())
        });
    }
    Service::spawn(&format!("{what} of {}", spec.name), command, &spec.logs.join(format!("{}-{what}.log", spec.name)))
}

async fn wait_for_socket(containerd: &mut Service, socket: &Path) -> anyhow::Result<()> {
    let deadline = Instant::now() + RUNTIME_TIMEOUT;
    while !socket.exists() {
        if let Some(status) = containerd.exited()? {
            anyhow::bail!("containerd exited ({status}) before serving {}:\n{}", socket.display(), containerd.tail());
        }
        if Instant::now() > deadline {
            anyhow::bail!(
                "containerd does not serve {} after {RUNTIME_TIMEOUT:?}:\n{}",
                socket.display(),
                containerd.tail()
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Ok(())
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

/// containerd's configuration and registry hosts, the CNI network, the kubelet's drop-in and
/// static pod directory, in the node's root.
fn write_files(spec: &MachineSpec) -> anyhow::Result<()> {
    let files = [
        ("etc/containerd/config.toml".to_string(), containerd_config(spec)),
        ("etc/cni/net.d/10-mco-lab.conflist".to_string(), cni_config(spec).to_string()),
        (KUBELET_DROP_IN.to_string(), kubelet_drop_in(spec).to_string()),
    ];
    for (path, text) in files.into_iter().chain(registry_hosts(spec)) {
        let path = spec.path(&path);
        std::fs::create_dir_all(path.parent().context("a file has a directory")?)?;
        std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
    }
    // Where the kubelet looks for static pods (none: the lab's control plane is not made of pods).
    std::fs::create_dir_all(spec.path(STATIC_PODS)).context("creating the static pod directory")
}

/// A containerd 2 configuration (version 4: the server settings are plugins'). The CRI images
/// plugin pins the sandbox image (the kubelet's image garbage collection keeps it) and resolves
/// registries by [`registry_hosts`]; the CRI runtime plugin runs runc with cgroupfs and the lab's
/// CNI network.
fn containerd_config(spec: &MachineSpec) -> String {
    let socket = spec.containerd_socket();
    let path = |p: &str| spec.path(p).display().to_string();
    format!(
        r#"version = 4
root = "{root}"
state = "{state}"
disabled_plugins = ["io.containerd.snapshotter.v1.zfs", "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]

[plugins."io.containerd.server.v1.grpc"]
  address = "{socket}"

[plugins."io.containerd.server.v1.ttrpc"]
  address = "{socket}.ttrpc"

[plugins."io.containerd.internal.v1.opt"]
  path = "{opt}"

[plugins."io.containerd.cri.v1.images".pinned_images]
  sandbox = "{sandbox}"

[plugins."io.containerd.cri.v1.images".registry]
  config_path = "{hosts}"

[plugins."io.containerd.cri.v1.runtime"]
  restrict_oom_score_adj = true

[plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"

[plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc.options]
  SystemdCgroup = false

[plugins."io.containerd.cri.v1.runtime".cni]
  bin_dirs = ["{CNI_BIN_DIR}"]
  conf_dir = "{cni}"
"#,
        root = path("var/lib/containerd"),
        state = path("run/containerd"),
        socket = socket.display(),
        opt = path("opt/containerd"),
        sandbox = spec.sandbox_image,
        hosts = path(REGISTRY_HOSTS),
        cni = path("etc/cni/net.d"),
    )
}

/// The `hosts.toml` files (paths in the node's root) sending pulls from the lab registry, by its
/// address or by [`crate::images::REGISTRY_ALIAS`], to its loopback port, over plain HTTP.
fn registry_hosts(spec: &MachineSpec) -> [(String, String); 2] {
    let server = format!("server = \"http://{}\"\n", spec.registry);
    [spec.registry.as_str(), crate::images::REGISTRY_ALIAS]
        .map(|host| (format!("{REGISTRY_HOSTS}/{host}/hosts.toml"), server.clone()))
}

/// One bridge per node, its gateway on the lab's side; the nodes share the lab's namespace, so
/// its routing table already reaches every node's pods.
fn cni_config(spec: &MachineSpec) -> serde_json::Value {
    json!({
        "cniVersion": "0.4.0",
        "name": "mco-lab",
        "plugins": [
            {
                "type": "bridge",
                "bridge": format!("mco-pods{}", spec.index),
                "isGateway": true,
                "ipMasq": false,
                "hairpinMode": true,
                "ipam": {
                    "type": "host-local",
                    "ranges": [[{"subnet": network::pod_subnet(spec.index)}]],
                    "routes": [{"dst": "0.0.0.0/0"}],
                    "dataDir": spec.path("var/lib/cni/networks").display().to_string(),
                },
            },
            {"type": "portmap", "capabilities": {"portMappings": true}},
        ],
    })
}

/// The machine's drop-in over the pool's kubelet configuration (which the node's rendered
/// MachineConfig wrote): what every lab machine needs ([`crate::node_os::lab_kubelet_settings`]),
/// and what differs from node to node when all share one file system; no QoS cgroups, no
/// local storage isolation, and no system cgroup (the kubelet would move every process of the
/// host's root cgroup into it: into the machine, which a power-off kills).
fn kubelet_drop_in(spec: &MachineSpec) -> serde_json::Value {
    let mut settings = crate::node_os::lab_kubelet_settings();
    settings.extend(
        [
            ("cgroupDriver", json!("cgroupfs")),
            ("cgroupsPerQOS", json!(false)),
            ("localStorageCapacityIsolation", json!(false)),
            ("systemCgroups", json!("")),
            ("systemReservedCgroup", json!("")),
            ("kubeReservedCgroup", json!("")),
            ("staticPodPath", json!(spec.path(STATIC_PODS).display().to_string())),
            ("address", json!(network::node_address(spec.index).to_string())),
            // On the node's own address, at upstream's port, where the node's daemon checks it.
            ("healthzBindAddress", json!(network::node_address(spec.index).to_string())),
            ("healthzPort", json!(KUBELET_HEALTHZ_PORT)),
            ("containerRuntimeEndpoint", json!(format!("unix://{}", spec.containerd_socket().display()))),
            ("podLogsDir", json!(spec.path("var/log/pods").display().to_string())),
            ("authentication", json!({"x509": {"clientCAFile": spec.client_ca.display().to_string()}})),
            ("cgroupRoot", json!(format!("/{}", spec.cgroup()))),
        ]
        .map(|(key, value)| (key.to_string(), value)),
    );
    serde_json::Value::Object(settings)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(index: usize) -> MachineSpec {
        MachineSpec {
            name: format!("worker-{index}"),
            index,
            zone: "lab-a".into(),
            root: PathBuf::from(format!("/lab/nodes/worker-{index}/root")),
            sysroot: "/lab/nodes/worker/sysroot".into(),
            kubeconfig: "/lab/kubelet.kubeconfig".into(),
            client_ca: "/lab/ca.crt".into(),
            registry: "127.0.0.1:5000".into(),
            sandbox_image: "127.0.0.1:5000/lab/pause@sha256:00".into(),
            cgroup_parent: "mco-lab-1".into(),
            logs: "/lab/logs".into(),
            taints: vec![],
        }
    }

    #[test]
    fn every_machine_has_its_own_runtime_state_network_and_cgroup() {
        let [a, b] = [spec(0), spec(1)];
        for (of_a, of_b) in [
            (containerd_config(&a), containerd_config(&b)),
            (cni_config(&a).to_string(), cni_config(&b).to_string()),
            (kubelet_drop_in(&a).to_string(), kubelet_drop_in(&b).to_string()),
        ] {
            assert_ne!(of_a, of_b);
        }
        let config = containerd_config(&a);
        for wanted in [
            r#"root = "/lab/nodes/worker-0/root/var/lib/containerd""#,
            r#"address = "/lab/nodes/worker-0/root/run/containerd/containerd.sock""#,
            "restrict_oom_score_adj = true",
            r#"sandbox = "127.0.0.1:5000/lab/pause@sha256:00""#,
            r#"config_path = "/lab/nodes/worker-0/root/etc/containerd/certs.d""#,
        ] {
            assert!(config.contains(wanted), "{wanted} not in\n{config}");
        }
        let server = "server = \"http://127.0.0.1:5000\"\n".to_string();
        assert_eq!(
            registry_hosts(&a),
            [
                ("etc/containerd/certs.d/127.0.0.1:5000/hosts.toml".to_string(), server.clone()),
                ("etc/containerd/certs.d/lab-registry.local/hosts.toml".to_string(), server),
            ]
        );
        assert_eq!(cni_config(&b)["plugins"][0]["ipam"]["ranges"][0][0]["subnet"], "10.244.2.0/24");
        assert_eq!(kubelet_drop_in(&b)["cgroupRoot"], "/mco-lab-1/worker-1");
        assert_eq!(kubelet_drop_in(&b)["address"], "10.200.0.11");
        // Whatever the pool's configuration says (upstream's template too), the kubelet runs on
        // cgroups v1 here, and touches no cgroup or file of the host's.
        assert_eq!(kubelet_drop_in(&b)["systemCgroups"], "");
        assert_eq!(kubelet_drop_in(&b)["staticPodPath"], "/lab/nodes/worker-1/root/etc/kubernetes/manifests");
        assert_eq!(
            (&kubelet_drop_in(&b)["failCgroupV1"], &kubelet_drop_in(&b)["cgroupsPerQOS"]),
            (&json!(false), &json!(false))
        );
    }
}
