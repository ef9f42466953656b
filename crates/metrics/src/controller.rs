//! The controller's metrics: the original's (`pkg/controller/common/metrics.go`: the pool
//! gauges, `mco_state`, `mcc_drain_err` that the `MCCDrainError` alert fires on, `mcc_pool_alert`,
//! `os_image_url_override`, `mcc_sub_controller_state`, `mcc_boot_image_skew_enforcement_none`)
//! with its names, types, HELP and `initialize` series, and, not in the original, how long a
//! pool's render takes, how far each pool's rollout is and which syncs fail, why.
//!
//! Series labelled by a pool or a node go when the pool or the node does ([`forget_pool`],
//! [`retain_nodes`]); the original keeps them until the process exits.
//!
//! [`forget_pool`]: ControllerMetrics::forget_pool
//! [`retain_nodes`]: ControllerMetrics::retain_nodes

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard};

use mco_api::machineconfiguration::MachineConfigPoolStatus;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

/// The label value of the series the original creates at start, so that dashboards see each
/// family before it has a real value.
pub const INITIALIZE: &str = "initialize";

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PoolLabel {
    pub pool: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct NodeLabel {
    pub node: String,
}

/// `mco_state`: a node, its pool, and the pool's newest true condition (type and reason).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct NodeStateLabels {
    pub node: String,
    pub pool: String,
    pub state: String,
    pub reason: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct SubControllerLabels {
    pub subcontroller: String,
    pub state: String,
    pub object: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PoolNodesLabels {
    pub pool: String,
    /// One of [`PoolNodes::STATES`].
    pub state: String,
}

/// `mco_controller_reconcile_errors_total`: a controller and the kind of its failed sync.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReconcileErrorLabels {
    /// The controller (`render`, `node`, `drain`...).
    pub controller: String,
    /// A few fixed values per controller (`kube`, `os_image`...).
    pub error: String,
}

/// What a sub-controller last completed (`mcc_sub_controller_state`), with the original's
/// label values; the object is a node for drains, a pool otherwise.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SubControllerSync {
    /// The drain controller acknowledged a drain of the node.
    Drain,
    /// The drain controller acknowledged an uncordon of the node.
    Uncordon,
    /// The node controller targeted nodes of the pool.
    PoolTargeted,
    /// The render controller pointed the pool at a new rendered config.
    PoolRendered,
    /// The kubelet config controller wrote a KubeletConfig's MachineConfig for the pool.
    KubeletConfigSynced,
    /// The container runtime config controller wrote a ContainerRuntimeConfig's MachineConfig
    /// for the pool.
    ContainerRuntimeConfigSynced,
}

impl SubControllerSync {
    const OF_NODES: [SubControllerSync; 2] = [SubControllerSync::Drain, SubControllerSync::Uncordon];
    const OF_POOLS: [SubControllerSync; 4] = [
        SubControllerSync::PoolTargeted,
        SubControllerSync::PoolRendered,
        SubControllerSync::KubeletConfigSynced,
        SubControllerSync::ContainerRuntimeConfigSynced,
    ];

    fn labels(self, object: &str) -> SubControllerLabels {
        let (subcontroller, state) = match self {
            SubControllerSync::Drain => ("machine-config-controller-drain", "drain"),
            SubControllerSync::Uncordon => ("machine-config-controller-drain", "uncordon"),
            SubControllerSync::PoolTargeted => ("machine-config-controller-node", "Sync Machine Config Pool"),
            SubControllerSync::PoolRendered => {
                ("machine-config-controller-render", "Sync Machine Config Pool with new MC")
            }
            SubControllerSync::KubeletConfigSynced => {
                ("machine-config-controller-kubelet-config", "Sync Kubelet Config")
            }
            SubControllerSync::ContainerRuntimeConfigSynced => {
                ("machine-config-controller-container-runtime-config", "Sync Container Runtime Config")
            }
        };
        SubControllerLabels { subcontroller: subcontroller.into(), state: state.into(), object: object.into() }
    }
}

