//! The IO half of the render controller: watches pools, MachineConfigs and the ControllerConfig,
//! reads the inputs of [`super::plan`], and writes what it decided.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::Stream;
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::api::{ListParams, Patch, PatchParams, PostParams};
use kube::runtime::controller::{Action, Config};
use kube::runtime::events::EventType;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::{WatchStreamExt as _, predicates, watcher};
use kube::{Api, Client, Resource, ResourceExt};
use mco_api::constants::{
    CONTROLLER_CONFIG_NAME, MACHINE_CONFIGURATION_NAME, OS_IMAGE_STREAM_NAME, PINNED_OS_IMAGE_ANNOTATION,
    RESOLVE_OS_IMAGE_ANNOTATION, WORKER_POOL,
};
use mco_api::containers_policy::{self, POLICY_PATH, REGISTRIES_D};
use mco_api::machineconfiguration::is_by_digest;
use mco_api::{
    ContainerRuntimeConfig, ControllerConfig, KubeletConfig, MachineConfig, MachineConfigPool, MachineConfiguration,
    OSImageStream,
};
use mco_metrics::controller::{ControllerMetrics, SubControllerSync};
use mco_os::image::{PullConfig, Unverified, verify_signatures};
use mco_render::{ControllerVersion, StorageOverrides, Streams};
use serde_json::json;

use super::os_image::{self, Gate};
use super::{ConfigObjects, NotReady, Plan, Target, plan, pools_for_machine_config};
use crate::reconciler::{self, ReconcileError, Reconciler, Retries};
use crate::{conditions, events, logging_errors};

/// Upstream's name, used as field manager and event reporter.
const CONTROLLER_NAME: &str = "machine-config-controller";

/// Timing of the render controller.
#[derive(Debug, Clone)]
pub struct Options {
    /// Quiet time after the last change to a pool's inputs before it is rendered, so that a
    /// burst of MachineConfig changes renders once (upstream `renderDelay`, 5 s).
    pub render_delay: Duration,
    /// Delay before a pool that failed (bad input, API errors, ControllerConfig not ready) is
    /// tried again.
    pub retry_delay: Duration,
    /// Delay before a refused OS image is checked again (a fixed registry clears the refusal).
    pub os_image_retry_delay: Duration,
    /// Render times, OS image overrides and new targets are reported here.
    pub metrics: ControllerMetrics,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            render_delay: Duration::from_secs(5),
            retry_delay: Duration::from_secs(5),
            os_image_retry_delay: Duration::from_secs(20),
            metrics: ControllerMetrics::default(),
        }
    }
}

/// Why one reconcile of a pool failed; the pool is retried after [`Options::retry_delay`] (or
/// [`Options::os_image_retry_delay`]), doubled with each failure in a row.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    NotReady(#[from] NotReady),
    /// Reported on the pool as `RenderDegraded`.
    #[error("Failed to render configuration for pool {pool}: {message}")]
    Render { pool: String, message: String },
    /// skopeo could not be run: the controller's problem, not the image's.
    #[error("checking an OS image: {0}")]
    Skopeo(String),
    /// The new target's OS image failed its check; reported on the pool as `RenderDegraded`.
    #[error("Failed to render configuration for pool {pool}: {message}")]
    OsImage { pool: String, message: String },
    #[error("{action}: {source}")]
    Kube {
        action: String,
        #[source]
        source: kube::Error,
    },
    #[error(transparent)]
    Write(#[from] crate::KubeError),
}

fn patch_params() -> PatchParams {
    PatchParams { field_manager: Some(CONTROLLER_NAME.to_string()), ..Default::default() }
}

fn kube_error(action: impl Into<String>) -> impl FnOnce(kube::Error) -> Error {
    let action = action.into();
    move |source| Error::Kube { action, source }
}

