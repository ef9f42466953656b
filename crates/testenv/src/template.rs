//! An etcd data directory in which mco's CRDs are already established, made once per machine for
//! each CRD set and API server binary, and copied for every test server: creating the CRDs and
//! waiting until the API server serves them is most of a fresh server's start.
//!
//! It lives in the temporary directory, named after a hash of what it depends on, so a changed
//! CRD or binary makes a new one; a lock file keeps concurrent test binaries from making it twice.

use std::hash::{Hash as _, Hasher as _};
use std::path::{Path, PathBuf};

use anyhow::Context as _;
use fn_error_context::context;
use rustix::fs::{FlockOperation, flock};

use crate::{CrdsIn, ETCD_DIR, Error, Network, TestEnv, find_binaries};

/// The data directory of an etcd whose API server has served every CRD of [`mco_api::crds`].
pub(crate) async fn etcd_data() -> Result<PathBuf, Error> {
    static TEMPLATE: tokio::sync::OnceCell<PathBuf> = tokio::sync::OnceCell::const_new();
    TEMPLATE.get_or_try_init(made_or_found).await.cloned()
}

async fn made_or_found() -> Result<PathBuf, Error> {
    let [kube_apiserver, etcd] = find_binaries(["kube-apiserver", "etcd"])?;
    let crds = serde_json::to_string(&mco_api::crds()).context("serializing the CRDs")?;
    let mut hasher = std::hash::DefaultHasher::new();
    (crds, kube_apiserver, etcd).hash(&mut hasher);
    let path = std::env::temp_dir().join(format!("mco-testenv-etcd-{:016x}", hasher.finish()));
    if path.is_dir() {
        return Ok(path);
    }
    let lock = lock(&path.with_extension("lock")).await?;
    if !path.is_dir() {
        make(&path).await?;
    }
    drop(lock);
    Ok(path)
}

/// An exclusive lock on `path` (created if needed), held until the file is dropped.
#[context("Locking {}", path.display())]
async fn lock(path: &Path) -> anyhow::Result<std::fs::File> {
    let file = std::fs::OpenOptions::new().create(true).truncate(false).write(true).open(path)?;
    // Blocks while another test binary makes the template: a few seconds.
    tokio::task::spawn_blocking(move || flock(&file, FlockOperation::LockExclusive).map(|()| file))
        .await
        .context("the lock's thread")?
        .context("flock")
}

/// Starts a server on an empty directory, installs the CRDs, stops it and moves its etcd data
/// to `path` (a rename: a half-made template is never seen).
async fn make(path: &Path) -> Result<(), Error> {
    let parent = path.parent().context("the template has a parent directory")?;
    let dir = tempfile::Builder::new().prefix("mco-testenv-template-").tempdir_in(parent).context("a temp dir")?;
    let mut env = TestEnv::start_with(dir, &Network::default(), CrdsIn::ToCreate).await?;
    env.shut_down().await?;
    let data = env.dir().join(ETCD_DIR);
    std::fs::rename(&data, path).with_context(|| format!("renaming {} to {}", data.display(), path.display()))?;
    Ok(())
}

/// Copies the directory tree `from` to `to` (files and directories only, as etcd writes).
#[context("Copying {} to {}", from.display(), to.display())]
pub(crate) fn copy_dir(from: &Path, to: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let target = to.join(entry.file_name());
        if entry.file_type()?.is_dir() {
            copy_dir(&entry.path(), &target)?;
        } else {
            std::fs::copy(entry.path(), &target)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copy_dir_copies_the_tree() {
        let from = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(from.path().join("member/wal")).unwrap();
        std::fs::write(from.path().join("member/wal/0.wal"), "log").unwrap();
        std::fs::write(from.path().join("top"), "t").unwrap();
        let to = tempfile::tempdir().unwrap();
        copy_dir(from.path(), &to.path().join("etcd")).unwrap();
        assert_eq!(std::fs::read_to_string(to.path().join("etcd/member/wal/0.wal")).unwrap(), "log");
        assert_eq!(std::fs::read_to_string(to.path().join("etcd/top")).unwrap(), "t");
    }
}
