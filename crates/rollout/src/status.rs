//! A pool's status from its nodes (`calculateStatus`): counts, the Updated/Updating/NodeDegraded/
//! Degraded conditions (for a layered pool also its build's phase in Updating and the clearing of
//! ImageBuildDegraded), and `status.configuration` once every node runs the target.

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use mco_api::MachineConfigNode;
use mco_api::MachineConfigPool;
use mco_api::constants::{REASON_ANNOTATION, STATE_ANNOTATION, STATE_DEGRADED, STATE_UNRECONCILABLE};
use mco_api::machineconfiguration::pool_condition::{
    DEGRADED, IMAGE_BUILD_DEGRADED, NODE_DEGRADED, PINNED_IMAGE_SETS_DEGRADED, RENDER_DEGRADED, UPDATED, UPDATING,
};
use mco_api::machineconfiguration::{MachineConfigPoolCondition, MachineConfigPoolStatus, PoolSynchronizerStatus};

use crate::conditions;
use crate::layering::{BuildState, Layered};
use crate::node::{self, annotation};
use crate::plan::pool_target;
use crate::policy::{self, ROLLOUT_HELD};
use crate::prestage;

/// The status a pool should have (`layered`: its image build, for a layered pool); `now` stamps
/// conditions whose status changes. Conditions set by others (RenderDegraded) are kept. Equal to
/// the pool's status when nothing changed, so the caller writes only a status that differs.
pub fn calculate_status(
    pool: &MachineConfigPool,
    nodes: &[&Node],
    layered: Option<&Layered>,
    now: &Time,
) -> MachineConfigPoolStatus {
    let old = pool.status.clone().unwrap_or_default();
    let full_target = pool_target(pool, layered);
    let target = &full_target.config;
    let total = nodes.len();
    let updated = nodes.iter().filter(|n| node::is_done(n, &full_target)).count();
    let ready = nodes.iter().filter(|n| node::is_done(n, &full_target) && node::is_ready(n)).count();
    let unavailable = nodes.iter().filter(|n| node::unavailable_for_update(n)).count();
    let degraded: Vec<&&Node> = nodes
        .iter()
        .filter(|n| matches!(annotation(n, STATE_ANNOTATION), Some(STATE_DEGRADED | STATE_UNRECONCILABLE)))
        .collect();

    let mut status = MachineConfigPoolStatus {
        observed_generation: pool.metadata.generation,
        machine_count: Some(total as i32),
        updated_machine_count: Some(updated as i32),
        ready_machine_count: Some(ready as i32),
        unavailable_machine_count: Some(unavailable as i32),
        degraded_machine_count: Some(degraded.len() as i32),
        ..old
    };
    let mut conditions = status.conditions.take().unwrap_or_default();
    let was_true = |kind: &str| conditions::get(&conditions, kind).is_some_and(|c| c.status == "True");
    let degraded_before = was_true(RENDER_DEGRADED) || was_true(NODE_DEGRADED) || was_true(PINNED_IMAGE_SETS_DEGRADED);
    let build_degraded_before = was_true(IMAGE_BUILD_DEGRADED);
    let render_degraded_message = conditions::get(&conditions, RENDER_DEGRADED)
        .filter(|c| c.status == "True")
        .map(|c| c.message.clone().unwrap_or_default());
    let mut set = |kind: &str, on: bool, reason: &str, message: &str| {
        conditions::set_in(&mut conditions, conditions::condition(kind, on, reason, message, now));
    };
    let line = update_line(target, layered);
    let paused = pool.spec.paused == Some(true);
    let building = layered.is_some_and(|l| l.build.holds_the_pool());
    let all_updated = updated == total && ready == total && unavailable == 0 && !building;
    if all_updated {
        set(UPDATED, true, "", &format!("All nodes are updated with {line}"));
        set(UPDATING, false, "", "");
        status.configuration = pool.spec.configuration.clone();
    } else {
        set(UPDATED, false, "", "");
        if paused {
            set(UPDATING, false, "", &format!("Pool is paused; will not update to {line}"));
        } else {
            set(UPDATING, true, "", &format!("All nodes are updating to {line}"));
        }
    }
    if let Some(layered) = layered.filter(|_| !paused)
        && let Some((on, message)) = build_phase_updating(&layered.build, degraded_before)
    {
        set(UPDATING, on, "", &message);
    }
    let node_message = degraded
        .iter()
        .map(|n| {
            format!("Node {} is reporting: {:?}", node::name(n), annotation(n, REASON_ANNOTATION).unwrap_or_default())
        })
        .collect::<Vec<_>>()
        .join(", ");
    if degraded.is_empty() {
        set(NODE_DEGRADED, false, "", "");
    } else {
        let reason = format!("{} nodes are reporting degraded status on sync", degraded.len());
        set(NODE_DEGRADED, true, &reason, &node_message);
    }
    let cleared = build_degraded_cleared(layered.map(|l| &l.build), build_degraded_before);
    if let Some((reason, message)) = cleared {
        set(IMAGE_BUILD_DEGRADED, false, reason, message);
    }
    let build_degraded = build_degraded_before && cleared.is_none();
    let degraded_message = if !degraded.is_empty() {
        Some(node_message)
    } else {
        render_degraded_message.or_else(|| build_degraded.then(|| "Custom OS image build failed".to_string()))
    };
    match degraded_message {
        Some(message) => set(DEGRADED, true, "", &message),
        None => set(DEGRADED, false, "", ""),
    }
    let had_prestage = conditions::get(&conditions, prestage::PRESTAGE_FAILED).is_some();
    if let Some((failed, message)) = prestage::condition(pool, nodes, &full_target, had_prestage) {
        let reason = if failed { "PullFailed" } else { "" };
        conditions::set_in(
            &mut conditions,
            conditions::condition(prestage::PRESTAGE_FAILED, failed, reason, &message, now),
        );
    }
    let had_hold = conditions::get(&conditions, ROLLOUT_HELD).is_some();
    if let Some((held, reason, message)) = policy::condition(pool, nodes, &full_target, now.0, had_hold) {
        conditions::set_in(&mut conditions, conditions::condition(ROLLOUT_HELD, held, reason, &message, now));
    }
    status.conditions = Some(conditions);
    status
}

