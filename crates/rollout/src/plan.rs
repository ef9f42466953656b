//! Which nodes of a pool move to its config next (`getAllCandidateMachines`,
//! `updateCandidateMachines`), and the UpdateInProgress taint on each node.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Node, Taint};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use mco_api::MachineConfigPool;
use mco_api::constants::{
    ARBITER_POOL, CONTROL_PLANE_TOPOLOGY_ANNOTATION, CURRENT_IMAGE_ANNOTATION, DESIRED_CONFIG_ANNOTATION,
    DESIRED_IMAGE_ANNOTATION, MASTER_POOL, UPDATE_IN_PROGRESS_TAINT_EFFECT, UPDATE_IN_PROGRESS_TAINT_KEY,
};

use crate::node::{self, annotation};

const ZONE_LABEL: &str = "topology.kubernetes.io/zone";

/// A pool the controller cannot plan for.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    #[error(
        "MachineConfigPool {pool}: invalid value for IntOrString: invalid type: string is not a percentage: {value:?}"
    )]
    BadMaxUnavailable { pool: String, value: String },
}

/// What the controller does for a pool in one sync.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Plan {
    /// The pool's node selector is `{}`: nothing is done, not even status (a Warning event
    /// `SelectingAll` says why).
    SelectingAll,
    /// The render controller has not given the pool a config yet: nothing to do.
    NoRenderedConfig,
    /// Only recompute status, with why (the pool is paused or being deleted).
    StatusOnly(&'static str),
    Update(Update),
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Update {
    /// The rendered config nodes are moved to.
    pub target: String,
    /// Nodes to set `desiredConfig = target` on (and remove `desiredImage`), in order.
    pub to_target: Vec<String>,
    /// Candidates held back this round: capacity, readiness, or the operator's node.
    pub waiting: Vec<String>,
    /// The operator's node, held back in the master pool while other candidates exist.
    pub deferred_operator_node: Option<String>,
    /// Nodes that need the `UpdateInProgress:PreferNoSchedule` taint added / removed.
    pub add_taint: Vec<String>,
    pub remove_taint: Vec<String>,
    /// Nodes whose `controlPlaneTopology` annotation must be set to this value.
    pub set_topology: Vec<String>,
    pub topology: Option<String>,
    pub max_unavailable: usize,
    pub unavailable: usize,
}

/// Everything one node gets in one sync, so that it is written in one request.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeChange {
    /// Set `desiredConfig` to this (and remove `desiredImage`).
    pub desired_config: Option<String>,
    /// Add (`true`) or remove (`false`) the UpdateInProgress taint.
    pub update_taint: Option<bool>,
    /// Set `controlPlaneTopology` to this.
    pub topology: Option<String>,
}

impl Update {
    /// The changes per node: targeted nodes first (in targeting order, so the slots are taken
    /// before anything else is written), then the others by name.
    pub fn node_changes(&self) -> Vec<(String, NodeChange)> {
        let mut others: BTreeMap<&str, NodeChange> = BTreeMap::new();
        for name in &self.add_taint {
            others.entry(name).or_default().update_taint = Some(true);
        }
        for name in &self.remove_taint {
            others.entry(name).or_default().update_taint = Some(false);
        }
        for name in &self.set_topology {
            others.entry(name).or_default().topology = self.topology.clone();
        }
        let mut changes: Vec<(String, NodeChange)> = self
            .to_target
            .iter()
            .map(|name| {
                let change = others.remove(name.as_str()).unwrap_or_default();
                (name.clone(), NodeChange { desired_config: Some(self.target.clone()), ..change })
            })
            .collect();
        changes.extend(others.into_iter().map(|(name, change)| (name.to_string(), change)));
        changes
    }
}

