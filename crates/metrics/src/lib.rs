//! Prometheus metrics of mco's components (the `prometheus-client` crate), named, typed and
//! labelled as the original's (`pkg/daemon/metrics.go`, `pkg/controller/common/metrics.go`) so
//! its dashboards and alerting rules work unchanged, plus what an operator of mco needs and the
//! original lacks (each documented where it is defined). Label values come from bounded sets:
//! pools, nodes, states, phases; never a request or a file.
//!
//! The families are handles: a component clones them into the code that updates them, and
//! [`render`] writes a registry's current values for `GET /metrics`.

pub mod controller;
pub mod daemon;
pub mod server;

pub use prometheus_client::metrics::gauge::Gauge;
pub use prometheus_client::registry::Registry;

/// The content type of [`render`]'s text.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// The registry's metrics in the OpenMetrics text format.
pub fn render(registry: &Registry) -> String {
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, registry).expect("writing to a String cannot fail");
    text
}

/// Seconds since the Unix epoch: what the original's `SetToCurrentTime` gauges hold.
pub fn unix_seconds(now: std::time::SystemTime) -> i64 {
    now.duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs() as i64).unwrap_or(0)
}
