//! The IO half: the watches, `syncAll`, the MachineSet pass, the stub upgrade and the status
//! writes.

use std::collections::BTreeMap;

use anyhow::Context as _;
use fn_error_context::context;
use futures::StreamExt as _;
use futures::stream::BoxStream;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams, PostParams};
use kube::core::Selector;
use kube::runtime::{WatchStreamExt as _, watcher};
use kube::{Api, Client, Resource, ResourceExt};
use mco_api::constants::{
    BOOT_IMAGE_UPDATES_OPTED_IN_AT_ANNOTATION, BOOT_IMAGES_CONFIGMAP, BOOT_IMAGES_STREAM_KEY, MACHINE_API_NAMESPACE,
    MACHINE_CONFIGURATION_NAME, MCO_NAMESPACE, RELEASE_VERSION_KEY,
};
use mco_api::machine::ProviderSpecHolder;
use mco_api::machine::provider;
use mco_api::operator::{MachineConfiguration, MachineConfigurationStatus, MachineManager, MachineManagerSelectorMode};
use mco_api::{ControlPlaneMachineSet, MachineSet};
use mco_bootimage::ec2::{AmiOwner, KnownOwners};
use mco_bootimage::platform::Platform;
use mco_bootimage::skew::{ClusterVersion, is_control_plane_machinesets, is_machinesets};
use mco_bootimage::stub::{rfc3339, upgrade_user_data_secret};
use mco_bootimage::{Arch, Decision, Infrastructure, PlanContext, Stream, plan, plan_control_plane};
use serde_json::{Value, json};

use crate::Options;
use crate::ec2::{self, StaticCredentials};
use crate::events::{Tracker, Watched};
use crate::hotloop::HotLoopGuard;
use crate::status::{self, Counts, Pass};

/// Upstream's name, used as field manager.
const FIELD_MANAGER: &str = "machine-config-controller";
/// The cluster's AWS credentials (ns/MAPI).
const AWS_CREDENTIALS_SECRET: &str = "aws-cloud-credentials";
/// The stub Ignition version new boot images get (upstream converts to the newest spec).
const STUB_TARGET: mco_ignition::Target = mco_ignition::Target::V3_5;

fn cluster_version_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("config.openshift.io", "v1", "ClusterVersion"),
        "clusterversions",
    )
}

fn infrastructure_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("config.openshift.io", "v1", "Infrastructure"),
        "infrastructures",
    )
}

/// One stream of event names from every watch that starts a sync ([`crate::events`]; Infrastructure
/// is read, not watched).
pub(crate) fn watch_events(client: &Client) -> BoxStream<'static, &'static str> {
    fn named<K>(
        api: Api<K>,
        config: watcher::Config,
        kind: Watched,
        fingerprint: fn(&K) -> Value,
    ) -> BoxStream<'static, &'static str>
    where
        K: Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug + Send + 'static,
    {
        let mut tracker = Tracker::new(kind);
        watcher(api, config)
            .default_backoff()
            .filter_map(move |event| {
                let name = match event {
                    Ok(watcher::Event::Apply(o) | watcher::Event::InitApply(o)) => {
                        tracker.applied(&o.name_any(), fingerprint(&o))
                    }
                    Ok(watcher::Event::Delete(o)) => tracker.deleted(&o.name_any()),
                    Ok(watcher::Event::Init | watcher::Event::InitDone) => None,
                    Err(e) => {
                        tracing::debug!("watching {kind:?}: {e}");
                        None
                    }
                };
                futures::future::ready(name)
            })
            .boxed()
    }
    let by_name = |name: &str| watcher::Config::default().fields(&format!("metadata.name={name}"));
    futures::stream::select_all([
        named(
            Api::<MachineSet>::namespaced(client.clone(), MACHINE_API_NAMESPACE),
            watcher::Config::default(),
            Watched::MachineSet,
            |ms| json!([ms.provider_spec(), ms.metadata.labels, ms.metadata.annotations, ms.metadata.owner_references]),
        ),
        named(
            Api::<ControlPlaneMachineSet>::namespaced(client.clone(), MACHINE_API_NAMESPACE),
            watcher::Config::default(),
            Watched::ControlPlaneMachineSet,
            |cpms| {
                json!([
                    cpms.provider_spec(),
                    cpms.metadata.labels,
                    cpms.metadata.annotations,
                    cpms.metadata.owner_references
                ])
            },
        ),
        named(
            Api::<ConfigMap>::namespaced(client.clone(), MCO_NAMESPACE),
            by_name(BOOT_IMAGES_CONFIGMAP),
            Watched::BootImagesConfigMap,
            |cm| json!(cm.metadata.resource_version),
        ),
        named(
            Api::<MachineConfiguration>::all(client.clone()),
            by_name(MACHINE_CONFIGURATION_NAME),
            Watched::MachineConfiguration,
            |mc| {
                let status = mc.status.as_ref();
                json!([
                    mc.spec.managed_boot_images,
                    mc.spec.boot_image_skew_enforcement,
                    status.map(|s| &s.managed_boot_images_status),
                    status.map(|s| &s.boot_image_skew_enforcement_status),
                ])
            },
        ),
        named(
            Api::<DynamicObject>::all_with(client.clone(), &cluster_version_resource()),
            by_name("version"),
            Watched::ClusterVersion,
            |cv| cv.data.pointer("/status/history/0/state").cloned().unwrap_or(Value::Null),
        ),
    ])
    .boxed()
}

