//! The check of a pool's new OS image before any node gets it (mco's own; upstream hands nodes
//! whatever `osImageURL` says and finds out on the first node, after its drain): the image must
//! be readable with the registries configuration and pull secret the nodes will use (the
//! rendered config's own files), be a bootable OSTree-in-OCI image, and be built for the pool's
//! nodes' architectures. A tag is resolved to one digest, recorded on the rendered config
//! ([`PINNED_OS_IMAGE_ANNOTATION`]), which every node and new machine then deploys.
//!
//! What needs a check is decided here without IO ([`gate`], [`judge`]); [`inspect`] asks the
//! registry through skopeo.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::Duration;

use mco_api::constants::{PINNED_OS_IMAGE_ANNOTATION, RESOLVE_OS_IMAGE_ANNOTATION, RESOLVED_OS_IMAGE_ANNOTATION};
use mco_api::machineconfiguration::{image_repository, is_by_digest, pin_fits, resolved_os_image_record};
use mco_api::{MachineConfig, MachineConfigPool};
use serde::Deserialize;
use serde_json::{Map, Value};

/// What the OS image of a pool's target config needs before nodes may get it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Gate {
    /// Nothing to check: no image, or one named by digest that the pool already targets or that
    /// is the cluster's base image (the installer's or the upgrade's, as upstream trusts it).
    Clear,
    /// Checked already: nodes deploy this pinned image.
    Pinned(String),
    /// To check, and for a tag to resolve, before the pool targets the config.
    Check(String),
    /// Pinned to `pinned`, but the admin asked for its tag `image` to be resolved again
    /// ([`RESOLVE_OS_IMAGE_ANNOTATION`]): checked again, and the digest found now recorded.
    ResolveAgain { pinned: String, image: String },
}

/// The gate of `rendered` for a pool that targets `current` now, in a cluster whose base OS image
/// is `base`; `resolve_requested`: the pool asks for its tag to be resolved again. A pin that does
/// not fit the image (edited by hand) is checked again.
pub fn gate(
    rendered: &MachineConfig,
    current: Option<&MachineConfig>,
    base: Option<&str>,
    resolve_requested: bool,
) -> Gate {
    let image = rendered.spec.os_image_url.as_str();
    let pinned = rendered.metadata.annotations.as_ref().and_then(|a| a.get(PINNED_OS_IMAGE_ANNOTATION));
    // An OCI directory on the nodes is no registry's to check.
    if image.is_empty() || image.starts_with("oci:") {
        return Gate::Clear;
    }
    if pinned.is_some() {
        return match rendered.deployed_os_image() {
            Ok(pinned) if resolve_requested && !is_by_digest(image) => {
                Gate::ResolveAgain { pinned: pinned.to_string(), image: image.to_string() }
            }
            Ok(pinned) => Gate::Pinned(pinned.to_string()),
            Err(_) => Gate::Check(image.to_string()),
        };
    }
    let known = current.map(|c| c.spec.os_image_url.as_str()) == Some(image) || base == Some(image);
    if is_by_digest(image) && known { Gate::Clear } else { Gate::Check(image.to_string()) }
}

/// The pool's annotation changes once it targets `rendered`: an admin's request to resolve its OS
/// image again ([`RESOLVE_OS_IMAGE_ANNOTATION`]) is done, and the record of a tag resolved again
/// ([`RESOLVED_OS_IMAGE_ANNOTATION`]) is set to what `resolved` found (`(config's pin, digest now)`;
/// dropped when it is the config's own pin), or dropped when it is of another config or cannot
/// stand for the config's tag (edited by hand: only what the controller checked reaches nodes).
pub fn pool_annotations(
    pool: &MachineConfigPool,
    rendered: &MachineConfig,
    resolved: Option<(&str, &str)>,
) -> Map<String, Value> {
    let (config, url) = (rendered.metadata.name.as_deref().unwrap_or_default(), &rendered.spec.os_image_url);
    let annotations = pool.metadata.annotations.as_ref();
    let has = |key: &str| annotations.is_some_and(|a| a.contains_key(key));
    let mut changes = Map::new();
    if has(RESOLVE_OS_IMAGE_ANNOTATION) {
        changes.insert(RESOLVE_OS_IMAGE_ANNOTATION.into(), Value::Null);
    }
    let record = match resolved {
        Some((pinned, now)) if pinned != now => Some(resolved_os_image_record(config, now)),
        Some(_) => None,
        None => pool
            .resolved_os_image(config)
            .filter(|image| !is_by_digest(url) && pin_fits(url, image))
            .map(|image| resolved_os_image_record(config, image)),
    };
    let current = annotations.and_then(|a| a.get(RESOLVED_OS_IMAGE_ANNOTATION));
    if current != record.as_ref() {
        changes.insert(RESOLVED_OS_IMAGE_ANNOTATION.into(), record.map_or(Value::Null, Value::String));
    }
    changes
}

