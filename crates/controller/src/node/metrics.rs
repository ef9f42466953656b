//! What the node controller's metrics say, decided without IO: a pool's nodes per rollout state
//! (`mco_pool_nodes`), the state its nodes report (`mco_state`), which nodes a custom pool
//! selects but master keeps (`mcc_pool_alert`), and whether boot image skew goes unchecked
//! (`mcc_boot_image_skew_enforcement_none`).

use std::borrow::Borrow;

use k8s_openapi::api::core::v1::Node;
use mco_api::constants::{MASTER_POOL, STATE_ANNOTATION, STATE_DEGRADED, STATE_UNRECONCILABLE};
use mco_api::machineconfiguration::MachineConfigPoolStatus;
use mco_api::operator::BootImageSkewEnforcementModeStatus;
use mco_api::{ControllerConfig, MachineConfigPool, MachineConfiguration};
use mco_metrics::controller::{PoolMember, PoolNodes};
use mco_rollout::node::{self, Target, annotation};
use mco_rollout::{membership, pools_for_node};

/// Each node of a pool in one rollout state towards `target`, the pool's current target.
/// Degraded wins: a degraded node counts there whether or not it was targeted.
pub fn pool_nodes(nodes: &[&Node], target: &Target) -> PoolNodes {
    let mut counts = PoolNodes::default();
    for node in nodes {
        let count = if matches!(annotation(node, STATE_ANNOTATION), Some(STATE_DEGRADED | STATE_UNRECONCILABLE)) {
            &mut counts.degraded
        } else if node::is_done(node, target) {
            &mut counts.updated
        } else if node::desired_equals(node, target) {
            &mut counts.updating
        } else {
            &mut counts.waiting
        };
        *count += 1;
    }
    counts
}

/// The type and reason of the pool's true condition that changed last, which upstream reports
/// for each of its nodes; on a tie the first listed. Conditions without a time are skipped, as
/// upstream's do.
pub fn pool_state(status: &MachineConfigPoolStatus) -> Option<(&str, &str)> {
    let mut newest = None;
    for condition in status.conditions.iter().flatten().filter(|c| c.status == "True") {
        let Some(time) = condition.last_transition_time.as_ref().map(|t| t.0) else { continue };
        if newest.is_none_or(|(newest_time, _)| time > newest_time) {
            newest = Some((time, condition));
        }
    }
    newest.map(|(_, c)| (c.type_.as_str(), c.reason.as_deref().unwrap_or_default()))
}

/// The pool's nodes with their `mcc_pool_alert`: set for a node of the master pool that would be
/// in a custom pool were it not a master (upstream: "defaulting to master. This node will not have
/// any custom role configuration as a result").
pub fn pool_members(pool: &str, nodes: &[&Node], pools: &[impl Borrow<MachineConfigPool>]) -> Vec<PoolMember> {
    let not_master: Vec<&MachineConfigPool> =
        pools.iter().map(Borrow::borrow).filter(|p| p.metadata.name.as_deref() != Some(MASTER_POOL)).collect();
    let custom_role = |node: &Node| {
        pools_for_node(node, &not_master).is_ok_and(|owners| {
            owners.first().and_then(|p| p.metadata.name.as_deref()).is_some_and(membership::is_custom)
        })
    };
    nodes
        .iter()
        .map(|node| PoolMember { node: node::name(node).to_string(), alert: pool == MASTER_POOL && custom_role(node) })
        .collect()
}

