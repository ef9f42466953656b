//! The daemon on a real OSTree sysroot (libostree, ostree-ext, skopeo) with OS images in a real
//! registry (docker-registry on loopback): install a boot image, complete the first boot from
//! the encapsulated config Ignition leaves, boot, update (files only, kernel arguments, a new
//! image), and roll back at every failpoint of an update; pull with the node's pull secret from a
//! registry that requires authentication, and through a registries.conf mirror.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};

use base64::Engine;
use mco_api::MachineConfig;
use mco_apply::apply::{self, ApplyError, Disruption, Node, REBOOT_REQUEST};
use mco_apply::failpoint::{Action, Failpoints};
use mco_apply::firstboot::{self, ENCAPSULATED, ENCAPSULATED_BAK, Firstboot};
use mco_apply::os::sysroot::{OstreeSysroot, PullSource};
use mco_apply::state;
use mco_os::image::PullConfig;
use mco_os::registry::LocalRegistry;
use mco_os::signing::{SignatureStore, SigningKey};
use mco_os::sysroot::{self, Status};
use mco_os::tree::{self, TreeSpec};
use serde_json::json;

const KVER: &str = "6.8.1-1.mco.x86_64";
const BOOT_KARGS: [&str; 2] = ["root=UUID=2b5e", "rw"];

/// A lab in a tmpfs directory: a registry, the images pushed to it, a node root and a sysroot.
struct Lab {
    tmp: tempfile::TempDir,
    registry: LocalRegistry,
    /// The only user and password an authenticated registry answers.
    credentials: Option<(&'static str, &'static str)>,
    root: PathBuf,
    sysroot: PathBuf,
}

impl Drop for Lab {
    fn drop(&mut self) {
        sysroot::remove(&self.sysroot).unwrap();
    }
}

impl Lab {
    /// A lab with an open registry.
    fn new() -> Lab {
        Lab::start(None)
    }

    /// A lab whose registry answers only `credentials` (user, password); the node's pull secret
    /// holds them.
    fn start(credentials: Option<(&'static str, &'static str)>) -> Lab {
        // tmpfs: fast.
        let tmp = tempfile::Builder::new().prefix("mco-apply-ostree-").tempdir_in("/dev/shm").unwrap();
        let dir = tmp.path().join("registry");
        let registry = match credentials {
            None => LocalRegistry::start(&dir),
            // The lowest bcrypt cost: a test password.
            Some((user, password)) => {
                LocalRegistry::start_authenticated(&dir, &format!("{user}:{}\n", bcrypt::hash(password, 4).unwrap()))
            }
        }
        .unwrap();
        let root = tmp.path().join("root");
        for d in ["etc/containers", "usr/etc", "run", "var/lib/kubelet"] {
            fs::create_dir_all(root.join(d)).unwrap();
        }
        fs::write(root.join("etc/passwd"), "root:x:0:0:root:/root:/bin/sh\n").unwrap();
        fs::write(root.join("etc/group"), "root:x:0:\n").unwrap();
        let sysroot = tmp.path().join("sysroot");
        let lab = Lab { tmp, registry, credentials, root, sysroot };
        // The node pulls with its own registries.conf and pull secret.
        fs::copy(&lab.registry.registries_conf, lab.root.join("etc/containers/registries.conf")).unwrap();
        lab.write_pull_secret(credentials);
        lab
    }

    /// The node's pull secret (kubelet's `config.json`), with `credentials` for the registry.
    fn write_pull_secret(&self, credentials: Option<(&str, &str)>) {
        fs::write(self.root.join("var/lib/kubelet/config.json"), auth_json(&self.registry.host(), credentials))
            .unwrap();
    }

