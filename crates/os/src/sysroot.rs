//! OSTree sysroots in a directory, as a machine's disk holds them: installing an OS image (what
//! coreos-installer and `bootc install` do), booting the default deployment (what the bootloader
//! and ostree-prepare-root do), staging and dropping deployments (what rpm-ostree does on a
//! node), with libostree and ostree-ext.
//!
//! Nothing here is really booted, so the booted deployment is the one the `ostree=` argument of a
//! kernel command line *file* names (default `SYSROOT/.mco-cmdline`; a host has /proc/cmdline),
//! resolved inside the sysroot. [`boot`] writes the default boot entry's `options` line there,
//! with `ostree=` already resolved to the deployment directory
//! (`/ostree/deploy/<stateroot>/deploy/<commit>.<serial>`) as ostree-prepare-root resolves it at
//! boot: the `/ostree/boot.N/...` link a boot entry names is removed, or re-pointed at another
//! deployment, by the next deployment libostree writes, while a real host stays on the
//! deployment it mounted.
//!
//! Images are named as in a MachineConfig's `osImageURL`: `HOST/NAME@sha256:...` (a registry,
//! always by digest), or `oci:DIR[:TAG]` for images in an OCI directory.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use fn_error_context::context;
use ostree_ext::container::deploy::ORIGIN_CONTAINER;
use ostree_ext::container::store::LayeredImageState;
use ostree_ext::container::{ImageReference, OstreeImageReference, SignatureSource, Transport};
use ostree_ext::{gio, glib, ostree};

use crate::image::{self, PullConfig};

/// The kernel command line file's name inside the sysroot directory, when not given.
pub const CMDLINE_FILE: &str = ".mco-cmdline";

/// The kernel command line file of `sysroot` when none is given.
pub fn default_cmdline(sysroot: &Path) -> PathBuf {
    sysroot.join(CMDLINE_FILE)
}

/// Input a sysroot operation refuses.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SysrootError {
    #[error("OS image {0:?} is neither HOST/NAME@sha256:DIGEST (a registry image pinned by digest) nor oci:DIR[:TAG]")]
    NotPinned(String),
    #[error("{0} already holds deployments: install writes only into an empty sysroot")]
    AlreadyInstalled(String),
    #[error("{0} has no deployment: install an image first")]
    NoDeployments(String),
    #[error("no booted deployment: the kernel command line {0} is missing (boot the sysroot first)")]
    NotBooted(String),
    #[error("kernel command line {0} has no ostree= argument")]
    NoOstreeArgument(String),
    #[error("kernel command line {cmdline}: ostree={target} is not a deployment of {sysroot}")]
    UnknownDeployment { cmdline: String, target: String, sysroot: String },
    #[error("stateroot {0:?} must be a non-empty name of letters, digits, '.', '_' and '-'")]
    Stateroot(String),
}

/// The ostree-ext reference of an `osImageURL` (see the module docs).
pub fn os_image_ref(url: &str) -> Result<OstreeImageReference, SysrootError> {
    let imgref = if url.starts_with("oci:") {
        image::parse_image_ref(url).map_err(|_| SysrootError::NotPinned(url.into()))?
    } else {
        let pinned = url.split_once("@sha256:").is_some_and(|(name, digest)| {
            name.contains('/')
                && !name.contains("://")
                && digest.len() == 64
                && digest.bytes().all(|b| b.is_ascii_hexdigit())
        });
        if !pinned {
            return Err(SysrootError::NotPinned(url.into()));
        }
        ImageReference { transport: Transport::Registry, name: url.into() }
    };
    Ok(OstreeImageReference { sigverify: SignatureSource::ContainerPolicyAllowInsecure, imgref })
}

/// The `osImageURL` of an ostree-ext reference (the inverse of [`os_image_ref`]).
pub fn os_image_url(r: &OstreeImageReference) -> String {
    match r.imgref.transport {
        Transport::Registry => r.imgref.name.clone(),
        _ => r.imgref.to_string(),
    }
}

