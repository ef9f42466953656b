//! Filesystem primitives every writer shares: paths under a root, atomic writes (temp file in the
//! same directory, fsync, rename; directories fsynced before the update is recorded), and user and
//! group names resolved from the root's own `/etc/passwd` and `/etc/group`.

use std::cell::RefCell;
use std::collections::BTreeSet;
use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use fn_error_context::context;

pub use mco_rootpath::{check_node_path, host_path, host_path_followed};

use crate::failpoint::Failpoints;

/// Where the writers write, and the state they share during one apply.
#[derive(Debug)]
pub struct Fs<'a> {
    root: PathBuf,
    pub failpoints: &'a Failpoints,
    /// Directories holding renamed entries, fsynced once before the update is recorded.
    dirty_dirs: RefCell<BTreeSet<PathBuf>>,
}

impl<'a> Fs<'a> {
    pub fn new(root: &Path, failpoints: &'a Failpoints) -> Self {
        Fs { root: root.to_path_buf(), failpoints, dirty_dirs: RefCell::default() }
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The host path of an absolute node path, resolved inside the root (see [`host_path`]).
    pub fn host(&self, node_path: &str) -> anyhow::Result<PathBuf> {
        host_path(&self.root, node_path)
    }

    /// Writes `data` to `path` atomically: temp file `.<name>.mcotmp` next to it, mode set
    /// before the data, owner after, fsync, rename. Missing parent directories are created 0755.
    #[context("Writing {}", path.display())]
    pub fn write_atomic(&self, path: &Path, data: &[u8], mode: u32, owner: Option<(u32, u32)>) -> anyhow::Result<()> {
        let tmp = temp_path(path);
        let dir = path.parent().context("path has no parent")?;
        create_dirs(dir)?;
        let _ = fs::remove_file(&tmp);
        let mut f = OpenOptions::new().write(true).create_new(true).mode(0o600).open(&tmp)?;
        f.set_permissions(fs::Permissions::from_mode(mode))?;
        f.write_all(data)?;
        if let Some((uid, gid)) = owner {
            std::os::unix::fs::fchown(&f, Some(uid), Some(gid))
                .with_context(|| format!("setting owner {uid}:{gid} (the daemon must run as root to set owners)"))?;
            // chown clears setuid/setgid bits; set the mode again so they survive.
            f.set_permissions(fs::Permissions::from_mode(mode))?;
        }
        f.sync_all()?;
        drop(f);
        self.failpoints.hit(&format!("rename {}", path.display()))?;
        fs::rename(&tmp, path)?;
        self.dirty_dirs.borrow_mut().insert(dir.to_path_buf());
        Ok(())
    }

    /// Replaces whatever is at `path` with a symlink to `target`, atomically.
    #[context("Linking {} to {}", path.display(), target.display())]
    pub fn symlink_atomic(&self, path: &Path, target: &Path, owner: Option<(u32, u32)>) -> anyhow::Result<()> {
        let tmp = temp_path(path);
        let dir = path.parent().context("path has no parent")?;
        create_dirs(dir)?;
        let _ = fs::remove_file(&tmp);
        std::os::unix::fs::symlink(target, &tmp)?;
        if let Some((uid, gid)) = owner {
            std::os::unix::fs::lchown(&tmp, Some(uid), Some(gid))?;
        }
        self.failpoints.hit(&format!("rename {}", path.display()))?;
        if fs::symlink_metadata(path).is_ok_and(|m| m.is_dir()) {
            fs::remove_dir_all(path)?;
        }
        fs::rename(&tmp, path)?;
        self.dirty_dirs.borrow_mut().insert(dir.to_path_buf());
        Ok(())
    }

    /// Removes a file, symlink or directory tree; absent is fine (a parent that is not a
    /// directory holds nothing either: a rollback of a write that failed on such a parent
    /// must not fail on the temp file that was never made).
    #[context("Removing {}", path.display())]
    pub fn remove(&self, path: &Path) -> anyhow::Result<()> {
        let removed = match fs::symlink_metadata(path) {
            Ok(m) if m.is_dir() => fs::remove_dir_all(path),
            Ok(_) => fs::remove_file(path),
            Err(e) if matches!(e.kind(), std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory) => {
                return Ok(());
            }
            Err(e) => Err(e),
        };
        removed?;
        if let Some(dir) = path.parent() {
            self.dirty_dirs.borrow_mut().insert(dir.to_path_buf());
        }
        Ok(())
    }

    /// Makes every rename and removal so far durable.
    #[context("Syncing directories")]
    pub fn sync_dirs(&self) -> anyhow::Result<()> {
        for dir in std::mem::take(&mut *self.dirty_dirs.borrow_mut()) {
            if dir.exists() {
                sync_dir(&dir)?;
            }
        }
        Ok(())
    }
}

/// The temp file a write of `path` goes through.
pub fn temp_path(path: &Path) -> PathBuf {
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    path.with_file_name(format!(".{name}.mcotmp"))
}

fn create_dirs(dir: &Path) -> anyhow::Result<()> {
    if dir.is_dir() {
        return Ok(());
    }
    if let Some(file) = dir.ancestors().find(|a| fs::metadata(a).is_ok_and(|m| !m.is_dir())) {
        bail!("{} is not a directory", file.display());
    }
    fs::DirBuilder::new().recursive(true).mode(0o755).create(dir)?;
    Ok(())
}

pub fn sync_dir(dir: &Path) -> anyhow::Result<()> {
    File::open(dir).and_then(|d| d.sync_all()).with_context(|| format!("fsync {}", dir.display()))
}

/// Users and groups of a root, by name.
#[derive(Debug, Default, Clone)]
pub struct Ids {
    users: Vec<(String, u32)>,
    groups: Vec<(String, u32)>,
}

impl Ids {
    /// Reads `ROOT/etc/passwd` and `ROOT/etc/group`; missing files mean no named users.
    #[context("Reading users and groups under {}", root.display())]
    pub fn load(root: &Path) -> anyhow::Result<Self> {
        let read = |name: &str| -> anyhow::Result<_> {
            match fs::read_to_string(host_path_followed(root, &format!("/etc/{name}"))?) {
                Ok(s) => Ok(parse_id_db(&s)),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
                Err(e) => Err(e.into()),
            }
        };
        Ok(Ids { users: read("passwd")?, groups: read("group")? })
    }

