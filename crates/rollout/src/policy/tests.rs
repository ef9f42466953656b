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
        (vec![(CANARY_SELECTOR_ANNOTATION, "a=b,,c")], "mco.dev/canary-selector: \"\" is not key=value or key"),
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
}

fn done(name: &str, config: &str) -> Node {
    node(name, config, config, "Done", true)
}

#[test]
fn canaries_first_then_soak_then_the_rest() {
    let target = node::Target::config("new");
    let soak = &[(CANARY_ANNOTATION, "1"), (CANARY_SOAK_ANNOTATION, "10m")];
    let policy_of = |p: &MachineConfigPool| RolloutPolicy::from_pool(p).unwrap().unwrap();
    let now = ts("2026-11-27T10:00:00Z");
    let hold_at = |annotations: &[(&str, &str)], nodes: &[Node], now| {
        let p = pool(annotations);
        let refs: Vec<&Node> = nodes.iter().collect();
        hold(&p, &policy_of(&p), &refs, &target, now).unwrap()
    };
    // Nothing updated: only the canary (first by name) may start.
    let fresh = [done("b", "old"), done("a", "old"), done("c", "old")];
    assert_eq!(hold_at(soak, &fresh, now), Some(Hold::Canaries(["a".to_string()].into())));
    // The canary updating: still only it.
    let updating = [node("a", "old", "new", "Working", true), done("b", "old"), done("c", "old")];
    assert_eq!(hold_at(soak, &updating, now), Some(Hold::Canaries(["a".to_string()].into())));
    // Done but not Ready: not yet.
    let not_ready = [node("a", "new", "new", "Done", false), done("b", "old"), done("c", "old")];
    assert_eq!(hold_at(soak, &not_ready, now), Some(Hold::Canaries(["a".to_string()].into())));
    // Done and Ready: the soak starts now (the controller records it).
    let canary_done = [done("a", "new"), done("b", "old"), done("c", "old")];
    let until = ts("2026-11-27T10:10:00Z");
    assert_eq!(hold_at(soak, &canary_done, now), Some(Hold::Soak { until, started: Some(now) }));
    // Recorded: held until it ends, then nothing holds the others.
    let recorded = [soak[0], soak[1], (CANARIES_DONE_ANNOTATION, "new 2026-11-27T10:00:00Z")];
    assert_eq!(hold_at(&recorded, &canary_done, ts("2026-11-27T10:05:00Z")), Some(Hold::Soak { until, started: None }));
    assert_eq!(hold_at(&recorded, &canary_done, until), None);
    // A record of another config does not count.
    let stale = [soak[0], soak[1], (CANARIES_DONE_ANNOTATION, "older 2026-11-27T09:00:00Z")];
    assert_eq!(hold_at(&stale, &canary_done, now), Some(Hold::Soak { until, started: Some(now) }));
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
}

#[test]
fn canaries_by_label() {
    let target = node::Target::config("new");
    let mut labelled = done("c", "old");
    labelled.metadata.labels.as_mut().unwrap().insert("mco.dev/canary".into(), "true".into());
    let nodes = [done("a", "old"), labelled];
    let refs: Vec<&Node> = nodes.iter().collect();
    let p = pool(&[(CANARY_SELECTOR_ANNOTATION, "mco.dev/canary=true")]);
    let policy = RolloutPolicy::from_pool(&p).unwrap().unwrap();
    assert_eq!(hold(&p, &policy, &refs, &target, Timestamp::UNIX_EPOCH), Ok(Some(Hold::Canaries(["c".into()].into()))));
    let none = pool(&[(CANARY_SELECTOR_ANNOTATION, "mco.dev/canary=false")]);
    let policy = RolloutPolicy::from_pool(&none).unwrap().unwrap();
    assert_eq!(
        hold(&none, &policy, &refs, &target, Timestamp::UNIX_EPOCH).unwrap_err().to_string(),
        "MachineConfigPool worker: annotation mco.dev/canary-selector: no node of the pool matches"
    );
    let too_many = pool(&[(CANARY_ANNOTATION, "3")]);
    let policy = RolloutPolicy::from_pool(&too_many).unwrap().unwrap();
    assert_eq!(
        hold(&too_many, &policy, &refs, &target, Timestamp::UNIX_EPOCH).unwrap_err().to_string(),
        "MachineConfigPool worker: annotation mco.dev/canary: 3 canaries, but the pool has 2 nodes"
    );
}

#[test]
fn halts_after_failures_once_per_config() {
    let target = node::Target::config("new");
    let failed = |name| node(name, "old", "new", "Degraded", true);
    let nodes = [failed("a"), failed("b"), done("c", "old")];
    let refs: Vec<&Node> = nodes.iter().collect();
    let at = |annotations: &[(&str, &str)], refs: &[&Node]| {
        let p = pool(annotations);
        hold(&p, &RolloutPolicy::from_pool(&p).unwrap().unwrap(), refs, &target, Timestamp::UNIX_EPOCH).unwrap()
    };
    assert_eq!(at(&[(HALT_AFTER_FAILURES_ANNOTATION, "2")], &refs), Some(Hold::Halt(vec!["a".into(), "b".into()])));
    assert_eq!(at(&[(HALT_AFTER_FAILURES_ANNOTATION, "3")], &refs), None);
    // A node that failed on another config does not count.
    let other = [failed("a"), node("b", "old", "older", "Degraded", true)];
    assert_eq!(at(&[(HALT_AFTER_FAILURES_ANNOTATION, "2")], &other.iter().collect::<Vec<_>>()), None);
    // Resumed by hand on the same config: not halted again for it.
    assert_eq!(at(&[(HALT_AFTER_FAILURES_ANNOTATION, "2"), (HALTED_ON_ANNOTATION, "new")], &refs), None);
    assert_eq!(
        Hold::Halt(vec!["a".into(), "b".into()]).message("new"),
        "halted: a, b failed updating to new; fix or revert the change, then resume the pool (spec.paused: false)"
    );
}

#[test]
fn windows_hold_new_updates_only_while_nodes_are_behind() {
    let target = node::Target::config("new");
    let p = pool(&[(MAINTENANCE_WINDOWS_ANNOTATION, "Sat 02:00-06:00")]);
    let policy = RolloutPolicy::from_pool(&p).unwrap().unwrap();
    let behind = [done("a", "old")];
    let friday = ts("2026-11-27T10:00:00Z");
    let held = hold(&p, &policy, &behind.iter().collect::<Vec<_>>(), &target, friday).unwrap().unwrap();
    assert_eq!(held.message("new"), "waiting for maintenance window (opens at 2026-11-28T02:00:00+00:00[UTC])");
    assert_eq!(held.ends_at(), Some(ts("2026-11-28T02:00:00Z")));
    assert_eq!(held.reason(), "MaintenanceWindow");
    let saturday = ts("2026-11-28T03:00:00Z");
    assert_eq!(hold(&p, &policy, &behind.iter().collect::<Vec<_>>(), &target, saturday), Ok(None));
    let current = [done("a", "new")];
    assert_eq!(hold(&p, &policy, &current.iter().collect::<Vec<_>>(), &target, friday), Ok(None));
}
