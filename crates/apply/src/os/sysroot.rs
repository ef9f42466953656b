//! The [`OsBackend`] of a directory OSTree sysroot, with libostree and ostree-ext
//! ([`mco_os::sysroot`]): what rpm-ostree does on a host, for the lab and the tests.
//!
//! An update stages a new default deployment: the new image imported by digest (registry
//! settings and pull secret from the node's root), or the booted commit again when only the
//! kernel arguments change, with the booted deployment's arguments edited as `rpm-ostree kargs`
//! edits them. A plain ostree sysroot has no package layering, so kernel types other than the
//! default and extensions are refused, before anything is staged.

use std::io::Write;
use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};

use anyhow::Context;
use fn_error_context::context;
use mco_os::image::PullConfig;
use mco_os::sysroot;

use super::{OsBackend, OsStatus};
use crate::plan::{KernelType, OsChanges, split_kargs};

/// A directory sysroot whose booted deployment the kernel command line file `cmdline` names.
pub struct OstreeSysroot {
    pub sysroot: PathBuf,
    pub cmdline: PathBuf,
    pub pull: PullSource,
}

/// Where a sysroot's pulls take their registry settings, pull secret and signature policy from.
pub enum PullSource {
    Given(PullConfig),
    /// The files of the node whose root this is ([`PullConfig::of_node_root`]), read at each pull:
    /// an update that writes them (a registries.conf, a policy.json) stages its OS image with them.
    NodeRoot(PathBuf),
}

/// Pull settings, and the policy file written for them while they are used.
pub struct Pull {
    pub config: PullConfig,
    _rerooted_policy: Option<tempfile::TempPath>,
}

impl PullSource {
    /// The settings of the next pull. A node root seen from elsewhere than `/` gets a copy of its
    /// policy whose key files are under that root, as the node itself would read them.
    #[context("Reading the node's pull settings")]
    pub fn settings(&self) -> anyhow::Result<Pull> {
        let root = match self {
            PullSource::Given(config) => return Ok(Pull { config: config.clone(), _rerooted_policy: None }),
            PullSource::NodeRoot(root) => root,
        };
        let mut config = PullConfig::of_node_root(root);
        let rerooted = match &config.policy {
            Some(policy) if root != Path::new("/") => {
                let text = std::fs::read_to_string(policy).with_context(|| format!("reading {}", policy.display()))?;
                let rerooted = mco_api::containers_policy::reroot(&text, root)?;
                let mut file = tempfile::Builder::new().prefix("mco-node-policy-").suffix(".json").tempfile()?;
                file.write_all(rerooted.as_bytes())?;
                let path = file.into_temp_path();
                config.policy = Some(path.to_path_buf());
                Some(path)
            }
            _ => None,
        };
        Ok(Pull { config, _rerooted_policy: rerooted })
    }
}

/// OS changes an ostree sysroot cannot make.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Unsupported {
    #[error(
        "kernelType {0} is not supported on a plain ostree sysroot (no package layering to swap the kernel; \
         build the kernel into the OS image)"
    )]
    KernelType(&'static str),
    #[error(
        "extensions [{0}] are not supported on a plain ostree sysroot (no package layering; build them into the OS image)"
    )]
    Extensions(String),
}

/// Refuses what a plain ostree sysroot cannot do (pure).
pub fn check_supported(changes: &OsChanges) -> Result<(), Unsupported> {
    match changes.kernel {
        Some(KernelType::Realtime) => return Err(Unsupported::KernelType("realtime")),
        Some(KernelType::SixtyFourKPages) => return Err(Unsupported::KernelType("64k-pages")),
        None | Some(KernelType::Default) => {}
    }
    match &changes.extensions {
        Some(e) if !e.is_empty() => Err(Unsupported::Extensions(e.join(", "))),
        _ => Ok(()),
    }
}

impl OsBackend for OstreeSysroot {
    #[context("Reading the OSTree sysroot {}", self.sysroot.display())]
    fn status(&self) -> anyhow::Result<OsStatus> {
        let status = sysroot::status(&self.sysroot, &self.cmdline)?;
        let booted =
            status.booted().ok_or_else(|| sysroot::SysrootError::NotBooted(self.cmdline.display().to_string()))?;
        Ok(OsStatus {
            booted_image: booted.image.clone(),
            // Re-split by the kernel's quoting rules, which libostree's split does not follow.
            kargs: split_kargs(&[booted.kargs.join(" ")]),
            staged: !status.pending().is_empty(),
            ..OsStatus::default()
        })
    }

