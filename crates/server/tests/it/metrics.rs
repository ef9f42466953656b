//! The server's metrics, rendered as `mco server --metrics-listen` serves them at `/metrics`,
//! after real requests: every answered request counted by pool and status code (those hyper
//! answers itself included), a path naming no pool never becoming a label, and boot image skew
//! refusals.

use crate::common;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use common::*;
use mco_api::operator::BootImageSkewEnforcementStatus;
use mco_metrics::server::ServerMetrics;
use mco_server::skew::{self, Admission};
use mco_server::{BootstrapSource, ConfigSource, Limits, Snapshot, SourceError};
use mco_testenv::{Verbatim, eventually_within};

/// The bootstrap fixture with boot image skew enforcement, as a cluster's server has it.
struct Enforcing {
    source: BootstrapSource,
    status: BootImageSkewEnforcementStatus,
}

impl ConfigSource for Enforcing {
    async fn lookup(&self, pool: &str) -> Result<Arc<Snapshot>, SourceError> {
        self.source.lookup(pool).await
    }

    fn has_pool(&self, pool: &str) -> bool {
        self.source.has_pool(pool)
    }

    fn admit(&self, pool: &str, boot_image_version: Option<&str>) -> Admission {
        skew::judge(pool, Some(&self.status), boot_image_version, None)
    }
}

/// The scraped lines of the series named `name`.
fn series(text: &str, name: &str) -> BTreeSet<String> {
    text.lines().filter(|l| l.starts_with(&format!("{name}{{"))).map(str::to_string).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn answered_requests_are_counted_by_existing_pool_and_code() {
    let mut registry = mco_metrics::Registry::default();
    let metrics = ServerMetrics::register(&mut registry);
    // Machines must have booted from 9.6.20251023-0 or newer.
    let status = serde_json::from_value(serde_json::json!({
        "mode": "Manual",
        "manual": {"mode": "RHCOSVersion", "rhcosVersion": "9.6.20251023-0"}
    }))
    .unwrap();
    let addr = serve(Enforcing { source: source(&fixture()), status }, Limits::default(), None, metrics).await;

    let v33 = format!("{IGN};version=3.3.0, */*;q=0.1");
    let v40 = format!("{IGN};version=4.0.0");
    let old_machine = [("X-MCO-Boot-Image-Version", "412.86.202301010000-0")];
    let huge = "x".repeat(64 * 1024);
    for (raw, want) in [
        (request("GET", "/config/master", &[("Accept", &v33)]), 200),
        // The second is answered from the cache.
        (request("GET", "/config/master", &[("Accept", &v33)]), 200),
        (request("GET", "/config/master", &old_machine), 403),
        (request("POST", "/config/master", &[]), 405),
        (request("GET", "/config/master", &[("Accept", &v40)]), 400),
        (request("GET", "/config/nosuchpool", &[]), 404),
        (request("GET", "/config/..%2fmachine-pools%2fmaster", &[]), 400),
        (request("GET", "/healthz", &[]), 200),
        (request("GET", "/etc/passwd", &[]), 404),
        // Answered by hyper before the handler: a head that is not HTTP, one too large.
        ("\x16\x03\x01\x02\x00hello\r\n\r\n".to_string(), 400),
        (request("GET", "/config/master", &[("Accept", &huge)]), 431),
    ] {
        let r = send(addr, &raw).await;
        assert_eq!(r.status, want, "{}", raw.lines().next().unwrap());
    }

    let counts = [
        ("master", 200, 2),
        ("master", 400, 1),
        ("master", 403, 1),
        ("master", 405, 1),
        ("", 200, 1),
        ("", 400, 2),
        ("", 404, 2),
        ("", 431, 1),
    ];
    // Every request series, and every duration series with as many observations.
    let lines = |metric: &str| -> BTreeSet<String> {
        counts.iter().map(|(pool, code, n)| format!("{metric}{{pool=\"{pool}\",code=\"{code}\"}} {n}")).collect()
    };
    let (requests, durations) =
        (lines("mco_server_requests_total"), lines("mco_server_request_duration_seconds_count"));
    let refusals = BTreeSet::from(["mco_server_boot_image_skew_refusals_total{pool=\"master\"} 1".to_string()]);
    // Hyper's own answers are counted once their connection has ended, which the client may see
    // after it read them.
    let text = eventually_within(Duration::from_secs(30), "every answered request in /metrics", || async {
        let text = mco_metrics::render(&registry);
        let complete = series(&text, "mco_server_requests_total") == requests
            && series(&text, "mco_server_request_duration_seconds_count") == durations
            && series(&text, "mco_server_boot_image_skew_refusals_total") == refusals;
        if complete { Ok(text) } else { Err(Verbatim(text)) }
    })
    .await;
    // Durations are in seconds: the two config answers took well under the largest bound.
    for line in [
        "mco_server_request_duration_seconds_bucket{le=\"10.0\",pool=\"master\",code=\"200\"} 2",
        "mco_server_request_duration_seconds_bucket{le=\"+Inf\",pool=\"master\",code=\"200\"} 2",
    ] {
        assert!(text.lines().any(|l| l == line), "{line} not in\n{text}");
    }
}
