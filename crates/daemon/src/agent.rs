//! The IO shell of `mco daemon run`: reads the Node and the objects an update needs, asks
//! [`handshake`] what to do, does it (patch an annotation, apply with the engine, request the
//! reboot) and reports failures as the node's state and reason, retrying with backoff.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::{FutureExt as _, StreamExt as _};
use k8s_openapi::api::core::v1::{ConfigMap, Node as KubeNode};
use kube::api::{Patch, PatchParams};
use kube::runtime::{WatchStreamExt as _, watcher};
use kube::{Api, Client};
use mco_api::constants::{
    BOOT_IMAGE_ANNOTATION, CONTROL_PLANE_TOPOLOGY_ANNOTATION, CONTROLLER_CONFIG_NAME, DESIRED_DRAIN_ANNOTATION,
    DRAIN_PREFIX, MACHINE_CONFIGURATION_NAME, MAX_REASON_LEN, MCO_NAMESPACE, POST_CONFIG_ACTION_ANNOTATION,
    PRESTAGE_ANNOTATION, PRESTAGE_ERROR_ANNOTATION, PRESTAGED_ANNOTATION, STATE_ANNOTATION, STATE_DONE,
    STATE_REBOOTING, STATE_WORKING,
};
use mco_api::{ControllerConfig, MachineConfig, MachineConfiguration};
use mco_apply::apply::{self, Applied, ApplyError, Disruption, Node, Recovered};
use mco_apply::failpoint::Failpoints;
use mco_apply::fsutil::{host_path, host_path_followed};
use mco_apply::plan::{self, Side};
use mco_apply::{state, validate};
use mco_disruption::ConfigDiff;
use mco_mcn::{Recorder, Step};
use mco_metrics::daemon::{DaemonMetrics, UpdatePhase};
use mco_metrics::unix_seconds;
use serde_json::Value;

use crate::aleph;
use crate::annotations::{self, Change};
use crate::backoff::Backoff;
use crate::events::NodeEvents;
use crate::handshake::{self, Next, Observed, UpdateStep};
use crate::{metered, os_release};

/// ConfigMap (ns/MCO) whose presence means registries.conf changes never drain (upstream
/// `constants.ImageRegistryDrainOverrideConfigmap`).
pub const IMAGE_REGISTRY_DRAIN_OVERRIDE_CONFIGMAP: &str = "image-registry-override-drain";
/// Where the seed annotations go once the node has started with them (upstream's name).
pub const NODE_ANNOTATIONS_DONE: &str = "/etc/machine-config-daemon/node-annotation.json.bak";

/// What `mco daemon run` is given.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The Node this daemon runs on; it reads and writes no other.
    pub node_name: String,
    /// The boot image's aleph file (`SYSROOT/.coreos-aleph-version.json`).
    pub aleph: PathBuf,
    pub timing: Timing,
    /// The node's state, updates and phase durations are set here.
    pub metrics: DaemonMetrics,
}

/// Delays and limits of the handshake; [`Timing::default`] is upstream's.
#[derive(Debug, Clone, Copy)]
pub struct Timing {
    /// How often the Node is read again while waiting, besides the watch (the handshake polls every 10 s).
    pub poll: Duration,
    /// How long a drain may take before the node reports Degraded (it keeps waiting).
    pub drain_timeout: Duration,
    /// How long an uncordon may take before the node reports Degraded (it keeps waiting).
    pub uncordon_timeout: Duration,
    /// The first delay before a failure is retried; it doubles up to `retry_max`.
    pub retry: Duration,
    pub retry_max: Duration,
    /// How often a settled node checks that its files and units are still what its config says
    /// (config drift: a file edited by hand degrades the node until it is put back).
    pub drift_check: Duration,
}

impl Default for Timing {
    fn default() -> Self {
        Timing {
            poll: Duration::from_secs(10),
            drain_timeout: Duration::from_secs(60 * 60),
            uncordon_timeout: Duration::from_secs(10 * 60),
            retry: Duration::from_secs(1),
            retry_max: Duration::from_secs(60),
            drift_check: Duration::from_secs(30),
        }
    }
}

/// Why [`run`] returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stopped {
    /// An update needs a reboot and it was requested: on a host the system is going down; on a
    /// directory root whoever runs it restarts the daemon as the "rebooted" node.
    RebootRequested,
}

