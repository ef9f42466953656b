//! Every change of the MachineConfigNodes' conditions, as a watch sees them: per node, one
//! `Type=Status` entry per condition whose status or message a write changed (sorted within one
//! write), leaving out the placeholders of a first write (reason `NotYetOccurred`).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use futures::StreamExt as _;
use mco_api::MachineConfigNode;
use mco_testenv::kube::runtime::watcher;
use mco_testenv::kube::{Api, Client, ResourceExt as _};

/// The entry marking a relist of the watch: changes between the two states are not seen.
pub const RELISTED: &str = "(watch relisted)";

/// Type -> (status, reason, message).
type Conditions = BTreeMap<String, (String, String, String)>;

pub struct Transitions {
    seen: Arc<Mutex<BTreeMap<String, Vec<String>>>>,
    task: tokio::task::JoinHandle<()>,
}

fn conditions(mcn: &MachineConfigNode) -> Conditions {
    let all = mcn.status.as_ref().and_then(|s| s.conditions.as_ref());
    all.into_iter()
        .flatten()
        .map(|c| (c.type_.clone(), (c.status.clone(), c.reason.clone(), c.message.clone())))
        .collect()
}

impl Transitions {
    pub fn watch(client: Client) -> Transitions {
        let seen: Arc<Mutex<BTreeMap<String, Vec<String>>>> = Arc::default();
        let recorded = seen.clone();
        let task = tokio::spawn(async move {
            let mut last: BTreeMap<String, Conditions> = BTreeMap::new();
            let mut events = watcher(Api::<MachineConfigNode>::all(client), watcher::Config::default()).boxed();
            while let Some(event) = events.next().await {
                let event = event.unwrap_or_else(|e| {
                    eprintln!("watching MachineConfigNodes: {e}");
                    watcher::Event::Init
                });
                let (watcher::Event::Apply(mcn) | watcher::Event::InitApply(mcn)) = event else {
                    // A relist (after an error or an expired watch) shows only the state it finds:
                    // what changed meanwhile is not seen, and a failure should say so.
                    if let watcher::Event::Init = event {
                        for entries in recorded.lock().unwrap().values_mut() {
                            entries.push(RELISTED.to_string());
                        }
                    }
                    continue;
                };
                let now = conditions(&mcn);
                let before = last.remove(&mcn.name_any()).unwrap_or_default();
                let changed = now.iter().filter(|(kind, (_, reason, _))| match before.get(*kind) {
                    Some(old) => old != &now[*kind],
                    None => reason != "NotYetOccurred",
                });
                let entries: Vec<String> = changed.map(|(kind, (status, ..))| format!("{kind}={status}")).collect();
                recorded.lock().unwrap().entry(mcn.name_any()).or_default().extend(entries);
                last.insert(mcn.name_any(), now);
            }
        });
        Transitions { seen, task }
    }

    /// What was seen of `node` so far.
    pub fn of(&self, node: &str) -> Vec<String> {
        self.seen.lock().unwrap().get(node).cloned().unwrap_or_default()
    }
}

impl Drop for Transitions {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Whether `expected` occurs in `seen` in this order (with anything between).
pub fn in_order(seen: &[String], expected: &[&str]) -> bool {
    let mut rest = seen.iter();
    expected.iter().all(|wanted| rest.any(|entry| entry == wanted))
}
