//! The apply journal: before an update changes anything, every path it may touch is recorded as
//! it was (contents in one blob file, mode, owner, symlink target, or absent), with the unit
//! enablement states and whether the OS is staged. A failed update, or the next run after a
//! crash, restores exactly that state; every restore step is idempotent, so a crash during a
//! rollback is rolled back again.

use std::collections::BTreeSet;
use std::fs::{self, File};
use std::io::{BufWriter, Read, Seek, SeekFrom, Write};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use anyhow::Context;
use fn_error_context::context;
use serde::{Deserialize, Serialize};

use crate::fsutil::{Fs, host_path, host_path_followed, sync_dir, temp_path};
use crate::os::OsBackend;
use crate::state::TXN_DIR;
use crate::units::{Systemd, UnitFileState};

const JOURNAL: &str = "journal.json";
const BLOBS: &str = "blobs";
const SEAL: &str = "sealed.json";

/// A path as it was.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Before {
    Absent,
    File { offset: u64, len: u64, mode: u32, uid: u32, gid: u32 },
    Symlink { target: PathBuf, uid: u32, gid: u32 },
    Dir { mode: u32, uid: u32, gid: u32 },
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    /// Node path (`/etc/...`).
    pub path: String,
    pub before: Before,
}

/// What an update in progress must undo.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Journal {
    pub from: String,
    pub to: String,
    pub entries: Vec<Entry>,
    pub units: Vec<(String, UnitFileState)>,
    /// The update stages an OS deployment.
    pub os: bool,
}

/// Records paths before an update.
pub struct Recorder {
    root: PathBuf,
    dir: PathBuf,
    entries: Vec<Entry>,
    seen: BTreeSet<String>,
    blobs: BufWriter<File>,
    offset: u64,
}

impl Recorder {
    /// Starts a journal (any leftover uncommitted one is discarded: it never took effect).
    #[context("Starting the apply journal")]
    pub fn begin(root: &Path) -> anyhow::Result<Self> {
        // Whatever is there (a link included) goes: the journal's directory is the daemon's own.
        let dir = host_path(root, TXN_DIR)?;
        if fs::symlink_metadata(&dir).is_ok() {
            fs::remove_dir_all(&dir)?;
        }
        fs::create_dir_all(&dir)?;
        let blobs = BufWriter::new(File::create(dir.join(BLOBS))?);
        Ok(Recorder { root: root.to_path_buf(), dir, entries: Vec::new(), seen: BTreeSet::new(), blobs, offset: 0 })
    }

    /// Records `node_path` (recursively for a directory), or its topmost missing ancestor.
    pub fn path(&mut self, node_path: &str) -> anyhow::Result<()> {
        let mut prefix = String::new();
        for part in node_path.trim_start_matches('/').split('/') {
            prefix.push('/');
            prefix.push_str(part);
            if self.seen.contains(&prefix) {
                return Ok(());
            }
            if fs::symlink_metadata(host_path(&self.root, &prefix)?).is_err() {
                self.seen.insert(prefix.clone());
                self.entries.push(Entry { path: prefix, before: Before::Absent });
                return Ok(());
            }
        }
        self.record(node_path)
    }

    fn record(&mut self, node_path: &str) -> anyhow::Result<()> {
        if !self.seen.insert(node_path.to_string()) {
            return Ok(());
        }
        let host = host_path(&self.root, node_path)?;
        let meta = fs::symlink_metadata(&host).with_context(|| format!("reading {}", host.display()))?;
        let (mode, uid, gid) = (meta.permissions().mode() & 0o7777, meta.uid(), meta.gid());
        let before = if meta.file_type().is_symlink() {
            Before::Symlink { target: fs::read_link(&host)?, uid, gid }
        } else if meta.is_dir() {
            self.entries.push(Entry { path: node_path.to_string(), before: Before::Dir { mode, uid, gid } });
            for child in fs::read_dir(&host)? {
                let name = child?.file_name();
                self.record(&format!("{node_path}/{}", name.to_string_lossy()))?;
            }
            return Ok(());
        } else {
            let mut data = Vec::new();
            File::open(&host)?.read_to_end(&mut data)?;
            self.blobs.write_all(&data)?;
            let offset = self.offset;
            self.offset += data.len() as u64;
            Before::File { offset, len: data.len() as u64, mode, uid, gid }
        };
        self.entries.push(Entry { path: node_path.to_string(), before });
        Ok(())
    }