/// What the pool records of its config's tag (`(config's pin, digest now)`, for
/// [`pool_annotations`]): the digest found again on request, or the one just pinned for a new
/// check; nothing when the tag was not resolved by this sync.
pub fn resolution<'a>(
    resolved_again: Option<&'a (String, String)>,
    pinned_now: Option<&'a str>,
) -> Option<(&'a str, &'a str)> {
    match (resolved_again, pinned_now) {
        (Some((pinned, now)), _) => Some((pinned, now)),
        (None, Some(pinned)) => Some((pinned, pinned)),
        (None, None) => None,
    }
}

/// The Event of a tag resolved again on request: `image` of `config` from `was` to `now`.
pub fn resolved_again_note(image: &str, config: &str, was: &str, now: &str) -> String {
    if was == now {
        format!("OS image {image} of {config} resolved again on request: still {now}")
    } else {
        format!("OS image {image} of {config} resolved again on request: nodes move from {was} to {now}")
    }
}

/// What the registry says of an image for one architecture (`skopeo inspect`'s fields).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Inspected {
    /// The digest of what the name points at (for a multi-arch image, its index).
    #[serde(rename = "Digest")]
    pub digest: String,
    #[serde(rename = "Architecture", default)]
    pub architecture: String,
    #[serde(rename = "Labels", default, deserialize_with = "null_as_empty")]
    pub labels: BTreeMap<String, String>,
}

fn null_as_empty<'de, D: serde::Deserializer<'de>>(d: D) -> Result<BTreeMap<String, String>, D::Error> {
    Ok(Option::deserialize(d)?.unwrap_or_default())
}

/// Labels that make an image bootable: ostree-ext writes `ostree.bootable`, bootc `containers.bootc`.
fn bootable(labels: &BTreeMap<String, String>) -> bool {
    let is = |key: &str, values: &[&str]| labels.get(key).is_some_and(|v| values.contains(&v.as_str()));
    is("ostree.bootable", &["true", "1"]) || is("containers.bootc", &["true", "1"])
}

/// Judges `image` from what the registry said for each of the pool's node architectures
/// (`None`: the pool has no nodes yet, any architecture). Returns the pull spec to deploy
/// (`HOST/NAME@sha256:…`), or why no node may get the image.
pub fn judge(image: &str, inspected: &[(Option<String>, Result<Inspected, String>)]) -> Result<String, String> {
    let mut digest: Option<&str> = None;
    for (arch, result) in inspected {
        let found = result.as_ref().map_err(|e| {
            format!("it cannot be read with the registries configuration and pull secret of the pool's nodes: {e}")
        })?;
        if !bootable(&found.labels) {
            return Err("it is not a bootable OS image (neither the ostree.bootable nor the containers.bootc label \
                        of ostree-ext and bootc images)"
                .to_string());
        }
        if let Some(arch) = arch
            && found.architecture != *arch
        {
            return Err(format!("it is built for {}, but nodes of the pool are {arch}", found.architecture));
        }
        if digest.is_some_and(|d| d != found.digest) {
            return Err("it changed while it was checked (its tag moved): it is checked again".to_string());
        }
        digest = Some(&found.digest);
    }
    let digest = digest.ok_or("nothing was inspected")?;
    Ok(format!("{}@{digest}", image_repository(image)))
}