/// Whether skew enforcement is off where it matters (upstream `syncBootImageSkewEnforcementMetric`):
/// mode `None` in the MachineConfiguration's status, unless the cluster is single-node or
/// bare metal (there `None` is expected). The Infrastructure is the ControllerConfig's copy;
/// without it, false, as upstream answers when it cannot read the Infrastructure.
pub fn skew_enforcement_none(
    configuration: Option<&MachineConfiguration>,
    controller_config: Option<&ControllerConfig>,
) -> bool {
    let mode = configuration
        .and_then(|c| c.status.as_ref())
        .and_then(|s| s.boot_image_skew_enforcement_status.as_ref())
        .and_then(|s| s.mode);
    if mode != Some(BootImageSkewEnforcementModeStatus::None) {
        return false;
    }
    let Some(infra) = controller_config.and_then(|cc| cc.spec.infra.as_ref()) else { return false };
    let field = |path: &str| infra.pointer(path).and_then(serde_json::Value::as_str);
    field("/status/controlPlaneTopology") != Some("SingleReplica")
        && field("/status/platformStatus/type") != Some("BareMetal")
}

#[cfg(test)]
mod tests {
    use mco_api::constants::{CURRENT_CONFIG_ANNOTATION, DESIRED_CONFIG_ANNOTATION, STATE_DONE, STATE_WORKING};
    use serde_json::json;

    use super::*;

    fn node(name: &str, current: &str, desired: &str, state: &str) -> Node {
        serde_json::from_value(json!({"metadata": {"name": name, "annotations": {
            CURRENT_CONFIG_ANNOTATION: current, DESIRED_CONFIG_ANNOTATION: desired, STATE_ANNOTATION: state,
        }}}))
        .unwrap()
    }

    #[test]
    fn nodes_per_rollout_state() {
        let target = Target::config("new");
        let cases = [
            ("on the target and Done", node("a", "new", "new", STATE_DONE), "updated"),
            ("targeted, working", node("a", "old", "new", STATE_WORKING), "updating"),
            ("targeted, applied, not yet Done", node("a", "new", "new", STATE_WORKING), "updating"),
            ("not targeted", node("a", "old", "old", STATE_DONE), "waiting"),
            ("degraded on the way", node("a", "old", "new", STATE_DEGRADED), "degraded"),
            ("unreconcilable", node("a", "old", "new", STATE_UNRECONCILABLE), "degraded"),
            ("degraded before being targeted", node("a", "old", "old", STATE_DEGRADED), "degraded"),
        ];
        for (what, node, state) in cases {
            let counts = pool_nodes(&[&node], &target);
            let want = PoolNodes {
                updated: i64::from(state == "updated"),
                updating: i64::from(state == "updating"),
                degraded: i64::from(state == "degraded"),
                waiting: i64::from(state == "waiting"),
            };
            assert_eq!(counts, want, "{what}");
        }
        let nodes = [
            node("a", "new", "new", STATE_DONE),
            node("b", "old", "new", STATE_WORKING),
            node("c", "old", "old", STATE_DONE),
        ];
        let all: Vec<&Node> = nodes.iter().collect();
        assert_eq!(pool_nodes(&all, &target), PoolNodes { updated: 1, updating: 1, degraded: 0, waiting: 1 });
    }

    #[test]
    fn the_state_a_pool_reports_for_its_nodes() {
        let status = |conditions: serde_json::Value| -> MachineConfigPoolStatus {
            serde_json::from_value(json!({ "conditions": conditions })).unwrap()
        };
        let condition = |kind: &str, on: bool, time: &str, reason: &str| json!({"type": kind, "status": if on { "True" } else { "False" }, "lastTransitionTime": time, "reason": reason});
        let cases = [
            ("no conditions", json!([]), None),
            (
                "the newest true one",
                json!([
                    condition("Updated", false, "2024-01-01T00:00:03Z", ""),
                    condition("Updating", true, "2024-01-01T00:00:02Z", ""),
                    condition("RenderDegraded", true, "2024-01-01T00:00:01Z", "x"),
                ]),
                Some(("Updating", "")),
            ),
            (
                "with its reason",
                json!([
                    condition("Updated", true, "2024-01-01T00:00:01Z", ""),
                    condition("NodeDegraded", true, "2024-01-01T00:00:05Z", "1 nodes are reporting degraded status"),
                ]),
                Some(("NodeDegraded", "1 nodes are reporting degraded status")),
            ),
            (
                "a tie: the first",
                json!([
                    condition("Degraded", true, "2024-01-01T00:00:05Z", ""),
                    condition("NodeDegraded", true, "2024-01-01T00:00:05Z", ""),
                ]),
                Some(("Degraded", "")),
            ),
            ("nothing true", json!([condition("Updated", false, "2024-01-01T00:00:01Z", "")]), None),
            ("no time", json!([{"type": "Updated", "status": "True"}]), None),
        ];
        for (what, conditions, want) in cases {
            assert_eq!(pool_state(&status(conditions)), want, "{what}");
        }
    }

