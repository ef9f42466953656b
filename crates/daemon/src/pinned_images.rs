//! Which images a node pulls and pins for its pools' PinnedImageSets, whether it may, and what
//! its MachineConfigNode says about each set (pure; [`crate::pinning`] does the IO).

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::Node;
use kube::ResourceExt as _;
use mco_api::quantity::Quantity;
use mco_api::{MachineConfigNodeStatusPinnedImageSet, MachineConfigPool, PinnedImageSet};

/// Upstream's `MinFreeStorageAfterPrefetch`: a node pulls only while its allocatable ephemeral
/// storage is at least this (16 GiB).
pub const MIN_FREE_STORAGE: i64 = 16 << 30;
/// The longest `lastFailedGenerationError` the API takes.
const MAX_ERROR_LEN: usize = 32768;

/// One PinnedImageSet a node's pools name, at its generation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SetGeneration {
    pub name: String,
    pub generation: i32,
}

/// What a node's pools ask of it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Wanted {
    /// Each set once, in the order of the pools (primary first) and their lists.
    pub sets: Vec<SetGeneration>,
    /// Their images, sorted and unique.
    pub images: Vec<String>,
}

/// The sets `pools` (the node's, primary first) name and their images. A named set that does not
/// exist is left out: the PinnedImageSet controller takes it out of the pool's list.
pub fn wanted(pools: &[&MachineConfigPool], sets: &[PinnedImageSet]) -> Wanted {
    let mut wanted = Wanted::default();
    let mut images = BTreeSet::new();
    let names = pools.iter().flat_map(|pool| pool.spec.pinned_image_sets.iter().flatten()).map(|r| &r.name);
    for name in names {
        if wanted.sets.iter().any(|s| &s.name == name) {
            continue;
        }
        let Some(set) = sets.iter().find(|s| &s.name_any() == name) else { continue };
        let generation = i32::try_from(set.metadata.generation.unwrap_or(1)).unwrap_or(i32::MAX);
        wanted.sets.push(SetGeneration { name: name.clone(), generation });
        images.extend(set.spec.pinned_images.iter().map(|i| i.name.clone()));
    }
    wanted.images = images.into_iter().collect();
    wanted
}

/// What the runtime must do for `wanted` images, given those it has and those mco pinned.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Changes {
    /// Wanted images the runtime does not have.
    pub pull: Vec<String>,
    /// Wanted images it has but does not report pinned.
    pub pin: Vec<String>,
    /// Images mco pinned that no set wants any more.
    pub unpin: Vec<String>,
}

impl Changes {
    pub fn is_empty(&self) -> bool {
        self.pull.is_empty() && self.pin.is_empty() && self.unpin.is_empty()
    }
}

/// A wanted image the runtime has.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Present {
    pub image: String,
    pub pinned: bool,
    /// The name of the runtime's record of it, which carries the pin: containerd normalizes
    /// names (`docker.io/busybox@...` is `docker.io/library/busybox@...`).
    pub record: String,
}

/// `pinned_by_mco`: the records mco pinned.
pub fn changes(wanted: &[String], present: &[Present], pinned_by_mco: &BTreeSet<String>) -> Changes {
    let has = |image: &String| present.iter().find(|p| &p.image == image).map(|p| p.pinned);
    let kept = |record: &String| wanted.contains(record) || present.iter().any(|p| &p.record == record);
    Changes {
        pull: wanted.iter().filter(|i| has(i).is_none()).cloned().collect(),
        pin: wanted.iter().filter(|i| has(i) == Some(false)).cloned().collect(),
        unpin: pinned_by_mco.iter().filter(|r| !kept(r)).cloned().collect(),
    }
}

/// Whether `node` may pull images now, as upstream's storage gate: Ready, and at least
/// `min_free` bytes of allocatable ephemeral storage (0: storage is not checked).
pub fn may_pull(node: &Node, min_free: i64) -> Result<(), String> {
    let status = node.status.as_ref();
    let ready = status.and_then(|s| s.conditions.as_ref()).and_then(|c| c.iter().find(|c| c.type_ == "Ready"));
    match ready.map(|c| c.status.as_str()) {
        Some("True") => {}
        other => return Err(format!("node {} is reporting NotReady={}", node.name_any(), other.unwrap_or("Unknown"))),
    }
    // Upstream's OutOfDisk (a condition kubelets no longer set) and its successor, DiskPressure.
    let conditions = status.and_then(|s| s.conditions.as_deref()).unwrap_or_default();
    let full = ["OutOfDisk", "DiskPressure"];
    if let Some(full) = conditions.iter().find(|c| full.contains(&c.type_.as_str()) && c.status == "True") {
        return Err(format!("node {} is reporting {}=True", node.name_any(), full.type_));
    }
    if min_free == 0 {
        return Ok(());
    }
    let allocatable = status.and_then(|s| s.allocatable.as_ref()).and_then(|a| a.get("ephemeral-storage"));
    let Some(allocatable) = allocatable else {
        return Err(format!("node {:?} has no ephemeral storage capacity", node.name_any()));
    };
    let bytes =
        Quantity::parse(&allocatable.0).map_err(|e| format!("node's ephemeral storage {:?}: {e}", allocatable.0))?;
    if bytes.value() < min_free {
        return Err(format!(
            "storage available is less than minimum required capacity: {}, required: {min_free}",
            bytes.value()
        ));
    }
    Ok(())
}