/// The synchronizer type of PinnedImageSets, the only one.
pub const PINNED_IMAGE_SETS_SYNCHRONIZER: &str = "PinnedImageSets";

/// `status.poolSynchronizersStatus` (upstream's `calculateStatus`): a node has its PinnedImageSets
/// when its MachineConfigNode has pulled and pinned every set it lists at the set's desired
/// generation (a node listing none has them all); ready and unavailable are the pool's counts.
/// Upstream stops counting at the first MachineConfigNode without conditions; each one counts here.
pub fn pool_synchronizers(
    nodes: &[&Node],
    machine_config_nodes: &[&MachineConfigNode],
    status: &MachineConfigPoolStatus,
) -> Vec<PoolSynchronizerStatus> {
    let has_its_sets = |mcn: &&&MachineConfigNode| {
        let status = mcn.status.as_ref();
        let sets = status.and_then(|s| s.pinned_image_sets.as_deref()).unwrap_or_default();
        status.is_some_and(|s| s.conditions.as_ref().is_some_and(|c| !c.is_empty()))
            && sets.iter().all(|set| set.desired_generation.is_some_and(|d| d > 0 && set.current_generation == Some(d)))
    };
    let members: Vec<&&MachineConfigNode> =
        machine_config_nodes.iter().filter(|mcn| nodes.iter().any(|n| n.metadata.name == mcn.metadata.name)).collect();
    let machines = nodes.len() as i64;
    let unavailable = i64::from(status.unavailable_machine_count.unwrap_or_default());
    vec![PoolSynchronizerStatus {
        pool_synchronizer_type: PINNED_IMAGE_SETS_SYNCHRONIZER.to_string(),
        machine_count: machines,
        updated_machine_count: members.into_iter().filter(has_its_sets).count() as i64,
        ready_machine_count: i64::from(status.ready_machine_count.unwrap_or_default()),
        unavailable_machine_count: unavailable,
        available_machine_count: machines - unavailable,
        observed_generation: None,
    }]
}

/// `MachineConfig <target>`, with ` / Image <image>` for a layered pool that has a current image.
fn update_line(target: &str, layered: Option<&Layered>) -> String {
    match layered.map(|l| l.image.as_str()).filter(|image| !image.is_empty()) {
        Some(image) => format!("MachineConfig {target} / Image {image}"),
        None => format!("MachineConfig {target}"),
    }
}

