//! The build controller (upstream `pkg/controller/build`): each MachineOSConfig gets a
//! MachineOSBuild of its pool's rendered config, built in the cluster by a Job (`mco-build`
//! makes every object and reads every outcome; this module only reads and writes them).
//!
//! One sync of a MachineOSConfig: the build its inputs name (upstream's hashed name) is created
//! with its ConfigMaps and Job unless it exists; builds of other inputs still running are
//! Interrupted and their Jobs deleted; each running build's status follows its pod; a succeeded
//! build becomes the MachineOSConfig's current image (the node controller then moves the pool),
//! its ConfigMaps go and older ended builds are deleted; a failed one sets the pool's
//! `ImageBuildDegraded`. The rebuild annotation deletes the current build so that it is made
//! again. MachineOSBuilds are owned by their MachineOSConfig, their objects by them: deleting a
//! MachineOSConfig deletes everything its builds made (the API server's garbage collector), and
//! the pool goes back to its non-layered config.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt as _;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{OwnerReference, Time};
use k8s_openapi::jiff::Timestamp;
use kube::api::{DeleteParams, ListParams, Patch, PostParams, PropagationPolicy};
use kube::runtime::controller::Action;
use kube::runtime::events::EventType;
use kube::runtime::reflector::ObjectRef;
use kube::runtime::{Controller, WatchStreamExt as _, watcher};
use kube::{Api, Client, Resource, ResourceExt};
use mco_api::constants::{
    CURRENT_MACHINE_OS_BUILD_ANNOTATION, MACHINE_OS_BUILD_LABEL, MACHINE_OS_CONFIG_LABEL, MCFG_API_VERSION,
    ON_CLUSTER_LAYERING_LABEL, REBUILD_ANNOTATION,
};
use mco_api::machineconfiguration::pool_condition::{BUILD_FAILED, IMAGE_BUILD_DEGRADED};
use mco_api::machineconfiguration::{ContainerfileArch, MachineOSBuildStatus, MachineOSConfigStatus, ObjectReference};
use mco_api::{MachineConfig, MachineConfigPool, MachineOSBuild, MachineOSConfig};
use mco_machine_os_build::progress::{self, Outcome, Phase};
use mco_machine_os_build::{BuildPod, BuildRequest, RequestError};
use mco_metrics::controller::ControllerMetrics;
use mco_rollout::conditions;
use serde_json::json;

use crate::reconciler::{self, Reconciler, Retries};
use crate::{KubeError, kube_error, logging_errors, patch_params, publish};

/// Conditional writes tried again after a conflict before the sync fails.
const CONFLICT_RETRIES: usize = 5;

/// Where builds run and with what.
#[derive(Debug, Clone)]
pub struct Options {
    /// Namespace of the build Jobs and ConfigMaps, and of the MachineOSConfigs' Secrets.
    pub namespace: String,
    /// Image of the build pods (mco's own: it holds buildah).
    pub image: String,
    /// Where build pods run.
    pub pod: BuildPod,
    /// Delay before a failed sync is first tried again (doubled with each failure in a row), and
    /// between looks at a running build.
    pub retry_delay: Duration,
    /// Failed syncs are counted here.
    pub metrics: ControllerMetrics,
}

/// Why a sync failed; the MachineOSConfig is synced again after [`Options::retry_delay`],
/// doubled with each failure in a row.
pub type Error = KubeError;

impl Reconciler<Error> for Context {
    fn retries(&self) -> &Retries {
        &self.retries
    }
}

struct Context {
    client: Client,
    options: Options,
    retries: Retries,
}

/// The image of container `container` in this controller's own pod (`namespace`/`pod`): build
/// pods run the same image.
pub async fn own_image(client: &Client, namespace: &str, pod: &str) -> anyhow::Result<String> {
    let pod = Api::<Pod>::namespaced(client.clone(), namespace)
        .get(pod)
        .await
        .map_err(kube_error(format!("reading this controller's pod {namespace}/{pod} for its image")))?;
    let image = pod.spec.and_then(|s| s.containers.into_iter().next()).and_then(|c| c.image);
    image.ok_or_else(|| anyhow::anyhow!("this controller's pod names no image"))
}

