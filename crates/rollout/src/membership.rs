//! Which pool owns a node (`GetPoolsForNode`): the node's labels against every pool's node
//! selector, with master taking precedence over a custom pool and a custom pool over worker.

use std::borrow::Borrow;
use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Node;
use mco_api::MachineConfigPool;
use mco_api::constants::{MASTER_POOL, WORKER_POOL};
use mco_render::select::Selection;

/// A node no pool can own.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MembershipError {
    #[error("node {node} belongs to {count} custom roles, cannot proceed with this Node")]
    ManyCustomPools { node: String, count: usize },
}

fn pool_name(pool: &MachineConfigPool) -> &str {
    pool.metadata.name.as_deref().unwrap_or_default()
}

/// A pool selects a node when its node selector is set, not empty, valid, and matches.
fn selects(pool: &MachineConfigPool, node: &Node) -> bool {
    match Selection::new(pool.spec.node_selector.as_ref()) {
        Ok(selection @ Selection::Requirements(_)) => selection.matches(node.metadata.labels.as_ref()),
        _ => false,
    }
}

/// The pools of a node, primary first; empty for an unmanaged node (no pool matches, or a
/// Windows node).
pub fn pools_for_node<'a>(
    node: &Node,
    pools: &'a [impl Borrow<MachineConfigPool>],
) -> Result<Vec<&'a MachineConfigPool>, MembershipError> {
    let windows =
        node.metadata.labels.as_ref().and_then(|l| l.get("kubernetes.io/os")).is_some_and(|os| os == "windows");
    if windows {
        return Ok(Vec::new());
    }
    let matching: Vec<&MachineConfigPool> = pools.iter().map(Borrow::borrow).filter(|p| selects(p, node)).collect();
    let master = matching.iter().copied().find(|p| pool_name(p) == MASTER_POOL);
    let worker = matching.iter().copied().find(|p| pool_name(p) == WORKER_POOL);
    let custom: Vec<&MachineConfigPool> =
        matching.iter().copied().filter(|p| ![MASTER_POOL, WORKER_POOL].contains(&pool_name(p))).collect();
    if custom.len() > 1 {
        return Err(MembershipError::ManyCustomPools {
            node: node.metadata.name.clone().unwrap_or_default(),
            count: custom.len(),
        });
    }
    Ok(match (master, custom.first(), worker) {
        // A control-plane node stays in master even when a custom pool also selects it.
        (Some(master), Some(_), worker) => std::iter::once(master).chain(worker).collect(),
        (Some(master), None, _) => vec![master],
        (None, Some(custom), worker) => std::iter::once(*custom).chain(worker).collect(),
        (None, None, Some(worker)) => vec![worker],
        (None, None, None) => Vec::new(),
    })
}

/// The nodes a pool owns: selected by it and with it as their primary pool (a worker node in
/// an `infra` pool counts only there). Nodes whose membership is an error belong to no pool.
pub fn nodes_for_pool<'a>(
    pool: &MachineConfigPool,
    nodes: &'a [impl Borrow<Node>],
    pools: &[impl Borrow<MachineConfigPool>],
) -> Vec<&'a Node> {
    nodes
        .iter()
        .map(Borrow::borrow)
        .filter(|n| selects(pool, n))
        .filter(|n| {
            pools_for_node(n, pools).is_ok_and(|owners| owners.first().is_some_and(|p| pool_name(p) == pool_name(pool)))
        })
        .collect()
}

/// The labels that put a node into `pool` (for a node that booted straight into a custom pool,
/// upstream's `customPoolLabelsApplied`): the node selector's `matchLabels`, plus the
/// `matchExpressions` that name one value (`In` with exactly one value: key=value; `Exists`:
/// key=""); `matchLabels` win over expressions.
pub fn selector_labels(pool: &MachineConfigPool) -> BTreeMap<String, String> {
    let Some(selector) = pool.spec.node_selector.as_ref() else { return BTreeMap::new() };
    let mut labels: BTreeMap<String, String> = BTreeMap::new();
    for e in selector.match_expressions.iter().flatten() {
        match (e.operator.as_str(), e.values.as_deref()) {
            ("In", Some([value])) => labels.insert(e.key.clone(), value.clone()),
            ("Exists", _) => labels.insert(e.key.clone(), String::new()),
            _ => None,
        };
    }
    labels.extend(selector.match_labels.clone().unwrap_or_default());
    labels
}

