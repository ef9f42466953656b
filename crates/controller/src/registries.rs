//! The image configuration controller (upstream's `syncImageConfig` in
//! `pkg/controller/container-runtime-config`): the Image config `cluster`, the
//! ImageDigestMirrorSets, ImageTagMirrorSets and ImageContentSourcePolicies become each built-in
//! pool's `99-<pool>-generated-registries` MachineConfig (registries.conf, policy.json, the
//! search registries drop-in), computed by `mco-registries`' pure sync and written here.
//!
//! One sync covers the whole cluster; any change of what it reads (those kinds, the pools' specs
//! and labels, the MachineConfigs, the ControllerConfig) runs it again. The kinds are the cluster's (OpenShift serves them;
//! `deploy/components/image-config` serves them elsewhere): while the cluster does not serve the
//! Image kind, the controller waits for it; a mirror kind it does not serve counts as none.
//!
//! The release payload the sync keeps pullable is the ControllerConfig's `spec.releaseImage`
//! (what the operator copies from the ClusterVersion; upstream reads the ClusterVersion itself),
//! so the controller needs no ClusterVersion, which a plain Kubernetes cluster lacks.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt as _;
use k8s_openapi::serde::de::DeserializeOwned;
use kube::api::ListParams;
use kube::runtime::controller::Action;
use kube::runtime::{Controller, WatchStreamExt as _, predicates, watcher};
use kube::{Api, Client, Resource};
use mco_api::constants::CONTROLLER_CONFIG_NAME;
use mco_api::image_config::{
    IMAGE_CONFIG_NAME, Image, ImageContentSourcePolicy, ImageDigestMirrorSet, ImageTagMirrorSet,
};
use mco_api::{ControllerConfig, MachineConfig, MachineConfigPool};
use mco_metrics::controller::ControllerMetrics;
use mco_registries::{BaseFiles, Cluster, ImageInputs, MirrorRules};
use mco_render::ControllerVersion;

use crate::generated::{delete_machine_config, write_machine_config};
use crate::reconciler::{self, ReconcileError, Reconciler, Retries};
use crate::{KubeError, events, kube_error, list_all, logging_errors};

/// How often the controller looks again for the Image kind while the cluster does not serve it.
const SERVED_CHECK_PERIOD: Duration = Duration::from_secs(60);

/// Why a sync failed; it is tried again after [`Context::retry_delay`].
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Kube(#[from] KubeError),
    /// What upstream's sync returns (and retries): invalid scopes, mirrors, a bad release image.
    #[error("syncing the image configuration: {0}")]
    Sync(#[from] mco_registries::SyncError),
}

impl ReconcileError for Error {
    fn metric_label(&self) -> &'static str {
        match self {
            Error::Kube(_) => "kube",
            Error::Sync(_) => "sync",
        }
    }
}

struct Context {
    client: Client,
    version: ControllerVersion,
    base: BaseFiles,
    retries: Retries,
}

impl Reconciler<Error> for Context {
    fn retries(&self) -> &Retries {
        &self.retries
    }
}

/// Runs the controller until its watches end (they retry errors, so: forever); a failed sync is
/// first tried again after `retry_delay` (doubled with each failure in a row), counted in `metrics`.
pub async fn run(client: Client, version: ControllerVersion, retry_delay: Duration, metrics: ControllerMetrics) {
    let images = Api::<Image>::all(client.clone());
    let mut waited = false;
    while let Err(e) = images.list_metadata(&ListParams::default().limit(1)).await {
        let not_served = is_not_served(&e);
        if not_served && !waited {
            tracing::info!(
                "the cluster serves no config.openshift.io/v1 Image ({e}): registries files are not managed until it does"
            );
            waited = true;
        } else if !not_served {
            tracing::warn!("looking for the Image kind (retrying): {e}");
        }
        tokio::time::sleep(if not_served { SERVED_CHECK_PERIOD } else { retry_delay }).await;
    }
    let retries = Retries::new("registries", retry_delay, metrics);
    let context = Arc::new(Context { client: client.clone(), version, base: BaseFiles::from_templates(), retries });
    // A rolling pool's status changes with every node's step: only what the sync reads of a pool
    // (its spec, its labels) triggers it. MachineConfigs do: a pool's own registries.conf is the
    // base of its generated one.
    let pools = watcher(Api::<MachineConfigPool>::all(client.clone()), watcher::Config::default())
        .default_backoff()
        .touched_objects()
        .predicate_filter(pool_inputs, Default::default());
    let machine_configs = watcher(Api::<MachineConfig>::all(client.clone()), watcher::Config::default())
        .default_backoff()
        .touched_objects()
        .predicate_filter(predicates::generation, Default::default());
    let triggers = vec![
        logging_errors("MachineConfigPools", pools).map(|_| ()).boxed(),
        logging_errors("MachineConfigs", machine_configs).map(|_| ()).boxed(),
        events("ControllerConfigs", Api::<ControllerConfig>::all(client.clone())).map(|_| ()).boxed(),
        events("ImageDigestMirrorSets", Api::<ImageDigestMirrorSet>::all(client.clone())).map(|_| ()).boxed(),
        events("ImageTagMirrorSets", Api::<ImageTagMirrorSet>::all(client.clone())).map(|_| ()).boxed(),
        events("ImageContentSourcePolicies", Api::<ImageContentSourcePolicy>::all(client.clone())).map(|_| ()).boxed(),
    ];
    let controller =
        Controller::new(images, watcher::Config::default().fields(&format!("metadata.name={IMAGE_CONFIG_NAME}")))
            .reconcile_all_on(futures::stream::select_all(triggers));
    reconciler::run(controller, reconcile, context).await;
}

