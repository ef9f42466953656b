//! The IO shell of PinnedImageSets on a node (upstream's `PinnedImageSetManager`): watches the
//! pools, the sets and the Node; pulls the images of the node's sets through the CRI with the
//! node's pull secret, pins them in containerd once all are there, unpins what no set wants any
//! more, and reports on the node's MachineConfigNode (`PinnedImageSetsProgressing`,
//! `PinnedImageSetsDegraded`, `status.pinnedImageSets`).

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context as _;
use futures::{StreamExt as _, TryStreamExt as _};
use k8s_openapi::api::core::v1::Node;
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt as _, watcher};
use kube::{Api, Client, ResourceExt as _};
use mco_api::machineconfiguration::machine_config_node_condition::{
    PINNED_IMAGE_SETS_DEGRADED, PINNED_IMAGE_SETS_PROGRESSING,
};
use mco_api::{MachineConfigNode, MachineConfigPool, PinnedImageSet};
use mco_apply::fsutil::host_path_followed;
use mco_cri::{CONTAINERD_SOCKET, Runtime, auth};
use mco_mcn::{Recorder, Step};
use tokio::time::Instant;

use crate::backoff::Backoff;
use crate::pinned_images::{self, Outcome, Present, SetGeneration, Wanted};

/// The node's pull secret, as the kubelet reads it.
pub const PULL_SECRET: &str = "/var/lib/kubelet/config.json";

/// How the node pulls and pins.
#[derive(Debug, Clone)]
pub struct Settings {
    pub node_name: String,
    /// The node's root: its containerd socket and pull secret are read under it.
    pub root: PathBuf,
    /// Upstream's prefetch timeout: a sync that takes longer fails and is tried again.
    pub timeout: Duration,
    /// Pulls at once: upstream's 5, 1 on control-plane nodes.
    pub workers: usize,
    pub min_free_storage: i64,
    /// How often a settled node checks that its images are still there and pinned.
    pub recheck: Duration,
}

impl Settings {
    pub fn new(node_name: String, root: PathBuf) -> Self {
        Settings {
            node_name,
            root,
            timeout: Duration::from_secs(5 * 60),
            workers: 5,
            min_free_storage: pinned_images::MIN_FREE_STORAGE,
            recheck: Duration::from_secs(10 * 60),
        }
    }
}

/// Tries of one pull before it fails (upstream: 5, from 1 s doubling).
const PULL_TRIES: u32 = 5;

struct Context {
    settings: Settings,
    /// The node's own credentials: its Node.
    nodes: Api<Node>,
    /// The daemon's service account: its MachineConfigNode (the mcn-guards policy checks it).
    machine_config_nodes: Api<MachineConfigNode>,
    recorder: Recorder,
    pools: Store<MachineConfigPool>,
    sets: Store<PinnedImageSet>,
}

/// What a sync found.
enum Synced {
    /// The sets were those already pulled and pinned: nothing was checked.
    Unchanged,
    /// The node's images were checked, pulled and pinned for these sets.
    Checked(Wanted),
}

/// Runs until the watches end (they retry errors, so: forever). `client` (the daemon's service
/// account) reads the pools and sets and writes the MachineConfigNode; `node_client` (the node's
/// own credentials) reads the Node.
pub async fn run(client: Client, node_client: Client, settings: Settings) {
    let (pools, pool_writer) = reflector::store();
    let (sets, set_writer) = reflector::store();
    let by_name = watcher::Config::default().fields(&format!("metadata.name={}", settings.node_name));
    let nodes = Api::<Node>::all(node_client);
    let triggers = futures::stream::select_all([
        logged(
            "MachineConfigPools",
            watcher(Api::all(client.clone()), watcher::Config::default()).reflect(pool_writer),
        ),
        logged("PinnedImageSets", watcher(Api::all(client.clone()), watcher::Config::default()).reflect(set_writer)),
        logged("its Node", watcher(nodes.clone(), by_name)),
    ]);
    let mut triggers = std::pin::pin!(triggers);
    let context = Context {
        settings,
        nodes,
        machine_config_nodes: Api::all(client.clone()),
        recorder: Recorder::new(client),
        pools: pools.clone(),
        sets: sets.clone(),
    };
    let name = &context.settings.node_name;
    let ready = async { pools.wait_until_ready().await.is_ok() && sets.wait_until_ready().await.is_ok() };
    // The watches run only while polled: they fill the stores while the first lists are awaited.
    tokio::select! {
        ready = ready => if !ready { return },
        () = async { while triggers.next().await.is_some() {} } => return,
    }
    let mut backoff = Backoff::new(Duration::from_secs(1), Duration::from_secs(60));
    // The sets (and their images) last pulled and pinned: others sync at once, the same ones at
    // the next check.
    let mut settled: Option<Wanted> = None;
    let mut failing = false;
    let mut next_check = Instant::now();
    loop {
        let checking = tokio::select! {
            event = triggers.next() => if event.is_none() { return } else { false },
            () = tokio::time::sleep_until(next_check) => true,
        };
        // Take every event that is already there: one sync for a burst.
        while let Some(Some(_)) = futures::FutureExt::now_or_never(triggers.next()) {}
        if failing && !checking {
            // After a failure the backoff decides when to try again, not the next event.
            continue;
        }
        if checking {
            settled = None;
        }
        match sync(&context, settled.as_ref()).await {
            Ok(Synced::Unchanged) => {}
            Ok(Synced::Checked(wanted)) => {
                backoff.reset();
                failing = false;
                settled = Some(wanted);
                next_check = Instant::now() + context.settings.recheck;
            }
            Err(e) => {
                failing = true;
                settled = None;
                let delay = backoff.failed();
                next_check = Instant::now() + delay;
                tracing::warn!(node = %name, "pinned image sets: {e:#}; retrying in {delay:?}");
            }
        }
    }
}

