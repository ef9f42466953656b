//! Pre-staging (mco's own): the nodes of a pool pull its new OS image into their OSTree
//! repository ahead of their update slot, a few at a time, so that a slot is only drain, deploy
//! and reboot; a node whose pull failed is reported and not given the config (so not drained)
//! until a pull succeeds. Asked for per pool with [`PRESTAGE_CONCURRENCY_ANNOTATION`]; the node
//! controller writes [`PRESTAGE_ANNOTATION`] on the nodes it picks ([`plan`], no IO), their
//! daemons answer with [`PRESTAGED_ANNOTATION`] or [`PRESTAGE_ERROR_ANNOTATION`].

use k8s_openapi::api::core::v1::Node;
use mco_api::MachineConfigPool;

use crate::node::{self, Target, annotation};

/// How many of the pool's nodes pull its new OS image ahead at once (`1` or more); without it,
/// nodes pull when their update starts, as upstream's do.
pub const PRESTAGE_CONCURRENCY_ANNOTATION: &str = "mco.dev/prestage-concurrency";
pub use mco_api::constants::{PRESTAGE_ANNOTATION, PRESTAGE_ERROR_ANNOTATION, PRESTAGED_ANNOTATION};
use mco_api::constants::{STATE_ANNOTATION, STATE_DONE};

/// The pool's pre-staging concurrency: `None` when it does not pre-stage.
pub fn concurrency(pool: &MachineConfigPool) -> Result<Option<usize>, String> {
    let Some(value) = pool.metadata.annotations.as_ref().and_then(|a| a.get(PRESTAGE_CONCURRENCY_ANNOTATION)) else {
        return Ok(None);
    };
    match value.parse::<usize>() {
        Ok(n) if n >= 1 && value.bytes().all(|b| b.is_ascii_digit()) => Ok(Some(n)),
        _ => Err(format!(
            "MachineConfigPool {}: annotation {PRESTAGE_CONCURRENCY_ANNOTATION}: {value:?} is not a number of nodes \
             (1 or more)",
            pool.metadata.name.as_deref().unwrap_or_default()
        )),
    }
}

/// Why pulling `image` ahead failed on `node`, if it did.
pub fn failure<'a>(node: &'a Node, image: &str) -> Option<&'a str> {
    annotation(node, PRESTAGE_ERROR_ANNOTATION)?.strip_prefix(image)?.strip_prefix(": ")
}

/// The pool condition that says which nodes could not pull the pool's OS image ahead (ours).
pub const PRESTAGE_FAILED: &str = "PrestageFailed";

/// The pool's [`PRESTAGE_FAILED`] condition, `(status, message)`, from its nodes' answers: the
/// nodes not yet moving to `target` whose pull of the image they were asked for failed. `None`
/// when the pool does not pre-stage and never had the condition.
pub fn condition(
    pool: &MachineConfigPool,
    nodes: &[&Node],
    target: &Target,
    had_condition: bool,
) -> Option<(bool, String)> {
    if !matches!(concurrency(pool), Ok(Some(_))) {
        return had_condition.then(|| (false, String::new()));
    }
    let mut image = "";
    let failed: Vec<(String, String)> = nodes
        .iter()
        .filter(|n| node::is_candidate(n, target))
        .filter_map(|n| {
            let asked = annotation(n, PRESTAGE_ANNOTATION)?;
            let why = failure(n, asked)?;
            image = asked;
            Some((node::name(n).to_string(), why.to_string()))
        })
        .collect();
    Some(if failed.is_empty() { (false, String::new()) } else { (true, failed_message(image, &failed)) })
}

/// What pre-staging does for a pool in one sync.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Prestage {
    /// Nodes to ask to pull the image now ([`PRESTAGE_ANNOTATION`]).
    pub start: Vec<String>,
    /// Nodes whose pull failed, with why: they are not given the config.
    pub failed: Vec<(String, String)>,
}

/// Whether a node's daemon pulls ahead now: it is Ready, settled (Done) and not failing, as a
/// daemon is that pulls only while idle.
fn can_pull(n: &Node) -> bool {
    node::is_ready(n)
        && !node::mcd_failing(n)
        && !node::unavailable_for_update(n)
        && annotation(n, STATE_ANNOTATION) == Some(STATE_DONE)
}

/// Which of `nodes` start pulling `image` (the target's OS image, by digest) now: nodes not yet
/// moving to `target` that have not pulled it and can pull, the first by name, so that at most
/// `concurrency` are pulling or have failed at once (a failing node's daemon retries, and holds
/// its place: a registry that fails every pull holds `concurrency` nodes, not the pool). A node
/// asked before that has not answered is pulling, as long as it can.
pub fn plan(image: &str, nodes: &[&Node], target: &Target, concurrency: usize) -> Prestage {
    let mut prestage = Prestage::default();
    let mut pulling = 0;
    let mut waiting = Vec::new();
    for n in nodes.iter().filter(|n| node::is_candidate(n, target)) {
        if annotation(n, PRESTAGED_ANNOTATION) == Some(image) {
            continue;
        }
        if let Some(why) = failure(n, image) {
            prestage.failed.push((node::name(n).to_string(), why.to_string()));
        } else if !can_pull(n) {
            continue;
        } else if annotation(n, PRESTAGE_ANNOTATION) == Some(image) {
            pulling += 1;
        } else {
            waiting.push(node::name(n).to_string());
        }
    }
    waiting.sort();
    let free = concurrency.saturating_sub(pulling + prestage.failed.len());
    prestage.start = waiting.into_iter().take(free).collect();
    prestage
}

