//! The PinnedImageSet controller (upstream `pkg/controller/pinnedimageset`): a pool's
//! `spec.pinnedImageSets` names, sorted, the PinnedImageSets whose labels its
//! `machineConfigSelector` selects (as it selects MachineConfigs: label a set
//! `machineconfiguration.openshift.io/role: worker` and the worker pool's nodes pin its images);
//! `PinnedImageSetsDegraded` says when that cannot be done.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, Time};
use k8s_openapi::jiff::Timestamp;
use kube::api::{ListParams, Patch};
use kube::runtime::controller::{Action, Config};
use kube::{Api, Client, Resource as _, ResourceExt as _};
use mco_api::machineconfiguration::NameReference;
use mco_api::{MachineConfigPool, PinnedImageSet};
use mco_metrics::controller::ControllerMetrics;
use mco_render::select::{InvalidSelector, Selection};
use serde_json::json;

use crate::events;
use crate::reconciler::{self, Reconciler, Retries};
use crate::render::controller::every_pool;
use crate::{KubeError, conditions, kube_error, patch_params};

/// How long a failed sync first waits before it is tried again (doubled with each failure in a row).
const RETRY: Duration = Duration::from_secs(10);

struct Context {
    client: Client,
    retries: Retries,
}

impl Reconciler<KubeError> for Context {
    fn retries(&self) -> &Retries {
        &self.retries
    }
}

/// The `spec.pinnedImageSets` of `pool`: the sets it selects, sorted by name, or no list when
/// there are none (as upstream writes it). `None`: nothing to write, for a pool whose selector is
/// `{}` (upstream leaves those alone).
pub fn selected(
    pool: &MachineConfigPool,
    sets: &[PinnedImageSet],
) -> Result<Option<Option<Vec<NameReference>>>, InvalidSelector> {
    let selector = pool.spec.machine_config_selector.as_ref();
    if selector == Some(&LabelSelector::default()) {
        return Ok(None);
    }
    let selection = Selection::new(selector)?;
    let mut names: Vec<String> =
        sets.iter().filter(|set| selection.matches(set.metadata.labels.as_ref())).map(|set| set.name_any()).collect();
    names.sort();
    Ok(Some((!names.is_empty()).then(|| names.into_iter().map(NameReference::new).collect())))
}

/// Runs the controller until its watches end (they retry errors, so: forever).
pub async fn run(client: Client, metrics: ControllerMetrics) {
    // Its selector is all of a pool it reads.
    let controller = crate::pool_controller(&client, kube::runtime::predicates::generation)
        .with_config(Config::default().debounce(Duration::from_millis(500)));
    let every = every_pool(controller.store());
    let controller =
        controller.watches_stream(events("PinnedImageSets", Api::<PinnedImageSet>::all(client.clone())), every);
    let context = Arc::new(Context { client, retries: Retries::new("pinnedimageset", RETRY, metrics) });
    reconciler::run(controller, reconcile, context).await;
}

async fn reconcile(pool: Arc<MachineConfigPool>, context: Arc<Context>) -> Result<Action, KubeError> {
    let client = &context.client;
    let name = pool.name_any();
    let sets = Api::<PinnedImageSet>::all((*client).clone())
        .list(&ListParams::default())
        .await
        .map_err(kube_error("listing PinnedImageSets"))?
        .items;
    let (pool, failure) = match selected(&pool, &sets) {
        Ok(None) => return Ok(Action::await_change()),
        Ok(Some(refs)) if refs == pool.spec.pinned_image_sets => ((*pool).clone(), None),
        Ok(Some(refs)) => {
            tracing::info!(pool = %name, sets = ?refs.iter().flatten().map(|r| &r.name).collect::<Vec<_>>(), "pinned image sets");
            // Conditional on the pool read: a spec written meanwhile is not overwritten.
            let patch = json!({
                "metadata": {"resourceVersion": pool.meta().resource_version},
                "spec": {"pinnedImageSets": refs},
            });
            let updated = Api::<MachineConfigPool>::all((*client).clone())
                .patch(&name, &patch_params(), &Patch::Merge(&patch))
                .await
                .map_err(kube_error(format!("setting the pinned image sets of MachineConfigPool {name}")))?;
            (updated, None)
        }
        Err(e) => ((*pool).clone(), Some(e.to_string())),
    };
    let current = pool.status.as_ref().and_then(|s| s.conditions.clone()).unwrap_or_default();
    if let Some(updated) =
        conditions::pinned_image_sets_degraded(&current, &name, failure.as_deref(), Time(Timestamp::now()))
    {
        conditions::write(client, &pool, updated).await?;
    }
    Ok(Action::await_change())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pool(selector: Option<serde_json::Value>) -> MachineConfigPool {
        let mut pool: MachineConfigPool =
            serde_json::from_value(json!({"metadata": {"name": "worker"}, "spec": {}})).unwrap();
        pool.spec.machine_config_selector = selector.map(|s| serde_json::from_value(s).unwrap());
        pool
    }

    fn set(name: &str, labels: serde_json::Value) -> PinnedImageSet {
        serde_json::from_value(json!({
            "metadata": {"name": name, "labels": labels},
            "spec": {"pinnedImages": [{"name": format!("quay.io/a/{name}@sha256:{}", "0".repeat(64))}]},
        }))
        .unwrap()
    }

    #[test]
    fn a_pool_lists_the_sets_its_machine_config_selector_selects_sorted_by_name() {
        let role = |r: &str| json!({"machineconfiguration.openshift.io/role": r});
        let sets = [
            set("zeta", role("worker")),
            set("alpha", role("worker")),
            set("m", role("master")),
            set("none", json!({})),
        ];
        let names = |refs: Option<Vec<NameReference>>| refs.map(|r| r.into_iter().map(|r| r.name).collect::<Vec<_>>());
        let worker = pool(Some(json!({"matchLabels": role("worker")})));
        assert_eq!(
            selected(&worker, &sets).unwrap().map(names),
            Some(Some(vec!["alpha".to_string(), "zeta".to_string()]))
        );
        let infra = pool(Some(json!({"matchExpressions": [
            {"key": "machineconfiguration.openshift.io/role", "operator": "In", "values": ["worker", "infra"]},
        ]})));
        assert_eq!(
            selected(&infra, &sets).unwrap().map(names),
            Some(Some(vec!["alpha".to_string(), "zeta".to_string()]))
        );
        // No set selected: no list at all, as upstream writes it.
        let custom = pool(Some(json!({"matchLabels": role("custom")})));
        assert_eq!(selected(&custom, &sets).unwrap(), Some(None));
        // A nil selector selects nothing; `{}` would select everything and is left alone.
        assert_eq!(selected(&pool(None), &sets).unwrap(), Some(None));
        assert_eq!(selected(&pool(Some(json!({}))), &sets).unwrap(), None);
        // An invalid selector is the pool's error.
        let bad = pool(Some(json!({"matchExpressions": [{"key": "k", "operator": "Sideways", "values": ["v"]}]})));
        assert!(selected(&bad, &sets).is_err());
    }
}
