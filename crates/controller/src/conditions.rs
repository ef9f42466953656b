//! The render controller's condition: `RenderDegraded`, set with upstream's rules
//! ([`mco_rollout::conditions::set`]).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use mco_api::machineconfiguration::{MachineConfigPoolCondition, pool_condition};
pub use mco_rollout::conditions::{condition, get, set};

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
        Some(error) => (true, format!("Failed to render configuration for pool {pool}: {error}")),
        None if get(conditions, pool_condition::RENDER_DEGRADED).is_some_and(|c| c.status == "False") => return None,
        None => (false, String::new()),
    };
    set(conditions, condition(pool_condition::RENDER_DEGRADED, status, "", &message, &now))
}

#[cfg(test)]
mod tests {
    use k8s_openapi::jiff::Timestamp;

    use super::*;

    fn time(seconds: i64) -> Time {
        Time(Timestamp::from_second(seconds).unwrap())
    }

    fn render_degraded_at(status: bool, at: i64, message: &str) -> MachineConfigPoolCondition {
        condition(pool_condition::RENDER_DEGRADED, status, "", message, &time(at))
    }

    #[test]
    fn render_degraded_messages_and_no_op() {
        let now = time(50);
        let degraded = render_degraded(&[], "worker", Some("no MachineConfigs found"), now.clone()).unwrap();
        assert_eq!(
            degraded,
            vec![render_degraded_at(
                true,
                50,
                "Failed to render configuration for pool worker: no MachineConfigs found"
            )]
        );
        // The same failure again writes nothing.
        assert_eq!(render_degraded(&degraded, "worker", Some("no MachineConfigs found"), time(60)), None);

        let cleared = render_degraded(&degraded, "worker", None, time(70)).unwrap();
        assert_eq!(cleared, vec![render_degraded_at(false, 70, "")]);
        assert_eq!(render_degraded(&cleared, "worker", None, time(80)), None);
        // Already False with a message left by someone else: success does not rewrite it.
        assert_eq!(render_degraded(&[render_degraded_at(false, 1, "old")], "worker", None, time(80)), None);
        // Never set: success writes False.
        assert_eq!(render_degraded(&[], "worker", None, time(5)), Some(vec![render_degraded_at(false, 5, "")]));
    }
}
