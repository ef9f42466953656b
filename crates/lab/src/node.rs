//! A lab node: an OSTree sysroot installed from the boot image, a root directory the real
//! Ignition client writes on first boot, `mco daemon firstboot` (the pivot to the pool's OS image
//! before the kubelet would start), a "reboot" into the new deployment, and a Node object (what the
//! kubelet would register), after which `mco daemon run` manages it like any cluster node.

use std::ffi::OsStr;
use std::io::Write as _;
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};

use anyhow::Context as _;
use fn_error_context::context;
use k8s_openapi::api::core::v1::Node;
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use serde_json::json;

use mco_daemon::apply::REBOOT_REQUEST;
use mco_daemon::fsutil::host_path;
use mco_daemon::journal::DIRECTORY_ROOT_BOOT_ID;

use crate::layout::{Layout, NodeDirs};
use crate::process::run_tool;

/// Where Debian's `ignition` package installs the client (it is not on PATH).
pub const IGNITION: &str = "/usr/lib/dracut/modules.d/30ignition/ignition";
/// Zones lab nodes are spread over, round robin, so rollouts show the zone ordering.
const ZONES: [&str; 2] = ["lab-a", "lab-b"];

/// One node of the lab.
#[derive(Debug, Clone)]
pub struct LabNode {
    pub name: String,
    pub pool: String,
    pub zone: String,
    pub dirs: NodeDirs,
}

impl LabNode {
    pub fn new(layout: &Layout, pool: &str, index: usize) -> Self {
        let name = format!("{pool}-{index}");
        LabNode { dirs: layout.node(&name), zone: ZONES[index % ZONES.len()].to_string(), pool: pool.to_string(), name }
    }

    /// The arguments that select this node's root and sysroot for `mco daemon`.
    pub fn node_args(&self) -> Vec<&OsStr> {
        vec![OsStr::new("--root"), self.dirs.root.as_os_str(), OsStr::new("--sysroot"), self.dirs.sysroot.as_os_str()]
    }

    pub fn reboot_requested(&self) -> bool {
        host_path(&self.dirs.root, REBOOT_REQUEST).exists()
    }

    /// Install, first boot with Ignition from `server`, firstboot pivot, reboot.
    #[context("Provisioning node {}", self.name)]
    pub async fn provision(&self, mco: &Path, layout: &Layout, boot_image: &str, server: &str) -> anyhow::Result<()> {
        let log = layout.log(&self.name);
        let env = [("CONTAINERS_REGISTRIES_CONF", layout.registries_conf().into_os_string())];
        let env: Vec<(&str, &OsStr)> = env.iter().map(|(k, v)| (*k, v.as_os_str())).collect();
        run_tool(
            mco,
            [
                OsStr::new("image"),
                "install".as_ref(),
                "--sysroot".as_ref(),
                self.dirs.sysroot.as_os_str(),
                "--image".as_ref(),
                boot_image.as_ref(),
            ],
            &env,
            &log,
        )
        .await?;
        prepare_root(&self.dirs.root)?;
        self.new_boot()?;
        let stub = self.dirs.ignition.join("stub.ign");
        std::fs::create_dir_all(&self.dirs.ignition)?;
        let url = server.to_string();
        let ca = layout.certs().join("ca.crt");
        let text = run_tool(
            mco,
            [
                OsStr::new("ignition"),
                "stub".as_ref(),
                "--pool".as_ref(),
                self.pool.as_ref(),
                "--url".as_ref(),
                url.as_ref(),
                "--ca".as_ref(),
                ca.as_os_str(),
                "--version".as_ref(),
                "3.3.0".as_ref(),
            ],
            &env,
            &log,
        )
        .await?;
        std::fs::write(&stub, text)?;
        self.ignition(
            layout,
            &stub,
            "fetch",
            &[OsStr::new("-neednet"), self.dirs.ignition.join("neednet").as_os_str()],
        )
        .await?;
        self.ignition(layout, &stub, "files", &[OsStr::new("-root"), self.dirs.root.as_os_str()]).await?;
        let mut firstboot = vec![OsStr::new("daemon"), "firstboot".as_ref()];
        firstboot.extend(self.node_args());
        run_tool(mco, firstboot, &env, &log).await?;
        self.reboot(mco, layout).await
    }

    /// Runs one stage of the real Ignition client against the stub.
    async fn ignition(&self, layout: &Layout, stub: &Path, stage: &str, extra: &[&OsStr]) -> anyhow::Result<()> {
        let cache = self.dirs.ignition.join("config.json");
        let state = self.dirs.ignition.join("state");
        let mut args: Vec<&OsStr> = vec![
            "-platform".as_ref(),
            "file".as_ref(),
            "-stage".as_ref(),
            stage.as_ref(),
            "-log-to-stdout".as_ref(),
            "-config-cache".as_ref(),
            cache.as_os_str(),
            "-state-file".as_ref(),
            state.as_os_str(),
        ];
        args.extend(extra);
        let path = format!("{}:{}", layout.bin().display(), std::env::var("PATH").unwrap_or_default());
        let log = layout.log(&self.name);
        let said = run_tool(
            Path::new(IGNITION),
            args,
            &[("IGNITION_CONFIG_FILE", stub.as_os_str()), ("PATH", path.as_ref())],
            &log,
        )
        .await
        .with_context(|| format!("Ignition {stage} stage"))?;
        // Ignition logs to stdout: keep it with the node's log.
        std::fs::OpenOptions::new().append(true).open(&log)?.write_all(said.as_bytes())?;
        Ok(())
    }