/// What one MachineSet's (or ControlPlaneMachineSet's) sync came to.
enum Outcome {
    /// Patched, already current, or nothing to do for it.
    Synced,
    /// Left alone for a reason that counts as skipped.
    Skipped(String),
}

/// The controller's state between syncs.
pub(crate) struct Controller {
    client: Client,
    pub(crate) options: Options,
    hot_loops: HotLoopGuard,
    control_plane_hot_loops: HotLoopGuard,
    ec2: ec2::Clients,
}

impl Controller {
    pub(crate) fn new(client: Client, options: Options) -> Controller {
        let ec2 = ec2::Clients::new(options.ec2_endpoint_url.clone());
        Controller {
            client,
            options,
            hot_loops: HotLoopGuard::new("machineset"),
            control_plane_hot_loops: HotLoopGuard::new("ControlPlaneMachineSet"),
            ec2,
        }
    }

    /// `syncAll`: the effective configuration, then (on a stable cluster) every selected
    /// ControlPlaneMachineSet and MachineSet, then the skew bookkeeping and the `Upgradeable`
    /// condition, written at once.
    pub(crate) async fn sync_all(&mut self, event: &'static str) -> anyhow::Result<()> {
        let Some(infrastructure) = self.read_infrastructure().await? else {
            tracing::debug!("no Infrastructure cluster: nothing to manage");
            return Ok(());
        };
        let support = infrastructure.boot_image_support();
        let cluster_version = self.read_cluster_version().await?;
        let configurations = Api::<MachineConfiguration>::all(self.client.clone());
        let configuration = self.ensure_machine_configuration(&configurations).await?;

        let now = Time(Timestamp::now());
        let (mut desired, opted_in) = status::effective_configuration(
            &configuration,
            &support,
            infrastructure.platform_type(),
            infrastructure.is_single_replica(),
            cluster_version.as_ref().unwrap_or(&ClusterVersion::default()),
        );
        if support.supported {
            status::ensure_default_conditions(desired.conditions.get_or_insert_with(Vec::new), &now);
        }
        let docs_version = cluster_version.as_ref().map_or_else(|| "latest".to_string(), ClusterVersion::docs_version);

        // Upstream's gate: no boot image changes while the cluster itself is updating.
        let stable =
            cluster_version.as_ref().and_then(|cv| cv.status.history.first()).is_some_and(|h| h.state == "Completed");
        if support.supported && !stable {
            tracing::info!(event, "cluster is not stable (ClusterVersion not Completed): boot image updates deferred");
        }
        if support.supported
            && stable
            && let Some(pass) =
                self.sync_machine_resources(&desired, &infrastructure, cluster_version.as_ref(), event).await?
        {
            let install_version =
                cluster_version.as_ref().map_or_else(|| "0.0.0".to_string(), ClusterVersion::install_version);
            status::record_pass(&mut desired, &pass, event, &install_version, &now);
        }
        self.write_status(&configurations, &configuration, desired, &docs_version, &now).await?;
        self.annotate_opt_in(&configurations, opted_in).await
    }

