//! Bootable test OS trees, and committing a tree to an OSTree repository with libostree.
//!
//! The tree is the smallest one ostree accepts as bootable: a kernel and an initramfs under
//! `/usr/lib/modules/<kver>/`, configuration in `/usr/etc` (never `/etc`), and os-release with the
//! version, laid out as an OSTree host's root is (the mount points a deployment is booted with,
//! `/home` and the other writable places as links into `/var`). The kernel and initramfs are
//! placeholders: `ostree admin deploy` and ostree-ext treat the commit exactly like a real OS, and
//! the lab boots a deployment of it as a machine's root (with a userland that has systemd).

use std::collections::BTreeMap;
use std::fs;
use std::io::Write;
use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::Path;

use anyhow::{Context, Result};
use fn_error_context::context;
use ostree_ext::ostree;
use ostree_ext::prelude::*;
use ostree_ext::{gio, glib};

/// Commit metadata key holding the OS version (libostree's `OSTREE_COMMIT_META_KEY_VERSION`);
/// ostree-ext turns it into the `org.opencontainers.image.version` label.
pub const VERSION_KEY: &str = "version";

/// Invalid input for a test tree or a commit.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum TreeError {
    #[error("kernel version {0:?} is not a valid directory name under /usr/lib/modules")]
    KernelVersion(String),
    #[error("VERSION_ID {0:?} must be non-empty and use only 0-9, a-z, A-Z, '.', '_', '-'")]
    VersionId(String),
    #[error("label key {0:?} is reserved: ostree owns it (use --version for the version)")]
    ReservedLabel(String),
    #[error("label key must not be empty")]
    EmptyLabel,
    #[error("tree directory {0} already exists and is not empty")]
    NotEmpty(String),
}

/// What goes into a test OS tree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TreeSpec {
    /// The kernel version, the name of the directory under `/usr/lib/modules`.
    pub kernel_version: String,
    /// `VERSION_ID` in os-release.
    pub version_id: String,
}

/// The content of one non-directory entry of a tree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Content {
    /// A regular file with its mode bits.
    File { data: Vec<u8>, mode: u32 },
    /// A symbolic link and its target.
    Symlink(String),
    /// An empty directory (a mount point).
    Dir,
}

/// The top-level directories of an OSTree host's root that something is mounted on at boot: the
/// deployment's own are immutable, so the tree must have them.
const MOUNT_POINTS: [&str; 8] = ["boot", "dev", "proc", "run", "sys", "sysroot", "tmp", "var"];
/// Where an OSTree host keeps what other systems keep at the top or in `/usr/local`: in `/var`,
/// which survives OS updates (upstream's links; rpm-ostree and bootc images have the same).
const LINKS_INTO_VAR: [(&str, &str); 8] = [
    ("ostree", "sysroot/ostree"),
    ("home", "var/home"),
    ("root", "var/roothome"),
    ("opt", "var/opt"),
    ("srv", "var/srv"),
    ("mnt", "var/mnt"),
    ("media", "run/media"),
    ("usr/local", "../var/usrlocal"),
];
/// systemd-tmpfiles creates the links' targets in a new stateroot's empty `/var` at boot.
const VAR_TMPFILES: &str = "d /var/home 0755 root root -
d /var/roothome 0700 root root -
d /var/opt 0755 root root -
d /var/srv 0755 root root -
d /var/mnt 0755 root root -
d /var/usrlocal 0755 root root -
d /run/media 0755 root root -
";

