//! The conditions of a MachineConfigNode as each step of an update sets them, and how a step
//! changes the status: upstream's upgrade monitor (`pkg/upgrademonitor`), for the `Default`
//! feature set. No IO: [`next_status`] is given what was read and returns what to write.
//!
//! A step sets a *parent* condition (the phase: `UpdatePrepared`, `UpdateExecuted`,
//! `UpdatePostActionComplete`, `UpdateComplete`, `Updated`, ...) and optionally a *child* (what
//! happened in it: `Cordoned`, `Drained`, `AppliedFilesAndOS`, `Uncordoned`). `Updated` (true
//! when an update is complete, false when a new one begins) sets every other condition that is not
//! false back to false, its message prefixed with the update it belonged to.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, OwnerReference, Time};
use mco_api::constants::{CURRENT_CONFIG_ANNOTATION, DESIRED_CONFIG_ANNOTATION};
use mco_api::{
    MachineConfigNodeSpec, MachineConfigNodeSpecMachineConfigVersion, MachineConfigNodeStatus,
    MachineConfigNodeStatusMachineConfigVersion, MachineConfigNodeStatusPinnedImageSet, NameReference,
};

/// What upstream writes for a config that is not known yet.
pub const NOT_YET_SET: &str = "not-yet-set";

/// The condition types (upstream `StateProgress`), as the API crate names them.
pub use mco_api::machineconfiguration::machine_config_node_condition as kind;

use kind::*;

/// Every condition a MachineConfigNode has once written, in upstream's order.
pub const ALL: [&str; 14] = [
    UPDATE_PREPARED,
    UPDATE_EXECUTED,
    UPDATE_POST_ACTION_COMPLETE,
    UPDATE_COMPLETE,
    RESUMED,
    DRAINED,
    APPLIED_FILES_AND_OS,
    CORDONED,
    REBOOTED_NODE,
    UPDATED,
    UNCORDONED,
    NODE_DEGRADED,
    PINNED_IMAGE_SETS_DEGRADED,
    PINNED_IMAGE_SETS_PROGRESSING,
];

/// Conditions that never have a child and are written even when unchanged.
const SINGLETONS: [&str; 2] = [PINNED_IMAGE_SETS_DEGRADED, PINNED_IMAGE_SETS_PROGRESSING];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    True,
    False,
    Unknown,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::True => "True",
            Status::False => "False",
            Status::Unknown => "Unknown",
        }
    }
}

/// One condition a step sets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Phase {
    pub kind: &'static str,
    pub status: Status,
    pub reason: String,
    pub message: String,
}

/// What one step of an update reports: the phase and, within it, what happened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Step {
    pub parent: Phase,
    pub child: Option<Phase>,
    /// The node's progress on its PinnedImageSets, written with the step (`None`: left as it is).
    pub pinned_image_sets: Option<Vec<MachineConfigNodeStatusPinnedImageSet>>,
}

fn phase(kind: &'static str, status: Status, reason: &str, message: String) -> Phase {
    Phase { kind, status, reason: reason.to_string(), message }
}

/// A parent with its reason set to the child's type, and the child with reason
/// `<parent><child>`, as upstream writes them.
fn nested(
    parent: &'static str,
    parent_status: Status,
    parent_message: &str,
    child: &'static str,
    child_status: Status,
    child_message: String,
) -> Step {
    Step {
        parent: phase(parent, parent_status, child, parent_message.to_string()),
        child: Some(phase(child, child_status, &format!("{parent}{child}"), child_message)),
        pinned_image_sets: None,
    }
}

fn single(kind: &'static str, status: Status, message: String) -> Step {
    Step { parent: phase(kind, status, kind, message), child: None, pinned_image_sets: None }
}

/// Go's `%v` of a `[]string`: `[a b]`.
fn go_list(items: &[String]) -> String {
    format!("[{}]", items.join(" "))
}

/// The steps, with upstream's types, reasons and messages.
impl Step {
    /// The daemon found a new desired config (`Updated` false: the rest is reset).
    pub fn needs_update(node: &str) -> Step {
        single(UPDATED, Status::False, format!("Node {node} needs an update"))
    }

    /// The node runs its desired config (`Updated` true: the rest is reset).
    pub fn updated(node: &str) -> Step {
        single(UPDATED, Status::True, format!("Node {node} Updated"))
    }

    /// The update can be applied. Upstream lists no actions here on a running cluster (it fills
    /// the list only at first boot); this lists the node disruption plan's actions.
    pub fn prepared(actions: &[String], drain: bool) -> Step {
        let message = format!("Update Compatible. Post Cfg Actions: {} Drain Required: {drain}", go_list(actions));
        single(UPDATE_PREPARED, Status::True, message)
    }

