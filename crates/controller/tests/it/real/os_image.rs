//! The OS image check of the render controller against a real API server and a real registry on
//! loopback: a tag is resolved once to a digest recorded on the rendered config before the pool
//! targets it, and resolved again only for a new config or when the admin asks (the digest found
//! then recorded on the pool); an image that does not exist, is not
//! bootable or is built for another architecture than the pool's nodes degrades the pool with
//! the reason and leaves its target alone; fixing the MachineConfig or the registry clears it.
//!
//! The accepted images are real OSTree-in-OCI images (ostree-ext encapsulation); the refused
//! ones are built with buildah. The pool's node is a Node object (no kubelet: only its
//! `status.nodeInfo.architecture` is read).

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::events::v1::Event;
use kube::api::{ListParams, Patch, PatchParams, PostParams};
use kube::{Api, ResourceExt};
use mco_api::constants::{PINNED_OS_IMAGE_ANNOTATION, RESOLVE_OS_IMAGE_ANNOTATION, RESOLVED_OS_IMAGE_ANNOTATION};
use mco_api::machineconfiguration::{pool_condition, resolved_os_image_record};
use mco_api::{MachineConfig, MachineConfigPool};
use mco_controller::conditions;
use mco_controller::render::controller::{Options, run};
use mco_os::image::PullConfig;
use mco_os::registry::{LocalRegistry, registries_conf_text};
use mco_os::signing::{SignatureStore, SigningKey};
use mco_os::tree::{self, TreeSpec};
use mco_render::ControllerVersion;
use mco_testenv::{TestEnv, data_url, eventually, satisfying};
use serde_json::json;

use crate::images;
use images::{push_buildah_image, worker_file};

fn examples_dir() -> std::path::PathBuf {
    std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples/cluster")
}

fn version() -> ControllerVersion {
    ControllerVersion { raw: "v0.0.0-was-not-built-properly".into(), hash: "was-not-built-properly".into() }
}