    #[context("Reading Infrastructure cluster")]
    async fn read_infrastructure(&self) -> anyhow::Result<Option<Infrastructure>> {
        let api = Api::<DynamicObject>::all_with(self.client.clone(), &infrastructure_resource());
        let Some(object) = api.get_opt("cluster").await? else { return Ok(None) };
        Ok(Some(serde_json::from_value(serde_json::to_value(object)?)?))
    }

    /// ClusterVersion `version`; `None` when absent (the cluster counts as not stable).
    #[context("Reading ClusterVersion version")]
    async fn read_cluster_version(&self) -> anyhow::Result<Option<ClusterVersion>> {
        let api = Api::<DynamicObject>::all_with(self.client.clone(), &cluster_version_resource());
        let Some(object) = api.get_opt("version").await? else { return Ok(None) };
        Ok(Some(serde_json::from_value(serde_json::to_value(object)?)?))
    }

    /// MachineConfiguration `cluster`, created (`managementState: Managed`) when absent, as the
    /// operator does.
    #[context("Reading MachineConfiguration {MACHINE_CONFIGURATION_NAME}")]
    async fn ensure_machine_configuration(
        &self,
        api: &Api<MachineConfiguration>,
    ) -> anyhow::Result<MachineConfiguration> {
        if let Some(existing) = api.get_opt(MACHINE_CONFIGURATION_NAME).await? {
            return Ok(existing);
        }
        let patch = json!({
            "apiVersion": "operator.openshift.io/v1",
            "kind": "MachineConfiguration",
            "metadata": {"name": MACHINE_CONFIGURATION_NAME},
            "spec": {"managementState": "Managed"},
        });
        let params = PatchParams::apply(FIELD_MANAGER);
        Ok(api.patch(MACHINE_CONFIGURATION_NAME, &params, &Patch::Apply(&patch)).await?)
    }

    /// Writes `desired` (plus the `Upgradeable` verdict on it) if it differs from what
    /// `configuration` holds. The write is conditional on the resourceVersion read, so that a
    /// concurrent change fails the sync (retried) instead of being overwritten.
    #[context("Updating the status of MachineConfiguration {MACHINE_CONFIGURATION_NAME}")]
    async fn write_status(
        &self,
        api: &Api<MachineConfiguration>,
        configuration: &MachineConfiguration,
        mut desired: MachineConfigurationStatus,
        docs_version: &str,
        now: &Time,
    ) -> anyhow::Result<()> {
        let upgradeable = status::upgradeable_condition(&desired, docs_version, now);
        status::set_condition(desired.conditions.get_or_insert_with(Vec::new), upgradeable);
        if configuration.status.as_ref() == Some(&desired) {
            return Ok(());
        }
        let mut updated = configuration.clone();
        updated.status = Some(desired);
        let params = PostParams { field_manager: Some(FIELD_MANAGER.to_string()), ..Default::default() };
        api.replace_status(MACHINE_CONFIGURATION_NAME, &params, &updated).await?;
        Ok(())
    }

    /// Records when the cluster was opted in by default.
    #[context("Annotating MachineConfiguration {MACHINE_CONFIGURATION_NAME}")]
    async fn annotate_opt_in(&self, api: &Api<MachineConfiguration>, opted_in: bool) -> anyhow::Result<()> {
        if !opted_in {
            return Ok(());
        }
        let now = now_rfc3339();
        let patch = json!({"metadata": {"annotations": {BOOT_IMAGE_UPDATES_OPTED_IN_AT_ANNOTATION: now}}});
        api.patch(MACHINE_CONFIGURATION_NAME, &PatchParams::default(), &Patch::Merge(&patch)).await?;
        Ok(())
    }

