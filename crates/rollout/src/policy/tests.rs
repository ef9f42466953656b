use serde_json::json;

use super::*;
use crate::node::tests::node;

fn pool(annotations: &[(&str, &str)]) -> MachineConfigPool {
    let annotations: BTreeMap<&str, &str> = annotations.iter().copied().collect();
    serde_json::from_value(json!({"metadata": {"name": "worker", "annotations": annotations}, "spec": {}})).unwrap()
}

fn policy(annotations: &[(&str, &str)]) -> Result<Option<RolloutPolicy>, String> {
    RolloutPolicy::from_pool(&pool(annotations)).map_err(|e| e.to_string())
}

fn ts(text: &str) -> Timestamp {
    text.parse().unwrap()
}

#[test]
fn no_annotations_is_upstreams_rollout() {
    assert_eq!(policy(&[]), Ok(None));
    assert_eq!(policy(&[(CANARY_ANNOTATION, " ")]), Ok(None));
}

#[test]
fn policies_are_parsed() {
    let parsed = policy(&[
        (CANARY_ANNOTATION, "25%"),
        (CANARY_SOAK_ANNOTATION, "1h 30m"),
        (HALT_AFTER_FAILURES_ANNOTATION, "2"),
        (MAINTENANCE_WINDOWS_ANNOTATION, "Mon-Wed,Fri 22:00-06:00; Sun 00:00-24:00"),
        (MAINTENANCE_TIME_ZONE_ANNOTATION, "Europe/Berlin"),
    ])
    .unwrap()
    .unwrap();
    assert_eq!(parsed.canaries, Some(Canaries::Percent(25)));
    assert_eq!(parsed.soak, Duration::from_secs(5400));
    assert_eq!(parsed.halt_after, Some(2));
    let windows = parsed.windows.unwrap();
    assert_eq!(windows.zone, TimeZone::get("Europe/Berlin").unwrap());
    assert_eq!(windows.windows.len(), 2);
    assert_eq!(windows.windows[0].days, [true, true, true, false, true, false, false]);
    assert_eq!(windows.windows[0].start, Time::new(22, 0, 0, 0).unwrap());
    assert_eq!(windows.windows[0].end, Some(Time::new(6, 0, 0, 0).unwrap()));
    assert_eq!(windows.windows[1].days, [false, false, false, false, false, false, true]);
    assert_eq!(windows.windows[1].end, None);

    let selector = policy(&[(CANARY_SELECTOR_ANNOTATION, "mco.dev/canary=true, zone")]).unwrap().unwrap();
    assert_eq!(
        selector.canaries,
        Some(Canaries::Selector(vec![("mco.dev/canary".into(), Some("true".into())), ("zone".into(), None)]))
    );
    let wrapping = policy(&[(MAINTENANCE_WINDOWS_ANNOTATION, "Sat-Mon 01:00-02:00")]).unwrap().unwrap();
    assert_eq!(wrapping.windows.unwrap().windows[0].days, [true, false, false, false, false, true, true]);
    assert_eq!(
        policy(&[(CANARY_SOAK_ANNOTATION, "PT2H"), (CANARY_ANNOTATION, "1")]).unwrap().unwrap().soak.as_secs(),
        7200
    );
}

