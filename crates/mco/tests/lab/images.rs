//! OS images by tag and by signature, and the rollout policy: a tag resolved once before any
//! node gets it, a missing or unsigned image refused with the target kept, a canary and its soak,
//! a tag resolved again on request, a maintenance window, a halt after a failed node; and an OS
//! without a kubelet taking its first worker down for good.

use std::path::Path;

use k8s_openapi::api::core::v1::Node;
use kube::api::{Patch, PatchParams};
use kube::{Api, ResourceExt as _};
use mco_api::MachineConfiguration;
use mco_api::constants::{
    CURRENT_IMAGE_ANNOTATION, DESIRED_CONFIG_ANNOTATION, PINNED_OS_IMAGE_ANNOTATION, RESOLVE_OS_IMAGE_ANNOTATION,
    RESOLVED_OS_IMAGE_ANNOTATION, STATE_ANNOTATION,
};
use mco_api::machineconfiguration::resolved_os_image_record;
use mco_os::signing::{SigningKey, lookaside_config};
use mco_testenv::{eventually, eventually_within, satisfying};
use serde_json::json;

use crate::common::stdout;
use crate::support::*;

pub async fn an_os_image_tag_is_resolved_once_before_any_node(lab: &mut Lab) {
    let client = lab.client.clone();
    let nodes: Api<Node> = Api::all(client.clone());
    let configs = Api::<mco_api::MachineConfig>::all(client.clone());
    let registry = lab_registry(lab);
    let before = rolled_out(lab, "").await;
    let pool_image = configs.get(&before).await.unwrap().spec.os_image_url;
    let tag = pool_tag(lab, &pool_image);
    // An OS image named by a tag is resolved once, before any node gets it: the rendered config
    // keeps the tag (upstream's name and content) and carries the digest every worker deploys.
    lab.apply("99-worker-tag", &os_image_mc("99-worker-tag", &tag));
    let tagged = eventually("the worker pool to target the tag's config", || async {
        satisfying(target(&pool(&client).await), |t| *t != before)
    })
    .await;
    let rendered = configs.get(&tagged).await.unwrap();
    assert_eq!(rendered.spec.os_image_url, tag);
    assert_eq!(rendered.annotations().get(PINNED_OS_IMAGE_ANNOTATION), Some(&pool_image), "the tag's digest");
    workers_done_on(lab, &tagged, "").await;

    // An image the registry does not have targets no node: the pool says which and why.
    let missing = format!("{registry}/mco/node:missing");
    lab.apply("99-worker-tag", &os_image_mc("99-worker-tag", &missing));
    let message = wait_condition(&client, "RenderDegraded", true).await;
    assert!(message.contains(&format!("OS image {missing} of rendered-worker-")), "{message}");
    assert!(message.contains("refused before any node gets it: it cannot be read"), "{message}");
    status_showing(&lab.state_dir().join("kubeconfig"), &format!("OS image {missing}")).await;
    assert_eq!(target(&pool(&client).await), tagged, "no new target");
    let all = nodes.list(&workers()).await.unwrap().items;
    assert!(all.iter().all(|n| done_on(n, &tagged)), "{:?}", all.iter().map(summary).collect::<Vec<_>>());
    configs.delete("99-worker-tag", &Default::default()).await.unwrap();
    wait_condition(&client, "RenderDegraded", false).await;
    workers_done_on(lab, &before, "").await;
}

