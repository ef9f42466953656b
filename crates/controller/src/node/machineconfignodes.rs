//! The MachineConfigNode of every Node in a pool (upstream's operator and node controller keep
//! them): created with the Node as its owner, its spec kept current (pool, desired config), and
//! deleted once the Node is gone. The daemon and the drain controller write the status.
//!
//! A background task of the node controller, woken after each pool sync: its API requests never
//! delay a rollout's next target.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use k8s_openapi::api::core::v1::Node;
use kube::runtime::reflector::Store;
use kube::{Client, ResourceExt as _};
use mco_api::{MachineConfigNodeSpec, MachineConfigPool};
use mco_mcn::Recorder;
use mco_mcn::progress::spec_for;
use mco_rollout::nodes_for_pool;
use tokio::sync::Notify;

pub(crate) struct MachineConfigNodes {
    recorder: Recorder,
    nodes: Store<Node>,
    pools: Store<MachineConfigPool>,
    /// The spec last written per node, with the Node's UID (a Node deleted and made again under
    /// its name lost its MachineConfigNode to the garbage collector), so that a sync writes only
    /// what changed.
    written: HashMap<String, (Option<String>, MachineConfigNodeSpec)>,
    /// The first sync deleted the MachineConfigNodes of Nodes that were gone before we started.
    swept: bool,
}

impl MachineConfigNodes {
    pub(crate) fn new(client: Client, nodes: Store<Node>, pools: Store<MachineConfigPool>) -> Self {
        MachineConfigNodes { recorder: Recorder::new(client), nodes, pools, written: HashMap::new(), swept: false }
    }

    /// Syncs every time `wake` is notified (notifications while a sync runs make one more), once
    /// `caches_ready` says the node and pool caches hold their first list.
    pub(crate) async fn run(mut self, wake: Arc<Notify>, mut caches_ready: tokio::sync::watch::Receiver<bool>) {
        if caches_ready.wait_for(|ready| *ready).await.is_err() {
            return;
        }
        loop {
            wake.notified().await;
            self.sync().await;
        }
    }

    /// Brings the MachineConfigNodes of every pool's Nodes up to date and deletes those of Nodes
    /// that are gone. Failures are logged: they hold no update back, and the next sync tries again.
    async fn sync(&mut self) {
        let (nodes, pools) = (self.nodes.state(), self.pools.state());
        let existing: BTreeSet<String> = nodes.iter().map(|n| n.name_any()).collect();
        if !self.swept {
            match self.recorder.remove_orphans(&existing).await {
                Ok(()) => self.swept = true,
                Err(e) => tracing::warn!("{e:#}"),
            }
        }
        for pool in &pools {
            let name = pool.name_any();
            for node in nodes_for_pool(pool, &nodes, &pools) {
                let node_name = node.name_any();
                let written = (node.uid(), spec_for(&node_name, &name, node.annotations()));
                if self.written.get(&node_name) == Some(&written) {
                    continue;
                }
                match self.recorder.ensure_spec(node, &name).await {
                    Ok(()) => {
                        self.written.insert(node_name, written);
                    }
                    Err(e) => tracing::warn!(node = %node_name, "{e:#}"),
                }
            }
        }
        let gone: Vec<String> = self.written.keys().filter(|name| !existing.contains(*name)).cloned().collect();
        for name in gone {
            match self.recorder.delete(&name).await {
                Ok(()) => {
                    self.written.remove(&name);
                }
                Err(e) => tracing::warn!(node = %name, "{e:#}"),
            }
        }
    }
}