/// Runs the build controller until its watches end (they retry errors, so: forever).
pub async fn run(client: Client, options: Options) {
    let namespace = options.namespace.clone();
    let retries = Retries::new("build", options.retry_delay, options.metrics.clone());
    let context = Arc::new(Context { client: client.clone(), options, retries });
    let by_label = watcher::Config::default().labels(ON_CLUSTER_LAYERING_LABEL);
    let owner = |labels: &std::collections::BTreeMap<String, String>| {
        labels.get(MACHINE_OS_CONFIG_LABEL).map(|name| ObjectRef::<MachineOSConfig>::new(name))
    };
    let pools = logging_errors(
        "MachineConfigPools",
        watcher(Api::<MachineConfigPool>::all(client.clone()), watcher::Config::default())
            .default_backoff()
            .touched_objects(),
    );
    let controller = Controller::new(Api::<MachineOSConfig>::all(client.clone()), watcher::Config::default())
        .owns(Api::<MachineOSBuild>::all(client.clone()), watcher::Config::default())
        .watches(Api::<Job>::namespaced(client.clone(), &namespace), by_label.clone(), move |job| owner(job.labels()))
        .watches(Api::<Pod>::namespaced(client.clone(), &namespace), by_label, move |pod| owner(pod.labels()))
        .reconcile_all_on(pools.map(|_| ()));
    reconciler::run(controller, reconcile, context).await;
}

fn now() -> Time {
    Time(Timestamp::now())
}

async fn reconcile(config: Arc<MachineOSConfig>, context: Arc<Context>) -> Result<Action, Error> {
    let client = &context.client;
    let name = config.name_any();
    if config.meta().deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    let pool_name = &config.spec.machine_config_pool.name;
    let Some(pool) = Api::<MachineConfigPool>::all(client.clone())
        .get_opt(pool_name)
        .await
        .map_err(kube_error(format!("reading MachineConfigPool {pool_name}")))?
    else {
        tracing::info!(machine_os_config = name, "MachineConfigPool {pool_name} does not exist; nothing to build");
        return Ok(Action::await_change());
    };
    let Ok(target) = BuildRequest::pool_target(&pool) else { return Ok(Action::await_change()) };
    let Some(rendered) = Api::<MachineConfig>::all(client.clone())
        .get_opt(target)
        .await
        .map_err(kube_error(format!("reading MachineConfig {target}")))?
    else {
        return Ok(Action::requeue(context.options.retry_delay));
    };
    let request = match BuildRequest::new(&config, &pool, &rendered) {
        Ok(request) => request,
        Err(error) => return refuse(context.as_ref(), &config, &error).await,
    };
    let wanted = request.build_name();
    let builds_api = Api::<MachineOSBuild>::all(client.clone());
    let mut builds = builds_api
        .list(&ListParams::default().labels(&format!("{MACHINE_OS_CONFIG_LABEL}={name}")))
        .await
        .map_err(kube_error(format!("listing the MachineOSBuilds of MachineOSConfig {name}")))?
        .items;

    // The rebuild annotation, or a build of these inputs that was interrupted (the inputs came
    // back): the build is made again.
    // Read afresh: the cache may not have seen the annotation's removal after the last rebuild.
    let rebuild = config.annotations().contains_key(REBUILD_ANNOTATION)
        && Api::<MachineOSConfig>::all(client.clone())
            .get(&name)
            .await
            .map_err(kube_error(format!("reading MachineOSConfig {name}")))?
            .annotations()
            .contains_key(REBUILD_ANNOTATION);
    let interrupted = builds.iter().any(|b| b.name_any() == wanted && progress::phase(b) == Some(Phase::Interrupted));
    if rebuild || interrupted {
        if builds.iter().any(|b| b.name_any() == wanted) {
            delete_build(context.as_ref(), &wanted).await?;
            builds.retain(|b| b.name_any() != wanted);
            tracing::info!(machine_os_config = name, "building again: deleted MachineOSBuild {wanted}");
        }
        if rebuild {
            Api::<MachineOSConfig>::all(client.clone())
                .patch(
                    &name,
                    &patch_params(),
                    &Patch::Merge(json!({"metadata": {"annotations": {REBUILD_ANNOTATION: null}}})),
                )
                .await
                .map_err(kube_error(format!("removing the rebuild annotation of MachineOSConfig {name}")))?;
        }
    }

    if !builds.iter().any(|b| b.name_any() == wanted) {
        builds.push(create_build(context.as_ref(), &config, &request).await?);
    }

    let mut running = false;
    for build in &mut builds {
        if build.name_any() == wanted {
            match follow(context.as_ref(), &config, &request, build).await {
                Ok(Some(status)) => build.status = Some(status),
                Ok(None) => {}
                // Objects of an earlier build of the same name are still going away.
                Err(KubeError::Request { source: kube::Error::Api(status), .. }) if status.code == 409 => {
                    tracing::info!(machine_os_config = name, "waiting for the objects of the last {wanted} to go");
                    return Ok(Action::requeue(context.options.retry_delay));
                }
                Err(e) => return Err(e),
            }
            running = !progress::phase(build).is_some_and(Phase::ended);
        } else if let Some(status) = progress::interrupted(build, &now()) {
            write_status(context.as_ref(), &build.name_any(), &status).await?;
            delete_job(context.as_ref(), &build.name_any()).await?;
            delete_config_maps(context.as_ref(), &build.name_any()).await?;
            tracing::info!(machine_os_config = name, "interrupted MachineOSBuild {} for {wanted}", build.name_any());
        }
    }
    let current = builds.iter().find(|b| b.name_any() == wanted).expect("created above when missing");
    if progress::phase(current).is_some_and(Phase::ended) {
        delete_config_maps(context.as_ref(), &wanted).await?;
    }
    match progress::phase(current) {
        Some(Phase::Succeeded) => publish_image(context.as_ref(), &config, current, &builds).await?,
        Some(Phase::Failed) => {
            let message = progress::failure_message(pool_name, current).unwrap_or_default();
            set_build_degraded(context.as_ref(), pool_name, &message).await?;
        }
        _ => {}
    }
    Ok(if running { Action::requeue(context.options.retry_delay) } else { Action::await_change() })
}

