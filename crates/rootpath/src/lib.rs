//! A node's paths resolved inside its root, as the node itself would resolve them (as if the root
//! were `/`, as Ignition and the original daemon's chroot do): whatever symbolic links the root
//! holds or a config creates, no path leaves the root.

use std::ffi::OsString;
use std::fs;
use std::path::{Component, Path, PathBuf};

use anyhow::{Context, bail};
use fn_error_context::context;

/// How many symbolic links one resolution follows before it gives up (Linux's own limit).
pub const MAX_SYMLINKS: usize = 40;

/// The host path of the entry an absolute node path names under `root`, resolved as the node
/// itself would resolve it (as if `root` were `/`, as Ignition and the original daemon's chroot
/// do): every directory on the way that is a symbolic link is followed with an absolute target
/// taken from `root` and `..` stopping at it, so the path never leaves the root, whatever links
/// the root holds or a config creates. The last component is not followed: the path names the
/// entry itself, so a write replaces a link there and a removal removes the link.
///
/// The daemon is the only writer of the paths it resolves while it applies a config; a process
/// that swapped a directory for a link between resolution and use could still redirect one
/// operation (file-descriptor-relative operations would close that window).
pub fn host_path(root: &Path, node_path: &str) -> anyhow::Result<PathBuf> {
    resolve_in_root(root, node_path, false)
}

/// [`host_path`] with the last component followed too: the file a read of the node path reads.
pub fn host_path_followed(root: &Path, node_path: &str) -> anyhow::Result<PathBuf> {
    resolve_in_root(root, node_path, true)
}

#[context("Resolving {node_path} under {}", root.display())]
fn resolve_in_root(root: &Path, node_path: &str, follow_last: bool) -> anyhow::Result<PathBuf> {
    // Components still to walk, the next one last; the resolved path below the root.
    let mut pending: Vec<OsString> = components_reversed(Path::new(node_path));
    let mut resolved = PathBuf::new();
    let mut links = 0;
    while let Some(name) = pending.pop() {
        if name == ".." {
            resolved.pop();
            continue;
        }
        let candidate = root.join(&resolved).join(&name);
        let is_link = fs::symlink_metadata(&candidate).is_ok_and(|m| m.file_type().is_symlink());
        if !is_link || (pending.is_empty() && !follow_last) {
            resolved.push(&name);
            continue;
        }
        links += 1;
        if links > MAX_SYMLINKS {
            bail!("more than {MAX_SYMLINKS} symbolic links (a loop?) at {}", candidate.display());
        }
        let target = fs::read_link(&candidate).with_context(|| format!("reading link {}", candidate.display()))?;
        if target.is_absolute() {
            resolved = PathBuf::new();
        }
        pending.extend(components_reversed(&target));
    }
    Ok(root.join(resolved))
}

/// A path's names and `..`s, last first (`/` and `.` say nothing once resolution starts at the root).
fn components_reversed(path: &Path) -> Vec<OsString> {
    path.components()
        .rev()
        .filter_map(|c| match c {
            Component::Normal(name) => Some(name.to_os_string()),
            Component::ParentDir => Some(OsString::from("..")),
            Component::RootDir | Component::CurDir | Component::Prefix(_) => None,
        })
        .collect()
}

/// Checks that a config path is absolute and has no `.`/`..` components, so it cannot leave the root.
pub fn check_node_path(path: &str) -> anyhow::Result<()> {
    let Some(rest) = path.strip_prefix('/') else { bail!("path {path:?} is not absolute") };
    if rest.split('/').any(|part| matches!(part, "" | "." | "..")) {
        bail!("path {path:?} is not clean");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_paths_must_be_absolute_and_clean() {
        check_node_path("/etc/a/b").unwrap();
        for bad in ["etc/a", "/etc/../x", "/etc/./x", "/etc//x"] {
            assert!(check_node_path(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn node_paths_resolve_inside_the_root_whatever_links_it_holds() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("root");
        for d in ["etc/deep", "var/lib", "usr/lib"] {
            fs::create_dir_all(root.join(d)).unwrap();
        }
        let link = |at: &str, to: &str| std::os::unix::fs::symlink(to, root.join(at)).unwrap();
        link("etc/abs", "/var/lib");
        link("etc/climb", "../../../../../outside");
        link("etc/up", "../../..");
        link("etc/deep/a", "../b");
        link("etc/b", "/usr/./lib/");
        link("etc/loop", "loop");
        link("etc/ping", "pong");
        link("etc/pong", "/etc/ping");
        link("home", "var/home");
        let under = |p: &str| root.join(p);
        let cases: [(&str, bool, PathBuf); 12] = [
            ("/etc/x", false, under("etc/x")),
            ("/etc/abs/x", false, under("var/lib/x")),
            ("/etc/abs", false, under("etc/abs")),
            ("/etc/abs", true, under("var/lib")),
            ("/etc/climb/x", false, under("outside/x")),
            ("/etc/climb", true, under("outside")),
            ("/etc/up/x", false, under("x")),
            ("/etc/up/etc/abs/y", false, under("var/lib/y")),
            ("/etc/deep/a/f", false, under("usr/lib/f")),
            ("/home/core/.ssh", false, under("var/home/core/.ssh")),
            ("/missing/dir/f", false, under("missing/dir/f")),
            ("/", false, under("")),
        ];
        for (node_path, follow, want) in cases {
            assert_eq!(resolve_in_root(&root, node_path, follow).unwrap(), want, "{node_path} (follow: {follow})");
        }
        for looping in ["/etc/loop/x", "/etc/ping/x", "/etc/pong"] {
            let err = format!("{:#}", host_path_followed(&root, looping).unwrap_err());
            assert!(
                err.contains(&format!("Resolving {looping} under")) && err.contains("more than 40 symbolic links"),
                "{err}"
            );
        }
        // The last component is the entry itself: a link there is not followed unless asked.
        assert_eq!(host_path(&root, "/etc/loop").unwrap(), under("etc/loop"));
    }
}
