//! Events on the daemon's own Node, with upstream's reasons and messages (the daemon's
//! `nodeWriter.Eventf`), so `kubectl describe node` tells the update's story as it does upstream.
//! [`Limiter`] keeps a daemon stuck in a retry loop from flooding the API server: the same event
//! again within [`REPEAT_WINDOW`] is dropped, and at most [`BURST`] events go out at once, then
//! one per [`REFILL`] (client-go's recorder has a similar spam filter, but folds repeats into a
//! series, which still costs a request each).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ObjectReference;
use kube::Client;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};

/// Upstream's event source for the daemon.
pub const REPORTER: &str = "machineconfigdaemon";
/// Events that may go out at once.
pub const BURST: u32 = 25;
/// After a burst: one more event per this interval.
pub const REFILL: Duration = Duration::from_secs(10);
/// The same reason and message again within this window is not recorded again.
pub const REPEAT_WINDOW: Duration = Duration::from_secs(10 * 60);

/// Which events go out: pure, given the time.
#[derive(Debug)]
pub struct Limiter {
    tokens: u32,
    refilled: Instant,
    sent: HashMap<(String, String), Instant>,
}

impl Limiter {
    pub fn new(now: Instant) -> Self {
        Limiter { tokens: BURST, refilled: now, sent: HashMap::new() }
    }

    /// Whether the event `(reason, message)` may be recorded at `now` (and counts it if so).
    pub fn admit(&mut self, reason: &str, message: &str, now: Instant) -> bool {
        let refills = (now.saturating_duration_since(self.refilled).as_millis() / REFILL.as_millis()) as u32;
        if refills > 0 {
            self.tokens = self.tokens.saturating_add(refills).min(BURST);
            self.refilled += REFILL * refills;
        }
        self.sent.retain(|_, at| now.saturating_duration_since(*at) < REPEAT_WINDOW);
        let key = (reason.to_string(), message.to_string());
        if self.tokens == 0 || self.sent.contains_key(&key) {
            return false;
        }
        self.tokens -= 1;
        self.sent.insert(key, now);
        true
    }
}

/// The API server refuses an Event whose note is longer than this many bytes.
const NOTE_LIMIT: usize = 1024;

/// `message`, cut to fit an Event's note.
fn note(message: &str) -> String {
    if message.len() <= NOTE_LIMIT {
        return message.to_string();
    }
    let mut end = NOTE_LIMIT - "...".len();
    while !message.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}...", &message[..end])
}

/// Records Events about one Node.
pub struct NodeEvents {
    client: Client,
    node: String,
    /// The Node's UID once read (`kubectl describe node` matches events by it).
    uid: Mutex<Option<String>>,
    limiter: Mutex<Limiter>,
}

impl NodeEvents {
    pub fn new(client: Client, node: &str) -> Self {
        NodeEvents {
            client,
            node: node.to_string(),
            uid: Mutex::new(None),
            limiter: Mutex::new(Limiter::new(Instant::now())),
        }
    }

    /// The Node's UID, for the events' reference.
    pub fn set_uid(&self, uid: Option<String>) {
        *self.uid.lock().unwrap_or_else(|poisoned| poisoned.into_inner()) = uid;
    }

    pub async fn normal(&self, reason: &str, message: &str) {
        self.publish(EventType::Normal, reason, message).await
    }

    pub async fn warning(&self, reason: &str, message: &str) {
        self.publish(EventType::Warning, reason, message).await
    }

    /// Failing to record an event is logged, never an error: events are for people.
    async fn publish(&self, type_: EventType, reason: &str, message: &str) {
        let admitted = self.limiter.lock().unwrap_or_else(|p| p.into_inner()).admit(reason, message, Instant::now());
        if !admitted {
            tracing::debug!(reason, message, "event not recorded (rate limit)");
            return;
        }
        let regarding = ObjectReference {
            api_version: Some("v1".to_string()),
            kind: Some("Node".to_string()),
            name: Some(self.node.clone()),
            uid: self.uid.lock().unwrap_or_else(|p| p.into_inner()).clone(),
            ..Default::default()
        };
        let event = Event {
            type_,
            reason: reason.to_string(),
            note: Some(note(message)),
            action: reason.to_string(),
            secondary: None,
        };
        let reporter = Reporter { controller: REPORTER.to_string(), instance: Some(self.node.clone()) };
        // A new recorder each time: one folds later events of the same reason into the first's series.
        if let Err(e) = Recorder::new(self.client.clone(), reporter).publish(&event, &regarding).await {
            tracing::warn!(reason, "recording the event: {e}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repeats_are_dropped_until_the_window_passes() {
        let start = Instant::now();
        let mut limiter = Limiter::new(start);
        assert!(limiter.admit("ConfigDriftDetected", "/etc/a changed", start));
        assert!(!limiter.admit("ConfigDriftDetected", "/etc/a changed", start + Duration::from_secs(60)));
        assert!(limiter.admit("ConfigDriftDetected", "/etc/b changed", start + Duration::from_secs(60)));
        assert!(limiter.admit("Reboot", "/etc/a changed", start + Duration::from_secs(60)), "another reason");
        assert!(limiter.admit("ConfigDriftDetected", "/etc/a changed", start + REPEAT_WINDOW));
    }

    #[test]
    fn long_messages_are_cut_to_fit_a_note() {
        assert_eq!(note("short"), "short");
        let long = "é".repeat(NOTE_LIMIT);
        let cut = note(&long);
        assert!(cut.len() <= NOTE_LIMIT && cut.ends_with("...") && cut.starts_with("éé"), "{}", cut.len());
    }

    #[test]
    fn a_burst_then_one_per_refill() {
        let start = Instant::now();
        let mut limiter = Limiter::new(start);
        for i in 0..BURST {
            assert!(limiter.admit("Drain", &format!("attempt {i}"), start), "event {i} of the burst");
        }
        assert!(!limiter.admit("Drain", "one too many", start));
        assert!(!limiter.admit("Drain", "one too many", start + REFILL / 2));
        assert!(limiter.admit("Drain", "one too many", start + REFILL));
        assert!(!limiter.admit("Drain", "and another", start + REFILL));
        // A long quiet time refills the burst, no more.
        let later = start + REFILL * (BURST * 10);
        let admitted = (0..BURST * 2).filter(|i| limiter.admit("Drain", &format!("later {i}"), later)).count();
        assert_eq!(admitted, BURST as usize);
    }
}