/// Validate a spec and list the entries of its tree, paths relative to the root.
/// Parent directories are implied (created 0755).
pub fn tree_entries(spec: &TreeSpec) -> Result<Vec<(String, Content)>, TreeError> {
    let kver = &spec.kernel_version;
    if kver.is_empty() || kver == "." || kver == ".." || kver.chars().any(|c| c == '/' || c.is_whitespace()) {
        return Err(TreeError::KernelVersion(kver.clone()));
    }
    let vid = &spec.version_id;
    if vid.is_empty() || !vid.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')) {
        return Err(TreeError::VersionId(vid.clone()));
    }
    let file = |data: String, mode: u32| Content::File { data: data.into_bytes(), mode };
    let os_release = os_release(vid);
    let layout = MOUNT_POINTS
        .iter()
        .map(|dir| (dir.to_string(), Content::Dir))
        .chain(LINKS_INTO_VAR.iter().map(|(link, target)| (link.to_string(), Content::Symlink(target.to_string()))));
    Ok(layout
        .chain([
            ("usr/lib/tmpfiles.d/mco-test-ostree.conf".into(), file(VAR_TMPFILES.into(), 0o644)),
            (format!("usr/lib/modules/{kver}/vmlinuz"), file(format!("placeholder kernel {kver}\n"), 0o644)),
            (format!("usr/lib/modules/{kver}/initramfs.img"), file(format!("placeholder initramfs {kver}\n"), 0o644)),
            ("usr/lib/os-release".into(), file(os_release, 0o644)),
            // As on Fedora CoreOS: /etc/os-release points into /usr once deployed.
            ("usr/etc/os-release".into(), Content::Symlink("../usr/lib/os-release".into())),
            ("usr/etc/motd".into(), file(format!("MCO Test OS {vid}\n"), 0o644)),
            ("usr/etc/ssh/sshd_config.d/40-mco.conf".into(), file("PasswordAuthentication no\n".into(), 0o600)),
            ("usr/bin/mco-test-hello".into(), file("#!/bin/sh\necho hello from mco-test\n".into(), 0o755)),
            ("usr/share/mco-test/README".into(), file(format!("MCO test OS tree, kernel {kver}\n"), 0o644)),
        ])
        .collect())
}

/// Write the tree of `spec` into `dir`, which must not exist or be empty (so a tree is never
/// mixed with leftovers).
#[context("Writing test OS tree into {}", dir.display())]
pub fn write_tree(dir: &Path, spec: &TreeSpec) -> Result<()> {
    let entries = tree_entries(spec)?;
    if dir.exists() && fs::read_dir(dir)?.next().is_some() {
        return Err(TreeError::NotEmpty(dir.display().to_string()).into());
    }
    fs::create_dir_all(dir)?;
    for (rel, content) in &entries {
        let path = dir.join(rel);
        if let Some(parent) = path.parent() {
            fs::create_dir_all(parent)?;
        }
        match content {
            Content::File { data, mode } => {
                let mut f = fs::File::create(&path).with_context(|| format!("Creating {rel}"))?;
                f.write_all(data)?;
                f.set_permissions(fs::Permissions::from_mode(*mode))?;
            }
            Content::Symlink(target) => symlink(target, &path).with_context(|| format!("Creating symlink {rel}"))?,
            Content::Dir => fs::create_dir_all(&path).with_context(|| format!("Creating {rel}"))?,
        }
    }
    Ok(())
}

/// A root filesystem tarball [`add_userland`] refuses.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum UserlandError {
    #[error("userland entry {0:?}: only plain relative paths are allowed (no '..', no absolute path)")]
    Path(String),
    #[error("userland entry {0:?}: {1} in the tree is a symbolic link")]
    ThroughSymlink(String, String),
    #[error("userland entry {0:?}: entry type {1} is not supported")]
    Kind(String, String),
    #[error("userland entry {0:?}: a directory, not a link into /usr (a merged-/usr root filesystem is needed)")]
    NotMergedUsr(String),
    #[error("userland {0} has no /usr content: is it a root filesystem tarball?")]
    Empty(String),
}

