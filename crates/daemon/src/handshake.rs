//! What the daemon does next, from its Node's annotations and the config recorded on disk (pure).
//!
//! The daemon and the controller talk only through Node annotations
//! (`docs/behaviour.md#the-node-handshake`): the node controller sets `desiredConfig`; the daemon
//! sets `state`, asks for a drain with `desiredDrain=drain-<desired>`, applies once the drain
//! controller has copied the request to `lastAppliedDrain`, reboots or finishes in place, asks for
//! `uncordon-<config>`, and then records `currentConfig` with state `Done`. Every decision is
//! re-made from the annotations, so a daemon that restarts (or "reboots") at any point picks up
//! where it was.

use std::collections::BTreeMap;

use mco_api::constants::{
    CURRENT_CONFIG_ANNOTATION, DESIRED_CONFIG_ANNOTATION, DESIRED_DRAIN_ANNOTATION, DESIRED_IMAGE_ANNOTATION,
    DRAIN_PREFIX, LAST_APPLIED_DRAIN_ANNOTATION, STATE_ANNOTATION, STATE_DEGRADED, STATE_DONE, STATE_UNRECONCILABLE,
    STATE_WORKING, UNCORDON_PREFIX,
};

/// `ControllerConfig.spec.infra.status.controlPlaneTopology` of a single-node cluster: nothing to drain to.
pub const SINGLE_REPLICA_TOPOLOGY: &str = "SingleReplica";

/// What the daemon knows when it decides.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Observed<'a> {
    /// `currentConfig`.
    pub current: Option<&'a str>,
    /// `desiredConfig`.
    pub desired: Option<&'a str>,
    /// `state`; missing counts as Done (upstream `getNodeAnnotationExt` default).
    pub state: Option<&'a str>,
    pub desired_drain: Option<&'a str>,
    pub last_applied_drain: Option<&'a str>,
    /// The config the last apply recorded on disk: after a reboot it is the truth, and it wins
    /// over `currentConfig` (which an etcd restore may have rolled back).
    pub on_disk: Option<&'a str>,
    /// The layered OS image the node runs (recorded with the on-disk config), if any.
    pub current_image: Option<&'a str>,
    /// `desiredImage` (on-cluster layering; empty counts as none).
    pub desired_image: Option<&'a str>,
    /// `/run/machine-config-daemon-force` exists: re-apply the desired config even if it runs.
    pub force: bool,
    /// The first pass of this process: a node on its desired config still goes through the
    /// uncordon handshake (upstream `checkStateOnFirstRun` → `updateConfigAndState`).
    pub booting: bool,
}

impl<'a> Observed<'a> {
    /// The annotation fields of `annotations`; the rest is left for the caller.
    pub fn from_annotations(annotations: &'a BTreeMap<String, String>) -> Self {
        let get = |key: &str| annotations.get(key).map(String::as_str);
        Observed {
            current: get(CURRENT_CONFIG_ANNOTATION),
            desired: get(DESIRED_CONFIG_ANNOTATION),
            state: get(STATE_ANNOTATION),
            desired_drain: get(DESIRED_DRAIN_ANNOTATION),
            last_applied_drain: get(LAST_APPLIED_DRAIN_ANNOTATION),
            desired_image: get(DESIRED_IMAGE_ANNOTATION).filter(|i| !i.is_empty()),
            ..Observed::default()
        }
    }

