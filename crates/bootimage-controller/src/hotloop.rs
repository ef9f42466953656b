//! Hot-loop protection: something keeps putting a MachineSet back to an old boot image
//! and the controller keeps patching it. After the same patch was applied [`LIMIT`] times in a
//! row the controller refuses, which degrades it, instead of fighting forever.

use std::collections::HashMap;

/// How many times the same provider spec may be written to one MachineSet in a row.
pub const LIMIT: u32 = 3;

/// The patch would be the same one again, for the [`LIMIT`]th time.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "refusing to reconcile machineset {0}, hot loop detected. Please opt-out of boot image updates, adjust your machine provisioning workflow to prevent hot loops and opt back in to resume boot image updates"
)]
pub struct HotLoop(pub String);

/// The last value patched into each MachineSet and how many times in a row. In memory only,
/// as upstream: a restart forgets it.
#[derive(Debug, Default)]
pub struct HotLoopGuard {
    records: HashMap<String, (String, u32)>,
}

impl HotLoopGuard {
    /// Refuses a patch writing `value` to `name` if the last [`LIMIT`] patches wrote the same.
    pub fn check(&self, name: &str, value: &str) -> Result<(), HotLoop> {
        match self.records.get(name) {
            Some((last, count)) if last == value && *count >= LIMIT => Err(HotLoop(name.to_string())),
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

    /// Forgets everything (no MachineSet is managed any more).
    pub fn clear(&mut self) {
        self.records.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn third_identical_patch_is_the_last() {
        let mut guard = HotLoopGuard::default();
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
    }
}