/// Inputs that cannot be built: said in an Event on the MachineOSConfig and the log; the pool
/// stays where it is (no build, so no node moves) until the MachineOSConfig or pool changes.
async fn refuse(context: &Context, config: &MachineOSConfig, error: &RequestError) -> Result<Action, Error> {
    let message = format!("cannot build an OS image for MachineOSConfig {}: {error}", config.name_any());
    tracing::warn!("{message}");
    publish(&context.client, &config.object_ref(&()), EventType::Warning, "BuildRefused", &message, "Build").await;
    Ok(Action::await_change())
}

/// Creates the MachineOSBuild (owned by `config`) and names it on the MachineOSConfig; its Job is
/// started by [`follow`].
async fn create_build(
    context: &Context,
    config: &MachineOSConfig,
    request: &BuildRequest<'_>,
) -> Result<MachineOSBuild, Error> {
    let client = &context.client;
    let mut build = request.machine_os_build(&now());
    build.metadata.owner_references = Some(vec![OwnerReference {
        api_version: MCFG_API_VERSION.into(),
        kind: "MachineOSConfig".into(),
        name: config.name_any(),
        uid: config.uid().unwrap_or_default(),
        controller: Some(true),
        block_owner_deletion: None,
    }]);
    let name = build.name_any();
    let status = build.status.take();
    let mut created = Api::<MachineOSBuild>::all(client.clone())
        .create(&post_params(), &build)
        .await
        .map_err(kube_error(format!("creating MachineOSBuild {name}")))?;
    created.status = status;
    tracing::info!(machine_os_config = %config.name_any(), "created MachineOSBuild {name}");
    Api::<MachineOSConfig>::all(client.clone())
        .patch(
            &config.name_any(),
            &patch_params(),
            &Patch::Merge(json!({"metadata": {"annotations": {CURRENT_MACHINE_OS_BUILD_ANNOTATION: name}}})),
        )
        .await
        .map_err(kube_error(format!("naming MachineOSBuild {name} on MachineOSConfig {}", config.name_any())))?;
    Ok(created)
}

fn post_params() -> PostParams {
    PostParams { field_manager: Some(crate::CONTROLLER_NAME.into()), ..Default::default() }
}

