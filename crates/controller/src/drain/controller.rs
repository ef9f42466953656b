//! The IO half of the drain controller. A drain cordons the node, evicts its pods through the
//! Eviction API (so PodDisruptionBudgets hold: a refused eviction, HTTP 429, is retried until the
//! attempt times out), then waits until every evicted pod is gone from the API, as `kubectl
//! drain` does: deleted, or replaced by a pod of the same name with another UID. On a real node
//! the kubelet removes a pod once its containers stopped; a pod whose grace period is 0 is
//! removed by the API server at once. Only then is `lastAppliedDrain` written.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use fn_error_context::context;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{EvictParams, ListParams, Patch};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::events::EventType;
use kube::runtime::watcher;
use kube::{Api, Client, Resource as _, ResourceExt as _};
use mco_api::constants::{DESIRED_DRAIN_ANNOTATION, LAST_APPLIED_DRAIN_ANNOTATION};
use mco_mcn::{Recorder, Step};
use mco_metrics::controller::{ControllerMetrics, SubControllerSync};
use mco_rollout::drain::{Request, RetryPolicy, Warning, eviction_waves, pending};
use mco_rollout::node::annotation;
use serde_json::json;

use crate::reconciler::{self, Reconciler, Retries};
use crate::{KubeError, kube_error, patch_params, publish};

/// Timing of drains.
#[derive(Debug, Clone)]
pub struct Options {
    /// When to retry a failed drain, and when to warn about it.
    pub retry: RetryPolicy,
    /// How long one drain attempt may take (upstream 90 s); then it counts as failed.
    pub attempt_timeout: Duration,
    /// Wait before asking again to evict a pod a disruption budget protects (upstream 5 s).
    pub eviction_retry: Duration,
    /// Interval of the checks whether evicted pods are gone (upstream 1 s).
    pub deletion_poll: Duration,
    /// The controller's own pod (namespace, name) when it runs in one: a drain of its node evicts
    /// it last ([`eviction_waves`]).
    pub own_pod: Option<(String, String)>,
    /// Drains failing past [`RetryPolicy::timeout`] are reported here (`mcc_drain_err`), and
    /// completed requests (`mcc_sub_controller_state`).
    pub metrics: ControllerMetrics,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            retry: RetryPolicy::default(),
            attempt_timeout: Duration::from_secs(90),
            eviction_retry: Duration::from_secs(5),
            deletion_poll: Duration::from_secs(1),
            own_pod: None,
            metrics: ControllerMetrics::default(),
        }
    }
}

/// Why a request could not be acknowledged; the node is retried with the controller's backoff.
pub type Error = KubeError;

impl Reconciler<Error> for Context {
    fn retries(&self) -> &Retries {
        &self.retries
    }
}

struct Context {
    client: Client,
    options: Options,
    /// Writes the cordon, drain and uncordon conditions of the nodes' MachineConfigNodes.
    progress: Recorder,
    drains: Drains,
    evictions: EvictionGate,
    retries: Retries,
}

/// Orders this controller's eviction requests around the eviction of its own pod, which ends the
/// process. The API server records an eviction in the pod's disruption budget before it deletes
/// the pod; a request cut between the two (the process ending while another node's drain has an
/// eviction in flight) leaves the budget counting a disruption that never happened, which holds
/// every drain behind it for two minutes, until the disruption controller drops it. So the own
/// pod's eviction waits for every other request in flight, and none starts once it was granted.
#[derive(Default)]
struct EvictionGate {
    lock: Arc<tokio::sync::RwLock<()>>,
    /// Held from the own pod's eviction until the process ends.
    closed: Mutex<Option<tokio::sync::OwnedRwLockWriteGuard<()>>>,
}

impl EvictionGate {
    /// For the eviction of another pod: shared with the others, after the own pod's is not granted.
    async fn other(&self) -> tokio::sync::RwLockReadGuard<'_, ()> {
        self.lock.read().await
    }

    /// For the eviction of the own pod: alone.
    async fn own(&self) -> tokio::sync::OwnedRwLockWriteGuard<()> {
        self.lock.clone().write_owned().await
    }

    /// The own pod's eviction was granted: no other starts from now on.
    fn close(&self, alone: tokio::sync::OwnedRwLockWriteGuard<()>) {
        *self.closed.lock().unwrap_or_else(|poisoned| poisoned.into_inner()) = Some(alone);
    }
}

/// Drains under way, by node.
#[derive(Default)]
struct Drains(Mutex<HashMap<String, DrainUnderWay>>);

