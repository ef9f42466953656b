//! Where a build is: its Job's pod read as an [`Outcome`], the MachineOSBuild's status and
//! upstream's condition sets (every one of the five types, one True), and the message the pool's
//! `ImageBuildDegraded` carries when the build failed.

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use mco_api::MachineOSBuild;
use mco_api::machineconfiguration::machine_os_build_condition::{BUILDING, FAILED, INTERRUPTED, PREPARED, SUCCEEDED};
use mco_api::machineconfiguration::{
    MachineOSBuildStatus, MachineOSBuilderReference, MachineOSImageBuilderType, ObjectReference,
};

use crate::request::BUILD_CONTAINER;

/// Container waiting reasons that end a build: the kubelet keeps retrying them, but only a change
/// (an image, a Secret) makes them pass. (`ErrImagePull`, a first failed pull, may be passing: the
/// build fails once it is `ImagePullBackOff`.)
const CANNOT_START: [&str; 3] = ["ImagePullBackOff", "InvalidImageName", "CreateContainerConfigError"];

/// What the build's pod (or its Job) says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// No pod yet, or it has not started building.
    Waiting,
    Running,
    /// The image was pushed; its digested pull spec.
    Succeeded {
        image: String,
    },
    /// Why the build failed, as the builder said it.
    Failed {
        message: String,
    },
}

/// A build's phase: which of its conditions is True.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    Prepared,
    Building,
    Succeeded,
    Failed,
    Interrupted,
}

impl Phase {
    /// Succeeded, Failed and Interrupted builds are over: their status no longer changes.
    pub fn ended(self) -> bool {
        matches!(self, Phase::Succeeded | Phase::Failed | Phase::Interrupted)
    }
}

/// The build's outcome from its Job and the Job's pods (the newest decides). The builder writes
/// the digested pull spec, or its error, as the container's termination message.
pub fn outcome(job: Option<&Job>, pods: &[Pod]) -> Outcome {
    let newest = pods.iter().max_by(|a, b| a.metadata.creation_timestamp.cmp(&b.metadata.creation_timestamp));
    if let Some(pod) = newest {
        let status = pod.status.as_ref();
        let container = status
            .and_then(|s| s.container_statuses.as_deref())
            .and_then(|all| all.iter().find(|c| c.name == BUILD_CONTAINER));
        if let Some(ended) = container.and_then(|c| c.state.as_ref()).and_then(|s| s.terminated.as_ref()) {
            let message = ended.message.as_deref().unwrap_or_default().trim();
            return match (ended.exit_code, message) {
                (0, image) if image.contains("@sha256:") => Outcome::Succeeded { image: image.to_string() },
                (0, other) => Outcome::Failed {
                    message: format!("the builder exited without naming the pushed image: {other:?}"),
                },
                (code, "") => Outcome::Failed {
                    message: format!(
                        "the builder exited with code {code} ({})",
                        ended.reason.as_deref().unwrap_or("no reason given")
                    ),
                },
                (_, message) => Outcome::Failed { message: message.to_string() },
            };
        }
        // The builder cannot start, and will not without someone changing something.
        let waiting = container.and_then(|c| c.state.as_ref()).and_then(|s| s.waiting.as_ref());
        if let Some(waiting) = waiting.filter(|w| CANNOT_START.contains(&w.reason.as_deref().unwrap_or_default())) {
            let reason = waiting.reason.as_deref().unwrap_or_default();
            let message = waiting.message.as_deref().unwrap_or("no message");
            return Outcome::Failed { message: format!("the build pod cannot start: {reason}: {message}") };
        }
        match status.and_then(|s| s.phase.as_deref()) {
            Some("Running") => return Outcome::Running,
            // Evicted, deleted by its node, ...: the pod failed without the builder ending.
            Some("Failed") => {
                let why = status.and_then(|s| s.message.clone().or_else(|| s.reason.clone()));
                return Outcome::Failed {
                    message: format!("the build pod failed: {}", why.as_deref().unwrap_or("no reason given")),
                };
            }
            _ => {}
        }
    }
    let failed = job
        .and_then(|j| j.status.as_ref())
        .and_then(|s| s.conditions.as_deref())
        .and_then(|all| all.iter().find(|c| c.type_ == "Failed" && c.status == "True"));
    match failed {
        Some(c) => Outcome::Failed {
            message: format!(
                "the build Job failed: {}",
                c.message.as_deref().or(c.reason.as_deref()).unwrap_or_default()
            ),
        },
        None => Outcome::Waiting,
    }
}

/// Whether the pod's builder ran (its container started at some point): its logs are worth keeping.
pub fn builder_ran(pod: &Pod) -> bool {
    let statuses = pod.status.as_ref().and_then(|s| s.container_statuses.as_deref()).unwrap_or_default();
    statuses.iter().filter(|c| c.name == BUILD_CONTAINER).any(|c| {
        let state = c.state.as_ref();
        let last = c.last_state.as_ref();
        [state, last].into_iter().flatten().any(|s| s.running.is_some() || s.terminated.is_some())
    })
}