/// How many of a pool's nodes are where in its rollout (`mco_pool_nodes`); every node counts in
/// exactly one state.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PoolNodes {
    /// On the pool's current rendered config, and Done.
    pub updated: i64,
    /// Targeted at it, not there yet.
    pub updating: i64,
    /// The daemon reports Degraded or Unreconcilable.
    pub degraded: i64,
    /// Not yet targeted at it.
    pub waiting: i64,
}

impl PoolNodes {
    pub const STATES: [&str; 4] = ["updated", "updating", "degraded", "waiting"];

    fn counts(&self) -> [i64; 4] {
        [self.updated, self.updating, self.degraded, self.waiting]
    }
}

/// What a pool's sync says about one of its nodes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PoolMember {
    pub node: String,
    /// `mcc_pool_alert`: a custom pool selects the node but it stays in master.
    pub alert: bool,
}

fn render_histogram() -> Histogram {
    // 0.5 ms to ~4 s: a small pool renders in ~1 ms, 200 MachineConfigs (5 MB) in ~70 ms.
    Histogram::new(exponential_buckets(0.0005, 2.0, 14))
}

/// The series that exist per pool and per node, to remove them (a family cannot list its series).
#[derive(Debug, Default)]
struct Series {
    /// Pools with series.
    pools: HashSet<String>,
    /// Nodes with series.
    nodes: HashMap<String, NodeSeries>,
}

#[derive(Debug, Default)]
struct NodeSeries {
    /// The pool whose sync last set the node's `mcc_pool_alert` and `mco_state`.
    pool: Option<String>,
    state: Option<NodeStateLabels>,
}

/// The controller's metric families.
#[derive(Clone, Debug)]
pub struct ControllerMetrics {
    pub os_image_url_override: Family<PoolLabel, Gauge>,
    pub boot_image_skew_enforcement_none: Gauge,
    /// 1 once a node's drain has gone on longer than the drain timeout; deleted when it succeeds.
    pub drain_err: Family<NodeLabel, Gauge>,
    /// 1 for a node a custom pool selects that stays in master, 0 for other nodes in a pool.
    pub pool_alert: Family<NodeLabel, Gauge>,
    /// When each sub-controller last completed what its labels say (Unix seconds).
    pub sub_controller_state: Family<SubControllerLabels, Gauge>,
    /// One series per node in a pool: its pool's newest true condition, set to the time of the
    /// pool's last sync (the original keeps a series per condition a node has ever seen).
    pub state: Family<NodeStateLabels, Gauge>,
    pub machine_count: Family<PoolLabel, Gauge>,
    pub updated_machine_count: Family<PoolLabel, Gauge>,
    pub degraded_machine_count: Family<PoolLabel, Gauge>,
    pub unavailable_machine_count: Family<PoolLabel, Gauge>,
    /// Not in the original: seconds one render of a pool took.
    pub render_seconds: Family<PoolLabel, Histogram, fn() -> Histogram>,
    /// Not in the original: a pool's nodes per rollout state ([`PoolNodes`]).
    pub pool_nodes: Family<PoolNodesLabels, Gauge>,
    /// Not in the original: failed syncs per controller and kind of failure.
    pub reconcile_errors: Family<ReconcileErrorLabels, Counter>,
    series: Arc<Mutex<Series>>,
}

impl Default for ControllerMetrics {
    fn default() -> Self {
        ControllerMetrics {
            os_image_url_override: Family::default(),
            boot_image_skew_enforcement_none: Gauge::default(),
            drain_err: Family::default(),
            pool_alert: Family::default(),
            sub_controller_state: Family::default(),
            state: Family::default(),
            machine_count: Family::default(),
            updated_machine_count: Family::default(),
            degraded_machine_count: Family::default(),
            unavailable_machine_count: Family::default(),
            render_seconds: Family::new_with_constructor(render_histogram),
            pool_nodes: Family::default(),
            reconcile_errors: Family::default(),
            series: Arc::default(),
        }
    }
}

fn pool_label(pool: &str) -> PoolLabel {
    PoolLabel { pool: pool.to_string() }
}

fn node_label(node: &str) -> NodeLabel {
    NodeLabel { node: node.to_string() }
}

fn pool_nodes_label(pool: &str, state: &str) -> PoolNodesLabels {
    PoolNodesLabels { pool: pool.to_string(), state: state.to_string() }
}