/// A watch as a trigger, its errors logged (it retries them with backoff).
fn logged<K: std::fmt::Debug + Send + 'static>(
    what: &'static str,
    events: impl futures::Stream<Item = Result<K, watcher::Error>> + Send + 'static,
) -> futures::stream::BoxStream<'static, ()> {
    events
        .default_backoff()
        .map(move |event| {
            if let Err(e) = event {
                tracing::warn!("watching {what}: {e}");
            }
        })
        .boxed()
}

impl Context {
    /// Records `step` on the node's MachineConfigNode with the Node's annotations as they are now
    /// (an update may have moved the node while images were pulled). Returns whether it is there.
    async fn record(&self, step: &Step) -> anyhow::Result<bool> {
        let name = &self.settings.node_name;
        let node = self.nodes.get(name).await.with_context(|| format!("reading Node {name}"))?;
        self.recorder.record(name, node.annotations(), step).await
    }
}

/// One sync against the stores' pools and sets.
async fn sync(context: &Context, settled: Option<&Wanted>) -> anyhow::Result<Synced> {
    let settings = &context.settings;
    let name = &settings.node_name;
    let node = context.nodes.get(name).await.with_context(|| format!("reading Node {name}"))?;
    let pools = context.pools.state();
    let node_pools = mco_rollout::pools_for_node(&node, &pools)?;
    let sets: Vec<PinnedImageSet> = context.sets.state().iter().map(|s| (**s).clone()).collect();
    // A node in no pool pins nothing: what mco pinned there is unpinned.
    let wanted = pinned_images::wanted(&node_pools, &sets);
    if settled == Some(&wanted) {
        return Ok(Synced::Unchanged);
    }
    let mcn = context
        .machine_config_nodes
        .get_opt(name)
        .await
        .with_context(|| format!("reading MachineConfigNode {name}"))?;
    let status = mcn.and_then(|m| m.status);
    let conditions: Vec<_> = status.iter().flat_map(|s| s.conditions.iter().flatten()).cloned().collect();
    let is_true = |kind: &str| conditions.iter().any(|c| c.type_ == kind && c.status == "True");
    // What the MachineConfigNode says beyond the sets: a sync cut short may have left these.
    let unsettled = is_true(PINNED_IMAGE_SETS_DEGRADED) || is_true(PINNED_IMAGE_SETS_PROGRESSING);
    let mut previous = status.and_then(|s| s.pinned_image_sets).unwrap_or_default();
    let socket = host_path_followed(&settings.root, CONTAINERD_SOCKET)?;
    if wanted.sets.is_empty() && previous.is_empty() && !socket.exists() {
        // Nothing asked, nothing reported, and no containerd to have pinned anything.
        return Ok(Synced::Checked(wanted));
    }
    let recreated = pinned_images::recreated(&wanted.sets, &previous);
    if !recreated.is_empty() {
        // Their old entries go first: the API refuses a generation that decreases.
        previous.retain(|p| !recreated.contains(&p.name));
        let others: Vec<SetGeneration> = wanted.sets.iter().filter(|s| !recreated.contains(&s.name)).cloned().collect();
        let statuses = pinned_images::set_statuses(&others, &previous, Outcome::Pulling);
        context.record(&Step::prefetching(name, statuses)).await?;
    }
    let statuses = |outcome| pinned_images::set_statuses(&wanted.sets, &previous, outcome);
    let prefetched = async {
        let runtime = Runtime::connect(&socket).await?;
        let changes = changes(&runtime, &wanted).await?;
        if changes.is_empty() {
            return Ok::<_, anyhow::Error>(false);
        }
        context.record(&Step::prefetching(name, statuses(Outcome::Pulling))).await?;
        apply(&runtime, settings, &node, &wanted, changes).await?;
        Ok(true)
    };
    let prefetched = match tokio::time::timeout(settings.timeout, prefetched).await {
        Ok(result) => result,
        Err(_) => Err(anyhow::anyhow!("requeue: prefetching images incomplete after timeout: {:?}", settings.timeout)),
    };
    match prefetched {
        // Already so, and the MachineConfigNode says it.
        Ok(false) if previous == statuses(Outcome::Done) && !unsettled => Ok(Synced::Checked(wanted)),
        Ok(_) => {
            let recorded = context.record(&Step::prefetched(statuses(Outcome::Done))).await?;
            context.record(&Step::prefetch_healthy()).await?;
            tracing::info!(node = %name, sets = ?wanted.sets, "pinned image sets pulled and pinned");
            // Not recorded (no MachineConfigNode yet): checked again until it is.
            anyhow::ensure!(recorded, "MachineConfigNode {name} does not exist yet");
            Ok(Synced::Checked(wanted))
        }
        Err(e) => {
            let error = format!("{e:#}");
            if let Err(e) = context.record(&Step::prefetch_failed(statuses(Outcome::Failed(&error)))).await {
                tracing::warn!(node = %name, "recording PinnedImageSetsDegraded=True: {e:#}");
            }
            Err(e)
        }
    }
}