struct DrainUnderWay {
    /// The node's `desiredDrain`.
    request: String,
    /// When its first attempt began.
    started: Instant,
    /// When the attempt after a failed one may begin.
    retry_at: Option<Instant>,
}

impl Drains {
    /// Before an attempt at `node`'s drain `request`, at `now`: when the drain began (now, unless
    /// it is under way), and how long the attempt has to wait. A failed attempt is retried after
    /// the retry policy's delay, whatever changes of the node come in between (the kubelet's
    /// status updates would otherwise start the next attempt at once).
    fn before_attempt(&self, node: &str, request: &str, now: Instant) -> (Instant, Option<Duration>) {
        let mut drains = self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        match drains.get(node) {
            Some(drain) if drain.request == request => {
                let wait = drain.retry_at.and_then(|at| at.checked_duration_since(now)).filter(|d| !d.is_zero());
                (drain.started, wait)
            }
            _ => {
                let drain = DrainUnderWay { request: request.to_string(), started: now, retry_at: None };
                drains.insert(node.to_string(), drain);
                (now, None)
            }
        }
    }

    /// An attempt at `node`'s drain failed at `now`; the next may begin `after` that.
    fn failed(&self, node: &str, now: Instant, after: Duration) {
        if let Some(drain) = self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).get_mut(node) {
            drain.retry_at = Some(now + after);
        }
    }

    fn forget(&self, node: &str) {
        self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).remove(node);
    }
}

/// Runs the drain controller until its watch ends (it retries errors, so: forever). It makes
/// its own client from `config`, without the client's retries of refused requests: a refused
/// eviction (429) is retried here, every [`Options::eviction_retry`] until the attempt times out,
/// where the client would back off exponentially for minutes.
pub async fn run(mut config: kube::Config, options: Options) -> Result<(), kube::Error> {
    config.default_retry = false;
    let client = Client::try_from(config)?;
    let progress = Recorder::new(client.clone());
    let retries = Retries::new("drain", options.eviction_retry, options.metrics.clone());
    let context = Arc::new(Context {
        client: client.clone(),
        options,
        progress,
        drains: Drains::default(),
        evictions: EvictionGate::default(),
        retries,
    });
    let controller = Controller::new(Api::<Node>::all(client), watcher::Config::default());
    reconciler::run(controller, reconcile, context).await;
    Ok(())
}

async fn reconcile(node: Arc<Node>, context: Arc<Context>) -> Result<Action, Error> {
    let name = node.name_any();
    let reference = node.object_ref(&());
    let request = match pending(&node) {
        Ok(Some(request)) => request,
        Ok(None) => {
            context.drains.forget(&name);
            return Ok(Action::await_change());
        }
        Err(unknown) => {
            // Retrying cannot help: the daemon has to ask for something else.
            tracing::error!("{unknown}");
            let note = unknown.to_string();
            publish(&context.client, &reference, EventType::Warning, "InvalidDrainRequest", &note, "Drain").await;
            return Ok(Action::await_change());
        }
    };
    let desired = annotation(&node, DESIRED_DRAIN_ANNOTATION).unwrap_or_default().to_string();
    let last = annotation(&node, LAST_APPLIED_DRAIN_ANNOTATION).unwrap_or_default().to_string();
    let annotations = node.annotations();
    let unschedulable = node.spec.as_ref().and_then(|s| s.unschedulable).unwrap_or(false);
    let (progress, node_name) = (&context.progress, name.as_str());
    let record = |step: Step| async move { progress.record_or_log(node_name, annotations, &step).await };
    match request {
        Request::Uncordon => {
            tracing::info!(node = %name, "uncordoning");
            if let Err(e) = set_unschedulable(&context.client, &name, false).await {
                record(Step::uncordon_failed(&e.to_string(), unschedulable)).await;
                return Err(e);
            }
            record(Step::uncordoned(unschedulable)).await;
            // A drain given up (the update was reverted) is no longer failing.
            context.options.metrics.clear_drain_failed(&name);
        }
        Request::Drain => {
            let policy = context.options.retry;
            let (started, wait) = context.drains.before_attempt(&name, &desired, Instant::now());
            if let Some(wait) = wait {
                return Ok(Action::requeue(wait));
            }
            let draining_for = started.elapsed();
            if let Some(warning) = policy.before_attempt(&name, draining_for) {
                // Upstream's `mcc_drain_err`: only past the drain timeout.
                context.options.metrics.set_drain_failed(&name);
                warn(&context, &reference, &warning).await;
            }
            tracing::info!(node = %name, "draining for {desired}");
            let result = match set_unschedulable(&context.client, &name, true).await {
                Err(e) => {
                    record(Step::cordon_failed(&e.to_string(), unschedulable)).await;
                    Err(anyhow::Error::new(e))
                }
                Ok(()) => {
                    if !unschedulable {
                        record(Step::cordoned(unschedulable)).await;
                    }
                    record(Step::draining(&desired, &last)).await;
                    let attempt = tokio::time::timeout(context.options.attempt_timeout, drain(&context, &name));
                    attempt.await.unwrap_or_else(|_| {
                        Err(anyhow::anyhow!(
                            "Draining node {name}: not done within {:?}",
                            context.options.attempt_timeout
                        ))
                    })
                }
            };
            if let Err(e) = result {
                let (after, warning) = policy.after_failure(draining_for, &format!("{e:#}"));
                context.drains.failed(&name, Instant::now(), after);
                tracing::warn!(node = %name, "drain failed, retrying in {after:?}: {e:#}");
                if let Some(warning) = warning {
                    warn(&context, &reference, &warning).await;
                }
                record(Step::drain_failed(&format!("{e:#}"), &desired, &last)).await;
                return Ok(Action::requeue(after));
            }
            context.options.metrics.clear_drain_failed(&name);
            record(Step::drained(&desired)).await;
        }
    }
    let patch = json!({ "metadata": { "annotations": { LAST_APPLIED_DRAIN_ANNOTATION: desired } } });
    Api::<Node>::all(context.client.clone())
        .patch(&name, &patch_params(), &Patch::Merge(&patch))
        .await
        .map_err(kube_error(format!("writing {LAST_APPLIED_DRAIN_ANNOTATION} on node {name}")))?;
    context.drains.forget(&name);
    let sync = match request {
        Request::Drain => SubControllerSync::Drain,
        Request::Uncordon => SubControllerSync::Uncordon,
    };
    let now = mco_metrics::unix_seconds(std::time::SystemTime::now());
    context.options.metrics.set_sub_controller_state(sync, &name, now);
    tracing::info!(node = %name, "{desired} done");
    Ok(Action::await_change())
}

