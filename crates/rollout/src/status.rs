//! A pool's status from its nodes (`calculateStatus`, non-layered pools): counts, the
//! Updated/Updating/NodeDegraded/Degraded conditions, and `status.configuration` once every node
//! runs the target.

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use mco_api::MachineConfigPool;
use mco_api::constants::{REASON_ANNOTATION, STATE_ANNOTATION, STATE_DEGRADED, STATE_UNRECONCILABLE};
use mco_api::machineconfiguration::pool_condition::{DEGRADED, NODE_DEGRADED, RENDER_DEGRADED, UPDATED, UPDATING};
use mco_api::machineconfiguration::{MachineConfigPoolCondition, MachineConfigPoolStatus};

use crate::conditions;
use crate::layering::{BuildState, Layered};
use crate::node::{self, annotation};
use crate::plan::pool_target;

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
    let render_degraded_message = conditions::get(&conditions, RENDER_DEGRADED)
        .filter(|c| c.status == "True")
        .map(|c| c.message.clone().unwrap_or_default());
    let mut set = |kind: &str, on: bool, reason: &str, message: &str| {
        conditions::set_in(&mut conditions, conditions::condition(kind, on, reason, message, now));
    };
    // A layered pool whose image is not (yet) built is not updated, whatever its nodes say.
    let building = layered.is_some_and(|l| l.build != BuildState::Ready);
    let all_updated = updated == total && ready == total && unavailable == 0 && !building;
    if all_updated {
        let image = layered.map(|l| format!(" / Image {}", l.image)).unwrap_or_default();
        set(UPDATED, true, "", &format!("All nodes are updated with MachineConfig {target}{image}"));
        set(UPDATING, false, "", "");
        status.configuration = pool.spec.configuration.clone();
    } else {
        set(UPDATED, false, "", "");
        if pool.spec.paused == Some(true) {
            set(UPDATING, false, "", &format!("Pool is paused; will not update to MachineConfig {target}"));
        } else {
            set(UPDATING, true, "", &format!("All nodes are updating to MachineConfig {target}"));
        }
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
    let degraded_message = if !degraded.is_empty() { Some(node_message) } else { render_degraded_message };
    match degraded_message {
        Some(message) => set(DEGRADED, true, "", &message),
        None => set(DEGRADED, false, "", ""),
    }
    status.conditions = Some(conditions);
    status
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
        let building = Layered { build: BuildState::Waiting("building".into()), ..ready };
        let s = calculate_status(&pool(false), &[&on_image], Some(&building), &now());
        assert_eq!(cond(&s, UPDATED).0, "False", "not updated while a build runs");
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
}
