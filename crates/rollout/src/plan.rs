//! Which nodes of a pool move to its config next (`getAllCandidateMachines`,
//! `updateCandidateMachines`), and the UpdateInProgress taint on each node.

use std::collections::{BTreeMap, HashSet};

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Node, Taint};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use mco_api::MachineConfigPool;
use mco_api::constants::{
    ARBITER_POOL, CONTROL_PLANE_TOPOLOGY_ANNOTATION, CUSTOM_POOL_LABELS_APPLIED_ANNOTATION,
    FIRST_PIVOT_CONFIG_ANNOTATION, MASTER_POOL, UPDATE_IN_PROGRESS_TAINT_EFFECT, UPDATE_IN_PROGRESS_TAINT_KEY,
};

use crate::layering::{BuildState, Layered};
use crate::node::{self, Target, annotation};
use crate::policy::{self, Hold, RolloutPolicy};
use crate::prestage::{self, Prestage};
use crate::{masters, membership};

const ZONE_LABEL: &str = "topology.kubernetes.io/zone";

/// A pool the controller cannot plan for.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    #[error(
        "MachineConfigPool {pool}: invalid value for IntOrString: invalid type: string is not a percentage: {value:?}"
    )]
    BadMaxUnavailable { pool: String, value: String },
    #[error("MachineConfigPool {pool}: image build failed (MachineOSBuild {build})")]
    BuildFailed { pool: String, build: String },
}

/// What the controller does for a pool in one sync.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Plan {
    /// The pool's node selector is `{}`: nothing is done, not even status (a Warning event
    /// `SelectingAll` says why).
    SelectingAll,
    /// The render controller has not given the pool a config yet: nothing to do.
    NoRenderedConfig,
    /// Only recompute status, with why (the pool is paused or being deleted, or its image is
    /// not built yet, or its rollout policy does not fit it).
    StatusOnly(String),
    Update(Box<Update>),
    /// Too many nodes failed moving to `target` (mco's rollout policy): pause the pool.
    Halt {
        target: Target,
        failed: Vec<String>,
    },
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Update {
    /// What nodes are moved to.
    pub target: Target,
    /// Nodes to set `desiredConfig` (and `desiredImage`, or remove it) on, in order.
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
    /// Master nodes whose role labels or taints must change ([`crate::masters`]), with the
    /// label edits; `masters_schedulable` is the Scheduler's setting.
    pub master_roles: Vec<(String, BTreeMap<String, Option<String>>)>,
    pub masters_schedulable: Option<bool>,
    /// Candidates that booted straight into a custom pool: given that pool's labels (and the
    /// `customPoolLabelsApplied` annotation) instead of a target, so they move to that pool.
    pub custom_pool_labels: Vec<(String, BTreeMap<String, String>)>,
    pub max_unavailable: usize,
    pub unavailable: usize,
    /// What mco's rollout policy holds back this sync (the nodes then waiting are in `waiting`).
    pub hold: Option<Hold>,
    /// For a pool that pre-stages its OS image: the image, who starts pulling it now, and whose
    /// pull failed (those wait).
    pub prestage: Option<(String, Prestage)>,
    /// Nodes whose request to pull ahead is withdrawn ([`prestage::withdrawn`]).
    pub prestage_withdrawn: Vec<String>,
}