    /// The ControlPlaneMachineSets and MachineSets the effective configuration selects, in the
    /// original's order. `None` when none is managed.
    async fn sync_machine_resources(
        &mut self,
        effective: &MachineConfigurationStatus,
        infrastructure: &Infrastructure,
        cluster_version: Option<&ClusterVersion>,
        event: &'static str,
    ) -> anyhow::Result<Option<Pass>> {
        let managers = effective.managed_boot_images_status.as_ref().and_then(|m| m.machine_managers.as_deref());
        let managers = managers.unwrap_or_default();
        let control_planes: Vec<ControlPlaneMachineSet> =
            self.list_selected(managers.iter().find(|m| is_control_plane_machinesets(m))).await?;
        let machinesets: Vec<MachineSet> = self.list_selected(managers.iter().find(|m| is_machinesets(m))).await?;
        if control_planes.is_empty() {
            self.control_plane_hot_loops.clear();
        }
        if machinesets.is_empty() {
            self.hot_loops.clear();
        }
        if control_planes.is_empty() && machinesets.is_empty() {
            return Ok(None);
        }
        let mut pass = Pass {
            counts: Counts { total: machinesets.len(), ..Default::default() },
            control_plane: Counts { total: control_planes.len(), ..Default::default() },
            ..Default::default()
        };
        let configmap = Api::<ConfigMap>::namespaced(self.client.clone(), MCO_NAMESPACE)
            .get_opt(BOOT_IMAGES_CONFIGMAP)
            .await
            .context("Reading the boot images ConfigMap")?;
        let stream = match configmap.as_ref().map(read_stream) {
            Some(Ok(stream)) => stream,
            problem => {
                let error = match problem {
                    Some(Err(e)) => e,
                    _ => format!("ConfigMap {MCO_NAMESPACE}/{BOOT_IMAGES_CONFIGMAP} not found"),
                };
                pass.counts.errored = pass.counts.total;
                pass.control_plane.errored = pass.control_plane.total;
                pass.errors.push(error);
                return Ok(Some(pass));
            }
        };
        pass.release_version = configmap.as_ref().and_then(|c| c.data.as_ref()?.get(RELEASE_VERSION_KEY).cloned());

        // A ControlPlaneMachineSet has no architecture of its own: the controller's node's.
        let control_plane_arch = self.options.control_plane_arch;
        if !control_planes.is_empty() {
            tracing::info!(event, count = control_planes.len(), "syncing ControlPlaneMachineSets");
        }
        for cpms in &control_planes {
            let name = cpms.name_any();
            match self.sync_control_plane(cpms, &stream, infrastructure, control_plane_arch).await {
                // The original counts none of them as skipped.
                Ok(outcome) => {
                    if let Outcome::Skipped(reason) = outcome {
                        tracing::info!(controlplanemachineset = %name, "left alone: {reason}");
                        pass.control_plane_left_alone += 1;
                    }
                    pass.control_plane.in_progress += 1;
                }
                Err(e) => {
                    tracing::warn!(controlplanemachineset = %name, "{e:#}");
                    pass.control_plane.errored += 1;
                    pass.errors.push(format!("error syncing ControlPlaneMachineSet {name}: {e:#}"));
                }
            }
        }

        let default_arch = (!cluster_version.is_some_and(ClusterVersion::is_multi_arch)).then_some(control_plane_arch);
        if !machinesets.is_empty() {
            tracing::info!(event, count = machinesets.len(), "syncing MachineSets");
        }
        for machineset in &machinesets {
            let name = machineset.name_any();
            match self.sync_machineset(machineset, &stream, infrastructure, default_arch).await {
                Ok(Outcome::Synced) => pass.counts.in_progress += 1,
                Ok(Outcome::Skipped(reason)) => {
                    tracing::info!(machineset = %name, "skipped: {reason}");
                    pass.counts.in_progress += 1;
                    pass.counts.skipped += 1;
                    pass.skip_reasons.push((name, reason));
                }
                Err(e) => {
                    tracing::warn!(machineset = %name, "{e:#}");
                    pass.counts.errored += 1;
                    pass.errors.push(format!("{e:#}"));
                }
            }
        }
        Ok(Some(pass))
    }

    /// The objects of namespace `openshift-machine-api` that `manager` selects: all of them
    /// (`All`), those its `Partial` selector matches, or none.
    async fn list_selected<K>(&self, manager: Option<&MachineManager>) -> anyhow::Result<Vec<K>>
    where
        K: Resource<Scope = kube::core::NamespaceResourceScope> + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
        K::DynamicType: Default,
    {
        let params = match manager.map(|m| (&m.selection.mode, &m.selection.partial)) {
            Some((MachineManagerSelectorMode::All, _)) => ListParams::default(),
            Some((MachineManagerSelectorMode::Partial, Some(partial))) => {
                let selector = Selector::try_from(partial.machine_resource_selector.clone().unwrap_or_default())
                    .context("status.managedBootImagesStatus: the Partial machineResourceSelector")?;
                ListParams::default().labels_from(&selector)
            }
            _ => return Ok(Vec::new()),
        };
        let kind = K::kind(&K::DynamicType::default()).to_string();
        let listed = Api::<K>::namespaced(self.client.clone(), MACHINE_API_NAMESPACE)
            .list(&params)
            .await
            .with_context(|| format!("Listing {kind}s"))?;
        Ok(listed.items)
    }

