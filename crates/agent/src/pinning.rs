//! The IO shell of PinnedImageSets on a node (upstream's `PinnedImageSetManager`): watches the
//! pools, the sets and the Node; pulls the images of the node's sets through the CRI with the
//! node's pull secret, pins them in containerd once all are there, unpins what no set wants any
//! more, and reports on the node's MachineConfigNode (`PinnedImageSetsProgressing`,
//! `PinnedImageSetsDegraded`, `status.pinnedImageSets`).

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context as _;
use futures::{StreamExt as _, TryStreamExt as _};
use k8s_openapi::api::core::v1::Node;
use kube::api::ListParams;
use kube::runtime::{WatchStreamExt as _, watcher};
use kube::{Api, Client, ResourceExt as _};
use mco_api::{MachineConfigNode, MachineConfigPool, PinnedImageSet};
use mco_cri::{CONTAINERD_SOCKET, Runtime, auth};
use mco_daemon::fsutil::host_path;
use mco_mcn::{Recorder, Step};

use crate::backoff::Backoff;
use crate::pinned_images::{self, Outcome, SetGeneration, Wanted};

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

/// Runs until the watches end (they retry errors, so: forever). `client` reads the pools and
/// sets; `node_client` (the node's own credentials) reads the Node and writes its
/// MachineConfigNode.
pub async fn run(client: Client, node_client: Client, settings: Settings) {
    let by_name = watcher::Config::default().fields(&format!("metadata.name={}", settings.node_name));
    let triggers = futures::stream::select_all([
        watcher(Api::<MachineConfigPool>::all(client.clone()), watcher::Config::default())
            .default_backoff()
            .map(|_| ())
            .boxed(),
        watcher(Api::<PinnedImageSet>::all(client.clone()), watcher::Config::default())
            .default_backoff()
            .map(|_| ())
            .boxed(),
        watcher(Api::<Node>::all(node_client.clone()), by_name).default_backoff().map(|_| ()).boxed(),
    ]);
    let mut triggers = std::pin::pin!(triggers);
    let recorder = Recorder::new(node_client.clone());
    let mut backoff = Backoff::new(Duration::from_secs(1), Duration::from_secs(60));
    // The sets last pulled and pinned: a change of these syncs at once, the same ones wait for the recheck.
    let mut settled: Option<Vec<SetGeneration>> = None;
    let mut delay = Duration::ZERO;
    loop {
        tokio::select! {
            event = triggers.next() => if event.is_none() { return },
            () = tokio::time::sleep(delay) => settled = None,
        }
        // Take every event that is already there: one sync for a burst.
        while let Some(Some(_)) = futures::FutureExt::now_or_never(triggers.next()) {}
        match sync(&client, &node_client, &recorder, &settings, settled.as_deref()).await {
            Ok(sets) => {
                backoff.reset();
                settled = sets;
                delay = settings.recheck;
            }
            Err(e) => {
                settled = None;
                delay = backoff.failed();
                tracing::warn!(node = %settings.node_name, "pinned image sets: {e:#}; retrying in {delay:?}");
            }
        }
    }
}

/// One sync; returns the sets now pulled and pinned (`None`: the node is in no pool).
async fn sync(
    client: &Client,
    node_client: &Client,
    recorder: &Recorder,
    settings: &Settings,
    settled: Option<&[SetGeneration]>,
) -> anyhow::Result<Option<Vec<SetGeneration>>> {
    let name = &settings.node_name;
    let node = Api::<Node>::all(node_client.clone()).get(name).await.with_context(|| format!("reading Node {name}"))?;
    let pools = Api::<MachineConfigPool>::all(client.clone())
        .list(&ListParams::default())
        .await
        .context("listing MachineConfigPools")?
        .items;
    let node_pools = mco_rollout::pools_for_node(&node, &pools)?;
    if node_pools.is_empty() {
        return Ok(None);
    }
    let sets = Api::<PinnedImageSet>::all(client.clone())
        .list(&ListParams::default())
        .await
        .context("listing PinnedImageSets")?;
    let wanted = pinned_images::wanted(&node_pools, &sets.items);
    if settled == Some(wanted.sets.as_slice()) {
        return Ok(Some(wanted.sets));
    }
    let mcn = Api::<MachineConfigNode>::all(node_client.clone())
        .get_opt(name)
        .await
        .with_context(|| format!("reading MachineConfigNode {name}"))?;
    let previous = mcn.and_then(|m| m.status?.pinned_image_sets).unwrap_or_default();
    let socket = host_path(&settings.root, CONTAINERD_SOCKET);
    if wanted.sets.is_empty() && previous.is_empty() && !socket.exists() {
        // Nothing asked, nothing reported, and no containerd to have pinned anything.
        return Ok(Some(Vec::new()));
    }
    let annotations = node.annotations().clone();
    let statuses = |outcome| pinned_images::set_statuses(&wanted.sets, &previous, outcome);
    let prefetched = async {
        let runtime = Runtime::connect(&socket).await?;
        let changes = changes(&runtime, &wanted).await?;
        if changes.is_empty() {
            return Ok::<_, anyhow::Error>(false);
        }
        recorder.record_or_log(name, &annotations, &Step::prefetching(name, statuses(Outcome::Pulling))).await;
        tokio::time::timeout(settings.timeout, apply(&runtime, settings, &node, &wanted, changes)).await.map_err(
            |_| anyhow::anyhow!("requeue: prefetching images incomplete after timeout: {:?}", settings.timeout),
        )??;
        Ok(true)
    };
    match prefetched.await {
        // Already so: reported only if the MachineConfigNode does not say it yet.
        Ok(false) if previous == statuses(Outcome::Done) => Ok(Some(wanted.sets)),
        Ok(_) => {
            let recorded = recorder.record(name, &annotations, &Step::prefetched(statuses(Outcome::Done))).await?;
            recorder.record_or_log(name, &annotations, &Step::prefetch_healthy()).await;
            tracing::info!(node = %name, sets = ?wanted.sets, "pinned image sets pulled and pinned");
            // Not recorded (no MachineConfigNode yet): settled only once it is.
            Ok(recorded.then_some(wanted.sets))
        }
        Err(e) => {
            let error = format!("{e:#}");
            recorder.record_or_log(name, &annotations, &Step::prefetch_failed(statuses(Outcome::Failed(&error)))).await;
            Err(e)
        }
    }
}

/// What the runtime lacks for `wanted`.
async fn changes(runtime: &Runtime, wanted: &Wanted) -> anyhow::Result<pinned_images::Changes> {
    let mut present = Vec::new();
    for image in &wanted.images {
        if let Some(found) = runtime.image(image).await? {
            present.push((image.clone(), found.pinned));
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
        let secret_path = host_path(&settings.root, PULL_SECRET);
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
    let wanted_images: BTreeSet<&String> = wanted.images.iter().collect();
    for image in changes.unpin.iter().filter(|i| !wanted_images.contains(i)) {
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
            Ok(_) => return Ok(()),
            Err(e) if tries >= PULL_TRIES => {
                return Err(anyhow::anyhow!("failed to pull image {image:?} ({tries} tries): {e:#}"));
            }
            Err(e) => tracing::debug!(image, "pull failed, trying again: {e:#}"),
        }
        tokio::time::sleep(delay).await;
        delay = (delay * 2).min(Duration::from_secs(10));
    }
}
