//! A lab node: an OSTree sysroot copied from its boot image's installed disk ([`crate::disk`]), the machine's own
//! settings and the stub Ignition config written on it as an installer and a cloud would
//! ([`crate::node_os::install_machine`]), then its machine's first boot ([`crate::machine`]): the
//! real Ignition in the firmware's initramfs fetches the pool's config from the server, the pool's
//! `machine-config-daemon-firstboot` unit runs `mco daemon firstboot` (the pivot to the pool's OS
//! image before the kubelet starts) and reboots it; on its second boot systemd starts its kubelet,
//! which registers the Node, after which mco's daemon manages it like any cluster node.
//!
//! A node whose boot image is too old is refused, by the server (its stub says its boot image
//! version) or by firstboot: it does not join, and the reason is what a person would find (the
//! server's answer, the console's issue file).

use std::ffi::{CStr, OsStr};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use fn_error_context::context;
use k8s_openapi::api::core::v1::Node;

use mco_bootimage::skew::BOOT_IMAGE_VERSION_HEADER;

use crate::boot::Halt;
use crate::layout::{Layout, NodeDirs};
use crate::machine::{Machine, MachineSpec};
use crate::node_os::MachineSettings;
use crate::process::run_tool;

/// Where Debian's `ignition` package installs the client (it is not on PATH).
pub const IGNITION: &str = "/usr/lib/dracut/modules.d/30ignition/ignition";
/// Zones lab nodes are spread over, round robin, so rollouts show the zone ordering.
const ZONES: [&str; 2] = ["lab-a", "lab-b"];
/// How long Ignition keeps asking the server for the config (its `timeouts.httpTotal`): Ignition
/// retries every answer but 200 and 404, so a refused node would otherwise retry forever.
pub const FETCH_TIMEOUT_SECONDS: &str = "15";
/// The Ignition spec lab stubs use (the newest Debian's Ignition reads).
const STUB_VERSION: &str = "3.3.0";
/// How long a machine's first boot (Ignition, the pull of the pool's image, the reboot) may take.
const FIRST_BOOT_TIMEOUT: Duration = Duration::from_secs(300);

/// What a node boots from.
#[derive(Debug, Clone)]
pub struct Boot {
    /// The boot image, `HOST/NAME@sha256:…`.
    pub image: String,
    /// Its installed disk ([`crate::disk::Disks`]), copied to the node's.
    pub disk: PathBuf,
    /// Whether the stub tells the server the boot image's version (its aleph `build`).
    pub version_header: bool,
}

/// How provisioning ended, short of an error.
pub enum Provisioned {
    /// Booted into the pool's OS image (its second boot under way), ready to register.
    Booted(Box<Machine>),
    /// Refused (by the server or by firstboot); the machine is off.
    Refused { reason: String },
}

/// One node of the lab.
#[derive(Debug, Clone)]
pub struct LabNode {
    pub name: String,
    pub pool: String,
    pub zone: String,
    pub dirs: NodeDirs,
}

impl LabNode {
    /// A node with its own name; `index` picks its zone.
    pub fn named(layout: &Layout, pool: &str, name: &str, index: usize) -> Self {
        LabNode {
            dirs: layout.node(name),
            zone: ZONES[index % ZONES.len()].to_string(),
            pool: pool.to_string(),
            name: name.to_string(),
        }
    }

