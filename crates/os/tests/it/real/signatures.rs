//! Signature checks with the real tools: a GPG key made by gpg, an OSTree-in-OCI image signed by
//! skopeo into a lookaside store served over HTTP, checked by c/image (`skopeo copy`) against a
//! containers policy, without fetching the image's layers.

use std::io::Read;
use std::path::Path;

use mco_os::image::{self, PullConfig, Unverified};
use mco_os::registry::LocalRegistry;
use mco_os::signing::{SignatureStore, SigningKey};
use mco_os::tree::{self, TreeSpec};

/// Bytes of random data in the image: a layer that does not compress.
const BIG: usize = 8 << 20;

fn files_size(dir: &Path) -> u64 {
    std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().metadata().unwrap().len()).sum()
}

#[test]
fn a_signature_check_fetches_no_layer() {
    let tmp = tempfile::tempdir().unwrap();
    let tree_dir = tmp.path().join("tree");
    tree::write_tree(&tree_dir, &TreeSpec { kernel_version: "6.1.0-mco".into(), version_id: "1".into() }).unwrap();
    let mut random = vec![0; BIG];
    std::fs::File::open("/dev/urandom").unwrap().read_exact(&mut random).unwrap();
    std::fs::write(tree_dir.join("usr/share/random"), random).unwrap();
    let repo = tmp.path().join("repo");
    tree::commit(&repo, "mco/os", &tree_dir, "1", &Default::default()).unwrap();
    let registry = LocalRegistry::start(&tmp.path().join("registry")).unwrap();
    let push = PullConfig { registries_conf: Some(registry.registries_conf.clone()), ..Default::default() };
    let host = registry.host();
    let to = format!("docker://{host}/mco/os:1");
    let digest =
        mco_os::block_on(image::encapsulate_with(&repo, "mco/os", &to, &push, Default::default())).unwrap().unwrap();
    let signed = format!("{host}/mco/os@{digest}");
    let store = SignatureStore::start(&tmp.path().join("signatures")).unwrap();
    let key = SigningKey::generate("mco-test").unwrap();
    key.sign(&registry.registries_conf, &store.dir, &signed, &format!("{host}/mco/os:1")).unwrap();

    let keyfile = tmp.path().join("key.gpg");
    std::fs::write(&keyfile, key.public_key().unwrap()).unwrap();
    let policy = tmp.path().join("policy.json");
    let requirement = serde_json::json!({"type": "signedBy", "keyType": "GPGKeys", "keyPath": keyfile});
    let text =
        serde_json::json!({"default": [{"type": "reject"}], "transports": {"docker": {host.clone(): [requirement]}}});
    std::fs::write(&policy, text.to_string()).unwrap();
    let registries_d = tmp.path().join("registries.d");
    std::fs::create_dir_all(&registries_d).unwrap();
    std::fs::write(registries_d.join("store.yaml"), store.registries_d_text(&host)).unwrap();
    let pull = PullConfig { policy: Some(policy), registries_d: Some(registries_d), ..push };

    let scratch = tmp.path().join("scratch");
    std::fs::create_dir_all(&scratch).unwrap();
    let verified = image::verify_signatures_in(&signed, None, &pull, &scratch).unwrap();
    assert_eq!(verified, Ok(()));
    // The copy was stopped once the policy accepted the image: not even one layer is there.
    let copied = files_size(&scratch);
    assert!(copied < BIG as u64, "{copied} bytes copied for a signature check");

    // Without a signature for it: refused, with c/image's words.
    let unsigned = format!("{host}/mco/os:1");
    std::fs::remove_dir_all(&store.dir).unwrap();
    let refused = image::verify_signatures(&unsigned, None, &pull).unwrap();
    assert_eq!(
        refused,
        Err(Unverified::Refused("Source image rejected: A signature was required, but no signature exists".into()))
    );
}

/// A registry whose certificate is from a private CA: an image is pulled from it with the CA of
/// the node's containers-certs.d (`ROOT/etc/containers/certs.d/HOST:PORT/`), and checked against
/// a policy the same way; without it, TLS refuses the registry.
#[tokio::test]
async fn a_registry_behind_a_private_ca_is_reached_with_the_nodes_certs_d() {
    let tmp = tempfile::tempdir().unwrap();
    let tree_dir = tmp.path().join("tree");
    tree::write_tree(&tree_dir, &TreeSpec { kernel_version: "6.1.0-mco".into(), version_id: "1".into() }).unwrap();
    let repo = tmp.path().join("repo");
    tree::commit(&repo, "mco/os", &tree_dir, "1", &Default::default()).unwrap();
    let oci = format!("oci:{}:1", tmp.path().join("oci").display());
    let digest = image::encapsulate(&repo, "mco/os", &oci).await.unwrap();
    let (registry, ca) = LocalRegistry::start_tls(&tmp.path().join("registry")).unwrap();
    let host = registry.host();
    let push_certs = tmp.path().join("push-certs");
    std::fs::create_dir_all(&push_certs).unwrap();
    std::fs::write(push_certs.join("ca.crt"), &ca).unwrap();
    let pushed = std::process::Command::new("skopeo")
        .args(["--insecure-policy", "copy", "--preserve-digests", "--dest-cert-dir"])
        .arg(&push_certs)
        .arg(&oci)
        .arg(format!("docker://{host}/mco/os:1"))
        .output()
        .unwrap();
    assert!(pushed.status.success(), "{}", String::from_utf8_lossy(&pushed.stderr));
    let image = format!("{host}/mco/os@{digest}");
    let imgref =
        ostree_ext::container::OstreeImageReference::try_from(format!("ostree-unverified-registry:{image}").as_str())
            .unwrap();

    // A node root without the CA: the registry's certificate is refused.
    let root = tmp.path().join("root");
    std::fs::create_dir_all(root.join("etc/containers")).unwrap();
    let pull = PullConfig::of_node_root(&root);
    let target = tree::open_or_create_repo(&tmp.path().join("node-repo")).unwrap();
    let refused = image::import_with(&target, &imgref, &pull, false).await.unwrap_err();
    assert!(format!("{refused:#}").contains("x509: certificate signed by unknown authority"), "{refused:#}");

    // With the CA where containers-certs.d(5) says: pulled, and signatures are checked through it.
    let certs = root.join(format!("etc/containers/certs.d/{host}"));
    std::fs::create_dir_all(&certs).unwrap();
    std::fs::write(certs.join("ca.crt"), &ca).unwrap();
    let pull = PullConfig::of_node_root(&root);
    assert_eq!(pull.cert_dir(&image), Some(certs));
    let state = image::import_with(&target, &imgref, &pull, false).await.unwrap();
    assert_eq!(state.manifest_digest.to_string(), digest);
    let policy = root.join("etc/containers/policy.json");
    std::fs::write(&policy, r#"{"default": [{"type": "insecureAcceptAnything"}]}"#).unwrap();
    let pull = PullConfig::of_node_root(&root);
    assert_eq!(image::verify_signatures(&image, None, &pull).unwrap(), Ok(()));
}