/// Everything one node gets in one sync, so that it is written in one request.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeChange {
    /// Set `desiredConfig` to this target's config, and `desiredImage` to its image (or remove it).
    pub desired: Option<Target>,
    /// Add (`true`) or remove (`false`) the UpdateInProgress taint.
    pub update_taint: Option<bool>,
    /// Set `controlPlaneTopology` to this.
    pub topology: Option<String>,
    /// Set (`Some`) or remove (`None`) these labels.
    pub labels: BTreeMap<String, Option<String>>,
    /// Make a master node schedulable or not ([`crate::masters::with_schedulability`]).
    pub masters_schedulable: Option<bool>,
    /// Mark the node `customPoolLabelsApplied`.
    pub custom_pool_labels_applied: bool,
    /// Ask the node to pull this OS image ahead (`Some(image)`), or withdraw the request
    /// (`None`) ([`crate::prestage`]).
    pub prestage: Option<Option<String>>,
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
        for (name, labels) in &self.master_roles {
            let change = others.entry(name).or_default();
            change.labels.extend(labels.clone());
            change.masters_schedulable = self.masters_schedulable;
        }
        if let Some((image, prestage)) = &self.prestage {
            for name in &prestage.start {
                others.entry(name).or_default().prestage = Some(Some(image.clone()));
            }
        }
        for name in &self.prestage_withdrawn {
            others.entry(name).or_default().prestage = Some(None);
        }
        for (name, labels) in &self.custom_pool_labels {
            let change = others.entry(name).or_default();
            change.labels.extend(labels.iter().map(|(k, v)| (k.clone(), Some(v.clone()))));
            change.custom_pool_labels_applied = true;
        }
        let mut changes: Vec<(String, NodeChange)> = self
            .to_target
            .iter()
            .map(|name| {
                let change = others.remove(name.as_str()).unwrap_or_default();
                (name.clone(), NodeChange { desired: Some(self.target.clone()), ..change })
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

/// What a plan needs besides the pool and its nodes.
#[derive(Debug, Clone, Copy, Default)]
pub struct Inputs<'a> {
    /// The node running the operator: with several master candidates it goes last.
    pub operator_node: Option<&'a str>,
    /// The ControllerConfig's control plane topology, copied onto every node.
    pub topology: Option<&'a str>,
    /// For a layered pool (one with a MachineOSConfig): its image build.
    pub layered: Option<&'a Layered>,
    /// `mastersSchedulable` of the Scheduler `cluster`, if there is one.
    pub masters_schedulable: Option<bool>,
    /// For nodes that booted straight into a custom pool (a `firstPivotConfig` rendered by a
    /// custom pool, no `customPoolLabelsApplied` yet): that pool, by rendered config name.
    pub first_config_pools: Option<&'a BTreeMap<String, &'a MachineConfigPool>>,
    /// The master pool of an HA arbiter topology while an arbiter node is unavailable: no
    /// capacity ([`crate::arbiter`]).
    pub arbiter_unavailable: bool,
    /// The time mco's rollout policy ([`crate::policy`]) is judged at.
    pub now: Timestamp,
    /// The OS image (by digest) nodes deploy for the pool's target: what pre-staging pulls.
    pub os_image: Option<&'a str>,
}

/// What a pool's nodes move to: its rendered config, and for a layered pool the built image.
pub fn pool_target(pool: &MachineConfigPool, layered: Option<&Layered>) -> Target {
    let config = pool.spec.configuration.as_ref().and_then(|c| c.name.clone()).unwrap_or_default();
    Target { config, image: layered.map(|l| l.image.clone()) }
}

/// Plans one sync of a pool over the nodes it owns (see [`crate::nodes_for_pool`]).
pub fn plan(pool: &MachineConfigPool, nodes: &[&Node], inputs: &Inputs) -> Result<Plan, PlanError> {
    let target = pool_target(pool, inputs.layered);
    if target.config.is_empty() {
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
        return Ok(Plan::StatusOnly("the pool is being deleted".into()));
    }
    if pool.spec.paused == Some(true) {
        return Ok(Plan::StatusOnly("the pool is paused".into()));
    }
    if let Some(build) = inputs.layered.map(|l| &l.build) {
        if let BuildState::Failed { build } = build {
            let pool = pool.metadata.name.clone().unwrap_or_default();
            return Err(PlanError::BuildFailed { pool, build: build.clone() });
        }
        if let Some(why) = build.waiting() {
            return Ok(Plan::StatusOnly(why));
        }
    }
    let hold = match RolloutPolicy::from_pool(pool) {
        Ok(Some(policy)) => match policy::hold(pool, &policy, nodes, &target, inputs.now) {
            Some(Hold::Halt(failed)) => return Ok(Plan::Halt { target, failed }),
            hold => hold,
        },
        Ok(None) => None,
        // A bad policy holds every node that has not started (it still gets its taint and labels).
        Err(e) => Some(Hold::Invalid(e.to_string())),
    };
    let (hold, prestage) = match prestage::concurrency(pool) {
        Ok(concurrency) => (hold, concurrency.zip(inputs.os_image)),
        Err(e) => (hold.or(Some(Hold::Invalid(e))), None),
    };
    let planned =
        prestage.map(|(concurrency, image)| (image.to_string(), prestage::plan(image, nodes, &target, concurrency)));
    let max = max_unavailable(pool, nodes.len())?;
    let mut update = Update { target, max_unavailable: max, hold, prestage: planned, ..Update::default() };
    choose_targets(pool, nodes, inputs, &mut update);
    // Nodes moving to the target now pull in their update: the others pull ahead.
    if let (Some((concurrency, image)), Some((_, planned))) = (prestage, &mut update.prestage) {
        let staying: Vec<&Node> =
            nodes.iter().copied().filter(|n| !update.to_target.iter().any(|t| t == node::name(n))).collect();
        planned.start = prestage::plan(image, &staying, &update.target, concurrency).start;
    }
    let asked_now = update.prestage.as_ref().map(|(_, p)| p.start.clone()).unwrap_or_default();
    let image = update.prestage.as_ref().map(|(image, _)| image.as_str());
    update.prestage_withdrawn = prestage::withdrawn(nodes, &update.target, image, &asked_now);
    mark_nodes(nodes, inputs.topology.filter(|t| !t.is_empty()), &mut update);
    if pool.metadata.name.as_deref() == Some(MASTER_POOL) {
        mark_master_roles(nodes, inputs.masters_schedulable, &mut update);
    }
    Ok(Plan::Update(Box::new(update)))
}

/// Fills in which nodes move now (`to_target`) and which candidates wait.
fn choose_targets(pool: &MachineConfigPool, nodes: &[&Node], inputs: &Inputs, update: &mut Update) {
    let (target, max) = (&update.target, update.max_unavailable);
    let unavailable = nodes.iter().filter(|n| node::unavailable_for_update(n)).count();
    update.unavailable = unavailable;
    // A node that failed moving to a config the pool no longer targets (the admin reverted or
    // replaced the change) and is unavailable already (cordoned by its drain) goes to the target
    // without taking a slot: it holds one already, and would hold it forever. Upstream leaves it
    // stuck until someone edits its desiredConfig.
    let stranded = |n: &Node| node::is_candidate(n, target) && node::mcd_failing(n) && node::unavailable_for_update(n);
    update.to_target = nodes.iter().filter(|n| stranded(n)).map(|n| node::name(n).to_string()).collect();
    if unavailable >= max || inputs.arbiter_unavailable {
        update.waiting = nodes
            .iter()
            .filter(|n| node::is_candidate(n, target) && !stranded(n))
            .map(|n| node::name(n).to_string())
            .collect();
        return;
    }
    let mut capacity = max - unavailable;
    let mut failing = 0;
    let mut candidates: Vec<&Node> = Vec::new();
    let pull_failed = |n: &Node| {
        update.prestage.as_ref().is_some_and(|(_, p)| p.failed.iter().any(|(name, _)| name == node::name(n)))
    };
    for n in nodes.iter().filter(|n| !stranded(n)) {
        if !node::is_candidate(n, target) {
            if node::mcd_failing(n) {
                failing += 1;
            }
        } else if node::is_ready(n) && !pull_failed(n) {
            candidates.push(n);
        } else {
            update.waiting.push(node::name(n).to_string());
        }
    }
    // Nodes that failed moving to this config still hold a slot: retrying elsewhere would spread
    // a bad config.
    if failing >= capacity {
        update.waiting.extend(candidates.iter().map(|n| node::name(n).to_string()));
        return;
    }
    capacity -= failing;
    // mco's rollout policy: only the canaries, or nobody for now.
    match &update.hold {
        Some(Hold::Canaries(canaries)) => {
            let (allowed, held): (Vec<&Node>, Vec<&Node>) =
                candidates.into_iter().partition(|n| canaries.contains(node::name(n)));
            update.waiting.extend(held.iter().map(|n| node::name(n).to_string()));
            candidates = allowed;
        }
        Some(_) => {
            update.waiting.extend(candidates.drain(..).map(|n| node::name(n).to_string()));
        }
        None => {}
    }
    let operator_candidate = candidates.iter().position(|n| Some(node::name(n)) == inputs.operator_node);
    if let Some(pos) =
        operator_candidate.filter(|_| pool.metadata.name.as_deref() == Some(MASTER_POOL) && candidates.len() > 1)
    {
        let operator = node::name(candidates.remove(pos)).to_string();
        update.waiting.push(operator.clone());
        update.deferred_operator_node = Some(operator);
    }
    if let Some(first_config_pools) = inputs.first_config_pools {
        candidates.retain(|n| match booted_into_custom_pool(n, first_config_pools) {
            Some(custom) => {
                update.custom_pool_labels.push((node::name(n).to_string(), membership::selector_labels(custom)));
                false
            }
            None => true,
        });
    }
    if capacity < candidates.len() {
        // Nodes that pulled the image ahead go first: their slot is the shortest.
        let pulled = |n: &Node| {
            update
                .prestage
                .as_ref()
                .is_some_and(|(image, _)| annotation(n, prestage::PRESTAGED_ANNOTATION) == Some(image))
        };
        candidates.sort_by_key(|n| (!pulled(n), zone_order(n)));
        update.waiting.extend(candidates.split_off(capacity).iter().map(|n| node::name(n).to_string()));
    }
    update.to_target.extend(candidates.iter().map(|n| node::name(n).to_string()));
}

/// The custom pool a node booted straight into and still lacks the labels of: its
/// `firstPivotConfig` was rendered for a custom pool and it has no `customPoolLabelsApplied`.
fn booted_into_custom_pool<'a>(
    n: &Node,
    pools: &BTreeMap<String, &'a MachineConfigPool>,
) -> Option<&'a MachineConfigPool> {
    if annotation(n, CUSTOM_POOL_LABELS_APPLIED_ANNOTATION).is_some() {
        return None;
    }
    let pool = *pools.get(annotation(n, FIRST_PIVOT_CONFIG_ANNOTATION)?)?;
    membership::is_custom(pool.metadata.name.as_deref().unwrap_or_default()).then_some(pool)
}

