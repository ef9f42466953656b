//! The OS side of an update through the [`OsBackend`] trait: rebase to an image by digest, kernel
//! arguments, kernel type, extensions, and dropping a staged deployment on rollback.
//!
//! [`RpmOstree`] and [`Bootc`] only build command lines (pure functions, compared in tests with
//! upstream's exact invocations) and run them through one [`Runner`]. The libostree backend
//! for directory sysroots ([`sysroot::OstreeSysroot`]) implements the same trait.

pub mod sysroot;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, bail};
use fn_error_context::context;
use serde::Deserialize;

use crate::plan::{KernelType, OsChanges};
use crate::runner::{Cmd, Runner};

/// What the OS is running.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OsStatus {
    /// The booted image pullspec (without the `ostree-unverified-registry:` transport).
    pub booted_image: Option<String>,
    /// Kernel arguments of the booted deployment.
    pub kargs: Vec<String>,
    /// Packages layered on the booted deployment.
    pub requested_packages: Vec<String>,
    /// Base packages removed from the booted deployment (kernel overrides).
    pub requested_base_removals: Vec<String>,
    /// A deployment is staged for the next boot.
    pub staged: bool,
}

/// An OS that can be updated in place.
pub trait OsBackend: Send + Sync {
    fn status(&self) -> anyhow::Result<OsStatus>;
    /// Fetches the OS image `image` ahead of [`OsBackend::apply`], which then finds it there, if
    /// this backend can and the image is not the booted one; returns whether it pulled. A pull
    /// ahead is timed apart and fails before anything on the node has changed. On hosts the host's
    /// daemon pulls (it makes the read-only `/sysroot` writable in a mount namespace of its own and
    /// holds the sysroot's lock): rpm-ostree can pull without deploying; bootc pulls in `apply`
    /// (its `switch --download-only`, from mid-2026 releases, stages a locked deployment instead).
    fn pull_ahead(&self, _image: &str) -> anyhow::Result<bool> {
        Ok(false)
    }
    /// [`OsBackend::pull_ahead`] long before an update (mco's pre-staging): a failure is no
    /// failed update (not counted as a pivot error).
    fn prestage(&self, image: &str) -> anyhow::Result<bool> {
        self.pull_ahead(image)
    }
    /// Removes the OS images pulled ahead that no deployment uses (the update they were pulled
    /// for was superseded or withdrawn); returns their names. Hosts pull nothing ahead.
    fn drop_pulled(&self) -> anyhow::Result<Vec<String>> {
        Ok(Vec::new())
    }
    /// Stages a deployment with `changes` for the next boot.
    fn apply(&self, changes: &OsChanges) -> anyhow::Result<()>;
    /// Drops a staged deployment (rollback); nothing staged is fine.
    fn discard_staged(&self) -> anyhow::Result<()>;
    /// Makes `paths` (absolute, under `/etc`) of the staged deployment what they are in the
    /// running system's root `root` (a copy, or removed when absent there), for a backend that
    /// writes a deployment's `/etc` when it stages it: the config's files then reach the next
    /// boot even where the booted OS image owned them (a layered image that baked them in, whose
    /// `/etc` merge would drop them as the old image's defaults). Backends that merge `/etc` when
    /// the host shuts down have nothing to do.
    fn carry_into_staged(&self, _root: &Path, _paths: &[String]) -> anyhow::Result<()> {
        Ok(())
    }
}

/// rpm-ostree (RHCOS/FCOS hosts).
pub struct RpmOstree {
    pub runner: Arc<dyn Runner>,
    /// `std::env::consts::ARCH` on hosts; 64k-pages kernels exist only on aarch64.
    pub arch: String,
}

const RPM_OSTREE: &str = "rpm-ostree";
const KERNEL_PACKAGES: [&str; 5] =
    ["kernel", "kernel-core", "kernel-modules", "kernel-modules-core", "kernel-modules-extra"];
const RT_PACKAGES: [&str; 3] = ["kernel-rt-core", "kernel-rt-modules", "kernel-rt-modules-extra"];
const K64_PACKAGES: [&str; 4] =
    ["kernel-64k-core", "kernel-64k-modules", "kernel-64k-modules-core", "kernel-64k-modules-extra"];