    /// One ControlPlaneMachineSet.
    async fn sync_control_plane(
        &mut self,
        cpms: &ControlPlaneMachineSet,
        stream: &Stream,
        infrastructure: &Infrastructure,
        arch: Arch,
    ) -> anyhow::Result<Outcome> {
        let amis = self.ami_owners(cpms, stream, infrastructure).await?;
        // The context (a `dyn` lookup, not `Sync`) must not live across an await.
        let decision = plan_control_plane(
            cpms,
            arch,
            &PlanContext { stream, infrastructure: Some(infrastructure), default_arch: Some(arch), amis: &amis },
        )?;
        carry_out(&self.client, &mut self.control_plane_hot_loops, cpms, decision).await
    }

    /// One MachineSet.
    async fn sync_machineset(
        &mut self,
        machineset: &MachineSet,
        stream: &Stream,
        infrastructure: &Infrastructure,
        default_arch: Option<Arch>,
    ) -> anyhow::Result<Outcome> {
        let amis = self.ami_owners(machineset, stream, infrastructure).await?;
        // The context (a `dyn` lookup, not `Sync`) must not live across an await.
        let decision =
            plan(machineset, &PlanContext { stream, infrastructure: Some(infrastructure), default_arch, amis: &amis })?;
        carry_out(&self.client, &mut self.hot_loops, machineset, decision).await
    }

    /// On AWS, the owner of the MachineSet's AMI from EC2 (other platforms need none). An AMI of
    /// the current stream is Red Hat's without asking: it is what this controller patches in, so
    /// the sync after a patch needs no credentials and no EC2 round trip.
    async fn ami_owners(
        &mut self,
        machines: &impl ProviderSpecHolder,
        stream: &Stream,
        infrastructure: &Infrastructure,
    ) -> anyhow::Result<KnownOwners> {
        let mut owners = KnownOwners::default();
        if infrastructure.boot_image_support().platform != Some(Platform::Aws) {
            return Ok(owners);
        }
        let spec = machines.provider_spec();
        let (Some(ami), Some(region)) =
            (spec.and_then(provider::aws::ami_id), spec.and_then(provider::aws::region).filter(|r| !r.is_empty()))
        else {
            // The planner reports what is missing.
            return Ok(owners);
        };
        if stream.all_amis().contains(ami) {
            owners.0.insert(ami.to_string(), AmiOwner::RedHat);
            return Ok(owners);
        }
        let (credentials, version) = self.aws_credentials().await?;
        let client = self.ec2.get(region, &credentials, &version);
        let owner = ec2::describe_owner(&client, ami, region).await?;
        owners.0.insert(ami.to_string(), owner);
        Ok(owners)
    }

    #[context("Reading the AWS credentials (secret {MACHINE_API_NAMESPACE}/{AWS_CREDENTIALS_SECRET})")]
    async fn aws_credentials(&self) -> anyhow::Result<(StaticCredentials, String)> {
        let secret = Api::<Secret>::namespaced(self.client.clone(), MACHINE_API_NAMESPACE)
            .get_opt(AWS_CREDENTIALS_SECRET)
            .await?
            .context("not found")?;
        let data = secret.data.clone().unwrap_or_default();
        let key = |k: &str| -> anyhow::Result<String> {
            let value = data.get(k).with_context(|| format!("no key {k} (only static keys are supported)"))?;
            String::from_utf8(value.0.clone()).with_context(|| format!("key {k} is not UTF-8"))
        };
        let credentials = StaticCredentials {
            access_key_id: key(ec2::ACCESS_KEY_ID_KEY)?,
            secret_access_key: key(ec2::SECRET_ACCESS_KEY_KEY)?,
        };
        Ok((credentials, secret.resource_version().unwrap_or_default()))
    }
}