#[test]
fn bad_policies_say_what_is_wrong() {
    let prefix = "MachineConfigPool worker: annotation ";
    for (annotations, message) in [
        (vec![(CANARY_ANNOTATION, "0")], "mco.dev/canary: \"0\" is not a number ≥ 1 or a percentage"),
        (vec![(CANARY_ANNOTATION, "many")], "mco.dev/canary: \"many\" is not a number ≥ 1 or a percentage"),
        (vec![(CANARY_ANNOTATION, "150%")], "mco.dev/canary: \"150%\" is not a percentage from 1% to 100%"),
        (
            vec![(CANARY_ANNOTATION, "1"), (CANARY_SELECTOR_ANNOTATION, "a=b")],
            "mco.dev/canary-selector: set either mco.dev/canary or mco.dev/canary-selector, not both",
        ),
        (
            vec![(CANARY_SELECTOR_ANNOTATION, "a=b,,c")],
            "mco.dev/canary-selector: \"\" is not key=value or key (label syntax)",
        ),
        (
            vec![(CANARY_SELECTOR_ANNOTATION, "zone!=a")],
            "mco.dev/canary-selector: \"zone!=a\" is not key=value or key (label syntax)",
        ),
        (
            vec![(CANARY_SELECTOR_ANNOTATION, "a=b=c")],
            "mco.dev/canary-selector: \"a=b=c\" is not key=value or key (label syntax)",
        ),
        (vec![(CANARY_ANNOTATION, "+1")], "mco.dev/canary: \"+1\" is not a number ≥ 1 or a percentage"),
        (
            vec![(CANARY_ANNOTATION, "1"), (CANARY_SOAK_ANNOTATION, "10000h")],
            "mco.dev/canary-soak: \"10000h\" is longer than a year",
        ),
        (vec![(HALT_AFTER_FAILURES_ANNOTATION, "+2")], "mco.dev/halt-after-failures: \"+2\" is not a number ≥ 1"),
        (
            vec![(MAINTENANCE_WINDOWS_ANNOTATION, "Sat +1:00-02:00")],
            "mco.dev/maintenance-windows: \"Sat +1:00-02:00\": \"+1:00\" is not a time from 00:00 to 24:00",
        ),
        (
            vec![(CANARY_ANNOTATION, "1"), (CANARY_SOAK_ANNOTATION, "soon")],
            "mco.dev/canary-soak: \"soon\" is not a duration (e.g. \"30m\", \"1h 30m\", \"PT2H\")",
        ),
        (
            vec![(CANARY_SOAK_ANNOTATION, "10m")],
            "mco.dev/canary-soak: a soak needs canaries (mco.dev/canary or mco.dev/canary-selector)",
        ),
        (vec![(HALT_AFTER_FAILURES_ANNOTATION, "0")], "mco.dev/halt-after-failures: \"0\" is not a number ≥ 1"),
        (
            vec![
                (MAINTENANCE_WINDOWS_ANNOTATION, "Sat 02:00-06:00"),
                (MAINTENANCE_TIME_ZONE_ANNOTATION, "Mars/Olympus"),
            ],
            "mco.dev/maintenance-time-zone: unknown time zone \"Mars/Olympus\"",
        ),
        (
            vec![(MAINTENANCE_TIME_ZONE_ANNOTATION, "UTC")],
            "mco.dev/maintenance-time-zone: a time zone needs windows (mco.dev/maintenance-windows)",
        ),
        (
            vec![(MAINTENANCE_WINDOWS_ANNOTATION, "weekends")],
            "mco.dev/maintenance-windows: \"weekends\" is not \"DAYS HH:MM-HH:MM\" (e.g. \"Mon-Fri 22:00-06:00\")",
        ),
        (
            vec![(MAINTENANCE_WINDOWS_ANNOTATION, "Sat 02:00-06:00; Funday 01:00-02:00")],
            "mco.dev/maintenance-windows: \"Funday 01:00-02:00\": \"Funday\" is not a day (Mon, Tue, Wed, Thu, Fri, Sat, Sun)",
        ),
        (
            vec![(MAINTENANCE_WINDOWS_ANNOTATION, "Sat 2:00-25:00")],
            "mco.dev/maintenance-windows: \"Sat 2:00-25:00\": \"2:00\" is not a time from 00:00 to 24:00",
        ),
        (
            vec![(MAINTENANCE_WINDOWS_ANNOTATION, "Sat 24:00-01:00")],
            "mco.dev/maintenance-windows: \"Sat 24:00-01:00\": a window cannot start at 24:00",
        ),
        (
            vec![(MAINTENANCE_WINDOWS_ANNOTATION, "Sat 03:00-03:00")],
            "mco.dev/maintenance-windows: \"Sat 03:00-03:00\": a window needs a length (start and end are equal)",
        ),
        (vec![(MAINTENANCE_WINDOWS_ANNOTATION, ";")], "mco.dev/maintenance-windows: no window"),
    ] {
        assert_eq!(policy(&annotations), Err(format!("{prefix}{message}")), "{annotations:?}");
    }
}

fn windows(text: &str, zone: &str) -> Windows {
    Windows { zone: TimeZone::get(zone).unwrap(), windows: parse_windows(text).unwrap() }
}