/// Where a root filesystem's path (`./etc/passwd`, `usr/bin/sh`) goes in an OSTree tree, if it
/// goes anywhere: `/etc` as `/usr/etc`; `/usr`; the merged-/usr links at the top (`bin`, `lib`,
/// `lib64`, `sbin`; not `/usr/local`, a link into `/var`); of `/var` only dpkg's database (`/var/lib/dpkg`), for container builds `FROM`
/// the image: a node's `/var` is its stateroot's (libostree ignores a commit's `/var`, with a note
/// per directory, and ostree-ext's export writes `/var/tmp` itself). Mount points (`dev`, `proc`,
/// `sys`, `run`, `tmp`), `boot` and the other top-level directories (an OSTree system keeps `home`,
/// `root`, `opt`, ... in `/var`) are left out.
pub fn userland_path(path: &str, is_symlink: bool) -> Option<String> {
    let path = path.trim_start_matches("./").trim_end_matches('/');
    let (top, rest) = path.split_once('/').unwrap_or((path, ""));
    let join = |top: &str| if rest.is_empty() { top.to_string() } else { format!("{top}/{rest}") };
    match top {
        // An OSTree host's /usr/local is a link into /var (the tree has it).
        "usr" if rest == "local" || rest.starts_with("local/") => None,
        "usr" => Some(join(top)),
        "var" if rest == "lib/dpkg" || rest.starts_with("lib/dpkg/") => Some(join(top)),
        "etc" => Some(join("usr/etc")),
        "bin" | "lib" | "lib64" | "sbin" if rest.is_empty() && is_symlink => Some(top.to_string()),
        _ => None,
    }
}

/// `name` with only normal components (after a leading `./`), as a tar entry must be to stay in
/// the tree.
fn plain_relative(name: &str) -> Result<(), UserlandError> {
    let plain = Path::new(name.trim_start_matches("./"))
        .components()
        .all(|c| matches!(c, std::path::Component::Normal(_) | std::path::Component::CurDir));
    if plain { Ok(()) } else { Err(UserlandError::Path(name.to_string())) }
}

/// Refuses to write `rel` through a symbolic link the tarball put in the tree (it could lead out).
fn no_symlinked_parent(dir: &Path, name: &str, rel: &str) -> Result<(), UserlandError> {
    let mut at = dir.to_path_buf();
    for part in Path::new(rel).parent().into_iter().flat_map(Path::components) {
        at.push(part);
        if at.symlink_metadata().is_ok_and(|m| m.file_type().is_symlink()) {
            return Err(UserlandError::ThroughSymlink(name.to_string(), at.display().to_string()));
        }
    }
    Ok(())
}

/// Add a root filesystem tarball (for example `mmdebstrap --format=tar`) to the tree in `dir`,
/// placed by [`userland_path`]; what the tree already has (the test tree's os-release) stays.
/// Device nodes and fifos are skipped (a commit holds none); entries that could leave the tree
/// (`..`, absolute paths, paths or hard links through a symbolic link) and other entry types are
/// refused. Files keep the tarball's modes, directories are created with the default ones: the
/// commit makes every mode canonical anyway ([`commit`]). Returns how many entries were added.
#[context("Adding the userland {} to {}", tarball.display(), dir.display())]
pub fn add_userland(dir: &Path, tarball: &Path) -> Result<usize> {
    use tar::EntryType;
    let mut archive = tar::Archive::new(fs::File::open(tarball)?);
    let mut added = 0;
    for entry in archive.entries()? {
        let mut entry = entry?;
        let kind = entry.header().entry_type();
        let name = String::from_utf8_lossy(&entry.path_bytes()).into_owned();
        plain_relative(&name)?;
        if matches!(kind, EntryType::Char | EntryType::Block | EntryType::Fifo) {
            continue;
        }
        let Some(rel) = userland_path(&name, kind.is_symlink()) else {
            let top = name.trim_start_matches("./").trim_end_matches('/');
            if kind.is_dir() && matches!(top, "bin" | "lib" | "lib64" | "sbin") {
                return Err(UserlandError::NotMergedUsr(name).into());
            }
            continue;
        };
        no_symlinked_parent(dir, &name, &rel)?;
        let path = dir.join(&rel);
        match kind {
            EntryType::Directory => {
                fs::create_dir_all(&path)?;
                continue;
            }
            _ if path.symlink_metadata().is_ok() => continue,
            EntryType::Link => {
                let target = String::from_utf8_lossy(&entry.link_name_bytes().context("hard link without a target")?)
                    .into_owned();
                plain_relative(&target)?;
                let target_rel = userland_path(&target, false).with_context(|| format!("{name}: link to {target}"))?;
                no_symlinked_parent(dir, &name, &target_rel)?;
                fs::create_dir_all(path.parent().unwrap_or(dir))?;
                fs::hard_link(dir.join(target_rel), &path).with_context(|| format!("Linking {rel}"))?;
            }
            EntryType::Regular | EntryType::Continuous | EntryType::Symlink => {
                fs::create_dir_all(path.parent().unwrap_or(dir))?;
                entry.unpack(&path).with_context(|| format!("Unpacking {rel}"))?;
            }
            other => return Err(UserlandError::Kind(name, format!("{other:?}")).into()),
        }
        added += 1;
    }
    if added == 0 {
        return Err(UserlandError::Empty(tarball.display().to_string()).into());
    }
    Ok(added)
}

