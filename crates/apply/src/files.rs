//! Ignition files on the node: decoded contents written atomically with mode and owner;
//! the OS-shipped original of an overwritten file kept once as
//! `/etc/machine-config-daemon/orig<path>.mcdorig` (or an empty `noorig<path>.mcdnoorig` stamp
//! when there was none), and put back when a later config drops the file.

use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::sync::Arc;

use anyhow::bail;
use fn_error_context::context;

use crate::fsutil::{Fs, Ids};
use crate::plan::{Owner, PlannedFile};
use crate::runner::{Cmd, Runner};

pub const ORIG_DIR: &str = "/etc/machine-config-daemon/orig";
pub const NOORIG_DIR: &str = "/etc/machine-config-daemon/noorig";

pub fn orig_path(path: &str) -> String {
    format!("{ORIG_DIR}{path}.mcdorig")
}

pub fn noorig_path(path: &str) -> String {
    format!("{NOORIG_DIR}{path}.mcdnoorig")
}

/// Decides whether a file on the node was shipped by the OS: a copy in `/usr/etc` (OSTree keeps
/// the image's `/etc` there), or, on hosts with an RPM database, `rpm -qf` claims it.
#[derive(Clone, Default)]
pub struct Originals {
    pub rpm: Option<Arc<dyn Runner>>,
}

impl Originals {
    fn os_owned(&self, fs: &Fs<'_>, path: &str) -> bool {
        (path.starts_with("/etc/") && fs.host(&format!("/usr{path}")).is_ok_and(|p| fs::symlink_metadata(p).is_ok()))
            || self.rpm.as_ref().is_some_and(|r| r.run(&Cmd::new("rpm", ["-qf", path])).is_ok())
    }
}

/// Keeps the original of `path` once before the daemon first overwrites it: a copy of `from`
/// (with mode and owner, like `cp -a`) when given and the path exists, else an empty stamp.
pub fn backup_original(fs: &Fs<'_>, path: &str, from: Option<&Path>) -> anyhow::Result<()> {
    let (orig, noorig) = (fs.host(&orig_path(path))?, fs.host(&noorig_path(path))?);
    if fs::symlink_metadata(&noorig).is_ok() || fs::symlink_metadata(&orig).is_ok() {
        return Ok(());
    }
    match from {
        Some(src) if fs::symlink_metadata(fs.host(path)?).is_ok() => copy_entry(fs, src, &orig),
        _ => fs.write_atomic(&noorig, b"", 0o644, None),
    }
}

/// Copies a file or symlink with its mode and owner.
fn copy_entry(fs: &Fs<'_>, src: &Path, dst: &Path) -> anyhow::Result<()> {
    let meta = fs::symlink_metadata(src)?;
    if meta.file_type().is_symlink() {
        fs.symlink_atomic(dst, &fs::read_link(src)?, Some((meta.uid(), meta.gid())))
    } else if meta.is_file() {
        fs.write_atomic(dst, &fs::read(src)?, meta.permissions().mode() & 0o7777, Some((meta.uid(), meta.gid())))
    } else {
        bail!("{} is not a regular file or symlink", src.display())
    }
}

/// Writes one file of the config (upstream `writeFiles`).
#[context("Writing file {:?}", f.path)]
pub fn write_file(fs: &Fs<'_>, ids: &Ids, originals: &Originals, f: &PlannedFile) -> anyhow::Result<()> {
    let host = fs.host(&f.path)?;
    if fs::symlink_metadata(&host).is_ok_and(|m| m.is_dir()) {
        bail!("{} is a directory", f.path);
    }
    let uid = match &f.user {
        None => 0,
        Some(Owner::Id(id)) => *id,
        Some(Owner::Name(name)) => ids.uid(name)?,
    };
    let gid = match &f.group {
        None => 0,
        Some(Owner::Id(id)) => *id,
        Some(Owner::Name(name)) => ids.gid(name)?,
    };
    let from = originals.os_owned(fs, &f.path).then_some(host.as_path());
    backup_original(fs, &f.path, from)?;
    fs.write_atomic(&host, &f.contents, f.mode, Some((uid, gid)))
}