pub async fn signed_os_images_are_checked_before_any_node(lab: &mut Lab) {
    let client = lab.client.clone();
    let configs = Api::<mco_api::MachineConfig>::all(client.clone());
    let registry = lab_registry(lab);
    let before = rolled_out(lab, "").await;
    let pool_image = configs.get(&before).await.unwrap().spec.os_image_url;
    let tag = pool_tag(lab, &pool_image);
    // Signed OS images: MachineConfigs give the workers a containers policy that requires the lab
    // registry's images to be signed with the lab's GPG key, the key, and where the signatures are
    // (the lab's signature store). The controller's pod checks the signatures (with gpg in mco's
    // image) before any node gets an image: the signed tag (the image the workers run, so they
    // only write the files; the daemon test shows a node's own check) rolls out, an unsigned
    // image targets no node.
    let lab_status: serde_json::Value =
        serde_json::from_str(&stdout(&lab.mco(&["lab", "status", "-o", "json"]).success())).unwrap();
    let signatures = lab_status["signatures"].as_str().unwrap().to_string();
    let key = SigningKey::generate("mco-lab").unwrap();
    let registries_conf = lab.state_dir().join("registries.conf");
    let signatures_dir = Path::new(lab_status["signaturesDir"].as_str().unwrap());
    key.sign(&registries_conf, signatures_dir, &pool_image, &tag).unwrap();
    let policy = json!({
        "default": [{"type": "insecureAcceptAnything"}],
        "transports": {"docker": {registry.clone(): [{
            "type": "signedBy", "keyType": "GPGKeys", "keyPath": SIGNING_KEY_PATH,
            "signedIdentity": {"type": "matchRepoDigestOrExact"},
        }]}},
    });
    let signature_files = files_mc(
        "99-worker-signatures",
        &[
            ("/etc/containers/policy.json", &policy.to_string()),
            (SIGNING_KEY_PATH, &String::from_utf8(key.public_key().unwrap()).unwrap()),
            ("/etc/containers/registries.d/mco-lab.yaml", &lookaside_config(&registry, &signatures)),
        ],
    );
    // The lab's nodes run containerd, not CRI-O: upstream's default policy for these paths
    // (reload crio.service) has nothing to reload, so the admin says so, as one would.
    let no_action = |path: &str| json!({"path": path, "actions": [{"type": "None"}]});
    let policies = json!({"spec": {"nodeDisruptionPolicy": {"files": [
        no_action("/etc/containers/policy.json"),
        no_action(SIGNING_KEY_PATH),
        no_action("/etc/containers/registries.d/mco-lab.yaml"),
    ]}}});
    Api::<MachineConfiguration>::all(client.clone())
        .patch("cluster", &PatchParams::default(), &Patch::Merge(&policies))
        .await
        .unwrap();
    lab.apply("99-worker-signatures", &signature_files);
    lab.apply("99-worker-tag", &os_image_mc("99-worker-tag", &tag));
    let signed = eventually("the worker pool to target the signed tag's config with the policy", || async {
        let current = target(&pool(&client).await);
        let rendered = configs.get(&current).await.unwrap();
        let files = rendered.spec.config.as_ref().map(ToString::to_string).unwrap_or_default();
        let complete = rendered.spec.os_image_url == tag && files.contains("/etc/containers/policy.json");
        if complete { Ok(current) } else { Err(current) }
    })
    .await;
    let rendered = configs.get(&signed).await.unwrap();
    assert_eq!(rendered.annotations().get(PINNED_OS_IMAGE_ANNOTATION), Some(&pool_image));
    workers_done_on(lab, &signed, " with the signature policy").await;
    let unsigned = format!("{registry}/mco/os:base");
    lab.apply("99-worker-tag", &os_image_mc("99-worker-tag", &unsigned));
    let message = wait_condition(&client, "RenderDegraded", true).await;
    let why = "refused before any node gets it: it does not satisfy the pool's signature policy \
               (/etc/containers/policy.json): Source image rejected: A signature was required, but no signature exists";
    assert!(
        message.contains(&format!("OS image {unsigned} of rendered-worker-")) && message.contains(why),
        "{message}"
    );
    assert_eq!(target(&pool(&client).await), signed, "no new target");
    for name in ["99-worker-tag", "99-worker-signatures"] {
        configs.delete(name, &Default::default()).await.unwrap();
    }
    wait_condition(&client, "RenderDegraded", false).await;
    workers_done_on(lab, &before, " without the signature policy").await;
}