/// Starts `build`'s Job with its ConfigMaps (owned by the build), or says why it cannot start
/// (a missing Secret, inputs that cannot be built). Objects already there for this build are
/// kept; those of an earlier build of the same name answer 409 until they are gone.
async fn start_job(
    context: &Context,
    config: &MachineOSConfig,
    request: &BuildRequest<'_>,
    build: &MachineOSBuild,
) -> Result<Result<(), String>, Error> {
    let client = &context.client;
    let namespace = &context.options.namespace;
    let secrets = [config.spec.base_image_pull_secret.as_ref(), Some(&config.spec.rendered_image_push_secret)];
    for secret in secrets.into_iter().flatten() {
        if let Some(problem) = secret_problem(context, &secret.name).await? {
            return Ok(Err(problem));
        }
    }
    let maps = match request.config_maps(build, namespace, node_arch()) {
        Ok(maps) => maps,
        Err(error) => return Ok(Err(error.to_string())),
    };
    let maps_api = Api::<ConfigMap>::namespaced(client.clone(), namespace);
    let uid = build.uid();
    for map in &maps {
        let map_name = map.name_any();
        match maps_api.create(&post_params(), map).await {
            Ok(_) => {}
            Err(kube::Error::Api(status)) if status.code == 409 => {
                let existing = maps_api
                    .get_opt(&map_name)
                    .await
                    .map_err(kube_error(format!("reading ConfigMap {namespace}/{map_name}")))?;
                let ours = existing.is_some_and(|m| m.owner_references().iter().any(|o| Some(&o.uid) == uid.as_ref()));
                if !ours {
                    // An earlier build's of the same name: it goes, and this build waits for it.
                    delete_ignoring_missing(&maps_api, &map_name, "ConfigMap").await?;
                    let error = kube::Error::Api(status);
                    return Err(kube_error(format!("creating ConfigMap {namespace}/{map_name}"))(error));
                }
            }
            Err(e) => return Err(kube_error(format!("creating ConfigMap {namespace}/{map_name}"))(e)),
        }
    }
    let job = request.job(build, namespace, &context.options.image, context.options.pod, &maps);
    let job_name = job.name_any();
    Api::<Job>::namespaced(client.clone(), namespace)
        .create(&post_params(), &job)
        .await
        .map_err(kube_error(format!("creating Job {namespace}/{job_name}")))?;
    publish(
        client,
        &build.object_ref(&()),
        EventType::Normal,
        "BuildPrepared",
        &format!("creating build job for pool {:?}", config.spec.machine_config_pool.name),
        "Build",
    )
    .await;
    Ok(Ok(()))
}

/// The architecture builds are for: this controller's (the lab and most clusters have one).
fn node_arch() -> ContainerfileArch {
    match std::env::consts::ARCH {
        "aarch64" => ContainerfileArch::Arm64,
        "powerpc64" => ContainerfileArch::Ppc64le,
        "s390x" => ContainerfileArch::S390x,
        _ => ContainerfileArch::Amd64,
    }
}

/// Why `name` cannot be the build's credentials, if it cannot.
async fn secret_problem(context: &Context, name: &str) -> Result<Option<String>, Error> {
    let namespace = &context.options.namespace;
    let secret = Api::<Secret>::namespaced(context.client.clone(), namespace)
        .get_opt(name)
        .await
        .map_err(kube_error(format!("reading Secret {namespace}/{name}")))?;
    Ok(match secret {
        None => Some(format!("Secret {namespace}/{name} does not exist")),
        Some(s) if !s.data.as_ref().is_some_and(|d| d.contains_key(".dockerconfigjson")) => Some(format!(
            "Secret {namespace}/{name} has no .dockerconfigjson key (type kubernetes.io/dockerconfigjson is needed)"
        )),
        Some(_) => None,
    })
}