/// What a layered pool's build phase says in `Updating` over the nodes' view (not for paused
/// pools): `(status, message)`, or `None` to leave it. A pool degraded otherwise (`degraded`:
/// RenderDegraded, NodeDegraded or PinnedImageSetsDegraded was True) is not updating.
fn build_phase_updating(build: &BuildState, degraded: bool) -> Option<(bool, String)> {
    if degraded {
        return Some((false, "Pool update paused due to degraded condition".to_string()));
    }
    match build {
        BuildState::NotStarted { config } => {
            Some((true, format!("Pool is waiting for a new OS image build to start (mosc: {config})")))
        }
        BuildState::Running { build } => {
            Some((true, format!("Pool is waiting for OS image build to complete (mosb: {build})")))
        }
        BuildState::Failed { build } => {
            Some((false, format!("Pool update stopped due to OS image build failure (mosb: {build})")))
        }
        BuildState::Stalled { .. } | BuildState::Unpublished { .. } | BuildState::Ready | BuildState::Resolved => None,
    }
}

/// `ImageBuildDegraded=False` with (reason, message) when the build phase clears it, or `None`
/// to leave it (the build's failure sets it True, elsewhere). `was_degraded`: it was True.
fn build_degraded_cleared(build: Option<&BuildState>, was_degraded: bool) -> Option<(&'static str, &'static str)> {
    match build {
        Some(BuildState::Running { .. }) => Some(("Building", "New build started")),
        Some(BuildState::Ready | BuildState::Unpublished { .. }) => {
            Some(("BuildSuccess", "Build completed successfully"))
        }
        Some(BuildState::NotStarted { .. }) if was_degraded => {
            Some(("BuildPending", "MachineOSConfig updated/created, waiting for MachineOSBuild"))
        }
        // A plain pool on a tag resolved again has no layering objects either.
        None | Some(BuildState::Resolved) if was_degraded => {
            Some(("NoLayeredObjects", "No layered pool objects found, clearing stale build degraded condition"))
        }
        _ => None,
    }
}

