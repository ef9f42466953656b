//! The encoded bodies of every pool and spec version, shared by all responses and bounded in total
//! size: when a new body would exceed the cap, the least recently served bodies are dropped (they
//! are rebuilt on their next request). A body larger than the whole cap is served but not kept.
//! Responses still sending a dropped body keep its bytes alive until they are done (`Bytes` is
//! reference-counted), so the cap bounds what is cached, not what is in flight.

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;

use bytes::Bytes;
use mco_ignition::convert::Target;

/// Default cap on the cached bodies: every spec version of a 13.7 MB config (about 96 MB) fits.
pub const DEFAULT_CAPACITY: usize = 128 << 20;

/// Which body: a snapshot (one pool's inputs at one moment) and a spec version.
pub type Key = (u64, Target);

/// The shared, size-capped body cache.
#[derive(Debug)]
pub struct BodyCache {
    lru: Mutex<Lru>,
}

impl BodyCache {
    pub fn new(capacity: usize) -> Self {
        BodyCache { lru: Mutex::new(Lru::new(capacity)) }
    }

    pub fn get(&self, key: Key) -> Option<Bytes> {
        self.lock().get(key)
    }

    /// Keeps `body` if it fits in the cap at all (evicting others as needed); says whether it did.
    pub fn insert(&self, key: Key, body: Bytes) -> bool {
        self.lock().insert(key, body)
    }

    /// Drops every body of a snapshot that no longer exists.
    pub fn remove_snapshot(&self, snapshot: u64) {
        let mut lru = self.lock();
        for target in Target::ALL {
            lru.remove((snapshot, target));
        }
    }

    /// Total bytes of the cached bodies.
    pub fn bytes(&self) -> usize {
        self.lock().bytes
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Lru> {
        self.lru.lock().expect("not poisoned")
    }
}

impl Default for BodyCache {
    fn default() -> Self {
        BodyCache::new(DEFAULT_CAPACITY)
    }
}

/// A least-recently-used map of bodies with a byte budget (pure: no IO, no clock; "recent" is a
/// counter bumped on every access).
#[derive(Debug)]
struct Lru {
    capacity: usize,
    bytes: usize,
    tick: u64,
    entries: HashMap<Key, (Bytes, u64)>,
    /// Last-use tick → key, oldest first.
    order: BTreeMap<u64, Key>,
}

impl Lru {
    fn new(capacity: usize) -> Self {
        Lru { capacity, bytes: 0, tick: 0, entries: HashMap::new(), order: BTreeMap::new() }
    }

    fn next_tick(&mut self) -> u64 {
        self.tick += 1;
        self.tick
    }

    fn get(&mut self, key: Key) -> Option<Bytes> {
        let tick = self.next_tick();
        let (body, used) = self.entries.get_mut(&key)?;
        self.order.remove(used);
        *used = tick;
        self.order.insert(tick, key);
        Some(body.clone())
    }

    fn insert(&mut self, key: Key, body: Bytes) -> bool {
        self.remove(key);
        if body.len() > self.capacity {
            return false;
        }
        while self.bytes + body.len() > self.capacity {
            let (_, oldest) = self.order.pop_first().expect("bytes > 0 means an entry");
            let (evicted, _) = self.entries.remove(&oldest).expect("order and entries agree");
            self.bytes -= evicted.len();
        }
        let tick = self.next_tick();
        self.bytes += body.len();
        self.entries.insert(key, (body, tick));
        self.order.insert(tick, key);
        true
    }

    fn remove(&mut self, key: Key) {
        if let Some((body, used)) = self.entries.remove(&key) {
            self.order.remove(&used);
            self.bytes -= body.len();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(len: usize) -> Bytes {
        Bytes::from(vec![b'x'; len])
    }

    /// Operations on a cache of 100 bytes and the keys (snapshot ids, all for 3.3) it holds after each.
    #[test]
    fn evicts_least_recently_used_within_the_byte_budget() {
        enum Op {
            Insert(u64, usize, bool),
            Get(u64, bool),
            RemoveSnapshot(u64),
        }
        use Op::*;
        let cases: &[(&str, &[Op], &[u64], usize)] = &[
            ("fits", &[Insert(1, 40, true), Insert(2, 60, true)], &[1, 2], 100),
            ("oldest goes first", &[Insert(1, 40, true), Insert(2, 40, true), Insert(3, 40, true)], &[2, 3], 80),
            (
                "a read makes an entry recent",
                &[Insert(1, 40, true), Insert(2, 40, true), Get(1, true), Insert(3, 40, true)],
                &[1, 3],
                80,
            ),
            (
                "several evicted for a big one",
                &[Insert(1, 30, true), Insert(2, 30, true), Insert(3, 90, true)],
                &[3],
                90,
            ),
            ("larger than the cap: not kept, nothing evicted", &[Insert(1, 50, true), Insert(2, 101, false)], &[1], 50),
            ("exactly the cap", &[Insert(1, 100, true)], &[1], 100),
            ("replacing a key frees its old bytes", &[Insert(1, 60, true), Insert(1, 70, true)], &[1], 70),
            ("a miss", &[Insert(1, 10, true), Get(2, false)], &[1], 10),
            ("removed with its snapshot", &[Insert(1, 10, true), Insert(2, 10, true), RemoveSnapshot(1)], &[2], 10),
            ("empty body", &[Insert(1, 0, true), Insert(2, 100, true)], &[1, 2], 100),
        ];
        for (name, ops, want_keys, want_bytes) in cases {
            let cache = BodyCache::new(100);
            for op in *ops {
                match *op {
                    Insert(id, len, kept) => assert_eq!(cache.insert((id, Target::V3_3), body(len)), kept, "{name}"),
                    Get(id, hit) => assert_eq!(cache.get((id, Target::V3_3)).is_some(), hit, "{name}"),
                    RemoveSnapshot(id) => cache.remove_snapshot(id),
                }
            }
            let lru = cache.lock();
            let mut keys: Vec<u64> = lru.entries.keys().map(|(id, _)| *id).collect();
            keys.sort();
            assert_eq!(keys, *want_keys, "{name}");
            assert_eq!(lru.bytes, *want_bytes, "{name}");
            assert_eq!(lru.order.len(), lru.entries.len(), "{name}");
        }
    }

    #[test]
    fn versions_of_one_snapshot_are_separate_entries() {
        let cache = BodyCache::new(100);
        assert!(cache.insert((7, Target::V3_3), body(10)));
        assert!(cache.insert((7, Target::V2_2), body(20)));
        assert_eq!(cache.get((7, Target::V2_2)).unwrap().len(), 20);
        assert_eq!(cache.bytes(), 30);
        cache.remove_snapshot(7);
        assert_eq!(cache.bytes(), 0);
    }
}