/// The UpdateInProgress taint and the topology annotation of every node, for the state this sync
/// leaves: a node targeted now is on the target. (Upstream taints it first and untaints it on
/// its next sync; the end state is the same, with one write less.)
fn mark_nodes(nodes: &[&Node], topology: Option<&str>, update: &mut Update) {
    let targeted: HashSet<&str> = update.to_target.iter().map(String::as_str).collect();
    let (mut add, mut remove, mut set_topology) = (Vec::new(), Vec::new(), Vec::new());
    for n in nodes {
        let name = node::name(n);
        if topology.is_some_and(|t| annotation(n, CONTROL_PLANE_TOPOLOGY_ANNOTATION) != Some(t)) {
            set_topology.push(name.to_string());
        }
        let on_target = targeted.contains(name) || node::is_taint_free(n, &update.target);
        if on_target == has_update_taint(n) {
            let list = if on_target { &mut remove } else { &mut add };
            list.push(name.to_string());
        }
    }
    (update.add_taint, update.remove_taint, update.set_topology) = (add, remove, set_topology);
    update.topology = topology.map(str::to_string);
}

/// Master nodes whose role labels or schedulability taints are not yet as the Scheduler says.
fn mark_master_roles(nodes: &[&Node], schedulable: Option<bool>, update: &mut Update) {
    update.masters_schedulable = schedulable;
    for n in nodes {
        let labels = masters::label_changes(n, schedulable);
        let taints = node_taints(n);
        let retaint = schedulable.is_some_and(|s| masters::with_schedulability(taints.clone(), s) != taints);
        if !labels.is_empty() || retaint {
            update.master_roles.push((node::name(n).to_string(), labels));
        }
    }
}