/// What the sync reads of a pool: its spec (the selector) and its labels (built-in or not).
fn pool_inputs(pool: &MachineConfigPool) -> Option<u64> {
    crate::fingerprint(&(pool.metadata.generation, &pool.metadata.labels))
}

async fn reconcile(image: Arc<Image>, context: Arc<Context>) -> Result<Action, Error> {
    let client = &context.client;
    if image.meta().deletion_timestamp.is_some() {
        // The generated MachineConfigs go with it (their owner), by garbage collection.
        return Ok(Action::await_change());
    }
    let controller_config = Api::<ControllerConfig>::all(client.clone())
        .get_opt(CONTROLLER_CONFIG_NAME)
        .await
        .map_err(kube_error(format!("reading ControllerConfig {CONTROLLER_CONFIG_NAME}")))?;
    let release_image = controller_config.as_ref().and_then(|c| c.spec.release_image.as_deref());
    let pools = list_all::<MachineConfigPool>(client, "MachineConfigPools").await?;
    let machine_configs = list_all::<MachineConfig>(client, "MachineConfigs").await?;
    let digest_sets = list_served::<ImageDigestMirrorSet>(client, "ImageDigestMirrorSets").await?;
    let tag_sets = list_served::<ImageTagMirrorSet>(client, "ImageTagMirrorSets").await?;
    let policies = list_served::<ImageContentSourcePolicy>(client, "ImageContentSourcePolicies").await?;
    let inputs = ImageInputs {
        image: Some(&image),
        release_image,
        mirrors: MirrorRules {
            image_digest_mirror_sets: &digest_sets,
            image_tag_mirror_sets: &tag_sets,
            image_content_source_policies: &policies,
        },
    };
    let cluster = Cluster {
        pools: &pools,
        machine_configs: &machine_configs,
        controller_version: &context.version.hash,
        base: &context.base,
    };
    let synced = mco_registries::sync_image_config(&inputs, &cluster);
    if let Some(warning) = synced.blocked_and_allowed.as_ref().and_then(|lists| lists.warning.as_ref()) {
        tracing::warn!("image configuration: {warning}");
    }
    let api = Api::<MachineConfig>::all(client.clone());
    for generated in &synced.machine_configs {
        write_machine_config(&api, generated).await?;
    }
    for stale in &synced.deletions {
        delete_machine_config(&api, stale).await?;
    }
    synced.outcome?;
    if release_image.is_none() {
        tracing::info!(
            "ControllerConfig {CONTROLLER_CONFIG_NAME} names no release image yet: registries files wait for it"
        );
    }
    Ok(Action::await_change())
}

/// Whether `error` says the cluster does not serve the kind asked for: a bare 404 (a missing API
/// group answers one that `is_not_found` does not recognise). Anything else (a timeout, an API
/// server restarting) is worth retrying soon: a controller that just became the leader on a
/// loaded cluster must not wait [`SERVED_CHECK_PERIOD`] for a blip.
fn is_not_served(error: &kube::Error) -> bool {
    matches!(error, kube::Error::Api(status) if status.code == 404)
}

/// Like [`list_all`], with a kind the cluster does not serve listed as empty.
async fn list_served<T>(client: &Client, what: &str) -> Result<Vec<T>, Error>
where
    T: Resource<DynamicType = ()> + Clone + DeserializeOwned + std::fmt::Debug,
{
    match Api::<T>::all(client.clone()).list(&ListParams::default()).await {
        Ok(listed) => Ok(listed.items),
        Err(e) if is_not_served(&e) => Ok(Vec::new()),
        Err(e) => Err(kube_error(format!("listing {what}"))(e).into()),
    }
}

#[cfg(test)]
mod tests {
    use kube::core::Status;

    use super::*;

    #[test]
    fn only_a_404_means_the_kind_is_not_served() {
        let api = |code: u16| kube::Error::Api(Box::new(Status { code, ..Status::default() }));
        let cases = [
            ("a missing API group's bare 404", api(404), true),
            ("forbidden", api(403), false),
            ("an API server failing", api(500), false),
            ("too many requests", api(429), false),
            ("no answer at all", kube::Error::LinesCodecMaxLineLengthExceeded, false),
        ];
        for (what, error, not_served) in cases {
            assert_eq!(is_not_served(&error), not_served, "{what}");
        }
    }
}