fn rpm_ostree<S: Into<String>>(args: impl IntoIterator<Item = S>) -> Cmd {
    Cmd::new(RPM_OSTREE, args)
}

/// `rpm-ostree rebase` to `image` (upstream's), or with `download_only` only its pull into the
/// host's repository: rpm-ostreed stops short of deploying, and the later rebase finds the image
/// there (`cleanup -p` before it prunes images only when it removes a staged deployment).
fn rpm_ostree_rebase(image: &str, download_only: bool) -> Cmd {
    let mut args = vec!["rebase".to_string(), "--experimental".into()];
    if download_only {
        args.push("--download-only".into());
    }
    args.push(format!("ostree-unverified-registry:{image}"));
    rpm_ostree(args)
}

/// The command that pulls `image` ahead of its update on a host in state `status`: none when the
/// host runs it already, or has packages layered or removed (extensions, a realtime kernel): a
/// download-only rebase resolves those against the new base too, from repositories the update
/// itself sets up, so it pulls in the update then.
pub fn rpm_ostree_pull_ahead(image: &str, status: &OsStatus) -> Option<Cmd> {
    let layered = !status.requested_packages.is_empty() || !status.requested_base_removals.is_empty();
    (status.booted_image.as_deref() != Some(image) && !layered).then(|| rpm_ostree_rebase(image, true))
}

/// The rpm-ostree commands that stage `changes` on a host in state `status` (upstream
/// `applyOSChanges`, in its order).
pub fn rpm_ostree_commands(changes: &OsChanges, status: &OsStatus, arch: &str) -> anyhow::Result<Vec<Cmd>> {
    let mut cmds = vec![rpm_ostree(["cleanup", "-p"])];
    let image = changes.image.as_ref().filter(|img| status.booted_image.as_ref() != Some(*img));
    if changes.kernel.is_some() {
        let removals: Vec<&String> =
            status.requested_base_removals.iter().filter(|p| *p == "kernel" || p.starts_with("kernel-")).collect();
        let layered: Vec<&String> = status
            .requested_packages
            .iter()
            .filter(|p| p.starts_with("kernel-rt-") || p.starts_with("kernel-64k-"))
            .collect();
        if !removals.is_empty() && !layered.is_empty() {
            let mut args = vec!["override".to_string(), "reset".to_string()];
            args.extend(removals.into_iter().cloned());
            for p in layered {
                args.extend(["--uninstall".to_string(), p.clone()]);
            }
            cmds.push(rpm_ostree(args));
        }
    }
    if let Some(img) = image {
        cmds.push(rpm_ostree_rebase(img, false));
    }
    if let Some(k) = &changes.kargs {
        let args = std::iter::once("kargs".to_string())
            .chain(k.delete.iter().map(|a| format!("--delete-if-present={a}")))
            .chain(k.append.iter().map(|a| format!("--append={a}")));
        cmds.push(rpm_ostree(args));
    }
    let install = match changes.kernel {
        None | Some(KernelType::Default) => None,
        Some(KernelType::Realtime) => Some(&RT_PACKAGES[..]),
        Some(KernelType::SixtyFourKPages) if arch != "aarch64" => {
            bail!("kernelType 64k-pages is only supported on aarch64, this node is {arch}")
        }
        Some(KernelType::SixtyFourKPages) => Some(&K64_PACKAGES[..]),
    };
    if let Some(packages) = install {
        let mut args: Vec<String> =
            ["override", "remove"].into_iter().chain(KERNEL_PACKAGES).map(String::from).collect();
        for p in packages {
            args.extend(["--install".to_string(), p.to_string()]);
        }
        cmds.push(rpm_ostree(args));
    }
    if let Some(extensions) = &changes.extensions {
        let (install, uninstall) = extension_packages(extensions, &status.requested_packages)?;
        if !install.is_empty() || !uninstall.is_empty() {
            let mut args = vec!["update".to_string()];
            for p in install {
                args.extend(["--install".to_string(), p]);
            }
            for p in uninstall {
                args.extend(["--uninstall".to_string(), p]);
            }
            cmds.push(rpm_ostree(args));
        }
    }
    Ok(cmds)
}

