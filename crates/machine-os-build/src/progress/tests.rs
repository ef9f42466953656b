use k8s_openapi::api::core::v1::{ContainerState, ContainerStateTerminated, ContainerStatus, PodStatus};
use serde_json::json;

use super::*;

fn time(s: &str) -> Time {
    serde_json::from_value(json!(s)).unwrap()
}

fn pod(created: &str, phase: &str, terminated: Option<(i32, &str)>) -> Pod {
    let state = terminated.map(|(code, message)| ContainerState {
        terminated: Some(ContainerStateTerminated {
            exit_code: code,
            message: (!message.is_empty()).then(|| message.to_string()),
            reason: Some(if code == 0 { "Completed" } else { "Error" }.into()),
            ..Default::default()
        }),
        ..Default::default()
    });
    Pod {
        metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
            creation_timestamp: Some(time(created)),
            ..Default::default()
        },
        status: Some(PodStatus {
            phase: Some(phase.into()),
            container_statuses: Some(vec![ContainerStatus {
                name: BUILD_CONTAINER.into(),
                state,
                ..Default::default()
            }]),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn failed_job(message: &str) -> Job {
    serde_json::from_value(json!({"status": {"conditions": [{"type": "Failed", "status": "True", "reason": "DeadlineExceeded", "message": message}]}})).unwrap()
}

#[test]
fn the_pod_says_how_the_build_went() {
    let image = "10.200.0.1:5000/os@sha256:abcd";
    let cases = [
        (vec![], None, Outcome::Waiting),
        (vec![pod("2026-01-01T00:00:00Z", "Pending", None)], None, Outcome::Waiting),
        (vec![pod("2026-01-01T00:00:00Z", "Running", None)], None, Outcome::Running),
        (
            vec![pod("2026-01-01T00:00:00Z", "Succeeded", Some((0, &format!("{image}\n"))))],
            None,
            Outcome::Succeeded { image: image.into() },
        ),
        (
            vec![pod("2026-01-01T00:00:00Z", "Failed", Some((1, "STEP 3/4: RUN exit 1: exit status 1")))],
            None,
            Outcome::Failed { message: "STEP 3/4: RUN exit 1: exit status 1".into() },
        ),
        (
            vec![pod("2026-01-01T00:00:00Z", "Failed", Some((137, "")))],
            None,
            Outcome::Failed { message: "the builder exited with code 137 (Error)".into() },
        ),
        (
            vec![pod("2026-01-01T00:00:00Z", "Succeeded", Some((0, "done")))],
            None,
            Outcome::Failed { message: "the builder exited without naming the pushed image: \"done\"".into() },
        ),
        (
            // The newest pod decides.
            vec![pod("2026-01-01T00:00:05Z", "Running", None), pod("2026-01-01T00:00:00Z", "Failed", Some((1, "old")))],
            None,
            Outcome::Running,
        ),
        (
            vec![],
            Some(failed_job("Job was active longer than specified deadline")),
            Outcome::Failed { message: "the build Job failed: Job was active longer than specified deadline".into() },
        ),
    ];
    for (pods, job, expected) in cases {
        assert_eq!(outcome(job.as_ref(), &pods), expected, "{pods:?}");
    }
    for (reason, stuck) in [
        ("ImagePullBackOff", true),
        ("CreateContainerConfigError", true),
        ("ErrImagePull", false),
        ("ContainerCreating", false),
    ] {
        let mut pending = pod("2026-01-01T00:00:00Z", "Pending", None);
        let statuses = pending.status.as_mut().unwrap().container_statuses.as_mut().unwrap();
        statuses[0].state = Some(ContainerState {
            waiting: Some(k8s_openapi::api::core::v1::ContainerStateWaiting {
                reason: Some(reason.into()),
                message: Some("Back-off pulling image \"mco\"".into()),
            }),
            ..Default::default()
        });
        let expected = match stuck {
            true => Outcome::Failed {
                message: format!("the build pod cannot start: {reason}: Back-off pulling image \"mco\""),
            },
            false => Outcome::Waiting,
        };
        assert!(!builder_ran(&pending), "{reason}: the builder never ran");
        assert_eq!(outcome(None, &[pending]), expected, "{reason}");
    }
    let mut running = pod("2026-01-01T00:00:00Z", "Running", None);
    running.status.as_mut().unwrap().container_statuses.as_mut().unwrap()[0].state =
        Some(ContainerState { running: Some(Default::default()), ..Default::default() });
    assert!(builder_ran(&running));
    assert!(builder_ran(&pod("2026-01-01T00:00:00Z", "Failed", Some((1, "x")))));
    let mut evicted = pod("2026-01-01T00:00:00Z", "Failed", None);
    evicted.status.as_mut().unwrap().message = Some("The node was low on resource: ephemeral-storage.".into());
    assert_eq!(
        outcome(None, &[evicted]),
        Outcome::Failed { message: "the build pod failed: The node was low on resource: ephemeral-storage.".into() }
    );
}

fn build(conditions: Option<Vec<Condition>>) -> MachineOSBuild {
    let mut b: MachineOSBuild = serde_json::from_value(json!({
        "metadata": {"name": "layered-abc"},
        "spec": {"machineConfig": {"name": "rendered-layered-1"}, "machineOSConfig": {"name": "layered"},
                 "renderedImagePushSpec": "r.example.com/os:layered-abc"},
        "status": {"buildStart": "2026-01-01T00:00:00Z"}
    }))
    .unwrap();
    b.status.as_mut().unwrap().conditions = conditions;
    b
}

fn summary(status: &MachineOSBuildStatus) -> Vec<(String, String, String)> {
    status.conditions.iter().flatten().map(|c| (c.type_.clone(), c.status.clone(), c.message.clone())).collect()
}

#[test]
fn every_phase_has_upstreams_five_conditions_one_true() {
    let now = time("2026-01-01T00:01:00Z");
    for (phase, true_type) in [
        (Phase::Prepared, PREPARED),
        (Phase::Building, BUILDING),
        (Phase::Succeeded, SUCCEEDED),
        (Phase::Failed, FAILED),
        (Phase::Interrupted, INTERRUPTED),
    ] {
        let all = conditions(phase, None, &[], &now);
        let types: Vec<_> = all.iter().map(|c| c.type_.as_str()).collect();
        assert_eq!(types, [PREPARED, BUILDING, FAILED, INTERRUPTED, SUCCEEDED]);
        let trues: Vec<_> = all.iter().filter(|c| c.status == "True").map(|c| c.type_.as_str()).collect();
        assert_eq!(trues, [true_type]);
        let reasons: Vec<_> = all.iter().map(|c| c.reason.as_str()).collect();
        assert_eq!(reasons, ["Prepared", "Building", "Failed", "Interrupted", "Ready"]);
        assert_eq!(self::phase(&build(Some(all))), Some(phase));
    }
    let failed = conditions(Phase::Failed, Some("STEP 2/3: RUN exit 1"), &[], &now);
    assert_eq!(failed[2].message, "Build Failed: STEP 2/3: RUN exit 1");
    assert_eq!(self::phase(&build(None)), None);
}

#[test]
fn a_build_goes_prepared_building_then_ends_and_stays_ended() {
    let t0 = time("2026-01-01T00:01:00Z");
    let t1 = time("2026-01-01T00:02:00Z");
    let t2 = time("2026-01-01T00:03:00Z");
    let fresh = build(None);
    let prepared = next_status(&fresh, &Outcome::Waiting, "build-layered-abc", "ns", &t0).unwrap();
    assert_eq!(prepared.builder.as_ref().unwrap().job.as_ref().unwrap().name, "build-layered-abc");
    assert_eq!(prepared.build_start, Some(time("2026-01-01T00:00:00Z")), "the start is kept");
    assert_eq!(prepared.build_end, None);
    let mut b = build(None);
    b.status = Some(prepared.clone());
    assert_eq!(next_status(&b, &Outcome::Waiting, "build-layered-abc", "ns", &t1), None, "nothing new, no write");

    let building = next_status(&b, &Outcome::Running, "build-layered-abc", "ns", &t1).unwrap();
    let since = |s: &MachineOSBuildStatus, t: &str| {
        s.conditions.iter().flatten().find(|c| c.type_ == t).unwrap().last_transition_time.clone()
    };
    assert_eq!(since(&building, BUILDING), t1);
    assert_eq!(since(&building, FAILED), t0, "a status that stays False keeps its time");
    b.status = Some(building);

    let image = "r.example.com/os@sha256:abcd";
    let done = next_status(&b, &Outcome::Succeeded { image: image.into() }, "build-layered-abc", "ns", &t2).unwrap();
    assert_eq!(done.digested_image_push_spec.as_deref(), Some(image));
    assert_eq!(done.build_end, Some(t2.clone()));
    assert!(summary(&done).contains(&(SUCCEEDED.into(), "True".into(), "Build Ready".into())));
    b.status = Some(done);
    let failed = Outcome::Failed { message: "late".into() };
    assert_eq!(next_status(&b, &failed, "build-layered-abc", "ns", &t2), None, "an ended build is frozen");
    assert_eq!(interrupted(&b, &t2), None);
}

#[test]
fn failures_and_interruptions_end_the_build() {
    let t = time("2026-01-01T00:05:00Z");
    let b = build(Some(conditions(Phase::Building, None, &[], &t)));
    let failed = Outcome::Failed { message: "STEP 3/4: RUN exit 1: exit status 1".into() };
    let status = next_status(&b, &failed, "build-layered-abc", "ns", &t).unwrap();
    assert!(summary(&status).contains(&(
        FAILED.into(),
        "True".into(),
        "Build Failed: STEP 3/4: RUN exit 1: exit status 1".into()
    )));
    assert_eq!(status.build_end, Some(t.clone()));
    let mut ended = b.clone();
    ended.status = Some(status);
    assert_eq!(
        failure_message("layered", &ended).unwrap(),
        "Failed to build OS image for pool layered (MachineOSBuild: layered-abc): Failed: Build Failed: STEP 3/4: RUN \
         exit 1: exit status 1"
    );
    assert_eq!(failure_message("layered", &b), None);

    let stopped = interrupted(&b, &t).unwrap();
    assert!(summary(&stopped).contains(&(INTERRUPTED.into(), "True".into(), "Build Interrupted".into())));
    assert_eq!(stopped.build_end, Some(t));
}
