//! The daemon's metrics: the original's `mcd_host_os_and_version`, `mcd_state`,
//! `mcd_update_state`, `mcd_config_drift`, `mcd_reboots_failed_total`, `mcd_pivot_errors_total`
//! and `mcd_kubelet_state`, and, beyond the original, how long the phases of an update take on
//! this node.

use prometheus_client::encoding::{EncodeLabelSet, EncodeLabelValue, LabelValueEncoder};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct HostOsLabels {
    pub os: String,
    pub version: String,
}

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

/// A phase of an update on the node.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
pub enum UpdatePhase {
    /// Waiting for the drain controller to cordon and drain the node.
    Drain,
    /// The new OS image pulled into the node's OSTree repository (only updates that change it).
    Pull,
    /// Files, units, kernel arguments and the new OS deployment staged, post-update actions run.
    Deploy,
    /// From the reboot request until the daemon, running on the new boot, confirms the update.
    Reboot,
}

impl UpdatePhase {
    pub fn as_str(self) -> &'static str {
        match self {
            UpdatePhase::Drain => "drain",
            UpdatePhase::Pull => "pull",
            UpdatePhase::Deploy => "deploy",
            UpdatePhase::Reboot => "reboot",
        }
    }
}

impl EncodeLabelValue for UpdatePhase {
    fn encode(&self, encoder: &mut LabelValueEncoder) -> Result<(), std::fmt::Error> {
        std::fmt::Write::write_str(encoder, self.as_str())
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PhaseLabel {
    pub phase: UpdatePhase,
}

fn phase_histogram() -> Histogram {
    // 0.05 s to ~1.8 h: a rebootless file write takes a fraction of a second, a pull or a reboot
    // minutes, and a drain may go on past its one-hour timeout.
    Histogram::new(exponential_buckets(0.05, 2.0, 18))
}

/// The daemon's metric families.
#[derive(Clone, Debug)]
pub struct DaemonMetrics {
    /// One series set to 1: the node's OS (`ID` of its os-release, upper-cased as the original's)
    /// and version (`unsupported` and "" when unknown).
    pub host_os: Family<HostOsLabels, Gauge>,
    /// One series, the node's state and reason, set to the time it was entered (the original
    /// resets the family before each set, so a state change leaves no stale series).
    pub state: Family<StateLabels, Gauge>,
    /// One series: the last update's config and its error ("" when it completed), with its time.
    pub update_state: Family<UpdateLabels, Gauge>,
    /// When config drift was last found (0: never).
    pub config_drift: Gauge,
    /// Reboot requests that failed.
    pub reboots_failed: Counter,
    /// Failures of the OS update (image pull, staging the deployment), reset to 0 by an update
    /// that gets past it; a gauge, as the original's despite its name.
    pub pivot_errors: Gauge,
    pub kubelet_state: Gauge,
    pub phase_seconds: Family<PhaseLabel, Histogram, fn() -> Histogram>,
}

impl Default for DaemonMetrics {
    fn default() -> Self {
        DaemonMetrics {
            host_os: Family::default(),
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
        registry.register(
            "mcd_host_os_and_version",
            "os that MCD is running on and version if RHCOS",
            metrics.host_os.clone(),
        );
        registry.register("mcd_state", "state of daemon on specified node", metrics.state.clone());
        registry.register("mcd_update_state", "completed update config or error", metrics.update_state.clone());
        registry.register("mcd_config_drift", "timestamp for config drift", metrics.config_drift.clone());
        // A counter's name gets `_total` when written: `mcd_reboots_failed_total`, as the original's.
        registry.register("mcd_reboots_failed", "Total number of reboots that failed", metrics.reboots_failed.clone());
        registry.register(
            "mcd_pivot_errors_total",
            "Total number of errors encountered during pivot",
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

    pub fn set_host_os(&self, os: &str, version: &str) {
        self.host_os.clear();
        self.host_os.get_or_create(&HostOsLabels { os: os.to_string(), version: version.to_string() }).set(1);
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

    pub fn observe_phase(&self, phase: UpdatePhase, took: std::time::Duration) {
        self.phase_seconds.get_or_create(&PhaseLabel { phase }).observe(took.as_secs_f64());
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn rendered(metrics: impl FnOnce(&DaemonMetrics)) -> String {
        let mut registry = Registry::default();
        metrics(&DaemonMetrics::register(&mut registry));
        crate::render(&registry)
    }

    fn assert_lines(text: &str, lines: &[&str]) {
        for line in lines {
            assert!(text.lines().any(|l| l == *line), "{line} not in\n{text}");
        }
    }

    #[test]
    fn one_state_series_at_a_time_with_the_originals_names() {
        let text = rendered(|metrics| {
            metrics.set_state("Working", "", 100);
            metrics.set_state("Degraded", "failed to drain", 200);
            metrics.set_update_state("rendered-worker-b", "", 300);
        });
        assert_lines(
            &text,
            &[
                "mcd_state{state=\"Degraded\",reason=\"failed to drain\"} 200",
                "mcd_update_state{config=\"rendered-worker-b\",err=\"\"} 300",
                "mcd_config_drift 0",
                "mcd_kubelet_state 0",
            ],
        );
        assert!(!text.contains("Working"), "a state left behind:\n{text}");
    }

    #[test]
    fn the_host_os_is_one_series_set_to_one() {
        let text = rendered(|metrics| {
            metrics.set_host_os("unsupported", "");
            metrics.set_host_os("RHCOS", "4.18");
        });
        assert_lines(
            &text,
            &[
                "# HELP mcd_host_os_and_version os that MCD is running on and version if RHCOS.",
                "# TYPE mcd_host_os_and_version gauge",
                "mcd_host_os_and_version{os=\"RHCOS\",version=\"4.18\"} 1",
            ],
        );
        assert!(!text.contains("unsupported"), "an OS left behind:\n{text}");
    }

    /// The original's types: the reboot failures a counter, the pivot errors a gauge (it is reset).
    #[test]
    fn failed_reboots_count_and_pivot_errors_are_a_gauge() {
        let text = rendered(|metrics| {
            metrics.reboots_failed.inc();
            metrics.pivot_errors.inc();
            metrics.pivot_errors.inc();
        });
        assert_lines(
            &text,
            &[
                "# TYPE mcd_reboots_failed counter",
                "mcd_reboots_failed_total 1",
                "# TYPE mcd_pivot_errors_total gauge",
                "mcd_pivot_errors_total 2",
            ],
        );
    }

    #[test]
    fn each_phase_is_a_series_of_one_histogram() {
        let text = rendered(|metrics| {
            for (phase, seconds) in [
                (UpdatePhase::Drain, 95.0),
                (UpdatePhase::Pull, 40.0),
                (UpdatePhase::Deploy, 0.02),
                (UpdatePhase::Reboot, 300.0),
            ] {
                metrics.observe_phase(phase, Duration::from_secs_f64(seconds));
            }
        });
        assert_lines(
            &text,
            &[
                "# TYPE mco_daemon_update_phase_seconds histogram",
                "mco_daemon_update_phase_seconds_bucket{le=\"0.05\",phase=\"deploy\"} 1",
                "mco_daemon_update_phase_seconds_bucket{le=\"51.2\",phase=\"pull\"} 1",
                "mco_daemon_update_phase_seconds_bucket{le=\"102.4\",phase=\"drain\"} 1",
                "mco_daemon_update_phase_seconds_bucket{le=\"204.8\",phase=\"reboot\"} 0",
                "mco_daemon_update_phase_seconds_bucket{le=\"409.6\",phase=\"reboot\"} 1",
                "mco_daemon_update_phase_seconds_bucket{le=\"6553.6\",phase=\"drain\"} 1",
                "mco_daemon_update_phase_seconds_count{phase=\"reboot\"} 1",
                "mco_daemon_update_phase_seconds_sum{phase=\"deploy\"} 0.02",
            ],
        );
    }
}
