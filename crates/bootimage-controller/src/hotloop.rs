//! Hot-loop protection: something keeps putting a MachineSet (or ControlPlaneMachineSet) back to
//! an old boot image and the controller keeps patching it. After the same patch was applied
//! [`LIMIT`] times in a row the controller refuses, which degrades it, instead of fighting forever.

use std::collections::HashMap;

/// How many times the same provider spec may be written to one MachineSet in a row.
pub const LIMIT: u32 = 3;

/// The patch would be the same one again, for the [`LIMIT`]th time.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "refusing to reconcile {kind} {name}, hot loop detected. Please opt-out of boot image updates, adjust your machine provisioning workflow to prevent hot loops and opt back in to resume boot image updates"
)]
pub struct HotLoop {
    /// What upstream's message calls the object: `machineset`, `ControlPlaneMachineSet`.
    pub kind: &'static str,
    pub name: String,
}

/// The last value patched into each object of one kind and how many times in a row. In memory
/// only, as upstream: a restart forgets it.
#[derive(Debug)]
pub struct HotLoopGuard {
    kind: &'static str,
    records: HashMap<String, (String, u32)>,
}

impl HotLoopGuard {
    /// A guard for objects `kind` names in its refusals.
    pub fn new(kind: &'static str) -> HotLoopGuard {
        HotLoopGuard { kind, records: HashMap::new() }
    }

    /// Refuses a patch writing `value` to `name` if the last [`LIMIT`] patches wrote the same.
    pub fn check(&self, name: &str, value: &str) -> Result<(), HotLoop> {
        match self.records.get(name) {
            Some((last, count)) if last == value && *count >= LIMIT => {
                Err(HotLoop { kind: self.kind, name: name.to_string() })
            }
            _ => Ok(()),
        }
    }

    /// Records a successful patch.
    pub fn record(&mut self, name: &str, value: &str) {
        let count = match self.records.get(name) {
            Some((last, count)) if last == value => count + 1,
            _ => 1,
        };
        self.records.insert(name.to_string(), (value.to_string(), count));
    }

    /// Forgets everything (none is managed any more).
    pub fn clear(&mut self) {
        self.records.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn third_identical_patch_is_the_last() {
        let mut guard = HotLoopGuard::new("machineset");
        for _ in 0..LIMIT {
            guard.check("ms", "new").unwrap();
            guard.record("ms", "new");
        }
        let refused = guard.check("ms", "new").unwrap_err();
        assert!(refused.to_string().starts_with("refusing to reconcile machineset ms, hot loop detected"));
        // Another value, or another MachineSet, is fine; a different patch restarts the count.
        guard.check("ms", "other").unwrap();
        guard.check("ms2", "new").unwrap();
        guard.record("ms", "other");
        guard.check("ms", "new").unwrap();
        guard.record("ms", "new");
        guard.clear();
        guard.check("ms", "new").unwrap();
        // Upstream's message names the kind as it does.
        let mut guard = HotLoopGuard::new("ControlPlaneMachineSet");
        for _ in 0..LIMIT {
            guard.record("cluster", "new");
        }
        assert!(
            guard
                .check("cluster", "new")
                .unwrap_err()
                .to_string()
                .starts_with("refusing to reconcile ControlPlaneMachineSet cluster, hot loop detected")
        );
    }
}
