//! The conformance cases every golden test reads: `testdata/conformance/render/<case>` inside the
//! repository, plus the cases under `MCO_CONFORMANCE_DIR` (same layout) when it is set. Test
//! crates include this file with `#[path]`, so all of them see the same cases.

use std::path::{Path, PathBuf};

/// Every case directory (the one holding `input/` and `expected/`), sorted.
pub fn render_case_dirs() -> Vec<PathBuf> {
    let mut roots = vec![Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/conformance/render")];
    if let Ok(extra) = std::env::var("MCO_CONFORMANCE_DIR") {
        roots.push(PathBuf::from(extra));
    }
    let mut dirs: Vec<PathBuf> = roots
        .iter()
        .flat_map(|root| {
            std::fs::read_dir(root).unwrap_or_else(|e| panic!("conformance cases expected at {}: {e}", root.display()))
        })
        .map(|entry| entry.expect("readable directory entry").path())
        .filter(|dir| dir.join("expected").is_dir())
        .collect();
    dirs.sort();
    assert!(!dirs.is_empty(), "no conformance cases under {roots:?}");
    dirs
}