/// Packages to install and uninstall so the deployment carries exactly `extensions` (sorted):
/// install what the extensions need and is not layered; uninstall layered allow-listed packages
/// no extension needs.
pub fn extension_packages(extensions: &[String], installed: &[String]) -> anyhow::Result<(Vec<String>, Vec<String>)> {
    use mco_render::merge::SUPPORTED_EXTENSIONS;
    let mut required = Vec::new();
    for ext in extensions {
        let (_, packages) = SUPPORTED_EXTENSIONS
            .iter()
            .find(|(name, _)| name == ext)
            .with_context(|| format!("extension {ext:?} is not supported"))?;
        required.extend(packages.iter().map(|p| p.to_string()));
    }
    let mut install: Vec<String> = required.iter().filter(|p| !installed.contains(p)).cloned().collect();
    let allow_listed: Vec<&str> = SUPPORTED_EXTENSIONS.iter().flat_map(|(_, p)| p.iter().copied()).collect();
    let mut uninstall: Vec<String> =
        installed.iter().filter(|p| allow_listed.contains(&p.as_str()) && !required.contains(p)).cloned().collect();
    for list in [&mut install, &mut uninstall] {
        list.sort();
        list.dedup();
    }
    Ok((install, uninstall))
}

#[derive(Deserialize)]
struct RpmOstreeStatusJson {
    deployments: Vec<RpmOstreeDeployment>,
}

#[derive(Deserialize)]
#[serde(rename_all = "kebab-case")]
struct RpmOstreeDeployment {
    #[serde(default)]
    booted: bool,
    #[serde(default)]
    staged: bool,
    #[serde(default)]
    custom_origin: Vec<String>,
    #[serde(default)]
    container_image_reference: Option<String>,
    #[serde(default)]
    requested_packages: Vec<String>,
    #[serde(default)]
    requested_base_removals: Vec<String>,
}

/// Reads `rpm-ostree status --json` (the booted deployment) and `rpm-ostree kargs`.
pub fn parse_rpm_ostree_status(status_json: &str, kargs: &str) -> anyhow::Result<OsStatus> {
    let s: RpmOstreeStatusJson = serde_json::from_str(status_json).context("parsing rpm-ostree status --json")?;
    let booted = s.deployments.iter().find(|d| d.booted).context("rpm-ostree status: no booted deployment")?;
    // Upstream `GetBootedOSImageURL`: a `pivot://` custom origin, superseded by the container
    // image reference without its transport.
    let mut image = booted.custom_origin.first().and_then(|o| o.strip_prefix("pivot://")).map(str::to_string);
    if let Some(r) = &booted.container_image_reference
        && let Some((_, url)) = r.split_once(':')
    {
        image = Some(url.to_string());
    }
    Ok(OsStatus {
        booted_image: image,
        kargs: kargs.split_whitespace().map(str::to_string).collect(),
        requested_packages: booted.requested_packages.clone(),
        requested_base_removals: booted.requested_base_removals.clone(),
        staged: s.deployments.iter().any(|d| d.staged),
    })
}

impl OsBackend for RpmOstree {
    #[context("Reading rpm-ostree status")]
    fn status(&self) -> anyhow::Result<OsStatus> {
        let json = self.runner.run(&rpm_ostree(["status", "--json"]))?;
        let kargs = self.runner.run(&rpm_ostree(["kargs"]))?;
        parse_rpm_ostree_status(&json, &kargs)
    }

    #[context("Pulling OS image {image} ahead with rpm-ostree")]
    fn pull_ahead(&self, image: &str) -> anyhow::Result<bool> {
        let Some(cmd) = rpm_ostree_pull_ahead(image, &self.status()?) else { return Ok(false) };
        self.runner.run(&cmd)?;
        Ok(true)
    }

    /// `rpm-ostree cleanup --base` prunes the images no deployment uses (rpm-ostree does not name them).
    fn drop_pulled(&self) -> anyhow::Result<Vec<String>> {
        self.runner.run(&rpm_ostree(["cleanup", "--base"]))?;
        Ok(Vec::new())
    }