async fn warn(context: &Context, reference: &k8s_openapi::api::core::v1::ObjectReference, warning: &Warning) {
    tracing::warn!(node = ?reference.name, "{}", warning.message);
    publish(&context.client, reference, EventType::Warning, warning.reason, &warning.message, "Drain").await;
}

async fn set_unschedulable(client: &Client, node: &str, unschedulable: bool) -> Result<(), KubeError> {
    let verb = if unschedulable { "cordoning" } else { "uncordoning" };
    let patch = json!({ "spec": { "unschedulable": unschedulable } });
    Api::<Node>::all(client.clone())
        .patch(node, &patch_params(), &Patch::Merge(&patch))
        .await
        .map_err(kube_error(format!("{verb} node {node}")))?;
    Ok(())
}

/// One drain attempt of a cordoned node: evict, wait for the pods to go, all within the attempt
/// timeout.
#[context("Draining node {node}")]
async fn drain(context: &Context, node: &str) -> anyhow::Result<()> {
    let deadline = Instant::now() + context.options.attempt_timeout;
    let pods = Api::<Pod>::all(context.client.clone())
        .list(&ListParams::default().fields(&format!("spec.nodeName={node}")))
        .await
        .context("listing the node's pods")?
        .items;
    let own = context.options.own_pod.as_ref().map(|(namespace, name)| (namespace.as_str(), name.as_str()));
    // The controller's own pod last: evicting it ends this attempt, which the next leader takes up.
    let [others, own] = eviction_waves(&pods, own);
    for (wave, own) in [(others, false), (own, true)] {
        futures::future::try_join_all(wave.iter().map(|pod| evict(context, pod, own, deadline))).await?;
        wait_until_gone(context, &wave, deadline).await?;
    }
    // Uncordoned meanwhile (by an administrator): new pods may have been scheduled.
    let now = Api::<Node>::all(context.client.clone()).get(node).await.context("reading the node")?;
    if !now.spec.and_then(|s| s.unschedulable).unwrap_or(false) {
        anyhow::bail!("the node was uncordoned during the drain");
    }
    Ok(())
}

