//! Two-node-plus-arbiter control planes (topology `HighlyAvailableArbiter`): the
//! master and arbiter pools update together so that the control plane keeps its quorum. The
//! master pool's sync moves both, masters first; the arbiter's own sync only reports status,
//! unless the master pool is paused.

use k8s_openapi::api::core::v1::Node;
use mco_api::MachineConfigPool;
use mco_api::constants::{ARBITER_POOL, MASTER_POOL};

use crate::node;

/// `controlPlaneTopology` of a control plane of two masters and an arbiter.
pub const HA_ARBITER_TOPOLOGY: &str = "HighlyAvailableArbiter";

/// How a pool's sync goes with respect to the master/arbiter coordination.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Coordination {
    /// No coordination: the pool is planned alone.
    Alone,
    /// The arbiter pool only reports status, with why.
    StatusOnly(&'static str),
    /// The master pool in an HA arbiter topology: the masters (no capacity while an arbiter node
    /// is unavailable), then the arbiter nodes (see [`arbiter_waits`]).
    MasterThenArbiter,
}

/// The coordination of `pool`'s sync; `master` is the master pool (if any) and `master_nodes`
/// its nodes.
pub fn coordination(
    pool: &str,
    topology: Option<&str>,
    master: Option<&MachineConfigPool>,
    master_nodes: &[&Node],
) -> Coordination {
    let ha_arbiter = topology == Some(HA_ARBITER_TOPOLOGY);
    match pool {
        MASTER_POOL if ha_arbiter => Coordination::MasterThenArbiter,
        ARBITER_POOL => match master {
            None => Coordination::StatusOnly("there is no master pool"),
            Some(master) if ha_arbiter && master.spec.paused == Some(true) => {
                if master_nodes.iter().any(|n| node::unavailable_for_update(n)) {
                    Coordination::StatusOnly("a master node is unavailable")
                } else {
                    Coordination::Alone
                }
            }
            Some(_) => Coordination::StatusOnly("the master pool's sync updates the arbiter nodes"),
        },
        _ => Coordination::Alone,
    }
}

/// The arbiter nodes wait while any master node is unavailable or was just targeted.
pub fn arbiter_waits(masters_unavailable: usize, masters_targeted: usize) -> bool {
    masters_unavailable + masters_targeted > 0
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::node::tests::node;

    fn pool(name: &str, paused: bool) -> MachineConfigPool {
        serde_json::from_value(json!({"metadata": {"name": name}, "spec": {"paused": paused}})).unwrap()
    }

    #[test]
    fn who_moves_the_arbiter() {
        let (running, paused) = (pool("master", false), pool("master", true));
        let ready = node("m1", "a", "a", "Done", true);
        let working = node("m2", "a", "b", "Working", true);
        let ha = Some(HA_ARBITER_TOPOLOGY);
        let cases = [
            ("master, HA arbiter", "master", ha, Some(&running), vec![], Coordination::MasterThenArbiter),
            ("master, other topology", "master", Some("HighlyAvailable"), Some(&running), vec![], Coordination::Alone),
            ("worker", "worker", ha, Some(&running), vec![], Coordination::Alone),
            (
                "arbiter defers to the master pool",
                "arbiter",
                ha,
                Some(&running),
                vec![&ready],
                Coordination::StatusOnly("the master pool's sync updates the arbiter nodes"),
            ),
            ("arbiter, master paused, masters fine", "arbiter", ha, Some(&paused), vec![&ready], Coordination::Alone),
            (
                "arbiter, master paused, a master busy",
                "arbiter",
                ha,
                Some(&paused),
                vec![&ready, &working],
                Coordination::StatusOnly("a master node is unavailable"),
            ),
            (
                "arbiter, no master pool",
                "arbiter",
                ha,
                None,
                vec![],
                Coordination::StatusOnly("there is no master pool"),
            ),
            (
                "arbiter, paused master but not HA arbiter",
                "arbiter",
                None,
                Some(&paused),
                vec![],
                Coordination::StatusOnly("the master pool's sync updates the arbiter nodes"),
            ),
        ];
        for (what, name, topology, master, nodes, want) in cases {
            assert_eq!(coordination(name, topology, master, &nodes), want, "{what}");
        }
    }

    #[test]
    fn arbiter_waits_for_masters() {
        assert!(!arbiter_waits(0, 0));
        assert!(arbiter_waits(1, 0));
        assert!(arbiter_waits(0, 1));
    }
}
