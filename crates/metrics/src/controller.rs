//! The controller's metrics: the original's pool gauges (`mco_machine_count`, ...), the drain
//! error per node (`mcc_drain_err`, what the `MCCDrainError` alert fires on), and, beyond the
//! original's controller metrics that alerts and dashboards use.

use mco_api::machineconfiguration::MachineConfigPoolStatus;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PoolLabel {
    pub pool: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct NodeLabel {
    pub node: String,
}

/// The controller's metric families.
#[derive(Clone, Debug, Default)]
pub struct ControllerMetrics {
    pub machine_count: Family<PoolLabel, Gauge>,
    pub updated_machine_count: Family<PoolLabel, Gauge>,
    pub degraded_machine_count: Family<PoolLabel, Gauge>,
    pub unavailable_machine_count: Family<PoolLabel, Gauge>,
    /// 1 while the node's drain keeps failing, 0 once it succeeded (the original's).
    pub drain_err: Family<NodeLabel, Gauge>,
}

impl ControllerMetrics {
    /// New families, registered in `registry`.
    pub fn register(registry: &mut Registry) -> Self {
        let metrics = ControllerMetrics::default();
        for (name, help, family) in [
            ("mco_machine_count", "total number of machines in a specified pool", &metrics.machine_count),
            (
                "mco_updated_machine_count",
                "total number of updated machines in specified pool",
                &metrics.updated_machine_count,
            ),
            (
                "mco_degraded_machine_count",
                "total number of degraded machines in specified pool",
                &metrics.degraded_machine_count,
            ),
            (
                "mco_unavailable_machine_count",
                "total number of unavailable machines in specified pool",
                &metrics.unavailable_machine_count,
            ),
        ] {
            registry.register(name, help, family.clone());
        }
        registry.register("mcc_drain_err", "logs failed drain", metrics.drain_err.clone());
        metrics
    }

    /// The pool gauges from the status the node controller wrote for `pool`.
    pub fn set_pool(&self, pool: &str, status: &MachineConfigPoolStatus) {
        let label = PoolLabel { pool: pool.to_string() };
        let count = |n: Option<i32>| i64::from(n.unwrap_or(0));
        self.machine_count.get_or_create(&label).set(count(status.machine_count));
        self.updated_machine_count.get_or_create(&label).set(count(status.updated_machine_count));
        self.degraded_machine_count.get_or_create(&label).set(count(status.degraded_machine_count));
        self.unavailable_machine_count.get_or_create(&label).set(count(status.unavailable_machine_count));
    }

    /// Whether `node`'s drain is failing.
    pub fn set_drain_failing(&self, node: &str, failing: bool) {
        self.drain_err.get_or_create(&NodeLabel { node: node.to_string() }).set(i64::from(failing));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pool_gauges_and_drain_errors_render_with_the_originals_names() {
        let mut registry = Registry::default();
        let metrics = ControllerMetrics::register(&mut registry);
        let status = MachineConfigPoolStatus {
            machine_count: Some(5),
            updated_machine_count: Some(3),
            degraded_machine_count: Some(1),
            unavailable_machine_count: Some(2),
            ..Default::default()
        };
        metrics.set_pool("worker", &status);
        metrics.set_drain_failing("worker-0", true);
        let text = crate::render(&registry);
        for line in [
            "# TYPE mco_machine_count gauge",
            "mco_machine_count{pool=\"worker\"} 5",
            "mco_updated_machine_count{pool=\"worker\"} 3",
            "mco_degraded_machine_count{pool=\"worker\"} 1",
            "mco_unavailable_machine_count{pool=\"worker\"} 2",
            "mcc_drain_err{node=\"worker-0\"} 1",
        ] {
            assert!(text.lines().any(|l| l == line), "{line} not in\n{text}");
        }
        metrics.set_drain_failing("worker-0", false);
        assert!(crate::render(&registry).lines().any(|l| l == "mcc_drain_err{node=\"worker-0\"} 0"));
    }
}
