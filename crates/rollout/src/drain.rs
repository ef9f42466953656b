//! The drain controller's decisions: what a node's `desiredDrain` asks for, and
//! how a failing drain is retried and reported. The controller cordons, evicts through the
//! eviction API (so PodDisruptionBudgets hold) and writes `lastAppliedDrain`.

use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Pod};
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

/// How a failing drain is retried and reported; the defaults are upstream's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Wait before the next attempt while the drain has not been failing for long.
    pub delay: Duration,
    /// After failing this long, retry less often and warn (`DrainThresholdExceeded`).
    pub failing_threshold: Duration,
    /// Wait before the next attempt past the threshold.
    pub failing_delay: Duration,
    /// After this long, report the drain as failed (`DrainFailed`) at each attempt, but keep
    /// retrying: the node cannot move on without the drain, and an administrator may fix the
    /// blocking pod any time.
    pub timeout: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            delay: Duration::from_secs(60),
            failing_threshold: Duration::from_secs(10 * 60),
            failing_delay: Duration::from_secs(5 * 60),
            timeout: Duration::from_secs(60 * 60),
        }
    }
}

/// A warning event about a drain: its reason and message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Warning {
    pub reason: &'static str,
    pub message: String,
}

impl RetryPolicy {
    /// Before an attempt on a drain that began `draining_for` ago: `DrainFailed` once past the
    /// timeout.
    pub fn before_attempt(&self, node: &str, draining_for: Duration) -> Option<Warning> {
        (draining_for > self.timeout).then(|| Warning {
            reason: "DrainFailed",
            message: format!("node {node}: drain exceeded timeout: {}. Will continue to retry.", human(self.timeout)),
        })
    }

    /// After a failed attempt on a drain that began `draining_for` ago (measured before the
    /// attempt, as upstream does): when to retry, and the warning past the threshold.
    pub fn after_failure(&self, draining_for: Duration, error: &str) -> (Duration, Option<Warning>) {
        if draining_for > self.failing_threshold {
            let message = format!(
                "Drain failed. Drain has been failing for more than {} minutes. Waiting {} minutes then retrying. \
                 Error message from drain: {error}",
                minutes(self.failing_threshold),
                minutes(self.failing_delay)
            );
            (self.failing_delay, Some(Warning { reason: "DrainThresholdExceeded", message }))
        } else {
            (self.delay, None)
        }
    }
}

/// Minutes as Go's `Duration.Minutes()` prints them (`10`, `0.5`).
fn minutes(d: Duration) -> String {
    let m = d.as_secs_f64() / 60.0;
    if m.fract() == 0.0 { format!("{m:.0}") } else { format!("{m}") }
}

/// A duration as Go prints whole hours, minutes and seconds (`1h0m0s`, `10m0s`, `30s`).
fn human(d: Duration) -> String {
    let s = d.as_secs();
    match (s / 3600, s / 60 % 60, s % 60) {
        (0, 0, sec) => format!("{sec}s"),
        (0, min, sec) => format!("{min}m{sec}s"),
        (h, min, sec) => format!("{h}h{min}m{sec}s"),
    }
}

/// Annotation the kubelet puts on mirror pods (static pods it reflects into the API).
const MIRROR_POD_ANNOTATION: &str = "kubernetes.io/config.mirror";

/// The pods a drain evicts, as `kubectl drain --force --ignore-daemonsets
/// --delete-emptydir-data` chooses them: all but DaemonSet-owned pods (their controller would
/// recreate them on the node at once) and mirror pods (the kubelet owns them; evicting the mirror
/// does not stop the static pod). Unmanaged pods and pods with emptyDir data are evicted too.
pub fn pods_to_evict(pods: &[Pod]) -> Vec<&Pod> {
    pods.iter()
        .filter(|p| !p.metadata.annotations.as_ref().is_some_and(|a| a.contains_key(MIRROR_POD_ANNOTATION)))
        .filter(|p| {
            !p.metadata.owner_references.iter().flatten().any(|o| o.controller == Some(true) && o.kind == "DaemonSet")
        })
        .collect()
}