    /// Commits a test tree of `version` and pushes it (with the registry's credentials, if any);
    /// returns its osImageURL (by digest).
    fn image(&self, version: &str) -> String {
        let dir = self.tmp.path().join(format!("tree-{version}"));
        tree::write_tree(&dir, &TreeSpec { kernel_version: KVER.into(), version_id: version.into() }).unwrap();
        let repo = self.tmp.path().join("build-repo");
        tree::commit(&repo, "mco/os", &dir, version, &BTreeMap::new()).unwrap();
        let name = format!("{}/mco/os", self.registry.host());
        let authfile = self.tmp.path().join("push-auth.json");
        fs::write(&authfile, auth_json(&self.registry.host(), self.credentials)).unwrap();
        let push = PullConfig {
            registries_conf: Some(self.registry.registries_conf.clone()),
            authfile: Some(authfile),
            ..Default::default()
        };
        let to = format!("docker://{name}:{version}");
        let digest = mco_os::block_on(mco_os::image::encapsulate_with(&repo, "mco/os", &to, &push, Default::default()))
            .unwrap()
            .unwrap();
        format!("{name}@{digest}")
    }

    fn cmdline(&self) -> PathBuf {
        sysroot::default_cmdline(&self.sysroot)
    }

    fn install(&self, image: &str) {
        let kargs: Vec<String> = BOOT_KARGS.iter().map(|s| s.to_string()).collect();
        sysroot::install(&self.sysroot, &self.cmdline(), "mco", image, &kargs, &PullConfig::of_node_root(&self.root))
            .unwrap();
    }

    fn node(&self) -> Node {
        let os = OstreeSysroot {
            sysroot: self.sysroot.clone(),
            cmdline: self.cmdline(),
            pull: PullSource::NodeRoot(self.root.clone()),
        };
        Node::directory_root(self.root.clone(), Some(Box::new(os)))
    }

    fn status(&self) -> Status {
        sysroot::status(&self.sysroot, &self.cmdline()).unwrap()
    }

    /// The lab's reboot: the node asked for it; boot the default deployment.
    fn reboot(&self) {
        fs::remove_file(self.root.join(REBOOT_REQUEST.trim_start_matches('/'))).expect("a reboot was requested");
        sysroot::boot(&self.sysroot, &self.cmdline()).unwrap();
    }

    /// What a reboot request needs of the lab.
    fn handle(&self) -> LabHandle {
        LabHandle { root: self.root.clone(), sysroot: self.sysroot.clone(), cmdline: self.cmdline() }
    }

    fn reboot_requested(&self) -> bool {
        self.root.join(REBOOT_REQUEST.trim_start_matches('/')).exists()
    }

    fn read(&self, path: &str) -> Option<String> {
        fs::read_to_string(self.root.join(path.trim_start_matches('/'))).ok()
    }

    /// What Ignition leaves on a first boot: the config's files and the encapsulated config.
    fn ignition_writes(&self, mc: &MachineConfig) {
        for (path, text) in files_of(mc) {
            let host = self.root.join(path.trim_start_matches('/'));
            fs::create_dir_all(host.parent().unwrap()).unwrap();
            fs::write(host, text).unwrap();
        }
        fs::write(self.root.join(ENCAPSULATED.trim_start_matches('/')), serde_json::to_vec(mc).unwrap()).unwrap();
    }
}

fn data(text: &str) -> String {
    format!("data:;base64,{}", base64::engine::general_purpose::STANDARD.encode(text))
}

fn mc(name: &str, image: &str, kargs: &[&str], files: &[(&str, &str)], extra: serde_json::Value) -> MachineConfig {
    let files: Vec<_> =
        files.iter().map(|(p, t)| json!({"path": p, "mode": 420, "contents": {"source": data(t)}})).collect();
    let mut spec = json!({
        "config": {"ignition": {"version": "3.5.0"}, "storage": {"files": files}},
        "osImageURL": image,
        "kernelArguments": kargs,
    });
    spec.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
    serde_json::from_value(json!({"apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineConfig",
        "metadata": {"name": name}, "spec": spec}))
    .unwrap()
}

fn files_of(mc: &MachineConfig) -> Vec<(String, String)> {
    let config = mc.spec.config.as_ref().unwrap();
    config["storage"]["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            let src = f["contents"]["source"].as_str().unwrap().strip_prefix("data:;base64,").unwrap();
            let text = base64::engine::general_purpose::STANDARD.decode(src).unwrap();
            (f["path"].as_str().unwrap().to_string(), String::from_utf8(text).unwrap())
        })
        .collect()
}

