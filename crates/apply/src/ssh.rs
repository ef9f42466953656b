//! The core user's SSH keys: all keys of the config, one per line, in the fragment
//! `/home/core/.ssh/authorized_keys.d/ignition` (directories 0700, file 0600, owned by core).

use std::fs;
use std::os::unix::fs::{DirBuilderExt, MetadataExt};

use anyhow::Context;
use fn_error_context::context;

use crate::fsutil::{self, Fs, Ids};
use crate::plan::{LEGACY_SSH_KEY_PATH, SSH_KEY_PATH};

pub const SSH_DIR: &str = "/home/core/.ssh";

#[context("Writing SSH keys to {SSH_KEY_PATH}")]
pub fn write_ssh_keys(fs: &Fs<'_>, ids: &Ids, keys: &str) -> anyhow::Result<()> {
    let uid = ids.uid("core").context("the core user must exist")?;
    let gid = ids.gid("core").context("the core group must exist")?;
    let ssh_dir = fs.host(SSH_DIR)?;
    // A root-owned ~/.ssh (made by an earlier tool) would stop sshd from reading the keys.
    if fs::symlink_metadata(&ssh_dir).is_ok_and(|m| m.uid() == 0 && uid != 0) {
        fs.remove(&ssh_dir)?;
    }
    fs.remove(&fs.host(LEGACY_SSH_KEY_PATH)?)?;
    // The home directory too, should the image lack it (as `useradd -m` would have made it).
    let home = fs.host(SSH_DIR.rsplit_once('/').map_or("/", |(home, _)| home))?;
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o755)
        .create(&home)
        .with_context(|| format!("creating {}", home.display()))?;
    let key_dir = SSH_KEY_PATH.rsplit_once('/').map_or("/", |(dir, _)| dir);
    for dir in [SSH_DIR, key_dir] {
        // Resolved again for each: the first may be a link the root holds.
        let host = fs.host(dir)?;
        if !fsutil::host_path_followed(fs.root(), dir)?.is_dir() {
            fs::DirBuilder::new().mode(0o700).create(&host).with_context(|| format!("creating {}", host.display()))?;
            std::os::unix::fs::chown(&host, Some(uid), Some(gid))?;
        }
    }
    fs.write_atomic(&fs.host(SSH_KEY_PATH)?, keys.as_bytes(), 0o600, Some((uid, gid)))
}
