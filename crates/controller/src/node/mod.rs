//! The node controller (upstream `pkg/controller/node`): moves each pool's nodes to its rendered
//! config, at most `maxUnavailable` at a time, and keeps the pool's status. The decisions are
//! `mco_rollout`'s ([`mco_rollout::plan`], [`mco_rollout::calculate_status`]); this module turns
//! them into requests ([`node_patch`], [`set_desired_event`]) and [`controller`] sends them.

mod background;
pub mod controller;
mod machineconfignodes;
pub mod metrics;

use k8s_openapi::api::core::v1::Node;
use mco_api::constants::{
    CONTROL_PLANE_TOPOLOGY_ANNOTATION, CUSTOM_POOL_LABELS_APPLIED_ANNOTATION, DESIRED_CONFIG_ANNOTATION,
    DESIRED_IMAGE_ANNOTATION,
};
use mco_rollout::node::{Target, annotation};
use mco_rollout::plan::{NodeChange, taints_after};
use mco_rollout::prestage::PRESTAGE_ANNOTATION;
use serde_json::{Map, Value, json};

/// The JSON merge patch that makes `node` what `change` asks for, or `None` when it already is.
///
/// A taint edit replaces the whole taint list, so that patch carries the node's resourceVersion:
/// a taint someone added in the meantime is not lost, the write conflicts and is redone on the
/// fresh node. Annotation-only patches need no precondition (they touch only our keys).
pub fn node_patch(node: &Node, change: &NodeChange) -> Option<Value> {
    let mut annotations = Map::new();
    if let Some(target) = &change.desired {
        if annotation(node, DESIRED_CONFIG_ANNOTATION) != Some(target.config.as_str()) {
            annotations.insert(DESIRED_CONFIG_ANNOTATION.into(), json!(target.config));
        }
        // A node moved to a plain rendered config leaves on-cluster layering.
        let image = target.image.as_deref().filter(|i| !i.is_empty());
        if annotation(node, DESIRED_IMAGE_ANNOTATION) != image {
            annotations.insert(DESIRED_IMAGE_ANNOTATION.into(), image.map_or(Value::Null, |i| json!(i)));
        }
    }
    if let Some(topology) = &change.topology
        && annotation(node, CONTROL_PLANE_TOPOLOGY_ANNOTATION) != Some(topology)
    {
        annotations.insert(CONTROL_PLANE_TOPOLOGY_ANNOTATION.into(), json!(topology));
    }
    if let Some(image) = &change.prestage
        && annotation(node, PRESTAGE_ANNOTATION) != image.as_deref()
    {
        annotations.insert(PRESTAGE_ANNOTATION.into(), image.as_ref().map_or(Value::Null, |i| json!(i)));
    }
    if change.custom_pool_labels_applied && annotation(node, CUSTOM_POOL_LABELS_APPLIED_ANNOTATION).is_none() {
        annotations.insert(CUSTOM_POOL_LABELS_APPLIED_ANNOTATION.into(), json!(""));
    }
    let labels: Map<String, Value> = change
        .labels
        .iter()
        .filter(|(key, value)| node.metadata.labels.as_ref().and_then(|l| l.get(*key)) != value.as_ref())
        .map(|(key, value)| (key.clone(), value.as_ref().map_or(Value::Null, |v| json!(v))))
        .collect();
    let taints = taints_after(node, change);
    if annotations.is_empty() && labels.is_empty() && taints.is_none() {
        return None;
    }
    let mut patch = json!({});
    if !annotations.is_empty() {
        patch["metadata"]["annotations"] = json!(annotations);
    }
    if !labels.is_empty() {
        patch["metadata"]["labels"] = json!(labels);
    }
    if let Some(taints) = taints {
        patch["metadata"]["resourceVersion"] = json!(node.metadata.resource_version);
        patch["spec"] = json!({ "taints": taints });
    }
    Some(patch)
}

/// The reason and note of the event saying which nodes were targeted, as upstream words them:
/// `SetDesiredConfig`, or `SetDesiredConfigAndOSImage` for a layered pool.
pub fn set_desired_event(nodes: &[String], target: &Target) -> (&'static str, String) {
    let (reason, what) = match &target.image {
        None => ("SetDesiredConfig", format!("MachineConfig: {}", target.config)),
        Some(image) => ("SetDesiredConfigAndOSImage", format!("MachineConfig: {} / Image: {image}", target.config)),
    };
    let note = match nodes {
        [one] => format!("Targeted node {one} to {what}"),
        many => format!("Set target for {} nodes to {what}", many.len()),
    };
    (reason, note)
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
            desired: desired.map(Target::config),
            update_taint: taint,
            topology: topology.map(str::to_string),
            ..NodeChange::default()
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
                "layered: config and image",
                node(json!({desired: "old", DESIRED_IMAGE_ANNOTATION: "img@sha256:0"}), json!([])),
                NodeChange {
                    desired: Some(Target { config: "new".into(), image: Some("img@sha256:1".into()) }),
                    ..NodeChange::default()
                },
                Some(json!({"metadata": {"annotations": {desired: "new", DESIRED_IMAGE_ANNOTATION: "img@sha256:1"}}})),
            ),
            (
                "taint with the resourceVersion, other taints kept",
                node(json!({}), json!([other])),
                change(None, Some(true), None),
                Some(json!({"metadata": {"resourceVersion": "42"}, "spec": {"taints": [other, ours]}})),
            ),
            (
                "master roles: labels set and removed, the NoSchedule taint",
                node(json!({}), json!([other])),
                NodeChange {
                    labels: [("role/a".to_string(), Some(String::new())), ("role/b".to_string(), None)].into(),
                    masters_schedulable: Some(false),
                    ..NodeChange::default()
                },
                Some(json!({
                    "metadata": {"labels": {"role/a": ""}, "resourceVersion": "42"},
                    "spec": {"taints": [other, {"key": "node-role.kubernetes.io/master", "effect": "NoSchedule"}]},
                })),
            ),
            (
                "custom pool labels and the annotation saying so",
                node(json!({}), json!([])),
                NodeChange {
                    labels: [("node-role.kubernetes.io/infra".to_string(), Some(String::new()))].into(),
                    custom_pool_labels_applied: true,
                    ..NodeChange::default()
                },
                Some(json!({"metadata": {
                    "labels": {"node-role.kubernetes.io/infra": ""},
                    "annotations": {CUSTOM_POOL_LABELS_APPLIED_ANNOTATION: ""},
                }})),
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
        let plain = Target::config("rendered-worker-1");
        let layered = Target { config: "rendered-worker-1".into(), image: Some("registry/os@sha256:1".into()) };
        let (one, two) = (["w1".to_string()], ["w1".to_string(), "w2".to_string()]);
        let cases = [
            (&one[..], &plain, "SetDesiredConfig", "Targeted node w1 to MachineConfig: rendered-worker-1"),
            (&two[..], &plain, "SetDesiredConfig", "Set target for 2 nodes to MachineConfig: rendered-worker-1"),
            (
                &one[..],
                &layered,
                "SetDesiredConfigAndOSImage",
                "Targeted node w1 to MachineConfig: rendered-worker-1 / Image: registry/os@sha256:1",
            ),
        ];
        for (nodes, target, reason, note) in cases {
            assert_eq!(set_desired_event(nodes, target), (reason, note.to_string()));
        }
    }
}