pub async fn a_canary_soaks_a_moved_tag_is_resolved_and_a_window_holds_the_revert(lab: &mut Lab) {
    let client = lab.client.clone();
    let nodes: Api<Node> = Api::all(client.clone());
    let configs = Api::<mco_api::MachineConfig>::all(client.clone());
    let registry = lab_registry(lab);
    let kubeconfig = lab.kubeconfig();
    let before = rolled_out(lab, "").await;
    let pool_image = configs.get(&before).await.unwrap().spec.os_image_url;
    // A canary and a soak: the first worker (by name) takes a new OS image first, then the pool
    // waits, as `mco status` says. The image is a tag, and the tag moves while the canary soaks:
    // the other worker still gets the digest the tag had when the config was rendered, so both
    // run the same OS.
    annotate_pool(&client, json!({"mco.dev/canary": "1", "mco.dev/canary-soak": "1h"})).await;
    let moving = format!("{registry}/mco/node:moving");
    let first_image = os_update(lab, &pool_image, "moving", "MCO Test OS (moving 1)");
    lab.apply("99-worker-tag", &os_image_mc("99-worker-tag", &moving));
    let canaried = eventually("the worker pool to target the moving tag's config", || async {
        satisfying(target(&pool(&client).await), |t| *t != before)
    })
    .await;
    let rendered = configs.get(&canaried).await.unwrap();
    assert_eq!(rendered.annotations().get(PINNED_OS_IMAGE_ANNOTATION), Some(&first_image), "the tag's digest");
    let soaking = wait_held(&client, "CanarySoak").await;
    assert!(soaking.starts_with(&format!("canaries are on {canaried}: soaking")), "{soaking}");
    status_showing(&kubeconfig, &format!("canaries are on {canaried}: soaking")).await;
    // A node's OS update (pull, deploy, reboot) is a rollout's step: a rollout's bound.
    let seen = eventually_within(ROLLOUT_TIMEOUT, "the canary's kubelet reporting the new OS", || async {
        satisfying(workers_os(&nodes, &canaried).await, |seen| seen[0].2 == "MCO Test OS (moving 1)")
    })
    .await;
    let done: Vec<(&str, bool)> = seen.iter().map(|(name, done, _)| (name.as_str(), *done)).collect();
    let only_the_first: Vec<(&str, bool)> = done.iter().enumerate().map(|(i, (name, _))| (*name, i == 0)).collect();
    assert_eq!((done[0].0, &done), ("worker-0", &only_the_first), "only the canary updated: {seen:?}");
    let second_image = os_update(lab, &pool_image, "moving", "MCO Test OS (moving 2)");
    assert_ne!(second_image, first_image, "the tag moved");
    // The admin cuts the soak short; the rest of the pool follows, on the first digest.
    annotate_pool(&client, json!({"mco.dev/canary-soak": "1s"})).await;
    workers_done_on(lab, &canaried, " after the soak").await;
    eventually("every worker's kubelet reporting the canary's OS", || async {
        let seen = workers_os(&nodes, &canaried).await;
        satisfying(seen, |seen| seen.iter().all(|(_, done, os)| *done && os == "MCO Test OS (moving 1)"))
    })
    .await;
    assert_eq!(target(&pool(&client).await), canaried, "the same rendered config all along");
    let rendered = configs.get(&canaried).await.unwrap();
    assert_eq!(rendered.annotations().get(PINNED_OS_IMAGE_ANNOTATION), Some(&first_image), "resolved once");

    // The admin asks for the moved tag to be resolved again: the pool records the digest it
    // names now, and its workers move to it under the same rendered config.
    annotate_pool(&client, json!({RESOLVE_OS_IMAGE_ANNOTATION: "now"})).await;
    let record = resolved_os_image_record(&canaried, &second_image);
    eventually("the request done and the tag's new digest recorded on the pool", || async {
        let pool = pool(&client).await;
        let get = |key: &str| pool.annotations().get(key).cloned();
        satisfying((get(RESOLVE_OS_IMAGE_ANNOTATION), get(RESOLVED_OS_IMAGE_ANNOTATION)), |seen| {
            *seen == (None, Some(record.clone()))
        })
    })
    .await;
    // The canary first, then the others: two OS updates one after the other.
    eventually_within(ROLLOUT_TIMEOUT, "every worker on the tag's new digest", || async {
        let all = nodes.list(&workers()).await.unwrap().items;
        let seen: Vec<(String, bool, Option<String>, String)> = all
            .iter()
            .map(|n| {
                let image = mco_rollout::node::annotation(n, CURRENT_IMAGE_ANNOTATION).map(str::to_string);
                let os = n.status.as_ref().and_then(|s| s.node_info.as_ref()).map(|i| i.os_image.clone());
                (n.name_any(), mco_rollout::node::node_done(n), image, os.unwrap_or_default())
            })
            .collect();
        satisfying(seen, |seen| {
            seen.iter().all(|(_, done, image, os)| {
                *done && image.as_deref() == Some(second_image.as_str()) && os == "MCO Test OS (moving 2)"
            })
        })
    })
    .await;
    assert_eq!(target(&pool(&client).await), canaried, "the same rendered config");

    // A maintenance window: outside it no node starts an update, and `mco status` says when it
    // opens (a daily window six hours from now, in a named time zone); without it the pool goes on.
    let utc_hour = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() / 3600 % 24;
    // Pacific/Kiritimati is UTC+14 all year.
    let opens = (utc_hour + 14 + 6) % 24;
    let window = format!("Mon-Sun {opens:02}:00-{:02}:00", (opens + 1) % 24);
    annotate_pool(
        &client,
        json!({
            "mco.dev/canary": null, "mco.dev/canary-soak": null,
            "mco.dev/maintenance-windows": window, "mco.dev/maintenance-time-zone": "Pacific/Kiritimati",
        }),
    )
    .await;
    configs.delete("99-worker-tag", &Default::default()).await.unwrap();
    let waiting = wait_held(&client, "MaintenanceWindow").await;
    assert!(
        waiting.starts_with("waiting for maintenance window (opens at ") && waiting.ends_with("[Pacific/Kiritimati])"),
        "{waiting}"
    );
    status_showing(&kubeconfig, "waiting for maintenance window (opens at ").await;
    assert_eq!(target(&pool(&client).await), before, "the pool targets the reverted config");
    let all = nodes.list(&workers()).await.unwrap().items;
    let started: Vec<String> = all
        .iter()
        .filter(|n| mco_rollout::node::annotation(n, DESIRED_CONFIG_ANNOTATION) != Some(canaried.as_str()))
        .map(summary)
        .collect();
    assert!(started.is_empty(), "nodes started outside the window: {started:?}");
    annotate_pool(&client, json!({"mco.dev/maintenance-windows": null, "mco.dev/maintenance-time-zone": null})).await;
    workers_done_on(lab, &before, " once no window holds the pool").await;
    // Back on a config of its own image (by digest), the workers left the tag's resolved digest.
    let all = nodes.list(&workers()).await.unwrap().items;
    let images: Vec<Option<&str>> =
        all.iter().map(|n| mco_rollout::node::annotation(n, CURRENT_IMAGE_ANNOTATION)).collect();
    assert_eq!(images, vec![None; all.len()], "{:?}", all.iter().map(summary).collect::<Vec<_>>());
    assert_eq!(pool(&client).await.annotations().get(RESOLVED_OS_IMAGE_ANNOTATION), None, "the record dropped");
}

