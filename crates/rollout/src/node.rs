//! Node state predicates (`LayeredNodeState`, non-layered pools): what the daemon's annotations
//! and the node's conditions say about a node's progress.

use k8s_openapi::api::core::v1::Node;
use mco_api::constants::{
    CURRENT_CONFIG_ANNOTATION, CURRENT_IMAGE_ANNOTATION, DESIRED_CONFIG_ANNOTATION, DESIRED_IMAGE_ANNOTATION,
    STATE_ANNOTATION, STATE_DEGRADED, STATE_DONE, STATE_UNRECONCILABLE,
};

pub fn annotation<'a>(node: &'a Node, key: &str) -> Option<&'a str> {
    node.metadata.annotations.as_ref()?.get(key).map(String::as_str)
}

pub fn name(node: &Node) -> &str {
    node.metadata.name.as_deref().unwrap_or_default()
}

/// Ready, no disk pressure, network available (when reported) and schedulable.
pub fn is_ready(node: &Node) -> bool {
    if node.spec.as_ref().and_then(|s| s.unschedulable).unwrap_or(false) {
        return false;
    }
    let conditions = node.status.as_ref().and_then(|s| s.conditions.as_deref()).unwrap_or_default();
    let status_of = |kind: &str| conditions.iter().find(|c| c.type_ == kind).map(|c| c.status.as_str());
    status_of("Ready") == Some("True")
        && status_of("DiskPressure").is_none_or(|s| s == "False")
        && status_of("NetworkUnavailable").is_none_or(|s| s == "False")
}

/// Current and desired config are set and equal.
pub fn config_done(node: &Node) -> bool {
    match (annotation(node, CURRENT_CONFIG_ANNOTATION), annotation(node, DESIRED_CONFIG_ANNOTATION)) {
        (Some(current), Some(desired)) => !current.is_empty() && current == desired,
        _ => false,
    }
}

/// No image annotations at all, or both set and equal.
pub fn image_done(node: &Node) -> bool {
    match (annotation(node, CURRENT_IMAGE_ANNOTATION), annotation(node, DESIRED_IMAGE_ANNOTATION)) {
        (None, None) => true,
        (Some(current), Some(desired)) => !desired.is_empty() && !current.is_empty() && current == desired,
        _ => false,
    }
}

/// The daemon finished: configs and images match and its state is Done.
pub fn node_done(node: &Node) -> bool {
    node.metadata.annotations.is_some()
        && config_done(node)
        && image_done(node)
        && annotation(node, STATE_ANNOTATION) == Some(STATE_DONE)
}

/// The daemon failed moving to a different config or image.
pub fn mcd_failing(node: &Node) -> bool {
    let differs = |current, desired| annotation(node, current) != annotation(node, desired);
    (differs(CURRENT_CONFIG_ANNOTATION, DESIRED_CONFIG_ANNOTATION)
        || differs(CURRENT_IMAGE_ANNOTATION, DESIRED_IMAGE_ANNOTATION))
        && matches!(annotation(node, STATE_ANNOTATION), Some(STATE_DEGRADED | STATE_UNRECONCILABLE))
}

/// Counts against maxUnavailable: not ready, or busy updating. A node that failed to move to
/// another config is not counted (it keeps running its old config and workloads).
pub fn unavailable_for_update(node: &Node) -> bool {
    !is_ready(node) || (!node_done(node) && !mcd_failing(node))
}

/// What a pool moves its nodes to: its rendered config and, for a layered pool, the built image
/// (`None`: a plain pool, whose nodes carry no image target).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Target {
    pub config: String,
    pub image: Option<String>,
}

impl Target {
    /// A plain pool's target.
    pub fn config(config: impl Into<String>) -> Self {
        Target { config: config.into(), image: None }
    }
}

/// The node's desired config and image are the target's (a layered target's image must be set).
pub fn desired_equals(node: &Node, target: &Target) -> bool {
    let image = annotation(node, DESIRED_IMAGE_ANNOTATION);
    annotation(node, DESIRED_CONFIG_ANNOTATION) == Some(target.config.as_str())
        && match target.image.as_deref() {
            None => image.is_none(),
            Some(wanted) => !wanted.is_empty() && image == Some(wanted),
        }
}

/// The node is not yet targeted at the pool's target (for a plain pool: also when it still
/// carries a layered image target).
pub fn is_candidate(node: &Node, target: &Target) -> bool {
    !desired_equals(node, target)
}

/// The node runs the pool's target ("updated").
pub fn is_done(node: &Node, target: &Target) -> bool {
    node_done(node) && desired_equals(node, target)
}

