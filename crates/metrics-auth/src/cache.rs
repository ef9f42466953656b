//! Decisions remembered per token for a while, in bounded memory.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use sha2::{Digest as _, Sha256};

use crate::review::Decision;

/// How long an allowed token stays allowed without asking again (kube-rbac-proxy: the delegating
/// authenticator's 2 minutes).
pub const ALLOWED_FOR: Duration = Duration::from_secs(120);
/// How long a refusal is remembered (the delegating authorizer's 30 s deny cache), so a revoked
/// or newly granted permission shows within that.
pub const REFUSED_FOR: Duration = Duration::from_secs(30);
/// At most this many tokens are remembered: a flood of distinct tokens cannot grow memory.
pub const CAPACITY: usize = 1024;

/// Decisions by the token's SHA-256 (the token itself is never kept), each until it expires.
#[derive(Default)]
pub struct Decisions {
    entries: Mutex<HashMap<[u8; 32], (Decision, Instant)>>,
}

impl Decisions {
    /// The remembered decision for `token`, if it has not expired.
    pub fn get(&self, token: &str) -> Option<Decision> {
        self.get_at(token, Instant::now())
    }

    /// Remembers `decision` for `token`.
    pub fn insert(&self, token: &str, decision: Decision) {
        self.insert_at(token, decision, Instant::now())
    }

    fn get_at(&self, token: &str, now: Instant) -> Option<Decision> {
        let entries = self.entries.lock().expect("not poisoned");
        entries.get(&key(token)).filter(|(_, until)| now < *until).map(|(decision, _)| decision.clone())
    }

    fn insert_at(&self, token: &str, decision: Decision, now: Instant) {
        let until = now + if decision == Decision::Allowed { ALLOWED_FOR } else { REFUSED_FOR };
        let mut entries = self.entries.lock().expect("not poisoned");
        if entries.len() >= CAPACITY {
            entries.retain(|_, (_, until)| now < *until);
        }
        // Still full of live entries: forget them all rather than grow (they are asked again).
        if entries.len() >= CAPACITY {
            entries.clear();
        }
        entries.insert(key(token), (decision, until));
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.entries.lock().expect("not poisoned").len()
    }
}

fn key(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decisions_expire_allowed_later_than_refused() {
        let decisions = Decisions::default();
        let start = Instant::now();
        decisions.insert_at("good", Decision::Allowed, start);
        decisions.insert_at("bad", Decision::Forbidden("no".into()), start);
        decisions.insert_at("unknown", Decision::Unauthenticated, start);
        let cases = [
            ("good", Duration::ZERO, Some(Decision::Allowed)),
            ("good", REFUSED_FOR, Some(Decision::Allowed)),
            ("good", ALLOWED_FOR, None),
            ("bad", REFUSED_FOR - Duration::from_secs(1), Some(Decision::Forbidden("no".into()))),
            ("bad", REFUSED_FOR, None),
            ("unknown", Duration::ZERO, Some(Decision::Unauthenticated)),
            ("unknown", REFUSED_FOR, None),
            ("never-seen", Duration::ZERO, None),
        ];
        for (token, after, expected) in cases {
            assert_eq!(decisions.get_at(token, start + after), expected, "{token} after {after:?}");
        }
    }

    #[test]
    fn memory_stays_bounded_under_a_flood_of_tokens() {
        let decisions = Decisions::default();
        let start = Instant::now();
        for n in 0..CAPACITY * 3 {
            decisions.insert_at(&format!("token-{n}"), Decision::Unauthenticated, start);
            assert!(decisions.len() <= CAPACITY, "{} entries after {n}", decisions.len());
        }
        assert_eq!(decisions.len(), CAPACITY);
        // Full, and every entry expired: they make room (no live entry is lost).
        let later = start + REFUSED_FOR;
        decisions.insert_at("fresh", Decision::Allowed, later);
        assert_eq!(decisions.len(), 1);
        assert_eq!(decisions.get_at("fresh", later), Some(Decision::Allowed));
    }
}