/// The first `ostree=` argument of a kernel command line, as ostree-prepare-root reads it.
pub fn ostree_argument(cmdline: &str) -> Option<&str> {
    cmdline.split_whitespace().find_map(|a| a.strip_prefix("ostree="))
}

/// The kernel arguments of a boot entry's `options` as libostree splits them, without `ostree=`
/// (libostree writes its own for every deployment). libostree 2022.7 splits at every space, also
/// inside double quotes; joined with single spaces they give the options back.
pub fn kargs_of_options(options: &str) -> Vec<String> {
    ostree::KernelArgs::from_string(options)
        .to_strv()
        .into_iter()
        .map(|a| a.to_string())
        .filter(|a| !a.starts_with("ostree="))
        .collect()
}

/// `rpm-ostree kargs --delete-if-present=D... --append=A...` on `base`: each deleted argument
/// removes its first exact occurrence, if any; then every appended one is added at the end.
pub fn edit_kargs(base: &[String], delete: &[String], append: &[String]) -> Vec<String> {
    let mut kargs = base.to_vec();
    for d in delete {
        if let Some(i) = kargs.iter().position(|k| k == d) {
            kargs.remove(i);
        }
    }
    kargs.extend(append.iter().cloned());
    kargs
}

fn check_stateroot(name: &str) -> Result<(), SysrootError> {
    let ok = !name.is_empty()
        && name != "."
        && name != ".."
        && name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
    if ok { Ok(()) } else { Err(SysrootError::Stateroot(name.into())) }
}

/// One deployment of a sysroot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Deployment {
    /// Position in the boot order (0 is the default for the next boot).
    pub index: usize,
    pub stateroot: String,
    /// The deployed commit (the merge commit for a derived image).
    pub commit: String,
    pub serial: i32,
    /// Relative to the sysroot: `ostree/deploy/<stateroot>/deploy/<commit>.<serial>`.
    pub path: String,
    /// The OS image it was deployed from, as an `osImageURL`; `None` for a plain ostree ref.
    pub image: Option<String>,
    /// Kernel arguments of its boot entry, without `ostree=`.
    pub kargs: Vec<String>,
}

/// The deployments of a sysroot and which one is booted.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Status {
    pub deployments: Vec<Deployment>,
    /// Index of the booted deployment; `None` before the first boot.
    pub booted: Option<usize>,
}

impl Status {
    pub fn booted(&self) -> Option<&Deployment> {
        self.booted.map(|i| &self.deployments[i])
    }

    /// Deployments ahead of the booted one: staged for the next boot (rpm-ostree's "pending").
    pub fn pending(&self) -> &[Deployment] {
        &self.deployments[..self.booted.unwrap_or(0)]
    }
}

/// Runs `f` on a thread of its own: ostree-ext needs a tokio runtime of its own, which cannot be
/// started on a thread that already runs one (the daemon's).
fn on_own_thread<T: Send>(f: impl FnOnce() -> Result<T> + Send) -> Result<T> {
    std::thread::scope(|scope| scope.spawn(f).join().unwrap_or_else(|panic| std::panic::resume_unwind(panic)))
}

fn open(path: &Path) -> Result<ostree::Sysroot> {
    let sysroot = ostree::Sysroot::new(Some(&gio::File::for_path(path)));
    sysroot.load(gio::Cancellable::NONE)?;
    Ok(sysroot)
}

/// libostree's sysroot lock, held while deployments are read and written.
struct Locked<'a>(&'a ostree::Sysroot);

impl<'a> Locked<'a> {
    fn new(sysroot: &'a ostree::Sysroot) -> Result<Self> {
        sysroot.lock().context("Locking the sysroot")?;
        // Another process may have written deployments while we waited.
        sysroot.load(gio::Cancellable::NONE)?;
        Ok(Locked(sysroot))
    }
}

