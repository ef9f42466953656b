//! OS rebase of an image with 50,000 files on a directory sysroot (tmpfs), with the real
//! libostree, ostree-ext, skopeo and a registry on loopback, against the ostree CLI doing the
//! same: `cargo bench -p mco-apply --bench rebase` (or `hack/bench-rebase.sh`). Prints the
//! median of several runs of:
//!
//! * rebase: the daemon's OS step, pull + import from the registry + deploy (`OsBackend::apply`);
//! * deploy: the same with the image already imported, against `ostree admin deploy` of the same
//!   commit into an identical sysroot;
//! * pull + import: the node's import (`mco_os::image::import_with`: ostree-ext, with the merge
//!   step skipped for a single-commit image) into an empty repository, against ostree-ext's own
//!   import (with its merge step: what the node did before) and the floor: `skopeo copy` of the
//!   image plus `ostree commit` of the same tree.

use std::collections::BTreeMap;
use std::process::Command;
use std::time::{Duration, Instant};

use mco_apply::os::OsBackend;
use mco_apply::os::sysroot::{OstreeSysroot, PullSource};
use mco_apply::plan::OsChanges;
use mco_os::image::{self, PullConfig};
use mco_os::registry::LocalRegistry;
use mco_os::sysroot;
use mco_os::tree::{self, TreeSpec};
use ostree_ext::container::store::{ImageImporter, PrepareResult};

const FILES: usize = 50_000;
const RUNS: usize = 3;
const KVER: &str = "6.8.1-1.mco.x86_64";

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn run(cmd: &mut Command) {
    let out = cmd.output().unwrap();
    assert!(out.status.success(), "{cmd:?}: {}", String::from_utf8_lossy(&out.stderr));
}

fn timed(f: impl FnOnce()) -> Duration {
    let t = Instant::now();
    f();
    t.elapsed()
}

