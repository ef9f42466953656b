//! The OSImageStream controller (upstream `pkg/controller/osimagestream`): keeps the singleton
//! `cluster` listing the OS image streams the cluster's sources offer
//! ([`mco_render::stream_sources`]): each source's images are inspected (their labels say the
//! stream and the kind) with the registries configuration and pull secret of the worker pool's
//! nodes, as the render controller's OS image check does; a tag is recorded by the digest found.
//! Synced when the ControllerConfig, the source ConfigMaps or the object's spec or annotations
//! change (a deleted object is made again). A cluster whose images carry no stream labels gets
//! no OSImageStream, and its pools render from the ControllerConfig's images.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, Patch, PostParams};
use kube::runtime::controller::Action;
use kube::runtime::reflector::ObjectRef;
use kube::runtime::{Controller, WatchStreamExt as _, watcher};
use kube::{Api, Client, ResourceExt as _};
use mco_api::constants::{
    BASE_OS_CONTAINER_IMAGE_KEY, BASE_OS_EXTENSIONS_CONTAINER_IMAGE_KEY, CONTROLLER_CONFIG_NAME, IMAGE_REFERENCES_KEY,
    MCO_NAMESPACE, OS_IMAGE_STREAM_NAME, OS_IMAGE_URL_CONFIGMAP, RELEASE_IMAGE_REFERENCES_CONFIGMAP,
    RELEASE_IMAGE_VERSION_ANNOTATION, WORKER_POOL,
};
use mco_api::machineconfiguration::{image_repository, is_by_digest};
use mco_api::{ControllerConfig, MachineConfig, MachineConfigPool, OSImageStream};
use mco_bootimage::skew::ClusterVersion;
use mco_metrics::controller::ControllerMetrics;
use mco_render::ControllerVersion;
use mco_render::stream_sources;
use serde_json::json;

use crate::reconciler::{self, ReconcileError, Reconciler, Retries};
use crate::render::controller::worker_pool_specs;
use crate::render::os_image;
use crate::{KubeError, kube_error, logging_errors, patch_params};

/// Timing of the controller.
#[derive(Debug, Clone)]
pub struct Options {
    /// Delay before a failed sync is first tried again (doubled with each failure in a row).
    pub retry_delay: Duration,
    /// How often sources without streams are looked at again (images may be pushed later).
    pub rescan: Duration,
    /// Failed syncs are counted here.
    pub metrics: ControllerMetrics,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            retry_delay: Duration::from_secs(10),
            rescan: Duration::from_secs(300),
            metrics: ControllerMetrics::default(),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Kube(#[from] KubeError),
    #[error("building the OSImageStream: {0}")]
    Build(String),
    #[error("checking an OS image: {0}")]
    Skopeo(String),
}

impl ReconcileError for Error {
    fn metric_label(&self) -> &'static str {
        match self {
            Error::Kube(_) => "kube",
            Error::Build(_) => "build",
            Error::Skopeo(_) => "skopeo",
        }
    }
}

struct Context {
    client: Client,
    version: ControllerVersion,
    options: Options,
    retries: Retries,
}

impl Reconciler<Error> for Context {
    fn retries(&self) -> &Retries {
        &self.retries
    }
}

/// Runs the controller until its watches end (they retry errors, so: forever).
pub async fn run(client: Client, version: ControllerVersion, options: Options) {
    let singleton = || ObjectRef::<ControllerConfig>::new(CONTROLLER_CONFIG_NAME);
    let config_maps = Api::<ConfigMap>::namespaced(client.clone(), MCO_NAMESPACE);
    let streams = Api::<OSImageStream>::all(client.clone());
    let controller_configs = Api::<ControllerConfig>::all(client.clone());
    let by_name = watcher::Config::default().fields(&format!("metadata.name={CONTROLLER_CONFIG_NAME}"));
    let retries = Retries::new("osimagestream", options.retry_delay, options.metrics.clone());
    let context = Arc::new(Context { client: client.clone(), version, options, retries });
    let source = |name: &str| {
        // One ConfigMap each: the grants name them.
        let by_name = watcher::Config::default().fields(&format!("metadata.name={name}"));
        logging_errors("ConfigMaps", watcher(config_maps.clone(), by_name).default_backoff().touched_objects())
    };
    let controller = Controller::new(controller_configs, by_name)
        .watches_stream(source(OS_IMAGE_URL_CONFIGMAP), move |_| Some(singleton()))
        .watches_stream(source(RELEASE_IMAGE_REFERENCES_CONFIGMAP), move |_| Some(singleton()))
        // The images are inspected with the worker pool's registries configuration and pull secret.
        .watches_stream(worker_pool_specs(Api::all(client)), move |_| Some(singleton()))
        // Its spec (the admin's default stream), its annotations, its deletion. (Its status too:
        // the sync after a write finds nothing to do.)
        .watches_stream(
            logging_errors(
                "OSImageStreams",
                watcher(streams, watcher::Config::default()).default_backoff().touched_objects(),
            ),
            move |_| Some(singleton()),
        );
    reconciler::run(controller, reconcile, context).await;
}