impl Drop for Locked<'_> {
    fn drop(&mut self) {
        self.0.unlock();
    }
}

/// The OS image a deployment was made from, if it was made from one.
fn deployed_image(d: &ostree::Deployment) -> Option<OstreeImageReference> {
    let origin = d.origin()?.string("origin", ORIGIN_CONTAINER).ok()?;
    OstreeImageReference::try_from(origin.as_str()).ok()
}

fn describe(sysroot: &ostree::Sysroot, index: usize, d: &ostree::Deployment) -> Deployment {
    let image = deployed_image(d).map(|r| os_image_url(&r));
    let options = d.bootconfig().and_then(|b| b.get("options")).map(|o| o.to_string()).unwrap_or_default();
    Deployment {
        index,
        stateroot: d.osname().to_string(),
        commit: d.csum().to_string(),
        serial: d.deployserial(),
        path: sysroot.deployment_dirpath(d).to_string(),
        image,
        kargs: kargs_of_options(&options),
    }
}

fn status_of(sysroot: &ostree::Sysroot, path: &Path, cmdline: &Path) -> Result<Status> {
    let deployments: Vec<Deployment> =
        sysroot.deployments().iter().enumerate().map(|(i, d)| describe(sysroot, i, d)).collect();
    let text = match fs::read_to_string(cmdline) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Status { deployments, booted: None }),
        Err(e) => return Err(e).with_context(|| format!("Reading {}", cmdline.display())),
    };
    let target = ostree_argument(&text).ok_or_else(|| SysrootError::NoOstreeArgument(cmdline.display().to_string()))?;
    let unknown = || SysrootError::UnknownDeployment {
        cmdline: cmdline.display().to_string(),
        target: target.to_string(),
        sysroot: path.display().to_string(),
    };
    let resolved = fs::canonicalize(path.join(target.trim_start_matches('/'))).map_err(|_| unknown())?;
    let booted = deployments
        .iter()
        .position(|d| fs::canonicalize(path.join(&d.path)).is_ok_and(|p| p == resolved))
        .ok_or_else(unknown)?;
    Ok(Status { deployments, booted: Some(booted) })
}

/// The deployments of the sysroot at `path` and the one `cmdline` boots.
#[context("Reading the deployments of {}", path.display())]
pub fn status(path: &Path, cmdline: &Path) -> Result<Status> {
    on_own_thread(|| status_of(&open(path)?, path, cmdline))
}

/// Imports `imgref` (bootable images only) into the sysroot's repository; returns the commit to
/// deploy and the origin that records the image.
fn import(
    sysroot: &ostree::Sysroot,
    imgref: &OstreeImageReference,
    pull: &PullConfig,
) -> Result<(Box<LayeredImageState>, glib::KeyFile)> {
    let state = crate::block_on(image::import_with(&sysroot.repo(), imgref, pull, true))??;
    let origin = glib::KeyFile::new();
    origin.set_string("origin", ORIGIN_CONTAINER, &imgref.to_string());
    Ok((state, origin))
}

/// The boot image's provenance file in the sysroot, as coreos-assembler writes it into every
/// boot image (and the daemon reports on its Node).
pub const ALEPH_FILE: &str = ".coreos-aleph-version.json";

/// The aleph file of a sysroot installed from `image` (pure): the build is the image's version
/// label (the image itself without one), the commit the image's ostree commit.
pub fn aleph(image: &str, version: Option<&str>, commit: &str) -> serde_json::Value {
    serde_json::json!({
        "build": version.unwrap_or(image),
        "container-image": {"image": image},
        "imgid": image,
        "ostree-commit": commit,
        "ref": "",
    })
}

/// The deployments that stay when the pending ones (those of the booted deployment's stateroot
/// ahead of it) are dropped (pure). Staging a new deployment keeps these too, so dropping it
/// again gives back the list as it was (rpm-ostree only stages; `cleanup -p` leaves the booted
/// and rollback deployments alone).
pub fn without_pending(stateroots: &[String], booted: usize) -> Vec<usize> {
    (0..stateroots.len()).filter(|&i| i >= booted || stateroots[i] != stateroots[booted]).collect()
}