#[test]
fn windows_open_and_close_in_their_time_zone() {
    // 2026-11-27 is a Friday.
    let berlin = windows("Mon-Fri 22:00-06:00; Sun 00:00-24:00", "Europe/Berlin");
    for (now, open, next) in [
        // Friday 12:00 in Berlin (UTC+1): closed until 22:00.
        ("2026-11-27T11:00:00Z", false, Some("2026-11-27T22:00:00+01:00[Europe/Berlin]")),
        // Friday 22:30: open (Friday's window); Saturday 05:59: still Friday's window.
        ("2026-11-27T21:30:00Z", true, Some("2026-11-29T00:00:00+01:00[Europe/Berlin]")),
        ("2026-11-28T04:59:00Z", true, Some("2026-11-29T00:00:00+01:00[Europe/Berlin]")),
        // Saturday 06:00: closed until Sunday.
        ("2026-11-28T05:00:00Z", false, Some("2026-11-29T00:00:00+01:00[Europe/Berlin]")),
        // Sunday noon: open all day. Monday 01:00: Sunday's window ended at midnight, Monday's
        // opens at 22:00.
        ("2026-11-29T11:00:00Z", true, Some("2026-11-30T22:00:00+01:00[Europe/Berlin]")),
        ("2026-11-30T00:00:00Z", false, Some("2026-11-30T22:00:00+01:00[Europe/Berlin]")),
    ] {
        let now = ts(now);
        assert_eq!(berlin.is_open(now), open, "{now}");
        assert_eq!(berlin.next_opening(now).map(|z| z.to_string()).as_deref(), next, "{now}");
    }
    // A window across the change to summer time (2027-03-28 02:00 → 03:00 in Berlin).
    let dst = windows("Sun 01:00-04:00", "Europe/Berlin");
    assert!(dst.is_open(ts("2027-03-28T01:30:00Z")), "03:30 CEST");
    assert!(!dst.is_open(ts("2027-03-28T02:00:00Z")), "04:00 CEST");
    // Times in the skipped hour (02:00-03:00 that night) move an hour on, as the clock does: a
    // window that is the skipped hour is no window that night.
    let saturday = ts("2027-03-27T12:00:00Z");
    let shifted = windows("Sun 02:15-02:45", "Europe/Berlin");
    assert_eq!(
        shifted.next_opening(saturday).map(|z| z.to_string()).as_deref(),
        Some("2027-03-28T03:15:00+02:00[Europe/Berlin]")
    );
    let gap = windows("Sun 02:00-03:00", "Europe/Berlin");
    assert_eq!(
        gap.next_opening(saturday).map(|z| z.to_string()).as_deref(),
        Some("2027-04-04T02:00:00+02:00[Europe/Berlin]")
    );
}

fn done(name: &str, config: &str) -> Node {
    node(name, config, config, "Done", true)
}

/// The hold of a pool with `annotations` over `nodes` at `now`, moving to `new`.
fn hold_at(annotations: &[(&str, &str)], nodes: &[Node], now: Timestamp) -> Option<Hold> {
    let p = pool(annotations);
    let refs: Vec<&Node> = nodes.iter().collect();
    hold(&p, &RolloutPolicy::from_pool(&p).unwrap().unwrap(), &refs, &node::Target::config("new"), now)
}