    #[context("Staging OS changes with rpm-ostree")]
    fn apply(&self, changes: &OsChanges) -> anyhow::Result<()> {
        let status = self.status()?;
        for cmd in rpm_ostree_commands(changes, &status, &self.arch)? {
            self.runner.run(&cmd)?;
        }
        Ok(())
    }

    fn discard_staged(&self) -> anyhow::Result<()> {
        Ok(self.runner.run(&rpm_ostree(["cleanup", "-p"])).map(drop)?)
    }
}

/// bootc hosts: the image is switched with `bootc switch`; kernel arguments come from the image
/// (`/usr/lib/bootc/kargs.d`), so the other OS fields are refused rather than half-applied.
pub struct Bootc {
    pub runner: Arc<dyn Runner>,
    /// Where the booted kernel command line is read (`/proc/cmdline` on hosts).
    pub cmdline: PathBuf,
}

/// The bootc commands that stage `changes` (upstream's `BootcClient.Switch`).
pub fn bootc_commands(changes: &OsChanges, status: &OsStatus) -> anyhow::Result<Vec<Cmd>> {
    if changes.kargs.is_some() {
        bail!("the bootc backend cannot change kernel arguments in place (they come from the image's kargs.d)");
    }
    if changes.kernel.is_some_and(|k| k != KernelType::Default) {
        bail!("the bootc backend cannot switch the kernel type (build it into the image)");
    }
    if changes.extensions.as_ref().is_some_and(|e| !e.is_empty()) {
        bail!("the bootc backend cannot install extensions (build them into the image)");
    }
    Ok(changes
        .image
        .iter()
        .filter(|img| status.booted_image.as_ref() != Some(*img))
        .map(|img| Cmd::new("bootc", ["switch", img.as_str()]))
        .collect())
}

#[derive(Deserialize)]
struct BootcHost {
    status: BootcHostStatus,
}

#[derive(Deserialize)]
struct BootcHostStatus {
    staged: Option<serde_json::Value>,
    booted: Option<BootcEntry>,
}

#[derive(Deserialize)]
struct BootcEntry {
    image: Option<BootcImageStatus>,
}

#[derive(Deserialize)]
struct BootcImageStatus {
    image: BootcImageRef,
}

#[derive(Deserialize)]
struct BootcImageRef {
    image: String,
}

/// Reads `bootc status --json` and the kernel command line.
pub fn parse_bootc_status(status_json: &str, cmdline: &str) -> anyhow::Result<OsStatus> {
    let h: BootcHost = serde_json::from_str(status_json).context("parsing bootc status --json")?;
    Ok(OsStatus {
        booted_image: h.status.booted.and_then(|b| b.image).map(|i| i.image.image),
        kargs: cmdline.split_whitespace().map(str::to_string).collect(),
        staged: h.status.staged.is_some_and(|s| !s.is_null()),
        ..OsStatus::default()
    })
}

impl OsBackend for Bootc {
    #[context("Reading bootc status")]
    fn status(&self) -> anyhow::Result<OsStatus> {
        let json = self.runner.run(&Cmd::new("bootc", ["status", "--json"]))?;
        let cmdline =
            std::fs::read_to_string(&self.cmdline).with_context(|| format!("reading {}", self.cmdline.display()))?;
        parse_bootc_status(&json, &cmdline)
    }

    #[context("Staging OS changes with bootc")]
    fn apply(&self, changes: &OsChanges) -> anyhow::Result<()> {
        let status = self.status()?;
        for cmd in bootc_commands(changes, &status)? {
            self.runner.run(&cmd)?;
        }
        Ok(())
    }

    /// bootc has no verb that only drops the staged deployment (`bootc rollback` also reorders
    /// the boot entries), so the staged deployment, listed first, is undeployed with ostree.
    fn discard_staged(&self) -> anyhow::Result<()> {
        if self.status()?.staged {
            self.runner.run(&Cmd::new("ostree", ["admin", "undeploy", "0"]))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