/// Where a node is with its sets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome<'a> {
    Pulling,
    Done,
    Failed(&'a str),
}

/// The sets whose entry in `previous` has a generation above the set's: deleted and made again
/// (its generation starts at 1 again). The API refuses a generation that decreases, so such an
/// entry is taken out of the list in a write of its own before the set is listed again.
pub fn recreated(sets: &[SetGeneration], previous: &[MachineConfigNodeStatusPinnedImageSet]) -> Vec<String> {
    sets.iter()
        .filter(|set| {
            previous.iter().filter(|p| p.name == set.name).any(|p| {
                [p.desired_generation, p.current_generation, p.last_failed_generation]
                    .into_iter()
                    .flatten()
                    .any(|generation| generation > set.generation)
            })
        })
        .map(|set| set.name.clone())
        .collect()
}

/// `status.pinnedImageSets` of the node's MachineConfigNode for `sets` (as upstream's
/// `createApplyConfigForImageSet`): each at its desired generation; the current generation once
/// done (kept from `previous` meanwhile); the failure with its generation. `previous` holds no
/// [`recreated`] set.
pub fn set_statuses(
    sets: &[SetGeneration],
    previous: &[MachineConfigNodeStatusPinnedImageSet],
    outcome: Outcome,
) -> Vec<MachineConfigNodeStatusPinnedImageSet> {
    sets.iter()
        .map(|set| {
            let before = previous.iter().find(|p| p.name == set.name);
            let kept = before.and_then(|b| b.current_generation).filter(|c| *c <= set.generation);
            let current = if outcome == Outcome::Done { Some(set.generation) } else { kept };
            let (last_failed_generation, last_failed_generation_error) = match outcome {
                Outcome::Failed(error) => (Some(set.generation), Some(truncate(error))),
                _ => (None, None),
            };
            MachineConfigNodeStatusPinnedImageSet {
                name: set.name.clone(),
                desired_generation: Some(set.generation),
                current_generation: current,
                last_failed_generation,
                last_failed_generation_error,
            }
        })
        .collect()
}