impl ReconcileError for Error {
    fn metric_label(&self) -> &'static str {
        match self {
            Error::NotReady(_) => "not_ready",
            Error::Render { .. } => "render",
            Error::Skopeo(_) => "skopeo",
            Error::OsImage { .. } => "os_image",
            Error::Kube { .. } | Error::Write(_) => "kube",
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

    /// A registry is not asked again every few seconds; a new rendered config is checked at once.
    fn first_retry(&self, error: &Error) -> Duration {
        match error {
            Error::OsImage { .. } => self.options.os_image_retry_delay,
            _ => self.options.retry_delay,
        }
    }
}

/// Runs the render controller until its watches end (they retry errors, so: forever).
pub async fn run(client: Client, version: ControllerVersion, options: Options) {
    let controller =
        crate::pool_controller(&client, render_inputs).with_config(Config::default().debounce(options.render_delay));
    let pools = controller.store();
    let (for_controller_config, for_configuration) = (every_pool(pools.clone()), every_pool(pools.clone()));
    let (for_streams, for_worker) = (every_pool(pools.clone()), every_pool(pools.clone()));
    let retries = Retries::new("render", options.retry_delay, options.metrics.clone());
    let context = Arc::new(Context { client: client.clone(), version, options, retries });
    let controller = controller
        .watches_stream(events("MachineConfigs", Api::<MachineConfig>::all(client.clone())), move |mc| {
            pools_for_machine_config(&pools.state(), &mc)
        })
        // Every pool renders from the ControllerConfig and the MachineConfiguration.
        .watches_stream(
            events("ControllerConfigs", Api::<ControllerConfig>::all(client.clone())),
            for_controller_config,
        )
        .watches_stream(
            events("the MachineConfiguration", Api::<MachineConfiguration>::all(client.clone())),
            for_configuration,
        )
        // Every pool renders from its stream's images.
        .watches_stream(events("OSImageStreams", Api::<OSImageStream>::all(client.clone())), for_streams)
        // Custom pools inherit the worker pool's stream: its spec changes concern every pool.
        .watches_stream(worker_pool_specs(Api::<MachineConfigPool>::all(client)), for_worker);
    reconciler::run(controller, reconcile, context).await;
}

/// What of a pool, besides the objects watched for it, its render reads: its spec (generation),
/// its labels and annotations (a request to resolve its OS image again, a canary's), and its
/// members (their architectures choose the OS image's manifest). Not its status, but the count.
fn render_inputs(pool: &MachineConfigPool) -> Option<u64> {
    let machine_count = pool.status.as_ref().and_then(|s| s.machine_count);
    let meta = &pool.metadata;
    crate::fingerprint(&(meta.generation, &meta.labels, &meta.annotations, machine_count))
}

/// Every new generation (spec) of the worker pool.
pub(crate) fn worker_pool_specs(
    api: Api<MachineConfigPool>,
) -> impl Stream<Item = Result<MachineConfigPool, watcher::Error>> + Send {
    let config = watcher::Config::default().fields(&format!("metadata.name={WORKER_POOL}"));
    let specs = watcher(api, config).default_backoff().touched_objects();
    logging_errors("the worker pool", specs.predicate_filter(predicates::generation, Default::default()))
}

/// A mapper sending an event of any object to every pool.
pub(crate) fn every_pool<T>(pools: Store<MachineConfigPool>) -> impl Fn(T) -> Vec<ObjectRef<MachineConfigPool>> {
    move |_| pools.state().iter().map(|pool| ObjectRef::from_obj(&**pool)).collect()
}

async fn reconcile(pool: Arc<MachineConfigPool>, context: Arc<Context>) -> Result<Action, Error> {
    let name = pool.name_any();
    let client = &context.client;
    let machine_configs = Api::<MachineConfig>::all(client.clone())
        .list(&ListParams::default())
        .await
        .map_err(kube_error("listing MachineConfigs"))?
        .items;
    let controller_config = Api::<ControllerConfig>::all(client.clone())
        .get_opt(CONTROLLER_CONFIG_NAME)
        .await
        .map_err(kube_error(format!("reading ControllerConfig {CONTROLLER_CONFIG_NAME}")))?;
    let configuration = Api::<MachineConfiguration>::all(client.clone())
        .get_opt(MACHINE_CONFIGURATION_NAME)
        .await
        .map_err(kube_error(format!("reading MachineConfiguration {MACHINE_CONFIGURATION_NAME}")))?;
    let overrides = StorageOverrides::from_configuration(configuration.as_ref());
    let runtime_configs = Api::<ContainerRuntimeConfig>::all(client.clone())
        .list(&ListParams::default())
        .await
        .map_err(kube_error("listing ContainerRuntimeConfigs"))?
        .items;
    let kubelet_configs = Api::<KubeletConfig>::all(client.clone())
        .list(&ListParams::default())
        .await
        .map_err(kube_error("listing KubeletConfigs"))?
        .items;
    let config_objects = ConfigObjects { runtime_configs: &runtime_configs, kubelet_configs: &kubelet_configs };
    let os_image_stream = Api::<OSImageStream>::all(client.clone())
        .get_opt(OS_IMAGE_STREAM_NAME)
        .await
        .map_err(kube_error(format!("reading OSImageStream {OS_IMAGE_STREAM_NAME}")))?;
    let worker_pool = Api::<MachineConfigPool>::all(client.clone())
        .get_opt(WORKER_POOL)
        .await
        .map_err(kube_error(format!("reading MachineConfigPool {WORKER_POOL}")))?;
    let streams = Streams { os_image_stream: os_image_stream.as_ref(), worker_pool: worker_pool.as_ref() };
    let started = Instant::now();
    let decision = plan(
        &pool,
        &machine_configs,
        controller_config.as_ref(),
        config_objects,
        &context.version,
        overrides,
        streams,
    )?;
    let metrics = &context.options.metrics;
    if matches!(decision, Plan::Target(_) | Plan::Degraded(_)) {
        metrics.observe_render(&name, started.elapsed().as_secs_f64());
    }
    match decision {
        Plan::SelectingAll => {
            let note = mco_render::RenderError::SelectingAll.to_string();
            tracing::warn!(pool = %name, "{note}");
            publish(&context, &pool, EventType::Warning, "SelectingAll", note).await;
            Ok(Action::await_change())
        }
        Plan::Degraded(message) => {
            write_render_degraded(&context, &pool, Some(&message)).await?;
            Err(Error::Render { pool: name, message })
        }
        Plan::Target(target) => {
            for warning in &target.warnings {
                tracing::warn!(pool = %name, "{warning}");
            }
            metrics.set_os_image_url_override(&name, target.os_image_url_overridden);
            if target.os_image_url_overridden
                && let Some(message) = runc_on_rhel10_image(&name, &target.rendered).await?
            {
                write_render_degraded(&context, &pool, Some(&message)).await?;
                return Err(Error::OsImage { pool: name, message });
            }
            // The OS image is checked (and a tag pinned) before the config is stored, so that no
            // reader ever sees the config without its pin.
            let rendered_name = target.rendered.name_any();
            let existing = machine_configs.iter().find(|mc| mc.metadata.name.as_deref() == Some(&rendered_name));
            let current = pool.spec.configuration.as_ref().and_then(|c| c.name.as_deref());
            let current =
                current.and_then(|c| machine_configs.iter().find(|mc| mc.metadata.name.as_deref() == Some(c)));
            let base = Some(target.base_os_image.as_str());
            let pool = if pool.annotations().contains_key(RESOLVE_OS_IMAGE_ANNOTATION) {
                // Read afresh: a cache that has not seen the request done would have it done twice.
                let api = Api::<MachineConfigPool>::all(client.clone());
                Arc::new(api.get(&name).await.map_err(kube_error(format!("reading MachineConfigPool {name}")))?)
            } else {
                pool
            };
            let resolve_requested = pool.annotations().contains_key(RESOLVE_OS_IMAGE_ANNOTATION);
            let rendered = existing.unwrap_or(&target.rendered);
            // A tag resolved again on request: (the config's pin, the digest found now).
            let mut resolved_again = None;
            let checked = match os_image::gate(rendered, current, base, resolve_requested) {
                Gate::Check(image) => match check_os_image(&context, &pool, &target.rendered, &image).await? {
                    Ok(pinned) => Ok(Some((image, pinned))),
                    Err(why) => Err((image, why)),
                },
                Gate::Clear => match check_new_policy(&context, &pool, rendered, current).await? {
                    Ok(()) => Ok(None),
                    Err(why) => Err((rendered.spec.os_image_url.clone(), why)),
                },
                Gate::ResolveAgain { pinned, image } => {
                    match check_os_image(&context, &pool, rendered, &image).await? {
                        Ok(now) => {
                            resolved_again = Some((pinned, now));
                            Ok(None)
                        }
                        Err(why) => Err((image, why)),
                    }
                }
                Gate::Pinned(_) => Ok(None),
            };
            let pin = match checked {
                Ok(pin) => pin,
                Err((image, why)) => {
                    let message = os_image::refusal(&image, &rendered_name, &why);
                    if render_degraded_message(&pool) != Some(&message) {
                        publish(&context, &pool, EventType::Warning, "OSImageRefused", message.clone()).await;
                    }
                    write_render_degraded(&context, &pool, Some(&message)).await?;
                    return Err(Error::OsImage { pool: name, message });
                }
            };
            ensure_rendered(&context, &pool, &target, existing, pin.as_ref().map(|(_, pinned)| pinned.as_str()))
                .await?;
            if let Some((image, pinned)) = &pin {
                let note = format!("OS image {image} of {rendered_name} checked: nodes deploy {pinned}");
                tracing::info!(pool = %name, "{note}");
                publish(&context, &pool, EventType::Normal, "OSImagePinned", note).await;
            }
            if let Some((pinned, now)) = &resolved_again {
                let was = pool.resolved_os_image(&rendered_name).unwrap_or(pinned);
                let note = os_image::resolved_again_note(&target.rendered.spec.os_image_url, &rendered_name, was, now);
                tracing::info!(pool = %name, "{note}");
                publish(&context, &pool, EventType::Normal, "OSImageResolvedAgain", note).await;
            }
            let resolved =
                os_image::resolution(resolved_again.as_ref(), pin.as_ref().map(|(_, pinned)| pinned.as_str()));
            let annotations = os_image::pool_annotations(&pool, rendered, resolved);
            let mut patch = json!({});
            if let Some(configuration) = &target.configuration {
                patch["spec"] = json!({ "configuration": configuration });
            }
            if !annotations.is_empty() {
                patch["metadata"] = json!({ "annotations": annotations });
            }
            let pool = if patch == json!({}) {
                pool
            } else {
                let updated = Api::<MachineConfigPool>::all(client.clone())
                    .patch(&name, &patch_params(), &Patch::Merge(&patch))
                    .await
                    .map_err(kube_error(format!("updating MachineConfigPool {name}")))?;
                if target.configuration.is_some() {
                    tracing::info!(pool = %name, "now targeting {rendered_name}");
                    let now = mco_metrics::unix_seconds(std::time::SystemTime::now());
                    metrics.set_sub_controller_state(SubControllerSync::PoolRendered, &name, now);
                }
                Arc::new(updated)
            };
            write_render_degraded(&context, &pool, None).await?;
            Ok(Action::await_change())
        }
    }
}

/// Creates the rendered config (`existing`: as listed), with its OS image's `pin` if it has one,
/// or puts back its spec if someone changed it (the name is a hash of the spec, so nodes would
/// otherwise apply something else than what the name promises), or records the pin.
async fn ensure_rendered(
    context: &Context,
    pool: &MachineConfigPool,
    target: &Target,
    existing: Option<&MachineConfig>,
    pin: Option<&str>,
) -> Result<(), Error> {
    let api = Api::<MachineConfig>::all(context.client.clone());
    let name = target.rendered.name_any();
    let post = PostParams { field_manager: Some(CONTROLLER_NAME.to_string()), ..Default::default() };
    let pin_annotation = pin.map(|pin| (PINNED_OS_IMAGE_ANNOTATION.to_string(), pin.to_string()));
    match existing {
        None => {
            let mut rendered = target.rendered.clone();
            rendered.metadata.annotations.get_or_insert_default().extend(pin_annotation);
            match api.create(&post, &rendered).await {
                Ok(_) => {}
                // Created by another sync in between: it is the same config, pinned by that sync.
                Err(kube::Error::Api(status)) if status.is_already_exists() => return Ok(()),
                Err(e) => return Err(kube_error(format!("creating MachineConfig {name}"))(e)),
            };
            tracing::info!(pool = %pool.name_any(), "generated {name}");
            let note = format!(
                "{name} successfully generated (release version: {}, controller version: {})",
                target.release_version, context.version.hash
            );
            publish(context, pool, EventType::Normal, "RenderedConfigGenerated", note).await;
        }
        Some(existing) if existing.spec != target.rendered.spec || pin_annotation.is_some() => {
            let mut existing = existing.clone();
            if existing.spec != target.rendered.spec {
                tracing::warn!("MachineConfig {name} was modified; restoring it");
                existing.spec = target.rendered.spec.clone();
            }
            existing.metadata.annotations.get_or_insert_default().extend(pin_annotation);
            api.replace(&name, &post, &existing).await.map_err(kube_error(format!("updating MachineConfig {name}")))?;
        }
        Some(_) => {}
    }
    Ok(())
}

/// The pool's `RenderDegraded` message while it is True.
fn render_degraded_message(pool: &MachineConfigPool) -> Option<&String> {
    let conditions = pool.status.as_ref()?.conditions.as_ref()?;
    let condition = conditions::get(conditions, mco_api::machineconfiguration::pool_condition::RENDER_DEGRADED)?;
    condition.message.as_ref().filter(|_| condition.status == "True")
}

/// Checks `image`, the OS image of `rendered`, as the pool's nodes would pull it: `Ok(Ok(pinned))`
/// with the pull spec by digest nodes are to deploy, `Ok(Err(why))` when the image is refused.
async fn check_os_image(
    context: &Context,
    pool: &MachineConfigPool,
    rendered: &MachineConfig,
    image: &str,
) -> Result<Result<String, String>, Error> {
    let archs = node_architectures(context, pool).await?;
    let pull_files = match pull_files(rendered) {
        Ok(dir) => dir,
        Err(why) => return Ok(Err(why)),
    };
    let mut inspected = Vec::new();
    for arch in archs {
        let found = os_image::inspect(image, arch.as_deref(), pull_files.path())
            .await
            .map_err(|e| Error::Skopeo(e.to_string()))?;
        inspected.push((arch, found));
    }
    let pinned = match os_image::judge(image, &inspected) {
        Ok(pinned) => pinned,
        Err(why) => return Ok(Err(why)),
    };
    // A tag's signatures must name the tag, as c/image requires of a pull by tag (nodes pull by
    // digest, for which a signature of any tag of the repository does).
    let mut references = vec![pinned.clone()];
    if !is_by_digest(image) {
        references.insert(0, image.to_string());
    }
    let archs: Vec<Option<String>> = inspected.into_iter().map(|(arch, _)| arch).collect();
    Ok(check_signatures(&pull_files, &references, &archs).await?.map(|()| pinned))
}

/// Upstream's runc rule for an overridden OS image (`validateNoRuncOnRHEL10FromOSImageURL`): when
/// the rendered config makes runc CRI-O's default runtime, the image is asked for its stream
/// label, and a RHEL 10 image is refused with upstream's words. An image without the label is
/// not judged.
async fn runc_on_rhel10_image(pool: &str, rendered: &MachineConfig) -> Result<Option<String>, Error> {
    // (The config was just rendered from validated MachineConfigs.)
    let config = mco_render::merge::validate_machine_config(rendered).ok().flatten();
    let sets_runc = config.map(|c| mco_render::streams::sets_runc(&c, &rendered.name_any())).transpose();
    match sets_runc {
        Ok(Some(true)) => {}
        Ok(_) => return Ok(None),
        Err(e) => return Ok(Some(format!("pool {pool}: failed to check runc in generated MachineConfig: {e}"))),
    }
    let pull_files = match pull_files(rendered) {
        Ok(dir) => dir,
        Err(why) => return Ok(Some(format!("pool {pool}: failed to inspect OS image for stream class: {why}"))),
    };
    let image = &rendered.spec.os_image_url;
    if image.starts_with("oci:") {
        // A directory on the nodes: nothing to ask.
        return Ok(None);
    }
    let inspected =
        os_image::inspect(image, None, pull_files.path()).await.map_err(|e| Error::Skopeo(e.to_string()))?;
    let labels = match inspected {
        Ok(found) => found.labels,
        Err(e) => return Ok(Some(format!("pool {pool}: failed to inspect OS image for stream class: {e}"))),
    };
    let stream = mco_render::stream_sources::classify(&labels).map(|(stream, _)| stream);
    Ok(stream.filter(|s| mco_render::streams::is_rhel10_stream(s)).map(|_| mco_render::streams::runc_on_rhel10(pool)))
}

/// Checks each of `references` for each of `archs` against the signature policy in `pull_files`
/// (the rendered config's), if it has one.
async fn check_signatures(
    pull_files: &tempfile::TempDir,
    references: &[String],
    archs: &[Option<String>],
) -> Result<Result<(), String>, Error> {
    // The files are where nodes have them, so the directory reads as a node root.
    let pull = PullConfig::of_node_root(pull_files.path());
    if pull.policy.is_none() {
        return Ok(Ok(()));
    }
    for reference in references {
        for arch in archs {
            let (reference, arch, pull) = (reference.clone(), arch.clone(), pull.clone());
            let verified = tokio::task::spawn_blocking(move || verify_signatures(&reference, arch.as_deref(), &pull))
                .await
                .map_err(|e| Error::Skopeo(e.to_string()))?
                .map_err(|e| Error::Skopeo(format!("{e:#}")))?;
            match verified {
                Ok(()) => {}
                Err(Unverified::Refused(why)) => {
                    return Ok(Err(format!("it does not satisfy the pool's signature policy ({POLICY_PATH}): {why}")));
                }
                Err(Unverified::Unchecked(why)) => {
                    return Ok(Err(format!(
                        "its signatures could not be checked against the pool's signature policy ({POLICY_PATH}): \
                         {why}"
                    )));
                }
            }
        }
    }
    Ok(Ok(()))
}

/// For a rendered config whose OS image needs no check of its own (the pool's or the cluster's,
/// by digest) but whose signature policy is not the one the pool has now: the image checked
/// against the new policy, before nodes that would refuse it after their drain (or new machines
/// at their first boot) get it. `Ok(Ok(()))` when there is nothing to check.
async fn check_new_policy(
    context: &Context,
    pool: &MachineConfigPool,
    rendered: &MachineConfig,
    current: Option<&MachineConfig>,
) -> Result<Result<(), String>, Error> {
    let image = rendered.deployed_os_image().unwrap_or_default();
    if !is_by_digest(image) || image.starts_with("oci:") {
        return Ok(Ok(()));
    }
    let signature_files = |mc: &MachineConfig| -> BTreeMap<String, String> {
        let Ok(config) = mco_render::merge::validate_machine_config(mc) else { return BTreeMap::new() };
        let files = config.iter().flat_map(|c| &c.storage.files);
        let policy = files.clone().find(|f| f.path == POLICY_PATH);
        let text = policy.and_then(|f| mco_ignition::dataurl::decode_contents(&f.contents).ok());
        let keys = text.and_then(|t| containers_policy::key_files(&String::from_utf8_lossy(&t)).ok());
        let keys = keys.unwrap_or_default();
        files
            .filter(|f| {
                f.path == POLICY_PATH || f.path.starts_with(&format!("{REGISTRIES_D}/")) || keys.contains(&f.path)
            })
            .map(|f| (f.path.clone(), f.contents.source.clone().unwrap_or_default()))
            .collect()
    };
    let new = signature_files(rendered);
    if !new.contains_key(POLICY_PATH) || current.is_some_and(|c| signature_files(c) == new) {
        return Ok(Ok(()));
    }
    let pull_files = match pull_files(rendered) {
        Ok(dir) => dir,
        Err(why) => return Ok(Err(why)),
    };
    let archs = node_architectures(context, pool).await?;
    check_signatures(&pull_files, &[image.to_string()], &archs).await
}

/// A directory holding, at their paths, the files `rendered` gives its nodes to pull with: the
/// registries configuration, the pull secret, the proxy settings, the registries' CA certificates, the signature
/// policy with the key files it names (named there under the directory) and the signature
/// storage configuration.
pub fn pull_files(rendered: &MachineConfig) -> Result<tempfile::TempDir, String> {
    let dir = tempfile::Builder::new()
        .prefix("mco-os-image-check-")
        .tempdir()
        .map_err(|e| format!("making a directory for the pull files: {e}"))?;
    let config = mco_render::merge::validate_machine_config(rendered).map_err(|e| e.to_string())?;
    let files: Vec<_> = config.iter().flat_map(|c| &c.storage.files).collect();
    let contents = |path: &str| -> Result<Option<Vec<u8>>, String> {
        let Some(file) = files.iter().find(|f| f.path == path) else { return Ok(None) };
        mco_ignition::dataurl::decode_contents(&file.contents).map(Some).map_err(|e| format!("{path}: {e}"))
    };
    let write = |path: &str, contents: &[u8]| {
        let to = dir.path().join(path.trim_start_matches('/'));
        std::fs::create_dir_all(to.parent().expect("an absolute path has a parent"))
            .and_then(|()| std::fs::write(&to, contents))
            .map_err(|e| format!("writing {}: {e}", to.display()))
    };
    let signature_storage =
        files.iter().map(|f| f.path.as_str()).filter(|p| p.starts_with(&format!("{REGISTRIES_D}/")));
    let certificates =
        files.iter().map(|f| f.path.as_str()).filter(|p| os_image::NODE_CERTS_DIRS.iter().any(|d| p.starts_with(d)));
    let proxy_env = format!("/{}", mco_os::image::NODE_PROXY_ENV);
    let node_files = [os_image::NODE_REGISTRIES_CONF, os_image::NODE_PULL_SECRET, &proxy_env].into_iter();
    for path in node_files.chain(signature_storage).chain(certificates) {
        if let Some(found) = contents(path)? {
            write(path, &found)?;
        }
    }
    if let Some(policy) = contents(POLICY_PATH)? {
        let policy = String::from_utf8(policy).map_err(|_| format!("{POLICY_PATH} is not UTF-8"))?;
        for key in containers_policy::key_files(&policy).map_err(|e| e.to_string())? {
            let found = contents(&key)?.ok_or_else(|| {
                format!(
                    "{POLICY_PATH} names the key file {key}, which the rendered config does not write: signatures \
                     are checked before any node only with keys the rendered config gives its nodes"
                )
            })?;
            write(&key, &found)?;
        }
        write(POLICY_PATH, containers_policy::reroot(&policy, dir.path()).map_err(|e| e.to_string())?.as_bytes())?;
    }
    Ok(dir)
}

/// The architectures of the pool's nodes (`status.nodeInfo.architecture`).
async fn node_architectures(context: &Context, pool: &MachineConfigPool) -> Result<Vec<Option<String>>, Error> {
    let nodes = Api::<Node>::all(context.client.clone())
        .list(&ListParams::default())
        .await
        .map_err(kube_error("listing Nodes"))?
        .items;
    let pools = Api::<MachineConfigPool>::all(context.client.clone())
        .list(&ListParams::default())
        .await
        .map_err(kube_error("listing MachineConfigPools"))?
        .items;
    let members = mco_rollout::nodes_for_pool(pool, &nodes, &pools);
    let archs = members.iter().filter_map(|n| n.status.as_ref()?.node_info.as_ref()).map(|i| i.architecture.as_str());
    Ok(os_image::architectures(archs))
}

/// Sets `RenderDegraded` from `failure`, if that changes the pool's conditions.
async fn write_render_degraded(
    context: &Context,
    pool: &MachineConfigPool,
    failure: Option<&str>,
) -> Result<(), Error> {
    let current = pool.status.as_ref().and_then(|s| s.conditions.clone()).unwrap_or_default();
    match conditions::render_degraded(&current, &pool.name_any(), failure, Time(Timestamp::now())) {
        Some(updated) => Ok(conditions::write(&context.client, pool, updated).await?),
        None => Ok(()),
    }
}

async fn publish(context: &Context, pool: &MachineConfigPool, type_: EventType, reason: &str, note: String) {
    crate::publish(&context.client, &pool.object_ref(&()), type_, reason, &note, "Render").await;
}