/// Brings `build`'s status up to its Job's pod, starting the Job when it has none (a new build,
/// or one whose Job could not be made or was deleted); the written status, if it changed.
async fn follow(
    context: &Context,
    config: &MachineOSConfig,
    request: &BuildRequest<'_>,
    build: &MachineOSBuild,
) -> Result<Option<MachineOSBuildStatus>, Error> {
    if progress::phase(build).is_some_and(Phase::ended) {
        return Ok(None);
    }
    let namespace = &context.options.namespace;
    let job_name = format!("build-{}", build.name_any());
    let jobs = Api::<Job>::namespaced(context.client.clone(), namespace);
    let mut job = jobs.get_opt(&job_name).await.map_err(kube_error(format!("reading Job {namespace}/{job_name}")))?;
    // A Job of an earlier build of the same name (deleted and made again) is not this build's:
    // it goes first, then this build gets its own.
    if let Some(foreign) =
        job.as_ref().filter(|j| !j.owner_references().iter().any(|o| Some(&o.uid) == build.uid().as_ref()))
    {
        if foreign.metadata.deletion_timestamp.is_none() {
            tracing::info!("deleting Job {job_name} of an earlier MachineOSBuild {}", build.name_any());
            delete_ignoring_missing(&jobs, &job_name, "Job").await?;
        }
        return Ok(None);
    }
    if job.is_none() {
        if let Err(problem) = start_job(context, config, request, build).await? {
            let outcome = Outcome::Failed { message: problem };
            let Some(status) = progress::next_status(build, &outcome, &job_name, namespace, &now()) else {
                return Ok(None);
            };
            return write_status(context, &build.name_any(), &status).await.map(Some);
        }
        job = jobs.get_opt(&job_name).await.map_err(kube_error(format!("reading Job {namespace}/{job_name}")))?;
    }
    // By the Job's uid: pods of an earlier Job of the same name (a rebuild) may not be gone yet.
    let pods = match job.as_ref().and_then(|j| j.metadata.uid.as_deref()) {
        None => Vec::new(),
        Some(uid) => {
            Api::<Pod>::namespaced(context.client.clone(), namespace)
                .list(&ListParams::default().labels(&format!("batch.kubernetes.io/controller-uid={uid}")))
                .await
                .map_err(kube_error(format!("listing the pods of Job {namespace}/{job_name}")))?
                .items
        }
    };
    let outcome = progress::outcome(job.as_ref(), &pods);
    let Some(status) = progress::next_status(build, &outcome, &job_name, namespace, &now()) else { return Ok(None) };
    let written = write_status(context, &build.name_any(), &status).await?;
    // A build failed before its builder ran (its pod cannot start): nothing to keep the Job for,
    // and it must not build later for a build that has ended.
    if matches!(outcome, Outcome::Failed { .. }) && !pods.iter().any(progress::builder_ran) {
        delete_ignoring_missing(&jobs, &job_name, "Job").await?;
    }
    match &outcome {
        Outcome::Succeeded { image } => tracing::info!("MachineOSBuild {} pushed {image}", build.name_any()),
        Outcome::Failed { message } => tracing::warn!("MachineOSBuild {} failed: {message}", build.name_any()),
        Outcome::Waiting | Outcome::Running => {}
    }
    Ok(Some(written))
}

async fn write_status(
    context: &Context,
    name: &str,
    status: &MachineOSBuildStatus,
) -> Result<MachineOSBuildStatus, Error> {
    Api::<MachineOSBuild>::all(context.client.clone())
        .patch_status(name, &patch_params(), &Patch::Merge(json!({ "status": status })))
        .await
        .map_err(kube_error(format!("updating the status of MachineOSBuild {name}")))?;
    Ok(status.clone())
}