/// The last condition of `kind`, if present.
pub fn condition_of<'a>(status: &'a MachineConfigPoolStatus, kind: &str) -> Option<&'a MachineConfigPoolCondition> {
    conditions::get(status.conditions.as_deref()?, kind)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::node::tests::node;

    fn pool(paused: bool) -> MachineConfigPool {
        serde_json::from_value(json!({
            "metadata": {"name": "worker", "generation": 7},
            "spec": {"paused": paused, "configuration": {"name": "new", "source": [{"kind": "MachineConfig", "name": "00-worker"}]}},
            "status": {"configuration": {"name": "old"}, "conditions": [
                {"type": "RenderDegraded", "status": "False", "lastTransitionTime": "2026-01-01T00:00:00Z"},
                {"type": "Updated", "status": "False", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}
        }))
        .unwrap()
    }

    fn now() -> Time {
        serde_json::from_value(json!("2026-11-21T12:00:00Z")).unwrap()
    }

    fn counts(s: &MachineConfigPoolStatus) -> [i32; 5] {
        [
            s.machine_count,
            s.updated_machine_count,
            s.ready_machine_count,
            s.unavailable_machine_count,
            s.degraded_machine_count,
        ]
        .map(Option::unwrap)
    }

    fn cond(s: &MachineConfigPoolStatus, kind: &str) -> (String, String) {
        let c = condition_of(s, kind).unwrap();
        (c.status.clone(), c.message.clone().unwrap_or_default())
    }

    #[test]
    fn rolling_out() {
        let nodes = [
            node("a", "new", "new", "Done", true),
            node("b", "old", "new", "Working", true),
            node("c", "old", "old", "Done", true),
        ];
        let refs: Vec<&Node> = nodes.iter().collect();
        let s = calculate_status(&pool(false), &refs, None, &now());
        assert_eq!(counts(&s), [3, 1, 1, 1, 0]);
        assert_eq!(cond(&s, UPDATING), ("True".into(), "All nodes are updating to MachineConfig new".into()));
        assert_eq!(cond(&s, UPDATED).0, "False");
        assert_eq!(
            condition_of(&s, UPDATED).unwrap().last_transition_time,
            pool(false).status.unwrap().conditions.unwrap()[1].last_transition_time,
            "unchanged status keeps its time"
        );
        assert_eq!(
            s.configuration.unwrap().name.as_deref(),
            Some("old"),
            "status.configuration moves only when all are updated"
        );
        assert_eq!(s.observed_generation, Some(7));
        let paused = calculate_status(&pool(true), &refs, None, &now());
        assert_eq!(
            cond(&paused, UPDATING),
            ("False".into(), "Pool is paused; will not update to MachineConfig new".into())
        );
    }

    #[test]
    fn all_updated() {
        let nodes = [node("a", "new", "new", "Done", true), node("b", "new", "new", "Done", true)];
        let refs: Vec<&Node> = nodes.iter().collect();
        let s = calculate_status(&pool(false), &refs, None, &now());
        assert_eq!(counts(&s), [2, 2, 2, 0, 0]);
        assert_eq!(cond(&s, UPDATED), ("True".into(), "All nodes are updated with MachineConfig new".into()));
        assert_eq!(condition_of(&s, UPDATED).unwrap().last_transition_time, Some(now()));
        assert_eq!(s.configuration, pool(false).spec.configuration);
        assert_eq!(cond(&s, DEGRADED).0, "False");
    }

    #[test]
    fn degraded_nodes() {
        let mut bad = node("b", "old", "new", "Degraded", true);
        bad.metadata.annotations.as_mut().unwrap().insert(REASON_ANNOTATION.into(), "failed to write /etc/x".into());
        let nodes = [node("a", "new", "new", "Done", true), bad];
        let refs: Vec<&Node> = nodes.iter().collect();
        let s = calculate_status(&pool(false), &refs, None, &now());
        assert_eq!(counts(&s), [2, 1, 1, 0, 1]);
        let nd = condition_of(&s, NODE_DEGRADED).unwrap();
        assert_eq!(nd.reason.as_deref(), Some("1 nodes are reporting degraded status on sync"));
        assert_eq!(nd.message.as_deref(), Some("Node b is reporting: \"failed to write /etc/x\""));
        assert_eq!(cond(&s, DEGRADED), ("True".into(), "Node b is reporting: \"failed to write /etc/x\"".into()));
    }

    #[test]
    fn layered_pools() {
        let image = "registry/os@sha256:1";
        let mut on_image = node("a", "new", "new", "Done", true);
        for key in [mco_api::constants::CURRENT_IMAGE_ANNOTATION, mco_api::constants::DESIRED_IMAGE_ANNOTATION] {
            on_image.metadata.annotations.as_mut().unwrap().insert(key.into(), image.into());
        }
        let plain = node("b", "new", "new", "Done", true);
        let ready = Layered { image: image.into(), build: BuildState::Ready };
        let s = calculate_status(&pool(false), &[&on_image, &plain], Some(&ready), &now());
        assert_eq!(counts(&s), [2, 1, 1, 0, 0], "a node without the image is not updated");
        let s = calculate_status(&pool(false), &[&on_image], Some(&ready), &now());
        assert_eq!(
            cond(&s, UPDATED),
            ("True".into(), "All nodes are updated with MachineConfig new / Image registry/os@sha256:1".into())
        );
        let building = Layered { build: BuildState::Running { build: "b2".into() }, ..ready.clone() };
        let s = calculate_status(&pool(false), &[&on_image], Some(&building), &now());
        assert_eq!(cond(&s, UPDATED).0, "False", "not updated while a build runs");
        // Nor while a finished build waits to become the MachineOSConfig's image; no build at all
        // (a MachineOSConfig just created) does not hold the pool back.
        let unpublished =
            Layered { build: BuildState::Unpublished { build: "b2".into(), config: "c".into() }, ..ready };
        let s = calculate_status(&pool(false), &[&on_image], Some(&unpublished), &now());
        assert_eq!(cond(&s, UPDATED).0, "False");
        let not_started = Layered { build: BuildState::NotStarted { config: "c".into() }, ..unpublished };
        let s = calculate_status(&pool(false), &[&on_image], Some(&not_started), &now());
        assert_eq!(cond(&s, UPDATED).0, "True");
    }

    /// A pool whose status has `kind` True before the sync.
    fn pool_with(paused: bool, kind: &str) -> MachineConfigPool {
        let mut p = pool(paused);
        let at = now();
        p.status.as_mut().unwrap().conditions.as_mut().unwrap().push(conditions::condition(kind, true, "", "", &at));
        p
    }

    #[test]
    fn a_layered_pool_reports_its_build_in_updating() {
        let waiting = node("a", "old", "old", "Done", true);
        let layered = |build| Layered { image: "registry/os@sha256:1".into(), build };
        let (b, c) = (|| "b".to_string(), || "c".to_string());
        let updating = |on: bool, message: &str| ((if on { "True" } else { "False" }).to_string(), message.to_string());
        let cases = [
            (
                "no build yet",
                pool(false),
                BuildState::NotStarted { config: c() },
                updating(true, "Pool is waiting for a new OS image build to start (mosc: c)"),
            ),
            (
                "building",
                pool(false),
                BuildState::Running { build: b() },
                updating(true, "Pool is waiting for OS image build to complete (mosb: b)"),
            ),
            (
                "failed",
                pool(false),
                BuildState::Failed { build: b() },
                updating(false, "Pool update stopped due to OS image build failure (mosb: b)"),
            ),
            (
                "built: the nodes' view",
                pool(false),
                BuildState::Ready,
                updating(true, "All nodes are updating to MachineConfig new / Image registry/os@sha256:1"),
            ),
            (
                "a plain pool's tag resolved again: the nodes' view",
                pool(false),
                BuildState::Resolved,
                updating(true, "All nodes are updating to MachineConfig new / Image registry/os@sha256:1"),
            ),
            (
                "degraded otherwise",
                pool_with(false, NODE_DEGRADED),
                BuildState::Running { build: b() },
                updating(false, "Pool update paused due to degraded condition"),
            ),
            (
                "render degraded",
                pool_with(false, RENDER_DEGRADED),
                BuildState::Ready,
                updating(false, "Pool update paused due to degraded condition"),
            ),
            (
                "paused: the build says nothing",
                pool_with(true, NODE_DEGRADED),
                BuildState::Running { build: b() },
                updating(false, "Pool is paused; will not update to MachineConfig new / Image registry/os@sha256:1"),
            ),
        ];
        for (what, pool, build, want) in cases {
            let s = calculate_status(&pool, &[&waiting], Some(&layered(build)), &now());
            assert_eq!(cond(&s, UPDATING), want, "{what}");
        }
    }

    #[test]
    fn the_build_phase_clears_image_build_degraded() {
        let updated = node("a", "new", "new", "Done", true);
        let layered = |build| Layered { image: String::new(), build };
        let b = || "b".to_string();
        let cleared =
            |reason: &str, message: &str| Some(("False".to_string(), reason.to_string(), message.to_string()));
        let cases = [
            (
                "a new build runs",
                pool(false),
                Some(layered(BuildState::Running { build: b() })),
                cleared("Building", "New build started"),
                None,
            ),
            (
                "the build succeeded",
                pool_with(false, IMAGE_BUILD_DEGRADED),
                Some(layered(BuildState::Ready)),
                cleared("BuildSuccess", "Build completed successfully"),
                None,
            ),
            (
                "a retry is pending",
                pool_with(false, IMAGE_BUILD_DEGRADED),
                Some(layered(BuildState::NotStarted { config: "c".into() })),
                cleared("BuildPending", "MachineOSConfig updated/created, waiting for MachineOSBuild"),
                None,
            ),
            (
                "no build, never degraded",
                pool(false),
                Some(layered(BuildState::NotStarted { config: "c".into() })),
                None,
                None,
            ),
            (
                "no longer layered",
                pool_with(false, IMAGE_BUILD_DEGRADED),
                None,
                cleared("NoLayeredObjects", "No layered pool objects found, clearing stale build degraded condition"),
                None,
            ),
            (
                "a plain pool on a resolved tag: no build condition",
                pool(false),
                Some(layered(BuildState::Resolved)),
                None,
                None,
            ),
            (
                "a plain pool on a resolved tag, once layered and degraded",
                pool_with(false, IMAGE_BUILD_DEGRADED),
                Some(layered(BuildState::Resolved)),
                cleared("NoLayeredObjects", "No layered pool objects found, clearing stale build degraded condition"),
                None,
            ),
            (
                "the build failed: stays degraded",
                pool_with(false, IMAGE_BUILD_DEGRADED),
                Some(layered(BuildState::Failed { build: b() })),
                Some(("True".to_string(), String::new(), String::new())),
                Some("Custom OS image build failed"),
            ),
        ];
        for (what, pool, layered, want, degraded) in cases {
            let s = calculate_status(&pool, &[&updated], layered.as_ref(), &now());
            let build = condition_of(&s, IMAGE_BUILD_DEGRADED).map(|c| {
                (c.status.clone(), c.reason.clone().unwrap_or_default(), c.message.clone().unwrap_or_default())
            });
            assert_eq!(build, want, "{what}");
            let want_degraded = degraded.map_or(("False", ""), |message| ("True", message));
            assert_eq!(cond(&s, DEGRADED), (want_degraded.0.to_string(), want_degraded.1.to_string()), "{what}");
        }
    }

    #[test]
    fn render_degraded_degrades_the_pool() {
        let mut p = pool(false);
        let conditions = p.status.as_mut().unwrap().conditions.as_mut().unwrap();
        conditions[0].status = "True".into();
        conditions[0].message = Some("Failed to render configuration for pool worker: bad MC".into());
        let s = calculate_status(&p, &[], None, &now());
        assert_eq!(
            cond(&s, DEGRADED),
            ("True".into(), "Failed to render configuration for pool worker: bad MC".into())
        );
        assert_eq!(cond(&s, RENDER_DEGRADED).0, "True", "kept as the render controller set it");
    }

    #[test]
    fn recomputing_changes_nothing() {
        // The controller writes only a status that differs: a second computation over the same
        // nodes, even later, must give back exactly the status the first one wrote.
        let nodes = [node("a", "new", "new", "Done", true), node("b", "old", "new", "Degraded", true)];
        let refs: Vec<&Node> = nodes.iter().collect();
        let mut p = pool(false);
        p.status = Some(calculate_status(&p, &refs, None, &now()));
        let later: Time = serde_json::from_value(json!("2026-11-21T13:00:00Z")).unwrap();
        assert_eq!(calculate_status(&p, &refs, None, &later), p.status.unwrap());
    }

    #[test]
    fn the_pinned_image_sets_synchronizer_counts_nodes_whose_sets_are_all_at_their_desired_generation() {
        let condition = json!([{"type": "PinnedImageSetsProgressing", "status": "False", "lastTransitionTime": "2026-01-01T00:00:00Z"}]);
        let mcn = |name: &str, sets: serde_json::Value, conditions: &serde_json::Value| -> MachineConfigNode {
            serde_json::from_value(json!({
                "metadata": {"name": name},
                "spec": {"node": {"name": name}, "pool": {"name": "worker"}, "configVersion": {"desired": "new"}},
                "status": {"conditions": conditions, "pinnedImageSets": sets},
            }))
            .unwrap()
        };
        let done = json!([{"name": "a", "desiredGeneration": 2, "currentGeneration": 2}, {"name": "b", "desiredGeneration": 1, "currentGeneration": 1}]);
        let behind = json!([{"name": "a", "desiredGeneration": 2, "currentGeneration": 1}]);
        let failed =
            json!([{"name": "a", "desiredGeneration": 2, "lastFailedGeneration": 2, "lastFailedGenerationError": "x"}]);
        let cases: [(&[MachineConfigNode], i64); 6] = [
            (&[mcn("n1", done.clone(), &condition), mcn("n2", done.clone(), &condition)], 2),
            (&[mcn("n1", done.clone(), &condition), mcn("n2", behind, &condition)], 1),
            (&[mcn("n1", done.clone(), &condition), mcn("n2", failed, &condition)], 1),
            // A node listing no set has them all; one without conditions yet is not counted.
            (&[mcn("n1", json!([]), &condition), mcn("n2", done.clone(), &json!([]))], 1),
            // Only the pool's nodes count.
            (&[mcn("n1", done.clone(), &condition), mcn("other", done.clone(), &condition)], 1),
            (&[], 0),
        ];
        let nodes = [node("n1", "new", "new", "Done", true), node("n2", "new", "new", "Done", false)];
        let refs: Vec<&Node> = nodes.iter().collect();
        let status = calculate_status(&pool(false), &refs, None, &now());
        for (mcns, updated) in cases {
            let mcn_refs: Vec<&MachineConfigNode> = mcns.iter().collect();
            let [synchronizer] = pool_synchronizers(&refs, &mcn_refs, &status).try_into().unwrap();
            let names: Vec<_> = mcns.iter().map(|m| m.metadata.name.clone()).collect();
            assert_eq!(synchronizer.updated_machine_count, updated, "{names:?}");
            assert_eq!(synchronizer.pool_synchronizer_type, "PinnedImageSets");
            assert_eq!(
                [
                    synchronizer.machine_count,
                    synchronizer.ready_machine_count,
                    synchronizer.unavailable_machine_count,
                    synchronizer.available_machine_count
                ],
                [2, 1, 1, 1]
            );
        }
    }
}
