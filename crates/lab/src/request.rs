//! Adding a node to a running lab (`mco lab add-node`). The command writes a request file into
//! the state directory's `requests/`; at its next tick the supervisor takes it, records the node
//! as pending in the state file (then deletes the request), provisions the node while it goes on
//! looking after the others, and records whether it joined or why not. The command follows the
//! state file. Requests are written atomically (temp file + rename), so a half-written one is
//! never read.

use std::path::{Path, PathBuf};

use anyhow::Context as _;
use fn_error_context::context;
use serde::{Deserialize, Serialize};

use crate::layout::Layout;
use crate::state::LabState;

/// Which boot image a new node is installed from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum BootImage {
    /// The lab's boot image ([`crate::images::BOOT_VERSION`]).
    Current,
    /// A boot image too old for boot image skew enforcement ([`crate::images::OLD_BOOT_VERSION`]),
    /// built when first asked for.
    Old,
}

/// One node to add.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AddNode {
    pub name: String,
    pub pool: String,
    pub boot_image: BootImage,
    /// Whether the node's stub tells the server its boot image version.
    pub version_header: bool,
}

/// Why a request cannot be carried out (pure): the name must be a DNS label no node of the lab
/// has, except one that did not join (it is provisioned again from scratch); the pool a DNS label
/// too (a pool of the cluster: the server refuses the node's first boot otherwise).
pub fn check(request: &AddNode, state: &LabState) -> Result<(), String> {
    let name = &request.name;
    if !is_dns_label(name) {
        return Err(format!(
            "node name {name:?} is not a DNS label (lowercase letters, digits and '-', at most 63, no '-' at either end)"
        ));
    }
    if !is_dns_label(&request.pool) {
        return Err(format!("pool {:?} is not a DNS label, so no pool's name", request.pool));
    }
    if state.nodes.contains(name) {
        return Err(format!("node {name} already joined the lab"));
    }
    if state.pending.contains(name) {
        return Err(format!("node {name} is being added already"));
    }
    Ok(())
}

fn is_dns_label(text: &str) -> bool {
    let label_char = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-';
    !text.is_empty()
        && text.len() <= 63
        && text.chars().all(label_char)
        && !text.starts_with('-')
        && !text.ends_with('-')
}

/// The first `<pool>-<n>` no node of the lab has.
pub fn next_name(pool: &str, state: &LabState) -> String {
    (0..).map(|i| format!("{pool}-{i}")).find(|name| !state.knows(name)).expect("an unused index")
}

fn request_file(layout: &Layout, name: &str) -> PathBuf {
    layout.requests().join(format!("{name}.json"))
}

/// Hands `request` to the supervisor.
#[context("Requesting node {}", request.name)]
pub fn submit(layout: &Layout, request: &AddNode) -> anyhow::Result<()> {
    let path = request_file(layout, &request.name);
    if path.exists() {
        anyhow::bail!("a request for node {} is already waiting ({})", request.name, path.display());
    }
    std::fs::create_dir_all(layout.requests())?;
    let tmp = path.with_extension("json.tmp");
    std::fs::write(&tmp, serde_json::to_vec_pretty(request)?)?;
    std::fs::rename(&tmp, &path)?;
    Ok(())
}

/// Whether the request for `name` is still waiting to be taken.
pub fn waiting(layout: &Layout, name: &str) -> bool {
    request_file(layout, name).exists()
}

/// The waiting requests, each with its file (to delete once the request is recorded); a file
/// that is not a request is an error naming it.
pub fn waiting_requests(layout: &Layout) -> Vec<(PathBuf, anyhow::Result<AddNode>)> {
    let Ok(entries) = std::fs::read_dir(layout.requests()) else { return Vec::new() };
    let mut requests: Vec<(PathBuf, anyhow::Result<AddNode>)> = entries
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|path| path.extension().is_some_and(|e| e == "json"))
        .map(|path| {
            let request = read(&path);
            (path, request)
        })
        .collect();
    requests.sort_by(|a, b| a.0.cmp(&b.0));
    requests
}

fn read(path: &Path) -> anyhow::Result<AddNode> {
    let bytes = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    serde_json::from_slice(&bytes).with_context(|| format!("{}: not a node request", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::{NodeReason, Phase};

    fn state() -> LabState {
        LabState {
            phase: Phase::Ready,
            message: String::new(),
            kubeconfig: PathBuf::new(),
            platform: Default::default(),
            server: None,
            registry: None,
            signatures: None,
            prometheus: None,
            os_image: None,
            nodes: vec!["worker-0".into(), "worker-2".into()],
            pending: vec!["worker-1".into()],
            not_joined: vec![NodeReason { name: "worker-3".into(), reason: "refused".into() }],
            down: vec![],
            pools: Default::default(),
            roots: Default::default(),
        }
    }

    fn request(name: &str, pool: &str) -> AddNode {
        AddNode { name: name.into(), pool: pool.into(), boot_image: BootImage::Old, version_header: true }
    }

    #[test]
    fn checks_names_and_pools() {
        let cases = [
            ("worker-4", "worker", Ok(())),
            ("worker-3", "worker", Ok(())),
            ("master-9", "master", Ok(())),
            ("worker-0", "worker", Err("node worker-0 already joined the lab")),
            ("worker-1", "worker", Err("node worker-1 is being added already")),
            ("infra-0", "infra", Ok(())),
            ("worker-4", "Infra", Err("pool \"Infra\" is not a DNS label")),
            ("Worker", "worker", Err("node name \"Worker\" is not a DNS label")),
            ("-a", "worker", Err("is not a DNS label")),
            ("", "worker", Err("is not a DNS label")),
            ("a/b", "worker", Err("is not a DNS label")),
        ];
        for (name, pool, want) in cases {
            match (check(&request(name, pool), &state()), want) {
                (Ok(()), Ok(())) => {}
                (Err(got), Err(want)) => assert!(got.contains(want), "{name}: {got}"),
                (got, want) => panic!("{name} {pool}: {got:?}, want {want:?}"),
            }
        }
    }

    #[test]
    fn names_the_next_free_index() {
        assert_eq!(next_name("worker", &state()), "worker-4");
        assert_eq!(next_name("master", &state()), "master-0");
    }

    #[test]
    fn requests_round_trip_through_files() {
        let dir = tempfile::tempdir().unwrap();
        let layout = Layout::new(dir.path());
        assert!(waiting_requests(&layout).is_empty());
        submit(&layout, &request("worker-4", "worker")).unwrap();
        assert!(waiting(&layout, "worker-4"));
        let again = format!("{:#}", submit(&layout, &request("worker-4", "worker")).unwrap_err());
        assert!(again.contains("already waiting"), "{again}");
        std::fs::write(layout.requests().join("junk.json"), "{}").unwrap();
        let requests = waiting_requests(&layout);
        assert_eq!(requests.len(), 2);
        assert!(format!("{:#}", requests[0].1.as_ref().unwrap_err()).contains("junk.json: not a node request"));
        assert_eq!(requests[1].1.as_ref().unwrap(), &request("worker-4", "worker"));
    }
}