/// The message a refused image leaves on its pool (in `RenderDegraded`).
pub fn refusal(image: &str, rendered: &str, why: &str) -> String {
    format!("OS image {image} of {rendered} refused before any node gets it: {why}")
}

/// The architectures of a pool's nodes, each once; `[None]` for a pool without nodes.
pub fn architectures<'a>(nodes: impl IntoIterator<Item = &'a str>) -> Vec<Option<String>> {
    let set: BTreeSet<&str> = nodes.into_iter().filter(|a| !a.is_empty()).collect();
    if set.is_empty() { vec![None] } else { set.into_iter().map(|a| Some(a.to_string())).collect() }
}

/// Paths of the files nodes pull OS images with (as `PullConfig::of_node_root` reads them).
pub const NODE_REGISTRIES_CONF: &str = "/etc/containers/registries.conf";
pub const NODE_PULL_SECRET: &str = "/var/lib/kubelet/config.json";
/// Where nodes find registries' CA certificates (containers-certs.d(5)).
pub const NODE_CERTS_DIRS: [&str; 2] = ["/etc/containers/certs.d/", "/etc/docker/certs.d/"];

/// How long one `skopeo inspect` may take.
const INSPECT_TIMEOUT: Duration = Duration::from_secs(120);

/// Asks the registry about `image` for `arch` with skopeo, with the registries configuration and
/// pull secret found in `dir` (written from the rendered config: [`NODE_REGISTRIES_CONF`] and
/// [`NODE_PULL_SECRET`] under it, each when the config has it): what it said, or why it could not
/// be read. Fails only when skopeo cannot be run.
pub async fn inspect(image: &str, arch: Option<&str>, dir: &Path) -> std::io::Result<Result<Inspected, String>> {
    let mut skopeo = tokio::process::Command::new("skopeo");
    // Through the nodes' proxies, not the controller's.
    let proxies = match mco_os::image::PullConfig::of_node_root(dir).proxy_environment() {
        Ok(proxies) => proxies.unwrap_or_default(),
        Err(e) => return Ok(Err(format!("{e:#}"))),
    };
    for (key, value) in proxies {
        match value {
            Some(value) => skopeo.env(key, value),
            None => skopeo.env_remove(key),
        };
    }
    let registries = dir.join(NODE_REGISTRIES_CONF.trim_start_matches('/'));
    if registries.is_file() {
        skopeo.arg("--registries-conf").arg(registries);
    }
    if let Some(arch) = arch {
        skopeo.args(["--override-arch", arch, "--override-os", "linux"]);
    }
    // The repository's tags are not needed, and listing them takes long in big repositories.
    skopeo.args(["inspect", "--no-tags"]);
    let secret = dir.join(NODE_PULL_SECRET.trim_start_matches('/'));
    if secret.is_file() {
        skopeo.arg("--authfile").arg(secret);
    } else {
        // Not the controller's own credentials: only what nodes would have.
        skopeo.arg("--no-creds");
    }
    // The registry's CA as the nodes trust it (the rendered config's certs.d).
    if let Some(certs) = mco_os::image::PullConfig::of_node_root(dir).cert_dir(image) {
        skopeo.arg("--cert-dir").arg(certs);
    }
    // skopeo takes no tag beside a digest.
    let reference = match image.split_once("@sha256:") {
        Some((_, hex)) => format!("{}@sha256:{hex}", image_repository(image)),
        None => image.to_string(),
    };
    skopeo.arg(format!("docker://{reference}")).kill_on_drop(true);
    let output = match tokio::time::timeout(INSPECT_TIMEOUT, skopeo.output()).await {
        Ok(output) => output?,
        Err(_) => return Ok(Err(format!("the registry did not answer within {INSPECT_TIMEOUT:?}"))),
    };
    if !output.status.success() {
        return Ok(Err(skopeo_error(&String::from_utf8_lossy(&output.stderr), &reference)));
    }
    Ok(serde_json::from_slice(&output.stdout).map_err(|e| format!("reading skopeo's answer: {e}")))
}

