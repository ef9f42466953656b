//! The drain controller's decisions (§3.5 step 3): what a node's `desiredDrain` asks for, and
//! how a failing drain is retried and reported. The controller cordons, evicts through the
//! eviction API (so PodDisruptionBudgets hold) and writes `lastAppliedDrain`.

use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use mco_api::constants::{DESIRED_DRAIN_ANNOTATION, LAST_APPLIED_DRAIN_ANNOTATION};

use crate::node::annotation;

/// What the daemon asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Request {
    /// Cordon and evict every pod (but DaemonSet pods).
    Drain,
    /// Make the node schedulable again.
    Uncordon,
}

/// A `desiredDrain` value the controller does not understand.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("node {node}: unknown drain request {value:?} (expected drain-<config> or uncordon-<config>)")]
pub struct UnknownRequest {
    pub node: String,
    pub value: String,
}

/// The pending request of a node: `None` when `desiredDrain` equals `lastAppliedDrain` (or is
/// unset). The verb is the text before the first `-`.
pub fn pending(node: &Node) -> Result<Option<Request>, UnknownRequest> {
    let Some(desired) = annotation(node, DESIRED_DRAIN_ANNOTATION) else { return Ok(None) };
    if Some(desired) == annotation(node, LAST_APPLIED_DRAIN_ANNOTATION) {
        return Ok(None);
    }
    match desired.split_once('-').map(|(verb, _)| verb) {
        Some("drain") => Ok(Some(Request::Drain)),
        Some("uncordon") => Ok(Some(Request::Uncordon)),
        _ => Err(UnknownRequest { node: crate::node::name(node).to_string(), value: desired.to_string() }),
    }
}

/// After a failed drain attempt that began `failing_for` ago: when to retry, and which warning
/// to raise (once each threshold is crossed, upstream raises it on every later failure too).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Retry {
    pub after: Duration,
    pub event: Option<&'static str>,
}

const THRESHOLD: Duration = Duration::from_secs(10 * 60);
const GIVE_UP_REPORTING: Duration = Duration::from_secs(60 * 60);

pub fn retry(failing_for: Duration) -> Retry {
    if failing_for >= GIVE_UP_REPORTING {
        // Reported as failed (and counted in mcc_drain_err), but still retried: the node cannot
        // move on without the drain, and an administrator may fix the blocking pod any time.
        Retry { after: Duration::from_secs(5 * 60), event: Some("DrainFailed") }
    } else if failing_for >= THRESHOLD {
        Retry { after: Duration::from_secs(5 * 60), event: Some("DrainThresholdExceeded") }
    } else {
        Retry { after: Duration::from_secs(60), event: None }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn node(desired: Option<&str>, last: Option<&str>) -> Node {
        let mut annotations = serde_json::Map::new();
        if let Some(d) = desired {
            annotations.insert(DESIRED_DRAIN_ANNOTATION.into(), json!(d));
        }
        if let Some(l) = last {
            annotations.insert(LAST_APPLIED_DRAIN_ANNOTATION.into(), json!(l));
        }
        serde_json::from_value(json!({"metadata": {"name": "n", "annotations": annotations}})).unwrap()
    }

    #[test]
    fn requests() {
        let cases = [
            (None, None, Ok(None)),
            (Some("drain-rendered-worker-1"), None, Ok(Some(Request::Drain))),
            (Some("drain-rendered-worker-1"), Some("drain-rendered-worker-1"), Ok(None)),
            (Some("uncordon-rendered-worker-1"), Some("drain-rendered-worker-1"), Ok(Some(Request::Uncordon))),
            (Some("drain-"), None, Ok(Some(Request::Drain))),
            (Some("reboot-rendered-worker-1"), None, Err(())),
            (Some("drain"), None, Err(())),
        ];
        for (desired, last, want) in cases {
            assert_eq!(pending(&node(desired, last)).map_err(|_| ()), want, "{desired:?} {last:?}");
        }
        assert_eq!(
            pending(&node(Some("reboot-x"), None)).unwrap_err().to_string(),
            "node n: unknown drain request \"reboot-x\" (expected drain-<config> or uncordon-<config>)"
        );
    }

    #[test]
    fn retries() {
        let minutes = |m: u64| Duration::from_secs(m * 60);
        let cases = [
            (0, 1, None),
            (9, 1, None),
            (10, 5, Some("DrainThresholdExceeded")),
            (59, 5, Some("DrainThresholdExceeded")),
            (60, 5, Some("DrainFailed")),
            (600, 5, Some("DrainFailed")),
        ];
        for (failing, after, event) in cases {
            assert_eq!(retry(minutes(failing)), Retry { after: minutes(after), event }, "{failing} min");
        }
    }
}