pub async fn a_failed_node_halts_the_pool_and_heals_when_reverted(lab: &mut Lab) {
    let client = lab.client.clone();
    let nodes: Api<Node> = Api::all(client.clone());
    let configs = Api::<mco_api::MachineConfig>::all(client.clone());
    let kubeconfig = lab.kubeconfig();
    let before = rolled_out(lab, "").await;
    // A change that fails on the node after its drain (a file where the node has a directory)
    // strands the first worker it reaches (cordoned, Degraded) and, with a halt after one failed
    // node, pauses the pool: no other worker is touched, and `mco status` says why and how to go
    // on. Deleting the MachineConfig and resuming heals the worker with no one touching its
    // annotations: the controller retargets it to the pool's config.
    // One worker at a time, so that the others are still untouched when the first fails.
    set_pool(&client, json!({ "maxUnavailable": 1 })).await;
    annotate_pool(&client, json!({"mco.dev/halt-after-failures": "1"})).await;
    lab.apply("99-worker-bad-file", &file_mc("99-worker-bad-file", "/etc/containers", "not a directory\n"));
    let stranded = eventually("a worker Degraded on the file", || async {
        let all = nodes.list(&workers()).await.unwrap().items;
        let degraded = all.iter().find(|n| mco_rollout::node::annotation(n, STATE_ANNOTATION) == Some("Degraded"));
        degraded.map(|n| n.name_any()).ok_or_else(|| all.iter().map(summary).collect::<Vec<_>>())
    })
    .await;
    let bad = target(&pool(&client).await);
    let halted = wait_held(&client, "Halted").await;
    assert_eq!(
        halted,
        format!(
            "halted: {stranded} failed updating to {bad}; fix or revert the change, then resume the pool \
             (spec.paused: false)"
        )
    );
    assert_eq!(pool(&client).await.spec.paused, Some(true));
    status_showing(&kubeconfig, &halted).await;
    let all = nodes.list(&workers()).await.unwrap().items;
    let touched: Vec<String> = all
        .iter()
        .filter(|n| {
            n.name_any() != stranded && mco_rollout::node::annotation(n, DESIRED_CONFIG_ANNOTATION) == Some(&bad)
        })
        .map(summary)
        .collect();
    assert!(touched.is_empty(), "nodes given the config after the halt: {touched:?}");
    configs.delete("99-worker-bad-file", &Default::default()).await.unwrap();
    annotate_pool(&client, json!({"mco.dev/halt-after-failures": null})).await;
    set_pool(&client, json!({ "paused": false })).await;
    workers_done_on(lab, &before, " (the stranded worker healed)").await;
}