/// Runs the daemon for `settings.node_name` until a reboot is requested. Every failure is
/// retried: node problems are reported on the Node first (Degraded or Unreconcilable with the
/// reason), API errors only logged. `node_client` reads and writes the Node (the node's own
/// credentials, which NodeRestriction confines to this Node); `client` reads the rest.
pub async fn run(client: Client, node_client: Client, node: Node, settings: Settings) -> Stopped {
    let nodes: Api<KubeNode> = Api::all(node_client);
    let watch = watcher::Config::default().fields(&format!("metadata.name={}", settings.node_name));
    let mut changes = watcher(nodes.clone(), watch).default_backoff().boxed();
    let timing = settings.timing;
    let host = os_release::read(&node.root);
    tracing::info!(os = %host.os, version = %host.version, "host OS");
    settings.metrics.set_host_os(&host.os, &host.version);
    let before_reboot = metered::BeforeReboot::default();
    let node = metered::metered(node, &settings.metrics, before_reboot.clone());
    let mut agent = Agent {
        before_reboot,
        events: NodeEvents::new(client.clone(), &settings.node_name),
        progress: Recorder::new(client.clone()),
        reported_updated: None,
        failure_reported: false,
        prestage_failed: None,
        client,
        nodes,
        node: Arc::new(node),
        settings,
        started: false,
        booting: true,
        validated: None,
        waiting: None,
        backoff: Backoff::new(timing.retry, timing.retry_max),
    };
    loop {
        let flow = match agent.sync().await {
            Ok(flow) => flow,
            Err(failure) => {
                agent.report(failure).await;
                Flow::Retry(agent.backoff.failed())
            }
        };
        match flow {
            Flow::Again => {}
            Flow::Wait => {
                tokio::select! {
                    _ = changes.next() => {}
                    () = tokio::time::sleep(timing.poll) => {}
                }
            }
            Flow::Retry(delay) => {
                tokio::time::sleep(delay).await;
                // Changes seen meanwhile (our own patches among them) are in the next read.
                while let Some(Some(_)) = changes.next().now_or_never() {}
            }
            Flow::Stop(stopped) => return stopped,
        }
    }
}

enum Flow {
    /// Decide again at once (the last step changed what the next one is).
    Again,
    /// Nothing to do until the Node changes (or the poll interval passes).
    Wait,
    /// A failure: try again after this delay.
    Retry(Duration),
    Stop(Stopped),
}

enum Failure {
    /// The node cannot reach its desired config: reported as its state and reason.
    Node(ApplyError),
    /// The API server could not be read or written: logged and retried.
    Api(anyhow::Error),
}

impl From<ApplyError> for Failure {
    fn from(e: ApplyError) -> Self {
        Failure::Node(e)
    }
}

fn not_found(name: &str) -> Failure {
    Failure::Node(ApplyError::Degraded(format!("could not find MachineConfig {name}")))
}

fn api(context: String) -> impl FnOnce(kube::Error) -> Failure {
    move |e| Failure::Api(anyhow::Error::new(e).context(context))
}

fn degraded(e: anyhow::Error) -> Failure {
    Failure::Node(ApplyError::Degraded(format!("{e:#}")))
}

/// A request to the drain controller this daemon waits for.
struct Waiting {
    request: String,
    since: Instant,
    reported: bool,
}

/// What an update changes, as the MachineConfigNode conditions report it.
struct Checked {
    plan: mco_disruption::Plan,
    /// The OS image, extensions or kernel type change.
    os: bool,
    /// The OS image changes.
    image: bool,
    /// What changes of the OS, as upstream's `OSUpdateStarted` event says it (empty: nothing).
    os_changes: Vec<&'static str>,
    /// The passwd section or a file changes (upstream's "SSH Keys" in its messages).
    files: bool,
    /// A file the node's OS image pulls read changes (registries, credentials, CAs, proxies).
    pull_files: bool,
}

/// The cluster-wide inputs of an update.
struct ClusterInputs {
    disruption: Disruption,
    topology: Option<String>,
}

struct Agent {
    client: Client,
    nodes: Api<KubeNode>,
    node: Arc<Node>,
    settings: Settings,
    /// The start-up steps ran (recovery, seed annotations, boot image).
    started: bool,
    /// No SetDone and no update yet in this process.
    booting: bool,
    /// When the on-disk state was last found to match the running config (at start, then every
    /// [`Timing::drift_check`] while the node is settled); `None`: to be checked before anything else.
    validated: Option<Instant>,
    waiting: Option<Waiting>,
    backoff: Backoff,
    /// Writes the MachineConfigNode conditions of each step.
    progress: Recorder,
    /// The reports an update makes just before its reboot is requested.
    before_reboot: metered::BeforeReboot,
    /// Records the Events of each step on the Node.
    events: NodeEvents,
    /// The config this process last reported `Updated` for (one write per config, not per poll).
    reported_updated: Option<String>,
    /// A failure was reported (NodeDegraded) that no success has cleared yet.
    failure_reported: bool,
    /// The image a pull ahead last failed for, and when: retried after [`Timing::retry_max`].
    prestage_failed: Option<(String, Instant)>,
}

impl Agent {
    fn name(&self) -> &str {
        &self.settings.node_name
    }

