//! The boot images' disks. A cloud installs an image once and copies its disk to every machine
//! that boots it; so does the lab: each boot image is installed once (`mco image install`, into a
//! sysroot under the lab's `disks/`) and that disk is copied to each machine's (hard links,
//! extended attributes and the deployments' immutable flag kept), which takes about a second where
//! an install takes ten, and four machines provisioned at once no longer import the same image
//! four times.

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use anyhow::Context as _;
use fn_error_context::context;
use tokio::sync::OnceCell;

use crate::layout::Layout;
use crate::node::{mount_boot, remove_sysroot};
use crate::process::run_tool;

/// The disk of each boot image the lab's machines booted from, installed on first use.
pub struct Disks {
    mco: PathBuf,
    layout: Layout,
    installed: Mutex<BTreeMap<String, Arc<OnceCell<PathBuf>>>>,
}

impl Disks {
    pub fn new(mco: &Path, layout: &Layout) -> Self {
        Disks { mco: mco.to_path_buf(), layout: layout.clone(), installed: Mutex::default() }
    }

    /// The installed disk of `image` (`HOST/NAME@sha256:…`): installed by the first caller, the
    /// others waiting for it.
    pub async fn of(&self, image: &str) -> anyhow::Result<PathBuf> {
        let cell = self
            .installed
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .entry(image.into())
            .or_default()
            .clone();
        cell.get_or_try_init(|| self.install(image)).await.cloned()
    }

    #[context("Installing the disk of the boot image {image}")]
    async fn install(&self, image: &str) -> anyhow::Result<PathBuf> {
        let disk = self.layout.disk(image);
        remove_sysroot(&disk)?;
        mount_boot(&disk)?;
        let conf = self.layout.registries_conf();
        run_tool(
            &self.mco,
            [
                OsStr::new("image"),
                "install".as_ref(),
                "--sysroot".as_ref(),
                disk.as_os_str(),
                "--image".as_ref(),
                image.as_ref(),
            ],
            &[("CONTAINERS_REGISTRIES_CONF", conf.as_os_str())],
            &self.layout.log("images"),
        )
        .await?;
        Ok(disk)
    }
}

/// Copies the installed `disk` to the sysroot of a machine (its `/boot` mounted already): every
/// file with its owner, mode, times, extended attributes and hard links (`cp -a`), then the
/// deployments marked immutable again, as libostree leaves them (`cp` does not copy the flag).
#[context("Copying the disk {} to {}", disk.display(), sysroot.display())]
pub async fn copy(disk: &Path, sysroot: &Path) -> anyhow::Result<()> {
    // `DISK/.` copies the disk's contents, /boot's into the machine's own /boot.
    let output = tokio::process::Command::new("cp")
        .arg("-a")
        .arg("--")
        .arg(disk.join("."))
        .arg(sysroot)
        .output()
        .await
        .context("running cp")?;
    if !output.status.success() {
        anyhow::bail!("cp -a: {}", String::from_utf8_lossy(&output.stderr).trim());
    }
    mco_os::sysroot::set_immutable(&mco_os::sysroot::deployment_dirs(sysroot)?, true)
}