/// What the runtime lacks for `wanted`, and what it has pinned for mco that no set wants.
async fn changes(runtime: &Runtime, wanted: &Wanted) -> anyhow::Result<pinned_images::Changes> {
    let mut present = Vec::new();
    for image in &wanted.images {
        if let Some(found) = runtime.image(image).await? {
            let record = runtime.record_name(image).await?.unwrap_or_else(|| image.clone());
            present.push(Present { image: image.clone(), pinned: found.pinned, record });
        }
    }
    Ok(pinned_images::changes(&wanted.images, &present, &runtime.pinned_by_mco().await?))
}

/// Pulls what is missing, then (all there) pins every wanted image and unpins the leftovers.
async fn apply(
    runtime: &Runtime,
    settings: &Settings,
    node: &Node,
    wanted: &Wanted,
    changes: pinned_images::Changes,
) -> anyhow::Result<()> {
    if !changes.pull.is_empty() {
        pinned_images::may_pull(node, settings.min_free_storage).map_err(anyhow::Error::msg)?;
        let secret_path = host_path_followed(&settings.root, PULL_SECRET)?;
        let secret = match std::fs::read_to_string(&secret_path) {
            Ok(text) => Some(text),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => return Err(e).with_context(|| format!("reading {}", secret_path.display())),
        };
        let control_plane = node.labels().contains_key("node-role.kubernetes.io/control-plane")
            || node.labels().contains_key("node-role.kubernetes.io/master");
        let workers = if control_plane { 1 } else { settings.workers.max(1) };
        let secret = secret.as_deref();
        // Owned images: a stream of futures borrowing from an iterator is not `Send` for every lifetime.
        let pulls: Vec<_> =
            changes.pull.into_iter().map(|image| async move { pull(runtime, &image, secret).await }).collect();
        futures::stream::iter(pulls).buffer_unordered(workers).try_collect::<Vec<()>>().await?;
    }
    // Pinned last, once every image is there (upstream: "to allow a window for kubelet to gc
    // images in an emergency").
    for image in &wanted.images {
        if runtime.image(image).await?.is_none() {
            anyhow::bail!("failed to pull image: image removed during sync: {image}");
        }
    }
    for image in &wanted.images {
        runtime.pin(image).await?;
    }
    for image in &changes.unpin {
        runtime.unpin(image).await?;
        tracing::info!(node = %settings.node_name, image, "unpinned: no PinnedImageSet of the node lists it");
    }
    Ok(())
}

async fn pull(runtime: &Runtime, image: &str, secret: Option<&str>) -> anyhow::Result<()> {
    let credentials = match secret {
        Some(secret) => auth::for_image(secret, image).with_context(|| format!("reading {PULL_SECRET}"))?,
        None => None,
    };
    let mut delay = Duration::from_secs(1);
    let mut tries = 0;
    loop {
        tries += 1;
        match runtime.pull(image, credentials.clone()).await {
            Ok(()) => return Ok(()),
            Err(e) if tries >= PULL_TRIES => {
                return Err(anyhow::anyhow!("failed to pull image {image:?} ({tries} tries): {e:#}"));
            }
            Err(e) => tracing::debug!(image, "pull failed, trying again: {e:#}"),
        }
        tokio::time::sleep(delay).await;
        delay = (delay * 2).min(Duration::from_secs(10));
    }
}