    async fn sync(&mut self) -> Result<Flow, Failure> {
        if !self.started {
            if let Some(stopped) = self.start().await? {
                return Ok(Flow::Stop(stopped));
            }
            self.started = true;
        }
        let node = self.get_node().await?;
        if node.metadata.deletion_timestamp.is_some() {
            tracing::info!(node = self.name(), "the Node is being deleted; nothing to do");
            return Ok(Flow::Wait);
        }
        let mut annotations = node.metadata.annotations.unwrap_or_default();
        let root = self.node.root.clone();
        let on_disk = state::read_current_config(&root).map_err(degraded)?;
        let force = state::force_file_present(&root);
        if self.validated.is_none() {
            if let Err(failure) = self.validate(&annotations, on_disk.as_ref(), force).await {
                if let Failure::Node(e) = &failure {
                    let reason = if self.booting { "OnDiskStateValidationFailed" } else { "ConfigDriftDetected" };
                    if !self.booting {
                        self.settings.metrics.config_drift.set(unix_seconds(std::time::SystemTime::now()));
                    }
                    self.events.warning(reason, &e.reason()).await;
                }
                return Err(failure);
            }
            self.validated = Some(Instant::now());
        }
        let current_image = state::layered_image(on_disk.as_ref()).map(str::to_string);
        let observed = Observed {
            on_disk: on_disk.as_ref().and_then(|mc| mc.metadata.name.as_deref()),
            current_image: current_image.as_deref(),
            force,
            booting: self.booting,
            ..Observed::from_annotations(&annotations)
        };
        let next = handshake::next(&observed);
        tracing::debug!(?next, "decided");
        if !matches!(next, Next::WaitForDrain(_))
            && let Some(waited) = self.waiting.take()
            && waited.request.starts_with(DRAIN_PREFIX)
        {
            self.settings.metrics.observe_phase(UpdatePhase::Drain, waited.since.elapsed());
        }
        match next {
            Next::NoTarget => {
                tracing::debug!(node = self.name(), "no desiredConfig yet");
                Ok(Flow::Wait)
            }
            Next::WaitForDrain(request) => self.wait_for_drain(request).await,
            Next::Idle => {
                self.backoff.reset();
                if let Some(config) = observed.current
                    && self.reported_updated.as_deref() != Some(config)
                {
                    // Until the controller has made the node's MachineConfigNode, every poll tries again.
                    let mut recorded =
                        self.progress.record_or_log(self.name(), &annotations, &Step::updated(self.name())).await;
                    if self.failure_reported {
                        // A failure between updates (config drift) that is over.
                        let step = Step::degraded(self.name(), None);
                        recorded &= self.progress.record_or_log(self.name(), &annotations, &step).await;
                        self.failure_reported = !recorded;
                    }
                    if recorded {
                        // The original's log line (its e2e tests wait for it in the daemon's log).
                        tracing::info!(node = self.name(), %config, "Config Drift Monitor started");
                        let watching = format!("Config Drift Monitor started, watching against {config}");
                        self.events.normal("ConfigDriftMonitorStarted", &watching).await;
                        self.reported_updated = Some(config.to_string());
                    }
                }
                self.prestage(&mut annotations).await?;
                // Config drift between updates: validate again, as at start (a mismatch degrades
                // the node and is checked again on every retry until it is put back).
                if self.validated.is_some_and(|at| at.elapsed() >= self.settings.timing.drift_check) {
                    self.validated = None;
                    return Ok(Flow::Again);
                }
                Ok(Flow::Wait)
            }
            Next::RequestUncordon(config) => {
                let request = handshake::uncordon_request(&config);
                tracing::info!(node = self.name(), %request, "requesting the uncordon");
                self.patch(&mut annotations, &[(DESIRED_DRAIN_ANNOTATION, Some(request.clone()))]).await?;
                // The drain is timed from its request: the controller may answer before the next poll.
                self.waiting = Some(Waiting { request, since: Instant::now(), reported: false });
                Ok(Flow::Wait)
            }
            Next::SetDone(config) => {
                let changes = annotations::done(&annotations, &config, current_image.as_deref());
                self.patch(&mut annotations, &changes).await?;
                tracing::info!(node = self.name(), %config, "update complete: state Done");
                let now = unix_seconds(std::time::SystemTime::now());
                self.settings.metrics.set_state(STATE_DONE, "", now);
                self.settings.metrics.set_update_state(&config, "", now);
                if let Err(e) = metered::observe_reboot(&root, &self.settings.metrics) {
                    tracing::warn!("the reboot's duration is not observed: {e:#}");
                }
                let uncordoned = format!("Update completed for config {config} and node has been uncordoned");
                self.events.normal("Uncordon", &uncordoned).await;
                let done = format!("Setting node {}, currentConfig {config} to Done", self.name());
                self.events.normal("NodeDone", &done).await;
                if self.booting {
                    self.progress.record_or_log(self.name(), &annotations, &Step::resumed(&config)).await;
                }
                self.booting = false;
                self.backoff.reset();
                Ok(Flow::Again)
            }
            Next::Update { from, to } => {
                self.booting = false;
                if self.reported_updated.take().is_some() {
                    // The drift checks stop for the update, as the original's monitor does.
                    tracing::info!(node = self.name(), "Config Drift Monitor has shut down");
                    self.events.normal("ConfigDriftMonitorStopped", "Config Drift Monitor stopped").await;
                }
                self.update(annotations, on_disk, from, to, force).await
            }
        }
    }