/// The pods a drain evicts ([`pods_to_evict`]) in two waves: every other pod, then, once those
/// are gone, the drain controller's own pod (`own`: namespace and name) when it runs on the node.
/// A controller that evicted itself with the rest would stop with evictions in flight, and the API
/// server records an eviction in the disruption budget before it deletes the pod: a request cut
/// between the two leaves the budget counting a disruption that never happened, which holds every
/// drain behind it until the disruption controller drops it two minutes later.
pub fn eviction_waves<'a>(pods: &'a [Pod], own: Option<(&str, &str)>) -> [Vec<&'a Pod>; 2] {
    let is_own = |pod: &&Pod| {
        own.is_some_and(|(namespace, name)| {
            pod.metadata.namespace.as_deref() == Some(namespace) && pod.metadata.name.as_deref() == Some(name)
        })
    };
    let (own, others): (Vec<&Pod>, Vec<&Pod>) = pods_to_evict(pods).into_iter().partition(is_own);
    [others, own]
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
        let policy = RetryPolicy::default();
        // (draining for, retry after, warning reason)
        let cases = [
            (0, 1, None),
            (10, 1, None),
            (11, 5, Some("DrainThresholdExceeded")),
            (61, 5, Some("DrainThresholdExceeded")),
        ];
        for (draining, after, reason) in cases {
            let (got_after, warning) = policy.after_failure(minutes(draining), "boom");
            assert_eq!((got_after, warning.map(|w| w.reason)), (minutes(after), reason), "{draining} min");
        }
        assert_eq!(
            policy.after_failure(minutes(11), "Cannot evict pod as it would violate the pod's disruption budget.").1,
            Some(Warning {
                reason: "DrainThresholdExceeded",
                message: "Drain failed. Drain has been failing for more than 10 minutes. Waiting 5 minutes then \
                          retrying. Error message from drain: Cannot evict pod as it would violate the pod's \
                          disruption budget."
                    .into()
            })
        );
        assert_eq!(policy.before_attempt("n", minutes(60)), None);
        assert_eq!(
            policy.before_attempt("n", minutes(61)),
            Some(Warning {
                reason: "DrainFailed",
                message: "node n: drain exceeded timeout: 1h0m0s. Will continue to retry.".into()
            })
        );
        let fast =
            RetryPolicy { failing_threshold: Duration::from_secs(2), failing_delay: Duration::from_secs(30), ..policy };
        let message = fast.after_failure(Duration::from_secs(3), "x").1.unwrap().message;
        assert!(
            message.starts_with(
                "Drain failed. Drain has been failing for more than 0.03333333333333333 minutes. Waiting 0.5 minutes"
            ),
            "{message}"
        );
    }

    #[test]
    fn pods_a_drain_evicts() {
        let pod = |name: &str, extra: serde_json::Value| -> Pod {
            let mut v = json!({"metadata": {"name": name, "namespace": "ns"}});
            v["metadata"].as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
            serde_json::from_value(v).unwrap()
        };
        let owner = |kind: &str, controller: bool| json!({"ownerReferences": [{"apiVersion": "apps/v1", "kind": kind, "name": "o", "uid": "u", "controller": controller}]});
        let pods = [
            pod("bare", json!({})),
            pod("replica", owner("ReplicaSet", true)),
            pod("daemon", owner("DaemonSet", true)),
            pod("daemon-not-controller", owner("DaemonSet", false)),
            pod("mirror", json!({"annotations": {"kubernetes.io/config.mirror": "abc"}})),
        ];
        let names: Vec<_> = pods_to_evict(&pods).iter().map(|p| p.metadata.name.clone().unwrap()).collect();
        assert_eq!(names, ["bare", "replica", "daemon-not-controller"]);
    }

    #[test]
    fn the_controllers_own_pod_is_evicted_last() {
        let pod = |namespace: &str, name: &str| -> Pod {
            serde_json::from_value(json!({"metadata": {"name": name, "namespace": namespace}})).unwrap()
        };
        let daemon: Pod = serde_json::from_value(json!({"metadata": {"name": "mcd", "namespace": "mco",
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "d", "uid": "u", "controller": true}]}}))
        .unwrap();
        let pods = [pod("app", "web"), pod("mco", "controller-1"), daemon, pod("other", "controller-1")];
        let names = |wave: &[&Pod]| -> Vec<String> {
            let name =
                |p: &&Pod| format!("{}/{}", p.metadata.namespace.clone().unwrap(), p.metadata.name.clone().unwrap());
            wave.iter().map(name).collect()
        };
        let owned = |names: Vec<&str>| -> Vec<String> { names.into_iter().map(String::from).collect() };
        // (what, the controller's own pod, the first wave, the last)
        let everything = vec!["app/web", "mco/controller-1", "other/controller-1"];
        let cases = [
            (
                "on the node",
                Some(("mco", "controller-1")),
                vec!["app/web", "other/controller-1"],
                vec!["mco/controller-1"],
            ),
            ("elsewhere", Some(("mco", "controller-2")), everything.clone(), vec![]),
            ("not in a pod", None, everything, vec![]),
        ];
        for (what, own, first, last) in cases {
            let [first_wave, last_wave] = eviction_waves(&pods, own);
            assert_eq!((names(&first_wave), names(&last_wave)), (owned(first), owned(last)), "{what}");
        }
    }
}