/// A succeeded build becomes the MachineOSConfig's current image; the MachineOSConfig's other
/// ended builds are deleted (its Job stays, for its logs, until the build is deleted).
async fn publish_image(
    context: &Context,
    config: &MachineOSConfig,
    build: &MachineOSBuild,
    builds: &[MachineOSBuild],
) -> Result<(), Error> {
    let name = config.name_any();
    let image = build.status.as_ref().and_then(|s| s.digested_image_push_spec.clone());
    let status = MachineOSConfigStatus {
        conditions: config.status.as_ref().and_then(|s| s.conditions.clone()),
        observed_generation: config.metadata.generation,
        current_image_pull_spec: image.clone(),
        machine_os_build: Some(ObjectReference {
            group: "machineconfiguration.openshift.io".into(),
            resource: "machineosbuilds".into(),
            namespace: None,
            name: build.name_any(),
        }),
    };
    if config.status.as_ref() != Some(&status) {
        Api::<MachineOSConfig>::all(context.client.clone())
            .patch_status(&name, &patch_params(), &Patch::Merge(json!({ "status": status })))
            .await
            .map_err(kube_error(format!("updating the status of MachineOSConfig {name}")))?;
        tracing::info!(machine_os_config = name, "current image {}", image.unwrap_or_default());
    }
    for old in builds.iter().filter(|b| b.name_any() != build.name_any()) {
        if progress::phase(old).is_some_and(Phase::ended) {
            delete_build(context, &old.name_any()).await?;
            tracing::info!(machine_os_config = name, "deleted the superseded MachineOSBuild {}", old.name_any());
        }
    }
    Ok(())
}

/// Sets the pool's `ImageBuildDegraded` True with `message` (the node controller clears it when a
/// new build starts or succeeds). Conditional on the pool's resourceVersion, as its other writers.
async fn set_build_degraded(context: &Context, pool: &str, message: &str) -> Result<(), Error> {
    let api = Api::<MachineConfigPool>::all(context.client.clone());
    for _ in 0..CONFLICT_RETRIES {
        let current = api.get(pool).await.map_err(kube_error(format!("reading MachineConfigPool {pool}")))?;
        let existing = current.status.as_ref().and_then(|s| s.conditions.clone()).unwrap_or_default();
        let condition = conditions::condition(IMAGE_BUILD_DEGRADED, true, BUILD_FAILED, message, &now());
        let Some(updated) = conditions::set(&existing, condition) else { return Ok(()) };
        let patch = json!({
            "metadata": {"resourceVersion": current.resource_version()},
            "status": {"conditions": updated},
        });
        match api.patch_status(pool, &patch_params(), &Patch::Merge(&patch)).await {
            Ok(_) => {
                tracing::warn!(pool, "{message}");
                return Ok(());
            }
            Err(kube::Error::Api(status)) if status.is_conflict() => continue,
            Err(e) => return Err(kube_error(format!("updating the status of MachineConfigPool {pool}"))(e)),
        }
    }
    Err(KubeError::Conflicts { what: format!("the status of MachineConfigPool {pool}"), tries: CONFLICT_RETRIES })
}

/// Deletes a build's Job (and its pods) now, so that a build of the same name can start again
/// before the garbage collector gets to it.
async fn delete_job(context: &Context, build: &str) -> Result<(), Error> {
    let api = Api::<Job>::namespaced(context.client.clone(), &context.options.namespace);
    delete_ignoring_missing(&api, &format!("build-{build}"), "Job").await
}

async fn delete_build(context: &Context, name: &str) -> Result<(), Error> {
    delete_job(context, name).await?;
    delete_config_maps(context, name).await?;
    delete_ignoring_missing(&Api::<MachineOSBuild>::all(context.client.clone()), name, "MachineOSBuild").await
}

/// A build's ConfigMaps: its inputs (with the rendered config's secrets) live only as long as it
/// runs.
async fn delete_config_maps(context: &Context, build: &str) -> Result<(), Error> {
    let maps_api = Api::<ConfigMap>::namespaced(context.client.clone(), &context.options.namespace);
    let selector = format!("{MACHINE_OS_BUILD_LABEL}={build}");
    for map in maps_api
        .list_metadata(&ListParams::default().labels(&selector))
        .await
        .map_err(kube_error(format!("listing the ConfigMaps of MachineOSBuild {build}")))?
    {
        delete_ignoring_missing(&maps_api, &map.name_any(), "ConfigMap").await?;
    }
    Ok(())
}

async fn delete_ignoring_missing<K>(api: &Api<K>, name: &str, kind: &str) -> Result<(), Error>
where
    K: Resource + Clone + k8s_openapi::serde::de::DeserializeOwned + std::fmt::Debug,
{
    let params = DeleteParams { propagation_policy: Some(PropagationPolicy::Background), ..Default::default() };
    match api.delete(name, &params).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.is_not_found() => Ok(()),
        Err(e) => Err(kube_error(format!("deleting {kind} {name}"))(e)),
    }
}
