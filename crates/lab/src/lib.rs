//! The local lab: a whole cluster on one machine, in a network namespace of its own. A real etcd,
//! kube-apiserver, kube-controller-manager, kube-scheduler and kube-proxy, a real OCI registry
//! holding OSTree-in-OCI images and container images, and nodes that are machines booting their
//! OSTree deployment with systemd as PID 1 (the real Ignition on their first boot, their kubelet
//! and containerd started by their systemd), with mco installed on them as pods from `deploy/`.
//!
//! [`supervisor`] runs it ([`supervisor::supervise`], started detached by `mco lab up`);
//! [`control_plane`] is kube-controller-manager, kube-scheduler and kube-proxy; [`machine`] and
//! [`boot`] are a machine's power and boot; [`disk`] the boot images' disks; [`node_os`] what the
//! lab's OS images and machines' disks hold; [`network`] the lab's network namespace;
//! [`manifests`] are the objects a new cluster starts with (pure); [`node`] is one node's life;
//! [`state`] is what the supervisor reports; [`layout`] is where everything lives; [`request`]
//! adds nodes to a running lab.

pub mod apply;
pub mod boot;
pub mod control_plane;
pub mod disk;
pub mod images;
pub mod install;
pub mod layout;
pub mod machine;
pub mod manifests;
pub mod monitoring;
pub mod network;
pub mod node;
pub mod node_os;
pub mod process;
pub mod rbac_audit;
pub mod request;
pub mod state;
pub mod supervisor;

use std::path::Path;

/// What the lab needs of the machine (with Prometheus if `prometheus`), checked before anything
/// starts, each missing piece named.
pub fn check_host(prometheus: bool) -> anyhow::Result<()> {
    let mut missing = Vec::new();
    if !rustix::process::geteuid().is_root() {
        missing.push("root privileges (Ignition and the daemon write files owned by root; run with sudo)".to_string());
    }
    if !Path::new(node::IGNITION).is_file() {
        missing.push(format!("the Ignition client at {} (Debian package `ignition`)", node::IGNITION));
    }
    for (tool, package) in [
        ("docker-registry", "docker-registry"),
        ("skopeo", "skopeo"),
        ("ostree", "ostree"),
        ("buildah", "buildah"),
        ("runc", "runc"),
        ("iptables", "iptables"),
        ("ip", "iproute2"),
    ]
    .into_iter()
    .chain(prometheus.then_some(("prometheus", "prometheus")))
    {
        if !on_path(tool) {
            missing.push(format!("`{tool}` on PATH (Debian package `{package}`)"));
        }
    }
    for (file, package) in [
        (format!("{}/bridge", machine::CNI_BIN_DIR), "containernetworking-plugins"),
        (images::BUSYBOX.into(), "busybox-static"),
    ] {
        if !Path::new(&file).is_file() {
            missing.push(format!("{file} (Debian package `{package}`)"));
        }
    }
    let [controller_manager, scheduler, proxy] = control_plane::BINARIES;
    let [containerd, shim] = machine::CONTAINERD_BINARIES;
    if let Err(e) = mco_testenv::find_binaries([
        "kube-apiserver",
        "etcd",
        controller_manager,
        scheduler,
        proxy,
        "kubelet",
        containerd,
        shim,
    ]) {
        missing.push(e.to_string());
    }
    if missing.is_empty() {
        Ok(())
    } else {
        anyhow::bail!(
            "the lab cannot start on this machine; missing:\n  - {}\n(`bash hack/setup.sh` installs them)",
            missing.join("\n  - ")
        )
    }
}

fn on_path(tool: &str) -> bool {
    std::env::var_os("PATH").is_some_and(|path| std::env::split_paths(&path).any(|dir| dir.join(tool).is_file()))
}