    fn pull_ahead(&self, image: &str) -> anyhow::Result<bool> {
        let status = sysroot::status(&self.sysroot, &self.cmdline)?;
        if status.booted().is_some_and(|booted| booted.image.as_deref() == Some(image)) {
            return Ok(false);
        }
        // Not checked against the node's signature policy: this runs before the update writes the
        // new config's files, so the policy may be the old one (another key, no policy). Staging
        // the image (`apply`) checks it, with the new policy, before anything is deployed.
        let mut config = self.pull.settings()?.config;
        config.policy = None;
        sysroot::pull(&self.sysroot, image, &config)?;
        Ok(true)
    }

    fn drop_pulled(&self) -> anyhow::Result<Vec<String>> {
        sysroot::prune(&self.sysroot)
    }

    #[context("Staging OS changes in the OSTree sysroot {}", self.sysroot.display())]
    fn apply(&self, changes: &OsChanges) -> anyhow::Result<()> {
        check_supported(changes)?;
        sysroot::undeploy_pending(&self.sysroot, &self.cmdline)?;
        let status = sysroot::status(&self.sysroot, &self.cmdline)?;
        let booted = status.booted().context("no booted deployment")?;
        let image = changes.image.as_deref().filter(|img| booted.image.as_deref() != Some(*img));
        if image.is_none() && changes.kargs.is_none() {
            return Ok(());
        }
        let booted_kargs = split_kargs(&[booted.kargs.join(" ")]);
        let kargs = match &changes.kargs {
            Some(k) => sysroot::edit_kargs(&booted_kargs, &k.delete, &k.append),
            None => booted_kargs,
        };
        let pull = self.pull.settings()?;
        let staged = sysroot::deploy(&self.sysroot, &self.cmdline, image, &kargs, &pull.config)?;
        tracing::info!(commit = %staged.commit, image = ?staged.image, kargs = ?staged.kargs, "OS changes staged");
        Ok(())
    }

    fn discard_staged(&self) -> anyhow::Result<()> {
        sysroot::undeploy_pending(&self.sysroot, &self.cmdline).map(drop)
    }

    #[context("Carrying the config's files into the staged deployment")]
    fn carry_into_staged(&self, root: &Path, paths: &[String]) -> anyhow::Result<()> {
        let status = sysroot::status(&self.sysroot, &self.cmdline)?;
        let Some(staged) = status.pending().first() else { return Ok(()) };
        let staged_root = self.sysroot.join(&staged.path);
        for path in paths {
            let relative = path.trim_start_matches('/');
            anyhow::ensure!(
                relative.starts_with("etc/") && !relative.split('/').any(|part| part == ".." || part.is_empty()),
                "{path} is not a path under /etc"
            );
            let from = crate::fsutil::host_path(root, path)?;
            let to = staged_root.join(relative);
            match std::fs::symlink_metadata(&from) {
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => match std::fs::remove_file(&to) {
                    Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                        return Err(e).with_context(|| format!("removing {}", to.display()));
                    }
                    _ => {}
                },
                Err(e) => return Err(e).with_context(|| format!("reading {}", from.display())),
                Ok(meta) => {
                    std::fs::create_dir_all(to.parent().context("a file has a directory")?)?;
                    let _ = std::fs::remove_file(&to);
                    if meta.file_type().is_symlink() {
                        std::os::unix::fs::symlink(std::fs::read_link(&from)?, &to)?;
                    } else {
                        std::fs::copy(&from, &to).with_context(|| format!("copying {}", from.display()))?;
                        std::os::unix::fs::chown(&to, Some(meta.uid()), Some(meta.gid()))?;
                    }
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layering_changes_are_refused_by_name() {
        let ext = |e: &[&str]| Some(e.iter().map(|s| s.to_string()).collect());
        let cases: Vec<(OsChanges, Result<(), Unsupported>)> = vec![
            (OsChanges::default(), Ok(())),
            (
                OsChanges {
                    image: Some("r/os@sha256:1".into()),
                    kernel: Some(KernelType::Default),
                    ..Default::default()
                },
                Ok(()),
            ),
            (OsChanges { extensions: ext(&[]), ..Default::default() }, Ok(())),
            (
                OsChanges { kernel: Some(KernelType::Realtime), ..Default::default() },
                Err(Unsupported::KernelType("realtime")),
            ),
            (
                OsChanges { kernel: Some(KernelType::SixtyFourKPages), ..Default::default() },
                Err(Unsupported::KernelType("64k-pages")),
            ),
            (
                OsChanges { extensions: ext(&["usbguard", "wasm"]), ..Default::default() },
                Err(Unsupported::Extensions("usbguard, wasm".into())),
            ),
        ];
        for (changes, want) in cases {
            assert_eq!(check_supported(&changes), want, "{changes:?}");
        }
        assert!(
            Unsupported::KernelType("realtime")
                .to_string()
                .starts_with("kernelType realtime is not supported on a plain ostree sysroot")
        );
    }
}
