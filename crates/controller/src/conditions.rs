//! The render controller's condition: `RenderDegraded`, set with upstream's rules
//! ([`mco_rollout::conditions::set`]).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use mco_api::machineconfiguration::{MachineConfigPoolCondition, pool_condition};
pub use mco_rollout::conditions::{get, set};

/// The render controller's status update: `RenderDegraded=True` with `Failed to render
/// configuration for pool <pool>: <error>` on failure; on success `RenderDegraded=False`, written
/// only when the condition is not already False (whatever its message). `None`: nothing to write.
pub fn render_degraded(
    conditions: &[MachineConfigPoolCondition],
    pool: &str,
    failure: Option<&str>,
    now: Time,
) -> Option<Vec<MachineConfigPoolCondition>> {
    let (status, message) = match failure {
        Some(error) => ("True", format!("Failed to render configuration for pool {pool}: {error}")),
        None if get(conditions, pool_condition::RENDER_DEGRADED).is_some_and(|c| c.status == "False") => return None,
        None => ("False", String::new()),
    };
    set(
        conditions,
        MachineConfigPoolCondition {
            type_: pool_condition::RENDER_DEGRADED.to_string(),
            status: status.to_string(),
            last_transition_time: Some(now),
            // Go writes `reason` and `message` even when empty.
            reason: Some(String::new()),
            message: Some(message),
        },
    )
}

#[cfg(test)]
mod tests {
    use k8s_openapi::jiff::Timestamp;

    use super::*;

    fn time(seconds: i64) -> Time {
        Time(Timestamp::from_second(seconds).unwrap())
    }

    fn cond(type_: &str, status: &str, at: i64, message: &str) -> MachineConfigPoolCondition {
        MachineConfigPoolCondition {
            type_: type_.to_string(),
            status: status.to_string(),
            last_transition_time: Some(time(at)),
            reason: Some(String::new()),
            message: Some(message.to_string()),
        }
    }

    #[test]
    fn render_degraded_messages_and_no_op() {
        let now = time(50);
        let degraded = render_degraded(&[], "worker", Some("no MachineConfigs found"), now.clone()).unwrap();
        assert_eq!(
            degraded,
            vec![cond(
                "RenderDegraded",
                "True",
                50,
                "Failed to render configuration for pool worker: no MachineConfigs found"
            )]
        );
        // The same failure again writes nothing.
        assert_eq!(render_degraded(&degraded, "worker", Some("no MachineConfigs found"), time(60)), None);

        let cleared = render_degraded(&degraded, "worker", None, time(70)).unwrap();
        assert_eq!(cleared, vec![cond("RenderDegraded", "False", 70, "")]);
        assert_eq!(render_degraded(&cleared, "worker", None, time(80)), None);
        // Already False with a message left by someone else: success does not rewrite it.
        assert_eq!(render_degraded(&[cond("RenderDegraded", "False", 1, "old")], "worker", None, time(80)), None);
        // Never set: success writes False.
        assert_eq!(render_degraded(&[], "worker", None, time(5)), Some(vec![cond("RenderDegraded", "False", 5, "")]));
    }
}
