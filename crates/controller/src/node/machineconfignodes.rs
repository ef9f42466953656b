//! The MachineConfigNode of every Node in a pool (upstream's operator and node controller keep
//! them): created with the Node as its owner, its spec kept current (pool, desired config), and
//! deleted once the Node is gone. The daemon and the drain controller write the status.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use k8s_openapi::api::core::v1::Node;
use kube::{Client, ResourceExt as _};
use mco_mcn::Recorder;
use mco_mcn::progress::spec_for;
use tokio::sync::Mutex;

pub(crate) struct MachineConfigNodes {
    recorder: Recorder,
    /// The spec last written per node, so that a sync writes only what changed.
    written: Mutex<HashMap<String, mco_api::MachineConfigNodeSpec>>,
    /// The first sync deleted the MachineConfigNodes of Nodes that were gone before we started.
    swept: AtomicBool,
}

impl MachineConfigNodes {
    pub(crate) fn new(client: Client) -> Self {
        MachineConfigNodes { recorder: Recorder::new(client), written: Mutex::default(), swept: AtomicBool::new(false) }
    }

    /// Brings the MachineConfigNodes of `members` (the Nodes of `pool`) up to date, and deletes
    /// those of Nodes that are no longer in `all_nodes`. Failures are logged: they hold no update
    /// back, and the next sync tries again.
    pub(crate) async fn sync(&self, pool: &str, members: &[&Node], all_nodes: &[Arc<Node>]) {
        let existing: BTreeSet<String> = all_nodes.iter().map(|n| n.name_any()).collect();
        if !self.swept.load(Ordering::Relaxed) {
            match self.recorder.remove_orphans(&existing).await {
                Ok(()) => self.swept.store(true, Ordering::Relaxed),
                Err(e) => tracing::warn!("{e:#}"),
            }
        }
        // One sync at a time: two pools' syncs must not write the same node's spec twice.
        let mut written = self.written.lock().await;
        for node in members {
            let name = node.name_any();
            let spec = spec_for(&name, pool, node.annotations());
            if written.get(&name) == Some(&spec) {
                continue;
            }
            match self.recorder.ensure_spec(node, pool).await {
                Ok(()) => {
                    written.insert(name, spec);
                }
                Err(e) => tracing::warn!(node = %name, "{e:#}"),
            }
        }
        let gone: Vec<String> = written.keys().filter(|name| !existing.contains(*name)).cloned().collect();
        for name in gone {
            match self.recorder.delete(&name).await {
                Ok(()) => {
                    written.remove(&name);
                }
                Err(e) => tracing::warn!(node = %name, "{e:#}"),
            }
        }
    }
}
