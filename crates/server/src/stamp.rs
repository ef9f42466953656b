//! Change detection for files the server re-reads (configs, TLS certificate and key).

use std::os::unix::fs::MetadataExt;
use std::path::Path;

/// Identity of a file's contents as far as `stat` can tell: an in-place edit changes the size or
/// mtime, an atomic replacement (rename over) the inode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stamp {
    dev: u64,
    ino: u64,
    size: u64,
    mtime: i64,
    mtime_nsec: i64,
}

impl Stamp {
    pub fn of(path: &Path) -> std::io::Result<Stamp> {
        let m = std::fs::metadata(path)?;
        Ok(Stamp { dev: m.dev(), ino: m.ino(), size: m.size(), mtime: m.mtime(), mtime_nsec: m.mtime_nsec() })
    }
}
