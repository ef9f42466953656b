//! The daemon's metrics: the original's `mcd_state`, `mcd_update_state`, `mcd_config_drift`,
//! `mcd_reboots_failed_total`, `mcd_pivot_errors_total` and `mcd_kubelet_state`, and, beyond the
//! original, how long the phases of an update take on this node.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct StateLabels {
    pub state: String,
    pub reason: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct UpdateLabels {
    pub config: String,
    pub err: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PhaseLabel {
    /// `drain` (waiting for the drain controller) or `apply` (files, units, OS image pull and
    /// deploy).
    pub phase: String,
}

fn phase_histogram() -> Histogram {
    // 0.1 s to ~55 min: a rebootless file write takes a fraction of a second, a drain minutes.
    Histogram::new(exponential_buckets(0.1, 2.0, 16))
}

/// The daemon's metric families.
#[derive(Clone, Debug)]
pub struct DaemonMetrics {
    /// One series, the node's state and reason, set to the time it was entered (the original
    /// resets the family before each set, so a state change leaves no stale series).
    pub state: Family<StateLabels, Gauge>,
    /// One series: the last update's config and its error ("" when it completed), with its time.
    pub update_state: Family<UpdateLabels, Gauge>,
    /// When config drift was last found (0: never).
    pub config_drift: Gauge,
    pub reboots_failed: Counter,
    pub pivot_errors: Gauge,
    pub kubelet_state: Gauge,
    pub phase_seconds: Family<PhaseLabel, Histogram, fn() -> Histogram>,
}

impl Default for DaemonMetrics {
    fn default() -> Self {
        DaemonMetrics {
            state: Family::default(),
            update_state: Family::default(),
            config_drift: Gauge::default(),
            reboots_failed: Counter::default(),
            pivot_errors: Gauge::default(),
            kubelet_state: Gauge::default(),
            phase_seconds: Family::new_with_constructor(phase_histogram),
        }
    }
}

impl DaemonMetrics {
    /// New families, registered in `registry`.
    pub fn register(registry: &mut Registry) -> Self {
        let metrics = DaemonMetrics::default();
        registry.register("mcd_state", "state of daemon on specified node", metrics.state.clone());
        registry.register("mcd_update_state", "completed update config or error", metrics.update_state.clone());
        registry.register("mcd_config_drift", "timestamp for config drift", metrics.config_drift.clone());
        // A counter's name gets `_total` when written: `mcd_reboots_failed_total`, as the original's.
        registry.register("mcd_reboots_failed", "Total number of reboots that failed.", metrics.reboots_failed.clone());
        registry.register(
            "mcd_pivot_errors_total",
            "Total number of errors encountered during pivot.",
            metrics.pivot_errors.clone(),
        );
        registry.register("mcd_kubelet_state", "state of kubelet health monitor", metrics.kubelet_state.clone());
        registry.register(
            "mco_daemon_update_phase_seconds",
            "seconds the phases of an update took on this node",
            metrics.phase_seconds.clone(),
        );
        metrics
    }

    /// The node entered `state` (Done, Working, Degraded, ...) for `reason` at `now` (Unix seconds).
    pub fn set_state(&self, state: &str, reason: &str, now: i64) {
        self.state.clear();
        self.state.get_or_create(&StateLabels { state: state.to_string(), reason: reason.to_string() }).set(now);
    }

    /// An update to `config` ended at `now`, with `err` ("" when it completed).
    pub fn set_update_state(&self, config: &str, err: &str, now: i64) {
        self.update_state.clear();
        self.update_state.get_or_create(&UpdateLabels { config: config.to_string(), err: err.to_string() }).set(now);
    }

    pub fn observe_phase(&self, phase: &str, seconds: f64) {
        self.phase_seconds.get_or_create(&PhaseLabel { phase: phase.to_string() }).observe(seconds);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_state_series_at_a_time_with_the_originals_names() {
        let mut registry = Registry::default();
        let metrics = DaemonMetrics::register(&mut registry);
        metrics.set_state("Working", "", 100);
        metrics.set_state("Degraded", "failed to drain", 200);
        metrics.set_update_state("rendered-worker-b", "", 300);
        metrics.reboots_failed.inc();
        metrics.observe_phase("apply", 0.4);
        let text = crate::render(&registry);
        for line in [
            "mcd_state{state=\"Degraded\",reason=\"failed to drain\"} 200",
            "mcd_update_state{config=\"rendered-worker-b\",err=\"\"} 300",
            "mcd_config_drift 0",
            "mcd_reboots_failed_total 1",
            "mcd_pivot_errors_total 0",
            "mcd_kubelet_state 0",
            "mco_daemon_update_phase_seconds_bucket{le=\"0.4\",phase=\"apply\"} 1",
        ] {
            assert!(text.lines().any(|l| l == line), "{line} not in\n{text}");
        }
        assert!(!text.contains("Working"), "a state left behind:\n{text}");
    }
}