/// Adds `count` small regular files of distinct content under `/usr/share/mco-filler` (1,000 per
/// directory), the bulk of an OS image for benchmarks (a real OS has 30,000-80,000 files).
#[context("Writing {count} filler files into {}", dir.display())]
pub fn write_filler(dir: &Path, count: usize) -> Result<()> {
    for i in 0..count {
        let sub = dir.join(format!("usr/share/mco-filler/{:03}", i / 1000));
        if i % 1000 == 0 {
            fs::create_dir_all(&sub)?;
        }
        fs::write(sub.join(format!("file-{i:06}")), format!("filler file {i}\n"))?;
    }
    Ok(())
}

/// The os-release(5) of a test tree of `version_id`.
pub fn os_release(version_id: &str) -> String {
    format!(
        "NAME=\"MCO Test OS\"\nID=mco-test\nVERSION_ID={version_id}\nVERSION=\"{version_id}\"\nPRETTY_NAME=\"MCO Test OS {version_id}\"\n"
    )
}

/// Commit metadata keys owned by libostree and ostree-ext, never user labels.
pub fn is_reserved_key(key: &str) -> bool {
    key == VERSION_KEY || key.starts_with("ostree.") || key == "containers.bootc"
}

/// Check user labels: they go into commit metadata next to keys libostree and ostree-ext own.
pub fn validate_labels(labels: &BTreeMap<String, String>) -> Result<(), TreeError> {
    for key in labels.keys() {
        if key.is_empty() {
            return Err(TreeError::EmptyLabel);
        }
        if is_reserved_key(key) {
            return Err(TreeError::ReservedLabel(key.clone()));
        }
    }
    Ok(())
}

/// Open the repository at `path`, creating a `bare-user` one if there is none (bare-user needs no
/// root and is what ostree-ext imports into).
#[context("Opening OSTree repository {}", path.display())]
pub fn open_or_create_repo(path: &Path) -> Result<ostree::Repo> {
    let repo = ostree::Repo::new_for_path(path);
    if path.join("config").exists() {
        repo.open(gio::Cancellable::NONE)?;
    } else {
        fs::create_dir_all(path)?;
        repo.create(ostree::RepoMode::BareUser, gio::Cancellable::NONE)?;
    }
    Ok(repo)
}