/// The build's phase from its conditions; `None` before the first status.
pub fn phase(build: &MachineOSBuild) -> Option<Phase> {
    let conditions = build.status.as_ref()?.conditions.as_deref()?;
    let is_true = |t: &str| conditions.iter().any(|c| c.type_ == t && c.status == "True");
    [
        (SUCCEEDED, Phase::Succeeded),
        (FAILED, Phase::Failed),
        (INTERRUPTED, Phase::Interrupted),
        (BUILDING, Phase::Building),
        (PREPARED, Phase::Prepared),
    ]
    .into_iter()
    .find_map(|(t, p)| is_true(t).then_some(p))
}

/// Upstream's five conditions for `phase` (`MachineOSBuild*Conditions`), with `detail` added to
/// the Failed message; a condition whose status does not change keeps its transition time.
pub fn conditions(phase: Phase, detail: Option<&str>, previous: &[Condition], now: &Time) -> Vec<Condition> {
    let failed_message = match detail {
        Some(detail) => format!("Build Failed: {detail}"),
        None => "Build Failed".to_string(),
    };
    [
        (PREPARED, "Prepared", "Build Prepared and Pending".to_string(), Phase::Prepared),
        (BUILDING, "Building", "Image Build In Progress".to_string(), Phase::Building),
        (FAILED, "Failed", failed_message, Phase::Failed),
        (INTERRUPTED, "Interrupted", "Build Interrupted".to_string(), Phase::Interrupted),
        (SUCCEEDED, "Ready", "Build Ready".to_string(), Phase::Succeeded),
    ]
    .into_iter()
    .map(|(type_, reason, message, when)| {
        let status = if phase == when { "True" } else { "False" };
        let since = previous
            .iter()
            .find(|c| c.type_ == type_ && c.status == status)
            .map_or_else(|| now.clone(), |c| c.last_transition_time.clone());
        Condition {
            type_: type_.to_string(),
            status: status.to_string(),
            reason: reason.to_string(),
            message,
            last_transition_time: since,
            observed_generation: None,
        }
    })
    .collect()
}

/// The status `build` should have once its Job (`job`, in `namespace`) says `outcome`, or `None`
/// when it already has it or has ended (an ended build's status is frozen).
pub fn next_status(
    build: &MachineOSBuild,
    outcome: &Outcome,
    job: &str,
    namespace: &str,
    now: &Time,
) -> Option<MachineOSBuildStatus> {
    if phase(build).is_some_and(Phase::ended) {
        return None;
    }
    let current = build.status.clone().unwrap_or_default();
    let mut next = current.clone();
    next.builder = Some(MachineOSBuilderReference {
        image_builder_type: MachineOSImageBuilderType::Job,
        job: Some(ObjectReference {
            group: "batch".into(),
            resource: "jobs".into(),
            namespace: Some(namespace.to_string()),
            name: job.to_string(),
        }),
    });
    let (phase, detail) = match outcome {
        Outcome::Waiting => (Phase::Prepared, None),
        Outcome::Running => (Phase::Building, None),
        Outcome::Succeeded { image } => {
            next.digested_image_push_spec = Some(image.clone());
            (Phase::Succeeded, None)
        }
        Outcome::Failed { message } => (Phase::Failed, Some(message.as_str())),
    };
    if phase.ended() {
        next.build_end = Some(now.clone());
    }
    if next.build_start.is_none() {
        next.build_start = Some(now.clone());
    }
    let previous = current.conditions.as_deref().unwrap_or_default();
    next.conditions = Some(conditions(phase, detail, previous, now));
    (!same_status(&current, &next)).then_some(next)
}

/// The status of a build stopped because it no longer builds what its MachineOSConfig wants
/// (upstream: Interrupted), or `None` when it had already ended.
pub fn interrupted(build: &MachineOSBuild, now: &Time) -> Option<MachineOSBuildStatus> {
    if phase(build).is_some_and(Phase::ended) {
        return None;
    }
    let mut next = build.status.clone().unwrap_or_default();
    let previous = next.conditions.take().unwrap_or_default();
    next.conditions = Some(conditions(Phase::Interrupted, None, &previous, now));
    next.build_end = Some(now.clone());
    Some(next)
}

/// Equal but for times (which [`conditions`] only moves when a status changes).
fn same_status(a: &MachineOSBuildStatus, b: &MachineOSBuildStatus) -> bool {
    let key = |s: &MachineOSBuildStatus| {
        let conditions: Vec<_> = s
            .conditions
            .iter()
            .flatten()
            .map(|c| (c.type_.clone(), c.status.clone(), c.reason.clone(), c.message.clone()))
            .collect();
        (
            conditions,
            s.builder.clone(),
            s.digested_image_push_spec.clone(),
            s.build_start.is_some(),
            s.build_end.is_some(),
        )
    };
    key(a) == key(b)
}

/// The pool's `ImageBuildDegraded` message for a failed build, as upstream's
/// `syncBuildFailureStatus` writes it (with the Failed condition as `<reason>: <message>`), or
/// `None` if `build` did not fail.
pub fn failure_message(pool: &str, build: &MachineOSBuild) -> Option<String> {
    let conditions = build.status.as_ref()?.conditions.as_deref()?;
    let failed = conditions.iter().find(|c| c.type_ == FAILED && c.status == "True")?;
    let name = build.metadata.name.as_deref().unwrap_or_default();
    Some(format!(
        "Failed to build OS image for pool {pool} (MachineOSBuild: {name}): {}: {}",
        failed.reason, failed.message
    ))
}

#[cfg(test)]
mod tests;