impl ControllerMetrics {
    /// New families, registered in `registry`, with the original's `initialize` series.
    pub fn register(registry: &mut Registry) -> Self {
        let metrics = ControllerMetrics::default();
        registry.register("os_image_url_override", "state of OS image override", metrics.os_image_url_override.clone());
        registry.register("mcc_drain_err", "logs failed drain", metrics.drain_err.clone());
        registry.register("mcc_pool_alert", "pool status alert", metrics.pool_alert.clone());
        registry.register(
            "mcc_sub_controller_state",
            "state of sub-controllers in the MCC",
            metrics.sub_controller_state.clone(),
        );
        registry.register("mco_state", "state of a specified pool", metrics.state.clone());
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
        registry.register(
            "mcc_boot_image_skew_enforcement_none",
            "Set to 1 when boot image skew enforcement mode is None, indicating scaling may not be successful as \
             bootimages are out of date",
            metrics.boot_image_skew_enforcement_none.clone(),
        );
        registry.register(
            "mco_render_duration_seconds",
            "seconds one render of a pool's MachineConfigs took",
            metrics.render_seconds.clone(),
        );
        registry.register(
            "mco_pool_nodes",
            "nodes of a pool per rollout state (updated, updating, degraded, waiting)",
            metrics.pool_nodes.clone(),
        );
        registry.register(
            "mco_controller_reconcile_errors",
            "failed syncs per controller and kind of failure",
            metrics.reconcile_errors.clone(),
        );
        metrics.os_image_url_override.get_or_create(&pool_label(INITIALIZE)).set(0);
        metrics.drain_err.get_or_create(&node_label(INITIALIZE)).set(0);
        metrics.pool_alert.get_or_create(&node_label(INITIALIZE)).set(0);
        let initialize = SubControllerLabels {
            subcontroller: INITIALIZE.into(),
            state: INITIALIZE.into(),
            object: INITIALIZE.into(),
        };
        metrics.sub_controller_state.get_or_create(&initialize).set(0);
        metrics
    }

    fn series(&self) -> MutexGuard<'_, Series> {
        self.series.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn track_pool(&self, pool: &str) {
        let mut series = self.series();
        if !series.pools.contains(pool) {
            series.pools.insert(pool.to_string());
        }
    }

    fn track_node(&self, node: &str) {
        self.series().nodes.entry(node.to_string()).or_default();
    }

    /// The pool gauges from the status the node controller computed for `pool`.
    pub fn set_pool(&self, pool: &str, status: &MachineConfigPoolStatus) {
        self.track_pool(pool);
        let label = pool_label(pool);
        let count = |n: Option<i32>| i64::from(n.unwrap_or(0));
        self.machine_count.get_or_create(&label).set(count(status.machine_count));
        self.updated_machine_count.get_or_create(&label).set(count(status.updated_machine_count));
        self.degraded_machine_count.get_or_create(&label).set(count(status.degraded_machine_count));
        self.unavailable_machine_count.get_or_create(&label).set(count(status.unavailable_machine_count));
    }

    pub fn set_pool_nodes(&self, pool: &str, nodes: &PoolNodes) {
        self.track_pool(pool);
        for (state, count) in PoolNodes::STATES.into_iter().zip(nodes.counts()) {
            self.pool_nodes.get_or_create(&pool_nodes_label(pool, state)).set(count);
        }
    }

    /// The nodes of `pool` are exactly `members`: each gets its `mcc_pool_alert` and, when the
    /// pool has a true condition, its `mco_state` (`state`: condition type and reason) at `now`
    /// (Unix seconds). Nodes this pool had before and no longer has lose both.
    pub fn set_pool_members(&self, pool: &str, members: &[PoolMember], state: Option<(&str, &str)>, now: i64) {
        let mut series = self.series();
        let current: HashSet<&str> = members.iter().map(|m| m.node.as_str()).collect();
        for (node, node_series) in &mut series.nodes {
            if node_series.pool.as_deref() == Some(pool) && !current.contains(node.as_str()) {
                self.leave_pool(node, node_series);
            }
        }
        for member in members {
            self.pool_alert.get_or_create(&node_label(&member.node)).set(i64::from(member.alert));
            let labels = state.map(|(state, reason)| NodeStateLabels {
                node: member.node.clone(),
                pool: pool.to_string(),
                state: state.to_string(),
                reason: reason.to_string(),
            });
            if let Some(labels) = &labels {
                self.state.get_or_create(labels).set(now);
            }
            let node_series = series.nodes.entry(member.node.clone()).or_default();
            node_series.pool = Some(pool.to_string());
            let previous = std::mem::replace(&mut node_series.state, labels);
            if let Some(previous) = previous.filter(|p| Some(p) != node_series.state.as_ref()) {
                self.state.remove(&previous);
            }
        }
    }

