//! The shape every controller here shares, as kube-rs' controller-rs has it: a `reconcile`
//! function of an object and a context that holds all its IO, run by [`run`] with one error
//! policy. A failed sync is logged with the controller and the object, counted by controller and
//! kind of failure (`mco_controller_reconcile_errors_total`, [`ReconcileError::metric_label`]),
//! and the object is tried again after a delay that doubles with each failure in a row
//! ([`retry_delay`]); a success starts the count again. A watch event for the object still
//! syncs it at once.

use std::collections::HashMap;
use std::fmt::Debug;
use std::future::Future;
use std::hash::Hash;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt as _;
use kube::runtime::Controller;
use kube::runtime::controller::Action;
use kube::{Resource, ResourceExt as _};
use mco_metrics::controller::{ControllerMetrics, ReconcileErrorLabels};
use serde::de::DeserializeOwned;

/// The longest wait between two tries of a failing object (unless its first delay is longer).
pub const MAX_RETRY_DELAY: Duration = Duration::from_secs(300);

/// A controller's sync error.
pub trait ReconcileError: std::error::Error + Send + Sync + 'static {
    /// The kind of failure, for the metric's `error` label: one of a few fixed values.
    fn metric_label(&self) -> &'static str;
}

/// What a controller's context gives the shared error policy.
pub trait Reconciler<E>: Send + Sync + 'static {
    fn retries(&self) -> &Retries;

    /// The delay before the first retry after `error` (then doubled with each failure in a row).
    fn first_retry(&self, _error: &E) -> Duration {
        self.retries().first
    }
}

/// How long to wait before trying an object again after its `failures`-th failure in a row
/// (counting from 1): `first`, doubled for each failure before, at most [`MAX_RETRY_DELAY`] or
/// `first` if that is longer (pure).
pub fn retry_delay(first: Duration, failures: u32) -> Duration {
    let doubled = first.saturating_mul(2u32.saturating_pow(failures.saturating_sub(1)));
    doubled.min(MAX_RETRY_DELAY.max(first))
}

/// One controller's failures in a row per object, and its error counter.
pub struct Retries {
    controller: &'static str,
    first: Duration,
    failures: Mutex<HashMap<String, u32>>,
    metrics: ControllerMetrics,
}

impl Retries {
    /// `controller` names it in logs and metrics; `first` is the first retry's delay.
    pub fn new(controller: &'static str, first: Duration, metrics: ControllerMetrics) -> Self {
        Retries { controller, first, failures: Mutex::default(), metrics }
    }

    fn failures(&self) -> std::sync::MutexGuard<'_, HashMap<String, u32>> {
        self.failures.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Counts a failure of `object` (`label`: its kind) and says when to try it again.
    fn failed(&self, object: String, label: &'static str, first: Duration) -> Duration {
        let labels = ReconcileErrorLabels { controller: self.controller.into(), error: label.into() };
        self.metrics.reconcile_errors.get_or_create(&labels).inc();
        let mut failures = self.failures();
        let count = failures.entry(object).or_default();
        *count = count.saturating_add(1);
        retry_delay(first, *count)
    }

    fn succeeded(&self, object: &str) {
        self.failures().remove(object);
    }
}

fn object_key<K: Resource>(object: &K) -> String {
    match object.namespace() {
        Some(namespace) => format!("{namespace}/{}", object.name_any()),
        None => object.name_any(),
    }
}

/// Runs `controller` with `reconcile` and the shared error policy until its watches end (they
/// retry errors, so: forever).
pub async fn run<K, E, C, F, Fut>(controller: Controller<K>, mut reconcile: F, context: Arc<C>)
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    K::DynamicType: Eq + Hash + Clone + Debug + Unpin,
    E: ReconcileError,
    C: Reconciler<E>,
    F: FnMut(Arc<K>, Arc<C>) -> Fut,
    Fut: Future<Output = Result<Action, E>> + Send + 'static,
{
    let name = context.retries().controller;
    let reconcile = move |object: Arc<K>, context: Arc<C>| {
        let key = object_key(&*object);
        let sync = reconcile(object, context.clone());
        async move {
            let result = sync.await;
            if result.is_ok() {
                context.retries().succeeded(&key);
            }
            result
        }
    };
    let error_policy = |object: Arc<K>, error: &E, context: Arc<C>| {
        let retries = context.retries();
        let key = object_key(&*object);
        let delay = retries.failed(key.clone(), error.metric_label(), context.first_retry(error));
        tracing::warn!(controller = retries.controller, object = %key, retry_in = ?delay, "{error}");
        Action::requeue(delay)
    };
    controller
        .run(reconcile, error_policy, context)
        .for_each(|result| async move {
            match result {
                Ok((object, _)) => tracing::trace!(controller = name, object = %object.name, "synced"),
                Err(e) => tracing::debug!(controller = name, "{e}"),
            }
        })
        .await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_failure_in_a_row_doubles_the_delay_up_to_the_cap() {
        let second = Duration::from_secs(1);
        let cases = [
            ("the first failure waits the first delay", second, 1, second),
            ("the second twice that", second, 2, 2 * second),
            ("the fifth sixteen times", second, 5, 16 * second),
            ("the ninth 256 times", second, 9, 256 * second),
            ("the tenth reaches the cap", second, 10, MAX_RETRY_DELAY),
            ("no overflow after very many", second, u32::MAX, MAX_RETRY_DELAY),
            ("a count of zero is the first", second, 0, second),
            ("a first delay above the cap is kept", 2 * MAX_RETRY_DELAY, 3, 2 * MAX_RETRY_DELAY),
            ("sub-second delays double too", Duration::from_millis(250), 3, Duration::from_secs(1)),
        ];
        for (case, first, failures, wanted) in cases {
            assert_eq!(retry_delay(first, failures), wanted, "{case}");
        }
    }

    #[test]
    fn failures_are_counted_per_object_and_a_success_starts_again() {
        let metrics = ControllerMetrics::default();
        let retries = Retries::new("test", Duration::from_secs(2), metrics.clone());
        assert_eq!(retries.failed("a".into(), "kube", retries.first), Duration::from_secs(2));
        assert_eq!(retries.failed("a".into(), "kube", retries.first), Duration::from_secs(4));
        assert_eq!(retries.failed("b".into(), "other", retries.first), Duration::from_secs(2), "b counts alone");
        retries.succeeded("a");
        assert_eq!(retries.failed("a".into(), "kube", retries.first), Duration::from_secs(2), "a starts again");
        let count = |error: &str| {
            let labels = ReconcileErrorLabels { controller: "test".into(), error: error.into() };
            metrics.reconcile_errors.get_or_create(&labels).get()
        };
        assert_eq!((count("kube"), count("other")), (3, 1));
    }
}
