//! Reads and writes MachineConfigNodes. Writes are server-side applies under upstream's field
//! manager, so the daemon's status and the controller's spec never overwrite each other.

use std::collections::{BTreeMap, BTreeSet};

use anyhow::Context as _;
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Api, Client, ResourceExt as _};
use mco_api::MachineConfigNode;
use serde_json::json;

use crate::progress::{self, Step};

/// Upstream's field manager for MachineConfigNode writes.
pub const FIELD_MANAGER: &str = "machine-config-operator";
/// Status writes that conflict with another writer before one is given up.
const CONFLICT_RETRIES: usize = 5;

fn apply_params() -> PatchParams {
    PatchParams::apply(FIELD_MANAGER).force()
}

/// Records update steps on MachineConfigNodes.
#[derive(Clone)]
pub struct Recorder {
    api: Api<MachineConfigNode>,
}

impl Recorder {
    pub fn new(client: Client) -> Self {
        Recorder { api: Api::all(client) }
    }

    /// Sets `step`'s conditions on `node`'s MachineConfigNode; `annotations` are the Node's as
    /// they are now. A Node without a MachineConfigNode (the controller has not made it yet, or
    /// the node is in no pool) is skipped: the next step's write brings the status up to date.
    /// The write is conditional on the status it was computed from: the daemon and the drain
    /// controller write the same object, and neither may undo the other's condition (upstream's
    /// writes are not conditional). A conflict is read and computed again. Returns whether the
    /// object holds the step now (false: there is no MachineConfigNode).
    pub async fn record(
        &self,
        node: &str,
        annotations: &BTreeMap<String, String>,
        step: &Step,
    ) -> anyhow::Result<bool> {
        for _ in 0..CONFLICT_RETRIES {
            let Some(mcn) =
                self.api.get_opt(node).await.with_context(|| format!("reading MachineConfigNode {node}"))?
            else {
                tracing::debug!(node, phase = step.parent.kind, "no MachineConfigNode yet; condition not recorded");
                return Ok(false);
            };
            let now = Time(Timestamp::now());
            let generation = mcn.metadata.generation.unwrap_or(0);
            let desired = &mcn.spec.config_version.desired;
            let Some(status) = progress::next_status(mcn.status.as_ref(), generation, desired, annotations, step, &now)
            else {
                return Ok(true);
            };
            let patch = json!({
                "apiVersion": "machineconfiguration.openshift.io/v1",
                "kind": "MachineConfigNode",
                "metadata": {"resourceVersion": mcn.metadata.resource_version},
                "status": status,
            });
            match self.api.patch_status(node, &apply_params(), &Patch::Apply(&patch)).await {
                Ok(_) => {
                    tracing::debug!(node, phase = step.parent.kind, status = step.parent.status.as_str(), "recorded");
                    return Ok(true);
                }
                Err(kube::Error::Api(e)) if e.code == 409 => continue,
                Err(e) => return Err(e).with_context(|| format!("writing the status of MachineConfigNode {node}")),
            }
        }
        anyhow::bail!("MachineConfigNode {node} changed under {CONFLICT_RETRIES} writes in a row")
    }

    /// Records `step`, logging a failure instead of returning it: progress reports never hold an
    /// update back (as upstream, which logs them too). Returns whether the object holds the step.
    pub async fn record_or_log(&self, node: &str, annotations: &BTreeMap<String, String>, step: &Step) -> bool {
        match self.record(node, annotations, step).await {
            Ok(recorded) => recorded,
            Err(e) => {
                tracing::warn!(node, phase = step.parent.kind, "MachineConfigNode condition not recorded: {e:#}");
                false
            }
        }
    }

    /// Creates or updates the spec of the MachineConfigNode of `node`, a member of `pool`.
    pub async fn ensure_spec(&self, node: &Node, pool: &str) -> anyhow::Result<()> {
        let name = node.name_any();
        let spec = progress::spec_for(&name, pool, node.annotations());
        let existing = self.api.get_opt(&name).await.with_context(|| format!("reading MachineConfigNode {name}"))?;
        match existing {
            Some(mcn) if mcn.spec == spec => Ok(()),
            Some(_) => {
                let patch = json!({
                    "apiVersion": "machineconfiguration.openshift.io/v1",
                    "kind": "MachineConfigNode",
                    "spec": spec,
                });
                self.api
                    .patch(&name, &apply_params(), &Patch::Apply(&patch))
                    .await
                    .with_context(|| format!("updating the spec of MachineConfigNode {name}"))?;
                Ok(())
            }
            None => {
                let mut mcn = MachineConfigNode::new(&name, spec);
                let uid = node.uid().unwrap_or_default();
                mcn.metadata.owner_references = Some(vec![progress::owner_reference(&name, &uid)]);
                let params = PostParams { field_manager: Some(FIELD_MANAGER.to_string()), ..Default::default() };
                match self.api.create(&params, &mcn).await {
                    Ok(_) => {
                        tracing::info!(node = %name, pool, "created its MachineConfigNode");
                        Ok(())
                    }
                    // Made meanwhile (by another replica before it lost its lease).
                    Err(kube::Error::Api(e)) if e.code == 409 => Ok(()),
                    Err(e) => Err(e).with_context(|| format!("creating MachineConfigNode {name}")),
                }
            }
        }
    }

    /// Deletes the MachineConfigNodes of Nodes that no longer exist. The garbage collector does
    /// the same through the owner reference; this covers clusters without one and objects made
    /// before the reference was set.
    pub async fn remove_orphans(&self, nodes: &BTreeSet<String>) -> anyhow::Result<()> {
        let all = self.api.list(&ListParams::default()).await.context("listing MachineConfigNodes")?;
        for mcn in all.items.iter().filter(|mcn| !nodes.contains(&mcn.name_any())) {
            self.delete(&mcn.name_any()).await?;
        }
        Ok(())
    }

    /// Deletes the MachineConfigNode of `node`, a Node that is gone (nothing if there is none).
    pub async fn delete(&self, node: &str) -> anyhow::Result<()> {
        match self.api.delete(node, &DeleteParams::default()).await {
            Ok(_) => {
                tracing::info!(node, "deleted the MachineConfigNode of a Node that is gone");
                Ok(())
            }
            Err(kube::Error::Api(e)) if e.code == 404 => Ok(()),
            Err(e) => Err(e).with_context(|| format!("deleting MachineConfigNode {node}")),
        }
    }
}
