//! The status a sync leaves on a KubeletConfig (the original's `syncStatusOnly`): the observed
//! generation, and an `Accepted` condition followed by the deprecated `Success`/`Failure` one.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use mco_api::machineconfiguration::{
    ConfigCondition, ContainerRuntimeConfigStatus, KubeletConfigStatus, config_condition,
};

/// How many `Accepted` conditions are kept.
const KEPT: usize = 3;

/// The status after a sync of generation `generation` that ended with `outcome` (`Ok`, or the
/// condition message of the failure), at `now`.
pub fn updated_status(
    previous: Option<&KubeletConfigStatus>,
    generation: Option<i64>,
    outcome: Result<(), &str>,
    now: &Time,
) -> KubeletConfigStatus {
    let (status, message) = match outcome {
        Ok(()) => ("True", "Success"),
        Err(message) => ("False", message),
    };
    let condition = |type_: &str, status: &str| ConfigCondition {
        type_: type_.to_string(),
        status: Some(status.to_string()),
        last_transition_time: Some(now.clone()),
        reason: None,
        message: Some(message.to_string()),
    };
    let mut conditions: Vec<ConfigCondition> = previous
        .and_then(|s| s.conditions.clone())
        .unwrap_or_default()
        .into_iter()
        .filter(|c| c.type_ != config_condition::SUCCESS && c.type_ != config_condition::FAILURE)
        .collect();
    match conditions.last_mut() {
        Some(last) if last.message.as_deref().unwrap_or_default() == message => {
            last.last_transition_time = Some(now.clone())
        }
        _ => conditions.push(condition(config_condition::ACCEPTED, status)),
    }
    if conditions.len() > KEPT {
        conditions.drain(..conditions.len() - KEPT);
    }
    conditions.push(match outcome {
        Ok(()) => condition(config_condition::SUCCESS, "True"),
        Err(_) => condition(config_condition::FAILURE, "True"),
    });
    KubeletConfigStatus { observed_generation: generation.filter(|g| *g != 0), conditions: Some(conditions) }
}

/// The status a ContainerRuntimeConfig sync leaves (the original's container runtime config
/// `syncStatusOnly`): a `Success` or `Failure` condition, appended unless the last one has the
/// same message, which it then replaces.
pub fn updated_runtime_status(
    previous: Option<&ContainerRuntimeConfigStatus>,
    generation: Option<i64>,
    outcome: Result<(), &str>,
    now: &Time,
) -> ContainerRuntimeConfigStatus {
    let (type_, message) = match outcome {
        Ok(()) => (config_condition::SUCCESS, "Success"),
        Err(message) => (config_condition::FAILURE, message),
    };
    let condition = ConfigCondition {
        type_: type_.to_string(),
        status: Some("True".to_string()),
        last_transition_time: Some(now.clone()),
        reason: None,
        message: Some(message.to_string()),
    };
    let mut conditions = previous.and_then(|s| s.conditions.clone()).unwrap_or_default();
    match conditions.last_mut() {
        Some(last) if last.message.as_deref().unwrap_or_default() == message => *last = condition,
        _ => conditions.push(condition),
    }
    ContainerRuntimeConfigStatus { observed_generation: generation.filter(|g| *g != 0), conditions: Some(conditions) }
}

/// Whether the last condition says the config was applied (`Accepted` true, or the older
/// `Success`).
pub(crate) fn succeeded(status: Option<&KubeletConfigStatus>) -> bool {
    status.and_then(|s| s.conditions.as_ref()?.last()).is_some_and(|c| {
        (c.type_ == config_condition::ACCEPTED && c.status.as_deref() == Some("True"))
            || c.type_ == config_condition::SUCCESS
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(seconds: i64) -> Time {
        Time(k8s_openapi::jiff::Timestamp::from_second(seconds).unwrap())
    }

    fn summary(status: &KubeletConfigStatus) -> Vec<(String, String, String, i64)> {
        status
            .conditions
            .iter()
            .flatten()
            .map(|c| {
                let time = c.last_transition_time.as_ref().unwrap().0.as_second();
                (c.type_.clone(), c.status.clone().unwrap(), c.message.clone().unwrap(), time)
            })
            .collect()
    }

    fn owned(rows: &[(&str, &str, &str, i64)]) -> Vec<(String, String, String, i64)> {
        rows.iter().map(|(a, b, c, d)| (a.to_string(), b.to_string(), c.to_string(), *d)).collect()
    }

    #[test]
    fn conditions_roll_as_upstream_keeps_them() {
        let first = updated_status(None, Some(1), Ok(()), &at(1));
        assert_eq!(first.observed_generation, Some(1));
        assert_eq!(summary(&first), owned(&[("Accepted", "True", "Success", 1), ("Success", "True", "Success", 1)]));
        assert!(succeeded(Some(&first)));

        // The same message again only moves the time.
        let again = updated_status(Some(&first), Some(2), Ok(()), &at(2));
        assert_eq!(summary(&again), owned(&[("Accepted", "True", "Success", 2), ("Success", "True", "Success", 2)]));

        // Failures append, and only the last three Accepted conditions stay.
        let mut status = again;
        for (i, message) in ["Error: a", "Error: b", "Error: c"].iter().enumerate() {
            status = updated_status(Some(&status), Some(3), Err(message), &at(10 + i as i64));
        }
        assert_eq!(
            summary(&status),
            owned(&[
                ("Accepted", "False", "Error: a", 10),
                ("Accepted", "False", "Error: b", 11),
                ("Accepted", "False", "Error: c", 12),
                ("Failure", "True", "Error: c", 12),
            ])
        );
        assert!(!succeeded(Some(&status)));
        assert!(!succeeded(None));
    }
}