fn cluster() -> Disruption {
    Disruption::Cluster { policies: mco_disruption::default_cluster_policies(), skip_registry_drain: false }
}

fn kargs_with(extra: &[&str]) -> Vec<String> {
    BOOT_KARGS.iter().chain(extra).map(|s| s.to_string()).collect()
}

/// `ostree admin status` of the real CLI agrees on the number of deployments.
fn ostree_cli_deployments(sysroot: &Path) -> usize {
    let out = Command::new("ostree")
        .args(["admin", "status"])
        .arg(format!("--sysroot={}", sysroot.display()))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap().lines().filter(|l| l.starts_with("  mco ")).count()
}

struct LabHandle {
    root: PathBuf,
    sysroot: PathBuf,
    cmdline: PathBuf,
}

/// The lab's reboot request, recording each rationale with which of the encapsulated config's
/// two names the staged deployment's `/etc` has at that moment (none without one).
struct StagedEtcAtReboot {
    lab: LabHandle,
    seen: Arc<Mutex<Vec<RebootSeen>>>,
}

/// A reboot's rationale and the encapsulated config's names in the staged `/etc` then.
type RebootSeen = (String, Vec<&'static str>);

impl apply::Reboot for StagedEtcAtReboot {
    fn reboot(&self, rationale: &str) -> anyhow::Result<()> {
        let status = sysroot::status(&self.lab.sysroot, &self.lab.cmdline)?;
        let staged = status.pending().first().map(|d| self.lab.sysroot.join(&d.path));
        let names = [ENCAPSULATED, ENCAPSULATED_BAK];
        let present = staged.map_or_else(Vec::new, |staged| {
            names.into_iter().filter(|n| staged.join(n.trim_start_matches('/')).exists()).collect()
        });
        self.seen.lock().unwrap().push((rationale.to_string(), present));
        apply::RequestFileReboot { root: self.lab.root.clone() }.reboot(rationale)
    }
}

#[test]
fn firstboot_pivot_then_updates_then_rollback() {
    let lab = Lab::new();
    let (boot_image, image_a, image_d) = (lab.image("1"), lab.image("2"), lab.image("3"));
    lab.install(&boot_image);
    let installed = lab.status();
    assert_eq!(installed.deployments.len(), 1);
    assert_eq!(installed.booted, Some(0));
    assert_eq!(installed.deployments[0].image.as_deref(), Some(boot_image.as_str()));
    assert_eq!(installed.deployments[0].kargs, kargs_with(&[]));

    // First boot: Ignition wrote the files and the encapsulated config; the daemon pivots.
    let a = mc(
        "rendered-worker-a",
        &image_a,
        &["nosmt", "mitigations=auto quiet"],
        &[("/etc/mco/a.conf", "a\n")],
        json!({}),
    );
    lab.ignition_writes(&a);
    let mut node = lab.node();
    let seen_at_reboot = Arc::new(Mutex::new(Vec::new()));
    node.reboot = Box::new(StagedEtcAtReboot { lab: lab.handle(), seen: seen_at_reboot.clone() });
    let done = firstboot::firstboot(&node, &Failpoints::default()).unwrap();
    assert!(matches!(done, Firstboot::Applied { ref config, .. } if config == "rendered-worker-a"), "{done:?}");
    // One reboot, requested once the rename reached the deployment the machine boots next (a
    // reboot under way may stop the daemon at any moment).
    assert_eq!(
        *seen_at_reboot.lock().unwrap(),
        [("Node will reboot into config rendered-worker-a".to_string(), vec![ENCAPSULATED_BAK])]
    );
    let staged = lab.status();
    assert_eq!(staged.deployments.len(), 2);
    assert_eq!(staged.booted, Some(1), "still on the boot image until the reboot");
    assert_eq!(staged.pending().len(), 1);
    let new = &staged.deployments[0];
    assert_eq!(new.image.as_deref(), Some(image_a.as_str()));
    assert_eq!(new.kargs, kargs_with(&["nosmt", "mitigations=auto", "quiet"]));
    assert_ne!(new.commit, installed.deployments[0].commit);
    assert!(node.os.as_ref().unwrap().status().unwrap().staged);
    assert_eq!(lab.read("/etc/mco/a.conf").as_deref(), Some("a\n"));
    assert!(lab.read(ENCAPSULATED).is_none());
    assert!(lab.read(ENCAPSULATED_BAK).is_some());
    assert_eq!(
        state::read_current_config(&lab.root).unwrap().unwrap().metadata.name.as_deref(),
        Some("rendered-worker-a")
    );
    assert_eq!(ostree_cli_deployments(&lab.sysroot), 2);
    // The deployment holds the image's content.
    let os_release = fs::read_to_string(lab.sysroot.join(&new.path).join("usr/lib/os-release")).unwrap();
    assert!(os_release.contains("VERSION_ID=2\n"), "{os_release}");

    lab.reboot();
    let booted = lab.status();
    assert_eq!(booted.booted, Some(0));
    assert_eq!(booted.deployments[1].commit, installed.deployments[0].commit, "the boot image is the rollback");
    let os = node.os.as_ref().unwrap().status().unwrap();
    assert_eq!(os.booted_image.as_deref(), Some(image_a.as_str()));
    assert!(!os.staged);
    assert!(matches!(firstboot::firstboot(&node, &Failpoints::default()).unwrap(), Firstboot::NotFirstboot));

    // Files only: no new deployment, no reboot.
    let booted_before = lab.status();
    let b = mc(
        "rendered-worker-b",
        &image_a,
        &["nosmt", "mitigations=auto quiet"],
        &[("/etc/mco/a.conf", "b\n")],
        json!({}),
    );
    apply::apply(&node, &a, &b, &cluster(), &Failpoints::default()).unwrap();
    assert_eq!(lab.status(), booted_before);
    assert_eq!(lab.read("/etc/mco/a.conf").as_deref(), Some("b\n"));

    // Kernel arguments: the booted commit again, with the new arguments.
    let c = mc("rendered-worker-c", &image_a, &["nosmt", "console=ttyS0"], &[("/etc/mco/a.conf", "b\n")], json!({}));
    apply::apply(&node, &b, &c, &cluster(), &Failpoints::default()).unwrap();
    let staged = lab.status();
    assert_eq!(staged.pending().len(), 1);
    assert_eq!(staged.deployments[0].commit, booted_before.deployments[0].commit);
    assert_eq!(staged.deployments[0].kargs, kargs_with(&["nosmt", "console=ttyS0"]));
    lab.reboot();

    // A new OS image from the registry, pulled first as the daemon does (the pull stages nothing),
    // keeps the kernel arguments.
    let before_pull = lab.status();
    assert!(node.os.as_ref().unwrap().pull_ahead(&image_d).unwrap(), "{image_d} not pulled");
    assert_eq!(lab.status(), before_pull, "a pull stages nothing");
    let d = mc("rendered-worker-d", &image_d, &["nosmt", "console=ttyS0"], &[("/etc/mco/a.conf", "b\n")], json!({}));
    apply::apply(&node, &c, &d, &cluster(), &Failpoints::default()).unwrap();
    lab.reboot();
    let on_d = lab.status();
    let booted = on_d.booted().unwrap();
    assert_eq!(on_d.booted, Some(0));
    assert_eq!(booted.image.as_deref(), Some(image_d.as_str()));
    assert_eq!(booted.kargs, kargs_with(&["nosmt", "console=ttyS0"]));
    // The booted image is not pulled again.
    assert!(!node.os.as_ref().unwrap().pull_ahead(&image_d).unwrap(), "the booted {image_d} pulled again");

    // A failure at any point of the next update leaves the node on d: no pending deployment,
    // files and state as they were.
    let e = mc(
        "rendered-worker-e",
        &image_a,
        &["nosmt"],
        &[("/etc/mco/a.conf", "e\n"), ("/etc/mco/e.conf", "e\n")],
        json!({}),
    );
    let mut point = 1;
    loop {
        let failpoints = Failpoints::new(Some((point, Action::Error)));
        match apply::apply(&node, &d, &e, &cluster(), &failpoints) {
            Err(ApplyError::Degraded(reason)) => {
                assert!(reason.contains("injected failure"), "{reason}");
                assert_eq!(lab.status(), on_d, "failpoint {point}");
                assert_eq!(lab.read("/etc/mco/a.conf").as_deref(), Some("b\n"), "failpoint {point}");
                assert_eq!(lab.read("/etc/mco/e.conf"), None, "failpoint {point}");
                let current = state::read_current_config(&lab.root).unwrap().unwrap();
                assert_eq!(current.metadata.name.as_deref(), Some("rendered-worker-d"), "failpoint {point}");
                assert!(!lab.reboot_requested(), "failpoint {point}");
                point += 1;
            }
            Err(other) => panic!("failpoint {point}: {other}"),
            Ok(_) => break,
        }
    }
    assert!(point > 3, "the update passed only {point} failpoints");
    let staged = lab.status();
    assert_eq!(staged.deployments[0].image.as_deref(), Some(image_a.as_str()));
    assert_eq!(staged.deployments[0].kargs, kargs_with(&["nosmt"]));
    assert!(lab.reboot_requested());
}

#[test]
fn firstboot_refuses_layering_and_does_nothing_on_a_matching_machine() {
    let lab = Lab::new();
    let boot_image = lab.image("1");
    lab.install(&boot_image);
    let node = lab.node();
    let installed = lab.status();

    let rt = mc(
        "rendered-worker-rt",
        &lab.image("2"),
        &[],
        &[("/etc/mco/rt.conf", "rt\n")],
        json!({"kernelType": "realtime"}),
    );
    lab.ignition_writes(&rt);
    let root_before = tree_of(&lab.root);
    let err = firstboot::firstboot(&node, &Failpoints::default()).unwrap_err();
    assert!(
        err.reason().contains("kernelType realtime is not supported on a plain ostree sysroot"),
        "{}",
        err.reason()
    );
    assert_firstboot_changed_nothing(&lab, &installed, &root_before);

    let ext = mc("rendered-worker-ext", &boot_image, &[], &[], json!({"extensions": ["usbguard"]}));
    lab.ignition_writes(&ext);
    let err = firstboot::firstboot(&node, &Failpoints::default()).unwrap_err();
    assert!(err.reason().contains("extensions [usbguard] are not supported"), "{}", err.reason());

    // The boot image already is the pool's image and carries its kernel arguments.
    let same = mc("rendered-worker-same", &boot_image, &["rw"], &[], json!({}));
    lab.ignition_writes(&same);
    let done = firstboot::firstboot(&node, &Failpoints::default()).unwrap();
    assert!(matches!(done, Firstboot::AlreadyMatches { .. }), "{done:?}");
    assert!(lab.read(ENCAPSULATED).is_none());
    assert!(lab.read(ENCAPSULATED_BAK).is_none(), "deleted, as upstream does");
    assert_eq!(lab.status(), installed);
    assert!(!lab.reboot_requested());
}

#[test]
fn install_refuses_tags_and_a_used_sysroot() {
    let lab = Lab::new();
    let image = lab.image("1");
    let pull = PullConfig::of_node_root(&lab.root);
    let tagged = format!("{}/mco/os:1", lab.registry.host());
    let err = sysroot::install(&lab.sysroot, &lab.cmdline(), "mco", &tagged, &[], &pull).unwrap_err();
    assert!(format!("{err:#}").contains("pinned by digest"), "{err:#}");
    assert!(!lab.sysroot.exists(), "nothing written for a refused image");
    lab.install(&image);
    let err = sysroot::install(&lab.sysroot, &lab.cmdline(), "mco", &image, &[], &pull).unwrap_err();
    assert!(format!("{err:#}").contains("already holds deployments"), "{err:#}");

    // A command line naming no deployment of the sysroot is an error, not a guess.
    fs::write(lab.cmdline(), "root=x ostree=/ostree/boot.1/mco/0000/0\n").unwrap();
    let err = sysroot::status(&lab.sysroot, &lab.cmdline()).unwrap_err();
    assert!(format!("{err:#}").contains("is not a deployment of"), "{err:#}");
}

/// Every file and symlink under `dir` with its content (directories are left out: the daemon's
/// empty state directory may stay behind).
fn tree_of(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut tree = BTreeMap::new();
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let kind = fs::symlink_metadata(&path).unwrap().file_type();
        if kind.is_dir() {
            tree.extend(tree_of(&path));
        } else if kind.is_symlink() {
            tree.insert(path.clone(), fs::read_link(&path).unwrap().into_os_string().into_encoded_bytes());
        } else {
            tree.insert(path.clone(), fs::read(&path).unwrap());
        }
    }
    tree
}

