//! Which watch events start a sync, and under which name. Upstream queues event *names*
//! and every one triggers a full sync; the name becomes the reason of
//! `BootImageUpdateProgressing`. Each watched object is reduced to a fingerprint of the fields
//! whose changes matter; [`Tracker`] compares it with the last one seen.

use std::collections::HashMap;

use serde_json::Value;

/// The kinds of objects watched.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Watched {
    /// MAPI MachineSets: fingerprint = provider spec, labels, annotations, owner references.
    MachineSet,
    /// ControlPlaneMachineSets: the same fingerprint.
    ControlPlaneMachineSet,
    /// `coreos-bootimages`: fingerprint = resourceVersion.
    BootImagesConfigMap,
    /// MachineConfiguration `cluster`: fingerprint = the spec fields and status fields the
    /// controller reads (the effective boot image configuration and skew status).
    MachineConfiguration,
    /// ClusterVersion `version`: fingerprint = `status.history[0].state`.
    ClusterVersion,
}

impl Watched {
    fn names(self) -> (&'static str, &'static str, &'static str) {
        match self {
            Watched::MachineSet => ("MAPIMachineSetAdded", "MAPIMachineSetUpdated", "MAPIMachineSetDeleted"),
            Watched::ControlPlaneMachineSet => {
                ("ControlPlaneMachineSetAdded", "ControlPlaneMachineSetUpdated", "ControlPlaneMachineSetDeleted")
            }
            Watched::BootImagesConfigMap => {
                ("BootImageConfigMapAdded", "BootImageConfigMapUpdated", "BootImageConfigMapDeleted")
            }
            Watched::MachineConfiguration => (
                "BootImageUpdateConfigurationAdded",
                "BootImageUpdateConfigurationUpdated",
                "BootImageUpdateConfigurationDeleted",
            ),
            Watched::ClusterVersion => ("ClusterVersionStable", "ClusterVersionStable", ""),
        }
    }
}

/// The event of a ClusterVersion reaching Completed.
pub const CLUSTER_VERSION_STABLE: &str = "ClusterVersionStable";
const COMPLETED: &str = "Completed";

/// The last fingerprint of every object of one kind.
#[derive(Debug)]
pub struct Tracker {
    kind: Watched,
    seen: HashMap<String, Value>,
}

impl Tracker {
    pub fn new(kind: Watched) -> Tracker {
        Tracker { kind, seen: HashMap::new() }
    }

    /// An object was created or changed (or listed again after a watch restart).
    pub fn applied(&mut self, name: &str, fingerprint: Value) -> Option<&'static str> {
        let (added, updated, _) = self.kind.names();
        let previous = self.seen.insert(name.to_string(), fingerprint.clone());
        if self.kind == Watched::ClusterVersion {
            // Only the transition to Completed matters: that is when deferred patches may go.
            let completed = |v: &Value| v.as_str() == Some(COMPLETED);
            return (completed(&fingerprint) && !previous.as_ref().is_some_and(completed)).then_some(updated);
        }
        match previous {
            None => Some(added),
            Some(previous) if previous != fingerprint => Some(updated),
            Some(_) => None,
        }
    }

    /// An object was deleted.
    pub fn deleted(&mut self, name: &str) -> Option<&'static str> {
        let (_, _, deleted) = self.kind.names();
        let known = self.seen.remove(name).is_some();
        (known && !deleted.is_empty()).then_some(deleted)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn machinesets_added_updated_only_on_change_deleted() {
        let mut t = Tracker::new(Watched::MachineSet);
        assert_eq!(t.applied("a", json!({"spec": 1})), Some("MAPIMachineSetAdded"));
        // A status-only change has the same fingerprint.
        assert_eq!(t.applied("a", json!({"spec": 1})), None);
        assert_eq!(t.applied("a", json!({"spec": 2})), Some("MAPIMachineSetUpdated"));
        assert_eq!(t.deleted("a"), Some("MAPIMachineSetDeleted"));
        assert_eq!(t.deleted("a"), None);
        assert_eq!(t.applied("a", json!({"spec": 2})), Some("MAPIMachineSetAdded"));
    }

    #[test]
    fn cluster_version_only_on_reaching_completed() {
        let mut t = Tracker::new(Watched::ClusterVersion);
        assert_eq!(t.applied("version", json!("Partial")), None);
        assert_eq!(t.applied("version", json!("Completed")), Some(CLUSTER_VERSION_STABLE));
        assert_eq!(t.applied("version", json!("Completed")), None);
        assert_eq!(t.applied("version", json!(null)), None);
        assert_eq!(t.applied("version", json!("Completed")), Some(CLUSTER_VERSION_STABLE));
        assert_eq!(t.deleted("version"), None);
        // First seen already Completed: a stable cluster to sync.
        let mut fresh = Tracker::new(Watched::ClusterVersion);
        assert_eq!(fresh.applied("version", json!("Completed")), Some(CLUSTER_VERSION_STABLE));
    }

    #[test]
    fn names_per_kind() {
        let mut cm = Tracker::new(Watched::BootImagesConfigMap);
        assert_eq!(cm.applied("coreos-bootimages", json!("1")), Some("BootImageConfigMapAdded"));
        assert_eq!(cm.applied("coreos-bootimages", json!("2")), Some("BootImageConfigMapUpdated"));
        let mut mc = Tracker::new(Watched::MachineConfiguration);
        assert_eq!(mc.applied("cluster", json!({})), Some("BootImageUpdateConfigurationAdded"));
        assert_eq!(mc.deleted("cluster"), Some("BootImageUpdateConfigurationDeleted"));
        let mut cpms = Tracker::new(Watched::ControlPlaneMachineSet);
        assert_eq!(cpms.applied("cluster", json!({})), Some("ControlPlaneMachineSetAdded"));
        assert_eq!(cpms.applied("cluster", json!({"spec": 1})), Some("ControlPlaneMachineSetUpdated"));
        assert_eq!(cpms.deleted("cluster"), Some("ControlPlaneMachineSetDeleted"));
    }
}