/// The reason in skopeo's error output: the `msg` of its last log line, without the prefix that
/// repeats the image's name (the same text every time, so the pool's condition stays put).
fn skopeo_error(stderr: &str, reference: &str) -> String {
    let message = mco_os::image::skopeo_message(stderr);
    let prefix = format!("Error parsing image name \"docker://{reference}\": ");
    message.strip_prefix(&prefix).unwrap_or(&message).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    const D1: &str = "sha256:1111111111111111111111111111111111111111111111111111111111111111";
    const D2: &str = "sha256:2222222222222222222222222222222222222222222222222222222222222222";

    fn config(url: &str, pinned: Option<&str>) -> MachineConfig {
        let mut mc = MachineConfig::new("rendered-worker-2", Default::default());
        mc.spec.os_image_url = url.to_string();
        if let Some(pinned) = pinned {
            mc.metadata.annotations = Some([(PINNED_OS_IMAGE_ANNOTATION.to_string(), pinned.to_string())].into());
        }
        mc
    }

    #[test]
    fn which_images_are_checked() {
        let by_digest = format!("reg/os@{D1}");
        let other = format!("reg/os@{D2}");
        let pinned = format!("reg/os@{D2}");
        let base = Some(by_digest.as_str());
        for (rendered, current, base, resolve, want) in [
            (config("", None), None, base, false, Gate::Clear),
            // The pool's image or the cluster's, by digest: nothing new reaches a node.
            (config(&by_digest, None), Some(config(&by_digest, None)), None, false, Gate::Clear),
            (config(&by_digest, None), None, base, false, Gate::Clear),
            (config(&by_digest, None), Some(config(&other, None)), base, false, Gate::Clear),
            // A new image by digest, and every tag (even the pool's own: the tag may have moved).
            (config(&other, None), Some(config(&by_digest, None)), base, false, Gate::Check(other.clone())),
            (
                config("reg/os:9", None),
                Some(config("reg/os:9", None)),
                Some("reg/os:9"),
                false,
                Gate::Check("reg/os:9".into()),
            ),
            (config(&other, None), None, None, false, Gate::Check(other.clone())),
            // Checked before.
            (config("reg/os:9", Some(&pinned)), None, base, false, Gate::Pinned(pinned.clone())),
            (config(&other, Some(&other)), None, base, false, Gate::Pinned(other.clone())),
            // An OCI directory on the nodes: nothing to ask a registry.
            (config("oci:/var/images/os:1", None), None, base, false, Gate::Clear),
            // The admin asks for a pinned tag to be resolved again; a digest has nothing to resolve,
            // and an image not checked before is checked anyway.
            (
                config("reg/os:9", Some(&pinned)),
                None,
                base,
                true,
                Gate::ResolveAgain { pinned: pinned.clone(), image: "reg/os:9".into() },
            ),
            (config(&other, Some(&other)), None, base, true, Gate::Pinned(other.clone())),
            (config("reg/os:9", None), None, base, true, Gate::Check("reg/os:9".into())),
            (config("", None), None, base, true, Gate::Clear),
            // A pin of another repository is not trusted: checked again.
            (config("reg/os:9", Some(&format!("evil/os@{D2}"))), None, base, false, Gate::Check("reg/os:9".into())),
        ] {
            assert_eq!(gate(&rendered, current.as_ref(), base, resolve), want, "{rendered:?} from {current:?}");
        }
    }

    #[test]
    fn the_pool_records_the_digest_found_again_or_just_pinned() {
        let again = ("reg/os@old".to_string(), "reg/os@new".to_string());
        let cases = [
            ("resolved again on request", Some(&again), None, Some(("reg/os@old", "reg/os@new"))),
            ("resolved again wins over a pin", Some(&again), Some("reg/os@x"), Some(("reg/os@old", "reg/os@new"))),
            ("a new check pins", None, Some("reg/os@x"), Some(("reg/os@x", "reg/os@x"))),
            ("nothing resolved", None, None, None),
        ];
        for (case, resolved_again, pinned_now, want) in cases {
            assert_eq!(resolution(resolved_again, pinned_now), want, "{case}");
        }
    }

    fn inspected(arch: &str, labels: &[(&str, &str)], digest: &str) -> Result<Inspected, String> {
        Ok(Inspected {
            digest: digest.to_string(),
            architecture: arch.to_string(),
            labels: labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
        })
    }

    #[test]
    fn a_request_to_resolve_again_is_done_and_its_result_recorded_for_its_config() {
        use serde_json::json;
        let (pinned, moved) = (format!("reg/os@{D1}"), format!("reg/os@{D2}"));
        let pool = |annotations: &[(&str, &str)]| -> MachineConfigPool {
            let annotations: BTreeMap<&str, &str> = annotations.iter().copied().collect();
            serde_json::from_value(json!({"metadata": {"name": "worker", "annotations": annotations}, "spec": {}}))
                .unwrap()
        };
        let request = (RESOLVE_OS_IMAGE_ANNOTATION, "");
        let record_of = |config: &str, image: &str| resolved_os_image_record(config, image);
        let (moved_1, moved_0) = (record_of("rendered-1", &moved), record_of("rendered-0", &moved));
        let rendered = config("reg/os:9", Some(&pinned));
        let mut rendered_1 = rendered.clone();
        rendered_1.metadata.name = Some("rendered-1".into());
        let changes = |pool: &MachineConfigPool, resolved: Option<(&str, &str)>| {
            Value::Object(pool_annotations(pool, &rendered_1, resolved))
        };
        let forged = record_of("rendered-1", &format!("evil/os@{D2}"));
        let short = record_of("rendered-1", "reg/os@sha256:2");
        for (what, pool, resolved, want) in [
            ("nothing asked, nothing recorded", pool(&[]), None, json!({})),
            (
                "the tag moved: recorded, the request done",
                pool(&[request]),
                Some((pinned.as_str(), moved.as_str())),
                json!({RESOLVE_OS_IMAGE_ANNOTATION: null, RESOLVED_OS_IMAGE_ANNOTATION: moved_1}),
            ),
            (
                "the tag did not move",
                pool(&[request]),
                Some((pinned.as_str(), pinned.as_str())),
                json!({RESOLVE_OS_IMAGE_ANNOTATION: null}),
            ),
            (
                "the tag back on the config's own pin: the record goes",
                pool(&[request, (RESOLVED_OS_IMAGE_ANNOTATION, &moved_1)]),
                Some((pinned.as_str(), pinned.as_str())),
                json!({RESOLVE_OS_IMAGE_ANNOTATION: null, RESOLVED_OS_IMAGE_ANNOTATION: null}),
            ),
            ("the record of the target stays", pool(&[(RESOLVED_OS_IMAGE_ANNOTATION, &moved_1)]), None, json!({})),
            (
                "the record of another config goes",
                pool(&[(RESOLVED_OS_IMAGE_ANNOTATION, &moved_0)]),
                None,
                json!({RESOLVED_OS_IMAGE_ANNOTATION: null}),
            ),
            (
                "a record of another repository goes",
                pool(&[(RESOLVED_OS_IMAGE_ANNOTATION, &forged)]),
                None,
                json!({RESOLVED_OS_IMAGE_ANNOTATION: null}),
            ),
            (
                "a record not of a whole digest goes",
                pool(&[(RESOLVED_OS_IMAGE_ANNOTATION, &short)]),
                None,
                json!({RESOLVED_OS_IMAGE_ANNOTATION: null}),
            ),
            (
                "a request for a config that was resolved anyway (new, or by digest) is done",
                pool(&[request]),
                None,
                json!({RESOLVE_OS_IMAGE_ANNOTATION: null}),
            ),
        ] {
            assert_eq!(changes(&pool, resolved), want, "{what}");
        }
        assert_eq!(
            resolved_again_note("reg/os:9", "rendered-1", &pinned, &moved),
            format!("OS image reg/os:9 of rendered-1 resolved again on request: nodes move from {pinned} to {moved}")
        );
        assert_eq!(
            resolved_again_note("reg/os:9", "rendered-1", &pinned, &pinned),
            format!("OS image reg/os:9 of rendered-1 resolved again on request: still {pinned}")
        );
    }

    #[test]
    fn judging_what_the_registry_said() {
        let amd64 = Some("amd64".to_string());
        let arm64 = Some("arm64".to_string());
        let ostree = [("ostree.bootable", "true")];
        let bootc = [("containers.bootc", "1")];
        for (image, seen, want) in [
            ("reg:5000/os:9", vec![(amd64.clone(), inspected("amd64", &ostree, D1))], Ok(format!("reg:5000/os@{D1}"))),
            ("reg/os", vec![(None, inspected("arm64", &bootc, D2))], Ok(format!("reg/os@{D2}"))),
            (
                "reg/os:9",
                vec![(amd64.clone(), inspected("amd64", &bootc, D1)), (arm64.clone(), inspected("arm64", &bootc, D1))],
                Ok(format!("reg/os@{D1}")),
            ),
            (
                "reg/os:9",
                vec![(amd64.clone(), Err("manifest unknown".to_string()))],
                Err("it cannot be read with the registries configuration and pull secret of the pool's nodes: \
                     manifest unknown"
                    .to_string()),
            ),
            (
                "reg/os:9",
                vec![(amd64.clone(), inspected("amd64", &[("ostree.bootable", "false")], D1))],
                Err("it is not a bootable OS image (neither the ostree.bootable nor the containers.bootc label of \
                     ostree-ext and bootc images)"
                    .to_string()),
            ),
            (
                "reg/os:9",
                vec![
                    (amd64.clone(), inspected("amd64", &ostree, D1)),
                    (arm64.clone(), inspected("amd64", &ostree, D1)),
                ],
                Err("it is built for amd64, but nodes of the pool are arm64".to_string()),
            ),
        ] {
            assert_eq!(judge(image, &seen), want, "{image} {seen:?}");
        }
    }

    #[test]
    fn node_architectures_each_once() {
        assert_eq!(architectures(["amd64", "arm64", "amd64"]), [Some("amd64".into()), Some("arm64".into())]);
        assert_eq!(architectures([""]), [None]);
        assert_eq!(architectures([]), [None]);
    }

    #[test]
    fn skopeo_errors_are_their_message() {
        let stderr = "time=\"2026-11-27T01:58:44Z\" level=fatal msg=\"Error parsing image name \\\"docker://127.0.0.1:1/x:y\\\": \
                      pinging container registry 127.0.0.1:1: Get \\\"https://127.0.0.1:1/v2/\\\": connection refused\"\n";
        assert_eq!(
            skopeo_error(stderr, "127.0.0.1:1/x:y"),
            "pinging container registry 127.0.0.1:1: Get \"https://127.0.0.1:1/v2/\": connection refused"
        );
        assert_eq!(skopeo_error("plain failure\n\n", "x"), "plain failure");
        assert_eq!(skopeo_error("", "x"), "no error output");
    }

    #[test]
    fn a_tag_that_moves_between_architectures_is_checked_again() {
        let seen = [
            (Some("amd64".to_string()), inspected("amd64", &[("ostree.bootable", "true")], D1)),
            (Some("arm64".to_string()), inspected("arm64", &[("ostree.bootable", "true")], D2)),
        ];
        assert_eq!(
            judge("reg/os:9", &seen),
            Err("it changed while it was checked (its tag moved): it is checked again".into())
        );
    }

    #[test]
    fn skopeo_answers_with_null_labels() {
        let answer = format!(r#"{{"Digest": "{D1}", "Architecture": "amd64", "Labels": null, "Os": "linux"}}"#);
        let found: Inspected = serde_json::from_str(&answer).unwrap();
        assert_eq!(found, Inspected { digest: D1.into(), architecture: "amd64".into(), labels: BTreeMap::new() });
    }
}