/// Commit `tree_dir` to `ostree_ref` in the repository at `repo_path` (created if missing) and
/// return the commit checksum.
///
/// Like `ostree commit --bootable --canonical-permissions`: files are owned by root, and the
/// commit carries `ostree.bootable` and `ostree.linux` (the kernel version) so that ostree-ext
/// labels the image bootable. `version` and `labels` become string commit metadata.
#[context("Committing {} to {ostree_ref} in {}", tree_dir.display(), repo_path.display())]
pub fn commit(
    repo_path: &Path,
    ostree_ref: &str,
    tree_dir: &Path,
    version: &str,
    labels: &BTreeMap<String, String>,
) -> Result<String> {
    ostree::validate_rev(ostree_ref).with_context(|| format!("Invalid ref {ostree_ref:?}"))?;
    validate_labels(labels)?;
    if !tree_dir.is_dir() {
        anyhow::bail!("tree directory {} does not exist", tree_dir.display());
    }
    let repo = open_or_create_repo(repo_path)?;
    let cancellable = gio::Cancellable::NONE;
    let tx = repo.auto_transaction(cancellable)?;
    let mtree = ostree::MutableTree::new();
    let modifier = ostree::RepoCommitModifier::new(ostree::RepoCommitModifierFlags::CANONICAL_PERMISSIONS, None);
    repo.write_directory_to_mtree(&gio::File::for_path(tree_dir), &mtree, Some(&modifier), cancellable)?;
    let root = repo.write_mtree(&mtree, cancellable)?;
    let root = root.downcast::<ostree::RepoFile>().map_err(|_| anyhow::anyhow!("write_mtree returned no RepoFile"))?;

    let meta = glib::VariantDict::new(None);
    meta.insert_value(VERSION_KEY, &version.to_variant());
    for (k, v) in labels {
        meta.insert_value(k, &v.to_variant());
    }
    mark_bootable(root.upcast_ref(), &meta)?;
    let checksum = repo.write_commit(None, Some(version), None, Some(&meta.end()), &root, cancellable)?;
    repo.transaction_set_ref(None, ostree_ref, Some(checksum.as_str()));
    tx.commit(cancellable)?;
    tracing::debug!(%checksum, ostree_ref, "committed test OS tree");
    Ok(checksum.to_string())
}