    /// What the daemon does when it starts
    /// (`docs/behaviour.md#what-the-daemon-does-when-it-starts`): finish or roll back an
    /// interrupted update, seed the annotations of a new node, clear the reboot marker, report the
    /// boot image.
    async fn start(&mut self) -> Result<Option<Stopped>, Failure> {
        // Reading the on-disk config is only meaningful once an interrupted update is resolved.
        match blocking(&self.node, apply::recover).await.map_err(degraded)? {
            Recovered::Nothing | Recovered::Completed => {}
            Recovered::RolledBack => tracing::warn!("rolled back an update that was interrupted"),
            Recovered::RebootRequested => {
                tracing::warn!("an interrupted update was complete but not rebooted into: reboot requested again");
                return Ok(Some(Stopped::RebootRequested));
            }
        }
        let node = self.get_node().await?;
        self.events.set_uid(node.metadata.uid.clone());
        let mut annotations = node.metadata.annotations.unwrap_or_default();
        let observed = Observed::from_annotations(&annotations);
        if let (Some(current), Some(desired)) = (observed.current, observed.desired)
            && current != desired
        {
            let message = format!("Booting node {}, currentConfig {current}, desiredConfig {desired}", self.name());
            self.events.normal("BootResync", &message).await;
        }
        if let Some(seed) = read_seed(&self.node.root).map_err(degraded)?
            && let Some(patch) = annotations::seed_patch(&annotations, &seed)
        {
            tracing::info!(node = self.name(), "setting the initial annotations from {}", state::NODE_ANNOTATIONS);
            self.patch_raw(&mut annotations, &patch).await?;
        }
        if annotations.get(POST_CONFIG_ACTION_ANNOTATION).map(String::as_str) == Some(STATE_REBOOTING) {
            self.progress.record_or_log(self.name(), &annotations, &Step::rebooted()).await;
            self.patch(&mut annotations, &[annotations::rebooting(false)]).await?;
        }
        match aleph::read(&self.settings.aleph) {
            Ok(Some(image)) => {
                tracing::info!(build = %image.build, commit = %image.ostree_commit, "boot image");
                let value = aleph::annotation(&image);
                self.patch(&mut annotations, &[(BOOT_IMAGE_ANNOTATION, Some(value))]).await?;
            }
            Ok(None) => tracing::info!("no boot image information: {} does not exist", self.settings.aleph.display()),
            Err(e) => tracing::warn!("boot image information not reported: {e}"),
        }
        Ok(None)
    }

    /// The node must be what its running config says (the on-disk config, else
    /// `currentConfig`) before anything else happens; the force file skips this. Run at start
    /// and by the config drift check.
    async fn validate(
        &self,
        annotations: &BTreeMap<String, String>,
        on_disk: Option<&MachineConfig>,
        force: bool,
    ) -> Result<(), Failure> {
        if force {
            tracing::info!("{} present: skipping the on-disk validation", state::FORCE_FILE);
            return Ok(());
        }
        let running = match (on_disk, Observed::from_annotations(annotations).current) {
            (Some(mc), _) => mc.clone(),
            (None, Some(name)) => self.machine_config(name).await?,
            (None, None) => {
                tracing::info!("no current config on disk or on the Node: nothing to validate");
                return Ok(());
            }
        };
        let name = name_of(&running).to_string();
        let ignition = plan::ignition_of(&name, &running.spec).map_err(ApplyError::from)?;
        let checked = blocking(&self.node, move |node| {
            validate::validate(&node.root, node.systemd.as_ref(), node.os.as_deref(), &running.spec, &ignition)
        });
        checked.await.map_err(|problems| {
            ApplyError::Degraded(format!("unexpected on-disk state validating against {name}: {}", problems.join("; ")))
        })?;
        tracing::debug!(config = %name, "the node matches its current config");
        let seed = host_path(&self.node.root, state::NODE_ANNOTATIONS).map_err(degraded)?;
        if std::fs::symlink_metadata(&seed).is_ok() {
            let done = host_path(&self.node.root, NODE_ANNOTATIONS_DONE).map_err(degraded)?;
            std::fs::rename(&seed, done)
                .map_err(|e| degraded(anyhow::Error::new(e).context(format!("renaming {}", seed.display()))))?;
        }
        Ok(())
    }

    async fn wait_for_drain(&mut self, request: String) -> Result<Flow, Failure> {
        let (verb, limit, event) = if request.starts_with(DRAIN_PREFIX) {
            ("drain", self.settings.timing.drain_timeout, "FailedToDrain")
        } else {
            ("uncordon", self.settings.timing.uncordon_timeout, "FailedToUncordon")
        };
        let waiting = match &mut self.waiting {
            Some(w) if w.request == request => w,
            slot => slot.insert(Waiting { request, since: Instant::now(), reported: false }),
        };
        if !waiting.reported && waiting.since.elapsed() > limit {
            waiting.reported = true;
            let message = format!(
                "failed to {verb} node: {} after {}s ({} is not answered by lastAppliedDrain). Please see \
                 machine-config-controller logs for more information",
                self.settings.node_name,
                limit.as_secs(),
                waiting.request
            );
            self.events.warning(event, &message).await;
            return Err(Failure::Node(ApplyError::Degraded(message)));
        }
        Ok(Flow::Wait)
    }