fn run_ok(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap();
    assert!(out.status.success(), "{cmd:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

/// Pushes a bootable OSTree-in-OCI image of `version` as `HOST/mco/os:TAG`; returns its digest.
async fn push_os_image(dir: &Path, registry: &LocalRegistry, version: &str, tag: &str) -> String {
    let tree_dir = dir.join(format!("tree-{version}"));
    if !tree_dir.exists() {
        tree::write_tree(&tree_dir, &TreeSpec { kernel_version: "6.1.0-mco".into(), version_id: version.into() })
            .unwrap();
    }
    let repo = dir.join("repo");
    tree::commit(&repo, "mco/os", &tree_dir, version, &BTreeMap::new()).unwrap();
    let push = PullConfig { registries_conf: Some(registry.registries_conf.clone()), ..Default::default() };
    let to = format!("docker://{}/mco/os:{tag}", registry.host());
    mco_os::image::encapsulate_with(&repo, "mco/os", &to, &push, Default::default()).await.unwrap()
}

/// Points `name_tag` of the registry at the image `from` (the same manifest, so the same digest).
fn retag(registry: &LocalRegistry, from: &str, name_tag: &str) {
    run_ok(Command::new("skopeo").arg("--registries-conf").arg(&registry.registries_conf).args([
        "copy",
        "--preserve-digests",
        &format!("docker://{from}"),
        &format!("docker://{}/{name_tag}", registry.host()),
    ]));
}

fn render_degraded(pool: &MachineConfigPool) -> Option<(String, String)> {
    let conditions = pool.status.as_ref()?.conditions.as_ref()?;
    let c = conditions::get(conditions, pool_condition::RENDER_DEGRADED)?;
    Some((c.status.clone(), c.message.clone().unwrap_or_default()))
}

/// The render controller with test timings; aborted with the returned handle.
fn start_render_controller(client: &kube::Client) -> tokio::task::JoinHandle<()> {
    let options = Options {
        render_delay: Duration::from_millis(500),
        retry_delay: Duration::from_millis(500),
        os_image_retry_delay: Duration::from_secs(1),
        ..Default::default()
    };
    tokio::spawn(run(client.clone(), version(), options))
}

/// Waits until the worker pool is RenderDegraded with a message containing `needle`; returns it.
async fn render_degraded_with(pools: &Api<MachineConfigPool>, what: &str, needle: &str) -> String {
    let (_, message) = eventually(what, || async {
        let degraded = render_degraded(&pools.get("worker").await.unwrap());
        satisfying(degraded, |d| d.as_ref().is_some_and(|(status, m)| status == "True" && m.contains(needle)))
    })
    .await
    .unwrap();
    message
}

/// Waits until the worker pool targets a rendered config pinned to `pinned`.
async fn pool_pinned_to(pools: &Api<MachineConfigPool>, mcs: &Api<MachineConfig>, what: &str, pinned: &str) {
    eventually(what, || async {
        let seen = match target_of(&pools.get("worker").await.unwrap()) {
            Some(target) => pinned_of(&mcs.get(&target).await.unwrap()),
            None => None,
        };
        satisfying(seen, |p| p.as_deref() == Some(pinned))
    })
    .await;
}

/// A real API server with the example cluster's manifests and a completed ControllerConfig.
async fn example_cluster() -> TestEnv {
    let env = TestEnv::start().await.unwrap();
    env.create_manifests(&examples_dir()).await.unwrap();
    env.mark_controller_config_completed().await.unwrap();
    env
}

fn target_of(pool: &MachineConfigPool) -> Option<String> {
    pool.spec.configuration.as_ref()?.name.clone()
}

fn pinned_of(mc: &MachineConfig) -> Option<String> {
    mc.annotations().get(PINNED_OS_IMAGE_ANNOTATION).cloned()
}

/// `99-worker-os`, setting the worker pool's OS image.
async fn set_os_image(mcs: &Api<MachineConfig>, image: &str) {
    let mc = json!({
        "apiVersion": "machineconfiguration.openshift.io/v1",
        "kind": "MachineConfig",
        "metadata": {"name": "99-worker-os", "labels": {"machineconfiguration.openshift.io/role": "worker"}},
        "spec": {"osImageURL": image},
    });
    let params = PatchParams::apply("os-image-test").force();
    mcs.patch("99-worker-os", &params, &Patch::Apply(&mc)).await.unwrap();
}

#[tokio::test]
async fn new_os_images_are_checked_and_pinned_before_the_pool_targets_them() {
    let tmp = tempfile::tempdir().unwrap();
    let registry = LocalRegistry::start(&tmp.path().join("registry")).unwrap();
    let host = registry.host();
    let first = push_os_image(tmp.path(), &registry, "1", "latest").await;
    push_buildah_image(tmp.path(), &registry, "mco/plain:1", &["--label", "purpose=not-an-os"]);
    push_buildah_image(tmp.path(), &registry, "mco/arm:1", &["--label", "ostree.bootable=true", "--arch", "arm64"]);

    let env = example_cluster().await;
    let client = env.client();
    let nodes: Api<Node> = Api::all(client.clone());
    let node: Node = serde_json::from_value(json!({
        "metadata": {"name": "worker-0", "labels": {"node-role.kubernetes.io/worker": ""}},
    }))
    .unwrap();
    nodes.create(&PostParams::default(), &node).await.unwrap();
    let status = json!({"status": {"nodeInfo": {
        "architecture": "amd64", "bootID": "", "containerRuntimeVersion": "", "kernelVersion": "", "kubeProxyVersion": "",
        "kubeletVersion": "", "machineID": "", "operatingSystem": "linux", "osImage": "", "systemUUID": "",
    }}});
    nodes.patch_status("worker-0", &PatchParams::default(), &Patch::Merge(&status)).await.unwrap();
    // The nodes' registries configuration (the registry is plain HTTP), as a MachineConfig gives it.
    let registries =
        worker_file("50-worker-registries", "/etc/containers/registries.conf", &registries_conf_text(registry.port));
    let mcs: Api<MachineConfig> = Api::all(client.clone());
    mcs.create(&PostParams::default(), &registries).await.unwrap();

    let controller = start_render_controller(&client);
    let pools: Api<MachineConfigPool> = Api::all(client.clone());
    let pool_target = |what: String| {
        let pools = pools.clone();
        async move {
            eventually(&what, || async {
                let pool = pools.get("worker").await.unwrap();
                let seen = (target_of(&pool), render_degraded(&pool));
                satisfying(seen, |(target, degraded)| {
                    target.as_deref().is_some_and(|t| t.starts_with("rendered-worker-"))
                        && degraded.as_ref().is_some_and(|(status, _)| status == "False")
                })
            })
            .await
            .0
            .unwrap()
        }
    };
    // Before: the pool on the cluster's base image, which is not checked (the examples' digest
    // is in no registry).
    let base_target = pool_target("the worker pool on its base image".into()).await;
    assert_eq!(pinned_of(&mcs.get(&base_target).await.unwrap()), None);

    // A tag: resolved to its digest before the pool targets the config.
    set_os_image(&mcs, &format!("{host}/mco/os:latest")).await;
    let tagged = eventually("the pool to target the tagged image's config", || async {
        let target = target_of(&pools.get("worker").await.unwrap()).unwrap();
        satisfying(target, |t| *t != base_target)
    })
    .await;
    let rendered = mcs.get(&tagged).await.unwrap();
    assert_eq!(rendered.spec.os_image_url, format!("{host}/mco/os:latest"), "the rendered config is upstream's");
    let pinned = format!("{host}/mco/os@{first}");
    assert_eq!(pinned_of(&rendered), Some(pinned.clone()), "pinned before the pool targeted it");
    assert_eq!(rendered.deployed_os_image(), Ok(pinned.as_str()));
    let events: Api<Event> = Api::namespaced(client.clone(), "default");
    let note = eventually("an OSImagePinned event", || async {
        let list = events.list(&ListParams::default()).await.unwrap().items;
        let notes: Vec<String> = list.iter().filter_map(|e| e.note.clone()).collect();
        // (The infra pool, which takes the worker pool's MachineConfigs, has its own.)
        let worker = |note: &String| note.contains(&format!(" of {tagged} "));
        let pinned = list.into_iter().filter(|e| e.reason.as_deref() == Some("OSImagePinned"));
        pinned.filter_map(|e| e.note).find(worker).ok_or(notes)
    })
    .await;
    assert_eq!(note, format!("OS image {host}/mco/os:latest of {tagged} checked: nodes deploy {pinned}"));

    // The tag moves: the config keeps the digest it was checked with; the next rendered config
    // (here: a file added) resolves the tag afresh.
    let second = push_os_image(tmp.path(), &registry, "2", "latest").await;
    assert_ne!(second, first);
    let file = json!({
        "apiVersion": "machineconfiguration.openshift.io/v1",
        "kind": "MachineConfig",
        "metadata": {"name": "60-worker-file", "labels": {"machineconfiguration.openshift.io/role": "worker"}},
        "spec": {"config": {"ignition": {"version": "3.5.0"}, "storage": {"files": [{
            "path": "/etc/motd", "mode": 420, "contents": {"source": data_url("hello\n")},
        }]}}},
    });
    mcs.create(&PostParams::default(), &serde_json::from_value(file).unwrap()).await.unwrap();
    let refreshed = eventually("the pool to target the config with the file", || async {
        let target = target_of(&pools.get("worker").await.unwrap()).unwrap();
        satisfying(target, |t| *t != tagged)
    })
    .await;
    assert_eq!(pinned_of(&mcs.get(&refreshed).await.unwrap()), Some(format!("{host}/mco/os@{second}")));
    assert_eq!(pinned_of(&mcs.get(&tagged).await.unwrap()), Some(pinned.clone()), "a config's digest stays");

    // The admin asks for the tag to be resolved again: the pool records the digest it names now
    // (the rendered config keeps what it was checked with), for its nodes to move to.
    let third = push_os_image(tmp.path(), &registry, "4", "latest").await;
    let request_resolution = || async {
        let patch = json!({"metadata": {"annotations": {RESOLVE_OS_IMAGE_ANNOTATION: "please"}}});
        pools.patch("worker", &PatchParams::default(), &Patch::Merge(&patch)).await.unwrap();
    };
    let annotations_of = |pool: &MachineConfigPool| {
        let get = |key: &str| pool.annotations().get(key).cloned();
        (get(RESOLVE_OS_IMAGE_ANNOTATION), get(RESOLVED_OS_IMAGE_ANNOTATION))
    };
    let resolved_again_note = |needle: String| {
        let events = events.clone();
        async move {
            eventually(&format!("an OSImageResolvedAgain event saying {needle:?}"), || async {
                let list = events.list(&ListParams::default()).await.unwrap().items;
                let again = list.into_iter().filter(|e| e.reason.as_deref() == Some("OSImageResolvedAgain"));
                let notes: Vec<String> = again.filter_map(|e| e.note).collect();
                notes.iter().find(|n| n.contains(&needle)).cloned().ok_or(notes)
            })
            .await
        }
    };
    request_resolution().await;
    let (moved_from, moved_to) = (format!("{host}/mco/os@{second}"), format!("{host}/mco/os@{third}"));
    let record = resolved_os_image_record(&refreshed, &moved_to);
    eventually("the request done and the new digest recorded on the pool", || async {
        let pool = pools.get("worker").await.unwrap();
        satisfying(annotations_of(&pool), |seen| *seen == (None, Some(record.clone())))
    })
    .await;
    let pool = pools.get("worker").await.unwrap();
    assert_eq!(target_of(&pool).as_deref(), Some(refreshed.as_str()), "the same rendered config");
    assert_eq!(pool.resolved_target_os_image(), Some(moved_to.as_str()));
    assert_eq!(pinned_of(&mcs.get(&refreshed).await.unwrap()), Some(moved_from.clone()));
    let note = resolved_again_note(format!(" of {refreshed} ")).await;
    assert_eq!(
        note,
        format!(
            "OS image {host}/mco/os:latest of {refreshed} resolved again on request: nodes move from {moved_from} to \
             {moved_to}"
        )
    );
    // Asked again with the tag where it was: nothing moves.
    request_resolution().await;
    resolved_again_note(format!("still {moved_to}")).await;
    eventually("the request done and the record kept", || async {
        let pool = pools.get("worker").await.unwrap();
        satisfying(annotations_of(&pool), |seen| *seen == (None, Some(record.clone())))
    })
    .await;
    // The tag now names an image that is not bootable: refused, the nodes stay where they are,
    // and the request waits for the registry.
    push_buildah_image(tmp.path(), &registry, "mco/os:latest", &["--label", "purpose=not-an-os"]);
    request_resolution().await;
    let message = render_degraded_with(&pools, "RenderDegraded for the tag resolved again", "not a bootable").await;
    assert!(
        message.starts_with(&format!(
            "Failed to render configuration for pool worker: OS image {host}/mco/os:latest of {refreshed} refused \
             before any node gets it: it is not a bootable OS image"
        )),
        "{message}"
    );
    let pool = pools.get("worker").await.unwrap();
    assert_eq!(annotations_of(&pool), (Some("please".to_string()), Some(record.clone())));
    // The tag back on the config's own digest: resolved, the record goes (nodes deploy the
    // config's pin again) and the pool is no longer degraded, nobody touching it.
    retag(&registry, &moved_from, "mco/os:latest");
    eventually("the request done, the record gone and RenderDegraded cleared", || async {
        let pool = pools.get("worker").await.unwrap();
        let seen = (annotations_of(&pool), render_degraded(&pool).map(|(status, _)| status));
        satisfying(seen, |seen| *seen == ((None, None), Some("False".to_string())))
    })
    .await;

    // Refused images degrade the pool with the reason and leave its target alone.
    for (image, why) in [
        (
            format!("{host}/mco/plain:1"),
            "it is not a bootable OS image (neither the ostree.bootable nor the containers.bootc label of ostree-ext \
             and bootc images)"
                .to_string(),
        ),
        (format!("{host}/mco/arm:1"), "it is built for arm64, but nodes of the pool are amd64".to_string()),
        (
            format!("{host}/mco/os:missing"),
            "it cannot be read with the registries configuration and pull secret of the pool's nodes: ".to_string(),
        ),
    ] {
        set_os_image(&mcs, &image).await;
        let message = render_degraded_with(&pools, &format!("RenderDegraded for {image}"), &image).await;
        let prefix = format!("Failed to render configuration for pool worker: OS image {image} of rendered-worker-");
        assert!(message.starts_with(&prefix), "{message}");
        assert!(message.contains(&format!(" refused before any node gets it: {why}")), "{message}");
        // skopeo's own words, without its log decoration.
        assert!(!message.contains("level=") && !message.contains("Error parsing image name"), "{message}");
        if image.ends_with(":missing") {
            assert!(message.ends_with("manifest unknown"), "{message}");
        }
        let pool = pools.get("worker").await.unwrap();
        assert_eq!(target_of(&pool).as_deref(), Some(refreshed.as_str()), "{image}: the target stays");
    }
    let refused = events.list(&ListParams::default()).await.unwrap().items;
    assert!(refused.iter().any(|e| e.reason.as_deref() == Some("OSImageRefused")), "{refused:?}");

    // The registry gets the missing image: cleared without anyone touching the pool.
    let missing = push_os_image(tmp.path(), &registry, "3", "missing").await;
    let fixed = pool_target(format!("the pool to target {host}/mco/os:missing once pushed")).await;
    assert_ne!(fixed, refreshed);
    assert_eq!(pinned_of(&mcs.get(&fixed).await.unwrap()), Some(format!("{host}/mco/os@{missing}")));

    // An image by digest is checked too, and its pin is itself.
    let by_digest = format!("{host}/mco/os@{first}");
    set_os_image(&mcs, &by_digest).await;
    let digest_target = eventually("the pool to target the image by digest", || async {
        let target = target_of(&pools.get("worker").await.unwrap()).unwrap();
        satisfying(target, |t| *t != fixed)
    })
    .await;
    assert_eq!(pinned_of(&mcs.get(&digest_target).await.unwrap()), Some(by_digest));
    controller.abort();
}

/// `NAME` setting `path` to `contents` on the worker pool's nodes.
#[tokio::test]
async fn os_images_are_refused_before_any_node_unless_signed_as_the_pool_requires() {
    let tmp = tempfile::tempdir().unwrap();
    let registry = LocalRegistry::start(&tmp.path().join("registry")).unwrap();
    let store = SignatureStore::start(&tmp.path().join("signatures")).unwrap();
    let host = registry.host();
    let (trusted, other) = (SigningKey::generate("mco-lab").unwrap(), SigningKey::generate("someone-else").unwrap());
    let signed = push_os_image(tmp.path(), &registry, "1", "signed").await;
    trusted
        .sign(
            &registry.registries_conf,
            &store.dir,
            &format!("{host}/mco/os@{signed}"),
            &format!("{host}/mco/os:signed"),
        )
        .unwrap();
    let unsigned = push_os_image(tmp.path(), &registry, "2", "unsigned").await;
    // A tag pointing at an image signed for another tag (what a registry swapping tags serves):
    // its signature is of the repository, but not of this tag.
    let debug = push_os_image(tmp.path(), &registry, "5", "debug").await;
    trusted
        .sign(&registry.registries_conf, &store.dir, &format!("{host}/mco/os@{debug}"), &format!("{host}/mco/os:debug"))
        .unwrap();
    retag(&registry, &format!("{host}/mco/os:debug"), "mco/os:crossed");
    let foreign = push_os_image(tmp.path(), &registry, "3", "foreign").await;
    other
        .sign(
            &registry.registries_conf,
            &store.dir,
            &format!("{host}/mco/os@{foreign}"),
            &format!("{host}/mco/os:foreign"),
        )
        .unwrap();
    // Another manifest under the trusted signature of the first: what a registry that altered
    // the image would serve.
    let tampered = push_os_image(tmp.path(), &registry, "4", "tampered").await;
    let to = store.signatures_of(&format!("{host}/mco/os@{tampered}")).unwrap();
    std::fs::create_dir_all(&to).unwrap();
    let from = store.signatures_of(&format!("{host}/mco/os@{signed}")).unwrap().join("signature-1");
    std::fs::copy(from, to.join("signature-1")).unwrap();

    let env = example_cluster().await;
    let client = env.client();
    // The pool requires images of the registry to be signed with the trusted key; the
    // signatures are read from the store.
    let policy = json!({
        "default": [{"type": "insecureAcceptAnything"}],
        "transports": {"docker": {host.clone(): [{
            "type": "signedBy", "keyType": "GPGKeys", "keyPath": "/etc/pki/containers/mco-lab.gpg",
            "signedIdentity": {"type": "matchRepoDigestOrExact"},
        }]}},
    });
    let public_key = String::from_utf8(trusted.public_key().unwrap()).unwrap();
    let mcs: Api<MachineConfig> = Api::all(client.clone());
    for mc in [
        worker_file("50-worker-registries", "/etc/containers/registries.conf", &registries_conf_text(registry.port)),
        worker_file("50-worker-policy", "/etc/containers/policy.json", &policy.to_string()),
        worker_file("50-worker-key", "/etc/pki/containers/mco-lab.gpg", &public_key),
        worker_file(
            "50-worker-signatures",
            "/etc/containers/registries.d/mco-lab.yaml",
            &store.registries_d_text(&host),
        ),
    ] {
        mcs.create(&PostParams::default(), &mc).await.unwrap();
    }
    let controller = start_render_controller(&client);
    let pools: Api<MachineConfigPool> = Api::all(client.clone());

    // Signed with the trusted key: the pool targets it.
    set_os_image(&mcs, &format!("{host}/mco/os:signed")).await;
    let accepted = eventually("the pool to target the signed image", || async {
        let pool = pools.get("worker").await.unwrap();
        let target = target_of(&pool);
        let pinned = match &target {
            Some(target) => pinned_of(&mcs.get(target).await.unwrap()),
            None => None,
        };
        satisfying((target, pinned), |(_, pinned)| pinned.as_deref() == Some(&format!("{host}/mco/os@{signed}")))
    })
    .await
    .0;

    // Unsigned, signed with another key, or a manifest that is not the signed one: refused,
    // with c/image's reason, and the pool keeps its target.
    for (tag, why) in [
        ("unsigned", "A signature was required, but no signature exists"),
        ("foreign", "Invalid GPG signature"),
        ("tampered", &format!("Signature for digest {signed} does not match")),
        ("crossed", &format!("Signature for identity {host}/mco/os:debug is not accepted")),
    ] {
        let image = format!("{host}/mco/os:{tag}");
        set_os_image(&mcs, &image).await;
        let message = render_degraded_with(&pools, &format!("RenderDegraded for {image}"), &image).await;
        let policy = " refused before any node gets it: it does not satisfy the pool's signature policy \
                      (/etc/containers/policy.json): Source image rejected: ";
        assert!(message.contains(policy) && message.contains(why), "{tag}: {message}");
        let pool = pools.get("worker").await.unwrap();
        assert_eq!(target_of(&pool), accepted, "{tag}: the target stays");
    }

    // A policy whose key the rendered config does not carry cannot be checked: refused too.
    mcs.delete("50-worker-key", &Default::default()).await.unwrap();
    set_os_image(&mcs, &format!("{host}/mco/os:signed")).await;
    let message = render_degraded_with(&pools, "RenderDegraded for a policy without its key", "key file").await;
    assert!(
        message.contains(
            "/etc/containers/policy.json names the key file /etc/pki/containers/mco-lab.gpg, which the rendered \
             config does not write"
        ),
        "{message}"
    );

    // A pool on an unsigned image (by digest) that gets a signature policy: the image is its
    // own, but the new policy refuses it, so no node gets the config (and no drain).
    mcs.delete("50-worker-policy", &Default::default()).await.unwrap();
    let unsigned = format!("{host}/mco/os@{unsigned}");
    set_os_image(&mcs, &unsigned).await;
    eventually("the pool on the unsigned image without a policy", || async {
        let pool = pools.get("worker").await.unwrap();
        let target = target_of(&pool);
        let image = match &target {
            Some(target) => Some(mcs.get(target).await.unwrap().spec.os_image_url),
            None => None,
        };
        let degraded = render_degraded(&pool);
        satisfying((image, degraded), |(image, degraded)| {
            image.as_deref() == Some(unsigned.as_str()) && degraded.as_ref().is_some_and(|(s, _)| s == "False")
        })
    })
    .await;
    let before = target_of(&pools.get("worker").await.unwrap());
    for mc in [
        worker_file("50-worker-policy", "/etc/containers/policy.json", &policy.to_string()),
        worker_file("50-worker-key", "/etc/pki/containers/mco-lab.gpg", &public_key),
    ] {
        mcs.create(&PostParams::default(), &mc).await.unwrap();
    }
    let message =
        render_degraded_with(&pools, "RenderDegraded for the pool's own image under the new policy", &unsigned).await;
    assert!(message.contains("Source image rejected: A signature was required, but no signature exists"), "{message}");
    assert_eq!(target_of(&pools.get("worker").await.unwrap()), before, "the target stays");
    controller.abort();
}

#[tokio::test]
async fn registries_behind_a_private_ca_are_checked_with_the_ca_the_nodes_get() {
    let tmp = tempfile::tempdir().unwrap();
    let plain = LocalRegistry::start(&tmp.path().join("plain")).unwrap();
    let digest = push_os_image(tmp.path(), &plain, "1", "1").await;
    let (registry, ca) = LocalRegistry::start_tls(&tmp.path().join("registry")).unwrap();
    let host = registry.host();
    let certs = tmp.path().join("push-certs");
    std::fs::create_dir_all(&certs).unwrap();
    std::fs::write(certs.join("ca.crt"), &ca).unwrap();
    for tag in ["1", "2"] {
        run_ok(
            Command::new("skopeo")
                .arg("--registries-conf")
                .arg(&plain.registries_conf)
                .args(["--insecure-policy", "copy", "--preserve-digests", "--dest-cert-dir"])
                .arg(&certs)
                .arg(format!("docker://{}/mco/os:1", plain.host()))
                .arg(format!("docker://{host}/mco/os:{tag}")),
        );
    }

    let env = example_cluster().await;
    let client = env.client();
    let mcs: Api<MachineConfig> = Api::all(client.clone());
    let ca_file = format!("/etc/containers/certs.d/{host}/ca.crt");
    mcs.create(&PostParams::default(), &worker_file("50-worker-registry-ca", &ca_file, &ca)).await.unwrap();
    let controller = start_render_controller(&client);
    let pools: Api<MachineConfigPool> = Api::all(client.clone());

    // The CA the nodes get (containers-certs.d in the rendered config) lets the check through.
    set_os_image(&mcs, &format!("{host}/mco/os:1")).await;
    pool_pinned_to(
        &pools,
        &mcs,
        "the pool on the image of the private-CA registry",
        &format!("{host}/mco/os@{digest}"),
    )
    .await;

    // Without it the registry's certificate is refused, as the nodes would refuse it.
    mcs.delete("50-worker-registry-ca", &Default::default()).await.unwrap();
    set_os_image(&mcs, &format!("{host}/mco/os:2")).await;
    let message = render_degraded_with(&pools, "RenderDegraded without the registry's CA", "mco/os:2").await;
    assert!(message.contains("x509: certificate signed by unknown authority"), "{message}");
    controller.abort();
}

#[tokio::test]
async fn runc_is_refused_for_an_os_image_of_a_rhel_10_stream() {
    let tmp = tempfile::tempdir().unwrap();
    let registry = LocalRegistry::start(&tmp.path().join("registry")).unwrap();
    let host = registry.host();
    for (name, stream) in [("mco/os10:1", "rhel-10"), ("mco/os9:1", "rhel-9")] {
        let class = format!("io.openshift.os.streamclass={stream}");
        push_buildah_image(tmp.path(), &registry, name, &["--label", "containers.bootc=1", "--label", &class]);
    }
    let env = example_cluster().await;
    let client = env.client();
    let mcs: Api<MachineConfig> = Api::all(client.clone());
    let runc = "[crio.runtime]\ndefault_runtime = \"runc\"\n";
    for mc in [
        worker_file("50-worker-registries", "/etc/containers/registries.conf", &registries_conf_text(registry.port)),
        worker_file("50-worker-runc", "/etc/crio/crio.conf.d/50-runtime", runc),
    ] {
        mcs.create(&PostParams::default(), &mc).await.unwrap();
    }
    let controller = start_render_controller(&client);
    let pools: Api<MachineConfigPool> = Api::all(client.clone());
    let target_image = |image: String| {
        let (pools, mcs) = (pools.clone(), mcs.clone());
        async move {
            eventually(&format!("the worker pool to target {image}"), || async {
                let target = target_of(&pools.get("worker").await.unwrap());
                let rendered = match &target {
                    Some(name) => mcs.get_opt(name).await.unwrap(),
                    None => None,
                };
                let seen = rendered.map(|mc| mc.spec.os_image_url);
                satisfying((target, seen), |(_, seen)| seen.as_deref() == Some(image.as_str()))
            })
            .await
            .0
        }
    };

    // runc on a RHEL 9 image: rendered.
    let rhel9 = target_image(format!("{host}/mco/os9:1"));
    set_os_image(&mcs, &format!("{host}/mco/os9:1")).await;
    let on_rhel9 = rhel9.await;
    // On a RHEL 10 image (its stream label says so): upstream's refusal, and no new target.
    set_os_image(&mcs, &format!("{host}/mco/os10:1")).await;
    let message = render_degraded_with(&pools, "runc refused on RHEL 10", "where runc is not available").await;
    assert_eq!(
        message,
        "Failed to render configuration for pool worker: MachineConfigPool worker targets a RHEL 10 OS image where \
         runc is not available. To unblock, migrate to crun by removing any ContainerRuntimeConfig that sets \
         defaultRuntime to runc, and removing any MachineConfig that sets default_runtime = \"runc\" in CRI-O \
         configuration under /etc/crio/crio.conf.d/"
    );
    assert_eq!(target_of(&pools.get("worker").await.unwrap()), on_rhel9);
    // Without runc the RHEL 10 image is rendered.
    mcs.delete("50-worker-runc", &Default::default()).await.unwrap();
    target_image(format!("{host}/mco/os10:1")).await;
    controller.abort();
}

/// A stand-in for the cluster's HTTP proxy (no proxy is a component the issue names): forwards
/// every connection to the registry on loopback port `to` and records the first line of each, as
/// a proxy that alone reaches the registry would. Returns its port and what it saw.
fn forwarding_proxy(to: u16) -> (u16, Arc<Mutex<Vec<String>>>) {
    use std::io::{Read as _, Write as _};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let record = Arc::clone(&seen);
    std::thread::spawn(move || {
        for client in listener.incoming().flatten() {
            let record = Arc::clone(&record);
            std::thread::spawn(move || {
                let Ok(upstream) = std::net::TcpStream::connect(("127.0.0.1", to)) else { return };
                let (mut from_client, mut to_upstream) = (client.try_clone().unwrap(), upstream.try_clone().unwrap());
                let (mut from_upstream, mut to_client) = (upstream, client);
                std::thread::spawn(move || std::io::copy(&mut from_upstream, &mut to_client));
                let mut buf = [0u8; 16 * 1024];
                let mut first = true;
                while let Ok(n @ 1..) = from_client.read(&mut buf) {
                    if std::mem::take(&mut first) {
                        let line = String::from_utf8_lossy(&buf[..n]).lines().next().unwrap_or_default().to_string();
                        record.lock().unwrap().push(line);
                    }
                    if to_upstream.write_all(&buf[..n]).is_err() {
                        break;
                    }
                }
                let _ = to_upstream.shutdown(std::net::Shutdown::Write);
            });
        }
    });
    (port, seen)
}

#[tokio::test]
async fn registries_behind_the_nodes_proxy_are_checked_through_it() {
    let tmp = tempfile::tempdir().unwrap();
    let registry = LocalRegistry::start(&tmp.path().join("registry")).unwrap();
    let digest = push_os_image(tmp.path(), &registry, "1", "1").await;
    push_os_image(tmp.path(), &registry, "2", "2").await;
    // A name no resolver knows (RFC 6761): only the proxy reaches the registry.
    let host = format!("mco-registry.invalid:{}", registry.port);
    let (proxy, seen) = forwarding_proxy(registry.port);

    let env = example_cluster().await;
    let client = env.client();
    let mcs: Api<MachineConfig> = Api::all(client.clone());
    let registries = format!("[[registry]]\nlocation = \"{host}\"\ninsecure = true\n");
    let files = [
        worker_file("50-worker-registries", "/etc/containers/registries.conf", &registries),
        // Upstream's file, as its template writes it from the ControllerConfig's proxy.
        worker_file(
            "50-worker-proxy",
            "/etc/mco/proxy.env",
            &format!(
                "# Proxy environment variables will be populated in this file.\nHTTP_PROXY=http://127.0.0.1:{proxy}\n\
                 HTTPS_PROXY=http://127.0.0.1:{proxy}\nNO_PROXY=.cluster.local,.svc\n"
            ),
        ),
    ];
    for file in &files {
        mcs.create(&PostParams::default(), file).await.unwrap();
    }
    let controller = start_render_controller(&client);
    let pools: Api<MachineConfigPool> = Api::all(client.clone());

    // The nodes' proxy settings (in the rendered config) take the check to the registry.
    set_os_image(&mcs, &format!("{host}/mco/os:1")).await;
    pool_pinned_to(&pools, &mcs, "the pool on the image behind the proxy", &format!("{host}/mco/os@{digest}")).await;
    let requests = seen.lock().unwrap().clone();
    assert!(requests.iter().any(|r| r.starts_with(&format!("GET http://{host}/v2/"))), "{requests:?}");

    // With upstream's file for no proxy (comments only) the registry cannot be reached, as the
    // nodes could not reach it.
    let no_proxy =
        worker_file("50-worker-proxy", "/etc/mco/proxy.env", "# Proxy environment variables will be here.\n");
    mcs.patch("50-worker-proxy", &PatchParams::apply("os-image-test").force(), &Patch::Apply(&no_proxy)).await.unwrap();
    set_os_image(&mcs, &format!("{host}/mco/os:2")).await;
    let message = render_degraded_with(&pools, "RenderDegraded without the nodes' proxy", "mco/os:2").await;
    assert!(message.contains("it cannot be read") && message.contains("mco-registry.invalid"), "{message}");
    controller.abort();
}