/// `maxUnavailable` for a pool of `nodes` nodes: an integer, or a percentage rounded down; at
/// least 1 (a pool always moves). The arbiter pool updates one node at a time.
pub fn max_unavailable(pool: &MachineConfigPool, nodes: usize) -> Result<usize, PlanError> {
    if pool.metadata.name.as_deref() == Some(ARBITER_POOL) {
        return Ok(1);
    }
    let value = match &pool.spec.max_unavailable {
        None => 1,
        Some(IntOrString::Int(n)) => usize::try_from(*n).unwrap_or(0),
        Some(IntOrString::String(s)) => {
            let percent = s
                .strip_suffix('%')
                .filter(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
                .and_then(|p| p.parse::<usize>().ok())
                .ok_or_else(|| PlanError::BadMaxUnavailable {
                    pool: pool.metadata.name.clone().unwrap_or_default(),
                    value: s.clone(),
                })?;
            percent * nodes / 100
        }
    };
    Ok(value.max(1))
}

/// Plans one sync of a pool over the nodes it owns (see [`crate::nodes_for_pool`]).
/// `operator_node` is the node running the operator: with several master candidates it goes last.
/// `topology` is the ControllerConfig's control plane topology, copied onto every node.
pub fn plan(
    pool: &MachineConfigPool,
    nodes: &[&Node],
    operator_node: Option<&str>,
    topology: Option<&str>,
) -> Result<Plan, PlanError> {
    let target = pool.spec.configuration.as_ref().and_then(|c| c.name.clone()).unwrap_or_default();
    if target.is_empty() {
        return Ok(Plan::NoRenderedConfig);
    }
    let selects_all = pool.spec.node_selector.as_ref().is_some_and(|s| {
        s.match_labels.as_ref().is_none_or(|m| m.is_empty())
            && s.match_expressions.as_ref().is_none_or(|e| e.is_empty())
    });
    if selects_all {
        return Ok(Plan::SelectingAll);
    }
    if pool.metadata.deletion_timestamp.is_some() {
        return Ok(Plan::StatusOnly("the pool is being deleted"));
    }
    if pool.spec.paused == Some(true) {
        return Ok(Plan::StatusOnly("the pool is paused"));
    }
    let max = max_unavailable(pool, nodes.len())?;
    let topology = topology.filter(|t| !t.is_empty());
    let mut update = Update {
        target: target.clone(),
        max_unavailable: max,
        topology: topology.map(str::to_string),
        ..Update::default()
    };
    for n in nodes {
        if topology.is_some_and(|t| annotation(n, CONTROL_PLANE_TOPOLOGY_ANNOTATION) != Some(t)) {
            update.set_topology.push(node::name(n).to_string());
        }
        let on_target = annotation(n, DESIRED_CONFIG_ANNOTATION) == Some(target.as_str())
            && !(annotation(n, CURRENT_IMAGE_ANNOTATION).is_some()
                && annotation(n, DESIRED_IMAGE_ANNOTATION).is_some());
        if on_target == has_update_taint(n) {
            let list = if on_target { &mut update.remove_taint } else { &mut update.add_taint };
            list.push(node::name(n).to_string());
        }
    }
    let unavailable = nodes.iter().filter(|n| node::unavailable_for_update(n)).count();
    update.unavailable = unavailable;
    if unavailable >= max {
        update.waiting =
            nodes.iter().filter(|n| node::is_candidate(n, &target)).map(|n| node::name(n).to_string()).collect();
        return Ok(Plan::Update(update));
    }
    let mut capacity = max - unavailable;
    let mut failing = 0;
    let mut candidates: Vec<&Node> = Vec::new();
    for n in nodes {
        if !node::is_candidate(n, &target) {
            if node::mcd_failing(n) {
                failing += 1;
            }
        } else if node::is_ready(n) {
            candidates.push(n);
        } else {
            update.waiting.push(node::name(n).to_string());
        }
    }
    // Nodes that failed moving to this config still hold a slot: retrying elsewhere would spread
    // a bad config.
    if failing >= capacity {
        update.waiting.extend(candidates.iter().map(|n| node::name(n).to_string()));
        return Ok(Plan::Update(update));
    }
    capacity -= failing;
    let operator_candidate = candidates.iter().position(|n| Some(node::name(n)) == operator_node);
    if let Some(pos) =
        operator_candidate.filter(|_| pool.metadata.name.as_deref() == Some(MASTER_POOL) && candidates.len() > 1)
    {
        let operator = node::name(candidates.remove(pos)).to_string();
        update.waiting.push(operator.clone());
        update.deferred_operator_node = Some(operator);
    }
    if capacity < candidates.len() {
        candidates.sort_by_key(|n| zone_order(n));
        update.waiting.extend(candidates.split_off(capacity).iter().map(|n| node::name(n).to_string()));
    }
    update.to_target = candidates.iter().map(|n| node::name(n).to_string()).collect();
    Ok(Plan::Update(update))
}

fn is_update_taint(t: &Taint) -> bool {
    t.key == UPDATE_IN_PROGRESS_TAINT_KEY && t.effect == UPDATE_IN_PROGRESS_TAINT_EFFECT
}

fn has_update_taint(n: &Node) -> bool {
    n.spec.as_ref().and_then(|s| s.taints.as_deref()).unwrap_or_default().iter().any(is_update_taint)
}

/// A node's taints with the UpdateInProgress taint added (`on`) or removed, other taints kept in
/// order; `None` when they already are so.
pub fn with_update_taint(n: &Node, on: bool) -> Option<Vec<Taint>> {
    if has_update_taint(n) == on {
        return None;
    }
    let taints = n.spec.as_ref().and_then(|s| s.taints.clone()).unwrap_or_default();
    let mut taints: Vec<Taint> = taints.into_iter().filter(|t| !is_update_taint(t)).collect();
    if on {
        taints.push(Taint {
            key: UPDATE_IN_PROGRESS_TAINT_KEY.to_string(),
            effect: UPDATE_IN_PROGRESS_TAINT_EFFECT.to_string(),
            ..Taint::default()
        });
    }
    Some(taints)
}

/// Zones in order, oldest node first within a zone, nodes without a zone after all others.
fn zone_order(n: &Node) -> (bool, String, Option<k8s_openapi::jiff::Timestamp>) {
    let zone = n.metadata.labels.as_ref().and_then(|l| l.get(ZONE_LABEL)).cloned();
    (zone.is_none(), zone.unwrap_or_default(), n.metadata.creation_timestamp.as_ref().map(|t| t.0))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::node::tests::node;

    fn pool(name: &str, max: serde_json::Value, paused: bool) -> MachineConfigPool {
        serde_json::from_value(json!({
            "metadata": {"name": name},
            "spec": {"nodeSelector": {"matchLabels": {"node-role.kubernetes.io/worker": ""}},
                     "maxUnavailable": max, "paused": paused, "configuration": {"name": "new"}}
        }))
        .unwrap()
    }

    #[test]
    fn max_unavailable_vectors() {
        let cases = [
            (json!(null), Ok(1)),
            (json!(2), Ok(2)),
            (json!(0), Ok(1)),
            (json!("50%"), Ok(2)),
            (json!("60%"), Ok(2)),
            (json!("10%"), Ok(1)),
            (json!("100%"), Ok(4)),
            (json!("50 percent"), Err(())),
            (json!("60"), Err(())),
            (json!("40 %"), Err(())),
            (json!("%"), Err(())),
        ];
        for (value, want) in cases {
            let got = max_unavailable(&pool("worker", value.clone(), false), 4).map_err(|_| ());
            assert_eq!(got, want, "{value}");
        }
        assert_eq!(max_unavailable(&pool("arbiter", json!(3), false), 4), Ok(1));
        assert_eq!(
            max_unavailable(&pool("worker", json!("60"), false), 4).unwrap_err().to_string(),
            "MachineConfigPool worker: invalid value for IntOrString: invalid type: string is not a percentage: \"60\""
        );
    }

    /// Node spec: (name, current, desired, state, ready).
    type Spec<'a> = (&'a str, &'a str, &'a str, &'a str, bool);

    fn update(pool: &MachineConfigPool, specs: &[Spec], operator: Option<&str>) -> Update {
        let nodes: Vec<Node> = specs.iter().map(|(n, c, d, s, r)| node(n, c, d, s, *r)).collect();
        let refs: Vec<&Node> = nodes.iter().collect();
        match plan(pool, &refs, operator, None).unwrap() {
            Plan::Update(u) => u,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn candidates_and_capacity() {
        let old = |n| (n, "old", "old", "Done", true);
        let cases: &[(&str, serde_json::Value, Vec<Spec>, &[&str])] = &[
            ("one slot", json!(1), vec![old("a"), old("b"), old("c")], &["a"]),
            ("two slots", json!(2), vec![old("a"), old("b"), old("c")], &["a", "b"]),
            (
                "percent of 5 rounds down",
                json!("50%"),
                vec![old("a"), old("b"), old("c"), old("d"), old("e")],
                &["a", "b"],
            ),
            ("a working node uses the slot", json!(1), vec![("a", "old", "new", "Working", true), old("b")], &[]),
            ("one of two slots used", json!(2), vec![("a", "old", "new", "Working", true), old("b"), old("c")], &["b"]),
            (
                "a node that failed this config holds a slot",
                json!(2),
                vec![("a", "old", "new", "Degraded", true), old("b"), old("c")],
                &["b"],
            ),
            ("not-ready nodes are unavailable", json!(1), vec![("a", "old", "old", "Done", false), old("b")], &[]),
            ("not-ready candidates are skipped", json!(2), vec![("a", "old", "old", "Done", false), old("b")], &["b"]),
            ("done nodes are no candidates", json!(1), vec![("a", "new", "new", "Done", true), old("b")], &["b"]),
            ("everything done", json!(1), vec![("a", "new", "new", "Done", true)], &[]),
        ];
        for (what, max, specs, want) in cases {
            let got = update(&pool("worker", max.clone(), false), specs, None);
            assert_eq!(got.to_target, *want, "{what}: {got:?}");
            assert!(got.to_target.len() + got.unavailable <= got.max_unavailable.max(got.unavailable), "{what}");
        }
    }

    #[test]
    fn zone_then_age_ordering() {
        let nodes: Vec<Node> = [
            ("a", Some("z2"), "2026-01-01"),
            ("b", None, "2020-01-01"),
            ("c", Some("z1"), "2026-03-01"),
            ("d", Some("z1"), "2026-02-01"),
        ]
        .iter()
        .map(|(name, zone, created)| {
            let mut n = node(name, "old", "old", "Done", true);
            n.metadata.creation_timestamp =
                Some(serde_json::from_value(json!(format!("{created}T00:00:00Z"))).unwrap());
            if let Some(z) = zone {
                n.metadata.labels.as_mut().unwrap().insert(ZONE_LABEL.into(), z.to_string());
            }
            n
        })
        .collect();
        let refs: Vec<&Node> = nodes.iter().collect();
        let Plan::Update(u) = plan(&pool("worker", json!(3), false), &refs, None, None).unwrap() else { panic!() };
        assert_eq!(u.to_target, ["d", "c", "a"]);
        assert_eq!(u.waiting, ["b"]);
    }

    #[test]
    fn operator_node_goes_last_in_master() {
        let specs = [("m1", "old", "old", "Done", true), ("m2", "old", "old", "Done", true)];
        let master = update(&pool("master", json!(1), false), &specs, Some("m1"));
        assert_eq!(master.to_target, ["m2"]);
        assert_eq!(master.deferred_operator_node.as_deref(), Some("m1"));
        assert_eq!(update(&pool("worker", json!(1), false), &specs, Some("m1")).to_target, ["m1"]);
        assert_eq!(
            update(&pool("master", json!(1), false), &specs[..1], Some("m1")).to_target,
            ["m1"],
            "alone, it updates"
        );
    }

    #[test]
    fn pools_that_do_not_move() {
        let n = node("a", "old", "old", "Done", true);
        assert_eq!(
            plan(&pool("worker", json!(1), true), &[&n], None, None).unwrap(),
            Plan::StatusOnly("the pool is paused")
        );
        let mut deleted = pool("worker", json!(1), false);
        deleted.metadata.deletion_timestamp = Some(serde_json::from_value(json!("2026-01-01T00:00:00Z")).unwrap());
        assert_eq!(plan(&deleted, &[&n], None, None).unwrap(), Plan::StatusOnly("the pool is being deleted"));
        let mut unrendered = pool("worker", json!(1), false);
        unrendered.spec.configuration = None;
        assert_eq!(plan(&unrendered, &[&n], None, None).unwrap(), Plan::NoRenderedConfig);
        let mut everything = pool("worker", json!(1), false);
        everything.spec.node_selector = Some(Default::default());
        assert_eq!(plan(&everything, &[&n], None, None).unwrap(), Plan::SelectingAll);
    }

    #[test]
    fn update_in_progress_taint() {
        let mut targeted = node("t", "old", "new", "Working", true);
        targeted.spec = Some(
            serde_json::from_value(json!({"taints": [{"key": "UpdateInProgress", "effect": "PreferNoSchedule"}]}))
                .unwrap(),
        );
        let waiting = node("w", "old", "old", "Done", true);
        let mut finished = node("f", "new", "new", "Done", true);
        finished.spec = targeted.spec.clone();
        let Plan::Update(u) =
            plan(&pool("worker", json!(1), false), &[&targeted, &waiting, &finished], None, None).unwrap()
        else {
            panic!()
        };
        // The taint marks nodes still waiting for the new config, so new pods prefer nodes that
        // already have it (or are getting it now).
        assert_eq!(u.add_taint, ["w"]);
        assert_eq!(u.remove_taint, ["t", "f"]);
        assert!(u.to_target.is_empty(), "the working node uses the only slot");
    }

    #[test]
    fn one_change_per_node_targeted_first() {
        let mut labelled = node("b", "old", "old", "Done", true);
        labelled.metadata.annotations.as_mut().unwrap().insert(CONTROL_PLANE_TOPOLOGY_ANNOTATION.into(), "HA".into());
        let nodes = [node("c", "new", "new", "Done", true), labelled, node("a", "old", "old", "Done", true)];
        let refs: Vec<&Node> = nodes.iter().collect();
        let Plan::Update(u) = plan(&pool("worker", json!(1), false), &refs, None, Some("HA")).unwrap() else {
            panic!()
        };
        let change = |desired: Option<&str>, taint, topology: Option<&str>| NodeChange {
            desired_config: desired.map(str::to_string),
            update_taint: taint,
            topology: topology.map(str::to_string),
        };
        assert_eq!(
            u.node_changes(),
            [
                ("b".to_string(), change(Some("new"), Some(true), None)),
                ("a".to_string(), change(None, Some(true), Some("HA"))),
                ("c".to_string(), change(None, None, Some("HA"))),
            ]
        );
        let Plan::Update(no_topology) = plan(&pool("worker", json!(1), false), &refs, None, Some("")).unwrap() else {
            panic!()
        };
        assert!(no_topology.set_topology.is_empty(), "an empty topology is not copied");
    }

    #[test]
    fn update_taint_edits_keep_other_taints() {
        let taint = |key: &str, effect: &str| Taint { key: key.into(), effect: effect.into(), ..Taint::default() };
        let with = |taints: Vec<Taint>| {
            let mut n = node("n", "a", "a", "Done", true);
            n.spec = Some(k8s_openapi::api::core::v1::NodeSpec { taints: Some(taints), ..Default::default() });
            n
        };
        let other = taint("dedicated", "NoSchedule");
        let ours = taint("UpdateInProgress", "PreferNoSchedule");
        let cases = [
            (vec![], true, Some(vec![ours.clone()])),
            (vec![other.clone()], true, Some(vec![other.clone(), ours.clone()])),
            (vec![ours.clone()], true, None),
            (vec![ours.clone(), other.clone()], false, Some(vec![other.clone()])),
            (vec![other.clone()], false, None),
            (vec![taint("UpdateInProgress", "NoSchedule")], false, None),
        ];
        for (taints, on, want) in cases {
            assert_eq!(with_update_taint(&with(taints.clone()), on), want, "{taints:?} {on}");
        }
        assert_eq!(with_update_taint(&node("n", "a", "a", "Done", true), true), Some(vec![ours]));
    }
}