    /// What a reboot does to a lab node: the bootloader boots the default deployment (its
    /// kernel command line becomes the booted one), /run starts empty (so the reboot request is
    /// consumed) and the boot has a new id.
    #[context("Rebooting node {}", self.name)]
    pub async fn reboot(&self, mco: &Path, layout: &Layout) -> anyhow::Result<()> {
        run_tool(
            mco,
            [OsStr::new("image"), "boot".as_ref(), "--sysroot".as_ref(), self.dirs.sysroot.as_os_str()],
            &[],
            &layout.log(&self.name),
        )
        .await?;
        self.new_boot()
    }

    /// A fresh /run (a tmpfs on real machines) holding this boot's id.
    fn new_boot(&self) -> anyhow::Result<()> {
        let run = self.dirs.root.join("run");
        match std::fs::remove_dir_all(&run) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                return Err(e).with_context(|| format!("emptying {}", run.display()));
            }
            _ => {}
        }
        std::fs::create_dir_all(&run)?;
        let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default().as_nanos();
        let id = format!("{:032x}", nanos ^ (u128::from(std::process::id()) << 64));
        // The daemon compares boot ids to tell whether a reboot it requested happened.
        std::fs::write(host_path(&self.dirs.root, DIRECTORY_ROOT_BOOT_ID), format!("{id}\n"))
            .context("writing the boot id")
    }

    /// Registers the Node as the kubelet does when it starts, or marks it Ready again.
    #[context("Registering node {}", self.name)]
    pub async fn register(&self, nodes: &Api<Node>) -> anyhow::Result<()> {
        if nodes.get_opt(&self.name).await?.is_none() {
            let node: Node = serde_json::from_value(json!({
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {
                    "name": self.name,
                    "labels": {
                        "kubernetes.io/hostname": self.name,
                        "kubernetes.io/os": "linux",
                        "kubernetes.io/arch": "amd64",
                        format!("node-role.kubernetes.io/{}", self.pool): "",
                        "topology.kubernetes.io/zone": self.zone,
                    },
                },
            }))?;
            nodes.create(&PostParams::default(), &node).await?;
        }
        self.set_ready(nodes, true).await
    }

    /// The kubelet's Ready condition (false while the node reboots).
    pub async fn set_ready(&self, nodes: &Api<Node>, ready: bool) -> anyhow::Result<()> {
        let now = k8s_openapi::jiff::Timestamp::now();
        let condition = |type_: &str, status: bool, reason: &str| {
            json!({
                "type": type_,
                "status": if status { "True" } else { "False" },
                "reason": reason,
                "lastHeartbeatTime": now,
                "lastTransitionTime": now,
            })
        };
        let status = json!({"status": {"conditions": [
            condition("Ready", ready, if ready { "KubeletReady" } else { "KubeletNotReady" }),
            condition("DiskPressure", false, "KubeletHasNoDiskPressure"),
            condition("MemoryPressure", false, "KubeletHasSufficientMemory"),
        ]}});
        nodes
            .patch_status(&self.name, &PatchParams::default(), &Patch::Strategic(&status))
            .await
            .with_context(|| format!("setting node {} Ready={ready}", self.name))?;
        Ok(())
    }
}

/// A directory Ignition accepts as an OS root (TESTING.md): passwd/group files with root, an
/// SELinux config, every directory traversable.
fn prepare_root(root: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(root.join("etc/selinux")).with_context(|| format!("creating {}", root.display()))?;
    for (file, text) in [
        ("etc/selinux/config", "SELINUXTYPE=targeted\n"),
        ("etc/passwd", "root:x:0:0:root:/root:/bin/sh\ncore:x:1000:1000:core:/home/core:/bin/sh\n"),
        ("etc/group", "root:x:0:\ncore:x:1000:\n"),
        ("etc/shadow", "root:*:19000:0:99999:7:::\ncore:*:19000:0:99999:7:::\n"),
        ("etc/gshadow", "root:*::\ncore:!::\n"),
    ] {
        std::fs::write(root.join(file), text).with_context(|| format!("writing {file}"))?;
    }
    for dir in [root, &root.join("etc")] {
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755))?;
    }
    Ok(())
}

/// The no-op `setfiles` Ignition runs on lab roots (no SELinux policy there).
pub fn write_shims(layout: &Layout) -> anyhow::Result<PathBuf> {
    let bin = layout.bin();
    std::fs::create_dir_all(&bin)?;
    let setfiles = bin.join("setfiles");
    std::fs::write(&setfiles, "#!/bin/sh\ncat >/dev/null\n")?;
    std::fs::set_permissions(&setfiles, std::fs::Permissions::from_mode(0o755))?;
    Ok(bin)
}
