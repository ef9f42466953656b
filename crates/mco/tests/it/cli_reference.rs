//! The CLI reference in `docs/cli/` and the man pages in `docs/man/` are what `mco docs`
//! generates from the clap definitions: a flag added, removed or reworded without regenerating
//! them fails here, naming the page.

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

use crate::common::mco;

const REGENERATE: &str = "cargo run -p mco -- docs --out docs";

#[test]
fn the_checked_in_cli_reference_is_what_mco_docs_generates() {
    let docs = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs");
    let generated = tempfile::tempdir().unwrap();
    mco().args(["docs", "--out"]).arg(generated.path()).assert().success();
    let mut problems = Vec::new();
    for dir in ["cli", "man"] {
        let checked_in = files(&docs.join(dir));
        let fresh = files(&generated.path().join(dir));
        assert!(!fresh.is_empty(), "mco docs wrote nothing into {dir}/");
        for name in fresh.union(&checked_in) {
            let page = format!("docs/{dir}/{}", name.display());
            match (fs::read(docs.join(dir).join(name)), fs::read(generated.path().join(dir).join(name))) {
                (Ok(old), Ok(new)) if old == new => {}
                (Ok(_), Ok(_)) => problems.push(format!("{page} is stale")),
                (Err(_), _) => problems.push(format!("{page} is missing")),
                (_, Err(_)) => problems.push(format!("{page} documents a command that no longer exists")),
            }
        }
    }
    assert!(problems.is_empty(), "{}\nregenerate the CLI reference with `{REGENERATE}`", problems.join("\n"));
}

fn files(dir: &Path) -> BTreeSet<PathBuf> {
    let Ok(entries) = fs::read_dir(dir) else { return BTreeSet::new() };
    entries.map(|entry| PathBuf::from(entry.unwrap().file_name())).collect()
}