fn main() {
    let tmp = tempfile::Builder::new().prefix("mco-bench-rebase-").tempdir_in("/dev/shm").unwrap();
    let dir = tmp.path();
    let registry = LocalRegistry::start(&dir.join("registry")).unwrap();
    let pull = PullConfig { registries_conf: Some(registry.registries_conf.clone()), ..Default::default() };
    let repo = dir.join("build-repo");
    let mut urls = Vec::new();
    for (version, filler) in [("1", 0), ("2", FILES)] {
        let tree_dir = dir.join(format!("tree-{version}"));
        tree::write_tree(&tree_dir, &TreeSpec { kernel_version: KVER.into(), version_id: version.into() }).unwrap();
        tree::write_filler(&tree_dir, filler).unwrap();
        tree::commit(&repo, &format!("os/{version}"), &tree_dir, version, &BTreeMap::new()).unwrap();
        let to = format!("docker://{}/mco/os:{version}", registry.host());
        let digest =
            mco_os::block_on(image::encapsulate_with(&repo, &format!("os/{version}"), &to, &pull, Default::default()))
                .unwrap()
                .unwrap();
        urls.push(format!("{}/mco/os@{digest}", registry.host()));
    }
    let (boot_image, big_image) = (&urls[0], &urls[1]);
    let big_commit = String::from_utf8(
        Command::new("ostree")
            .arg(format!("--repo={}", repo.display()))
            .args(["rev-parse", "os/2"])
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap()
    .trim()
    .to_string();

    let (mut rebase, mut ours, mut cli, mut import, mut baseline) = (vec![], vec![], vec![], vec![], vec![]);
    let mut ostree_ext_import = vec![];
    for i in 0..RUNS {
        let install = |name: &str| {
            let path = dir.join(format!("{name}-{i}"));
            let cmdline = sysroot::default_cmdline(&path);
            sysroot::install(&path, &cmdline, "mco", boot_image, &["root=UUID=1".into()], &pull).unwrap();
            (path, cmdline)
        };
        // Ours: the daemon's OS step, then the deploy alone (the image is in the repository now).
        let (path, cmdline) = install("ours");
        let backend =
            OstreeSysroot { sysroot: path.clone(), cmdline: cmdline.clone(), pull: PullSource::Given(pull.clone()) };
        let changes = OsChanges { image: Some(big_image.clone()), ..Default::default() };
        rebase.push(timed(|| backend.apply(&changes).unwrap()));
        backend.discard_staged().unwrap();
        ours.push(timed(|| {
            sysroot::deploy(&path, &cmdline, Some(big_image), &["root=UUID=1".into()], &pull).unwrap();
        }));

        // The CLI: the same commit, already in the repository, deployed by `ostree admin deploy`.
        let (path, _) = install("cli");
        let sysroot_repo = format!("--repo={}", path.join("ostree/repo").display());
        run(Command::new("ostree").args(["pull-local", &sysroot_repo]).arg(&repo).arg(&big_commit));
        cli.push(timed(|| {
            run(Command::new("ostree")
                .args(["admin", "deploy", "--os=mco", "--karg=root=UUID=1"])
                .arg(format!("--sysroot={}", path.display()))
                .arg(&big_commit))
        }));

        // Pull + import into an empty repository, against skopeo copy + ostree commit.
        let target = tree::open_or_create_repo(&dir.join(format!("import-{i}"))).unwrap();
        let imgref = sysroot::os_image_ref(big_image).unwrap();
        import.push(timed(|| {
            mco_os::block_on(image::import_with(&target, &imgref, &pull, true)).unwrap().unwrap();
        }));
        let target = tree::open_or_create_repo(&dir.join(format!("import-ostree-ext-{i}"))).unwrap();
        ostree_ext_import.push(timed(|| {
            mco_os::block_on(async {
                let mut importer =
                    ImageImporter::new(&target, &imgref, pull.proxy_config(&imgref.imgref.name)).await.unwrap();
                let PrepareResult::Ready(prep) = importer.prepare().await.unwrap() else { panic!("already imported") };
                importer.import(prep).await.unwrap();
            })
            .unwrap();
        }));
        let copy_dir = dir.join(format!("copy-{i}"));
        let commit_repo = dir.join(format!("commit-{i}"));
        baseline.push(timed(|| {
            run(Command::new("skopeo")
                .arg("--registries-conf")
                .arg(&registry.registries_conf)
                .args(["copy", "--quiet"])
                .arg(format!("docker://{big_image}"))
                .arg(format!("oci:{}:x", copy_dir.display())));
            run(Command::new("ostree")
                .args(["init", "--mode=bare-user"])
                .arg(format!("--repo={}", commit_repo.display())));
            run(Command::new("ostree")
                .args(["commit", "--bootable", "-b", "os"])
                .arg(format!("--repo={}", commit_repo.display()))
                .arg(format!("--tree=dir={}", dir.join("tree-2").display())));
        }));
        eprintln!("run {i} done");
    }
    for entry in std::fs::read_dir(dir).unwrap() {
        sysroot::remove(&entry.unwrap().path()).unwrap();
    }
    let ratio = median(ours.clone()).as_secs_f64() / median(cli.clone()).as_secs_f64();
    let import_ratio = median(import.clone()).as_secs_f64() / median(baseline.clone()).as_secs_f64();
    println!("image with {FILES} files (median of {RUNS}):");
    println!("  rebase (pull + import + deploy), ours:      {:?}", median(rebase));
    println!("  deploy, ours:                               {:?}", median(ours));
    println!("  deploy, ostree admin deploy:                {:?}  (ours / CLI = {ratio:.2})", median(cli));
    let ostree_ext_ratio = median(ostree_ext_import.clone()).as_secs_f64() / median(baseline.clone()).as_secs_f64();
    println!("  pull + import, ours:                        {:?}", median(import));
    println!(
        "  pull + import, ostree-ext's own (before):   {:?}  (/ floor = {ostree_ext_ratio:.2})",
        median(ostree_ext_import)
    );
    println!(
        "  skopeo copy + ostree commit of the tree:    {:?}  (ours / floor = {import_ratio:.2})",
        median(baseline)
    );
}
