//! The node controller (upstream `pkg/controller/node`): moves each pool's nodes to its rendered
//! config, at most `maxUnavailable` at a time, and keeps the pool's status. The decisions are
//! `mco_rollout`'s ([`mco_rollout::plan`], [`mco_rollout::calculate_status`]); this module turns
//! them into requests ([`node_patch`], [`set_desired_config_note`]) and [`controller`] sends them.

pub mod controller;

use k8s_openapi::api::core::v1::Node;
use mco_api::constants::{CONTROL_PLANE_TOPOLOGY_ANNOTATION, DESIRED_CONFIG_ANNOTATION, DESIRED_IMAGE_ANNOTATION};
use mco_rollout::node::annotation;
use mco_rollout::plan::{NodeChange, with_update_taint};
use serde_json::{Map, Value, json};

/// The JSON merge patch that makes `node` what `change` asks for, or `None` when it already is.
///
/// A taint edit replaces the whole taint list, so that patch carries the node's resourceVersion:
/// a taint someone added in the meantime is not lost, the write conflicts and is redone on the
/// fresh node. Annotation-only patches need no precondition (they touch only our keys).
pub fn node_patch(node: &Node, change: &NodeChange) -> Option<Value> {
    let mut annotations = Map::new();
    if let Some(target) = &change.desired_config {
        if annotation(node, DESIRED_CONFIG_ANNOTATION) != Some(target) {
            annotations.insert(DESIRED_CONFIG_ANNOTATION.into(), json!(target));
        }
        // A node moved to a plain rendered config leaves on-cluster layering.
        if annotation(node, DESIRED_IMAGE_ANNOTATION).is_some() {
            annotations.insert(DESIRED_IMAGE_ANNOTATION.into(), Value::Null);
        }
    }
    if let Some(topology) = &change.topology
        && annotation(node, CONTROL_PLANE_TOPOLOGY_ANNOTATION) != Some(topology)
    {
        annotations.insert(CONTROL_PLANE_TOPOLOGY_ANNOTATION.into(), json!(topology));
    }
    let taints = change.update_taint.and_then(|on| with_update_taint(node, on));
    if annotations.is_empty() && taints.is_none() {
        return None;
    }
    let mut patch = json!({});
    if !annotations.is_empty() {
        patch["metadata"] = json!({ "annotations": annotations });
    }
    if let Some(taints) = taints {
        patch["metadata"]["resourceVersion"] = json!(node.metadata.resource_version);
        patch["spec"] = json!({ "taints": taints });
    }
    Some(patch)
}

/// The note of the `SetDesiredConfig` event, as upstream words it.
pub fn set_desired_config_note(nodes: &[String], target: &str) -> String {
    match nodes {
        [one] => format!("Targeted node {one} to MachineConfig: {target}"),
        many => format!("Set target for {} nodes to MachineConfig: {target}", many.len()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(annotations: Value, taints: Value) -> Node {
        serde_json::from_value(json!({
            "metadata": {"name": "n", "resourceVersion": "42", "annotations": annotations},
            "spec": {"taints": taints},
        }))
        .unwrap()
    }

    fn change(desired: Option<&str>, taint: Option<bool>, topology: Option<&str>) -> NodeChange {
        NodeChange {
            desired_config: desired.map(str::to_string),
            update_taint: taint,
            topology: topology.map(str::to_string),
        }
    }

    #[test]
    fn patches() {
        let desired = DESIRED_CONFIG_ANNOTATION;
        let ours = json!({"key": "UpdateInProgress", "effect": "PreferNoSchedule"});
        let other = json!({"key": "dedicated", "effect": "NoSchedule"});
        let cases = [
            (
                "target a node",
                node(json!({desired: "old"}), json!([])),
                change(Some("new"), None, None),
                Some(json!({"metadata": {"annotations": {desired: "new"}}})),
            ),
            (
                "targeting drops a layered image target",
                node(json!({desired: "new", DESIRED_IMAGE_ANNOTATION: "img"}), json!([])),
                change(Some("new"), None, None),
                Some(json!({"metadata": {"annotations": {DESIRED_IMAGE_ANNOTATION: null}}})),
            ),
            ("nothing to do", node(json!({desired: "new"}), json!([])), change(Some("new"), Some(false), None), None),
            (
                "taint with the resourceVersion, other taints kept",
                node(json!({}), json!([other])),
                change(None, Some(true), None),
                Some(json!({"metadata": {"resourceVersion": "42"}, "spec": {"taints": [other, ours]}})),
            ),
            (
                "untaint and topology in one request",
                node(json!({}), json!([ours, other])),
                change(None, Some(false), Some("HighlyAvailable")),
                Some(json!({
                    "metadata": {"annotations": {CONTROL_PLANE_TOPOLOGY_ANNOTATION: "HighlyAvailable"}, "resourceVersion": "42"},
                    "spec": {"taints": [other]},
                })),
            ),
        ];
        for (what, n, c, want) in cases {
            assert_eq!(node_patch(&n, &c), want, "{what}");
        }
    }

    #[test]
    fn event_notes() {
        assert_eq!(
            set_desired_config_note(&["w1".into()], "rendered-worker-1"),
            "Targeted node w1 to MachineConfig: rendered-worker-1"
        );
        assert_eq!(
            set_desired_config_note(&["w1".into(), "w2".into()], "rendered-worker-1"),
            "Set target for 2 nodes to MachineConfig: rendered-worker-1"
        );
    }
}
