//! The lab's OCI registry (Debian's docker-registry on loopback) and the OS images in it, built
//! with `mco image`: an older boot image the nodes are installed from, the base OS image, and the
//! node image derived from it (`FROM base` + a kubelet) that the pools run, pinned by digest;
//! on demand, a boot image too old for boot image skew enforcement. Beside them, the container
//! images the nodes' containerd runs, built here because nothing is pulled from the internet: the
//! sandbox ("pause") image and the example workload's image, both a static busybox.

use std::ffi::OsStr;
use std::path::Path;
use std::time::Duration;

use anyhow::Context as _;
use fn_error_context::context;
use tokio::process::Command;

use crate::layout::Layout;
use crate::process::{Service, run_tool};

/// Kernel version of the test OS trees.
const KERNEL: &str = "6.6.1-100.mco.x86_64";
/// OS version of the boot image the nodes are installed from.
pub const BOOT_VERSION: &str = "9.6.20260101-0";
/// OS version of a boot image too old for boot image skew enforcement (RHEL 8.6, below 9.2).
pub const OLD_BOOT_VERSION: &str = "412.86.202301010000-0";
/// OS version of the base image the pools run.
pub const BASE_VERSION: &str = "9.6.20261101-0";

/// The name pods give the lab registry (`REGISTRY_ALIAS/lab/workload:1`): every node's containerd
/// pulls it from the registry's loopback port, which changes from lab to lab.
pub const REGISTRY_ALIAS: &str = "lab-registry.local";
/// The example workload's image, as manifests name it.
pub const WORKLOAD_IMAGE: &str = "lab-registry.local/lab/workload:1";
/// Where Debian's busybox-static installs busybox.
pub const BUSYBOX: &str = "/bin/busybox";
/// The commands the container images have (busybox applets).
const APPLETS: [&str; 17] = [
    "sh", "sleep", "httpd", "hostname", "mkdir", "wget", "cat", "echo", "ls", "ps", "nc", "env", "true", "timeout",
    "ip", "kill", "grep",
];
/// The sandbox's only process: waits, reaps, and exits on SIGTERM (as PID 1 it would otherwise
/// ignore it), as upstream's pause does.
const PAUSE_SCRIPT: &str = "trap 'exit 0' TERM INT; while :; do sleep 3600 & wait $!; done";
/// The workload: its pod name over HTTP on port 8080, stopping at once on SIGTERM.
const WORKLOAD_SCRIPT: &str = "trap 'exit 0' TERM INT; mkdir -p /tmp/www && hostname > /tmp/www/index.html && httpd -f -p 8080 -h /tmp/www & wait $!";

/// The images, each pinned by digest.
#[derive(Debug, Clone)]
pub struct LabImages {
    /// `HOST/mco/os@sha256:…`: the older image a new node is installed from.
    pub boot: String,
    /// `HOST/mco/os@sha256:…`
    pub base: String,
    /// `HOST/mco/node@sha256:…`: the pools' OS image.
    pub node: String,
}

/// Starts the registry on `port`, storing blobs in the lab directory.
#[context("Starting the OCI registry")]
pub async fn start_registry(layout: &Layout, port: u16) -> anyhow::Result<Service> {
    let dir = layout.registry();
    std::fs::create_dir_all(&dir)?;
    let config = mco_os::registry::write_config(&dir, port)?;
    std::fs::write(layout.registries_conf(), mco_os::registry::registries_conf_text(port))?;
    let mut command = Command::new("docker-registry");
    command.arg("serve").arg(&config);
    let mut service = Service::spawn("registry", command, &layout.log("registry"))?;
    wait_for_port(&mut service, port).await?;
    Ok(service)
}