fn truncate(error: &str) -> String {
    match error.char_indices().nth(MAX_ERROR_LEN) {
        Some((end, _)) => error[..end].to_string(),
        None => error.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    const D: &str = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    fn pool(name: &str, sets: &[&str]) -> MachineConfigPool {
        let refs: Vec<_> = sets.iter().map(|s| json!({"name": s})).collect();
        serde_json::from_value(json!({"metadata": {"name": name}, "spec": {"pinnedImageSets": refs}})).unwrap()
    }

    fn set(name: &str, generation: i64, images: &[&str]) -> PinnedImageSet {
        let images: Vec<_> = images.iter().map(|i| json!({"name": format!("quay.io/{i}@{D}")})).collect();
        serde_json::from_value(json!({
            "metadata": {"name": name, "generation": generation},
            "spec": {"pinnedImages": images},
        }))
        .unwrap()
    }

    fn image(name: &str) -> String {
        format!("quay.io/{name}@{D}")
    }

    #[test]
    fn a_node_wants_the_sets_of_all_its_pools_once_and_their_images_sorted_and_unique() {
        let sets = [set("tools", 3, &["b", "a"]), set("base", 1, &["a", "c"]), set("other", 1, &["x"])];
        let infra = pool("infra", &["tools", "gone"]);
        let worker = pool("worker", &["base", "tools"]);
        let wanted = wanted(&[&infra, &worker], &sets);
        let names: Vec<(&str, i32)> = wanted.sets.iter().map(|s| (s.name.as_str(), s.generation)).collect();
        assert_eq!(names, [("tools", 3), ("base", 1)]);
        assert_eq!(wanted.images, [image("a"), image("b"), image("c")]);
        assert_eq!(super::wanted(&[&pool("worker", &[])], &sets), Wanted::default());
    }

    #[test]
    fn changes_pull_what_is_missing_pin_what_is_not_pinned_and_unpin_only_mcos_leftovers() {
        let wanted = [image("a"), image("b"), image("c")];
        let present = |name: &str, pinned: bool| Present { image: image(name), pinned, record: image(name) };
        let present = [present("a", true), present("b", false)];
        let mine: BTreeSet<String> = [image("a"), image("old")].into();
        let changes = changes(&wanted, &present, &mine);
        assert_eq!(changes, Changes { pull: vec![image("c")], pin: vec![image("b")], unpin: vec![image("old")] });
        let settled = super::changes(&[image("a")], &present[..1], &[image("a")].into());
        assert!(settled.is_empty());
        // A name containerd normalizes: its record, under the normalized name, stays pinned.
        let short = format!("docker.io/busybox@{D}");
        let normalized = format!("docker.io/library/busybox@{D}");
        let busybox = Present { image: short.clone(), pinned: true, record: normalized.clone() };
        let kept = super::changes(&[short], &[busybox], &[normalized, image("old")].into());
        assert_eq!(kept.unpin, [image("old")]);
    }

    fn node(ready: &str, storage: Option<&str>) -> Node {
        let mut allocatable = serde_json::Map::new();
        if let Some(storage) = storage {
            allocatable.insert("ephemeral-storage".into(), json!(storage));
        }
        serde_json::from_value(json!({
            "metadata": {"name": "worker-0"},
            "status": {"conditions": [{"type": "Ready", "status": ready}], "allocatable": allocatable},
        }))
        .unwrap()
    }

    fn pressured(mut node: Node) -> Node {
        let conditions = node.status.as_mut().unwrap().conditions.as_mut().unwrap();
        conditions.push(serde_json::from_value(json!({"type": "DiskPressure", "status": "True"})).unwrap());
        node
    }

    #[test]
    fn a_node_pulls_only_when_ready_with_enough_storage() {
        let cases = [
            (node("True", Some("20Gi")), Ok(())),
            (node("True", Some("17179869184")), Ok(())),
            (
                node("True", Some("15Gi")),
                Err("storage available is less than minimum required capacity: 16106127360, required: 17179869184"),
            ),
            (node("False", Some("20Gi")), Err("node worker-0 is reporting NotReady=False")),
            (pressured(node("True", Some("20Gi"))), Err("node worker-0 is reporting DiskPressure=True")),
            (node("True", None), Err("node \"worker-0\" has no ephemeral storage capacity")),
        ];
        for (node, expected) in cases {
            assert_eq!(may_pull(&node, MIN_FREE_STORAGE), expected.map_err(String::from));
        }
        // Not checked: a node that reports no storage may pull, one that is not Ready may not.
        assert_eq!(may_pull(&node("True", None), 0), Ok(()));
        assert!(may_pull(&node("False", None), 0).is_err());
    }

    #[test]
    fn set_statuses_follow_upstream_and_never_decrease_a_generation() {
        let sets =
            [SetGeneration { name: "a".into(), generation: 3 }, SetGeneration { name: "b".into(), generation: 1 }];
        let status = |name: &str, current: Option<i32>, desired: i32, failed: Option<(i32, &str)>| {
            MachineConfigNodeStatusPinnedImageSet {
                name: name.into(),
                current_generation: current,
                desired_generation: Some(desired),
                last_failed_generation: failed.map(|f| f.0),
                last_failed_generation_error: failed.map(|f| f.1.to_string()),
            }
        };
        // `b` was recreated: its old generations are above its generation 1 now.
        let previous = [status("a", Some(2), 2, None), status("b", Some(4), 4, None)];
        assert_eq!(recreated(&sets, &previous), ["b"]);
        assert_eq!(recreated(&sets, &[status("b", None, 1, Some((2, "x")))]), ["b"]);
        assert!(recreated(&sets, &[status("a", Some(3), 3, None), status("b", None, 1, None)]).is_empty());
        let previous = &previous[..1];
        assert_eq!(
            set_statuses(&sets, previous, Outcome::Pulling),
            [status("a", Some(2), 3, None), status("b", None, 1, None)]
        );
        assert_eq!(
            set_statuses(&sets, previous, Outcome::Done),
            [status("a", Some(3), 3, None), status("b", Some(1), 1, None)]
        );
        assert_eq!(
            set_statuses(&sets, previous, Outcome::Failed("failed to pull image")),
            [
                status("a", Some(2), 3, Some((3, "failed to pull image"))),
                status("b", None, 1, Some((1, "failed to pull image")))
            ]
        );
        let long = "é".repeat(40000);
        let [failed, _] = set_statuses(&sets, &[], Outcome::Failed(&long)).try_into().unwrap();
        assert_eq!(failed.last_failed_generation_error.unwrap().chars().count(), 32768);
    }
}