/// The deployments that stay when the machine boots into the default one while `booted` was
/// running (pure): the default, the previously booted one as the rollback, and other
/// stateroots' (what ostree-finalize-staged writes at shutdown).
pub fn finalized(stateroots: &[String], booted: usize) -> Vec<usize> {
    (0..stateroots.len()).filter(|&i| i == 0 || i == booted || stateroots[i] != stateroots[0]).collect()
}

fn stateroots(deployments: &[ostree::Deployment]) -> Vec<String> {
    deployments.iter().map(|d| d.osname().to_string()).collect()
}

/// Rewrites the deployment list as the indices `keep` of the current one.
fn keep_deployments(sysroot: &ostree::Sysroot, keep: impl Fn(&[String]) -> Vec<usize>) -> Result<usize> {
    let existing = sysroot.deployments();
    let kept = keep(&stateroots(&existing));
    if kept.len() < existing.len() {
        let list: Vec<ostree::Deployment> = kept.iter().map(|&i| Clone::clone(&existing[i])).collect();
        sysroot.write_deployments(&list, gio::Cancellable::NONE)?;
    }
    Ok(existing.len() - kept.len())
}

/// Writes a new default deployment of `commit` with exactly `kargs`, ahead of the booted one
/// (`/etc` merged from it) and what [`without_pending`] keeps.
fn write_deployment(
    sysroot: &ostree::Sysroot,
    stateroot: &str,
    commit: &str,
    origin: &glib::KeyFile,
    booted: Option<usize>,
    kargs: &[String],
) -> Result<()> {
    let kargs: Vec<&str> = kargs.iter().map(String::as_str).collect();
    let opts = ostree::SysrootDeployTreeOpts { override_kernel_argv: Some(&kargs), ..Default::default() };
    let cancellable = gio::Cancellable::NONE;
    let existing = sysroot.deployments();
    let merge = booted.map(|i| &existing[i]);
    let deployment =
        sysroot.deploy_tree_with_options(Some(stateroot), commit, Some(origin), merge, Some(&opts), cancellable)?;
    let mut list = vec![deployment];
    if let Some(booted) = booted {
        list.extend(without_pending(&stateroots(&existing), booted).into_iter().map(|i| Clone::clone(&existing[i])));
    }
    sysroot.write_deployments(&list, cancellable)?;
    Ok(())
}

/// Installs `image` into the empty (or missing) sysroot directory `path` as the stateroot
/// `stateroot` with `kargs` (like `ostree admin init-fs` + `os-init` + `bootc install`), then
/// boots it ([`boot`]). Returns the deployment.
#[context("Installing {image} into {}", path.display())]
pub fn install(
    path: &Path,
    cmdline: &Path,
    stateroot: &str,
    image: &str,
    kargs: &[String],
    pull: &PullConfig,
) -> Result<Deployment> {
    check_stateroot(stateroot)?;
    let imgref = os_image_ref(image)?;
    fs::create_dir_all(path).with_context(|| format!("Creating {}", path.display()))?;
    on_own_thread(|| {
        let sysroot = ostree::Sysroot::new(Some(&gio::File::for_path(path)));
        sysroot.ensure_initialized(gio::Cancellable::NONE)?;
        sysroot.load(gio::Cancellable::NONE)?;
        let _lock = Locked::new(&sysroot)?;
        if !sysroot.deployments().is_empty() {
            return Err(SysrootError::AlreadyInstalled(path.display().to_string()).into());
        }
        if !path.join("ostree/deploy").join(stateroot).exists() {
            sysroot.init_osname(stateroot, gio::Cancellable::NONE)?;
        }
        let (state, origin) = import(&sysroot, &imgref, pull)?;
        write_deployment(&sysroot, stateroot, &state.merge_commit, &origin, None, kargs)?;
        let aleph = aleph(image, state.version(), &state.base_commit);
        write_atomic(&path.join(ALEPH_FILE), &serde_json::to_vec(&aleph)?)
    })?;
    boot(path, cmdline)?;
    Ok(status(path, cmdline)?.deployments.swap_remove(0))
}