pub async fn an_os_without_a_kubelet_takes_its_first_worker_down(lab: &mut Lab) {
    let base = base_os_image(lab);
    // An OS update without a kubelet takes the first worker that reboots into it down for good, as
    // such a machine would be: `mco lab status` says which and why (its kubelet never comes back,
    // so the rollout goes no further).
    let before = target(&pool(&lab.client).await);
    // One worker at a time: the first to reboot into it stops the rollout.
    set_pool(&lab.client, json!({ "maxUnavailable": 1 })).await;
    // Named to sort after every MachineConfig earlier scenarios left (the last osImageURL in
    // name order wins, and `99-worker-os-update` stays on the lab).
    lab.apply("99-worker-zz-no-kubelet", &os_image_mc("99-worker-zz-no-kubelet", &base));
    eventually("the worker pool to target a config of the OS without a kubelet", || async {
        satisfying(target(&pool(&lab.client).await), |now| *now != before)
    })
    .await;
    // A drain and a reboot first: a rollout's step.
    let nodes: Api<Node> = Api::all(lab.client.clone());
    let down = eventually_within(ROLLOUT_TIMEOUT, "a worker reported down", || async {
        let status = lab.mco(&["lab", "status", "-o", "json"]).success();
        let status: serde_json::Value = serde_json::from_str(&stdout(&status)).unwrap();
        let down: Vec<serde_json::Value> =
            status["nodes"].as_array().unwrap().iter().filter(|n| n["state"] == "Down").cloned().collect();
        // What the rollout was doing, should no worker go down.
        let pool = pool(&lab.client).await;
        let workers: Vec<String> = nodes.list(&workers()).await.unwrap().items.iter().map(summary).collect();
        satisfying((down, target(&pool), pool.status, workers), |(down, ..)| !down.is_empty())
    })
    .await
    .0;
    assert_eq!(down.len(), 1, "{down:?}");
    assert!(down[0]["reason"].as_str().unwrap().contains("has no kubelet (/usr/bin/kubelet)"), "{down:?}");
    let text = stdout(&lab.mco(&["lab", "status"]).success());
    assert!(text.contains(&format!("down: {}: ", down[0]["name"].as_str().unwrap())), "{text}");
}
