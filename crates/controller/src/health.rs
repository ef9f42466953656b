//! `GET /healthz` for the kubelet's liveness and readiness probes of mco's pods, and `GET /metrics`
//! for Prometheus where a registry is given. Answered by the component's own async runtime, so a
//! runtime that stops making progress fails the probe.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::Context as _;
use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use mco_metrics::Registry;
use tokio::net::TcpListener;

/// Binds `addr` (a failure to bind is the caller's error) and answers probes, and `/metrics` from
/// `metrics` if given, until dropped.
pub async fn listen(addr: SocketAddr, metrics: Option<Arc<Registry>>) -> anyhow::Result<impl Future<Output = ()>> {
    let listener = TcpListener::bind(addr).await.with_context(|| format!("listening for health probes on {addr}"))?;
    Ok(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else { continue };
            let metrics = metrics.clone();
            let service = service_fn(move |request| answer(request, metrics.clone()));
            tokio::spawn(http1::Builder::new().serve_connection(TokioIo::new(stream), service));
        }
    })
}

async fn answer(
    request: Request<Incoming>,
    metrics: Option<Arc<Registry>>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let (status, content_type, body) = match (request.uri().path(), metrics) {
        ("/healthz", _) => (StatusCode::OK, "text/plain", Bytes::from_static(b"ok\n")),
        // A scrape reads the registry (prometheus-client's brief locks), never waits for an update.
        ("/metrics", Some(registry)) => {
            (StatusCode::OK, mco_metrics::CONTENT_TYPE, Bytes::from(mco_metrics::render(&registry)))
        }
        _ => (StatusCode::NOT_FOUND, "text/plain", Bytes::from_static(b"not found\n")),
    };
    let mut response = Response::new(Full::new(body));
    *response.status_mut() = status;
    response.headers_mut().insert(hyper::header::CONTENT_TYPE, hyper::header::HeaderValue::from_static(content_type));
    Ok(response)
}

#[cfg(test)]
mod tests {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

    use super::*;

    async fn get(addr: SocketAddr, path: &str) -> String {
        let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
        let request = format!("GET {path} HTTP/1.1\r\nHost: probe\r\nConnection: close\r\n\r\n");
        stream.write_all(request.as_bytes()).await.unwrap();
        let mut response = String::new();
        stream.read_to_string(&mut response).await.unwrap();
        response
    }

    #[tokio::test]
    async fn answers_healthz_and_nothing_else() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        drop(listener);
        tokio::spawn(listen(addr, None).await.unwrap());
        let healthz = get(addr, "/healthz").await;
        assert!(healthz.starts_with("HTTP/1.1 200 OK\r\n") && healthz.ends_with("\r\n\r\nok\n"), "{healthz}");
        let other = get(addr, "/metrics").await;
        assert!(other.starts_with("HTTP/1.1 404 Not Found\r\n"), "{other}");
    }

    #[tokio::test]
    async fn answers_metrics_from_a_registry() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        drop(listener);
        let mut registry = Registry::default();
        let metrics = mco_metrics::controller::ControllerMetrics::register(&mut registry);
        metrics.set_drain_failed("worker-0");
        tokio::spawn(listen(addr, Some(Arc::new(registry))).await.unwrap());
        let scraped = get(addr, "/metrics").await;
        assert!(scraped.starts_with("HTTP/1.1 200 OK\r\n"), "{scraped}");
        assert!(scraped.contains("content-type: application/openmetrics-text; version=1.0.0"), "{scraped}");
        assert!(
            scraped.contains("\nmcc_drain_err{node=\"worker-0\"} 1\n") && scraped.ends_with("# EOF\n"),
            "{scraped}"
        );
    }

    #[tokio::test]
    async fn an_address_in_use_is_an_error_naming_it() {
        let taken = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = taken.local_addr().unwrap();
        let error = listen(addr, None).await.err().expect("binding a taken port fails");
        assert!(format!("{error:#}").contains(&format!("listening for health probes on {addr}")), "{error:#}");
    }
}