    /// Removes the series a pool's sync set for `node`.
    fn leave_pool(&self, node: &str, node_series: &mut NodeSeries) {
        node_series.pool = None;
        if let Some(labels) = node_series.state.take() {
            self.state.remove(&labels);
        }
        self.pool_alert.remove(&node_label(node));
    }

    /// `node`'s drain has gone on longer than the drain timeout.
    pub fn set_drain_failed(&self, node: &str) {
        self.track_node(node);
        self.drain_err.get_or_create(&node_label(node)).set(1);
    }

    /// `node`'s drain succeeded: its `mcc_drain_err` series goes.
    pub fn clear_drain_failed(&self, node: &str) {
        self.drain_err.remove(&node_label(node));
    }

    /// Whether the render of `pool` has an OS image other than the ControllerConfig's.
    pub fn set_os_image_url_override(&self, pool: &str, overridden: bool) {
        self.track_pool(pool);
        self.os_image_url_override.get_or_create(&pool_label(pool)).set(i64::from(overridden));
    }

    pub fn observe_render(&self, pool: &str, seconds: f64) {
        self.track_pool(pool);
        self.render_seconds.get_or_create(&pool_label(pool)).observe(seconds);
    }

    pub fn set_boot_image_skew_enforcement_none(&self, none: bool) {
        self.boot_image_skew_enforcement_none.set(i64::from(none));
    }

    /// A sub-controller completed `sync` of `object` (a node or a pool) at `now` (Unix seconds).
    pub fn set_sub_controller_state(&self, sync: SubControllerSync, object: &str, now: i64) {
        if SubControllerSync::OF_NODES.contains(&sync) {
            self.track_node(object);
        } else {
            self.track_pool(object);
        }
        self.sub_controller_state.get_or_create(&sync.labels(object)).set(now);
    }

    /// Removes every series of `pool` (it was deleted), its nodes' `mco_state` included.
    pub fn forget_pool(&self, pool: &str) {
        let mut series = self.series();
        series.pools.remove(pool);
        let label = pool_label(pool);
        for family in [
            &self.os_image_url_override,
            &self.machine_count,
            &self.updated_machine_count,
            &self.degraded_machine_count,
            &self.unavailable_machine_count,
        ] {
            family.remove(&label);
        }
        self.render_seconds.remove(&label);
        for state in PoolNodes::STATES {
            self.pool_nodes.remove(&pool_nodes_label(pool, state));
        }
        for sync in SubControllerSync::OF_POOLS {
            self.sub_controller_state.remove(&sync.labels(pool));
        }
        for (node, node_series) in &mut series.nodes {
            if node_series.pool.as_deref() == Some(pool) {
                self.leave_pool(node, node_series);
            }
        }
    }

    /// Removes the series of pools for which `keep` is false.
    pub fn retain_pools(&self, keep: impl Fn(&str) -> bool) {
        let gone: Vec<String> = self.series().pools.iter().filter(|p| !keep(p)).cloned().collect();
        gone.iter().for_each(|pool| self.forget_pool(pool));
    }