    /// The update cannot be applied (an unreconcilable change, a config that does not parse).
    pub fn incompatible(old: &str, new: &str, error: &str) -> Step {
        let message = format!(
            "Update Failed compatibility validation. MachineConfigs {old} and {new} are not compatible. Err: {error}"
        );
        single(UPDATE_PREPARED, Status::Unknown, message)
    }

    pub fn drain_not_required() -> Step {
        let message = "Node Drain Not required for this update.";
        nested(UPDATE_EXECUTED, Status::Unknown, message, DRAINED, Status::False, message.to_string())
    }

    /// `unschedulable`: what the Node said before it was cordoned.
    pub fn cordoned(unschedulable: bool) -> Step {
        nested(
            UPDATE_EXECUTED,
            Status::Unknown,
            "Cordoned Node as part of update executed phase",
            CORDONED,
            Status::True,
            format!("Cordoned node. The node is reporting Unschedulable = {unschedulable}"),
        )
    }

    pub fn cordon_failed(error: &str, unschedulable: bool) -> Step {
        nested(
            UPDATE_EXECUTED,
            Status::Unknown,
            "Failed to Cordon Node as part of In progress update phase",
            CORDONED,
            Status::Unknown,
            format!(
                "Error: Failed to Cordon node. Error is {error}, The node is reporting Unschedulable = {unschedulable}"
            ),
        )
    }

    /// `desired`/`last`: the node's `desiredDrain` and `lastAppliedDrain`.
    pub fn draining(desired: &str, last: &str) -> Step {
        nested(
            UPDATE_EXECUTED,
            Status::Unknown,
            "Draining Node as part of update executed phase",
            DRAINED,
            Status::Unknown,
            format!(
                "Draining node. The drain will not be complete until desired drainer {desired} matches current drainer {last}"
            ),
        )
    }

    pub fn drain_failed(error: &str, desired: &str, last: &str) -> Step {
        nested(
            UPDATE_EXECUTED,
            Status::Unknown,
            "Node Drain has not succeeded",
            DRAINED,
            Status::Unknown,
            format!(
                "Error: Node Drain has not succeeded. Error is: {error} The drain will not be complete until desired \
                 drainer {desired} matches current drainer {last}"
            ),
        )
    }

    pub fn drained(desired: &str) -> Step {
        nested(
            UPDATE_EXECUTED,
            Status::Unknown,
            "Drained Node as part of update executed phase",
            DRAINED,
            Status::True,
            format!("Drained node. The drain is complete as the desired drainer matches current drainer: {desired}"),
        )
    }

    /// `os`: the OS image, extensions or kernel type change; `ssh`: the passwd section or a file does.
    pub fn applying(os: bool, ssh: bool) -> Step {
        nested(
            UPDATE_EXECUTED,
            Status::Unknown,
            "Updating the Files and OS on disk as a part of the in progress phase",
            APPLIED_FILES_AND_OS,
            Status::Unknown,
            format!(
                "Applying files and new OS config to node. OS will {} need an update. SSH Keys will {} need an update",
                not(os),
                not(ssh)
            ),
        )
    }

    pub fn applied(os: bool, ssh: bool) -> Step {
        nested(
            UPDATE_EXECUTED,
            Status::True,
            "Updated the Files and OS on disk as a part of the in progress phase",
            APPLIED_FILES_AND_OS,
            Status::True,
            format!(
                "Applied files and new OS config to node. OS did {} need an update. SSH Keys did {} need an update",
                not(os),
                not(ssh)
            ),
        )
    }

    pub fn reboot_required() -> Step {
        single(REBOOTED_NODE, Status::Unknown, "Upgrade requires a reboot.".to_string())
    }

    pub fn no_reboot() -> Step {
        Step {
            parent: phase(
                UPDATE_POST_ACTION_COMPLETE,
                Status::True,
                "None",
                "Changes do not require a reboot".to_string(),
            ),
            child: None,
            pinned_image_sets: None,
        }
    }

    pub fn rebooted() -> Step {
        single(REBOOTED_NODE, Status::True, "Node has rebooted".to_string())
    }

    pub fn resumed(config: &str) -> Step {
        single(RESUMED, Status::True, format!("In desired config {config}. Resumed normal operations."))
    }

    pub fn uncordoned(unschedulable: bool) -> Step {
        nested(
            UPDATE_COMPLETE,
            Status::True,
            "Uncordoned Node as part of completing upgrade phase",
            UNCORDONED,
            Status::True,
            format!("UnCordoned node. The node is reporting Unschedulable = {unschedulable}"),
        )
    }

