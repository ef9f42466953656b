//! Any tree of directories and symbolic links, and any node path resolved in it: the result is
//! always inside the root, lexically and on the filesystem (every link on the way followed),
//! with the last component followed or not.
//!
//! The input is lines: `PATH -> TARGET` makes a link, `PATH/` a directory (both relative to the
//! root, made only through directories, never through a link), the last line is the node path.
#![no_main]

use std::fs;
use std::path::{Component, Path};

use libfuzzer_sys::fuzz_target;
use mco_rootpath::{host_path, host_path_followed};

/// `path` as plain names below `root`, every existing ancestor a real directory (so making it
/// cannot leave the fuzzer's temporary directory), or `None`.
fn plain_below(root: &Path, path: &str) -> Option<std::path::PathBuf> {
    let mut at = root.to_path_buf();
    for component in Path::new(path).components() {
        match component {
            Component::Normal(name) => {
                if fs::symlink_metadata(&at).is_ok_and(|m| !m.is_dir()) {
                    return None;
                }
                at.push(name);
            }
            Component::RootDir | Component::CurDir => {}
            Component::ParentDir | Component::Prefix(_) => return None,
        }
    }
    (at != root).then_some(at)
}

fn make(root: &Path, line: &str) {
    if let Some((path, target)) = line.split_once(" -> ") {
        if let Some(at) = plain_below(root, path)
            && at.parent().is_some_and(|p| fs::create_dir_all(p).is_ok())
        {
            let _ = std::os::unix::fs::symlink(target, at);
        }
    } else if let Some(at) = plain_below(root, line) {
        let _ = fs::create_dir_all(at);
    }
}

fuzz_target!(|text: &str| {
    let mut lines: Vec<&str> = text.lines().collect();
    let Some(node_path) = lines.pop() else { return };
    if lines.len() > 32 || node_path.contains('\0') {
        return;
    }
    let dir = tempfile::tempdir().expect("a temporary directory");
    let root = dir.path().join("root");
    fs::create_dir(&root).expect("the root");
    for line in lines {
        make(&root, line);
    }
    let canonical_root = root.canonicalize().expect("the root exists");
    for (followed, resolved) in [(false, host_path(&root, node_path)), (true, host_path_followed(&root, node_path))] {
        let Ok(resolved) = resolved else { continue };
        assert!(resolved.starts_with(&root), "{node_path:?} -> {}", resolved.display());
        // On the filesystem: what exists of the path (the entry itself when followed or when it
        // is the root, else its directory) is inside the root once every link is followed.
        let existing = if followed || resolved == root { Some(resolved.as_path()) } else { resolved.parent() };
        if let Some(real) = existing.and_then(|p| p.canonicalize().ok()) {
            assert!(real.starts_with(&canonical_root), "{node_path:?} (followed: {followed}) -> {}", real.display());
        }
    }
});