    /// The config the node runs: on disk if recorded there, else the annotation.
    pub fn running(&self) -> Option<&'a str> {
        self.on_disk.or(self.current)
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Next {
    /// The node controller has not given the node a `desiredConfig` yet.
    NoTarget,
    /// The drain controller has not answered this `desiredDrain` yet.
    WaitForDrain(String),
    /// The node runs its desired config and says so.
    Idle,
    /// The node runs its desired config: write `desiredDrain=uncordon-<config>`.
    RequestUncordon(String),
    /// The uncordon is answered: `currentConfig=<config>`, state Done, reason "".
    SetDone(String),
    /// Move the node from `from` (`None`: nothing is known, start from an empty config) to `to`.
    Update { from: Option<String>, to: String },
}

pub fn next(o: &Observed<'_>) -> Next {
    if let Some(requested) = o.desired_drain
        && o.last_applied_drain != Some(requested)
    {
        return Next::WaitForDrain(requested.to_string());
    }
    let Some(desired) = o.desired else {
        return Next::NoTarget;
    };
    let running = o.running();
    // A layered pool moves its nodes to a built image under the same rendered config; a pool
    // that stops being layered moves them back.
    if running != Some(desired) || o.force || o.current_image != o.desired_image {
        return Next::Update { from: running.map(str::to_string), to: desired.to_string() };
    }
    let done = o.state.unwrap_or(STATE_DONE) == STATE_DONE && o.current == Some(desired);
    let cordoned = o.desired_drain.is_some_and(|d| d.starts_with(DRAIN_PREFIX));
    if done && !cordoned && !o.booting {
        return Next::Idle;
    }
    if o.desired_drain != Some(uncordon_request(desired).as_str()) {
        return Next::RequestUncordon(desired.to_string());
    }
    Next::SetDone(desired.to_string())
}

/// One step of an update, once it is known to be applicable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UpdateStep {
    /// Say the node is updating (`state=Working`).
    SetWorking,
    /// Write this `desiredDrain` and wait for the drain controller.
    RequestDrain(String),
    /// Write the config (and reboot if it needs one).
    Apply,
}

/// `drain`: the update needs a drain ([`drain_required`]).
pub fn update_step(state: Option<&str>, desired_drain: Option<&str>, to: &str, drain: bool) -> UpdateStep {
    // A node that failed keeps its Degraded/Unreconcilable state (and reason) until it succeeds.
    if !matches!(state, Some(STATE_WORKING | STATE_DEGRADED | STATE_UNRECONCILABLE)) {
        return UpdateStep::SetWorking;
    }
    let request = drain_request(to);
    if drain && desired_drain != Some(request.as_str()) {
        return UpdateStep::RequestDrain(request);
    }
    UpdateStep::Apply
}

/// Whether the node drains before an update whose disruption plan says `plan_drain`: a
/// single-node cluster never drains (there is nowhere to move the workloads).
pub fn drain_required(plan_drain: bool, topology: Option<&str>) -> bool {
    plan_drain && topology != Some(SINGLE_REPLICA_TOPOLOGY)
}

pub fn drain_request(config: &str) -> String {
    format!("{DRAIN_PREFIX}{config}")
}

