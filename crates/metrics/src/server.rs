//! The Machine Config Server's metrics (the original's server has none): every answered request
//! by pool and status code, how long answering took, and the machines refused for a boot image
//! too old to join.
//!
//! Recording is on the serving path, so it never waits for a lock held by another request: the
//! histogram is atomics only (prometheus-client's takes a mutex per observation), and a family
//! takes its lock exclusively only to add a new series, which happens once per (pool, code).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use prometheus_client::encoding::{EncodeLabelSet, EncodeMetric, MetricEncoder, NoLabelSet};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::{MetricType, TypedMetric};
use prometheus_client::registry::Registry;

use crate::controller::PoolLabel;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RequestLabels {
    /// The pool the request named if it exists, else "".
    pub pool: String,
    /// The HTTP status code answered.
    pub code: u16,
}

/// Upper bounds, in seconds, of the request duration buckets. A cached body is answered in
/// well under a millisecond (0.1-0.25 ms in a debug build, less in a release one) and a large
/// pool's first body is built in about 100 ms; 10 s is the server's header read timeout, which
/// bounds how long a client can take to send a head the server refuses.
const REQUEST_DURATION_BUCKETS: [f64; 18] = [
    0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
    10.0,
];

/// A histogram of durations over [`REQUEST_DURATION_BUCKETS`], recorded with atomic additions
/// only. A scrape during an observation may see the sum without the count or the other way
/// round, never a count that disagrees with its buckets.
#[derive(Debug, Default)]
pub struct DurationHistogram {
    /// Observations per bucket (not cumulative), the last one above every bound.
    counts: [AtomicU64; REQUEST_DURATION_BUCKETS.len() + 1],
    sum_nanos: AtomicU64,
}

impl DurationHistogram {
    pub fn observe(&self, duration: Duration) {
        let seconds = duration.as_secs_f64();
        let bucket = REQUEST_DURATION_BUCKETS.partition_point(|&bound| bound < seconds);
        self.counts[bucket].fetch_add(1, Ordering::Relaxed);
        let nanos = u64::try_from(duration.as_nanos()).unwrap_or(u64::MAX);
        self.sum_nanos.fetch_add(nanos, Ordering::Relaxed);
    }
}

impl TypedMetric for DurationHistogram {
    const TYPE: MetricType = MetricType::Histogram;
}

impl EncodeMetric for DurationHistogram {
    fn encode(&self, mut encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        let bounds = REQUEST_DURATION_BUCKETS.into_iter().chain([f64::INFINITY]);
        let buckets: Vec<(f64, u64)> = bounds.zip(self.counts.iter().map(|c| c.load(Ordering::Relaxed))).collect();
        let count = buckets.iter().map(|(_, n)| n).sum();
        let sum = Duration::from_nanos(self.sum_nanos.load(Ordering::Relaxed)).as_secs_f64();
        encoder.encode_histogram::<NoLabelSet>(sum, count, &buckets, None)
    }

    fn metric_type(&self) -> MetricType {
        Self::TYPE
    }
}

/// The server's metric families.
#[derive(Clone, Debug, Default)]
pub struct ServerMetrics {
    pub requests: Family<RequestLabels, Counter>,
    pub request_duration: Family<RequestLabels, DurationHistogram>,
    pub boot_image_skew_refusals: Family<PoolLabel, Counter>,
}

impl ServerMetrics {
    /// New families, registered in `registry`.
    pub fn register(registry: &mut Registry) -> Self {
        let metrics = ServerMetrics::default();
        // Counters get `_total` when written.
        registry.register(
            "mco_server_requests",
            "requests answered, by pool and status code",
            metrics.requests.clone(),
        );
        registry.register(
            "mco_server_request_duration_seconds",
            "seconds from a request's head to its answer, by pool and status code",
            metrics.request_duration.clone(),
        );
        registry.register(
            "mco_server_boot_image_skew_refusals",
            "booting machines refused their config because their boot image is too old",
            metrics.boot_image_skew_refusals.clone(),
        );
        metrics
    }

    /// A request answered with `code` after `duration`; `pool` is "" unless the request named an
    /// existing pool (the caller's promise: the value must come from a bounded set).
    pub fn record_request(&self, pool: &str, code: u16, duration: Duration) {
        let labels = RequestLabels { pool: pool.to_string(), code };
        self.requests.get_or_create(&labels).inc();
        self.request_duration.get_or_create(&labels).observe(duration);
    }

    /// A machine of `pool` was refused for its boot image.
    pub fn record_boot_image_skew_refusal(&self, pool: &str) {
        self.boot_image_skew_refusals.get_or_create(&PoolLabel { pool: pool.to_string() }).inc();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_render_by_pool_and_code_with_cumulative_buckets() {
        let mut registry = Registry::default();
        let metrics = ServerMetrics::register(&mut registry);
        metrics.record_request("master", 200, Duration::from_micros(80));
        metrics.record_request("master", 200, Duration::from_millis(1));
        metrics.record_request("master", 200, Duration::from_millis(120));
        metrics.record_request("", 404, Duration::from_secs(30));
        metrics.record_boot_image_skew_refusal("worker");
        let text = crate::render(&registry);
        for line in [
            "# TYPE mco_server_requests counter",
            "mco_server_requests_total{pool=\"master\",code=\"200\"} 3",
            "mco_server_requests_total{pool=\"\",code=\"404\"} 1",
            "# TYPE mco_server_request_duration_seconds histogram",
            "mco_server_request_duration_seconds_sum{pool=\"master\",code=\"200\"} 0.12108",
            "mco_server_request_duration_seconds_count{pool=\"master\",code=\"200\"} 3",
            "mco_server_request_duration_seconds_bucket{le=\"0.000025\",pool=\"master\",code=\"200\"} 0",
            "mco_server_request_duration_seconds_bucket{le=\"0.0001\",pool=\"master\",code=\"200\"} 1",
            "mco_server_request_duration_seconds_bucket{le=\"0.0005\",pool=\"master\",code=\"200\"} 1",
            // A bound holds the durations equal to it.
            "mco_server_request_duration_seconds_bucket{le=\"0.001\",pool=\"master\",code=\"200\"} 2",
            "mco_server_request_duration_seconds_bucket{le=\"0.1\",pool=\"master\",code=\"200\"} 2",
            "mco_server_request_duration_seconds_bucket{le=\"0.25\",pool=\"master\",code=\"200\"} 3",
            "mco_server_request_duration_seconds_bucket{le=\"+Inf\",pool=\"master\",code=\"200\"} 3",
            "mco_server_request_duration_seconds_bucket{le=\"10.0\",pool=\"\",code=\"404\"} 0",
            "mco_server_request_duration_seconds_bucket{le=\"+Inf\",pool=\"\",code=\"404\"} 1",
            "mco_server_boot_image_skew_refusals_total{pool=\"worker\"} 1",
        ] {
            assert!(text.lines().any(|l| l == line), "{line} not in\n{text}");
        }
    }
}