/// What libostree's `ostree_commit_metadata_for_bootable()` does (not bound in the Rust crate):
/// find the kernel directory and record it.
fn mark_bootable(root: &gio::File, meta: &glib::VariantDict) -> Result<()> {
    const NOT_BOOTABLE: &str = "Not bootable: no /usr/lib/modules/<kver>/vmlinuz in the tree";
    let kdir = ostree_ext::bootabletree::find_kernel_dir(root, gio::Cancellable::NONE)
        .context(NOT_BOOTABLE)?
        .context(NOT_BOOTABLE)?;
    let kver = kdir.basename().context("kernel directory without a name")?;
    let kver = kver.to_str().context("kernel version is not UTF-8")?;
    meta.insert_value(&ostree::METADATA_KEY_BOOTABLE, &true.to_variant());
    meta.insert_value(&ostree::METADATA_KEY_LINUX, &kver.to_variant());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn userland_paths() {
        let cases: &[(&str, bool, Option<&str>)] = &[
            ("./etc/passwd", false, Some("usr/etc/passwd")),
            ("./etc/", false, Some("usr/etc")),
            ("etc/os-release", true, Some("usr/etc/os-release")),
            ("./usr/bin/sh", true, Some("usr/bin/sh")),
            ("./usr/local/bin/", false, None),
            ("./usr/local", false, None),
            ("./usr/localx/y", false, Some("usr/localx/y")),
            ("./var/lib/dpkg/status", false, Some("var/lib/dpkg/status")),
            ("./var/lib/dpkg", false, Some("var/lib/dpkg")),
            ("./var/lib/dpkgx", false, None),
            ("./var/lib/apt/lists/", false, None),
            ("./var/tmp/", false, None),
            ("./var/log/x", false, None),
            ("./bin", true, Some("bin")),
            ("./lib64", true, Some("lib64")),
            ("./bin", false, None),
            ("./bin/sh", false, None),
            ("./dev/null", false, None),
            ("./proc/", false, None),
            ("./tmp/x", false, None),
            ("./home/", false, None),
            ("./root/.bashrc", false, None),
            ("./boot/", false, None),
            ("./", false, None),
            ("./usrx/a", false, None),
        ];
        for (path, is_symlink, want) in cases {
            assert_eq!(userland_path(path, *is_symlink).as_deref(), *want, "{path}");
        }
    }

    fn spec(kver: &str, vid: &str) -> TreeSpec {
        TreeSpec { kernel_version: kver.into(), version_id: vid.into() }
    }

    #[test]
    fn entries_validate_kernel_and_version() {
        let cases: &[(&str, &str, Option<TreeError>)] = &[
            ("6.5.0-1.fc39.x86_64", "39.20240101.0", None),
            ("5.14.0-427.el9.x86_64", "9.4", None),
            ("", "1", Some(TreeError::KernelVersion("".into()))),
            ("..", "1", Some(TreeError::KernelVersion("..".into()))),
            ("a/b", "1", Some(TreeError::KernelVersion("a/b".into()))),
            ("6 1", "1", Some(TreeError::KernelVersion("6 1".into()))),
            ("6.1", "", Some(TreeError::VersionId("".into()))),
            ("6.1", "1 2", Some(TreeError::VersionId("1 2".into()))),
            ("6.1", "1\"x", Some(TreeError::VersionId("1\"x".into()))),
        ];
        for (kver, vid, want) in cases {
            let got = tree_entries(&spec(kver, vid));
            match want {
                None => assert!(got.is_ok(), "{kver} {vid}: {got:?}"),
                Some(e) => assert_eq!(got.as_ref().unwrap_err(), e, "{kver} {vid}"),
            }
        }
    }

    #[test]
    fn entries_hold_kernel_initramfs_and_usr_etc_only() {
        let entries = tree_entries(&spec("6.1.0", "42.1")).unwrap();
        let paths: Vec<&str> = entries.iter().map(|(p, _)| p.as_str()).collect();
        assert!(paths.contains(&"usr/lib/modules/6.1.0/vmlinuz"));
        assert!(paths.contains(&"usr/lib/modules/6.1.0/initramfs.img"));
        // ostree refuses trees with both /etc and /usr/etc: config lives in /usr/etc only; at the
        // top only mount points and links into /var.
        assert!(!paths.iter().any(|p| *p == "etc" || p.starts_with("etc/")), "{paths:?}");
        for (path, content) in &entries {
            match content {
                Content::Dir => assert!(MOUNT_POINTS.contains(&path.as_str()), "{path}"),
                Content::Symlink(target) if !path.starts_with("usr/") || path == "usr/local" => {
                    assert!(LINKS_INTO_VAR.contains(&(path.as_str(), target.as_str())), "{path} -> {target}")
                }
                _ => assert!(path.starts_with("usr/"), "{path}"),
            }
        }
        // Every link into /var has its target made at boot.
        let tmpfiles = entries.iter().find(|(p, _)| p == "usr/lib/tmpfiles.d/mco-test-ostree.conf").unwrap();
        let Content::File { data, .. } = &tmpfiles.1 else { panic!("the tmpfiles.d file is not a file") };
        let tmpfiles = String::from_utf8(data.clone()).unwrap();
        for (link, target) in LINKS_INTO_VAR.iter().filter(|(link, _)| *link != "ostree") {
            let absolute = Path::new("/").join(link).parent().unwrap().join(target);
            let absolute = absolute.to_str().unwrap().replace("/usr/../", "/");
            assert!(
                tmpfiles.lines().any(|l| l.split_whitespace().nth(1) == Some(absolute.as_str())),
                "{link}: {absolute}"
            );
        }
        let os_release = entries.iter().find(|(p, _)| p == "usr/lib/os-release").unwrap();
        let Content::File { data, .. } = &os_release.1 else { panic!("os-release is not a file") };
        let text = String::from_utf8(data.clone()).unwrap();
        assert!(text.lines().any(|l| l == "VERSION_ID=42.1"), "{text}");
    }

    #[test]
    fn labels_must_not_shadow_ostree_keys() {
        let labels = |k: &str| BTreeMap::from([(k.to_string(), "v".to_string())]);
        assert_eq!(validate_labels(&labels("io.openshift.build.source")), Ok(()));
        assert_eq!(validate_labels(&labels("version")), Err(TreeError::ReservedLabel("version".into())));
        assert_eq!(validate_labels(&labels("ostree.linux")), Err(TreeError::ReservedLabel("ostree.linux".into())));
        assert_eq!(
            validate_labels(&labels("containers.bootc")),
            Err(TreeError::ReservedLabel("containers.bootc".into()))
        );
        assert_eq!(validate_labels(&labels("")), Err(TreeError::EmptyLabel));
    }
}
