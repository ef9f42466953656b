//! The kubelet health monitor, as upstream's daemon runs it: every 30 s a `GET` of the kubelet's
//! healthz endpoint; `mcd_kubelet_state` holds the number of checks in a row that got no answer
//! (what the `KubeletHealthState` alert fires on past 2), and each failure is logged. As
//! upstream's, an answer other than `ok` is logged but is not a failure: the kubelet is there.

use std::str::FromStr;
use std::time::Duration;

use anyhow::Context as _;
use mco_metrics::Gauge;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

/// Upstream's polling interval and timeout.
pub const INTERVAL: Duration = Duration::from_secs(30);
pub const TIMEOUT: Duration = Duration::from_secs(30);
/// The most of an answer read: healthz says `ok`.
const MAX_ANSWER: u64 = 64 * 1024;

/// A plain-HTTP healthz URL (`http://HOST:PORT/PATH`), as the kubelet serves it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HealthzUrl {
    /// `HOST:PORT`.
    pub authority: String,
    pub path: String,
}

impl FromStr for HealthzUrl {
    type Err = String;

    fn from_str(url: &str) -> Result<Self, Self::Err> {
        let rest = url.strip_prefix("http://").ok_or_else(|| format!("{url:?}: not an http:// URL"))?;
        let (authority, path) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, "/"),
        };
        let port = authority.rsplit_once(':').map(|(_, port)| port);
        if port.is_none_or(|port| port.parse::<u16>().is_err()) || authority.starts_with(':') {
            return Err(format!("{url:?}: expected http://HOST:PORT/PATH"));
        }
        if path.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(format!("{url:?}: the path has spaces or control characters"));
        }
        Ok(HealthzUrl { authority: authority.to_string(), path: path.to_string() })
    }
}

/// One check: the answer's body, or why there was none within `timeout`.
pub async fn check(url: &HealthzUrl, timeout: Duration) -> anyhow::Result<String> {
    let exchange = async {
        let mut stream = tokio::net::TcpStream::connect(&url.authority).await?;
        let request = format!("GET {} HTTP/1.0\r\nHost: {}\r\n\r\n", url.path, url.authority);
        stream.write_all(request.as_bytes()).await?;
        let mut answer = Vec::new();
        stream.take(MAX_ANSWER).read_to_end(&mut answer).await?;
        anyhow::Ok(answer)
    };
    let answer = tokio::time::timeout(timeout, exchange)
        .await
        .map_err(|_| anyhow::anyhow!("no answer within {timeout:?}"))?
        .with_context(|| format!("GET http://{}{}", url.authority, url.path))?;
    let answer = String::from_utf8_lossy(&answer);
    let (head, body) = answer.split_once("\r\n\r\n").context("not an HTTP answer")?;
    anyhow::ensure!(head.starts_with("HTTP/"), "not an HTTP answer: {head:?}");
    Ok(body.to_string())
}

/// Checks `url` every `interval`, forever, keeping `state` at the count of failures in a row.
pub async fn monitor(url: HealthzUrl, interval: Duration, timeout: Duration, state: Gauge) {
    let mut failures = 0;
    state.set(failures);
    loop {
        tokio::time::sleep(interval).await;
        match check(&url, timeout).await {
            Ok(body) => {
                if body.trim() != "ok" {
                    tracing::warn!("Kubelet Healthz Endpoint returned: {body}");
                }
                failures = 0;
            }
            Err(e) => {
                failures += 1;
                tracing::warn!("kubelet health check has failed {failures} times: {e:#}");
            }
        }
        state.set(failures);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn healthz_urls_parse_as_http_host_port_path() {
        let url = |authority: &str, path: &str| Ok(HealthzUrl { authority: authority.into(), path: path.into() });
        for (text, want) in [
            ("http://localhost:10248/healthz", url("localhost:10248", "/healthz")),
            ("http://10.200.0.11:10248/healthz", url("10.200.0.11:10248", "/healthz")),
            ("http://[::1]:10248/healthz", url("[::1]:10248", "/healthz")),
            ("http://localhost:10248", url("localhost:10248", "/")),
            ("https://localhost:10248/healthz", Err("\"https://localhost:10248/healthz\": not an http:// URL".into())),
            ("http://localhost/healthz", Err("\"http://localhost/healthz\": expected http://HOST:PORT/PATH".into())),
            (
                "http://localhost:x/healthz",
                Err("\"http://localhost:x/healthz\": expected http://HOST:PORT/PATH".into()),
            ),
            ("http://:10248/healthz", Err("\"http://:10248/healthz\": expected http://HOST:PORT/PATH".into())),
            (
                "http://localhost:10248/a b",
                Err("\"http://localhost:10248/a b\": the path has spaces or control characters".into()),
            ),
        ] {
            assert_eq!(text.parse::<HealthzUrl>(), want, "{text}");
        }
    }

    /// A stand-in for the kubelet's healthz endpoint (a TCP listener answering `body`), for
    /// how failures are counted; the lab's daemons check real kubelets.
    async fn healthz(listener: tokio::net::TcpListener, body: &'static str) {
        loop {
            let Ok((mut stream, _)) = listener.accept().await else { return };
            let mut request = [0u8; 1024];
            let _ = stream.read(&mut request).await;
            let answer = format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{body}", body.len());
            let _ = stream.write_all(answer.as_bytes()).await;
        }
    }

    async fn wait_state(state: &Gauge, what: &str, wanted: impl Fn(i64) -> bool) {
        for _ in 0..1000 {
            if wanted(state.get()) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("waited 10 s for mcd_kubelet_state {what}; it is {}", state.get());
    }

    #[tokio::test]
    async fn failures_in_a_row_are_counted_and_an_answer_resets_them() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let url: HealthzUrl = format!("http://{addr}/healthz").parse().unwrap();
        let answering = tokio::spawn(healthz(listener, "ok"));
        assert_eq!(check(&url, TIMEOUT).await.unwrap(), "ok");
        let state = Gauge::default();
        state.set(7);
        tokio::spawn(monitor(url.clone(), Duration::from_millis(20), Duration::from_secs(5), state.clone()));
        wait_state(&state, "0", |n| n == 0).await;
        // The kubelet stops answering: each check fails, one more in a row each time.
        answering.abort();
        let _ = answering.await;
        wait_state(&state, "3 or more", |n| n >= 3).await;
        // Back, answering something other than `ok`: there, so no failure.
        let listener = tokio::net::TcpListener::bind(addr).await.unwrap();
        tokio::spawn(healthz(listener, "[-]ping failed"));
        wait_state(&state, "0 again", |n| n == 0).await;
    }
}
