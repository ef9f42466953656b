//! The conditions each step leaves on a MachineConfigNode, step by step through whole updates,
//! with upstream's types, reasons and messages.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use mco_api::MachineConfigNodeStatus;
use mco_api::constants::{CURRENT_CONFIG_ANNOTATION, DESIRED_CONFIG_ANNOTATION};
use mco_mcn::Step;
use mco_mcn::progress::{ALL, NOT_YET_SET, current_phase, next_status, owner_reference, spec_for};

fn at(second: i64) -> Time {
    Time(Timestamp::from_second(1_790_000_000 + second).unwrap())
}

fn annotations(current: &str, desired: &str) -> BTreeMap<String, String> {
    [(CURRENT_CONFIG_ANNOTATION, current), (DESIRED_CONFIG_ANNOTATION, desired)]
        .into_iter()
        .filter(|(_, v)| !v.is_empty())
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// `type -> (status, reason, message)`.
fn conditions(status: &MachineConfigNodeStatus) -> BTreeMap<String, (String, String, String)> {
    status
        .conditions
        .iter()
        .flatten()
        .map(|c| (c.type_.clone(), (c.status.clone(), c.reason.clone(), c.message.clone())))
        .collect()
}

fn status_of(status: &MachineConfigNodeStatus, kind: &str) -> String {
    conditions(status)[kind].0.clone()
}

/// The statuses that are not False, as `Type=Status`, sorted.
fn not_false(status: &MachineConfigNodeStatus) -> Vec<String> {
    conditions(status).into_iter().filter(|(_, c)| c.0 != "False").map(|(t, c)| format!("{t}={}", c.0)).collect()
}

#[test]
fn the_first_write_lists_every_condition() {
    let step = Step::needs_update("worker-0");
    let status = next_status(None, 1, "rendered-b", &annotations("rendered-a", "rendered-b"), &step, &at(0)).unwrap();
    let all = conditions(&status);
    assert_eq!(all.len(), ALL.len());
    assert_eq!(all["Updated"], ("False".into(), "Updated".into(), "Node worker-0 needs an update".into()));
    assert_eq!(
        all["Drained"],
        ("False".into(), "NotYetOccurred".into(), "This node has not yet entered the Drained phase".into())
    );
    let version = status.config_version.unwrap();
    assert_eq!((version.current.as_deref(), version.desired.as_str()), (Some("rendered-a"), "rendered-b"));
    assert_eq!(status.observed_generation, Some(2), "upstream writes the generation plus one");
}

#[test]
fn the_same_parent_again_writes_nothing() {
    let notes = annotations("rendered-a", "rendered-b");
    let step = Step::prepared(&["Reboot".into()], true);
    let first = next_status(None, 1, "rendered-b", &notes, &step, &at(0)).unwrap();
    assert_eq!(next_status(Some(&first), 1, "rendered-b", &notes, &step, &at(5)), None);
    // A new message is a change.
    let other = Step::prepared(&["None".into()], false);
    let second = next_status(Some(&first), 1, "rendered-b", &notes, &other, &at(5)).unwrap();
    assert_eq!(
        conditions(&second)["UpdatePrepared"].2,
        "Update Compatible. Post Cfg Actions: [None] Drain Required: false"
    );
}

#[test]
fn the_desired_config_counts_once_the_update_is_known_applicable() {
    let notes = annotations("rendered-a", "rendered-b");
    let incompatible = Step::incompatible("rendered-a", "rendered-b", "ignition kernelArguments cannot change");
    let status = next_status(None, 1, "rendered-b", &notes, &incompatible, &at(0)).unwrap();
    assert_eq!(status.config_version.as_ref().unwrap().desired, NOT_YET_SET);
    assert_eq!(
        conditions(&status)["UpdatePrepared"],
        (
            "Unknown".into(),
            "UpdatePrepared".into(),
            "Update Failed compatibility validation. MachineConfigs rendered-a and rendered-b are not compatible. \
             Err: ignition kernelArguments cannot change"
                .into()
        )
    );
    let prepared = Step::prepared(&[], true);
    let status = next_status(Some(&status), 1, "rendered-b", &notes, &prepared, &at(1)).unwrap();
    assert_eq!(status.config_version.as_ref().unwrap().desired, "rendered-b");
    // Any other step reports the Node's desired config, if it has one.
    let status = next_status(None, 1, NOT_YET_SET, &annotations("", ""), &Step::rebooted(), &at(0)).unwrap();
    assert_eq!(status.config_version.as_ref().unwrap().desired, NOT_YET_SET);
    assert_eq!(status.config_version.as_ref().unwrap().current, None);
}

/// A drain-and-reboot update as the daemon and the drain controller report it, then the next.
#[test]
fn a_reboot_update_step_by_step() {
    let node = "worker-0";
    let before = annotations("rendered-a", "rendered-b");
    let after = annotations("rendered-b", "rendered-b");
    #[rustfmt::skip]
    let steps: Vec<(Step, &BTreeMap<String, String>, &[&str])> = vec![
        (Step::needs_update(node), &before, &[]),
        (Step::prepared(&["Reboot".into()], true), &before, &["UpdatePrepared=True"]),
        (Step::cordoned(false), &before, &["Cordoned=True", "UpdateExecuted=Unknown", "UpdatePrepared=True"]),
        (Step::draining("drain-rendered-b", "uncordon-rendered-a"), &before,
            &["Cordoned=True", "Drained=Unknown", "UpdateExecuted=Unknown", "UpdatePrepared=True"]),
        (Step::drained("drain-rendered-b"), &before,
            &["Cordoned=True", "Drained=True", "UpdateExecuted=Unknown", "UpdatePrepared=True"]),
        (Step::applying(true, true), &before,
            &["AppliedFilesAndOS=Unknown", "Cordoned=True", "Drained=True", "UpdateExecuted=Unknown", "UpdatePrepared=True"]),
        (Step::applied(true, true), &before,
            &["AppliedFilesAndOS=True", "Cordoned=True", "Drained=True", "UpdateExecuted=True", "UpdatePrepared=True"]),
        (Step::degraded(node, None), &before,
            &["AppliedFilesAndOS=True", "Cordoned=True", "Drained=True", "UpdateExecuted=True", "UpdatePrepared=True"]),
        (Step::reboot_required(), &before,
            &["AppliedFilesAndOS=True", "Cordoned=True", "Drained=True", "RebootedNode=Unknown", "UpdateExecuted=True", "UpdatePrepared=True"]),
        (Step::rebooted(), &before,
            &["AppliedFilesAndOS=True", "Cordoned=True", "Drained=True", "RebootedNode=True", "UpdateExecuted=True", "UpdatePrepared=True"]),
        (Step::uncordoned(true), &before,
            &["AppliedFilesAndOS=True", "Cordoned=True", "Drained=True", "RebootedNode=True", "Uncordoned=True", "UpdateComplete=True", "UpdateExecuted=True", "UpdatePrepared=True"]),
        (Step::resumed("rendered-b"), &after,
            &["AppliedFilesAndOS=True", "Cordoned=True", "Drained=True", "RebootedNode=True", "Resumed=True", "Uncordoned=True", "UpdateComplete=True", "UpdateExecuted=True", "UpdatePrepared=True"]),
        (Step::updated(node), &after, &["Updated=True"]),
    ];
    let mut status: Option<MachineConfigNodeStatus> = None;
    for (i, (step, notes, expected)) in steps.iter().enumerate() {
        let next = next_status(status.as_ref(), 1, "rendered-b", notes, step, &at(i as i64))
            .unwrap_or_else(|| panic!("step {i} ({}) wrote nothing", step.parent.kind));
        assert_eq!(not_false(&next), *expected, "after step {i} ({} {:?})", step.parent.kind, step.child);
        status = Some(next);
    }
    let status = status.unwrap();
    let all = conditions(&status);
    assert_eq!(
        all["Drained"].2,
        "Action during update to rendered-b: Drained node. The drain is complete as the desired drainer matches \
         current drainer: drain-rendered-b",
        "Updated resets the rest, naming the update"
    );
    assert_eq!(all["Drained"].1, "UpdateExecutedDrained", "a child's reason is parent + child");
    assert_eq!(all["UpdateExecuted"].1, "AppliedFilesAndOS", "a parent's reason is its latest child");
    assert_eq!(all["NodeDegraded"].2, "Node worker-0 upgrade succeeded");
    assert_eq!(
        all["AppliedFilesAndOS"].2,
        "Action during update to rendered-b: Applied files and new OS config to node. OS did  need an update. SSH \
         Keys did  need an update"
    );
    let version = status.config_version.as_ref().unwrap();
    assert_eq!((version.current.as_deref(), version.desired.as_str()), (Some("rendered-b"), "rendered-b"));

    // The next update: Updated goes false and the rest stays as it was left.
    let next = next_status(
        Some(&status),
        2,
        "rendered-c",
        &annotations("rendered-b", "rendered-c"),
        &Step::needs_update(node),
        &at(100),
    )
    .unwrap();
    assert_eq!(not_false(&next), Vec::<String>::new());
    assert_eq!(conditions(&next)["Updated"].2, "Node worker-0 needs an update");
    assert_eq!(next.config_version.as_ref().unwrap().desired, "rendered-c");
}

/// As upstream behaves (not as its code reads): another step leaves a true `Updated` alone, so
/// a daemon restarting on a settled node (`Resumed`) does not make it look not updated.
#[test]
fn a_step_while_updated_leaves_updated_alone() {
    let notes = annotations("rendered-a", "rendered-a");
    let updated = next_status(None, 1, "rendered-a", &notes, &Step::updated("n"), &at(0)).unwrap();
    let after = next_status(Some(&updated), 1, "rendered-a", &notes, &Step::resumed("rendered-a"), &at(1)).unwrap();
    let all = conditions(&after);
    assert_eq!(all["Updated"], ("True".into(), "Updated".into(), "Node n Updated".into()));
    assert_eq!(all["Resumed"].0, "True");
}

#[test]
fn messages_say_what_changes() {
    let message = |step: Step| step.child.unwrap().message;
    assert_eq!(
        message(Step::applying(false, true)),
        "Applying files and new OS config to node. OS will not need an update. SSH Keys will  need an update"
    );
    assert_eq!(
        message(Step::applied(true, false)),
        "Applied files and new OS config to node. OS did  need an update. SSH Keys did not need an update"
    );
    assert_eq!(
        message(Step::drain_failed(
            "Cannot evict pod as it would violate the pod's disruption budget.",
            "drain-b",
            "uncordon-a"
        )),
        "Error: Node Drain has not succeeded. Error is: Cannot evict pod as it would violate the pod's disruption \
         budget. The drain will not be complete until desired drainer drain-b matches current drainer uncordon-a"
    );
    assert_eq!(Step::no_reboot().parent.reason, "None");
    assert_eq!(Step::degraded("n", Some("boom")).parent.message, "Node n upgrade failure. boom");
    assert_eq!(Step::degraded("n", Some("boom")).parent.status.as_str(), "True");
}

#[test]
fn the_phase_shown_is_the_furthest_step_or_a_failure() {
    let notes = annotations("rendered-a", "rendered-b");
    let mut status = next_status(None, 1, "rendered-b", &notes, &Step::needs_update("n"), &at(0)).unwrap();
    assert_eq!(current_phase(&status).map(|c| c.type_.as_str()), Some("Updated"));
    for (i, step) in [Step::prepared(&[], true), Step::cordoned(false), Step::draining("d", "u")].iter().enumerate() {
        status = next_status(Some(&status), 1, "rendered-b", &notes, step, &at(i as i64 + 1)).unwrap();
    }
    let phase = current_phase(&status).unwrap();
    assert_eq!((phase.type_.as_str(), phase.status.as_str()), ("Drained", "Unknown"));
    status = next_status(Some(&status), 1, "rendered-b", &notes, &Step::degraded("n", Some("x")), &at(9)).unwrap();
    assert_eq!(current_phase(&status).map(|c| c.type_.as_str()), Some("NodeDegraded"));
    assert_eq!(status_of(&status, "NodeDegraded"), "True");
}

#[test]
fn spec_and_owner() {
    let spec = spec_for("worker-0", "worker", &annotations("rendered-a", "rendered-b"));
    assert_eq!((spec.node.name.as_str(), spec.pool.name.as_str()), ("worker-0", "worker"));
    assert_eq!(spec.config_version.desired, "rendered-b");
    assert_eq!(spec_for("worker-0", "worker", &BTreeMap::new()).config_version.desired, NOT_YET_SET);
    let owner = owner_reference("worker-0", "uid-1");
    assert_eq!((owner.api_version.as_str(), owner.kind.as_str(), owner.uid.as_str()), ("v1", "Node", "uid-1"));
}

#[test]
fn pinned_image_set_steps_write_their_sets_even_when_the_conditions_say_the_same() {
    use mco_api::MachineConfigNodeStatusPinnedImageSet as Set;
    let set = |name: &str, desired: i32, current: Option<i32>| Set {
        name: name.into(),
        desired_generation: Some(desired),
        current_generation: current,
        ..Default::default()
    };
    let a = annotations("rendered-a", "rendered-a");
    let first =
        next_status(None, 1, "rendered-a", &a, &Step::prefetched(vec![set("tools", 1, Some(1))]), &at(0)).unwrap();
    assert_eq!(
        conditions(&first)["PinnedImageSetsProgressing"],
        ("False".into(), "AsExpected".into(), "All pinned image sets complete".into())
    );
    assert_eq!(first.pinned_image_sets, Some(vec![set("tools", 1, Some(1))]));
    // The same condition with another list of sets is written; the same list again is not.
    let more = Step::prefetched(vec![set("tools", 1, Some(1)), set("more", 1, Some(1))]);
    let second = next_status(Some(&first), 1, "rendered-a", &a, &more, &at(1)).unwrap();
    assert_eq!(second.pinned_image_sets.as_ref().map(Vec::len), Some(2));
    assert_eq!(next_status(Some(&second), 1, "rendered-a", &a, &more, &at(2)), None);
    // No set left: no list at all.
    let none = next_status(Some(&second), 1, "rendered-a", &a, &Step::prefetched(Vec::new()), &at(3)).unwrap();
    assert_eq!(none.pinned_image_sets, None);
    // Other steps leave the sets as they are.
    let healthy = next_status(Some(&second), 1, "rendered-a", &a, &Step::prefetch_healthy(), &at(4)).unwrap();
    assert_eq!(healthy.pinned_image_sets, second.pinned_image_sets);
    assert_eq!(status_of(&healthy, "PinnedImageSetsDegraded"), "False");
}