    /// Removes every series of the nodes for which `keep` is false (they were deleted).
    pub fn retain_nodes(&self, keep: impl Fn(&str) -> bool) {
        let mut series = self.series();
        let gone: Vec<String> = series.nodes.keys().filter(|n| !keep(n)).cloned().collect();
        for node in gone {
            if let Some(mut node_series) = series.nodes.remove(&node) {
                self.leave_pool(&node, &mut node_series);
            }
            self.drain_err.remove(&node_label(&node));
            for sync in SubControllerSync::OF_NODES {
                self.sub_controller_state.remove(&sync.labels(&node));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn registered() -> (Registry, ControllerMetrics) {
        let mut registry = Registry::default();
        let metrics = ControllerMetrics::register(&mut registry);
        (registry, metrics)
    }

    #[track_caller]
    fn assert_lines(registry: &Registry, present: &[&str], absent: &[&str]) {
        let text = crate::render(registry);
        for line in present {
            assert!(text.lines().any(|l| l == *line), "{line} not in\n{text}");
        }
        for prefix in absent {
            assert!(!text.lines().any(|l| l.starts_with(prefix)), "{prefix}… in\n{text}");
        }
    }

    #[test]
    fn the_originals_families_and_initialize_series() {
        let (registry, _) = registered();
        assert_lines(
            &registry,
            &[
                "# HELP os_image_url_override state of OS image override.",
                "# TYPE os_image_url_override gauge",
                "os_image_url_override{pool=\"initialize\"} 0",
                "# HELP mcc_drain_err logs failed drain.",
                "# TYPE mcc_drain_err gauge",
                "mcc_drain_err{node=\"initialize\"} 0",
                "# HELP mcc_pool_alert pool status alert.",
                "# TYPE mcc_pool_alert gauge",
                "mcc_pool_alert{node=\"initialize\"} 0",
                "# HELP mcc_sub_controller_state state of sub-controllers in the MCC.",
                "# TYPE mcc_sub_controller_state gauge",
                "mcc_sub_controller_state{subcontroller=\"initialize\",state=\"initialize\",object=\"initialize\"} 0",
                "# HELP mcc_boot_image_skew_enforcement_none Set to 1 when boot image skew enforcement mode is None, \
                 indicating scaling may not be successful as bootimages are out of date.",
                "# TYPE mcc_boot_image_skew_enforcement_none gauge",
                "mcc_boot_image_skew_enforcement_none 0",
            ],
            &[],
        );
    }

    #[test]
    fn pool_series_and_their_removal() {
        let (registry, metrics) = registered();
        let status = MachineConfigPoolStatus {
            machine_count: Some(5),
            updated_machine_count: Some(3),
            degraded_machine_count: Some(1),
            unavailable_machine_count: Some(2),
            ..Default::default()
        };
        metrics.set_pool("worker", &status);
        metrics.set_pool_nodes("worker", &PoolNodes { updated: 3, updating: 1, degraded: 1, waiting: 0 });
        metrics.set_os_image_url_override("worker", true);
        metrics.set_os_image_url_override("infra", false);
        metrics.observe_render("worker", 0.0015);
        metrics.set_sub_controller_state(SubControllerSync::PoolRendered, "worker", 1700000000);
        metrics.set_boot_image_skew_enforcement_none(true);
        let worker_lines = [
            "# TYPE mco_machine_count gauge",
            "# HELP mco_render_duration_seconds seconds one render of a pool's MachineConfigs took.",
            "# TYPE mco_render_duration_seconds histogram",
            "# TYPE mco_pool_nodes gauge",
            "mco_machine_count{pool=\"worker\"} 5",
            "mco_updated_machine_count{pool=\"worker\"} 3",
            "mco_degraded_machine_count{pool=\"worker\"} 1",
            "mco_unavailable_machine_count{pool=\"worker\"} 2",
            "mco_pool_nodes{pool=\"worker\",state=\"updated\"} 3",
            "mco_pool_nodes{pool=\"worker\",state=\"updating\"} 1",
            "mco_pool_nodes{pool=\"worker\",state=\"degraded\"} 1",
            "mco_pool_nodes{pool=\"worker\",state=\"waiting\"} 0",
            "os_image_url_override{pool=\"worker\"} 1",
            "mco_render_duration_seconds_bucket{le=\"0.002\",pool=\"worker\"} 1",
            "mco_render_duration_seconds_count{pool=\"worker\"} 1",
            "mcc_sub_controller_state{subcontroller=\"machine-config-controller-render\",state=\"Sync Machine Config \
             Pool with new MC\",object=\"worker\"} 1700000000",
        ];
        assert_lines(
            &registry,
            &[
                &worker_lines[..],
                &["os_image_url_override{pool=\"infra\"} 0", "mcc_boot_image_skew_enforcement_none 1"],
            ]
            .concat(),
            &[],
        );
        metrics.forget_pool("worker");
        let worker_prefixes: Vec<&str> =
            worker_lines.iter().filter(|l| !l.starts_with('#')).map(|l| &l[..l.rfind(' ').unwrap()]).collect();
        assert_lines(&registry, &["os_image_url_override{pool=\"infra\"} 0"], &worker_prefixes);
        metrics.retain_pools(|pool| pool != "infra");
        assert_lines(
            &registry,
            &["os_image_url_override{pool=\"initialize\"} 0"],
            &["os_image_url_override{pool=\"infra\"}"],
        );
    }

    #[test]
    fn drain_errors_are_deleted_on_success() {
        let (registry, metrics) = registered();
        metrics.set_drain_failed("worker-0");
        assert_lines(&registry, &["mcc_drain_err{node=\"worker-0\"} 1"], &[]);
        metrics.clear_drain_failed("worker-0");
        assert_lines(&registry, &["mcc_drain_err{node=\"initialize\"} 0"], &["mcc_drain_err{node=\"worker-0\"}"]);
    }

    #[test]
    fn one_state_series_per_node_following_its_pool() {
        let (registry, metrics) = registered();
        let member = |node: &str, alert: bool| PoolMember { node: node.into(), alert };
        metrics.set_pool_members("worker", &[member("a", false), member("b", false)], Some(("Updating", "")), 100);
        metrics.set_pool_members("master", &[member("m", true)], Some(("Updated", "")), 100);
        assert_lines(
            &registry,
            &[
                "# HELP mco_state state of a specified pool.",
                "# TYPE mco_state gauge",
                "mco_state{node=\"a\",pool=\"worker\",state=\"Updating\",reason=\"\"} 100",
                "mco_state{node=\"b\",pool=\"worker\",state=\"Updating\",reason=\"\"} 100",
                "mco_state{node=\"m\",pool=\"master\",state=\"Updated\",reason=\"\"} 100",
                "mcc_pool_alert{node=\"a\"} 0",
                "mcc_pool_alert{node=\"m\"} 1",
            ],
            &[],
        );
        // b moved to infra; a's pool is now Updated; the old series go.
        metrics.set_pool_members("worker", &[member("a", false)], Some(("Updated", "")), 200);
        metrics.set_pool_members("infra", &[member("b", false)], Some(("Degraded", "NodeDegraded")), 200);
        assert_lines(
            &registry,
            &[
                "mco_state{node=\"a\",pool=\"worker\",state=\"Updated\",reason=\"\"} 200",
                "mco_state{node=\"b\",pool=\"infra\",state=\"Degraded\",reason=\"NodeDegraded\"} 200",
                "mcc_pool_alert{node=\"b\"} 0",
            ],
            &["mco_state{node=\"a\",pool=\"worker\",state=\"Updating\"", "mco_state{node=\"b\",pool=\"worker\""],
        );
        // A pool without a true condition says nothing of its nodes' state.
        metrics.set_pool_members("infra", &[member("b", false)], None, 300);
        assert_lines(&registry, &["mcc_pool_alert{node=\"b\"} 0"], &["mco_state{node=\"b\""]);
        // Deleting the master pool removes m's series; deleting node a removes all of a's.
        metrics.set_drain_failed("a");
        metrics.set_sub_controller_state(SubControllerSync::Drain, "a", 300);
        metrics.forget_pool("master");
        metrics.retain_nodes(|node| node != "a");
        assert_lines(
            &registry,
            &["mcc_pool_alert{node=\"b\"} 0"],
            &[
                "mco_state{node=\"m\"",
                "mcc_pool_alert{node=\"m\"",
                "mco_state{node=\"a\"",
                "mcc_pool_alert{node=\"a\"",
                "mcc_drain_err{node=\"a\"",
                "mcc_sub_controller_state{subcontroller=\"machine-config-controller-drain\"",
            ],
        );
    }
}