/// Boots the default deployment: drops what [`finalized`] drops, then writes the default boot
/// entry's options, `ostree=` resolved to the deployment directory, to `cmdline` (atomically).
/// Returns the line.
#[context("Booting {}", path.display())]
pub fn boot(path: &Path, cmdline: &Path) -> Result<String> {
    let default = on_own_thread(|| {
        let sysroot = open(path)?;
        let _lock = Locked::new(&sysroot)?;
        if let Some(booted) = status_of(&sysroot, path, cmdline)?.booted {
            keep_deployments(&sysroot, |stateroots| finalized(stateroots, booted))?;
        }
        let deployments = sysroot.deployments();
        let d = deployments.first().ok_or_else(|| SysrootError::NoDeployments(path.display().to_string()))?;
        Ok(describe(&sysroot, 0, d))
    })?;
    let mut args = default.kargs;
    args.push(format!("ostree=/{}", default.path));
    let line = args.join(" ");
    write_atomic(cmdline, format!("{line}\n").as_bytes())?;
    tracing::info!(commit = %default.commit, cmdline = %cmdline.display(), "booted the default deployment");
    Ok(line)
}

fn write_atomic(path: &Path, data: &[u8]) -> Result<()> {
    let dir = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let mut tmp = tempfile::NamedTempFile::new_in(dir).with_context(|| format!("Writing {}", path.display()))?;
    tmp.write_all(data)?;
    tmp.as_file().sync_all()?;
    tmp.persist(path).with_context(|| format!("Writing {}", path.display()))?;
    fs::File::open(dir)?.sync_all()?;
    Ok(())
}

/// Stages a new default deployment on top of the booted one: `image` imported (by digest) when
/// given, else the booted commit again; the boot entry gets exactly `kargs`; `/etc` is merged
/// from the booted deployment. Pending deployments are replaced. Returns the new deployment.
#[context("Deploying {} into {}", image.unwrap_or("the booted commit"), path.display())]
pub fn deploy(
    path: &Path,
    cmdline: &Path,
    image: Option<&str>,
    kargs: &[String],
    pull: &PullConfig,
) -> Result<Deployment> {
    let imgref = image.map(os_image_ref).transpose()?;
    on_own_thread(|| {
        let sysroot = open(path)?;
        let _lock = Locked::new(&sysroot)?;
        let status = status_of(&sysroot, path, cmdline)?;
        let booted_index = status.booted.ok_or_else(|| SysrootError::NotBooted(cmdline.display().to_string()))?;
        let deployments = sysroot.deployments();
        let booted = &deployments[booted_index];
        let (commit, origin) = match &imgref {
            Some(r) => import(&sysroot, r, pull).map(|(state, origin)| (state.merge_commit, origin))?,
            None => (booted.csum().to_string(), booted.origin().unwrap_or_default()),
        };
        write_deployment(&sysroot, &booted.osname(), &commit, &origin, Some(booted_index), kargs)?;
        prune_images(&sysroot, None)?;
        let written = sysroot.deployments();
        Ok(describe(&sysroot, 0, written.first().context("no deployment after writing one")?))
    })
}

/// Imports `image` into the sysroot's repository without deploying it (what [`deploy`] then
/// finds there), under the sysroot's lock. Images pulled before it that no deployment uses
/// (pulled for an update that was superseded) are removed.
#[context("Pulling {image} into {}", path.display())]
pub fn pull(path: &Path, image: &str, pull: &PullConfig) -> Result<()> {
    let imgref = os_image_ref(image)?;
    on_own_thread(|| {
        let sysroot = open(path)?;
        let _lock = Locked::new(&sysroot)?;
        import(&sysroot, &imgref, pull)?;
        prune_images(&sysroot, Some(&imgref.imgref)).map(drop)
    })
}