#[test]
fn canaries_first_then_soak_then_the_rest() {
    let soak = &[(CANARY_ANNOTATION, "1"), (CANARY_SOAK_ANNOTATION, "10m")];
    let now = ts("2026-11-27T10:00:00Z");
    let length = SignedDuration::from_mins(10);
    // Nothing updated: only the canary (first by name) may start.
    let fresh = [done("b", "old"), done("a", "old"), done("c", "old")];
    assert_eq!(hold_at(soak, &fresh, now), Some(Hold::Canaries(["a".to_string()].into())));
    // The canary updating: still only it.
    let updating = [node("a", "old", "new", "Working", true), done("b", "old"), done("c", "old")];
    assert_eq!(hold_at(soak, &updating, now), Some(Hold::Canaries(["a".to_string()].into())));
    // Done but not Ready: not yet.
    let not_ready = [node("a", "new", "new", "Done", false), done("b", "old"), done("c", "old")];
    assert_eq!(hold_at(soak, &not_ready, now), Some(Hold::Canaries(["a".to_string()].into())));
    // Done and Ready: the soak starts now (the controller records it); its message has no time
    // until then, so that the pool's condition does not change at every sync.
    let canary_done = [done("a", "new"), done("b", "old"), done("c", "old")];
    let until = ts("2026-11-27T10:10:00Z");
    let starting = hold_at(soak, &canary_done, now).unwrap();
    assert_eq!(starting, Hold::Soak { until, started: Some(now), length });
    assert_eq!(starting.message("new"), "canaries are on new: soaking for 10m");
    assert_eq!(
        hold_at(soak, &canary_done, ts("2026-11-27T10:00:07Z")).unwrap().message("new"),
        "canaries are on new: soaking for 10m"
    );
    // Recorded: held until it ends, then nothing holds the others.
    let recorded = [soak[0], soak[1], (CANARIES_DONE_ANNOTATION, "new 2026-11-27T10:00:00Z")];
    let soaking = hold_at(&recorded, &canary_done, ts("2026-11-27T10:05:00Z")).unwrap();
    assert_eq!(soaking, Hold::Soak { until, started: None, length });
    assert_eq!(soaking.message("new"), "canaries are on new: soaking until 2026-11-27T10:10:00Z");
    assert_eq!(hold_at(&recorded, &canary_done, until), None);
    // A record of another config does not count.
    let stale = [soak[0], soak[1], (CANARIES_DONE_ANNOTATION, "older 2026-11-27T09:00:00Z")];
    assert_eq!(hold_at(&stale, &canary_done, now), Some(Hold::Soak { until, started: Some(now), length }));
    // Without a soak the others go on once the canary is done.
    assert_eq!(hold_at(&[(CANARY_ANNOTATION, "1")], &canary_done, now), None);
    // Everything updated: nothing holds.
    let all = [done("a", "new"), done("b", "new"), done("c", "new")];
    assert_eq!(hold_at(soak, &all, now), None);
    // 50% of 3 nodes: 2 canaries.
    assert_eq!(
        hold_at(&[(CANARY_ANNOTATION, "50%")], &fresh, now),
        Some(Hold::Canaries(["a".into(), "b".into()].into()))
    );
    // A recorded soak start at the end of time never ends (and does not overflow).
    let far = [soak[0], soak[1], (CANARIES_DONE_ANNOTATION, "new 9999-12-30T21:59:00Z")];
    assert_eq!(hold_at(&far, &canary_done, now).unwrap().ends_at(), Some(Timestamp::MAX));
}

#[test]
fn canaries_by_label() {
    let mut labelled = done("c", "old");
    labelled.metadata.labels.as_mut().unwrap().insert("mco.dev/canary".into(), "true".into());
    let nodes = [done("a", "old"), labelled];
    let epoch = Timestamp::UNIX_EPOCH;
    assert_eq!(
        hold_at(&[(CANARY_SELECTOR_ANNOTATION, "mco.dev/canary=true")], &nodes, epoch),
        Some(Hold::Canaries(["c".into()].into()))
    );
    assert_eq!(
        hold_at(&[(CANARY_SELECTOR_ANNOTATION, "mco.dev/canary=false")], &nodes, epoch),
        Some(Hold::Invalid(
            "MachineConfigPool worker: annotation mco.dev/canary-selector: no node of the pool matches".into()
        ))
    );
    let too_many = hold_at(&[(CANARY_ANNOTATION, "3")], &nodes, epoch).unwrap();
    assert_eq!(too_many.reason(), "InvalidPolicy");
    assert_eq!(
        too_many.message("new"),
        "MachineConfigPool worker: annotation mco.dev/canary: 3 canaries, but the pool has 2 nodes"
    );
    // A pool with nothing to do is not held by a policy that does not fit it.
    assert_eq!(hold_at(&[(CANARY_ANNOTATION, "3")], &[done("a", "new")], epoch), None);
}

#[test]
fn halts_after_failures_once_per_target() {
    let failed = |name| node(name, "old", "new", "Degraded", true);
    let nodes = [failed("a"), failed("b"), done("c", "old")];
    let epoch = Timestamp::UNIX_EPOCH;
    assert_eq!(
        hold_at(&[(HALT_AFTER_FAILURES_ANNOTATION, "2")], &nodes, epoch),
        Some(Hold::Halt(vec!["a".into(), "b".into()]))
    );
    assert_eq!(hold_at(&[(HALT_AFTER_FAILURES_ANNOTATION, "3")], &nodes, epoch), None);
    // A node that failed on another config does not count.
    let other = [failed("a"), node("b", "old", "older", "Degraded", true)];
    assert_eq!(hold_at(&[(HALT_AFTER_FAILURES_ANNOTATION, "2")], &other, epoch), None);
    // Resumed by hand on the same target: not halted again for it.
    assert_eq!(hold_at(&[(HALT_AFTER_FAILURES_ANNOTATION, "2"), (HALTED_ON_ANNOTATION, "new")], &nodes, epoch), None);
    assert_eq!(
        Hold::Halt(vec!["a".into(), "b".into()]).message("new"),
        "halted: a, b failed updating to new; fix or revert the change, then resume the pool (spec.paused: false)"
    );
}