/// Nodes whose request to pull ahead is withdrawn (their daemons would pull or retry it for
/// nothing): every node that has one when the pool does not pre-stage (`image` is `None`), else
/// those moving to or on `target` already and those asked for another image (asked again for
/// this one when their turn comes), except the nodes in `asked_now`.
pub fn withdrawn(nodes: &[&Node], target: &Target, image: Option<&str>, asked_now: &[String]) -> Vec<String> {
    nodes
        .iter()
        .filter(|n| {
            let Some(asked) = annotation(n, PRESTAGE_ANNOTATION) else { return false };
            let stale = match image {
                None => true,
                Some(image) => !node::is_candidate(n, target) || asked != image,
            };
            stale && !asked_now.iter().any(|a| a == node::name(n))
        })
        .map(|n| node::name(n).to_string())
        .collect()
}

/// The message of the pool's `PrestageFailed` condition for `failed` nodes pulling `image`.
pub fn failed_message(image: &str, failed: &[(String, String)]) -> String {
    let nodes: Vec<String> = failed.iter().map(|(node, why)| format!("{node}: {why}")).collect();
    format!(
        "pulling OS image {image} ahead failed on {} node(s), which are not updated until it succeeds: {}",
        failed.len(),
        nodes.join("; ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::node::tests::node as test_node;

    const IMAGE: &str = "reg/os@sha256:1111111111111111111111111111111111111111111111111111111111111111";
    const OTHER: &str = "reg/os@sha256:2222222222222222222222222222222222222222222222222222222222222222";

    fn with(mut n: Node, annotations: &[(&str, &str)]) -> Node {
        let map = n.metadata.annotations.get_or_insert_with(Default::default);
        map.extend(annotations.iter().map(|(k, v)| (k.to_string(), v.to_string())));
        n
    }

    fn pool(concurrency: Option<&str>) -> MachineConfigPool {
        let mut pool = MachineConfigPool::new("worker", Default::default());
        if let Some(c) = concurrency {
            pool.metadata.annotations = Some([(PRESTAGE_CONCURRENCY_ANNOTATION.to_string(), c.to_string())].into());
        }
        pool
    }

    #[test]
    fn concurrency_is_a_number_of_nodes() {
        assert_eq!(concurrency(&pool(None)), Ok(None));
        assert_eq!(concurrency(&pool(Some("2"))), Ok(Some(2)));
        for bad in ["0", "-1", "+2", "two", "", "1.5"] {
            let error = concurrency(&pool(Some(bad))).unwrap_err();
            assert_eq!(
                error,
                format!(
                    "MachineConfigPool worker: annotation mco.dev/prestage-concurrency: {bad:?} is not a number of \
                     nodes (1 or more)"
                )
            );
        }
    }

    #[test]
    fn nodes_pull_ahead_a_few_at_a_time() {
        let target = Target::config("rendered-worker-new");
        let old = |name: &str| test_node(name, "rendered-worker-old", "rendered-worker-old", "Done", true);
        let pulled = with(old("a"), &[(PRESTAGE_ANNOTATION, IMAGE), (PRESTAGED_ANNOTATION, IMAGE)]);
        let pulling = with(old("b"), &[(PRESTAGE_ANNOTATION, IMAGE)]);
        let failed =
            with(old("c"), &[(PRESTAGE_ANNOTATION, IMAGE), (PRESTAGE_ERROR_ANNOTATION, &format!("{IMAGE}: 401"))]);
        // Asked for an image the pool no longer targets: asked again for this one.
        let stale =
            with(old("d"), &[(PRESTAGE_ANNOTATION, OTHER), (PRESTAGE_ERROR_ANNOTATION, &format!("{OTHER}: 404"))]);
        let (e, f) = (old("e"), old("f"));
        // Moving to the target already: its update pulls.
        let updating = test_node("g", "rendered-worker-old", "rendered-worker-new", "Working", true);
        // Asked, but down since (its daemon pulls only while settled): it holds no place.
        let down = with(
            test_node("h", "rendered-worker-old", "rendered-worker-old", "Done", false),
            &[(PRESTAGE_ANNOTATION, IMAGE)],
        );
        let nodes = [&f, &e, &updating, &stale, &failed, &pulling, &pulled, &down];
        // b pulling and c failed take two places.
        for (concurrency, start) in
            [(1, vec![]), (2, vec![]), (3, vec!["d"]), (4, vec!["d", "e"]), (9, vec!["d", "e", "f"])]
        {
            let planned = plan(IMAGE, &nodes, &target, concurrency);
            assert_eq!(planned.start, start, "concurrency {concurrency}");
            assert_eq!(planned.failed, vec![("c".to_string(), "401".to_string())]);
        }
        // Every node pulled: nothing to do.
        assert_eq!(plan(IMAGE, &[&pulled], &target, 1), Prestage::default());

        // Withdrawn: the ask of a node moving to the target, and one for another image (unless
        // asked again now); every ask when the pool stops pre-staging.
        let moving = with(updating.clone(), &[(PRESTAGE_ANNOTATION, IMAGE)]);
        let nodes = [&moving, &stale, &pulling, &e];
        assert_eq!(withdrawn(&nodes, &target, Some(IMAGE), &[]), ["g", "d"]);
        assert_eq!(withdrawn(&nodes, &target, Some(IMAGE), &["d".to_string()]), ["g"]);
        assert_eq!(withdrawn(&nodes, &target, None, &[]), ["g", "d", "b"]);
    }

    #[test]
    fn failures_name_the_nodes_and_why() {
        let failed = [("worker-1".to_string(), "manifest unknown".to_string())];
        assert_eq!(
            failed_message(IMAGE, &failed),
            format!(
                "pulling OS image {IMAGE} ahead failed on 1 node(s), which are not updated until it succeeds: \
                 worker-1: manifest unknown"
            )
        );
    }
}