    /// One step of the update `from` → `to`: Working, drain, or apply.
    async fn update(
        &mut self,
        mut annotations: BTreeMap<String, String>,
        on_disk: Option<MachineConfig>,
        from: Option<String>,
        to: String,
        force: bool,
    ) -> Result<Flow, Failure> {
        let mut new = self.machine_config(&to).await?;
        let old = match from {
            // The API's copy, as upstream's lister: the node's own record may be its first boot's,
            // which has no Ignition config (the server sends the encapsulated config without it,
            // as upstream's does), and would make every file and unit look new (and reboot). The
            // built image a layered node runs is its record's (upstream takes it from the Node).
            Some(from) => {
                let disk = on_disk.filter(|disk| name_of(disk) == from);
                match self.machine_config_opt(&from).await? {
                    Some(mut mc) => {
                        if let Some(image) = state::layered_image(disk.as_ref()) {
                            state::with_layered_image(&mut mc, image);
                        }
                        mc
                    }
                    // Deleted since (an old rendered config): the node's own record of it.
                    None => disk.ok_or_else(|| not_found(&from))?,
                }
            }
            // Nothing known about the node: every file of the config is new (upstream `mco-empty-mc`).
            None => MachineConfig::new("mco-empty-mc", Default::default()),
        };
        // On-cluster layering: the node runs its pool's built image instead of its config's.
        // Extensions and the kernel type are the image's business then (upstream ignores them too).
        let desired_image = Observed::from_annotations(&annotations).desired_image.map(str::to_string);
        if let Some(image) = &desired_image {
            state::with_layered_image(&mut new, image);
            new.spec.extensions.clone_from(&old.spec.extensions);
            new.spec.kernel_type.clone_from(&old.spec.kernel_type);
        }
        let inputs = self.cluster_inputs(&annotations).await?;
        let checked = match check(&old, &new, &inputs.disruption, force) {
            Ok(checked) => checked,
            Err(e) => {
                let step = Step::incompatible(name_of(&old), &to, &e.reason());
                self.progress.record_or_log(self.name(), &annotations, &step).await;
                if matches!(e, ApplyError::Unreconcilable(_)) {
                    let message = format!("can't reconcile config {} with {to}: {}", name_of(&old), e.reason());
                    self.events.warning("FailedToReconcile", &message).await;
                }
                return Err(e.into());
            }
        };
        let Checked { plan, os, image, os_changes, files, pull_files } = checked;
        let observed = Observed::from_annotations(&annotations);
        let drain = handshake::drain_required(plan.drain, inputs.topology.as_deref());
        match handshake::update_step(observed.state, observed.desired_drain, &to, drain) {
            UpdateStep::SetWorking => {
                tracing::info!("Drain calculated for node disruption: {drain} for config {to}");
                self.progress.record_or_log(self.name(), &annotations, &Step::needs_update(self.name())).await;
                self.patch(&mut annotations, &[(STATE_ANNOTATION, Some(STATE_WORKING.to_string()))]).await?;
                self.settings.metrics.set_state(STATE_WORKING, "", unix_seconds(std::time::SystemTime::now()));
                let actions: Vec<String> = plan.actions.iter().map(mco_disruption::describe).collect();
                self.progress.record_or_log(self.name(), &annotations, &Step::prepared(&actions, drain)).await;
                Ok(Flow::Again)
            }
            UpdateStep::RequestDrain(request) => {
                tracing::info!(node = self.name(), %request, reason = %plan.drain_reason, "requesting a drain");
                self.patch(&mut annotations, &[(DESIRED_DRAIN_ANNOTATION, Some(request.clone()))]).await?;
                // The drain is timed from its request: the controller may answer before the next poll.
                self.waiting = Some(Waiting { request, since: Instant::now(), reported: false });
                self.events.normal("Cordon", "Cordoned node to apply update").await;
                self.events.normal("Drain", "Draining node to update config.").await;
                Ok(Flow::Wait)
            }
            UpdateStep::Apply => {
                if !drain {
                    tracing::info!(node = self.name(), reason = %plan.drain_reason, "no drain");
                    self.progress.record_or_log(self.name(), &annotations, &Step::drain_not_required()).await;
                    self.events.normal("Drain", "Drain not required, skipping").await;
                }
                self.progress.record_or_log(self.name(), &annotations, &Step::applying(os, files)).await;
                let new_image = new.spec.os_image_url.clone();
                if os {
                    self.events.normal("InClusterUpgrade", &format!("Updating from oscontainer {new_image}")).await;
                }
                if !os_changes.is_empty() {
                    self.events.normal("OSUpdateStarted", &os_changes.join("; ")).await;
                }
                let (old_name, new_name) = (name_of(&old).to_string(), to.clone());
                let reboots = plan.reboots();
                if reboots {
                    self.patch(&mut annotations, &[annotations::rebooting(true)]).await?;
                }
                // Pulled apart first, unless the update brings the files the pull needs: the
                // deployment then pulls after writing them.
                let pull = (image && !pull_files && !new_image.is_empty() && self.node.os.is_some())
                    .then(|| new_image.clone());
                // An update that reboots is reported applied, and its reboot required, just before
                // the reboot is requested (in the apply, on its blocking thread): afterwards the
                // daemon may already be gone.
                let reported = Arc::new(std::sync::atomic::AtomicBool::new(false));
                if reboots {
                    let (progress, node, annotations) =
                        (self.progress.clone(), self.name().to_string(), annotations.clone());
                    let (runtime, done) = (tokio::runtime::Handle::current(), reported.clone());
                    self.before_reboot.set(move || {
                        runtime.block_on(async {
                            let steps =
                                [Step::applied(os, files), Step::degraded(&node, None), Step::reboot_required()];
                            for step in steps {
                                progress.record_or_log(&node, &annotations, &step).await;
                            }
                        });
                        done.store(true, std::sync::atomic::Ordering::SeqCst);
                    });
                }
                let applied = self.pull_and_deploy(pull, old, new, inputs.disruption).await;
                self.before_reboot.clear();
                let reported = reported.load(std::sync::atomic::Ordering::SeqCst);
                if applied.is_ok() {
                    if !reported {
                        for step in [Step::applied(os, files), Step::degraded(self.name(), None)] {
                            self.progress.record_or_log(self.name(), &annotations, &step).await;
                        }
                    }
                    self.failure_reported = false;
                    let (reason, message) = if image {
                        (
                            "OSUpgradeApplied",
                            format!(
                                "OS upgrade applied; new MachineConfig ({new_name}) has new OS image ({new_image})"
                            ),
                        )
                    } else {
                        (
                            "OSUpgradeSkipped",
                            format!(
                                "OS upgrade skipped; new MachineConfig ({new_name}) has same OS image ({new_image}) as old \
                                 MachineConfig ({old_name})"
                            ),
                        )
                    };
                    self.events.normal(reason, &message).await;
                }
                match applied {
                    Ok(done) if done.disruption.reboots() => {
                        if !reported {
                            self.progress.record_or_log(self.name(), &annotations, &Step::reboot_required()).await;
                        }
                        self.events.normal("Reboot", &format!("Node will reboot into config {to}")).await;
                        tracing::info!(node = self.name(), config = %to, "applied; rebooting into it");
                        Ok(Flow::Stop(Stopped::RebootRequested))
                    }
                    Ok(done) => {
                        self.progress.record_or_log(self.name(), &annotations, &Step::no_reboot()).await;
                        for (reason, message) in post_action_events(&done.disruption) {
                            self.events.normal(reason, &message).await;
                        }
                        tracing::info!(node = self.name(), config = %to, "applied without a reboot");
                        Ok(Flow::Again)
                    }
                    Err(e) => {
                        if reboots {
                            self.patch(&mut annotations, &[annotations::rebooting(false)]).await?;
                        }
                        Err(e.into())
                    }
                }
            }
        }
    }

