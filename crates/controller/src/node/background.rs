//! Node writes that no capacity decision depends on (the UpdateInProgress taint, the topology
//! annotation), made in the background so that targeting never waits behind them: a new rollout
//! taints every waiting node, thousands of writes, while the next Done must be answered at once.
//!
//! A sync hands its changes to [`BackgroundWrites::submit`]; a change already on its way (queued,
//! or written but not yet in the node cache) is not queued again, so syncs that run while the
//! writes are in flight do not pile up duplicates. At most [`super::controller::Options::background_writes`]
//! writes are in flight; a failed write is retried on the node as the cache then shows it, for as
//! long as no later sync has replaced or cancelled the change.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use kube::api::Patch;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Api, ResourceExt as _};
use mco_rollout::plan::NodeChange;
use tokio::sync::Semaphore;

use super::node_patch;
use crate::patch_params;

/// Wait before retrying a write that conflicted: the node changed and the cache is catching up.
const CONFLICT_DELAY: Duration = Duration::from_millis(100);

/// A change handed to the background, until the node cache shows it written.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Pending {
    change: NodeChange,
    /// Identifies this submission: a write whose ticket is no longer the node's was replaced or
    /// cancelled and stops.
    ticket: u64,
    /// The resourceVersion the write returned, once written.
    written: Option<u64>,
}

/// Whether a change a sync wants is already on its way: the same change queued, or written at a
/// version the cache (at `cached`) does not show yet. Once the cache shows the write, a sync that
/// still wants the change wants it again (someone undid it).
fn on_its_way(pending: Option<&Pending>, change: &NodeChange, cached: Option<u64>) -> bool {
    pending.is_some_and(|p| {
        p.change == *change && p.written.is_none_or(|written| cached.is_none_or(|cached| cached < written))
    })
}

/// Whether a pending entry can be dropped: its write is in the cache, or the node is gone.
fn settled(pending: &Pending, cached: Option<u64>) -> bool {
    match (pending.written, cached) {
        (_, None) => true,
        (Some(written), Some(cached)) => cached >= written,
        (None, Some(_)) => false,
    }
}

fn version(node: &Node) -> Option<u64> {
    node.resource_version()?.parse().ok()
}

pub(crate) struct BackgroundWrites {
    api: Api<Node>,
    nodes: Store<Node>,
    pending: Mutex<HashMap<String, Pending>>,
    permits: Semaphore,
    next_ticket: AtomicU64,
    retry_delay: Duration,
}

impl BackgroundWrites {
    pub(crate) fn new(api: Api<Node>, nodes: Store<Node>, concurrent_writes: usize, retry_delay: Duration) -> Self {
        BackgroundWrites {
            api,
            nodes,
            pending: Mutex::default(),
            permits: Semaphore::new(concurrent_writes.max(1)),
            next_ticket: AtomicU64::new(0),
            retry_delay,
        }
    }

    fn pending(&self) -> std::sync::MutexGuard<'_, HashMap<String, Pending>> {
        self.pending.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn cached(&self, node: &str) -> Option<Arc<Node>> {
        self.nodes.get(&ObjectRef::new(node))
    }

    /// Queues each change not already on its way; returns how many were queued.
    pub(crate) fn submit(self: &Arc<Self>, changes: Vec<(String, NodeChange)>) -> usize {
        let mut queued = Vec::new();
        {
            let mut pending = self.pending();
            pending.retain(|node, p| !settled(p, self.cached(node).as_deref().and_then(version)));
            for (node, change) in changes {
                let cached = self.cached(&node).as_deref().and_then(version);
                if on_its_way(pending.get(&node), &change, cached) {
                    continue;
                }
                let ticket = self.next_ticket.fetch_add(1, Ordering::Relaxed);
                pending.insert(node.clone(), Pending { change, ticket, written: None });
                queued.push((node, ticket));
            }
        }
        let count = queued.len();
        for (node, ticket) in queued {
            tokio::spawn(Arc::clone(self).write(node, ticket));
        }
        count
    }

    /// Cancels what is pending for these nodes: the sync writes them itself, and a background
    /// write planned before must not undo that.
    pub(crate) fn cancel<'a>(&self, nodes: impl IntoIterator<Item = &'a String>) {
        let mut pending = self.pending();
        for node in nodes {
            pending.remove(node);
        }
    }

    /// The change of `ticket`, while it is still the node's current submission.
    fn current_change(&self, node: &str, ticket: u64) -> Option<NodeChange> {
        self.pending().get(node).filter(|p| p.ticket == ticket && p.written.is_none()).map(|p| p.change.clone())
    }

    fn finish(&self, node: &str, ticket: u64, written: Option<u64>) {
        let mut pending = self.pending();
        match (pending.get_mut(node), written) {
            (Some(p), Some(version)) if p.ticket == ticket => p.written = Some(version),
            (Some(p), None) if p.ticket == ticket => {
                pending.remove(node);
            }
            _ => {}
        }
    }

    /// Writes one change, on the node as the cache shows it, until it is written or no longer
    /// wanted (replaced, cancelled, the node gone).
    async fn write(self: Arc<Self>, node: String, ticket: u64) {
        let Ok(_permit) = self.permits.acquire().await else { return };
        loop {
            let Some(change) = self.current_change(&node, ticket) else { return };
            let Some(current) = self.cached(&node) else { return self.finish(&node, ticket, None) };
            let Some(patch) = node_patch(&current, &change) else { return self.finish(&node, ticket, None) };
            let delay = match self.api.patch(&node, &patch_params(), &Patch::Merge(&patch)).await {
                Ok(updated) => return self.finish(&node, ticket, Some(version(&updated).unwrap_or(0))),
                Err(kube::Error::Api(status)) if status.is_not_found() => return self.finish(&node, ticket, None),
                Err(kube::Error::Api(status)) if status.is_conflict() => CONFLICT_DELAY,
                Err(e) => {
                    tracing::warn!(node = %node, "updating node {node} (retrying in {:?}): {e}", self.retry_delay);
                    self.retry_delay
                }
            };
            tokio::time::sleep(delay).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn taint(on: bool) -> NodeChange {
        NodeChange { update_taint: Some(on), ..NodeChange::default() }
    }

    fn pending(change: NodeChange, written: Option<u64>) -> Pending {
        Pending { change, ticket: 1, written }
    }

    #[test]
    fn changes_on_their_way_are_not_queued_again() {
        let cases = [
            ("nothing pending", None, taint(true), Some(10), false),
            ("the same change queued", Some(pending(taint(true), None)), taint(true), Some(10), true),
            ("written, not yet in the cache", Some(pending(taint(true), Some(12))), taint(true), Some(10), true),
            (
                "written and in the cache: wanted again",
                Some(pending(taint(true), Some(12))),
                taint(true),
                Some(12),
                false,
            ),
            ("another change queued", Some(pending(taint(true), None)), taint(false), Some(10), false),
            ("written, node no longer cached", Some(pending(taint(true), Some(12))), taint(true), None, true),
        ];
        for (what, pending, change, cached, want) in cases {
            assert_eq!(on_its_way(pending.as_ref(), &change, cached), want, "{what}");
        }
    }

    #[test]
    fn settled_entries() {
        let cases = [
            ("queued", pending(taint(true), None), Some(10), false),
            ("written, cache behind", pending(taint(true), Some(12)), Some(11), false),
            ("written, cache caught up", pending(taint(true), Some(12)), Some(12), true),
            ("node gone", pending(taint(true), None), None, true),
        ];
        for (what, pending, cached, want) in cases {
            assert_eq!(settled(&pending, cached), want, "{what}");
        }
    }
}