    pub fn uncordon_failed(error: &str, unschedulable: bool) -> Step {
        nested(
            UPDATE_COMPLETE,
            Status::Unknown,
            "Failed to Uncordon Node as part of completing upgrade phase",
            UNCORDONED,
            Status::Unknown,
            format!(
                "Error: Failed to UnCordon node. Error is: {error} The node is reporting Unschedulable = {unschedulable}"
            ),
        )
    }

    /// The outcome of an update: `Some(error)` degrades the node.
    pub fn degraded(node: &str, error: Option<&str>) -> Step {
        match error {
            None => single(NODE_DEGRADED, Status::False, format!("Node {node} upgrade succeeded")),
            Some(e) => single(NODE_DEGRADED, Status::True, format!("Node {node} upgrade failure. {e}")),
        }
    }

    /// The node pulls the images of its PinnedImageSets (`sets`: each at its desired generation).
    pub fn prefetching(node: &str, sets: Vec<MachineConfigNodeStatusPinnedImageSet>) -> Step {
        let message = format!("node is prefetching images: {node}");
        pinned(phase(PINNED_IMAGE_SETS_PROGRESSING, Status::True, "ImagePrefetch", message), sets)
    }

    /// Every image of the node's PinnedImageSets is pulled and pinned.
    pub fn prefetched(sets: Vec<MachineConfigNodeStatusPinnedImageSet>) -> Step {
        let message = "All pinned image sets complete".to_string();
        pinned(phase(PINNED_IMAGE_SETS_PROGRESSING, Status::False, "AsExpected", message), sets)
    }

    /// The PinnedImageSets are healthy again after a success.
    pub fn prefetch_healthy() -> Step {
        let parent = phase(PINNED_IMAGE_SETS_DEGRADED, Status::False, "AsExpected", "All is good".to_string());
        Step { parent, child: None, pinned_image_sets: None }
    }

    /// Pulling or pinning failed; `sets` carry the error.
    pub fn prefetch_failed(sets: Vec<MachineConfigNodeStatusPinnedImageSet>) -> Step {
        let message = "One or more PinnedImageSet is experiencing an error. See PinnedImageSet list for more details."
            .to_string();
        pinned(phase(PINNED_IMAGE_SETS_DEGRADED, Status::True, "PrefetchFailed", message), sets)
    }
}

fn pinned(parent: Phase, sets: Vec<MachineConfigNodeStatusPinnedImageSet>) -> Step {
    Step { parent, child: None, pinned_image_sets: Some(sets) }
}

/// Upstream's `updatesNeeded`: "not", or nothing (which leaves two spaces in its messages).
fn not(needed: bool) -> &'static str {
    if needed { "" } else { "not" }
}

fn condition(phase: &Phase, now: &Time) -> Condition {
    Condition {
        type_: phase.kind.to_string(),
        status: phase.status.as_str().to_string(),
        reason: phase.reason.clone(),
        message: phase.message.clone(),
        last_transition_time: now.clone(),
        observed_generation: None,
    }
}