/// The node needs no UpdateInProgress taint: it is targeted at the pool's target. (For a plain
/// pool a node with a desired image but no current one counts as targeted, as upstream has it.)
pub fn is_taint_free(node: &Node, target: &Target) -> bool {
    match target.image {
        None => {
            annotation(node, DESIRED_CONFIG_ANNOTATION) == Some(target.config.as_str())
                && !(annotation(node, CURRENT_IMAGE_ANNOTATION).is_some()
                    && annotation(node, DESIRED_IMAGE_ANNOTATION).is_some())
        }
        Some(_) => desired_equals(node, target),
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use serde_json::json;

    use super::*;

    /// A node from compact test input: annotations as (current, desired, state), ready or not.
    pub fn node(name: &str, current: &str, desired: &str, state: &str, ready: bool) -> Node {
        let mut annotations = serde_json::Map::new();
        for (key, value) in
            [(CURRENT_CONFIG_ANNOTATION, current), (DESIRED_CONFIG_ANNOTATION, desired), (STATE_ANNOTATION, state)]
        {
            if !value.is_empty() {
                annotations.insert(key.into(), json!(value));
            }
        }
        serde_json::from_value(json!({
            "metadata": {"name": name, "annotations": annotations, "labels": {"node-role.kubernetes.io/worker": ""},
                         "creationTimestamp": "2026-01-01T00:00:00Z"},
            "status": {"conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }}]}
        }))
        .unwrap()
    }

    #[test]
    fn predicates() {
        // (current, desired, state, ready) → (done, failing, unavailable, candidate for "b", done for "b")
        let cases = [
            (("a", "a", "Done", true), (true, false, false, true, false)),
            (("b", "b", "Done", true), (true, false, false, false, true)),
            (("a", "b", "Working", true), (false, false, true, false, false)),
            (("a", "b", "Done", true), (false, false, true, false, false)),
            (("a", "b", "Degraded", true), (false, true, false, false, false)),
            (("a", "b", "Unreconcilable", true), (false, true, false, false, false)),
            (("b", "b", "Degraded", true), (false, false, true, false, false)),
            (("b", "b", "Done", false), (true, false, true, false, true)),
            (("", "", "", true), (false, false, true, true, false)),
        ];
        for ((current, desired, state, ready), want) in cases {
            let n = node("n", current, desired, state, ready);
            let b = Target::config("b");
            let got =
                (node_done(&n), mcd_failing(&n), unavailable_for_update(&n), is_candidate(&n, &b), is_done(&n, &b));
            assert_eq!(got, want, "{current} {desired} {state} {ready}");
        }
    }

    #[test]
    fn readiness() {
        let with = |extra: serde_json::Value| -> Node {
            let mut v =
                json!({"metadata": {"name": "n"}, "status": {"conditions": [{"type": "Ready", "status": "True"}]}});
            for (k, val) in extra.as_object().unwrap() {
                match k.as_str() {
                    "condition" => v["status"]["conditions"].as_array_mut().unwrap().push(val.clone()),
                    _ => v[k] = val.clone(),
                }
            }
            serde_json::from_value(v).unwrap()
        };
        assert!(is_ready(&with(json!({}))));
        assert!(!is_ready(&with(json!({"spec": {"unschedulable": true}}))));
        assert!(!is_ready(&with(json!({"condition": {"type": "DiskPressure", "status": "True"}}))));
        assert!(is_ready(&with(json!({"condition": {"type": "DiskPressure", "status": "False"}}))));
        assert!(!is_ready(&with(json!({"condition": {"type": "NetworkUnavailable", "status": "Unknown"}}))));
        assert!(!is_ready(&serde_json::from_value(json!({"metadata": {"name": "n"}})).unwrap()));
    }

    #[test]
    fn images() {
        let mut n = node("n", "a", "a", "Done", true);
        let set = |n: &mut Node, key: &str, value: &str| {
            n.metadata.annotations.as_mut().unwrap().insert(key.into(), value.into());
        };
        set(&mut n, DESIRED_IMAGE_ANNOTATION, "img@sha256:1");
        assert!(!image_done(&n));
        set(&mut n, CURRENT_IMAGE_ANNOTATION, "img@sha256:1");
        assert!(image_done(&n) && node_done(&n));
        assert!(!is_done(&n, &Target::config("a")), "a layered target is not done for a non-layered pool");
        assert!(is_candidate(&n, &Target::config("a")), "opting out of layering re-targets the node");
    }

    #[test]
    fn layered_targets() {
        let layered = |image: &str| Target { config: "a".into(), image: Some(image.into()) };
        let mut n = node("n", "a", "a", "Done", true);
        let set = |n: &mut Node, key: &str, value: &str| {
            n.metadata.annotations.as_mut().unwrap().insert(key.into(), value.into());
        };
        assert!(is_candidate(&n, &layered("img@sha256:1")), "no image target yet");
        assert!(!is_taint_free(&n, &layered("img@sha256:1")));
        assert!(is_taint_free(&n, &Target::config("a")));
        set(&mut n, DESIRED_IMAGE_ANNOTATION, "img@sha256:1");
        assert!(!is_candidate(&n, &layered("img@sha256:1")));
        assert!(is_candidate(&n, &layered("img@sha256:2")), "a newer build");
        assert!(is_candidate(&n, &layered("")), "an empty image is no target");
        assert!(is_taint_free(&n, &layered("img@sha256:1")));
        assert!(is_taint_free(&n, &Target::config("a")), "desired image without a current one: untainted");
        assert!(!is_done(&n, &layered("img@sha256:1")), "the image is not applied yet");
        set(&mut n, CURRENT_IMAGE_ANNOTATION, "img@sha256:1");
        assert!(is_done(&n, &layered("img@sha256:1")));
        assert!(!is_taint_free(&n, &Target::config("a")), "leaving layering: tainted");
    }
}
