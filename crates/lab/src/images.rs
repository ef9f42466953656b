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

/// The stream of [`LabImages::node`], the cluster's default (a 4.x release's, as upstream's).
pub const DEFAULT_STREAM: &str = "rhel-9";
/// The other stream of the lab's release.
pub const OTHER_STREAM: &str = "rhel-10";
/// The OS the other stream's image says it is (its os-release `PRETTY_NAME`, which kubelets report).
pub const OTHER_STREAM_OS: &str = "MCO Test OS (rhel-10 stream)";
/// The label naming a release image's stream (upstream's).
const STREAM_CLASS_LABEL: &str = "io.openshift.os.streamclass";

/// The images, each pinned by digest.
#[derive(Debug, Clone)]
pub struct LabImages {
    /// `HOST/mco/os@sha256:…`: the older image a new node is installed from.
    pub boot: String,
    /// `HOST/mco/os@sha256:…`
    pub base: String,
    /// `HOST/mco/node@sha256:…`: the pools' OS image, of the [`DEFAULT_STREAM`].
    pub node: String,
    /// The extensions image of the [`DEFAULT_STREAM`] (a label only: the lab has no extensions).
    pub extensions: String,
    /// The node image and the extensions image of the [`OTHER_STREAM`].
    pub other_stream: (String, String),
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

/// Builds the OS images into the registry at `registry` (`127.0.0.1:<port>`).
#[context("Building the OS images")]
pub async fn build(mco: &Path, layout: &Layout, registry: &str) -> anyhow::Result<LabImages> {
    let dir = layout.images();
    // (Bootable: ostree-ext labels the base `containers.bootc=1`, which derived images keep.)
    let stream_labels = |stream: &str| vec![format!("{STREAM_CLASS_LABEL}={stream}")];
    // The base first; the images derived from it side by side; the extensions images (buildah)
    // beside them all.
    let os_images = async {
        let base = build_os_image(mco, layout, registry, BASE_VERSION, "base").await?;
        let node_images = async {
            // The node image: base + the node's own binaries, as a `FROM base` build would add them.
            let layer = dir.join("node-layer");
            std::fs::create_dir_all(&layer)?;
            let [kubelet] = mco_testenv::find_binaries(["kubelet"])?;
            std::fs::copy(&kubelet, layer.join("kubelet")).with_context(|| format!("copying {}", kubelet.display()))?;
            let mut labels = stream_labels(DEFAULT_STREAM);
            labels.push("io.mco.lab.role=node".to_string());
            let node =
                build_derived(mco, layout, registry, &base, (&layer, "/usr/bin"), &labels, "mco/node:latest").await?;

            // The other stream's node image: the node image with another os-release.
            let os_release = dir.join("rhel-10-layer");
            std::fs::create_dir_all(&os_release)?;
            let text =
                format!("NAME=\"MCO Test OS\"\nID=mco-test\nVERSION_ID=10.1\nPRETTY_NAME=\"{OTHER_STREAM_OS}\"\n");
            std::fs::write(os_release.join("os-release"), text)?;
            let to = format!("mco/node:{OTHER_STREAM}");
            let labels = stream_labels(OTHER_STREAM);
            let other = build_derived(mco, layout, registry, &node, (&os_release, "/usr/lib"), &labels, &to).await?;
            anyhow::Ok((node, other))
        };
        let (boot, (node, other_node)) =
            tokio::try_join!(build_boot_image(mco, layout, registry, &base, BOOT_VERSION, "boot"), node_images)?;
        anyhow::Ok((boot, base, node, other_node))
    };
    let extensions_image = async |stream: &str| -> anyhow::Result<String> {
        let labels = [format!("{STREAM_CLASS_LABEL}={stream}"), "io.openshift.os.extensions=true".to_string()];
        let digest = build_scratch_image(layout, registry, &format!("mco/extensions:{stream}"), &labels, None).await?;
        Ok(format!("{registry}/mco/extensions@{digest}"))
    };
    let extensions_images =
        async { anyhow::Ok((extensions_image(DEFAULT_STREAM).await?, extensions_image(OTHER_STREAM).await?)) };
    let ((boot, base, node, other_node), (extensions, other_extensions)) =
        tokio::try_join!(os_images, extensions_images)?;
    let other_stream = (other_node, other_extensions);
    Ok(LabImages { boot, base, node, extensions, other_stream })
}

/// `from` (pinned) plus the directory `add.0` at `add.1`, with `labels`, built with `mco image
/// build` and pushed as `name_tag`; its pinned name.
async fn build_derived(
    mco: &Path,
    layout: &Layout,
    registry: &str,
    from: &str,
    add: (&Path, &str),
    labels: &[String],
    name_tag: &str,
) -> anyhow::Result<String> {
    let conf = layout.registries_conf();
    let from = format!("docker://{from}");
    let add = format!("{}:{}", add.0.display(), add.1);
    let to = format!("docker://{registry}/{name_tag}");
    let mut args = vec!["image", "build", "--from", &from, "--add", &add];
    for label in labels {
        args.extend(["--label", label]);
    }
    args.extend(["--compression-fast", "--to", &to]);
    let digest =
        run_tool(mco, args, &[("CONTAINERS_REGISTRIES_CONF", conf.as_os_str())], &layout.log("images")).await?;
    let name = name_tag.rsplit_once(':').map_or(name_tag, |(name, _)| name);
    Ok(format!("{registry}/{name}@{}", digest.trim()))
}

/// A boot image of `version`: the `base` image with that version's os-release and version
/// label, pushed as `mco/os:<tag>`. It shares the base's layer with the node image, as a
/// release's RHCOS boot image shares most of its (chunked) layers with the release's OS image:
/// a machine's pivot pulls only the layers it lacks (the kubelet's), not the whole OS again.
async fn build_boot_image(
    mco: &Path,
    layout: &Layout,
    registry: &str,
    base: &str,
    version: &str,
    tag: &str,
) -> anyhow::Result<String> {
    let layer = layout.images().join(format!("{tag}-layer"));
    std::fs::create_dir_all(&layer)?;
    std::fs::write(layer.join("os-release"), mco_os::tree::os_release(version))?;
    // ostree-ext reads an image's version from this label first (the aleph file's `build`).
    let labels = [format!("org.opencontainers.image.version={version}")];
    build_derived(mco, layout, registry, base, (&layer, "/usr/lib"), &labels, &format!("mco/os:{tag}")).await
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
    let rootfs = dir.join("rootfs");
    let pause = serde_json::json!(["/bin/sh", "-c", PAUSE_SCRIPT]).to_string();
    let digest = build_scratch_image(layout, registry, "lab/pause:3.10", &[], Some((&rootfs, &pause))).await?;
    let workload = serde_json::json!(["/bin/sh", "-c", WORKLOAD_SCRIPT]).to_string();
    build_scratch_image(layout, registry, "lab/workload:1", &[], Some((&rootfs, &workload))).await?;
    Ok(format!("{registry}/lab/pause@{digest}"))
}

/// `NAME:TAG` built with buildah (in storage of the lab's own) from scratch with `labels`, and
/// with `content`'s tree and entrypoint if given, pushed to the registry; its digest.
async fn build_scratch_image(
    layout: &Layout,
    registry: &str,
    name_tag: &str,
    labels: &[String],
    content: Option<(&Path, &str)>,
) -> anyhow::Result<String> {
    let dir = layout.images().join("containers");
    std::fs::create_dir_all(&dir)?;
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
    let mut config = vec!["config"];
    for label in labels {
        config.extend(["--label", label]);
    }
    if let Some((rootfs, entrypoint)) = content {
        let rootfs = format!("{}/", rootfs.display());
        buildah(&["copy", container, &rootfs, "/"]).await?;
        config.extend(["--entrypoint", entrypoint]);
    }
    config.push(container);
    buildah(&config).await?;
    buildah(&["commit", "--rm", "--format", "oci", container, name_tag]).await?;
    let digest_file = dir.join(format!("{}.digest", name_tag.replace('/', "_")));
    let to = format!("docker://{registry}/{name_tag}");
    buildah(&["push", "--digestfile", path_str(&digest_file)?, name_tag, &to]).await?;
    Ok(std::fs::read_to_string(&digest_file).context("reading the pushed digest")?.trim().to_string())
}

fn path_str(path: &Path) -> anyhow::Result<&str> {
    path.to_str().with_context(|| format!("{} is not UTF-8", path.display()))
}

/// The too-old boot image, `HOST/mco/os@sha256:…`, from the lab's `base` image (built when a node
/// first asks for it).
#[context("Building the old boot image")]
pub async fn build_old_boot(mco: &Path, layout: &Layout, registry: &str, base: &str) -> anyhow::Result<String> {
    build_boot_image(mco, layout, registry, base, OLD_BOOT_VERSION, "boot-old").await
}

/// A test OS tree of `version` on the lab nodes' userland (Debian's systemd, a shell, coreutils,
/// runc) with the node software ([`crate::node_os`]), committed and pushed as `mco/os:<tag>`; its
/// pinned name.
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
    crate::node_os::add_node_software(&tree)?;
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