/// Removes a file (or drop-in, or unit) of the old config only (upstream `deleteStaleData`): a
/// stamped file is deleted; a backed-up original is restored when the OS still ships the file
/// (`verify_owner`; units and drop-ins restore unconditionally), else the backup is dropped and the
/// file deleted. `keep` leaves the file itself (it is now a drop-in of the new config).
#[context("Removing {path:?}")]
pub fn remove_stale(
    fs: &Fs<'_>,
    originals: &Originals,
    path: &str,
    verify_owner: bool,
    keep: bool,
) -> anyhow::Result<()> {
    let (orig, noorig) = (fs.host(&orig_path(path))?, fs.host(&noorig_path(path))?);
    let host = fs.host(path)?;
    if fs::symlink_metadata(&noorig).is_ok() {
        fs.remove(&noorig)?;
    } else if fs::symlink_metadata(&orig).is_ok() {
        if !verify_owner || originals.os_owned(fs, path) {
            copy_entry(fs, &orig, &host)?;
            return fs.remove(&orig);
        }
        fs.remove(&orig)?;
    }
    if keep {
        return Ok(());
    }
    fs.remove(&host)
}

// Root: it sets the files' owners, as the daemon does.
#[cfg(all(test, feature = "real-components"))]
mod real {
    use super::*;
    use crate::failpoint::Failpoints;

    #[test]
    fn originals_are_kept_once_and_restored() {
        let dir = tempfile::tempdir().unwrap();
        let fp = Failpoints::default();
        let fs = Fs::new(dir.path(), &fp);
        let originals = Originals::default();
        std::fs::create_dir_all(fs.host("/usr/etc").unwrap()).unwrap();
        std::fs::create_dir_all(fs.host("/etc").unwrap()).unwrap();
        std::fs::write(fs.host("/usr/etc/chrony.conf").unwrap(), "os default\n").unwrap();
        std::fs::write(fs.host("/etc/chrony.conf").unwrap(), "os default\n").unwrap();
        std::fs::write(fs.host("/etc/local.conf").unwrap(), "admin's\n").unwrap();
        let f = |path: &str, text: &str| PlannedFile {
            path: path.into(),
            contents: text.as_bytes().to_vec(),
            mode: 0o600,
            user: None,
            group: None,
        };
        let ids = Ids::default();
        write_file(&fs, &ids, &originals, &f("/etc/chrony.conf", "mc 1\n")).unwrap();
        write_file(&fs, &ids, &originals, &f("/etc/chrony.conf", "mc 2\n")).unwrap();
        write_file(&fs, &ids, &originals, &f("/etc/local.conf", "mc\n")).unwrap();
        write_file(&fs, &ids, &originals, &f("/etc/new.conf", "mc\n")).unwrap();
        let read = |p: &str| std::fs::read_to_string(fs.host(p).unwrap()).ok();
        assert_eq!(read(&orig_path("/etc/chrony.conf")).as_deref(), Some("os default\n"), "kept once");
        assert_eq!(read(&noorig_path("/etc/local.conf")).as_deref(), Some(""), "not OS-owned: stamp");
        assert_eq!(read(&noorig_path("/etc/new.conf")).as_deref(), Some(""));

        remove_stale(&fs, &originals, "/etc/chrony.conf", true, false).unwrap();
        remove_stale(&fs, &originals, "/etc/local.conf", true, false).unwrap();
        remove_stale(&fs, &originals, "/etc/new.conf", true, false).unwrap();
        assert_eq!(read("/etc/chrony.conf").as_deref(), Some("os default\n"));
        assert_eq!(read("/etc/local.conf"), None);
        assert_eq!(read("/etc/new.conf"), None);
        for p in ["/etc/chrony.conf", "/etc/local.conf", "/etc/new.conf"] {
            assert_eq!(read(&orig_path(p)), None, "{p}");
            assert_eq!(read(&noorig_path(p)), None, "{p}");
        }
    }
}