/// The images `unused` keeps out of `images`: those no deployment uses, but `keep` (pure).
fn unused<'a>(
    images: &'a [ImageReference],
    deployed: &[ImageReference],
    keep: Option<&ImageReference>,
) -> Vec<&'a ImageReference> {
    images.iter().filter(|image| !deployed.contains(image) && Some(*image) != keep).collect()
}

/// Removes the OS images of the repository that no deployment uses, but `keep`, with the layers
/// and objects only they held (what bootc prunes after a deployment); returns their names.
fn prune_images(sysroot: &ostree::Sysroot, keep: Option<&ImageReference>) -> Result<Vec<String>> {
    let repo = sysroot.repo();
    let deployed: Vec<ImageReference> =
        sysroot.deployments().iter().filter_map(deployed_image).map(|r| r.imgref).collect();
    let images = ostree_ext::container::store::list_images(&repo)?
        .iter()
        .map(|name| ImageReference::try_from(name.as_str()))
        .collect::<Result<Vec<_>>>()?;
    let removed = unused(&images, &deployed, keep);
    if removed.is_empty() {
        return Ok(Vec::new());
    }
    for image in &removed {
        ostree_ext::container::store::remove_image(&repo, image)?;
    }
    ostree_ext::container::store::gc_image_layers(&repo)?;
    let (_, objects, bytes) = repo.prune(ostree::RepoPruneFlags::REFS_ONLY, 0, gio::Cancellable::NONE)?;
    let removed: Vec<String> = removed.iter().map(|image| image.name.clone()).collect();
    tracing::info!(?removed, objects, bytes, "removed OS images no deployment uses");
    Ok(removed)
}

/// Removes the OS images no deployment uses (pulled ahead for an update that did not come);
/// returns their names.
#[context("Removing unused OS images from {}", path.display())]
pub fn prune(path: &Path) -> Result<Vec<String>> {
    on_own_thread(|| {
        let sysroot = open(path)?;
        let _lock = Locked::new(&sysroot)?;
        prune_images(&sysroot, None)
    })
}

/// The names of the OS images in the sysroot's repository (`ostree container image list`).
#[context("Listing the OS images of {}", path.display())]
pub fn images(path: &Path) -> Result<Vec<String>> {
    on_own_thread(|| {
        let sysroot = open(path)?;
        let names = ostree_ext::container::store::list_images(&sysroot.repo())?;
        names.iter().map(|name| Ok(ImageReference::try_from(name.as_str())?.name)).collect()
    })
}

/// Drops the deployments staged ahead of the booted one (`rpm-ostree cleanup -p`); returns how
/// many. Nothing booted or nothing pending is fine.
#[context("Dropping pending deployments of {}", path.display())]
pub fn undeploy_pending(path: &Path, cmdline: &Path) -> Result<usize> {
    on_own_thread(|| {
        let sysroot = open(path)?;
        let _lock = Locked::new(&sysroot)?;
        let Some(booted) = status_of(&sysroot, path, cmdline)?.booted else { return Ok(0) };
        let dropped = keep_deployments(&sysroot, |stateroots| without_pending(stateroots, booted))?;
        if dropped > 0 {
            tracing::info!(dropped, "dropped pending deployments");
        }
        Ok(dropped)
    })
}

/// Removes the sysroot directory `path`: clears the immutable attribute libostree puts on every
/// deployment directory (which stops even root from deleting it), then deletes the tree.
#[context("Removing the sysroot {}", path.display())]
pub fn remove(path: &Path) -> Result<()> {
    set_immutable(&deployment_dirs(path)?, false)?;
    match fs::remove_dir_all(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e.into()),
        _ => Ok(()),
    }
}