/// Whether `pool` is a custom pool (neither master nor worker).
pub fn is_custom(pool: &str) -> bool {
    ![MASTER_POOL, WORKER_POOL].contains(&pool)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn pool(name: &str, selector: serde_json::Value) -> MachineConfigPool {
        serde_json::from_value(json!({"metadata": {"name": name}, "spec": {"nodeSelector": selector}})).unwrap()
    }

    fn node(name: &str, roles: &[&str]) -> Node {
        let labels: serde_json::Map<String, serde_json::Value> =
            roles.iter().map(|r| (format!("node-role.kubernetes.io/{r}"), json!(""))).collect();
        serde_json::from_value(json!({"metadata": {"name": name, "labels": labels}})).unwrap()
    }

    fn role(r: &str) -> serde_json::Value {
        json!({"matchLabels": {format!("node-role.kubernetes.io/{r}"): ""}})
    }

    fn pools() -> Vec<MachineConfigPool> {
        vec![
            pool("master", role("master")),
            pool("worker", role("worker")),
            pool("infra", role("infra")),
            pool("gpu", role("gpu")),
            pool("everything", json!({})),
            pool("nothing", serde_json::Value::Null),
        ]
    }

    #[test]
    fn primary_pool_table() {
        let pools = pools();
        type Case<'a> = (&'a [&'a str], Result<&'a [&'a str], &'a str>);
        let cases: &[Case] = &[
            (&[], Ok(&[])),
            (&["worker"], Ok(&["worker"])),
            (&["master"], Ok(&["master"])),
            (&["master", "worker"], Ok(&["master"])),
            (&["infra"], Ok(&["infra"])),
            (&["infra", "worker"], Ok(&["infra", "worker"])),
            (&["master", "infra"], Ok(&["master"])),
            (&["master", "infra", "worker"], Ok(&["master", "worker"])),
            (&["infra", "gpu", "worker"], Err("node n belongs to 2 custom roles, cannot proceed with this Node")),
        ];
        for (roles, want) in cases {
            let got = pools_for_node(&node("n", roles), &pools)
                .map(|ps| ps.iter().map(|p| pool_name(p).to_string()).collect::<Vec<_>>())
                .map_err(|e| e.to_string());
            let want = want.map(|ps| ps.iter().map(|p| p.to_string()).collect::<Vec<_>>()).map_err(str::to_string);
            assert_eq!(got, want, "{roles:?}");
        }
    }

    #[test]
    fn windows_nodes_are_unmanaged() {
        let mut n = node("win", &["worker"]);
        n.metadata.labels.as_mut().unwrap().insert("kubernetes.io/os".into(), "windows".into());
        assert!(pools_for_node(&n, &pools()).unwrap().is_empty());
    }

    #[test]
    fn pool_nodes_are_those_it_owns() {
        let pools = pools();
        let nodes = vec![node("w1", &["worker"]), node("i1", &["infra", "worker"]), node("m1", &["master", "worker"])];
        let names =
            |pool: usize| nodes_for_pool(&pools[pool], &nodes, &pools).iter().map(|n| name(n)).collect::<Vec<_>>();
        assert_eq!(names(0), ["m1"]);
        assert_eq!(names(1), ["w1"]);
        assert_eq!(names(2), ["i1"]);
        assert!(names(4).is_empty(), "an empty selector selects nothing here (the controller refuses the pool)");
    }

    #[test]
    fn labels_that_select_a_node() {
        let selector = json!({
            "matchLabels": {"node-role.kubernetes.io/infra": "", "zone": "label-wins"},
            "matchExpressions": [
                {"key": "zone", "operator": "In", "values": ["expression"]},
                {"key": "tier", "operator": "In", "values": ["gold"]},
                {"key": "gpu", "operator": "Exists"},
                {"key": "many", "operator": "In", "values": ["a", "b"]},
                {"key": "not", "operator": "NotIn", "values": ["x"]},
                {"key": "absent", "operator": "DoesNotExist"},
            ],
        });
        let want: BTreeMap<String, String> =
            [("gpu", ""), ("node-role.kubernetes.io/infra", ""), ("tier", "gold"), ("zone", "label-wins")]
                .into_iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
        assert_eq!(selector_labels(&pool("infra", selector)), want);
        assert!(selector_labels(&pool("none", serde_json::Value::Null)).is_empty());
        assert!(is_custom("infra") && !is_custom("master") && !is_custom("worker"));
    }

    fn name(n: &Node) -> &str {
        n.metadata.name.as_deref().unwrap()
    }
}