fn node_taints(n: &Node) -> Vec<Taint> {
    n.spec.as_ref().and_then(|s| s.taints.clone()).unwrap_or_default()
}

fn is_update_taint(t: &Taint) -> bool {
    t.key == UPDATE_IN_PROGRESS_TAINT_KEY && t.effect == UPDATE_IN_PROGRESS_TAINT_EFFECT
}

fn has_update_taint(n: &Node) -> bool {
    n.spec.as_ref().and_then(|s| s.taints.as_deref()).unwrap_or_default().iter().any(is_update_taint)
}

/// A node's taints after `change` (the UpdateInProgress taint added or removed, a master's
/// schedulability), other taints kept in order; `None` when they already are so.
pub fn taints_after(n: &Node, change: &NodeChange) -> Option<Vec<Taint>> {
    let current = node_taints(n);
    let mut taints = current.clone();
    if let Some(on) = change.update_taint.filter(|on| has_update_taint(n) != *on) {
        taints.retain(|t| !is_update_taint(t));
        if on {
            taints.push(Taint {
                key: UPDATE_IN_PROGRESS_TAINT_KEY.to_string(),
                effect: UPDATE_IN_PROGRESS_TAINT_EFFECT.to_string(),
                ..Taint::default()
            });
        }
    }
    if let Some(schedulable) = change.masters_schedulable {
        taints = masters::with_schedulability(taints, schedulable);
    }
    (taints != current).then_some(taints)
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
        match plan(pool, &refs, &Inputs { operator_node: operator, ..Inputs::default() }).unwrap() {
            Plan::Update(u) => *u,
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
            (
                "a node stranded on a config no longer targeted goes to the target without a slot",
                json!(1),
                vec![("a", "old", "reverted", "Degraded", false), old("b"), old("c")],
                &["a"],
            ),
            (
                "the free slots still go to the others",
                json!(2),
                vec![old("b"), ("a", "old", "reverted", "Unreconcilable", false), old("c")],
                &["a", "b"],
            ),
            (
                "a stranded node that is available takes a slot as any candidate",
                json!(1),
                vec![("a", "old", "reverted", "Degraded", true), old("b")],
                &["a"],
            ),
            (
                "a node failing the target itself stays",
                json!(1),
                vec![("a", "old", "new", "Degraded", false), old("b")],
                &[],
            ),
        ];
        for (what, max, specs, want) in cases {
            let got = update(&pool("worker", max.clone(), false), specs, None);
            assert_eq!(got.to_target, *want, "{what}: {got:?}");
            // Only nodes that were available add to the unavailable ones.
            let newly = got.to_target.iter().filter(|n| {
                let (name, current, desired, state, ready) = specs.iter().find(|s| s.0 == n.as_str()).unwrap();
                !node::unavailable_for_update(&node(name, current, desired, state, *ready))
            });
            assert!(newly.count() + got.unavailable <= got.max_unavailable.max(got.unavailable), "{what}");
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
        let Plan::Update(u) = plan(&pool("worker", json!(3), false), &refs, &Inputs::default()).unwrap() else {
            panic!()
        };
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
    fn a_rollout_policy_holds_candidates_but_not_upkeep() {
        let specs = [
            ("a", "old", "old", "Done", true),
            ("b", "old", "old", "Done", true),
            ("c", "old", "old", "Done", true),
            // Stranded on a config the pool no longer targets: moved back whatever holds the rest.
            ("d", "old", "gone", "Degraded", false),
        ];
        let mut canary = pool("worker", json!(3), false);
        canary.metadata.annotations = Some([("mco.dev/canary".to_string(), "1".to_string())].into());
        let u = update(&canary, &specs, None);
        assert_eq!(u.to_target, ["d", "a"]);
        assert_eq!(u.waiting, ["b", "c"]);
        assert_eq!(u.hold, Some(Hold::Canaries(["a".to_string()].into())));
        // The operator's node as the only canary of the master pool is not deferred for good.
        let mut master = pool("master", json!(1), false);
        master.metadata.annotations = canary.metadata.annotations.clone();
        assert_eq!(update(&master, &specs[..3], Some("a")).to_target, ["a"]);
        // A bad policy holds every candidate, and the waiting nodes still get their taint.
        let mut bad = pool("worker", json!(3), false);
        bad.metadata.annotations = Some([("mco.dev/canary".to_string(), "many".to_string())].into());
        let u = update(&bad, &specs[..3], None);
        assert!(u.to_target.is_empty(), "{u:?}");
        assert_eq!(u.add_taint, ["a", "b", "c"]);
        assert_eq!(u.hold.map(|h| h.reason()), Some("InvalidPolicy"));
    }

    #[test]
    fn prestaging_pulls_ahead_and_keeps_failed_pulls_from_their_slot() {
        const IMAGE: &str = "reg/os@sha256:1111111111111111111111111111111111111111111111111111111111111111";
        let mut nodes: Vec<Node> = ["a", "b", "c", "d"].iter().map(|n| node(n, "old", "old", "Done", true)).collect();
        // a could not pull the image: it keeps its slot free and waits.
        nodes[0].metadata.annotations.as_mut().unwrap().extend([
            (prestage::PRESTAGE_ANNOTATION.to_string(), IMAGE.to_string()),
            (prestage::PRESTAGE_ERROR_ANNOTATION.to_string(), format!("{IMAGE}: manifest unknown")),
        ]);
        let refs: Vec<&Node> = nodes.iter().collect();
        let mut prestaging = pool("worker", json!(1), false);
        prestaging.metadata.annotations =
            Some([(prestage::PRESTAGE_CONCURRENCY_ANNOTATION.to_string(), "3".to_string())].into());
        let inputs = Inputs { os_image: Some(IMAGE), ..Inputs::default() };
        let Ok(Plan::Update(u)) = plan(&prestaging, &refs, &inputs) else { panic!() };
        assert_eq!(u.to_target, ["b"]);
        assert_eq!(u.waiting, ["a", "c", "d"]);
        // b moves now and pulls in its update; c and d pull ahead (three at once, a's failed pull
        // holding one place).
        let (image, prestage) = u.prestage.clone().unwrap();
        assert_eq!((image.as_str(), prestage.start.as_slice()), (IMAGE, ["c".to_string(), "d".to_string()].as_slice()));
        assert_eq!(prestage.failed, [("a".to_string(), "manifest unknown".to_string())]);
        let changes = u.node_changes();
        assert_eq!((changes[0].0.as_str(), &changes[0].1.prestage), ("b", &None));
        let asked: Vec<(&str, String)> =
            changes.iter().filter_map(|(n, change)| Some((n.as_str(), change.prestage.clone()??))).collect();
        assert_eq!(
            asked,
            [("c", IMAGE.to_string()), ("d", IMAGE.to_string())],
            "written with the node's other changes"
        );
        // Without the image (unknown yet) or the annotation, nothing is pulled ahead, and the
        // requests made are withdrawn.
        let Ok(Plan::Update(u)) = plan(&prestaging, &refs, &Inputs::default()) else { panic!() };
        assert_eq!((u.prestage, u.to_target), (None, vec!["a".to_string()]));
        assert_eq!(u.prestage_withdrawn, ["a"]);
        // A bad value holds the pool like a bad rollout policy.
        prestaging.metadata.annotations =
            Some([(prestage::PRESTAGE_CONCURRENCY_ANNOTATION.to_string(), "0".to_string())].into());
        let Ok(Plan::Update(u)) = plan(&prestaging, &refs, &inputs) else { panic!() };
        assert!(u.to_target.is_empty(), "{u:?}");
        assert_eq!(u.hold.map(|h| h.reason()), Some("InvalidPolicy"));
        // A node that pulled ahead takes the next slot before the others.
        prestaging.metadata.annotations =
            Some([(prestage::PRESTAGE_CONCURRENCY_ANNOTATION.to_string(), "3".to_string())].into());
        nodes[3].metadata.annotations.as_mut().unwrap().insert(prestage::PRESTAGED_ANNOTATION.into(), IMAGE.into());
        let refs: Vec<&Node> = nodes.iter().collect();
        let Ok(Plan::Update(u)) = plan(&prestaging, &refs, &inputs) else { panic!() };
        assert_eq!(u.to_target, ["d"]);
    }

    #[test]
    fn nodes_of_a_plain_pool_move_to_a_tag_resolved_again_one_slot_at_a_time() {
        use mco_api::constants::{
            CURRENT_IMAGE_ANNOTATION, DESIRED_IMAGE_ANNOTATION, RESOLVED_OS_IMAGE_ANNOTATION, STATE_ANNOTATION,
        };
        const IMAGE: &str = "reg/os@sha256:2222222222222222222222222222222222222222222222222222222222222222";
        // All on the target config; b already moved to the image resolved again.
        let mut nodes: Vec<Node> = ["a", "b", "c"].iter().map(|n| node(n, "new", "new", "Done", true)).collect();
        for key in [DESIRED_IMAGE_ANNOTATION, CURRENT_IMAGE_ANNOTATION] {
            nodes[1].metadata.annotations.as_mut().unwrap().insert(key.into(), IMAGE.into());
        }
        let refs: Vec<&Node> = nodes.iter().collect();
        let mut plain = pool("worker", json!(1), false);
        let record = mco_api::machineconfiguration::resolved_os_image_record("new", IMAGE);
        plain.metadata.annotations = Some([(RESOLVED_OS_IMAGE_ANNOTATION.to_string(), record)].into());
        let resolved = crate::layering::resolved(&plain).unwrap();
        let inputs = Inputs { layered: Some(&resolved), ..Inputs::default() };
        let Ok(Plan::Update(u)) = plan(&plain, &refs, &inputs) else { panic!() };
        assert_eq!(u.target, Target { config: "new".into(), image: Some(IMAGE.into()) });
        assert_eq!(u.to_target, ["a"], "one node at a time, b being done");
        assert_eq!(u.waiting, ["c"]);
        // Without the record (a new rendered config, or the tag back on the config's own pin)
        // the nodes leave the image.
        plain.metadata.annotations = None;
        assert!(crate::layering::resolved(&plain).is_none());
        let Ok(Plan::Update(u)) = plan(&plain, &refs, &Inputs::default()) else { panic!() };
        assert_eq!(u.to_target, ["b"]);
        // A node that failed on the image (cordoned by its drain) while the record went away is
        // stranded: moved back at once, without waiting for a slot.
        let failed = nodes[1].metadata.annotations.as_mut().unwrap();
        failed.remove(CURRENT_IMAGE_ANNOTATION);
        failed.insert(STATE_ANNOTATION.into(), "Degraded".into());
        nodes[1].spec = Some(k8s_openapi::api::core::v1::NodeSpec { unschedulable: Some(true), ..Default::default() });
        assert!(node::mcd_failing(&nodes[1]));
        let refs: Vec<&Node> = nodes.iter().collect();
        let mut busy = plain.clone();
        busy.spec.max_unavailable = Some(IntOrString::Int(1));
        let Ok(Plan::Update(u)) = plan(&busy, &refs, &Inputs::default()) else { panic!() };
        assert_eq!(u.to_target, ["b"], "{u:?}");
    }

    #[test]
    fn pools_that_do_not_move() {
        let n = node("a", "old", "old", "Done", true);
        assert_eq!(
            plan(&pool("worker", json!(1), true), &[&n], &Inputs::default()).unwrap(),
            Plan::StatusOnly("the pool is paused".into())
        );
        let mut deleted = pool("worker", json!(1), false);
        deleted.metadata.deletion_timestamp = Some(serde_json::from_value(json!("2026-01-01T00:00:00Z")).unwrap());
        assert_eq!(
            plan(&deleted, &[&n], &Inputs::default()).unwrap(),
            Plan::StatusOnly("the pool is being deleted".into())
        );
        let mut unrendered = pool("worker", json!(1), false);
        unrendered.spec.configuration = None;
        assert_eq!(plan(&unrendered, &[&n], &Inputs::default()).unwrap(), Plan::NoRenderedConfig);
        let mut everything = pool("worker", json!(1), false);
        everything.spec.node_selector = Some(Default::default());
        assert_eq!(plan(&everything, &[&n], &Inputs::default()).unwrap(), Plan::SelectingAll);
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
            plan(&pool("worker", json!(1), false), &[&targeted, &waiting, &finished], &Inputs::default()).unwrap()
        else {
            panic!()
        };
        // The taint marks nodes still waiting for the new config, so new pods prefer nodes that
        // already have it (or are getting it now).
        assert_eq!(u.add_taint, ["w"]);
        assert_eq!(u.remove_taint, ["t", "f"]);
        assert!(u.to_target.is_empty(), "the working node uses the only slot");

        // A tainted waiting node chosen now loses the taint in the write that targets it.
        let mut tainted_waiting = waiting.clone();
        tainted_waiting.spec = targeted.spec.clone();
        let Plan::Update(u) =
            plan(&pool("worker", json!(1), false), &[&tainted_waiting, &finished], &Inputs::default()).unwrap()
        else {
            panic!()
        };
        assert_eq!(u.to_target, ["w"]);
        assert_eq!(u.remove_taint, ["w", "f"]);
        assert!(u.add_taint.is_empty());
        assert_eq!(u.node_changes()[0].1.update_taint, Some(false));
    }

    #[test]
    fn one_change_per_node_targeted_first() {
        let mut labelled = node("b", "old", "old", "Done", true);
        labelled.metadata.annotations.as_mut().unwrap().insert(CONTROL_PLANE_TOPOLOGY_ANNOTATION.into(), "HA".into());
        let nodes = [node("c", "new", "new", "Done", true), labelled, node("a", "old", "old", "Done", true)];
        let refs: Vec<&Node> = nodes.iter().collect();
        let Plan::Update(u) =
            plan(&pool("worker", json!(1), false), &refs, &Inputs { topology: Some("HA"), ..Inputs::default() })
                .unwrap()
        else {
            panic!()
        };
        let change = |desired: Option<&str>, taint, topology: Option<&str>| NodeChange {
            desired: desired.map(Target::config),
            update_taint: taint,
            topology: topology.map(str::to_string),
            ..NodeChange::default()
        };
        assert_eq!(
            u.node_changes(),
            [
                // Targeted now: on the target once this sync is written, so not tainted.
                ("b".to_string(), change(Some("new"), None, None)),
                ("a".to_string(), change(None, Some(true), Some("HA"))),
                ("c".to_string(), change(None, None, Some("HA"))),
            ]
        );
        let Plan::Update(no_topology) =
            plan(&pool("worker", json!(1), false), &refs, &Inputs { topology: Some(""), ..Inputs::default() }).unwrap()
        else {
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
        let update_taint = |on| NodeChange { update_taint: Some(on), ..NodeChange::default() };
        for (taints, on, want) in cases {
            assert_eq!(taints_after(&with(taints.clone()), &update_taint(on)), want, "{taints:?} {on}");
        }
        assert_eq!(taints_after(&node("n", "a", "a", "Done", true), &update_taint(true)), Some(vec![ours.clone()]));
        let unschedulable_master = NodeChange { masters_schedulable: Some(false), ..update_taint(true) };
        let master_taint = taint(masters::MASTER_LABEL, "NoSchedule");
        assert_eq!(
            taints_after(&with(vec![other.clone()]), &unschedulable_master),
            Some(vec![other, ours, master_taint]),
            "both rules in one edit"
        );
    }

    #[test]
    fn nodes_that_booted_into_a_custom_pool_get_its_labels() {
        let infra: MachineConfigPool = serde_json::from_value(json!({
            "metadata": {"name": "infra"},
            "spec": {"nodeSelector": {"matchLabels": {"node-role.kubernetes.io/infra": ""}}},
        }))
        .unwrap();
        let worker_pool = pool("worker", json!(2), false);
        let first_configs: BTreeMap<String, &MachineConfigPool> =
            [("rendered-infra-1".to_string(), &infra), ("rendered-worker-0".to_string(), &worker_pool)].into();
        let booted = |name: &str, first: &str, applied: bool| {
            let mut n = node(name, "old", "old", "Done", true);
            let annotations = n.metadata.annotations.as_mut().unwrap();
            annotations.insert(FIRST_PIVOT_CONFIG_ANNOTATION.into(), first.into());
            if applied {
                annotations.insert(CUSTOM_POOL_LABELS_APPLIED_ANNOTATION.into(), String::new());
            }
            n
        };
        let nodes = [
            booted("a", "rendered-infra-1", false),
            booted("b", "rendered-infra-1", true),
            booted("c", "rendered-worker-0", false),
            booted("d", "rendered-unknown", false),
        ];
        let refs: Vec<&Node> = nodes.iter().collect();
        let inputs = Inputs { first_config_pools: Some(&first_configs), ..Inputs::default() };
        let Plan::Update(u) = plan(&pool("worker", json!(2), false), &refs, &inputs).unwrap() else { panic!() };
        let infra_labels: BTreeMap<String, String> =
            [("node-role.kubernetes.io/infra".to_string(), String::new())].into();
        assert_eq!(u.custom_pool_labels, [("a".to_string(), infra_labels)]);
        assert_eq!(u.to_target, ["b", "c"], "a leaves this pool instead; the capacity is not used up");
        let change = u.node_changes().into_iter().find(|(n, _)| n == "a").unwrap().1;
        assert!(change.custom_pool_labels_applied && change.desired.is_none());
        assert_eq!(change.labels, [("node-role.kubernetes.io/infra".to_string(), Some(String::new()))].into());
    }

    #[test]
    fn an_unavailable_arbiter_holds_the_masters() {
        let nodes = [node("m1", "old", "old", "Done", true), node("m2", "old", "old", "Done", true)];
        let refs: Vec<&Node> = nodes.iter().collect();
        let inputs = Inputs { arbiter_unavailable: true, ..Inputs::default() };
        let Plan::Update(u) = plan(&pool("master", json!(1), false), &refs, &inputs).unwrap() else { panic!() };
        assert!(u.to_target.is_empty());
        assert_eq!(u.waiting, ["m1", "m2"]);
        assert_eq!(u.add_taint, ["m1", "m2"], "the taints are still kept");
    }

    #[test]
    fn master_roles_follow_the_scheduler() {
        let mut master = node("m", "a", "a", "Done", true);
        master.metadata.labels = Some([(masters::MASTER_LABEL.to_string(), String::new())].into());
        let mut pool = pool("master", json!(1), false);
        pool.spec.configuration.as_mut().unwrap().name = Some("a".into());
        let roles = |schedulable| {
            let inputs = Inputs { masters_schedulable: schedulable, ..Inputs::default() };
            let Plan::Update(u) = plan(&pool, &[&master], &inputs).unwrap() else { panic!() };
            u.node_changes().into_iter().map(|(_, c)| (c.labels, c.masters_schedulable)).collect::<Vec<_>>()
        };
        let control_plane = (masters::CONTROL_PLANE_LABEL.to_string(), Some(String::new()));
        let worker = (masters::WORKER_LABEL.to_string(), Some(String::new()));
        assert_eq!(roles(None), [([control_plane.clone()].into(), None)]);
        assert_eq!(roles(Some(true)), [([control_plane.clone(), worker].into(), Some(true))]);
        assert_eq!(roles(Some(false)), [([control_plane].into(), Some(false))], "the NoSchedule taint to add");
        let Plan::Update(workers) =
            plan(&self::pool("worker", json!(1), false), &[&master], &Inputs::default()).unwrap()
        else {
            panic!()
        };
        assert!(workers.master_roles.is_empty(), "only the master pool's nodes");
    }
}