    /// Pulls the new OS image (`pull`: the update changes it) and applies the update, observing
    /// the duration of each phase that completes.
    async fn pull_and_deploy(
        &self,
        pull: Option<String>,
        old: MachineConfig,
        new: MachineConfig,
        disruption: Disruption,
    ) -> Result<Applied, ApplyError> {
        let metrics = &self.settings.metrics;
        if let Some(image) = pull {
            let started = Instant::now();
            let pulled = blocking(&self.node, move |node| match &node.os {
                Some(os) => os.pull_ahead(&image),
                None => Ok(false),
            });
            if pulled.await.map_err(|e| ApplyError::Degraded(format!("{e:#}")))? {
                metrics.observe_phase(UpdatePhase::Pull, started.elapsed());
            }
        }
        let started = Instant::now();
        let applied = blocking(&self.node, move |node| {
            let failpoints = Failpoints::from_env().map_err(|e| ApplyError::Degraded(format!("{e:#}")))?;
            apply::apply(node, &old, &new, &disruption, &failpoints)
        });
        let applied = applied.await?;
        metrics.observe_phase(UpdatePhase::Deploy, started.elapsed());
        // The OS update succeeded or was not needed (the original resets its gauge there too).
        metrics.pivot_errors.set(0);
        Ok(applied)
    }

    /// The node disruption policies (MachineConfiguration `cluster`, defaults without it), the
    /// registry drain override and the control plane topology.
    async fn cluster_inputs(&self, annotations: &BTreeMap<String, String>) -> Result<ClusterInputs, Failure> {
        let configurations: Api<MachineConfiguration> = Api::all(self.client.clone());
        let configuration = configurations
            .get_opt(MACHINE_CONFIGURATION_NAME)
            .await
            .map_err(api(format!("reading MachineConfiguration {MACHINE_CONFIGURATION_NAME}")))?;
        let policies = match &configuration {
            Some(c) => mco_disruption::policies_of(c),
            None => mco_disruption::default_cluster_policies(),
        };
        let config_maps: Api<ConfigMap> = Api::namespaced(self.client.clone(), MCO_NAMESPACE);
        let skip_registry_drain = config_maps
            .get_opt(IMAGE_REGISTRY_DRAIN_OVERRIDE_CONFIGMAP)
            .await
            .map_err(api(format!("reading ConfigMap {IMAGE_REGISTRY_DRAIN_OVERRIDE_CONFIGMAP}")))?
            .is_some();
        let controller_configs: Api<ControllerConfig> = Api::all(self.client.clone());
        let controller_config = controller_configs
            .get_opt(CONTROLLER_CONFIG_NAME)
            .await
            .map_err(api(format!("reading ControllerConfig {CONTROLLER_CONFIG_NAME}")))?;
        let topology = controller_config
            .as_ref()
            .and_then(|cc| cc.spec.infra.as_ref())
            .and_then(|infra| infra.pointer("/status/controlPlaneTopology"))
            .and_then(Value::as_str)
            .or_else(|| annotations.get(CONTROL_PLANE_TOPOLOGY_ANNOTATION).map(String::as_str))
            .map(str::to_string);
        Ok(ClusterInputs { disruption: Disruption::Cluster { policies, skip_registry_drain }, topology })
    }

