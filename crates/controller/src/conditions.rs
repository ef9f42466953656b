//! The pool conditions of the render and PinnedImageSet controllers, `RenderDegraded` and
//! `PinnedImageSetsDegraded`, set with upstream's rules ([`mco_rollout::conditions::set`]).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::Patch;
use kube::{Api, Client, Resource as _, ResourceExt as _};
use mco_api::MachineConfigPool;
use mco_api::machineconfiguration::{MachineConfigPoolCondition, pool_condition};
pub use mco_rollout::conditions::{condition, get, set};
use serde_json::json;

use crate::{KubeError, kube_error, patch_params};

/// `kind=True` with `failure` as its message; else `kind=False`, written only when the condition
/// is not already False (whatever its message). `None`: nothing to write.
fn degraded(
    conditions: &[MachineConfigPoolCondition],
    kind: &str,
    failure: Option<String>,
    now: Time,
) -> Option<Vec<MachineConfigPoolCondition>> {
    let (status, message) = match failure {
        Some(message) => (true, message),
        None if get(conditions, kind).is_some_and(|c| c.status == "False") => return None,
        None => (false, String::new()),
    };
    set(conditions, condition(kind, status, "", &message, &now))
}

/// The render controller's status update: `RenderDegraded=True` with `Failed to render
/// configuration for pool <pool>: <error>` on failure, `RenderDegraded=False` on success.
pub fn render_degraded(
    conditions: &[MachineConfigPoolCondition],
    pool: &str,
    failure: Option<&str>,
    now: Time,
) -> Option<Vec<MachineConfigPoolCondition>> {
    let message = failure.map(|error| format!("Failed to render configuration for pool {pool}: {error}"));
    degraded(conditions, pool_condition::RENDER_DEGRADED, message, now)
}

/// The PinnedImageSet controller's: `PinnedImageSetsDegraded=True` with `Failed to populate
/// pinned image sets for pool <pool>: <error>` on failure, False on success.
pub fn pinned_image_sets_degraded(
    conditions: &[MachineConfigPoolCondition],
    pool: &str,
    failure: Option<&str>,
    now: Time,
) -> Option<Vec<MachineConfigPoolCondition>> {
    let message = failure.map(|error| format!("Failed to populate pinned image sets for pool {pool}: {error}"));
    degraded(conditions, pool_condition::PINNED_IMAGE_SETS_DEGRADED, message, now)
}

/// Writes `conditions` as `pool`'s, conditional on the pool's resourceVersion so that conditions
/// other controllers wrote in the meantime are not lost (a conflict fails the sync, which is retried).
pub async fn write(
    client: &Client,
    pool: &MachineConfigPool,
    conditions: Vec<MachineConfigPoolCondition>,
) -> Result<(), KubeError> {
    let name = pool.name_any();
    let patch = json!({
        "metadata": { "resourceVersion": pool.meta().resource_version },
        "status": { "conditions": conditions },
    });
    Api::<MachineConfigPool>::all(client.clone())
        .patch_status(&name, &patch_params(), &Patch::Merge(&patch))
        .await
        .map_err(kube_error(format!("updating the status of MachineConfigPool {name}")))?;
    Ok(())
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