/// The images of each source, in upstream's order; a source that cannot be read is left out
/// (with a warning), as upstream's discovery does.
fn source_images(controller_config: &ControllerConfig, config_maps: &[ConfigMap]) -> Vec<Vec<String>> {
    let data = |name: &str| config_maps.iter().find(|cm| cm.name_any() == name).and_then(|cm| cm.data.clone());
    let spec = &controller_config.spec;
    let from_cc = [&spec.base_os_container_image, &spec.base_os_extensions_container_image];
    let mut sources = vec![from_cc.into_iter().flatten().cloned().collect::<Vec<_>>()];
    let os_image_urls = data(OS_IMAGE_URL_CONFIGMAP).unwrap_or_default();
    let keys = [BASE_OS_CONTAINER_IMAGE_KEY, BASE_OS_EXTENSIONS_CONTAINER_IMAGE_KEY];
    sources.push(keys.iter().filter_map(|k| os_image_urls.get(*k).cloned()).collect());
    let references = data(RELEASE_IMAGE_REFERENCES_CONFIGMAP).and_then(|d| d.get(IMAGE_REFERENCES_KEY).cloned());
    match references.map(|r| stream_sources::release_os_images(&r)) {
        Some(Ok(images)) => sources.push(images),
        Some(Err(e)) => tracing::warn!("error fetching OSImageStreams from a source: {e}"),
        None => {}
    }
    sources.into_iter().map(|images| images.into_iter().filter(|i| !i.is_empty()).collect()).collect()
}

/// Annotation (mco's own) recording the source images the streams were built from: they are
/// built again only when these, or mco's version, change (upstream: when the release does), so a
/// registry that fails once does not take a stream away.
pub const SOURCES_ANNOTATION: &str = "mco.dev/os-image-stream-sources";

async fn reconcile(controller_config: Arc<ControllerConfig>, context: Arc<Context>) -> Result<Action, Error> {
    let client = &context.client;
    let config_maps = Api::<ConfigMap>::namespaced(client.clone(), MCO_NAMESPACE);
    let mut found = Vec::new();
    for name in [OS_IMAGE_URL_CONFIGMAP, RELEASE_IMAGE_REFERENCES_CONFIGMAP] {
        found.extend(config_maps.get_opt(name).await.map_err(kube_error(format!("reading ConfigMap {name}")))?);
    }
    let sources = source_images(&controller_config, &found);
    let fingerprint = serde_json::to_string(&sources).expect("strings serialize");
    let api = Api::<OSImageStream>::all(client.clone());
    let existing = api
        .get_opt(OS_IMAGE_STREAM_NAME)
        .await
        .map_err(kube_error(format!("reading OSImageStream {OS_IMAGE_STREAM_NAME}")))?;
    let ours = BTreeMap::from([
        (RELEASE_IMAGE_VERSION_ANNOTATION.to_string(), context.version.hash.clone()),
        (SOURCES_ANNOTATION.to_string(), fingerprint),
    ]);
    if let Some(existing) = existing.as_ref().filter(|e| is_current(e, &ours)) {
        follow_default(&api, existing).await?;
        return Ok(Action::await_change());
    }
    let Some(pull_files) = worker_pull_files(client).await? else {
        tracing::debug!(
            "waiting for the worker pool's rendered config, whose registries settings the images are read with"
        );
        return Ok(Action::requeue(context.options.retry_delay));
    };
    let mut discovered = Vec::new();
    for images in sources {
        let mut labelled = Vec::new();
        for image in images {
            let inspected =
                os_image::inspect(&image, None, pull_files.path()).await.map_err(|e| Error::Skopeo(e.to_string()))?;
            match inspected {
                Ok(found) => {
                    let pinned = if is_by_digest(&image) {
                        image
                    } else {
                        format!("{}@{}", image_repository(&image), found.digest)
                    };
                    labelled.push((pinned, found.labels));
                }
                Err(e) => tracing::warn!("error inspecting image for OSImageStream discovery. {image} is ignored. {e}"),
            }
        }
        discovered.push(stream_sources::group(&labelled));
    }
    let streams = stream_sources::merge_sources(discovered);
    if streams.is_empty() {
        if existing.is_some() {
            // Pools wait for streams of this version: say so until some are found.
            return Err(Error::Build("unable to retrieve any OSImageStream from the configured sources".into()));
        }
        tracing::debug!("no OS image streams in the cluster's sources (no image has the stream labels)");
        return Ok(Action::requeue(context.options.rescan));
    }
    let release = install_version(client, &controller_config).await?;
    let default = stream_sources::default_stream(existing.as_ref(), &streams, || {
        stream_sources::builtin_default_stream(&release)
    })
    .map_err(Error::Build)?;
    let desired = stream_sources::desired(existing.as_ref(), streams, default, ours);
    write(&api, existing.as_ref(), &desired).await?;
    Ok(Action::await_change())
}