/// A containers-auth.json(5) file with `credentials` for `host` (none: no entries).
fn auth_json(host: &str, credentials: Option<(&str, &str)>) -> String {
    let auths = match credentials {
        None => json!({}),
        Some((user, password)) => {
            json!({ host: {"auth": base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"))} })
        }
    };
    serde_json::to_string(&json!({ "auths": auths })).unwrap()
}

/// A first boot that failed left the machine as it was: nothing staged, the node root as before
/// (the encapsulated config kept for the next attempt), no config recorded, no reboot.
fn assert_firstboot_changed_nothing(lab: &Lab, installed: &Status, root_before: &BTreeMap<PathBuf, Vec<u8>>) {
    assert_eq!(&lab.status(), installed, "nothing staged");
    assert_eq!(&tree_of(&lab.root), root_before, "the node root is untouched");
    assert!(lab.read(ENCAPSULATED).is_some());
    assert!(state::read_current_config(&lab.root).unwrap().is_none());
    assert!(!lab.reboot_requested());
}

#[test]
fn firstboot_pulls_from_an_authenticated_registry_with_the_pull_secret() {
    let lab = Lab::start(Some(("mco", "pull-secret-password")));
    let boot_image = lab.image("1");
    lab.install(&boot_image);
    let installed = lab.status();
    let image = lab.image("2");
    let a = mc("rendered-worker-a", &image, &["nosmt"], &[("/etc/mco/a.conf", "a\n")], json!({}));
    lab.ignition_writes(&a);

    for (case, secret) in [("no credentials", None), ("a wrong password", Some(("mco", "wrong")))] {
        lab.write_pull_secret(secret);
        let root_before = tree_of(&lab.root);
        let err = firstboot::firstboot(&lab.node(), &Failpoints::default()).unwrap_err();
        let reason = err.reason();
        assert!(reason.contains(&lab.registry.host()), "{case}: {reason}");
        assert!(reason.contains("authentication required"), "{case}: {reason}");
        assert_firstboot_changed_nothing(&lab, &installed, &root_before);
    }

    lab.write_pull_secret(lab.credentials);
    let done = firstboot::firstboot(&lab.node(), &Failpoints::default()).unwrap();
    assert!(matches!(done, Firstboot::Applied { .. }), "{done:?}");
    let staged = lab.status();
    assert_eq!(staged.pending().len(), 1);
    assert_eq!(staged.deployments[0].image.as_deref(), Some(image.as_str()));
    let os_release = fs::read_to_string(lab.sysroot.join(&staged.deployments[0].path).join("usr/lib/os-release"));
    assert!(os_release.unwrap().contains("VERSION_ID=2\n"));
}

#[test]
fn firstboot_pulls_through_a_registries_conf_mirror() {
    let lab = Lab::new();
    let boot_image = lab.image("1");
    lab.install(&boot_image);
    let installed = lab.status();
    // The pool names a registry that does not exist; the image is only in the loopback one.
    let pushed = lab.image("2");
    let (_, digest) = pushed.split_once('@').unwrap();
    let image = format!("registry.invalid.example/mco/os@{digest}");
    let a = mc("rendered-worker-a", &image, &["nosmt"], &[("/etc/mco/a.conf", "a\n")], json!({}));
    lab.ignition_writes(&a);

    let root_before = tree_of(&lab.root);
    let err = firstboot::firstboot(&lab.node(), &Failpoints::default()).unwrap_err();
    assert!(err.reason().contains("registry.invalid.example"), "{}", err.reason());
    assert_firstboot_changed_nothing(&lab, &installed, &root_before);

    // A mirror of the registry's mco/ namespace in the loopback registry. Digest pulls go through
    // mirrors whatever mirror-by-digest-only says, and osImageURL is always by digest.
    let conf = lab.root.join("etc/containers/registries.conf");
    let mut text = fs::read_to_string(&conf).unwrap();
    text += &format!(
        "\n[[registry]]\nlocation = \"registry.invalid.example/mco\"\n\n\
         [[registry.mirror]]\nlocation = \"{}/mco\"\ninsecure = true\n",
        lab.registry.host()
    );
    fs::write(&conf, text).unwrap();
    let done = firstboot::firstboot(&lab.node(), &Failpoints::default()).unwrap();
    assert!(matches!(done, Firstboot::Applied { .. }), "{done:?}");
    let staged = lab.status();
    assert_eq!(staged.pending().len(), 1);
    assert_eq!(staged.deployments[0].image.as_deref(), Some(image.as_str()), "recorded as the pool names it");
    let os_release = fs::read_to_string(lab.sysroot.join(&staged.deployments[0].path).join("usr/lib/os-release"));
    assert!(os_release.unwrap().contains("VERSION_ID=2\n"));
    lab.reboot();
    assert_eq!(lab.node().os.as_ref().unwrap().status().unwrap().booted_image.as_deref(), Some(image.as_str()));
}

#[test]
fn the_signature_policy_a_config_writes_is_enforced_on_the_node() {
    let lab = Lab::new();
    let host = lab.registry.host();
    let store = SignatureStore::start(&lab.tmp.path().join("signatures")).unwrap();
    let key = SigningKey::generate("mco-lab").unwrap();
    let (boot_image, unsigned, signed) = (lab.image("1"), lab.image("2"), lab.image("3"));
    key.sign(&lab.registry.registries_conf, &store.dir, &signed, &format!("{host}/mco/os:3")).unwrap();
    lab.install(&boot_image);
    let node = lab.node();
    let a = mc("rendered-worker-a", &boot_image, &[], &[], json!({}));
    // The policy names its key as the node sees it; the daemon reads the node's root elsewhere.
    let policy = json!({
        "default": [{"type": "insecureAcceptAnything"}],
        "transports": {"docker": {host.clone(): [{
            "type": "signedBy", "keyType": "GPGKeys", "keyPath": "/etc/pki/containers/mco-lab.gpg",
        }]}},
    })
    .to_string();
    let public_key = String::from_utf8(key.public_key().unwrap()).unwrap();
    let storage = store.registries_d_text(&host);
    let files = [
        ("/etc/containers/policy.json", policy.as_str()),
        ("/etc/pki/containers/mco-lab.gpg", public_key.as_str()),
        ("/etc/containers/registries.d/mco-lab.yaml", storage.as_str()),
    ];

    // An unsigned image with the policy that requires signatures: the OS step (after the files,
    // so with the new policy) refuses it and everything is rolled back.
    let b = mc("rendered-worker-b", &unsigned, &[], &files, json!({}));
    let refused = apply::apply(&node, &a, &b, &cluster(), &Failpoints::default()).unwrap_err();
    let why = "is refused by the containers signature policy: Source image rejected: A signature was required, \
               but no signature exists";
    assert!(matches!(&refused, ApplyError::Degraded(m) if m.contains(&unsigned) && m.contains(why)), "{refused:?}");
    assert_eq!(lab.read("/etc/containers/policy.json"), None, "the files are rolled back");
    assert!(lab.status().pending().is_empty(), "nothing staged");

    // Signed with the policy's key: staged.
    let c = mc("rendered-worker-c", &signed, &[], &files, json!({}));
    apply::apply(&node, &a, &c, &cluster(), &Failpoints::default()).unwrap();
    assert_eq!(lab.status().deployments[0].image.as_deref(), Some(signed.as_str()));
    lab.reboot();

    // The key rotates: the next image is signed with a new key only, which the next config's
    // policy trusts. Pulled ahead of the update (still under the old policy) and staged under the
    // new one, it goes through.
    let rotated_key = SigningKey::generate("mco-lab-2026").unwrap();
    let rotated = lab.image("4");
    rotated_key.sign(&lab.registry.registries_conf, &store.dir, &rotated, &format!("{host}/mco/os:4")).unwrap();
    let rotated_public_key = String::from_utf8(rotated_key.public_key().unwrap()).unwrap();
    let mut rotated_files = files;
    rotated_files[1].1 = rotated_public_key.as_str();
    assert!(node.os.as_ref().unwrap().pull_ahead(&rotated).unwrap(), "{rotated} not pulled ahead");
    let d = mc("rendered-worker-d", &rotated, &[], &rotated_files, json!({}));
    apply::apply(&node, &c, &d, &cluster(), &Failpoints::default()).unwrap();
    assert_eq!(lab.status().deployments[0].image.as_deref(), Some(rotated.as_str()));
}

/// The number of objects in the sysroot's repository.
fn repo_objects(sysroot: &Path) -> usize {
    let objects = sysroot.join("ostree/repo/objects");
    fs::read_dir(objects).unwrap().map(|dir| fs::read_dir(dir.unwrap().path()).unwrap().count()).sum()
}

#[test]
fn images_pulled_ahead_for_a_superseded_update_are_removed() {
    let lab = Lab::new();
    let (boot_image, first, second, third) = (lab.image("1"), lab.image("2"), lab.image("3"), lab.image("4"));
    lab.install(&boot_image);
    let node = lab.node();
    let os = node.os.as_ref().unwrap();
    let images = || {
        let mut names = sysroot::images(&lab.sysroot).unwrap();
        names.sort();
        names
    };
    let sorted = |names: &[&String]| {
        let mut names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
        names.sort();
        names
    };
    assert_eq!(images(), std::slice::from_ref(&boot_image));
    let installed_objects = repo_objects(&lab.sysroot);

    // Pulled ahead for an update that another one superseded: the next pull removes it.
    assert!(os.pull_ahead(&first).unwrap(), "{first} not pulled");
    assert_eq!(images(), sorted(&[&boot_image, &first]));
    assert!(repo_objects(&lab.sysroot) > installed_objects);
    assert!(os.pull_ahead(&second).unwrap(), "{second} not pulled");
    assert_eq!(images(), sorted(&[&boot_image, &second]));

    // The request withdrawn: what no deployment uses goes, with its objects; the booted image stays.
    assert_eq!(os.drop_pulled().unwrap(), std::slice::from_ref(&second));
    assert_eq!(images(), std::slice::from_ref(&boot_image));
    assert_eq!(repo_objects(&lab.sysroot), installed_objects, "the pulled image's objects are gone");
    assert!(os.drop_pulled().unwrap().is_empty(), "nothing left to remove");

    // Pulled again, then the update comes with another image: deploying it removes the pull.
    assert!(os.pull_ahead(&second).unwrap());
    let a = mc("rendered-worker-a", &boot_image, &[], &[], json!({}));
    let c = mc("rendered-worker-c", &third, &[], &[], json!({}));
    apply::apply(&node, &a, &c, &cluster(), &Failpoints::default()).unwrap();
    assert_eq!(images(), sorted(&[&boot_image, &third]));
    lab.reboot();
    let booted = lab.status();
    assert_eq!(booted.booted().unwrap().image.as_deref(), Some(third.as_str()));
    let os_release = fs::read_to_string(lab.sysroot.join(&booted.deployments[0].path).join("usr/lib/os-release"));
    assert!(os_release.unwrap().contains("VERSION_ID=4\n"));
    // The repository is whole: every object of every remaining commit is there.
    let repo = format!("--repo={}", lab.sysroot.join("ostree/repo").display());
    let fsck = Command::new("ostree").args(["fsck", &repo]).output().unwrap();
    assert!(fsck.status.success(), "{}", String::from_utf8_lossy(&fsck.stderr));
}
