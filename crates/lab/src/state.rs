//! The supervisor's report to `mco lab up` (and anyone else): a JSON file replaced atomically at
//! every phase change.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::Context as _;
use fn_error_context::context;
use serde::{Deserialize, Serialize};

use crate::manifests::Platform;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Phase {
    Starting,
    Ready,
    Failed,
    Stopped,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LabState {
    pub phase: Phase,
    /// What is being done (Starting), or why it failed (Failed).
    pub message: String,
    pub kubeconfig: PathBuf,
    /// What the control plane believes it runs on (`mco lab up --platform`).
    #[serde(default)]
    pub platform: Platform,
    /// `https://127.0.0.1:<port>` of the Machine Config Server, once it runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<String>,
    /// `127.0.0.1:<port>` of the OCI registry, once it runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub registry: Option<String>,
    /// `http://127.0.0.1:<port>` of the signature store, where containers-registries.d(5)'s
    /// `lookaside` reads the signatures written in [`Layout::signatures`](crate::layout::Layout::signatures).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signatures: Option<String>,
    /// `http://127.0.0.1:<port>` of Prometheus (`mco lab up --prometheus`), once it runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prometheus: Option<String>,
    /// Pinned OS image of the pools (the derived node image).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub os_image: Option<String>,
    /// Nodes that joined, in order.
    #[serde(default)]
    pub nodes: Vec<String>,
    /// Nodes being added (`mco lab add-node`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pending: Vec<String>,
    /// Nodes that were added but did not join, and why (e.g. a boot image refused as too old).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub not_joined: Vec<NodeReason>,
    /// Joined nodes whose machine cannot run (e.g. it rebooted into an OS image without a
    /// kubelet), and why: they stay down, as such a machine would.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub down: Vec<NodeReason>,
    /// The pool of every node above.
    #[serde(default)]
    pub pools: BTreeMap<String, String>,
    /// Each running machine's `/` as the lab sees it (`/proc/<its PID 1>/root`), by node.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub roots: BTreeMap<String, PathBuf>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeReason {
    pub name: String,
    pub reason: String,
}

impl LabState {
    /// Whether `name` is a node of this lab in any state.
    pub fn knows(&self, name: &str) -> bool {
        self.nodes.iter().chain(&self.pending).any(|n| n == name) || self.not_joined.iter().any(|n| n.name == name)
    }
}

#[context("Writing {}", path.display())]
pub fn write(path: &Path, state: &LabState) -> anyhow::Result<()> {
    let tmp = path.with_extension("json.tmp");
    std::fs::write(&tmp, serde_json::to_vec_pretty(state)?)?;
    std::fs::rename(&tmp, path)?;
    Ok(())
}

/// `None` when no supervisor has written one yet.
pub fn read(path: &Path) -> anyhow::Result<Option<LabState>> {
    match std::fs::read(path) {
        Ok(bytes) => serde_json::from_slice(&bytes).map(Some).with_context(|| format!("parsing {}", path.display())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e).with_context(|| format!("reading {}", path.display())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_missing_is_none() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.json");
        assert_eq!(read(&path).unwrap(), None);
        let state = LabState {
            phase: Phase::Ready,
            message: "ready".into(),
            kubeconfig: dir.path().join("kubeconfig"),
            platform: Platform::Gcp,
            server: Some("https://127.0.0.1:1".into()),
            registry: None,
            signatures: None,
            prometheus: None,
            os_image: None,
            nodes: vec!["worker-0".into()],
            pending: vec!["worker-1".into()],
            not_joined: vec![NodeReason { name: "worker-2".into(), reason: "boot image is too old".into() }],
            down: vec![NodeReason { name: "worker-0".into(), reason: "no kubelet".into() }],
            pools: ["worker-0", "worker-1", "worker-2"].map(|n| (n.to_string(), "worker".to_string())).into(),
            roots: Default::default(),
        };
        write(&path, &state).unwrap();
        assert_eq!(read(&path).unwrap(), Some(state.clone()));
        assert!(["worker-0", "worker-1", "worker-2"].iter().all(|n| state.knows(n)));
        assert!(!state.knows("worker-3"));
        // A state written before the lab had platforms is a lab without a cloud.
        let mut older = serde_json::to_value(&state).unwrap();
        assert_eq!(older.as_object_mut().unwrap().remove("platform"), Some(serde_json::json!("gcp")));
        std::fs::write(&path, older.to_string()).unwrap();
        assert_eq!(read(&path).unwrap().unwrap().platform, Platform::None);
        std::fs::write(&path, "{").unwrap();
        assert!(format!("{:#}", read(&path).unwrap_err()).contains("parsing"));
    }
}