/// The deployment directories of the sysroot at `path`, of every stateroot (none if it has no
/// `ostree/deploy`).
pub fn deployment_dirs(path: &Path) -> Result<Vec<PathBuf>> {
    let mut deployments = Vec::new();
    if let Ok(stateroots) = fs::read_dir(path.join("ostree/deploy")) {
        for stateroot in stateroots {
            if let Ok(entries) = fs::read_dir(stateroot?.path().join("deploy")) {
                for entry in entries {
                    let entry = entry?;
                    if entry.file_type()?.is_dir() {
                        deployments.push(entry.path());
                    }
                }
            }
        }
    }
    Ok(deployments)
}

/// Sets or clears the immutable flag libostree puts on deployment directories (`chattr`).
pub fn set_immutable(dirs: &[PathBuf], immutable: bool) -> Result<()> {
    if dirs.is_empty() {
        return Ok(());
    }
    let flag = if immutable { "+i" } else { "-i" };
    let out = std::process::Command::new("chattr").arg(flag).args(dirs).output().context("Running chattr")?;
    if !out.status.success() {
        anyhow::bail!("chattr {flag}: {}", String::from_utf8_lossy(&out.stderr).trim());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aleph_names_the_build_and_the_commit() {
        let image = "127.0.0.1:5000/os@sha256:0000000000000000000000000000000000000000000000000000000000000000";
        let with_version = aleph(image, Some("9.6.20260101-0"), "abc");
        assert_eq!(with_version["build"], "9.6.20260101-0");
        assert_eq!(with_version["ostree-commit"], "abc");
        assert_eq!(with_version["container-image"]["image"], image);
        assert_eq!(aleph(image, None, "abc")["build"], image);
    }

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn images_no_deployment_uses_are_unused_but_the_one_kept() {
        let image = |name: &str| ImageReference { transport: Transport::Registry, name: name.into() };
        let images = [image("r/os@sha256:a"), image("r/os@sha256:b"), image("r/os@sha256:c")];
        let unused_names = |deployed: &[ImageReference], keep: Option<&ImageReference>| {
            unused(&images, deployed, keep).into_iter().map(|i| i.name.clone()).collect::<Vec<_>>()
        };
        assert_eq!(unused_names(&[], None), s(&["r/os@sha256:a", "r/os@sha256:b", "r/os@sha256:c"]));
        assert_eq!(unused_names(&[image("r/os@sha256:a")], None), s(&["r/os@sha256:b", "r/os@sha256:c"]));
        assert_eq!(unused_names(&[image("r/os@sha256:a")], Some(&image("r/os@sha256:c"))), s(&["r/os@sha256:b"]));
        assert!(unused_names(&images, None).is_empty());
        // Another transport is another image.
        let oci = ImageReference { transport: Transport::OciDir, name: "r/os@sha256:a".into() };
        assert_eq!(unused_names(&[oci], None).len(), 3);
    }

    #[test]
    fn os_image_urls_must_be_pinned() {
        let digest = "a".repeat(64);
        let reg = format!("127.0.0.1:5000/mco/os@sha256:{digest}");
        let cases: Vec<(String, bool)> = vec![
            (reg.clone(), true),
            ("oci:/srv/os:1".into(), true),
            ("quay.io/os:4.16".into(), false),
            (format!("docker://quay.io/os@sha256:{digest}"), false),
            (format!("os@sha256:{digest}"), false),
            ("quay.io/os@sha256:abc".into(), false),
            ("oci:".into(), false),
        ];
        for (url, ok) in cases {
            let got = os_image_ref(&url);
            if !ok {
                assert_eq!(got, Err(SysrootError::NotPinned(url.clone())), "{url}");
                continue;
            }
            // The reference written into the origin reads back as the same osImageURL.
            let r = got.unwrap_or_else(|e| panic!("{url}: {e}"));
            let back = OstreeImageReference::try_from(r.to_string().as_str()).unwrap();
            assert_eq!(os_image_url(&back), url);
        }
        assert_eq!(
            os_image_ref(&reg).unwrap().to_string(),
            format!("ostree-unverified-registry:{reg}"),
            "registry images are pulled as rpm-ostree pulls osImageURL"
        );
    }

    #[test]
    fn ostree_argument_and_kargs() {
        let line = "root=UUID=1 rw ostree=/ostree/boot.1/os/abc/0 quiet ostree=/second";
        assert_eq!(ostree_argument(line), Some("/ostree/boot.1/os/abc/0"));
        assert_eq!(ostree_argument("root=x quiet"), None);
        assert_eq!(kargs_of_options(line), s(&["root=UUID=1", "rw", "quiet"]));
        assert_eq!(kargs_of_options("a=\"x y\" b").join(" "), "a=\"x y\" b");
        assert_eq!(kargs_of_options(""), Vec::<String>::new());
    }

    #[test]
    fn kargs_edit_like_rpm_ostree() {
        let base = s(&["root=x", "foo", "bar=1", "hello=world", "foo"]);
        let cases: &[(&[&str], &[&str], &[&str])] = &[
            // Upstream's delete-all-old / append-all-new of a MachineConfig change.
            (&["foo", "bar=1", "hello=world", "baz"], &["foo", "bar=1"], &["root=x", "foo", "foo", "bar=1"]),
            (&[], &["nosmt"], &["root=x", "foo", "bar=1", "hello=world", "foo", "nosmt"]),
            (&["bar=2"], &[], &["root=x", "foo", "bar=1", "hello=world", "foo"]),
            (&["foo", "foo"], &[], &["root=x", "bar=1", "hello=world"]),
        ];
        for (delete, append, want) in cases {
            assert_eq!(edit_kargs(&base, &s(delete), &s(append)), s(want), "{delete:?} {append:?}");
        }
    }

    #[test]
    fn deployments_kept_when_staging_and_booting() {
        // (stateroots, booted, kept when staging, kept when booting the default)
        type Case<'a> = (&'a [&'a str], usize, &'a [usize], &'a [usize]);
        let cases: &[Case] = &[
            (&["os"], 0, &[0], &[0]),
            (&["os", "os", "os"], 0, &[0, 1, 2], &[0]),
            // 0 is pending: staging replaces it; booting it keeps the booted one as rollback.
            (&["os", "os", "os"], 1, &[1, 2], &[0, 1]),
            (&["os", "other", "os", "os"], 2, &[1, 2, 3], &[0, 1, 2]),
            (&["other", "os", "os"], 1, &[0, 1, 2], &[0, 1, 2]),
        ];
        for (names, booted, staging, booting) in cases {
            assert_eq!(without_pending(&s(names), *booted), *staging, "{names:?} booted {booted}");
            assert_eq!(finalized(&s(names), *booted), *booting, "{names:?} booted {booted}");
        }
    }

    #[test]
    fn stateroot_names() {
        for ok in ["mco", "fedora-coreos", "rhcos_9.4"] {
            assert_eq!(check_stateroot(ok), Ok(()));
        }
        for bad in ["", ".", "..", "a/b", "a b"] {
            assert_eq!(check_stateroot(bad), Err(SysrootError::Stateroot(bad.into())));
        }
    }

    #[test]
    fn pending_is_what_precedes_the_booted_deployment() {
        let d = |index| Deployment {
            index,
            stateroot: "mco".into(),
            commit: format!("c{index}"),
            serial: 0,
            path: format!("ostree/deploy/mco/deploy/c{index}.0"),
            image: None,
            kargs: Vec::new(),
        };
        let status = |booted| Status { deployments: vec![d(0), d(1), d(2)], booted };
        assert_eq!(status(None).pending().len(), 0);
        assert_eq!(status(Some(0)).pending().len(), 0);
        assert_eq!(status(Some(1)).pending(), &[d(0)]);
        assert_eq!(status(Some(2)).booted(), Some(&d(2)));
    }
}