#[test]
fn records_of_another_target_are_stale() {
    let target = node::Target::config("new");
    let layered = node::Target { config: "new".into(), image: Some("reg/os@sha256:1".into()) };
    assert_eq!(record_key(&layered), "new@reg/os@sha256:1");
    let both = pool(&[(CANARIES_DONE_ANNOTATION, "new 2026-11-27T10:00:00Z"), (HALTED_ON_ANNOTATION, "new")]);
    assert_eq!(stale_records(&both, &target), Vec::<&str>::new());
    assert_eq!(stale_records(&both, &layered), [CANARIES_DONE_ANNOTATION, HALTED_ON_ANNOTATION]);
    let old = pool(&[(CANARIES_DONE_ANNOTATION, "old 2026-11-27T10:00:00Z")]);
    assert_eq!(stale_records(&old, &target), [CANARIES_DONE_ANNOTATION]);
    assert_eq!(stale_records(&pool(&[]), &target), Vec::<&str>::new());
}

#[test]
fn windows_hold_every_new_update_canaries_included() {
    let window = (MAINTENANCE_WINDOWS_ANNOTATION, "Sat 02:00-06:00");
    let behind = [done("a", "old"), done("b", "old")];
    let friday = ts("2026-11-27T10:00:00Z");
    let held = hold_at(&[window], &behind, friday).unwrap();
    assert_eq!(held.message("new"), "waiting for maintenance window (opens at 2026-11-28T02:00:00+00:00[UTC])");
    assert_eq!(held.ends_at(), Some(ts("2026-11-28T02:00:00Z")));
    assert_eq!(held.reason(), "MaintenanceWindow");
    assert_eq!(hold_at(&[window, (CANARY_ANNOTATION, "1")], &behind, friday), Some(held));
    let saturday = ts("2026-11-28T03:00:00Z");
    assert_eq!(hold_at(&[window], &behind, saturday), None);
    assert_eq!(
        hold_at(&[window, (CANARY_ANNOTATION, "1")], &behind, saturday),
        Some(Hold::Canaries(["a".into()].into()))
    );
    assert_eq!(hold_at(&[window], &[done("a", "new")], friday), None);
}

#[test]
fn conditions_only_for_pools_with_a_policy() {
    let target = node::Target::config("new");
    let behind = [done("a", "old")];
    let refs: Vec<&Node> = behind.iter().collect();
    let now = ts("2026-11-27T10:00:00Z");
    assert_eq!(condition(&pool(&[]), &refs, &target, now, false), None, "upstream's conditions only");
    assert_eq!(condition(&pool(&[]), &refs, &target, now, true), Some((false, "", String::new())));
    let bad = condition(&pool(&[(CANARY_ANNOTATION, "x")]), &refs, &target, now, false).unwrap();
    assert_eq!((bad.0, bad.1), (true, "InvalidPolicy"));
    // Paused after a halt on this target: Halted, naming the failed nodes.
    let mut halted = pool(&[(HALT_AFTER_FAILURES_ANNOTATION, "1"), (HALTED_ON_ANNOTATION, "new")]);
    halted.spec.paused = Some(true);
    let failed = [node("a", "old", "new", "Degraded", true)];
    let failed: Vec<&Node> = failed.iter().collect();
    let (held, reason, message) = condition(&halted, &failed, &target, now, true).unwrap();
    assert_eq!((held, reason), (true, "Halted"));
    assert!(message.starts_with("halted: a failed updating to new"), "{message}");
    // Paused by hand: nothing of the policy's.
    let mut paused = pool(&[(HALT_AFTER_FAILURES_ANNOTATION, "1")]);
    paused.spec.paused = Some(true);
    assert_eq!(condition(&paused, &failed, &target, now, true), Some((false, "", String::new())));
}