    /// Writes the node's disk (its boot image's), boots it the first time (Ignition against `server`, firstboot's
    /// pivot and reboot) and powers it on again. A node that was provisioned before starts from
    /// scratch.
    #[context("Provisioning node {}", self.name)]
    pub async fn provision(
        &self,
        mco: &Path,
        layout: &Layout,
        boot: &Boot,
        server: &str,
        machine: &MachineSpec,
        settings: &MachineSettings,
    ) -> anyhow::Result<Provisioned> {
        let log = layout.log(&self.name);
        let env = [("CONTAINERS_REGISTRIES_CONF", layout.registries_conf().into_os_string())];
        let env: Vec<(&str, &OsStr)> = env.iter().map(|(k, v)| (*k, v.as_os_str())).collect();
        self.remove_dirs()?;
        mount_boot(&self.dirs.sysroot)?;
        crate::disk::copy(&boot.disk, &self.dirs.sysroot).await?;
        let version = if boot.version_header { Some(self.boot_image_version()?) } else { None };
        let ca = layout.certs().join("ca.crt");
        let mut args = vec![
            OsStr::new("ignition"),
            "stub".as_ref(),
            "--pool".as_ref(),
            self.pool.as_ref(),
            "--url".as_ref(),
            server.as_ref(),
            "--ca".as_ref(),
            ca.as_os_str(),
            "--version".as_ref(),
            STUB_VERSION.as_ref(),
            "--http-total-timeout".as_ref(),
            FETCH_TIMEOUT_SECONDS.as_ref(),
        ];
        if let Some(version) = &version {
            args.extend([OsStr::new("--boot-image-version"), version.as_ref()]);
        }
        let stub = run_tool(mco, args, &env, &log).await?;
        crate::node_os::install_machine(&self.dirs.sysroot, settings, &stub)?;

        let mut first = Machine::power_on(mco, machine).await?;
        let deadline = Instant::now() + FIRST_BOOT_TIMEOUT;
        let issue = first.root().join(mco_apply::skew::ISSUE_FILE.trim_start_matches('/'));
        loop {
            match first.halted()? {
                Some(Halt::Reboot) => break,
                Some(halt) => {
                    let console = first.console_tail();
                    first.power_off().await;
                    // Ignition does not say what the server answered; ask as a person would.
                    let failed = || anyhow::anyhow!("the first boot ended ({halt:?}):\n{console}");
                    return match ask_server(server, &self.pool, &ca, version.as_deref()).await {
                        Ok(Answer::Refused(reason)) => Ok(Provisioned::Refused { reason }),
                        Ok(Answer::Failed(answer)) => Err(failed().context(answer)),
                        Ok(Answer::Config) => Err(failed()),
                        Err(probe) => Err(failed().context(format!("asking the server why: {probe:#}"))),
                    };
                }
                None => {}
            }
            if let Ok(text) = std::fs::read_to_string(&issue) {
                first.power_off().await;
                return Ok(Provisioned::Refused { reason: format!("firstboot: {}", text.trim()) });
            }
            if Instant::now() > deadline {
                let console = first.console_tail();
                first.power_off().await;
                anyhow::bail!(
                    "the first boot did not reboot within {FIRST_BOOT_TIMEOUT:?} (the machine's journal: \
                     machine-config-daemon-firstboot.service):\n{console}"
                );
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        first.power_off().await;
        Ok(Provisioned::Booted(Box::new(Machine::power_on(mco, machine).await?)))
    }

    /// The `build` of the aleph file the boot image installed.
    fn boot_image_version(&self) -> anyhow::Result<String> {
        let path = self.dirs.sysroot.join(mco_os::aleph::ALEPH_FILE);
        let image = mco_os::aleph::read(&path)?.with_context(|| format!("{} does not exist", path.display()))?;
        Ok(image.build)
    }

    /// Removes what an earlier provisioning left (the sysroot first: libostree marks deployments
    /// immutable).
    fn remove_dirs(&self) -> anyhow::Result<()> {
        let Some(dir) = self.dirs.sysroot.parent() else { return Ok(()) };
        if !dir.exists() {
            return Ok(());
        }
        remove_sysroot(&self.dirs.sysroot)?;
        std::fs::remove_dir_all(dir).with_context(|| format!("removing {}", dir.display()))
    }
}

/// The mount options of a machine's `/boot` (a tmpfs: the lab's kernels are placeholders).
const BOOT_MOUNT_OPTIONS: &CStr = c"mode=0755,size=256m";

/// Gives the sysroot a `/boot` file system of its own, as a machine's disk has: libostree freezes
/// and thaws `/boot`'s file system around every deployment it writes (GRUB cannot replay a
/// journal). A `/boot` directory on the host's disk had the host's root file system frozen for
/// each node's deployment, every writer on the host waiting, and two nodes deploying at once broke
/// each other's thaw; a tmpfs cannot be frozen, and libostree syncs it instead.
#[context("Mounting {}/boot", sysroot.display())]
pub fn mount_boot(sysroot: &Path) -> anyhow::Result<()> {
    let boot = sysroot.join("boot");
    std::fs::create_dir_all(&boot)?;
    rustix::mount::mount(
        "mco-lab-boot",
        &boot,
        "tmpfs",
        rustix::mount::MountFlags::NOSUID | rustix::mount::MountFlags::NODEV,
        BOOT_MOUNT_OPTIONS,
    )?;
    Ok(())
}

/// Removes a node's sysroot: its `/boot` file system unmounted, then the directory (see
/// [`mco_os::sysroot::remove`]).
#[context("Removing the sysroot {}", sysroot.display())]
pub fn remove_sysroot(sysroot: &Path) -> anyhow::Result<()> {
    match rustix::mount::unmount(sysroot.join("boot"), rustix::mount::UnmountFlags::DETACH) {
        // Not mounted (a sysroot from before the lab mounted one, or none at all).
        Ok(()) | Err(rustix::io::Errno::INVAL | rustix::io::Errno::NOENT) => {}
        Err(e) => return Err(e).context("unmounting its /boot"),
    }
    mco_os::sysroot::remove(sysroot)
}

/// Whether the Node's kubelet reports it Ready.
pub fn is_ready(node: &Node) -> bool {
    let conditions = node.status.as_ref().and_then(|s| s.conditions.as_ref());
    conditions.is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// What the Machine Config Server answered a request for a config.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// 200: the config.
    Config,
    /// 4xx: the machine is refused; the status line and the body, which says why.
    Refused(String),
    /// Anything else (the server cannot serve yet: Ignition retries these).
    Failed(String),
}

/// Asks `server` for `pool`'s config over TLS trusting `ca`, as a machine with boot image
/// `version` (if it says) would.
pub async fn ask_server(server: &str, pool: &str, ca: &Path, version: Option<&str>) -> anyhow::Result<Answer> {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    use tokio_rustls::rustls;
    use tokio_rustls::rustls::pki_types::pem::PemObject as _;

    let host = server.strip_prefix("https://").with_context(|| format!("{server} is not an https URL"))?;
    let addr: std::net::SocketAddr = host.parse().with_context(|| format!("{host} is not an address"))?;
    let mut roots = rustls::RootCertStore::empty();
    for cert in rustls::pki_types::CertificateDer::pem_file_iter(ca)? {
        roots.add(cert?)?;
    }
    let config = rustls::ClientConfig::builder_with_provider(rustls::crypto::ring::default_provider().into())
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots)
        .with_no_client_auth();
    let tcp = tokio::net::TcpStream::connect(addr).await?;
    let name = rustls::pki_types::ServerName::IpAddress(addr.ip().into());
    let mut tls = tokio_rustls::TlsConnector::from(std::sync::Arc::new(config)).connect(name, tcp).await?;
    let version_header = version.map(|v| format!("{BOOT_IMAGE_VERSION_HEADER}: {v}\r\n")).unwrap_or_default();
    let request = format!(
        "GET /config/{pool} HTTP/1.1\r\nHost: {host}\r\nAccept: application/vnd.coreos.ignition+json;version={STUB_VERSION}\r\n\
         {version_header}Connection: close\r\n\r\n"
    );
    tls.write_all(request.as_bytes()).await?;
    let mut response = Vec::new();
    // A TLS peer that closes without close_notify still delivered what it sent.
    if let Err(e) = tls.read_to_end(&mut response).await
        && response.is_empty()
    {
        return Err(e.into());
    }
    Ok(answer_of(&String::from_utf8_lossy(&response)))
}

/// The [`Answer`] in an HTTP/1.1 response (pure).
fn answer_of(response: &str) -> Answer {
    let (head, body) = response.split_once("\r\n\r\n").unwrap_or((response, ""));
    let status = head.lines().next().unwrap_or_default();
    let status = status.strip_prefix("HTTP/1.1 ").unwrap_or(status);
    let said = format!("the Machine Config Server answered {status}: {}", body.trim());
    match status.as_bytes().first() {
        _ if status.starts_with("200 ") => Answer::Config,
        Some(b'4') => Answer::Refused(said),
        _ => Answer::Failed(said),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tells_configs_refusals_and_failures_apart() {
        let cases = [
            ("HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n\r\n{}", Answer::Config),
            (
                "HTTP/1.1 403 Forbidden\r\ncontent-type: text/plain\r\n\r\nboot image is too old\n",
                Answer::Refused("the Machine Config Server answered 403 Forbidden: boot image is too old".into()),
            ),
            (
                "HTTP/1.1 400 Bad Request\r\n\r\ninvalid boot image version",
                Answer::Refused(
                    "the Machine Config Server answered 400 Bad Request: invalid boot image version".into(),
                ),
            ),
            (
                "HTTP/1.1 500 Internal Server Error\r\n\r\n",
                Answer::Failed("the Machine Config Server answered 500 Internal Server Error: ".into()),
            ),
            ("garbage", Answer::Failed("the Machine Config Server answered garbage: ".into())),
        ];
        for (response, want) in cases {
            assert_eq!(answer_of(response), want, "{response:?}");
        }
    }
}
