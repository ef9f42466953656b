//! Whether control-plane nodes take ordinary workloads (upstream `reconcileMaster`): every master
//! node gets the `control-plane` role label; with `schedulers.config.openshift.io/cluster`
//! `.spec.mastersSchedulable` true it also gets the `worker` role label and loses the master
//! `NoSchedule` taints, with false it loses the `worker` label and gets the
//! `node-role.kubernetes.io/master:NoSchedule` taint. Without that Scheduler nothing but the
//! `control-plane` label changes.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Node, Taint};

pub const CONTROL_PLANE_LABEL: &str = "node-role.kubernetes.io/control-plane";
pub const MASTER_LABEL: &str = "node-role.kubernetes.io/master";
pub const WORKER_LABEL: &str = "node-role.kubernetes.io/worker";
const NO_SCHEDULE: &str = "NoSchedule";

fn label<'a>(node: &'a Node, key: &str) -> Option<&'a str> {
    node.metadata.labels.as_ref()?.get(key).map(String::as_str)
}

/// The label edits a master node needs: `Some(value)` sets, `None` removes. Empty when none.
pub fn label_changes(node: &Node, schedulable: Option<bool>) -> BTreeMap<String, Option<String>> {
    let mut changes = BTreeMap::new();
    if label(node, CONTROL_PLANE_LABEL).is_none() {
        changes.insert(CONTROL_PLANE_LABEL.to_string(), Some(String::new()));
    }
    match (schedulable, label(node, WORKER_LABEL)) {
        (Some(true), None) => {
            changes.insert(WORKER_LABEL.to_string(), Some(String::new()));
        }
        (Some(false), Some(_)) => {
            changes.insert(WORKER_LABEL.to_string(), None);
        }
        _ => {}
    }
    changes
}

fn is_master_no_schedule(t: &Taint) -> bool {
    t.effect == NO_SCHEDULE && (t.key == MASTER_LABEL || t.key == CONTROL_PLANE_LABEL)
}

/// `taints` as a master node should have them, other taints kept in order.
pub fn with_schedulability(taints: Vec<Taint>, schedulable: bool) -> Vec<Taint> {
    if schedulable {
        return taints.into_iter().filter(|t| !is_master_no_schedule(t)).collect();
    }
    let mut taints = taints;
    if !taints.iter().any(|t| t.effect == NO_SCHEDULE && t.key == MASTER_LABEL) {
        taints.push(Taint { key: MASTER_LABEL.to_string(), effect: NO_SCHEDULE.to_string(), ..Taint::default() });
    }
    taints
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn node(labels: &[&str]) -> Node {
        let labels: serde_json::Map<String, serde_json::Value> =
            labels.iter().map(|l| (l.to_string(), json!(""))).collect();
        serde_json::from_value(json!({"metadata": {"name": "m", "labels": labels}})).unwrap()
    }

    #[test]
    fn labels() {
        let set = |k: &str| (k.to_string(), Some(String::new()));
        let remove = |k: &str| (k.to_string(), None);
        type Case<'a> = (&'a str, &'a [&'a str], Option<bool>, Vec<(String, Option<String>)>);
        let cases: Vec<Case> = vec![
            ("no Scheduler: only the control-plane label", &[MASTER_LABEL], None, vec![set(CONTROL_PLANE_LABEL)]),
            (
                "schedulable: the worker role too",
                &[MASTER_LABEL, CONTROL_PLANE_LABEL],
                Some(true),
                vec![set(WORKER_LABEL)],
            ),
            (
                "unschedulable: no worker role",
                &[MASTER_LABEL, CONTROL_PLANE_LABEL, WORKER_LABEL],
                Some(false),
                vec![remove(WORKER_LABEL)],
            ),
            ("already right", &[MASTER_LABEL, CONTROL_PLANE_LABEL, WORKER_LABEL], Some(true), vec![]),
            ("both at once", &[MASTER_LABEL], Some(true), vec![set(CONTROL_PLANE_LABEL), set(WORKER_LABEL)]),
        ];
        for (what, labels, schedulable, want) in cases {
            assert_eq!(label_changes(&node(labels), schedulable), want.into_iter().collect(), "{what}");
        }
    }

    #[test]
    fn taints() {
        let taint = |key: &str, effect: &str| Taint { key: key.into(), effect: effect.into(), ..Taint::default() };
        let other = taint("dedicated", NO_SCHEDULE);
        let master = taint(MASTER_LABEL, NO_SCHEDULE);
        let control_plane = taint(CONTROL_PLANE_LABEL, NO_SCHEDULE);
        let prefer = taint(MASTER_LABEL, "PreferNoSchedule");
        let cases = [
            (
                "schedulable drops both NoSchedule taints",
                vec![master.clone(), other.clone(), control_plane.clone()],
                true,
                vec![other.clone()],
            ),
            ("schedulable keeps other effects", vec![prefer.clone()], true, vec![prefer.clone()]),
            ("unschedulable adds the master taint", vec![other.clone()], false, vec![other.clone(), master.clone()]),
            (
                "unschedulable, already tainted",
                vec![master.clone(), other.clone()],
                false,
                vec![master.clone(), other.clone()],
            ),
        ];
        for (what, taints, schedulable, want) in cases {
            assert_eq!(with_schedulability(taints, schedulable), want, "{what}");
        }
    }
}