/// The status after `step`, or `None` when nothing changes (the parent already says the same,
/// or the result equals `current`). `generation` and `spec_desired` are the MachineConfigNode's;
/// `annotations` the Node's (its desired and current config).
pub fn next_status(
    current: Option<&MachineConfigNodeStatus>,
    generation: i64,
    spec_desired: &str,
    annotations: &BTreeMap<String, String>,
    step: &Step,
    now: &Time,
) -> Option<MachineConfigNodeStatus> {
    let parent = condition(&step.parent, now);
    let child = step.child.as_ref().map(|c| condition(c, now));
    let mut status = current.cloned().unwrap_or_default();
    let conditions = match status.conditions.take().filter(|c| !c.is_empty()) {
        None => {
            let mut conditions: Vec<Condition> = std::iter::once(parent.clone()).chain(child.clone()).collect();
            for kind in ALL {
                if !conditions.iter().any(|c| c.type_ == kind) {
                    conditions.push(Condition {
                        type_: kind.to_string(),
                        status: Status::False.as_str().to_string(),
                        reason: "NotYetOccurred".to_string(),
                        message: format!("This node has not yet entered the {kind} phase"),
                        last_transition_time: now.clone(),
                        observed_generation: None,
                    });
                }
            }
            conditions
        }
        Some(mut conditions) => {
            let reset = step.parent.kind == UPDATED;
            let (mut found_parent, mut found_child) = (false, false);
            for c in &mut conditions {
                // Upstream's loop also means to turn a true `Updated` false here ("sensed disruption
                // via a manual update"), but writes the unchanged condition back over it: `Updated`
                // keeps its status until the daemon sets it, as there.
                if child.as_ref().is_some_and(|child| child.type_ == c.type_) {
                    found_child = true;
                    *c = child.clone().expect("matched a child");
                } else if c.type_ == parent.type_ {
                    found_parent = true;
                    let unchanged = c.status == parent.status && c.message == parent.message;
                    if unchanged && !SINGLETONS.contains(&c.type_.as_str()) {
                        return None;
                    }
                    *c = parent.clone();
                } else if reset && c.status != Status::False.as_str() {
                    c.status = Status::False.as_str().to_string();
                    c.last_transition_time = now.clone();
                    c.message = format!("Action during update to {spec_desired}: {}", c.message);
                }
            }
            if !found_child && let Some(child) = child {
                conditions.push(child);
            }
            if !found_parent {
                conditions.push(parent);
            }
            conditions
        }
    };
    let desired_annotation = annotations.get(DESIRED_CONFIG_ANNOTATION).filter(|d| !d.is_empty());
    // The desired config counts once the update is known to be applicable.
    let prepared = step.parent.kind == UPDATE_PREPARED;
    let desired = match desired_annotation {
        Some(d) if !prepared || step.parent.status == Status::True => d.clone(),
        _ => NOT_YET_SET.to_string(),
    };
    let current_config = annotations.get(CURRENT_CONFIG_ANNOTATION).filter(|c| !c.is_empty()).cloned();
    let previous_current = status.config_version.as_ref().and_then(|v| v.current.clone());
    status.config_version =
        Some(MachineConfigNodeStatusMachineConfigVersion { desired, current: current_config.or(previous_current) });
    status.conditions = Some(conditions);
    if let Some(sets) = &step.pinned_image_sets {
        status.pinned_image_sets = (!sets.is_empty()).then(|| sets.clone());
    }
    // Upstream's value: one more than the object's generation.
    status.observed_generation = Some(generation + 1);
    let unchanged = current.is_some_and(|old| same_status(old, &status));
    (!unchanged).then_some(status)
}

/// Equal but for the conditions' transition times (every step stamps them anew).
fn same_status(old: &MachineConfigNodeStatus, new: &MachineConfigNodeStatus) -> bool {
    let key = |s: &MachineConfigNodeStatus| -> Vec<(String, String, String, String)> {
        let mut conditions: Vec<_> = s
            .conditions
            .iter()
            .flatten()
            .map(|c| (c.type_.clone(), c.status.clone(), c.reason.clone(), c.message.clone()))
            .collect();
        conditions.sort();
        conditions
    };
    old.observed_generation == new.observed_generation
        && old.config_version == new.config_version
        && old.pinned_image_sets == new.pinned_image_sets
        && key(old) == key(new)
}

/// The spec the controller keeps for a Node of `pool`: its desired config (`not-yet-set` before
/// it has one).
pub fn spec_for(node: &str, pool: &str, annotations: &BTreeMap<String, String>) -> MachineConfigNodeSpec {
    let desired = annotations.get(DESIRED_CONFIG_ANNOTATION).filter(|d| !d.is_empty());
    MachineConfigNodeSpec {
        node: NameReference::new(node),
        pool: NameReference::new(pool),
        config_version: MachineConfigNodeSpecMachineConfigVersion {
            desired: desired.cloned().unwrap_or_else(|| NOT_YET_SET.to_string()),
        },
    }
}

/// The Node owns its MachineConfigNode: deleting the Node deletes it (the garbage collector).
pub fn owner_reference(node: &str, uid: &str) -> OwnerReference {
    OwnerReference {
        api_version: "v1".to_string(),
        kind: "Node".to_string(),
        name: node.to_string(),
        uid: uid.to_string(),
        ..Default::default()
    }
}

/// The phase a node is in, for `mco status`: a failure first, then the furthest step of the
/// update under way that is not false, else `Updated` (true or false).
pub fn current_phase(status: &MachineConfigNodeStatus) -> Option<&Condition> {
    const FURTHEST_FIRST: [&str; 9] = [
        NODE_DEGRADED,
        UPDATE_COMPLETE,
        RESUMED,
        REBOOTED_NODE,
        UPDATE_POST_ACTION_COMPLETE,
        APPLIED_FILES_AND_OS,
        DRAINED,
        CORDONED,
        UPDATE_PREPARED,
    ];
    let conditions = status.conditions.as_deref().unwrap_or_default();
    let of = |kind: &str| conditions.iter().find(|c| c.type_ == kind);
    if of(UPDATED).is_some_and(|c| c.status == Status::True.as_str())
        && of(NODE_DEGRADED).is_none_or(|c| c.status != Status::True.as_str())
    {
        return of(UPDATED);
    }
    FURTHEST_FIRST
        .iter()
        .filter_map(|kind| of(kind))
        .find(|c| c.status != Status::False.as_str())
        .or_else(|| of(UPDATED))
}