    async fn get_node(&self) -> Result<KubeNode, Failure> {
        self.nodes.get(self.name()).await.map_err(api(format!("reading Node {}", self.name())))
    }

    /// The MachineConfig `name` as nodes apply it: with its pinned OS image (a tag without a pin
    /// is refused here, before anything is done for the update).
    async fn machine_config(&self, name: &str) -> Result<MachineConfig, Failure> {
        self.machine_config_opt(name).await?.ok_or_else(|| not_found(name))
    }

    /// MachineConfig `name` with the digest the controller resolved its OS image to, if it did.
    async fn machine_config_opt(&self, name: &str) -> Result<Option<MachineConfig>, Failure> {
        let configs: Api<MachineConfig> = Api::all(self.client.clone());
        let config = configs.get_opt(name).await.map_err(api(format!("reading MachineConfig {name}")))?;
        config
            .map(|mc| mc.with_pinned_os_image().map_err(|e| Failure::Node(ApplyError::Degraded(e.to_string()))))
            .transpose()
    }

    /// Pulls the OS image the controller asked this idle node to pull ahead of its update
    /// (mco's pre-staging), and answers on the Node: the image pulled, or why not (not an update
    /// failure: the node stays Done, the controller keeps it from its slot). A failed pull is
    /// retried every [`Timing::retry_max`].
    async fn prestage(&mut self, annotations: &mut BTreeMap<String, String>) -> Result<(), Failure> {
        let Some(image) = annotations.get(PRESTAGE_ANNOTATION).cloned() else {
            return self.drop_withdrawn(annotations).await;
        };
        if annotations.get(PRESTAGED_ANNOTATION) == Some(&image) {
            return Ok(());
        }
        let retry = self.settings.timing.retry_max;
        if self.prestage_failed.as_ref().is_some_and(|(failed, at)| *failed == image && at.elapsed() < retry) {
            return Ok(());
        }
        tracing::info!(node = self.name(), %image, "pulling the pool's OS image ahead of the update");
        let pulling = image.clone();
        // Not an update phase: the update's own pull then finds the image (its timing is the update's).
        let pulled = blocking(&self.node, move |node| match &node.os {
            Some(os) => os.prestage(&pulling),
            None => Ok(false),
        })
        .await;
        match pulled {
            Ok(_) => {
                self.prestage_failed = None;
                self.patch(
                    annotations,
                    &[(PRESTAGED_ANNOTATION, Some(image.clone())), (PRESTAGE_ERROR_ANNOTATION, None)],
                )
                .await?;
                self.events.normal("OSImagePrestaged", &format!("Pulled OS image {image} ahead of the update")).await;
            }
            Err(e) => {
                // As long as a failed update's reason may be.
                let why: String = format!("{e:#}").chars().take(MAX_REASON_LEN).collect();
                tracing::warn!(node = self.name(), %image, "pulling ahead failed: {why}");
                self.prestage_failed = Some((image.clone(), Instant::now()));
                self.patch(annotations, &[(PRESTAGE_ERROR_ANNOTATION, Some(format!("{image}: {why}")))]).await?;
                let note = format!("Pulling OS image {image} ahead of the update failed: {why}");
                self.events.warning("OSImagePrestageFailed", &note).await;
            }
        }
        Ok(())
    }

    /// Removes what was pulled ahead for a request the controller withdrew (the update it was for
    /// was superseded, or the pool stopped pre-staging) and no deployment uses, and the answers
    /// to that request. An image the node has since deployed stays.
    async fn drop_withdrawn(&mut self, annotations: &mut BTreeMap<String, String>) -> Result<(), Failure> {
        if !annotations.contains_key(PRESTAGED_ANNOTATION) && !annotations.contains_key(PRESTAGE_ERROR_ANNOTATION) {
            return Ok(());
        }
        self.prestage_failed = None;
        let dropped = blocking(&self.node, |node| match &node.os {
            Some(os) => os.drop_pulled(),
            None => Ok(Vec::new()),
        })
        .await;
        match dropped {
            Ok(images) if !images.is_empty() => {
                tracing::info!(node = self.name(), ?images, "removed OS images pulled ahead for a withdrawn update");
            }
            Ok(_) => {}
            // Left for the next pull or update, which remove them too.
            Err(e) => tracing::warn!(node = self.name(), "removing OS images pulled ahead: {e:#}"),
        }
        self.patch(annotations, &[(PRESTAGED_ANNOTATION, None), (PRESTAGE_ERROR_ANNOTATION, None)]).await
    }

    /// Writes `changes` (only those that differ from `annotations`, which then hold the result).
    async fn patch(&self, annotations: &mut BTreeMap<String, String>, changes: &[Change]) -> Result<(), Failure> {
        match annotations::merge_patch(annotations, changes) {
            Some(patch) => self.patch_raw(annotations, &patch).await,
            None => Ok(()),
        }
    }

    async fn patch_raw(&self, annotations: &mut BTreeMap<String, String>, patch: &Value) -> Result<(), Failure> {
        let node = self
            .nodes
            .patch(self.name(), &PatchParams::default(), &Patch::Merge(patch))
            .await
            .map_err(api(format!("annotating Node {}", self.name())))?;
        *annotations = node.metadata.annotations.unwrap_or_default();
        Ok(())
    }