/// Whether `existing` was built by this version from these sources (`ours`) and has streams.
fn is_current(existing: &OSImageStream, ours: &BTreeMap<String, String>) -> bool {
    let annotations = existing.metadata.annotations.clone().unwrap_or_default();
    existing.status.is_some() && ours.iter().all(|(key, value)| annotations.get(key) == Some(value))
}

/// The admin changed `spec.defaultStream` (the API server checked it is available): the status
/// follows, and the pools that name no stream move.
async fn follow_default(api: &Api<OSImageStream>, existing: &OSImageStream) -> Result<(), Error> {
    let status = existing.status.as_ref().expect("a current object has a status");
    let wanted = &existing.spec.default_stream;
    if wanted.is_empty() || *wanted == status.default_stream {
        return Ok(());
    }
    if !status.available_streams.iter().any(|s| s.name == *wanted) {
        return Err(Error::Build(format!(
            "syncing default OSImageStream with OSImageStream {wanted}: osimagestreams.machineconfiguration.openshift.io \
             \"{wanted}\" not found"
        )));
    }
    let patch = json!({"status": {"defaultStream": wanted}});
    let action = format!("writing the status of OSImageStream {OS_IMAGE_STREAM_NAME}");
    api.patch_status(OS_IMAGE_STREAM_NAME, &patch_params(), &Patch::Merge(&patch)).await.map_err(kube_error(action))?;
    tracing::info!("OSImageStream default has changed from {} to {wanted}", status.default_stream);
    Ok(())
}

/// The release the cluster was installed with (upstream: the oldest completed ClusterVersion
/// history entry), else the ControllerConfig's release: the built-in default stream's.
async fn install_version(client: &Client, controller_config: &ControllerConfig) -> Result<String, Error> {
    let resource = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("config.openshift.io", "v1", "ClusterVersion"),
        "clusterversions",
    );
    let read = Api::<DynamicObject>::all_with(client.clone(), &resource).get_opt("version").await;
    let installed = match read {
        Ok(object) => object
            .and_then(|o| serde_json::from_value::<ClusterVersion>(serde_json::to_value(o).ok()?).ok())
            .map(|cv| cv.install_version())
            .filter(|v| v != "0.0.0"),
        // A cluster without the kind (plain Kubernetes) answers 404 for the resource.
        Err(kube::Error::Api(e)) if e.code == 404 => None,
        Err(e) => return Err(kube_error("reading ClusterVersion version")(e).into()),
    };
    let release = || controller_config.annotations().get(RELEASE_IMAGE_VERSION_ANNOTATION).cloned().unwrap_or_default();
    Ok(installed.unwrap_or_else(release))
}