    pub fn uid(&self, name: &str) -> anyhow::Result<u32> {
        lookup(&self.users, name).with_context(|| format!("user {name:?} not found in /etc/passwd"))
    }

    pub fn gid(&self, name: &str) -> anyhow::Result<u32> {
        lookup(&self.groups, name).with_context(|| format!("group {name:?} not found in /etc/group"))
    }
}

fn lookup(db: &[(String, u32)], name: &str) -> Option<u32> {
    db.iter().find(|(n, _)| n == name).map(|(_, id)| *id)
}

/// `name:password:id:...` lines (passwd and group share the first three fields).
fn parse_id_db(text: &str) -> Vec<(String, u32)> {
    text.lines()
        .filter_map(|line| {
            let mut fields = line.split(':');
            let name = fields.next()?;
            let id = fields.nth(1)?.parse().ok()?;
            Some((name.to_string(), id))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn id_databases_parse_name_and_id() {
        let db = parse_id_db("root:x:0:0:root:/root:/bin/bash\ncore:x:1000:1000::/home/core:/bin/bash\nbroken\n# x\n");
        assert_eq!(db, vec![("root".to_string(), 0), ("core".to_string(), 1000)]);
    }

    // Root: the kernel drops the set-uid bit of a file an unprivileged user writes.
    #[cfg(feature = "real-components")]
    mod real {
        use super::*;

        #[test]
        fn atomic_writes_leave_no_temp_file_and_set_mode() {
            let dir = tempfile::tempdir().unwrap();
            let fp = Failpoints::default();
            let fs = Fs::new(dir.path(), &fp);
            let p = fs.host("/a/b/c.conf").unwrap();
            fs.write_atomic(&p, b"x", 0o640, None).unwrap();
            fs.write_atomic(&p, b"yy", 0o4755, None).unwrap();
            assert_eq!(std::fs::read(&p).unwrap(), b"yy");
            assert_eq!(std::fs::metadata(&p).unwrap().permissions().mode() & 0o7777, 0o4755);
            assert_eq!(std::fs::metadata(dir.path().join("a")).unwrap().permissions().mode() & 0o777, 0o755);
            assert!(!temp_path(&p).exists());
            fs.sync_dirs().unwrap();
        }
    }
}