/// `decision` carried out on `object` (a MachineSet or ControlPlaneMachineSet): unless
/// `hot_loops` has seen the same patch applied too often in a row, the stub Ignition of its
/// user-data secret upgraded, then the object with the patch's provider spec. A whole-object
/// update, conditional on the resourceVersion listed: a JSON merge patch (upstream's way) replaces
/// arrays such as GCP's `disks` whole, and the API server then drops the `null`s inside them, so
/// fields we never meant to touch would change.
async fn carry_out<K>(
    client: &Client,
    hot_loops: &mut HotLoopGuard,
    object: &K,
    decision: Decision,
) -> anyhow::Result<Outcome>
where
    K: ProviderSpecHolder
        + Resource<Scope = kube::core::NamespaceResourceScope>
        + serde::Serialize
        + serde::de::DeserializeOwned
        + std::fmt::Debug,
    K::DynamicType: Default,
{
    let patch = match patch_or_outcome(decision) {
        Ok(patch) => patch,
        Err(outcome) => return Ok(outcome),
    };
    let name = object.name_any();
    let what = format!("{} {name}", K::kind(&K::DynamicType::default()));
    let value = serde_json::to_string(&patch.provider_spec)?;
    hot_loops.check(&name, &value)?;
    let secret = patch
        .user_data_secret
        .as_deref()
        .with_context(|| format!("{what}: providerSpec.value.userDataSecret.name is not set"))?;
    upgrade_stub(client, secret).await?;
    let params = PostParams { field_manager: Some(FIELD_MANAGER.to_string()), ..Default::default() };
    Api::<K>::namespaced(client.clone(), MACHINE_API_NAMESPACE)
        .replace(&name, &params, &patch.apply(object))
        .await
        .with_context(|| format!("Updating {what}"))?;
    hot_loops.record(&name, &value);
    tracing::info!(object = %what, from = %patch.from, to = %patch.to, "boot image updated");
    Ok(Outcome::Synced)
}

/// A spec 2 stub in the user-data secret becomes spec 3 before the MachineSet moves
/// to a boot image that only reads spec 3.
#[context("Upgrading the stub Ignition in secret {MACHINE_API_NAMESPACE}/{name}")]
async fn upgrade_stub(client: &Client, name: &str) -> anyhow::Result<()> {
    let api = Api::<Secret>::namespaced(client.clone(), MACHINE_API_NAMESPACE);
    let secret = api.get_opt(name).await?.context("not found")?;
    let now = now_rfc3339();
    if let Some(upgraded) = upgrade_user_data_secret(&secret, STUB_TARGET, &now)? {
        // Conditional on the resourceVersion read: a concurrent edit fails this sync.
        let params = PostParams { field_manager: Some(FIELD_MANAGER.to_string()), ..Default::default() };
        api.replace(name, &params, &upgraded).await?;
        tracing::info!(secret = name, "stub Ignition upgraded to {}", STUB_TARGET.version());
    }
    Ok(())
}

/// The patch a decision asks for, or what the sync came to without one.
fn patch_or_outcome(decision: Decision) -> Result<mco_bootimage::Patch, Outcome> {
    match decision {
        Decision::Patch(patch) => Ok(patch),
        Decision::UpToDate { .. } => Err(Outcome::Synced),
        Decision::Skipped(reason) if reason.counts_as_skipped() => Err(Outcome::Skipped(reason.to_string())),
        Decision::Skipped(reason) => {
            tracing::debug!("nothing to do: {reason}");
            Err(Outcome::Synced)
        }
        Decision::VsphereTemplate { ova, .. } => Err(Outcome::Skipped(format!(
            "vSphere template for release {} must be imported through vCenter, which this controller does not do yet",
            ova.release
        ))),
    }
}

/// The current time as the annotations upstream writes carry it.
fn now_rfc3339() -> String {
    rfc3339(std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default())
}

fn read_stream(configmap: &ConfigMap) -> Result<Stream, String> {
    let where_ = format!("ConfigMap {MCO_NAMESPACE}/{BOOT_IMAGES_CONFIGMAP}");
    let data: &BTreeMap<String, String> =
        configmap.data.as_ref().ok_or_else(|| format!("{where_} has no data.{BOOT_IMAGES_STREAM_KEY}"))?;
    let json =
        data.get(BOOT_IMAGES_STREAM_KEY).ok_or_else(|| format!("{where_} has no data.{BOOT_IMAGES_STREAM_KEY}"))?;
    Stream::parse(json.as_bytes()).map_err(|e| format!("{where_}: {e}"))
}