    fn pool(name: &str, role: &str) -> MachineConfigPool {
        serde_json::from_value(json!({"metadata": {"name": name}, "spec": {"nodeSelector": {"matchLabels": {
            format!("node-role.kubernetes.io/{role}"): ""
        }}}}))
        .unwrap()
    }

    fn with_roles(roles: &[&str]) -> Node {
        let labels: serde_json::Map<String, serde_json::Value> =
            roles.iter().map(|r| (format!("node-role.kubernetes.io/{r}"), json!(""))).collect();
        serde_json::from_value(json!({"metadata": {"name": "n", "labels": labels}})).unwrap()
    }

    #[test]
    fn masters_a_custom_pool_also_selects_raise_the_pool_alert() {
        let pools = [pool("master", "master"), pool("worker", "worker"), pool("infra", "infra")];
        let cases = [
            ("master", &["master"][..], false),
            ("master", &["master", "worker"][..], false),
            ("master", &["master", "infra"][..], true),
            ("master", &["master", "infra", "worker"][..], true),
            ("infra", &["infra", "worker"][..], false),
            ("worker", &["worker"][..], false),
        ];
        for (pool_name, roles, alert) in cases {
            let node = with_roles(roles);
            let members = pool_members(pool_name, &[&node], &pools);
            assert_eq!(members, [PoolMember { node: "n".into(), alert }], "{pool_name} {roles:?}");
        }
    }

    #[test]
    fn skew_enforcement_off_where_it_matters() {
        let configuration = |mode: Option<&str>| -> MachineConfiguration {
            let status = mode.map(|m| json!({"bootImageSkewEnforcementStatus": {"mode": m}}));
            serde_json::from_value(json!({
                "apiVersion": "operator.openshift.io/v1", "kind": "MachineConfiguration",
                "metadata": {"name": "cluster"}, "spec": {}, "status": status,
            }))
            .unwrap()
        };
        let controller_config = |topology: &str, platform: &str| -> ControllerConfig {
            let mut cc: ControllerConfig = serde_json::from_value(json!({
                "apiVersion": "machineconfiguration.openshift.io/v1", "kind": "ControllerConfig",
                "metadata": {"name": "machine-config-controller"}, "spec": {},
            }))
            .unwrap();
            cc.spec.infra =
                Some(json!({"status": {"controlPlaneTopology": topology, "platformStatus": {"type": platform}}}));
            cc
        };
        let aws = controller_config("HighlyAvailable", "AWS");
        let cases = [
            ("None on a cluster that scales", Some(configuration(Some("None"))), Some(&aws), true),
            ("Automatic", Some(configuration(Some("Automatic"))), Some(&aws), false),
            ("Manual", Some(configuration(Some("Manual"))), Some(&aws), false),
            ("no status", Some(configuration(None)), Some(&aws), false),
            ("no MachineConfiguration", None, Some(&aws), false),
            ("no Infrastructure", Some(configuration(Some("None"))), None, false),
        ];
        for (what, configuration, cc, want) in cases {
            assert_eq!(skew_enforcement_none(configuration.as_ref(), cc), want, "{what}");
        }
        let none = configuration(Some("None"));
        for (what, cc) in [
            ("single node", controller_config("SingleReplica", "AWS")),
            ("bare metal", controller_config("HighlyAvailable", "BareMetal")),
        ] {
            assert!(!skew_enforcement_none(Some(&none), Some(&cc)), "{what}");
        }
    }
}