    /// Makes the journal durable; from here on, the update is undone unless it completes.
    #[context("Writing the apply journal")]
    pub fn commit(
        self,
        from: &str,
        to: &str,
        units: Vec<(String, UnitFileState)>,
        os: bool,
    ) -> anyhow::Result<Journal> {
        let blobs = self.blobs.into_inner().map_err(|e| e.into_error())?;
        blobs.sync_all()?;
        let journal = Journal { from: from.into(), to: to.into(), entries: self.entries, units, os };
        let tmp = self.dir.join(format!("{JOURNAL}.tmp"));
        let mut f = create_new(&tmp)?;
        f.write_all(&serde_json::to_vec(&journal)?)?;
        f.sync_all()?;
        fs::rename(&tmp, self.dir.join(JOURNAL))?;
        sync_dir(&self.dir)?;
        Ok(journal)
    }
}

/// The committed journal of an interrupted update, if any.
pub fn load(root: &Path) -> anyhow::Result<Option<Journal>> {
    let path = txn_file(root, JOURNAL)?;
    match fs::read(&path) {
        Ok(bytes) => Ok(Some(serde_json::from_slice(&bytes).with_context(|| format!("parsing {}", path.display()))?)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// Marks a journaled update as complete except for its reboot: from here on a crash must not roll
/// it back. The boot id tells the next run whether the reboot happened.
#[context("Sealing the apply journal")]
pub fn seal(root: &Path, rationale: &str) -> anyhow::Result<()> {
    let seal = Seal { rationale: rationale.to_string(), boot_id: boot_id(root)? };
    let dir = host_path_followed(root, TXN_DIR)?;
    let tmp = dir.join(format!("{SEAL}.tmp"));
    let mut f = create_new(&tmp)?;
    f.write_all(&serde_json::to_vec(&seal)?)?;
    f.sync_all()?;
    fs::rename(&tmp, dir.join(SEAL))?;
    sync_dir(&dir)
}

/// The seal of an interrupted update, if it was sealed.
pub fn sealed(root: &Path) -> anyhow::Result<Option<Seal>> {
    let path = txn_file(root, SEAL)?;
    match fs::read(&path) {
        Ok(bytes) => Ok(Some(serde_json::from_slice(&bytes).with_context(|| format!("parsing {}", path.display()))?)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// A complete update whose reboot was (or is being) requested.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Seal {
    pub rationale: String,
    /// The kernel's boot id when sealed: a different one now means the node rebooted since.
    pub boot_id: String,
}

/// The boot id of the system running `root`: for a directory root booted by something else, the
/// id that booter wrote to `ROOT/run/mco-boot-id`; for a host's root mounted in the daemon's pod,
/// the one its own `/proc` shows (the kernel's on a node, the machine's own in a container or a
/// lab machine, whose boots the kernel does not see); else the kernel's.
pub fn boot_id(root: &Path) -> anyhow::Result<String> {
    let candidates = if root == Path::new("/") {
        Vec::new()
    } else {
        vec![host_path_followed(root, DIRECTORY_ROOT_BOOT_ID)?, root.join(BOOT_ID.trim_start_matches('/'))]
    };
    let path = candidates.iter().find(|path| path.exists()).map_or(Path::new(BOOT_ID), PathBuf::as_path);
    Ok(fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?.trim().to_string())
}

const BOOT_ID: &str = "/proc/sys/kernel/random/boot_id";
/// Where a directory root's booter records each boot's id (under /run: gone at the next boot).
pub const DIRECTORY_ROOT_BOOT_ID: &str = "/run/mco-boot-id";

/// Ends an update: the journal is removed (the commit point of a successful update).
#[context("Removing the apply journal")]
pub fn finish(root: &Path) -> anyhow::Result<()> {
    let dir = host_path_followed(root, TXN_DIR)?;
    match fs::remove_file(dir.join(JOURNAL)) {
        Ok(()) => sync_dir(&dir)?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e.into()),
    }
    if fs::symlink_metadata(&dir).is_ok() {
        fs::remove_dir_all(&dir)?;
    }
    Ok(())
}

/// A file of the journal's directory, resolved inside the root.
fn txn_file(root: &Path, name: &str) -> anyhow::Result<PathBuf> {
    host_path_followed(root, &format!("{TXN_DIR}/{name}"))
}

/// A new file at `path` (whatever was there, a link included, is replaced, never written through).
fn create_new(path: &Path) -> std::io::Result<File> {
    match fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
        _ => {}
    }
    File::options().write(true).create_new(true).open(path)
}

/// Puts every recorded path, unit enablement and the OS back as they were.
#[context("Rolling back the update {} -> {}", journal.from, journal.to)]
pub fn rollback(
    fs: &Fs<'_>,
    journal: &Journal,
    systemd: &dyn Systemd,
    os: Option<&dyn OsBackend>,
) -> anyhow::Result<()> {
    // A rollback interrupted by a crash must be finished, not taken for a complete update.
    fs.remove(&host_path(fs.root(), &format!("{TXN_DIR}/{SEAL}"))?)?;
    fs.sync_dirs()?;
    // Links the new unit files made go first, while those files are still there.
    for (unit, before) in &journal.units {
        if let Err(e) = systemd.disable(std::slice::from_ref(unit))
            && *before != UnitFileState::NotFound
        {
            return Err(e);
        }
    }
    for e in &journal.entries {
        fs.remove(&temp_path(&fs.host(&e.path)?))?;
    }
    for e in journal.entries.iter().filter(|e| e.before == Before::Absent) {
        fs.remove(&fs.host(&e.path)?)?;
    }
    let mut dirs: Vec<&Entry> = journal.entries.iter().filter(|e| matches!(e.before, Before::Dir { .. })).collect();
    dirs.sort_by_key(|e| e.path.matches('/').count());
    for e in dirs {
        let Before::Dir { mode, uid, gid } = e.before else { unreachable!() };
        let host = fs.host(&e.path)?;
        if !fs::symlink_metadata(&host).is_ok_and(|m| m.is_dir()) {
            fs.remove(&host)?;
            fs::create_dir(&host).with_context(|| format!("creating {}", host.display()))?;
        }
        fs::set_permissions(&host, fs::Permissions::from_mode(mode))?;
        std::os::unix::fs::chown(&host, Some(uid), Some(gid))?;
    }
    let mut blobs = File::open(txn_file(fs.root(), BLOBS)?).context("opening the journal's blobs")?;
    for e in &journal.entries {
        let host = fs.host(&e.path)?;
        match &e.before {
            Before::File { offset, len, mode, uid, gid } => {
                let mut data = vec![0; *len as usize];
                blobs.seek(SeekFrom::Start(*offset))?;
                blobs.read_exact(&mut data)?;
                if fs::symlink_metadata(&host).is_ok_and(|m| m.is_dir()) {
                    fs.remove(&host)?;
                }
                fs.write_atomic(&host, &data, *mode, Some((*uid, *gid)))?;
            }
            Before::Symlink { target, uid, gid } => fs.symlink_atomic(&host, target, Some((*uid, *gid)))?,
            Before::Absent | Before::Dir { .. } => {}
        }
    }
    let enabled: Vec<String> =
        journal.units.iter().filter(|(_, b)| *b == UnitFileState::Enabled).map(|(u, _)| u.clone()).collect();
    if !enabled.is_empty() {
        systemd.enable(&enabled)?;
    }
    if journal.os {
        os.context("the update staged an OS deployment but no OS backend is configured to drop it")?
            .discard_staged()?;
    }
    fs.sync_dirs()
}