    /// Logs a failure; a node failure also becomes the Node's state and reason.
    async fn report(&mut self, failure: Failure) {
        let e = match failure {
            Failure::Api(e) => return tracing::warn!("{e:#}; retrying"),
            Failure::Node(e) => e,
        };
        tracing::error!(node = self.name(), state = e.state(), reason = %e.reason(), "update failed; retrying");
        let written = async {
            let mut annotations = self.get_node().await?.metadata.annotations.unwrap_or_default();
            self.patch(&mut annotations, &annotations::failed(e.state(), e.reason())).await?;
            let now = unix_seconds(std::time::SystemTime::now());
            self.settings.metrics.set_state(e.state(), &e.reason(), now);
            let target = Observed::from_annotations(&annotations).desired.unwrap_or_default().to_string();
            self.settings.metrics.set_update_state(&target, &e.reason(), now);
            let step = Step::degraded(self.name(), Some(&e.reason()));
            self.progress.record_or_log(self.name(), &annotations, &step).await;
            Ok::<_, Failure>(())
        };
        match written.await {
            Ok(()) => {}
            Err(Failure::Api(e)) => tracing::warn!("reporting the failure: {e:#}"),
            Err(Failure::Node(e)) => tracing::warn!("reporting the failure: {}", e.reason()),
        }
        // Once settled again, the node says so (Updated, NodeDegraded false).
        self.failure_reported = true;
        self.reported_updated = None;
    }
}

/// Everything that can refuse an update before the node is drained (upstream checks the same
/// before `performDrain`): the config parses, the change is reconcilable, the disruption plan.
fn check(
    old: &MachineConfig,
    new: &MachineConfig,
    disruption: &Disruption,
    force: bool,
) -> Result<Checked, ApplyError> {
    let (old_name, new_name) = (name_of(old), name_of(new));
    let old_ignition = plan::ignition_of(old_name, &old.spec)?;
    let new_ignition = plan::ignition_of(new_name, &new.spec)?;
    plan::plan(
        Side { name: old_name, spec: &old.spec, ignition: &old_ignition },
        Side { name: new_name, spec: &new.spec, ignition: &new_ignition },
        force,
    )?;
    let diff = ConfigDiff::between(Some(old), new, force).map_err(|e| ApplyError::Degraded(e.to_string()))?;
    let plan = disruption.plan(&diff).map_err(|e| ApplyError::Degraded(e.to_string()))?;
    let os_changes = [
        (diff.os_update, "Upgrading OS"),
        (diff.extensions, "Installing extensions"),
        (diff.kernel_type, "Changing kernel type"),
        (diff.kargs, "Changing kernel arguments"),
    ];
    Ok(Checked {
        plan,
        os: diff.os_update || diff.extensions || diff.kernel_type,
        image: diff.os_update,
        os_changes: os_changes.iter().filter(|(changed, _)| *changed).map(|(_, what)| *what).collect(),
        files: diff.passwd || !diff.files.is_empty(),
        pull_files: [&diff.files.added, &diff.files.removed, &diff.files.changed]
            .into_iter()
            .flatten()
            .any(|path| mco_os::image::pulls_with(path)),
    })
}

/// Upstream's events for an update applied without a reboot: each service reloaded or
/// restarted, or that nothing was needed.
fn post_action_events(plan: &mco_disruption::Plan) -> Vec<(&'static str, String)> {
    let events: Vec<(&'static str, String)> = plan
        .actions
        .iter()
        .filter_map(|action| match (&action.reload, &action.restart) {
            (Some(s), _) => Some((
                "ServiceReload",
                format!("Config changes do not require reboot. Service {} was reloaded.", s.service_name),
            )),
            (_, Some(s)) => Some((
                "ServiceRestart",
                format!("Config changes do not require reboot. Service {} was restarted.", s.service_name),
            )),
            _ => None,
        })
        .collect();
    if events.is_empty() { vec![("SkipReboot", "Config changes do not require reboot.".to_string())] } else { events }
}

fn name_of(mc: &MachineConfig) -> &str {
    mc.metadata.name.as_deref().unwrap_or("")
}

/// Runs `f` on the blocking pool (the engine does file and command IO).
async fn blocking<T: Send + 'static>(node: &Arc<Node>, f: impl FnOnce(&Node) -> T + Send + 'static) -> T {
    let node = node.clone();
    match tokio::task::spawn_blocking(move || f(&node)).await {
        Ok(value) => value,
        Err(e) => std::panic::resume_unwind(e.into_panic()),
    }
}

/// The seed annotations, if the server left them.
fn read_seed(root: &std::path::Path) -> anyhow::Result<Option<BTreeMap<String, String>>> {
    let path = host_path_followed(root, state::NODE_ANNOTATIONS)?;
    match std::fs::read(&path) {
        Ok(bytes) => Ok(Some(
            serde_json::from_slice(&bytes)
                .map_err(|e| anyhow::anyhow!("{}: not a JSON object of strings: {e}", state::NODE_ANNOTATIONS))?,
        )),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(anyhow::Error::new(e).context(format!("reading {}", path.display()))),
    }
}
