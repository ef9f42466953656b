//! Against the real libostree, ostree CLI, ostree-ext and skopeo.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use mco_os::image::PullConfig;
use mco_os::registry::LocalRegistry;
use mco_os::tree::{self, TreeSpec};
use mco_os::{build, image};
use ostree_ext::container::{OstreeImageReference, SignatureSource};

const KVER: &str = "6.5.0-1.mco.x86_64";

fn run(cmd: &str, args: &[&str]) -> String {
    let out = Command::new(cmd).args(args).output().unwrap_or_else(|e| panic!("running {cmd}: {e}"));
    assert!(out.status.success(), "{cmd} {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

fn ostree(repo: &Path, args: &[&str]) -> String {
    let repo_arg = format!("--repo={}", repo.display());
    let mut all = vec![args[0], repo_arg.as_str()];
    all.extend_from_slice(&args[1..]);
    run("ostree", &all)
}

fn spec(version: &str) -> TreeSpec {
    TreeSpec { kernel_version: KVER.into(), version_id: version.into() }
}

fn labels() -> BTreeMap<String, String> {
    BTreeMap::from([("io.openshift.build.source".to_string(), "mco-test".to_string())])
}

/// A committed test tree: (tempdir, repo path, commit).
fn committed(ostree_ref: &str, version: &str) -> (tempfile::TempDir, std::path::PathBuf, String) {
    let tmp = tempfile::tempdir().unwrap();
    let tree_dir = tmp.path().join("tree");
    tree::write_tree(&tree_dir, &spec(version)).unwrap();
    let repo = tmp.path().join("repo");
    let commit = tree::commit(&repo, ostree_ref, &tree_dir, version, &labels()).unwrap();
    (tmp, repo, commit)
}

#[test]
fn commit_is_bootable_like_ostree_commit_bootable() {
    let (tmp, repo, commit) = committed("mco/os", "42.1");
    assert_eq!(ostree(&repo, &["rev-parse", "mco/os"]).trim(), commit);
    let modules = ostree(&repo, &["ls", "mco/os", &format!("/usr/lib/modules/{KVER}")]);
    assert!(modules.contains(&format!("/usr/lib/modules/{KVER}/vmlinuz")), "{modules}");
    assert!(modules.contains(&format!("/usr/lib/modules/{KVER}/initramfs.img")), "{modules}");

    // The same tree committed by the real CLI gives the same content and the same boot metadata.
    let tree_dir = tmp.path().join("tree");
    ostree(
        &repo,
        &[
            "commit",
            "--bootable",
            "--canonical-permissions",
            "-b",
            "cli/os",
            &format!("--tree=dir={}", tree_dir.display()),
        ],
    );
    assert_eq!(ostree(&repo, &["ls", "-R", "mco/os"]), ostree(&repo, &["ls", "-R", "cli/os"]));
    for key in ["ostree.bootable", "ostree.linux"] {
        let ours = ostree(&repo, &["show", "--print-metadata-key", key, "mco/os"]);
        let cli = ostree(&repo, &["show", "--print-metadata-key", key, "cli/os"]);
        assert_eq!(ours, cli, "{key}");
    }
    assert_eq!(ostree(&repo, &["show", "--print-metadata-key", "ostree.linux", "mco/os"]).trim(), format!("'{KVER}'"));
    assert_eq!(ostree(&repo, &["show", "--print-metadata-key", "version", "mco/os"]).trim(), "'42.1'");
    assert_eq!(
        ostree(&repo, &["show", "--print-metadata-key", "io.openshift.build.source", "mco/os"]).trim(),
        "'mco-test'"
    );
    let os_release = ostree(&repo, &["cat", "mco/os", "/usr/lib/os-release"]);
    assert!(os_release.lines().any(|l| l == "VERSION_ID=42.1"), "{os_release}");
}

#[test]
fn second_commit_moves_the_ref_and_reuses_the_repo() {
    let (tmp, repo, first) = committed("mco/os", "1");
    let tree2 = tmp.path().join("tree2");
    tree::write_tree(&tree2, &spec("2")).unwrap();
    let second = tree::commit(&repo, "mco/os", &tree2, "2", &BTreeMap::new()).unwrap();
    assert_ne!(first, second);
    assert_eq!(ostree(&repo, &["rev-parse", "mco/os"]).trim(), second);
    assert_eq!(ostree(&repo, &["show", "--print-metadata-key", "version", &first]).trim(), "'1'");
}

#[test]
fn bad_input_is_refused_and_leaves_the_ref_alone() {
    let (tmp, repo, first) = committed("mco/os", "1");
    // No kernel: not bootable.
    let plain = tmp.path().join("plain");
    std::fs::create_dir_all(plain.join("usr/etc")).unwrap();
    let err = tree::commit(&repo, "mco/os", &plain, "2", &BTreeMap::new()).unwrap_err();
    assert!(format!("{err:#}").contains("Not bootable"), "{err:#}");
    assert_eq!(ostree(&repo, &["rev-parse", "mco/os"]).trim(), first);

    let reserved = BTreeMap::from([("ostree.linux".to_string(), "x".to_string())]);
    let err = tree::commit(&repo, "mco/os", &tmp.path().join("tree"), "2", &reserved).unwrap_err();
    assert!(format!("{err:#}").contains("label key \"ostree.linux\" is reserved"), "{err:#}");

    let err = tree::commit(&repo, "bad ref", &tmp.path().join("tree"), "2", &BTreeMap::new()).unwrap_err();
    assert!(format!("{err:#}").contains("Invalid ref \"bad ref\""), "{err:#}");

    let err = tree::write_tree(&tmp.path().join("tree"), &spec("3")).unwrap_err();
    assert!(format!("{err:#}").contains("already exists and is not empty"), "{err:#}");
}

#[tokio::test]
async fn encapsulate_then_skopeo_and_import_agree() {
    let (tmp, repo, commit) = committed("mco/os", "42.1");
    let dir = tmp.path().join("oci");
    let dest = format!("oci:{}:42.1", dir.display());
    let digest = image::encapsulate(&repo, "mco/os", &dest).await.unwrap();

    let skopeo: serde_json::Value = serde_json::from_str(&run("skopeo", &["inspect", &dest])).unwrap();
    assert_eq!(skopeo["Digest"], digest.as_str());
    let labels = &skopeo["Labels"];
    assert_eq!(labels["ostree.commit"], commit.as_str());
    assert_eq!(labels["ostree.bootable"], "true");
    assert_eq!(labels["containers.bootc"], "1");
    assert_eq!(labels["ostree.linux"], KVER);
    assert_eq!(labels["org.opencontainers.image.version"], "42.1");
    assert_eq!(labels["io.openshift.build.source"], "mco-test");

    // Importing the image back (as a node would) yields the very commit that was encapsulated.
    let info = image::inspect(&dest).await.unwrap();
    assert_eq!(info.commit, commit);
    assert_eq!(info.digest, digest);
    assert_eq!(info.version.as_deref(), Some("42.1"));
    assert_eq!(info.kernel.as_deref(), Some(KVER));
    assert_eq!(info.labels.get("io.openshift.build.source").map(String::as_str), Some("mco-test"));
    let ours: Vec<String> = info.files.iter().map(ToString::to_string).collect();
    let cli: Vec<String> = ostree(&repo, &["ls", "-R", "mco/os"]).lines().map(str::to_string).collect();
    assert_eq!(ours, cli);
}

#[tokio::test]
async fn encapsulate_refuses_untagged_destination_and_unknown_ref() {
    let (tmp, repo, _) = committed("mco/os", "1");
    let dir = tmp.path().join("oci");
    let err = image::encapsulate(&repo, "mco/os", &format!("oci:{}", dir.display())).await.unwrap_err();
    assert!(format!("{err:#}").contains("a destination needs a tag"), "{err:#}");
    assert!(!dir.exists(), "nothing written for a refused destination");
    let err = image::encapsulate(&repo, "mco/nope", &format!("oci:{}:1", dir.display())).await.unwrap_err();
    assert!(format!("{err:#}").contains("mco/nope"), "{err:#}");
    let err = image::inspect(&format!("oci:{}:missing", tmp.path().join("absent").display())).await.unwrap_err();
    assert!(format!("{err:#}").contains("Inspecting image"), "{err:#}");
}

#[tokio::test]
async fn derived_image_adds_a_layer_on_the_base_commit() {
    let (tmp, repo, commit) = committed("mco/os", "42.1");
    let oci = tmp.path().join("oci");
    let base = format!("oci:{}:base", oci.display());
    image::encapsulate(&repo, "mco/os", &base).await.unwrap();

    let extra = tmp.path().join("extra");
    std::fs::create_dir_all(extra.join("bin")).unwrap();
    std::fs::write(extra.join("bin/hello"), "#!/bin/sh\necho derived\n").unwrap();
    let etc = tmp.path().join("etc");
    std::fs::create_dir_all(&etc).unwrap();
    std::fs::write(etc.join("mco.conf"), "layered=1\n").unwrap();
    let adds = [
        build::parse_add(&format!("{}:/usr/share/mco-extra", extra.display())).unwrap(),
        build::parse_add(&format!("{}:/etc/mco", etc.display())).unwrap(),
    ];
    let labels = BTreeMap::from([("io.mco.layer".to_string(), "extra".to_string())]);
    let derived = format!("oci:{}:derived", oci.display());
    let digest = build::build(&base, &adds, &labels, &derived, Default::default()).unwrap();

    let skopeo_base: serde_json::Value = serde_json::from_str(&run("skopeo", &["inspect", &base])).unwrap();
    let skopeo: serde_json::Value = serde_json::from_str(&run("skopeo", &["inspect", &derived])).unwrap();
    assert_eq!(skopeo["Digest"], digest.as_str());
    assert_eq!(skopeo["Layers"].as_array().unwrap().len(), skopeo_base["Layers"].as_array().unwrap().len() + 1);
    assert_eq!(skopeo["Labels"]["io.mco.layer"], "extra");
    assert_eq!(skopeo["Labels"]["ostree.commit"], commit.as_str());

    // ostree-ext imports it as the base commit plus a merge commit holding the new files;
    // /etc content lands in /usr/etc as on a node.
    let info = image::inspect(&derived).await.unwrap();
    assert_eq!(info.commit, commit);
    assert_ne!(info.merge_commit, commit);
    assert_eq!(info.kernel.as_deref(), Some(KVER));
    let lines: Vec<String> = info.files.iter().map(ToString::to_string).collect();
    assert!(lines.iter().any(|l| l.starts_with("-00644 0 0     23 /usr/share/mco-extra/bin/hello")), "{lines:#?}");
    assert!(lines.iter().any(|l| l.ends_with(" /usr/etc/mco/mco.conf")), "{lines:#?}");
    assert!(lines.iter().any(|l| l.ends_with(&format!(" /usr/lib/modules/{KVER}/vmlinuz"))));

    let err = build::build(&base, &adds, &labels, &format!("oci:{}", oci.display()), Default::default()).unwrap_err();
    assert!(format!("{err:#}").contains("a destination needs a tag"), "{err:#}");
}

/// A commit as a reader of the repository sees it: parent, timestamp, root tree and root
/// metadata as printed GVariants, and its metadata.
type CommitView = (Vec<String>, BTreeMap<String, serde_json::Value>);

/// The refs of a repository and, for each, its commit as rpm-ostree, bootc or `ostree container
/// image` read it. Metadata holding JSON (the image manifest and configuration) is compared as
/// JSON: ostree-ext serializes labels from a HashMap, in an order that changes from run to run.
fn repo_view(path: &Path) -> BTreeMap<String, CommitView> {
    let repo = tree::open_or_create_repo(path).unwrap();
    let refs = repo.list_refs(None, ostree_ext::gio::Cancellable::NONE).unwrap();
    refs.into_iter()
        .map(|(name, rev)| {
            let (commit, _) = repo.load_commit(&rev).unwrap();
            let fields = [1, 5, 6, 7].iter().map(|&i| commit.child_value(i).print(true).to_string()).collect();
            let meta = commit
                .child_value(0)
                .iter()
                .map(|entry| {
                    let value = entry.child_value(1).as_variant().unwrap();
                    let json = value.str().and_then(|s| serde_json::from_str(s).ok());
                    let value = json.unwrap_or_else(|| serde_json::Value::String(value.print(true).to_string()));
                    (entry.child_value(0).str().unwrap().to_string(), value)
                })
                .collect();
            (name.to_string(), (fields, meta))
        })
        .collect()
}

#[tokio::test]
async fn single_commit_import_is_ostree_ext_import() {
    use ostree_ext::container::store::{ImageImporter, PrepareResult};

    let (tmp, repo, commit) = committed("mco/os", "42.1");
    let dest = format!("oci:{}:42.1", tmp.path().join("oci").display());
    image::encapsulate(&repo, "mco/os", &dest).await.unwrap();
    let imgref = OstreeImageReference {
        sigverify: SignatureSource::ContainerPolicyAllowInsecure,
        imgref: image::parse_image_ref(&dest).unwrap(),
    };

    // ostree-ext's own import (checkout of the base commit, commit of the checkout) ...
    let theirs_path = tmp.path().join("theirs");
    let theirs = tree::open_or_create_repo(&theirs_path).unwrap();
    let mut importer = ImageImporter::new(&theirs, &imgref, Default::default()).await.unwrap();
    let PrepareResult::Ready(prep) = importer.prepare().await.unwrap() else { panic!("nothing imported yet") };
    assert!(prep.ostree_layers.is_empty() && prep.layers.is_empty(), "a single-commit image: the shortcut applies");
    let their_state = importer.import(prep).await.unwrap();

    // ... and ours leave the same refs, trees, metadata and timestamps.
    let ours_path = tmp.path().join("ours");
    let ours = tree::open_or_create_repo(&ours_path).unwrap();
    let our_state = image::import_with(&ours, &imgref, &Default::default(), true).await.unwrap();
    assert_eq!(our_state.base_commit, commit);
    assert_eq!(our_state.base_commit, their_state.base_commit);
    assert_eq!(our_state.manifest_digest, their_state.manifest_digest);
    assert_eq!(our_state.manifest, their_state.manifest);
    assert_eq!(our_state.configuration, their_state.configuration);
    let (our_view, their_view) = (repo_view(&ours_path), repo_view(&theirs_path));
    assert_eq!(our_view.keys().filter(|r| r.starts_with("ostree/container/")).count(), 2, "{our_view:#?}");
    assert_eq!(our_view, their_view);
    run("ostree", &["fsck", &format!("--repo={}", ours_path.display())]);

    // A second pull finds the image present, as after ostree-ext's import.
    let again = image::import_with(&ours, &imgref, &Default::default(), true).await.unwrap();
    assert_eq!(again.merge_commit, our_state.merge_commit);
    let query = ostree_ext::container::store::query_image(&ours, &imgref.imgref).unwrap().unwrap();
    assert_eq!(query.merge_commit, our_state.merge_commit);
}

/// A base image whose tree has a shell, in a registry on loopback: the test tree plus Debian's
/// static busybox as `/bin/sh` and its applets (a stand-in for a real OS userland, enough for
/// `RUN` steps). Returns the registry, the pull settings for it, the base image and its commit.
fn base_with_shell(tmp: &Path) -> (LocalRegistry, PullConfig, String, String) {
    let tree_dir = tmp.join("tree");
    tree::write_tree(&tree_dir, &spec("42.1")).unwrap();
    let busybox = std::fs::read("/bin/busybox").expect("Debian's busybox-static (hack/setup.sh installs it)");
    let dynamic = busybox.windows(b"/ld-linux".len()).any(|w| w == b"/ld-linux");
    assert!(!dynamic, "/bin/busybox must be Debian's busybox-static, not the dynamically linked busybox");
    std::fs::copy("/bin/busybox", tree_dir.join("usr/bin/busybox")).unwrap();
    for applet in ["sh", "echo", "cat", "mkdir", "false"] {
        std::os::unix::fs::symlink("busybox", tree_dir.join("usr/bin").join(applet)).unwrap();
    }
    std::os::unix::fs::symlink("usr/bin", tree_dir.join("bin")).unwrap();
    let repo = tmp.join("repo");
    let commit = tree::commit(&repo, "mco/os", &tree_dir, "42.1", &labels()).unwrap();
    let registry = LocalRegistry::start(&tmp.join("registry")).unwrap();
    let pull = PullConfig { registries_conf: Some(registry.registries_conf.clone()), ..Default::default() };
    let base = format!("docker://{}/mco/os:base", registry.host());
    mco_os::block_on(image::encapsulate_with(&repo, "mco/os", &base, &pull, Default::default())).unwrap().unwrap();
    (registry, pull, base, commit)
}

fn containerfile_build(tmp: &Path, pull: &PullConfig, containerfile: &str, to: &str) -> anyhow::Result<String> {
    let context = tmp.join("context");
    std::fs::create_dir_all(&context).unwrap();
    std::fs::write(context.join("extra.conf"), "extra=1\n").unwrap();
    std::fs::write(context.join("Containerfile"), containerfile).unwrap();
    let spec = build::ContainerBuild {
        containerfile: context.join("Containerfile"),
        context: context.clone(),
        build_args: BTreeMap::from([("GREETING".to_string(), "hello".to_string())]),
        labels: BTreeMap::from([("io.mco.label".to_string(), "given".to_string())]),
        to: to.to_string(),
    };
    build::build_containerfile(&spec, pull)
}

/// `skopeo inspect` of an image in the test registry, `None` if it is not there.
fn inspect_in(pull: &PullConfig, image: &str) -> Option<serde_json::Value> {
    let conf = pull.registries_conf.as_ref().unwrap();
    let out = Command::new("skopeo").arg("--registries-conf").arg(conf).args(["inspect", image]).output().unwrap();
    out.status.success().then(|| serde_json::from_slice(&out.stdout).unwrap())
}

#[test]
fn containerfile_build_runs_its_steps_on_the_base() {
    let tmp = tempfile::tempdir().unwrap();
    let (registry, pull, base, commit) = base_with_shell(tmp.path());
    let derived = format!("docker://{}/mco/os:derived", registry.host());
    let containerfile = format!(
        "FROM {}\nARG GREETING=unset\nCOPY extra.conf /etc/mco/extra.conf\n\
         RUN mkdir -p /usr/share/mco && echo \"$GREETING from RUN\" > /usr/share/mco/run.txt\n\
         LABEL io.mco.built=containerfile\n",
        base.trim_start_matches("docker://")
    );
    let digest = containerfile_build(tmp.path(), &pull, &containerfile, &derived).unwrap();

    let skopeo = inspect_in(&pull, &derived).expect("the image was pushed");
    assert_eq!(skopeo["Digest"], digest.as_str());
    let labels = &skopeo["Labels"];
    assert_eq!(labels["io.mco.built"], "containerfile");
    assert_eq!(labels["io.mco.label"], "given");
    assert_eq!(labels["ostree.bootable"], "true", "the base's labels are kept: {labels}");

    // A node imports it (by digest) as the base commit plus the build's layer: the RUN step's
    // output and the copied file (in /usr/etc, as ostree keeps /etc) are in the merged tree.
    let repo_path = tmp.path().join("node-repo");
    let repo = tree::open_or_create_repo(&repo_path).unwrap();
    let imgref = OstreeImageReference {
        sigverify: SignatureSource::ContainerPolicyAllowInsecure,
        imgref: image::parse_image_ref(&format!("docker://{}/mco/os@{digest}", registry.host())).unwrap(),
    };
    let state = mco_os::block_on(image::import_with(&repo, &imgref, &pull, true)).unwrap().unwrap();
    assert_eq!(state.base_commit, commit);
    assert_ne!(state.merge_commit, commit);
    let cat = |path: &str| ostree(&repo_path, &["cat", &state.merge_commit, path]);
    assert_eq!(cat("/usr/share/mco/run.txt"), "hello from RUN\n");
    assert_eq!(cat("/usr/etc/mco/extra.conf"), "extra=1\n");
    assert!(cat(&format!("/usr/lib/modules/{KVER}/vmlinuz")).starts_with("placeholder kernel"));
}

#[test]
fn failed_containerfile_builds_name_the_step_and_push_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let (registry, pull, base, _) = base_with_shell(tmp.path());
    let base = base.trim_start_matches("docker://");
    let host = registry.host();
    let cases = [
        (
            format!("FROM {base}\nRUN echo step output && exit 3\n"),
            "building at STEP \"RUN echo step output && exit 3\"",
        ),
        (format!("FROM {base}\nFROBNICATE /usr\n"), "FROBNICATE"),
        (format!("FROM {host}/mco/absent:1\nRUN true\n"), "mco/absent"),
        (format!("FROM {base}\nCOPY not-in-context /usr/share/x\n"), "not-in-context"),
    ];
    for (i, (containerfile, want)) in cases.iter().enumerate() {
        let to = format!("docker://{host}/mco/os:failed-{i}");
        let err = format!("{:#}", containerfile_build(tmp.path(), &pull, containerfile, &to).unwrap_err());
        assert!(err.contains(want), "{containerfile}: {err}");
        assert!(err.contains("buildah build failed"), "{err}");
        if i == 0 {
            assert!(err.contains("step output"), "the step's own output is kept: {err}");
        }
        assert!(inspect_in(&pull, &to).is_none(), "{to} was pushed after a failed build");
        assert!(inspect_in(&pull, &format!("docker://{base}")).is_some(), "the registry answers");
    }

    let spec = build::ContainerBuild { to: format!("docker://{host}/mco/os"), ..Default::default() };
    let err = build::build_containerfile(&spec, &pull).unwrap_err();
    assert!(format!("{err:#}").contains("a destination needs a tag"), "{err:#}");
    let spec = build::ContainerBuild {
        containerfile: tmp.path().join("absent"),
        context: tmp.path().to_path_buf(),
        to: format!("docker://{host}/mco/os:x"),
        ..Default::default()
    };
    let err = build::build_containerfile(&spec, &pull).unwrap_err();
    assert!(format!("{err:#}").contains("is not a file"), "{err:#}");
}

/// A root filesystem tarball as mmdebstrap writes one: `./`-relative paths, merged /usr links,
/// device nodes, a hard link, mount points and home directories.
fn userland_tarball(path: &Path) {
    let mut builder = tar::Builder::new(std::fs::File::create(path).unwrap());
    let mut add = |name: &str, kind: tar::EntryType, data: &[u8], link: Option<&str>| {
        let mut header = tar::Header::new_gnu();
        header.set_entry_type(kind);
        header.set_mode(if kind.is_dir() { 0o755 } else { 0o644 });
        header.set_size(data.len() as u64);
        match link {
            Some(target) => builder.append_link(&mut header, name, target).unwrap(),
            None => builder.append_data(&mut header, name, data).unwrap(),
        }
    };
    add("./", tar::EntryType::Directory, b"", None);
    add("./bin", tar::EntryType::Symlink, b"", Some("usr/bin"));
    add("./usr/bin/", tar::EntryType::Directory, b"", None);
    add("./usr/bin/dash", tar::EntryType::Regular, b"#!dash\n", None);
    add("./usr/bin/sh", tar::EntryType::Symlink, b"", Some("dash"));
    add("./usr/lib/os-release", tar::EntryType::Regular, b"ID=debian\n", None);
    add("./etc/os-release", tar::EntryType::Symlink, b"", Some("../usr/lib/os-release"));
    add("./etc/passwd", tar::EntryType::Regular, b"root:x:0:0::/root:/bin/sh\n", None);
    add("./etc/passwd-", tar::EntryType::Link, b"", Some("./etc/passwd"));
    add("./var/lib/dpkg/status", tar::EntryType::Regular, b"Package: dash\n", None);
    add("./var/tmp/", tar::EntryType::Directory, b"", None);
    add("./var/log/dpkg.log", tar::EntryType::Regular, b"log\n", None);
    add("./dev/null", tar::EntryType::Char, b"", None);
    add("./tmp/", tar::EntryType::Directory, b"", None);
    add("./root/.profile", tar::EntryType::Regular, b"x\n", None);
    builder.finish().unwrap();
}

#[test]
fn a_userland_tarball_becomes_part_of_the_test_tree() {
    let tmp = tempfile::tempdir().unwrap();
    let tarball = tmp.path().join("userland.tar");
    userland_tarball(&tarball);
    let tree_dir = tmp.path().join("tree");
    tree::write_tree(&tree_dir, &spec("42.1")).unwrap();
    let added = tree::add_userland(&tree_dir, &tarball).unwrap();
    assert_eq!(added, 6, "dash, sh, /etc/passwd and its hard link, the dpkg status, bin");

    let read = |rel: &str| std::fs::read_to_string(tree_dir.join(rel)).unwrap();
    assert_eq!(read("usr/etc/passwd"), "root:x:0:0::/root:/bin/sh\n");
    assert_eq!(read("usr/etc/passwd-"), read("usr/etc/passwd"));
    assert_eq!(read("var/lib/dpkg/status"), "Package: dash\n");
    assert_eq!(std::fs::read_link(tree_dir.join("usr/bin/sh")).unwrap(), Path::new("dash"));
    assert_eq!(std::fs::read_link(tree_dir.join("bin")).unwrap(), Path::new("usr/bin"));
    assert!(read("usr/lib/os-release").contains("MCO Test OS"), "the test tree's os-release stays");
    for absent in ["etc", "dev/null", "root/.profile", "var/tmp", "var/log"] {
        assert!(tree_dir.join(absent).symlink_metadata().is_err(), "{absent} is not part of an OSTree commit");
    }
    // The mount points are the tree's, empty; /root is its link into /var.
    for mount_point in ["dev", "tmp"] {
        assert_eq!(std::fs::read_dir(tree_dir.join(mount_point)).unwrap().count(), 0, "{mount_point}");
    }
    assert_eq!(std::fs::read_link(tree_dir.join("root")).unwrap(), Path::new("var/roothome"));

    // The tree commits as a bootable OS with the userland in it.
    let repo = tmp.path().join("repo");
    tree::commit(&repo, "mco/os", &tree_dir, "42.1", &labels()).unwrap();
    let ls = ostree(&repo, &["ls", "-R", "mco/os"]);
    assert!(ls.contains("/usr/bin/sh -> dash") && ls.contains("/var/lib/dpkg/status"), "{ls}");
    assert!(ls.contains(&format!("/usr/lib/modules/{KVER}/vmlinuz")), "{ls}");

    // Encapsulated, its layer has every path once (container runtimes refuse duplicates).
    let oci = tmp.path().join("oci");
    mco_os::block_on(image::encapsulate(&repo, "mco/os", &format!("oci:{}:1", oci.display()))).unwrap().unwrap();
    let blob = |digest: &serde_json::Value| {
        oci.join("blobs/sha256").join(digest.as_str().unwrap().trim_start_matches("sha256:"))
    };
    let json = |path: std::path::PathBuf| -> serde_json::Value {
        serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
    };
    let manifest = json(blob(&json(oci.join("index.json"))["manifests"][0]["digest"]));
    let layer = std::fs::File::open(blob(&manifest["layers"][0]["digest"])).unwrap();
    let mut paths: Vec<String> = tar::Archive::new(flate2::read::GzDecoder::new(layer))
        .entries()
        .unwrap()
        .map(|e| e.unwrap().path().unwrap().to_string_lossy().trim_end_matches('/').to_string())
        .collect();
    let count = paths.len();
    paths.sort();
    paths.dedup();
    assert_eq!(paths.len(), count, "duplicate paths in the layer");
    assert!(paths.iter().any(|p| p == "var/lib/dpkg/status"), "dpkg's database is in the image for container builds");
}

/// A raw tar entry: name, type, link target.
type RawEntry<'a> = (&'a str, tar::EntryType, &'a str);

/// A tarball of raw entries, names written as given (the tar crate refuses `..` when it writes
/// paths itself).
fn raw_tarball(path: &Path, entries: &[RawEntry]) {
    let mut builder = tar::Builder::new(std::fs::File::create(path).unwrap());
    for (name, kind, link) in entries {
        let mut header = tar::Header::new_old();
        header.as_old_mut().name[..name.len()].copy_from_slice(name.as_bytes());
        header.as_old_mut().linkname[..link.len()].copy_from_slice(link.as_bytes());
        header.set_entry_type(*kind);
        header.set_mode(0o644);
        let data: &[u8] = if kind.is_file() { b"x\n" } else { b"" };
        header.set_size(data.len() as u64);
        header.set_cksum();
        builder.append(&header, data).unwrap();
    }
    builder.finish().unwrap();
}

#[test]
fn a_userland_that_could_write_outside_the_tree_is_refused() {
    use tar::EntryType::{Directory, Link, Regular, Symlink};
    let tmp = tempfile::tempdir().unwrap();
    let outside = tmp.path().join("outside");
    std::fs::create_dir(&outside).unwrap();
    std::fs::write(tmp.path().join("secret"), "host file\n").unwrap();
    let link_out = outside.display().to_string();
    let cases: Vec<(Vec<RawEntry>, &str)> = vec![
        (vec![("./usr/../../escaped", Regular, "")], "only plain relative paths"),
        (vec![("/usr/abs", Regular, "")], "only plain relative paths"),
        (vec![("./usr/lib/esc", Symlink, &link_out), ("./usr/lib/esc/pwned", Regular, "")], "is a symbolic link"),
        (vec![("./usr/leak", Link, "./usr/../../secret")], "only plain relative paths"),
        (vec![("./bin/", Directory, ""), ("./bin/sh", Regular, "")], "merged-/usr"),
        (vec![("./home/user/x", Regular, "")], "no /usr content"),
    ];
    for (i, (entries, want)) in cases.iter().enumerate() {
        let tarball = tmp.path().join(format!("bad-{i}.tar"));
        raw_tarball(&tarball, entries);
        let tree_dir = tmp.path().join(format!("tree-{i}"));
        std::fs::create_dir(&tree_dir).unwrap();
        let err = format!("{:#}", tree::add_userland(&tree_dir, &tarball).unwrap_err());
        assert!(err.contains(want), "{entries:?}: {err}");
    }
    assert!(!tmp.path().join("escaped").exists() && std::fs::read_dir(&outside).unwrap().next().is_none());
}