/// Evicts one pod (`own`: the controller's own), asking again while a disruption budget refuses
/// (HTTP 429).
async fn evict(context: &Context, pod: &Pod, own: bool, deadline: Instant) -> anyhow::Result<()> {
    let (namespace, name) = (pod.namespace().unwrap_or_default(), pod.name_any());
    let api = Api::<Pod>::namespaced(context.client.clone(), &namespace);
    loop {
        let evicted = if own {
            let alone = context.evictions.own().await;
            let evicted = api.evict(&name, &EvictParams::default()).await;
            if evicted.is_ok() {
                context.evictions.close(alone);
            }
            evicted
        } else {
            let _shared = context.evictions.other().await;
            api.evict(&name, &EvictParams::default()).await
        };
        match evicted {
            Ok(_) => {
                tracing::info!("evicted pod {namespace}/{name}");
                return Ok(());
            }
            Err(kube::Error::Api(status)) if status.is_not_found() => return Ok(()),
            Err(kube::Error::Api(status))
                if status.code == 429 && Instant::now() + context.options.eviction_retry < deadline =>
            {
                tracing::debug!("evicting pod {namespace}/{name} refused, retrying: {}", status.message);
                tokio::time::sleep(context.options.eviction_retry).await;
            }
            // The API's own message ("Cannot evict pod as it would violate the pod's disruption
            // budget.") is what a person needs to see.
            Err(kube::Error::Api(status)) => anyhow::bail!("evicting pod {namespace}/{name}: {}", status.message),
            Err(e) => return Err(e).with_context(|| format!("evicting pod {namespace}/{name}")),
        }
    }
}

/// Waits until every evicted pod is deleted or replaced (same name, another UID).
async fn wait_until_gone(context: &Context, evicted: &[&Pod], deadline: Instant) -> anyhow::Result<()> {
    let mut remaining: Vec<&Pod> = evicted.to_vec();
    loop {
        let mut still_there = Vec::new();
        for pod in remaining {
            let api = Api::<Pod>::namespaced(context.client.clone(), &pod.namespace().unwrap_or_default());
            let now = api.get_opt(&pod.name_any()).await.context("checking evicted pods")?;
            if now.is_some_and(|now| now.uid() == pod.uid()) {
                still_there.push(pod);
            }
        }
        if still_there.is_empty() {
            return Ok(());
        }
        if Instant::now() >= deadline {
            let names: Vec<String> =
                still_there.iter().map(|p| format!("{}/{}", p.namespace().unwrap_or_default(), p.name_any())).collect();
            anyhow::bail!("evicted pods still there after {:?}: {}", context.options.attempt_timeout, names.join(", "));
        }
        remaining = still_there;
        tokio::time::sleep(context.options.deletion_poll).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whether `f` completes within a moment (a lock granted).
    async fn granted<F: std::future::Future>(f: F) -> Option<F::Output> {
        tokio::time::timeout(Duration::from_millis(100), f).await.ok()
    }

    #[tokio::test]
    async fn the_own_pods_eviction_waits_for_the_others_in_flight_and_closes_the_gate() {
        let gate = EvictionGate::default();
        let in_flight = gate.other().await;
        let second = gate.other().await;
        assert!(granted(gate.own()).await.is_none(), "the own pod's eviction waits for those in flight");
        drop((in_flight, second));
        let alone = granted(gate.own()).await.expect("alone once they are done");
        assert!(granted(gate.other()).await.is_none(), "no other eviction during the own pod's");
        gate.close(alone);
        assert!(granted(gate.other()).await.is_none(), "nor after it was granted");
    }

    #[tokio::test]
    async fn a_refused_own_eviction_lets_the_others_go_on() {
        let gate = EvictionGate::default();
        drop(gate.own().await);
        assert!(granted(gate.other()).await.is_some());
    }

    #[test]
    fn a_failed_attempt_waits_its_delay_whatever_comes_in_between() {
        let drains = Drains::default();
        let t0 = Instant::now();
        let s = Duration::from_secs;
        assert_eq!(drains.before_attempt("n", "drain-a", t0), (t0, None), "a new drain starts at once");
        assert_eq!(drains.before_attempt("n", "drain-a", t0 + s(10)), (t0, None), "under way: its start is kept");
        drains.failed("n", t0 + s(30), s(5));
        assert_eq!(
            drains.before_attempt("n", "drain-a", t0 + s(31)),
            (t0, Some(s(4))),
            "a node change before the delay"
        );
        assert_eq!(drains.before_attempt("n", "drain-a", t0 + s(35)), (t0, None), "the delay is over");
        assert_eq!(drains.before_attempt("other", "drain-a", t0 + s(31)), (t0 + s(31), None), "another node's drain");
        assert_eq!(drains.before_attempt("n", "drain-b", t0 + s(32)), (t0 + s(32), None), "a new request starts over");
        drains.failed("n", t0 + s(40), s(60));
        drains.forget("n");
        assert_eq!(drains.before_attempt("n", "drain-b", t0 + s(41)), (t0 + s(41), None), "forgotten once done");
    }
}
