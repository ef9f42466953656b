//! Pool conditions, set the way upstream's `apihelpers.SetMachineConfigPoolCondition` does:
//! an identical condition (status, reason, message) changes nothing; a condition whose status stays
//! keeps its `lastTransitionTime`; the condition is then moved to the end of the list (clients that
//! read "the last condition" see the newest).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use mco_api::machineconfiguration::MachineConfigPoolCondition;

/// A condition as upstream builds it: reason and message written even when empty.
pub fn condition(type_: &str, on: bool, reason: &str, message: &str, now: &Time) -> MachineConfigPoolCondition {
    MachineConfigPoolCondition {
        type_: type_.to_string(),
        status: if on { "True" } else { "False" }.to_string(),
        last_transition_time: Some(now.clone()),
        reason: Some(reason.to_string()),
        message: Some(message.to_string()),
    }
}

/// The last condition of `type_` (upstream's getter also returns the last match).
pub fn get<'a>(conditions: &'a [MachineConfigPoolCondition], type_: &str) -> Option<&'a MachineConfigPoolCondition> {
    conditions.iter().rev().find(|c| c.type_ == type_)
}

/// `conditions` with `condition` set, or `None` when that changes nothing.
pub fn set(
    conditions: &[MachineConfigPoolCondition],
    mut condition: MachineConfigPoolCondition,
) -> Option<Vec<MachineConfigPoolCondition>> {
    if let Some(current) = get(conditions, &condition.type_) {
        if current.status == condition.status
            && or_empty(current.reason.as_deref()) == or_empty(condition.reason.as_deref())
            && or_empty(current.message.as_deref()) == or_empty(condition.message.as_deref())
        {
            return None;
        }
        if current.status == condition.status {
            condition.last_transition_time = current.last_transition_time.clone();
        }
    }
    let mut updated: Vec<_> = conditions.iter().filter(|c| c.type_ != condition.type_).cloned().collect();
    updated.push(condition);
    Some(updated)
}

/// [`set`] on a list held in place.
pub fn set_in(conditions: &mut Vec<MachineConfigPoolCondition>, condition: MachineConfigPoolCondition) {
    if let Some(updated) = set(conditions, condition) {
        *conditions = updated;
    }
}

// Go's condition fields are plain strings: absent and empty are the same.
fn or_empty(value: Option<&str>) -> &str {
    value.unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use k8s_openapi::jiff::Timestamp;

    use super::*;

    /// A condition at `at` seconds, as the conditions' writers build them.
    fn cond(type_: &str, status: &str, at: i64, message: &str) -> MachineConfigPoolCondition {
        condition(type_, status == "True", "", message, &Time(Timestamp::from_second(at).unwrap()))
    }

    #[test]
    fn set_follows_upstream() {
        let updated = cond("Updated", "True", 1, "");
        let render_ok = cond("RenderDegraded", "False", 1, "");
        let cases: Vec<(&str, Vec<MachineConfigPoolCondition>, MachineConfigPoolCondition, Option<Vec<_>>)> = vec![
            (
                "new type is appended",
                vec![updated.clone()],
                render_ok.clone(),
                Some(vec![updated.clone(), render_ok.clone()]),
            ),
            (
                "identical condition changes nothing, even with a new time",
                vec![render_ok.clone(), updated.clone()],
                cond("RenderDegraded", "False", 9, ""),
                None,
            ),
            (
                "same status, new message: old transition time, moved to the end",
                vec![cond("RenderDegraded", "True", 1, "a"), updated.clone()],
                cond("RenderDegraded", "True", 9, "b"),
                Some(vec![updated.clone(), cond("RenderDegraded", "True", 1, "b")]),
            ),
            (
                "status change takes the new transition time",
                vec![cond("RenderDegraded", "True", 1, "a")],
                cond("RenderDegraded", "False", 9, ""),
                Some(vec![cond("RenderDegraded", "False", 9, "")]),
            ),
            (
                "duplicates of the type are collapsed; the last one is compared",
                vec![cond("RenderDegraded", "True", 1, "a"), updated.clone(), cond("RenderDegraded", "False", 2, "")],
                cond("RenderDegraded", "False", 9, "x"),
                Some(vec![updated.clone(), cond("RenderDegraded", "False", 2, "x")]),
            ),
            (
                "absent reason equals empty reason",
                vec![MachineConfigPoolCondition { reason: None, ..render_ok.clone() }],
                render_ok.clone(),
                None,
            ),
        ];
        for (name, conditions, condition, want) in cases {
            assert_eq!(set(&conditions, condition), want, "{name}");
        }
    }
}