/// Starts the signature store on `port`: busybox's httpd serving the lab directory's signatures,
/// as a registry's lookaside server does (`mco_os::signing`).
#[context("Starting the signature store")]
pub async fn start_signature_store(layout: &Layout, port: u16) -> anyhow::Result<Service> {
    let dir = layout.signatures();
    std::fs::create_dir_all(&dir)?;
    let command = Command::from(mco_os::signing::server_command(&dir, port));
    let mut service = Service::spawn("signatures", command, &layout.log("signatures"))?;
    wait_for_port(&mut service, port).await?;
    Ok(service)
}

/// Waits until something accepts connections on 127.0.0.1:`port`, failing early if the service exits.
pub async fn wait_for_port(service: &mut Service, port: u16) -> anyhow::Result<()> {
    for _ in 0..600 {
        if tokio::net::TcpStream::connect(("127.0.0.1", port)).await.is_ok() {
            return Ok(());
        }
        if let Some(status) = service.exited()? {
            anyhow::bail!("{} exited ({status}) before listening on port {port}:\n{}", service.name, service.tail());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    anyhow::bail!("{} is not listening on port {port} after 60 s:\n{}", service.name, service.tail())
}

/// Builds the three images into the registry at `registry` (`127.0.0.1:<port>`).
#[context("Building the OS images")]
pub async fn build(mco: &Path, layout: &Layout, registry: &str) -> anyhow::Result<LabImages> {
    let dir = layout.images();
    let log = layout.log("images");
    let conf = layout.registries_conf();
    let env = [("CONTAINERS_REGISTRIES_CONF", conf.as_os_str())];
    let boot = build_os_image(mco, layout, registry, BOOT_VERSION, "boot").await?;
    let base = build_os_image(mco, layout, registry, BASE_VERSION, "base").await?;

    // The node image: base + the node's own binaries, as a `FROM base` build would add them.
    let layer = dir.join("node-layer");
    std::fs::create_dir_all(&layer)?;
    let [kubelet] = mco_testenv::find_binaries(["kubelet"])?;
    std::fs::copy(&kubelet, layer.join("kubelet")).with_context(|| format!("copying {}", kubelet.display()))?;
    let from = format!("docker://{base}");
    let add = format!("{}:/usr/bin", layer.display());
    let to = format!("docker://{registry}/mco/node:latest");
    let digest = run_tool(
        mco,
        [
            "image",
            "build",
            "--from",
            &from,
            "--add",
            &add,
            "--label",
            "io.mco.lab.role=node",
            "--compression-fast",
            "--to",
            &to,
        ],
        &env,
        &log,
    )
    .await?;
    Ok(LabImages { boot, base, node: format!("{registry}/mco/node@{}", digest.trim()) })
}

/// Builds the sandbox image and the workload image into the registry at `registry`; returns the
/// sandbox image's pinned name (the workload's is [`WORKLOAD_IMAGE`], a tag, as manifests use).
#[context("Building the pause and workload images")]
pub async fn build_container_images(layout: &Layout, registry: &str) -> anyhow::Result<String> {
    let dir = layout.images().join("containers");
    let bin = dir.join("rootfs/bin");
    std::fs::create_dir_all(&bin)?;
    std::fs::copy(BUSYBOX, bin.join("busybox")).with_context(|| format!("copying {BUSYBOX}"))?;
    for applet in APPLETS {
        std::os::unix::fs::symlink("busybox", bin.join(applet))?;
    }
    let digest = build_busybox_image(layout, registry, "pause:3.10", PAUSE_SCRIPT).await?;
    build_busybox_image(layout, registry, "workload:1", WORKLOAD_SCRIPT).await?;
    Ok(format!("{registry}/lab/pause@{digest}"))
}

/// `lab/NAME:TAG`: the busybox tree running `sh -c script`, built with buildah (in storage of the
/// lab's own) and pushed to the registry; its digest.
async fn build_busybox_image(layout: &Layout, registry: &str, name_tag: &str, script: &str) -> anyhow::Result<String> {
    let dir = layout.images().join("containers");
    let storage = dir.join("storage");
    let conf = layout.registries_conf();
    let log = layout.log("images");
    let buildah = async |args: &[&str]| {
        let mut all = vec!["--root", path_str(&storage)?, "--runroot", path_str(&storage)?, "--storage-driver", "vfs"];
        all.extend_from_slice(args);
        run_tool(Path::new("buildah"), all, &[("CONTAINERS_REGISTRIES_CONF", conf.as_os_str())], &log).await
    };
    let container = buildah(&["from", "scratch"]).await?;
    let container = container.trim();
    let rootfs = format!("{}/", dir.join("rootfs").display());
    buildah(&["copy", container, &rootfs, "/"]).await?;
    let entrypoint = serde_json::json!(["/bin/sh", "-c", script]).to_string();
    buildah(&["config", "--entrypoint", &entrypoint, container]).await?;
    let local = format!("lab/{name_tag}");
    buildah(&["commit", "--rm", "--format", "oci", container, &local]).await?;
    let digest_file = dir.join(format!("{name_tag}.digest"));
    let to = format!("docker://{registry}/lab/{name_tag}");
    buildah(&["push", "--digestfile", path_str(&digest_file)?, &local, &to]).await?;
    Ok(std::fs::read_to_string(&digest_file).context("reading the pushed digest")?.trim().to_string())
}

fn path_str(path: &Path) -> anyhow::Result<&str> {
    path.to_str().with_context(|| format!("{} is not UTF-8", path.display()))
}

/// The too-old boot image, `HOST/mco/os@sha256:…` (built when a node first asks for it).
#[context("Building the old boot image")]
pub async fn build_old_boot(mco: &Path, layout: &Layout, registry: &str) -> anyhow::Result<String> {
    build_os_image(mco, layout, registry, OLD_BOOT_VERSION, "boot-old").await
}

/// A test OS tree of `version` on the lab's userland (Debian: a shell, coreutils, dpkg), committed
/// and pushed as `mco/os:<tag>`; its pinned name.
async fn build_os_image(
    mco: &Path,
    layout: &Layout,
    registry: &str,
    version: &str,
    tag: &str,
) -> anyhow::Result<String> {
    let dir = layout.images();
    let repo = dir.join("repo");
    let log = layout.log("images");
    let conf = layout.registries_conf();
    let env = [("CONTAINERS_REGISTRIES_CONF", conf.as_os_str())];
    let tree = dir.join(format!("tree-{tag}"));
    let userland = layout.userland();
    run_tool(
        mco,
        [
            OsStr::new("image"),
            "test-tree".as_ref(),
            "--kernel".as_ref(),
            KERNEL.as_ref(),
            "--version-id".as_ref(),
            version.as_ref(),
            "--userland".as_ref(),
            userland.as_os_str(),
            tree.as_os_str(),
        ],
        &env,
        &log,
    )
    .await?;
    run_tool(
        mco,
        [
            OsStr::new("image"),
            "commit".as_ref(),
            "--repo".as_ref(),
            repo.as_os_str(),
            "--ref".as_ref(),
            "mco/os".as_ref(),
            "--version".as_ref(),
            version.as_ref(),
            "--tree".as_ref(),
            tree.as_os_str(),
        ],
        &env,
        &log,
    )
    .await?;
    // The commit has it all now; the checkout would only take disk space.
    std::fs::remove_dir_all(&tree).with_context(|| format!("removing {}", tree.display()))?;
    let to = format!("docker://{registry}/mco/os:{tag}");
    let digest = run_tool(
        mco,
        [
            OsStr::new("image"),
            "encapsulate".as_ref(),
            "--compression-fast".as_ref(),
            "--repo".as_ref(),
            repo.as_os_str(),
            "--ref".as_ref(),
            "mco/os".as_ref(),
            "--to".as_ref(),
            to.as_ref(),
        ],
        &env,
        &log,
    )
    .await?;
    Ok(format!("{registry}/mco/os@{}", digest.trim()))
}