pub fn uncordon_request(config: &str) -> String {
    format!("{UNCORDON_PREFIX}{config}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn update(from: Option<&str>, to: &str) -> Next {
        Next::Update { from: from.map(str::to_string), to: to.to_string() }
    }

    #[test]
    fn next_follows_the_handshake() {
        let done_a = Observed {
            current: Some("a"),
            desired: Some("a"),
            state: Some(STATE_DONE),
            desired_drain: Some("uncordon-a"),
            last_applied_drain: Some("uncordon-a"),
            on_disk: Some("a"),
            ..Observed::default()
        };
        let cases: Vec<(&str, Observed, Next)> = vec![
            ("settled", done_a, Next::Idle),
            ("no state counts as Done", Observed { state: None, ..done_a }, Next::Idle),
            ("not targeted yet", Observed { desired: None, ..done_a }, Next::NoTarget),
            ("new target", Observed { desired: Some("b"), ..done_a }, update(Some("a"), "b")),
            (
                "the on-disk config wins over currentConfig",
                Observed { current: Some("old"), desired: Some("b"), ..done_a },
                update(Some("a"), "b"),
            ),
            (
                "nothing on disk: currentConfig",
                Observed { on_disk: None, desired: Some("b"), ..done_a },
                update(Some("a"), "b"),
            ),
            (
                "nothing known",
                Observed { on_disk: None, current: None, desired: Some("b"), ..done_a },
                update(None, "b"),
            ),
            ("force file re-applies", Observed { force: true, ..done_a }, update(Some("a"), "a")),
            (
                "drain requested, not answered",
                Observed { desired: Some("b"), desired_drain: Some("drain-b"), ..done_a },
                Next::WaitForDrain("drain-b".into()),
            ),
            (
                "drain answered",
                Observed {
                    desired: Some("b"),
                    state: Some(STATE_WORKING),
                    desired_drain: Some("drain-b"),
                    last_applied_drain: Some("drain-b"),
                    ..done_a
                },
                update(Some("a"), "b"),
            ),
            (
                "after the reboot: uncordon",
                Observed {
                    desired: Some("b"),
                    on_disk: Some("b"),
                    state: Some(STATE_WORKING),
                    desired_drain: Some("drain-b"),
                    last_applied_drain: Some("drain-b"),
                    ..done_a
                },
                Next::RequestUncordon("b".into()),
            ),
            (
                "uncordon answered",
                Observed {
                    desired: Some("b"),
                    on_disk: Some("b"),
                    state: Some(STATE_WORKING),
                    desired_drain: Some("uncordon-b"),
                    last_applied_drain: Some("uncordon-b"),
                    ..done_a
                },
                Next::SetDone("b".into()),
            ),
            (
                "rebootless update without a drain: uncordon anyway",
                Observed { desired: Some("b"), on_disk: Some("b"), state: Some(STATE_WORKING), ..done_a },
                Next::RequestUncordon("b".into()),
            ),
            (
                "retargeted back to the running config after a failure",
                Observed {
                    state: Some(STATE_DEGRADED),
                    desired_drain: Some("drain-b"),
                    last_applied_drain: Some("drain-b"),
                    ..done_a
                },
                Next::RequestUncordon("a".into()),
            ),
            (
                "Done but left cordoned",
                Observed { desired_drain: Some("drain-a"), last_applied_drain: Some("drain-a"), ..done_a },
                Next::RequestUncordon("a".into()),
            ),
            ("booting: uncordon handshake", Observed { booting: true, desired_drain: None, ..done_a }, {
                Next::RequestUncordon("a".into())
            }),
            ("booting, uncordon answered", Observed { booting: true, ..done_a }, Next::SetDone("a".into())),
            ("currentConfig lags the disk", Observed { current: Some("old"), ..done_a }, Next::SetDone("a".into())),
            ("layered: the built image", Observed { desired_image: Some("img@1"), ..done_a }, update(Some("a"), "a")),
            (
                "layered: running the built image",
                Observed { current_image: Some("img@1"), desired_image: Some("img@1"), ..done_a },
                Next::Idle,
            ),
            (
                "layered: a new build",
                Observed { current_image: Some("img@1"), desired_image: Some("img@2"), ..done_a },
                update(Some("a"), "a"),
            ),
            ("no longer layered: back to the config's image", Observed { current_image: Some("img@1"), ..done_a }, {
                update(Some("a"), "a")
            }),
            (
                "layered: after the reboot into the image, uncordon",
                Observed {
                    current_image: Some("img@1"),
                    desired_image: Some("img@1"),
                    state: Some(STATE_WORKING),
                    desired_drain: Some("drain-a"),
                    last_applied_drain: Some("drain-a"),
                    ..done_a
                },
                Next::RequestUncordon("a".into()),
            ),
        ];
        for (what, observed, want) in cases {
            assert_eq!(next(&observed), want, "{what}");
        }
    }

    #[test]
    fn update_steps() {
        let cases = [
            ("Done: Working first", Some(STATE_DONE), None, true, UpdateStep::SetWorking),
            ("no state: Working first", None, None, false, UpdateStep::SetWorking),
            ("drain", Some(STATE_WORKING), Some("uncordon-a"), true, UpdateStep::RequestDrain("drain-b".into())),
            ("drain answered", Some(STATE_WORKING), Some("drain-b"), true, UpdateStep::Apply),
            ("no drain needed", Some(STATE_WORKING), Some("uncordon-a"), false, UpdateStep::Apply),
            ("Degraded stays Degraded", Some(STATE_DEGRADED), Some("drain-b"), true, UpdateStep::Apply),
            (
                "Unreconcilable stays Unreconcilable",
                Some(STATE_UNRECONCILABLE),
                None,
                true,
                UpdateStep::RequestDrain("drain-b".into()),
            ),
            (
                "a drain for another config",
                Some(STATE_DEGRADED),
                Some("drain-c"),
                true,
                UpdateStep::RequestDrain("drain-b".into()),
            ),
        ];
        for (what, state, desired_drain, drain, want) in cases {
            assert_eq!(update_step(state, desired_drain, "b", drain), want, "{what}");
        }
    }

    #[test]
    fn single_replica_never_drains() {
        let cases = [
            (true, None, true),
            (true, Some("HighlyAvailable"), true),
            (true, Some(SINGLE_REPLICA_TOPOLOGY), false),
            (false, None, false),
        ];
        for (plan, topology, want) in cases {
            assert_eq!(drain_required(plan, topology), want, "{plan} {topology:?}");
        }
    }
}