/// Creates the object or brings its status and then its annotations (which say what the status
/// was built from) to `desired`'s.
async fn write(
    api: &Api<OSImageStream>,
    existing: Option<&OSImageStream>,
    desired: &OSImageStream,
) -> Result<(), Error> {
    let action = format!("writing OSImageStream {OS_IMAGE_STREAM_NAME}");
    if existing.is_none() {
        let mut created = desired.clone();
        created.status = None;
        api.create(&PostParams::default(), &created).await.map_err(kube_error(action.clone()))?;
        tracing::info!("created OSImageStream {OS_IMAGE_STREAM_NAME}");
    }
    if existing.and_then(|e| e.status.as_ref()) != desired.status.as_ref() {
        let patch = json!({"status": desired.status});
        api.patch_status(OS_IMAGE_STREAM_NAME, &patch_params(), &Patch::Merge(&patch))
            .await
            .map_err(kube_error(action.clone()))?;
        let status = desired.status.as_ref().expect("the desired object has a status");
        let names: Vec<&str> = status.available_streams.iter().map(|s| s.name.as_str()).collect();
        tracing::info!(streams = ?names, default = %status.default_stream, "OSImageStream {OS_IMAGE_STREAM_NAME} updated");
    }
    if existing.is_some_and(|e| e.metadata.annotations != desired.metadata.annotations) {
        let patch = json!({"metadata": {"annotations": desired.metadata.annotations}});
        api.patch(OS_IMAGE_STREAM_NAME, &patch_params(), &Patch::Merge(&patch)).await.map_err(kube_error(action))?;
    }
    Ok(())
}

/// The registries configuration and pull secret of the worker pool's nodes (its current
/// rendered config's), as files in a directory; none before the pool has one.
async fn worker_pull_files(client: &Client) -> Result<Option<tempfile::TempDir>, Error> {
    let pool = Api::<MachineConfigPool>::all(client.clone())
        .get_opt(WORKER_POOL)
        .await
        .map_err(kube_error(format!("reading MachineConfigPool {WORKER_POOL}")))?;
    let rendered_name = pool.and_then(|p| p.spec.configuration.and_then(|c| c.name));
    let rendered = match rendered_name {
        Some(name) => Api::<MachineConfig>::all(client.clone())
            .get_opt(&name)
            .await
            .map_err(kube_error(format!("reading MachineConfig {name}")))?,
        None => None,
    };
    rendered.map(|rendered| crate::render::controller::pull_files(&rendered).map_err(Error::Build)).transpose()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config_map(name: &str, data: &[(&str, &str)]) -> ConfigMap {
        let mut cm = ConfigMap::default();
        cm.metadata.name = Some(name.to_string());
        cm.data = Some(data.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect());
        cm
    }

    #[test]
    fn sources_are_the_controller_configs_the_configmaps_and_the_releases_in_order() {
        let mut cc = ControllerConfig::new(CONTROLLER_CONFIG_NAME, Default::default());
        cc.spec.base_os_container_image = Some("cc/os@sha256:1".into());
        cc.spec.base_os_extensions_container_image = Some(String::new());
        let references = "spec:\n  tags:\n  - name: rhel-coreos-10\n    from: {kind: DockerImage, name: rel/os-10}\n";
        let config_maps = [
            config_map(OS_IMAGE_URL_CONFIGMAP, &[(BASE_OS_CONTAINER_IMAGE_KEY, "cm/os"), ("osImageURL", "cm/old")]),
            config_map(RELEASE_IMAGE_REFERENCES_CONFIGMAP, &[(IMAGE_REFERENCES_KEY, references)]),
            config_map("other", &[(BASE_OS_CONTAINER_IMAGE_KEY, "no")]),
        ];
        let sources = source_images(&cc, &config_maps);
        assert_eq!(sources, [vec!["cc/os@sha256:1"], vec!["cm/os"], vec!["rel/os-10"]]);
        assert_eq!(source_images(&cc, &[]), [vec!["cc/os@sha256:1"], vec![]]);
        // A release source that cannot be read is left out; the others still count.
        let bad = [config_map(RELEASE_IMAGE_REFERENCES_CONFIGMAP, &[(IMAGE_REFERENCES_KEY, "spec: [")])];
        assert_eq!(source_images(&cc, &bad), [vec!["cc/os@sha256:1"], vec![]]);
    }
}
