//! The HTTP side: routing and status codes as upstream
//! (`docs/behaviour.md#the-machine-config-servers-answers`), one handler for the TLS and the plain
//! listener, the limits that keep a misbehaving client from hurting others (header size, header
//! read timeout, handshake timeout, write stall timeout, connection cap), and the metrics of every
//! answered request.

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::header::{ACCEPT, CONTENT_LENGTH, CONTENT_TYPE, HeaderValue, USER_AGENT};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use mco_ignition::convert::Target;
use mco_metrics::server::ServerMetrics;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio::time::Sleep;
use tokio_rustls::TlsAcceptor;

use crate::accept;
use crate::skew::{self, Admission};
use crate::source::{ConfigSource, SourceError};

/// What a request path asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    /// `/config/<pool>` with a valid pool name.
    Config(String),
    /// `/config/` followed by nothing, or by something that cannot be a pool name (`..`,
    /// encoded slashes, nested paths, non-name characters): 400.
    BadPool,
    Health,
    Other,
}

/// Routes a raw (still percent-encoded) request path.
pub fn route(path: &str) -> Route {
    if path == "/healthz" {
        return Route::Health;
    }
    let Some(rest) = path.strip_prefix("/config/") else { return Route::Other };
    match percent_encoding::percent_decode_str(rest).decode_utf8() {
        Ok(pool) if valid_pool_name(&pool) => Route::Config(pool.into_owned()),
        _ => Route::BadPool,
    }
}

/// The `pool` label of a request's metrics: the pool's name when the request named a pool that
/// `exists`, else "". A path is the client's to choose; only existing pools, a set the cluster's
/// admins control, may become series.
pub fn pool_label(route: &Route, exists: impl FnOnce(&str) -> bool) -> &str {
    match route {
        Route::Config(pool) if exists(pool) => pool,
        _ => "",
    }
}

/// The status hyper answers a request head it cannot parse with (before the handler sees it):
/// 431 for a head over the size limit, 400 for other malformed heads; an HTTP/2 preface gets no
/// answer. (Hyper's 414 for a URI over 64 KiB cannot happen: heads are capped below that, see
/// [`MAX_HEAD_BYTES`].)
fn automatic_status(error: &hyper::Error) -> Option<StatusCode> {
    if !error.is_parse() || error.is_parse_version_h2() {
        return None;
    }
    Some(if error.is_parse_too_large() { StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE } else { StatusCode::BAD_REQUEST })
}

/// The cap on [`Limits::max_header_bytes`]: below hyper's URI limit, so that a head too large is
/// always refused with 431.
const MAX_HEAD_BYTES: usize = u16::MAX as usize - 1;

/// A MachineConfigPool name: a DNS subdomain (lowercase alphanumerics, `-` and `.`, starting and
/// ending with an alphanumeric, at most 253 characters). Nothing else can name a pool, and this
/// excludes every path trick (`..`, `/`, `%00`).
pub fn valid_pool_name(name: &str) -> bool {
    let alnum = |b: u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    let bytes = name.as_bytes();
    !bytes.is_empty()
        && bytes.len() <= 253
        && alnum(bytes[0])
        && alnum(bytes[bytes.len() - 1])
        && bytes.iter().all(|&b| alnum(b) || b == b'-' || b == b'.')
        && !name.contains("..")
}

/// Limits applied to every connection.
#[derive(Debug, Clone)]
pub struct Limits {
    /// Time a client has to send a complete request head (also ends idle keep-alive connections).
    pub header_read_timeout: Duration,
    /// Time a client has to complete the TLS handshake.
    pub handshake_timeout: Duration,
    /// Time a write may make no progress before the connection is closed: a client that stops
    /// reading a response cannot hold its connection (and the response) forever. A slow client
    /// that keeps reading is not affected.
    pub write_stall_timeout: Duration,
    /// Largest request head accepted (8 KiB to 64 KiB); larger ones get 431.
    pub max_header_bytes: usize,
    /// Connections served at once; further clients wait in the listen backlog.
    pub max_connections: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            header_read_timeout: Duration::from_secs(10),
            handshake_timeout: Duration::from_secs(10),
            write_stall_timeout: Duration::from_secs(30),
            max_header_bytes: 16 * 1024,
            max_connections: 4096,
        }
    }
}

/// The server: one [`ConfigSource`], any number of listeners.
#[derive(Debug)]
pub struct Server<S> {
    source: S,
    limits: Limits,
    connections: Arc<Semaphore>,
    metrics: ServerMetrics,
}

impl<S: ConfigSource> Server<S> {
    pub fn new(source: S, limits: Limits, metrics: ServerMetrics) -> Arc<Self> {
        let connections = Arc::new(Semaphore::new(limits.max_connections));
        Arc::new(Server { source, limits, connections, metrics })
    }

    /// Accepts connections on `listener` until the task is dropped; TLS when `tls` is given.
    pub async fn serve(self: Arc<Self>, listener: TcpListener, tls: Option<TlsAcceptor>) {
        loop {
            let permit = Arc::clone(&self.connections).acquire_owned().await.expect("never closed");
            let (stream, peer) = match listener.accept().await {
                Ok(accepted) => accepted,
                Err(e) => {
                    // Out of file descriptors and the like: wait instead of spinning.
                    tracing::warn!("accepting a connection: {e}");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            };
            let _ = stream.set_nodelay(true);
            let stream = WriteStallGuard::new(stream, self.limits.write_stall_timeout);
            let server = Arc::clone(&self);
            let tls = tls.clone();
            tokio::spawn(async move {
                match tls {
                    None => server.serve_connection(stream, peer).await,
                    Some(acceptor) => {
                        match tokio::time::timeout(server.limits.handshake_timeout, acceptor.accept(stream)).await {
                            Ok(Ok(stream)) => server.serve_connection(stream, peer).await,
                            Ok(Err(e)) => tracing::debug!(%peer, "TLS handshake failed: {e}"),
                            Err(_) => tracing::debug!(%peer, "TLS handshake timed out"),
                        }
                    }
                }
                drop(permit);
            });
        }
    }

    async fn serve_connection<IO>(self: &Arc<Self>, io: IO, peer: SocketAddr)
    where
        IO: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        // A head hyper refuses is timed from when the connection began waiting for it: when it
        // opened, or when the previous response was ready (nanoseconds after opening).
        let opened = Instant::now();
        let answered = Arc::new(AtomicU64::new(0));
        let server = Arc::clone(self);
        let answered_in_service = Arc::clone(&answered);
        let service = hyper::service::service_fn(move |req| {
            let (server, answered) = (Arc::clone(&server), Arc::clone(&answered_in_service));
            async move {
                let response = server.handle(req, peer).await;
                answered.store(u64::try_from(opened.elapsed().as_nanos()).unwrap_or(u64::MAX), Ordering::Relaxed);
                Ok::<_, Infallible>(response)
            }
        });
        let result = hyper::server::conn::http1::Builder::new()
            .timer(TokioTimer::new())
            .header_read_timeout(self.limits.header_read_timeout)
            .max_buf_size(self.limits.max_header_bytes.clamp(8192, MAX_HEAD_BYTES))
            .serve_connection(TokioIo::new(io), service)
            .await;
        if let Err(e) = result {
            if let Some(status) = automatic_status(&e) {
                let waited = opened.elapsed().saturating_sub(Duration::from_nanos(answered.load(Ordering::Relaxed)));
                self.metrics.record_request("", status.as_u16(), waited);
            }
            tracing::debug!(%peer, "connection ended: {e}");
        }
    }

    /// Answers a request and records it in the metrics.
    async fn handle(&self, req: Request<Incoming>, peer: SocketAddr) -> Response<Full<Bytes>> {
        let started = Instant::now();
        let route = route(req.uri().path());
        let response = self.answer(&req, &route, peer).await;
        let took = started.elapsed();
        let pool = pool_label(&route, |pool| self.source.has_pool(pool));
        self.metrics.record_request(pool, response.status().as_u16(), took);
        response
    }

    async fn answer(&self, req: &Request<Incoming>, route: &Route, peer: SocketAddr) -> Response<Full<Bytes>> {
        let get_or_head = matches!(*req.method(), Method::GET | Method::HEAD);
        if !get_or_head {
            return empty(StatusCode::METHOD_NOT_ALLOWED);
        }
        let pool = match route {
            Route::Health => return empty(StatusCode::OK),
            Route::Other => return empty(StatusCode::NOT_FOUND),
            Route::BadPool => {
                tracing::info!(%peer, path = %truncate(req.uri().path()), "refusing a config request for an invalid pool name");
                return empty(StatusCode::BAD_REQUEST);
            }
            Route::Config(pool) => pool,
        };
        let header =
            |name| String::from_utf8_lossy(req.headers().get(name).map(HeaderValue::as_bytes).unwrap_or_default());
        let (accept, user_agent) = (header(ACCEPT), header(USER_AGENT));
        tracing::info!(%peer, pool, user_agent = %truncate(&user_agent), accept = %truncate(&accept), "config requested");
        let boot_image_version =
            req.headers().get(mco_bootimage::skew::BOOT_IMAGE_VERSION_HEADER).map(HeaderValue::as_bytes);
        let boot_image_version = match skew::requested_version(boot_image_version, req.uri().query()) {
            Ok(v) => v,
            Err(why) => {
                tracing::warn!(%peer, pool, "{}", why.trim_end());
                return text(StatusCode::BAD_REQUEST, why);
            }
        };

        let version = match accept::negotiate(&accept) {
            Ok(v) => v,
            Err(e) => {
                tracing::warn!(%peer, pool, "{}", truncate(&e.to_string()));
                return empty(StatusCode::BAD_REQUEST);
            }
        };
        let snapshot = match self.source.lookup(pool).await {
            Ok(s) => s,
            Err(SourceError::NotFound(why)) => {
                tracing::info!(pool, "no config: {why}");
                return empty(StatusCode::NOT_FOUND);
            }
            Err(e) => {
                tracing::error!(pool, "couldn't get config: {e:#}");
                return empty(StatusCode::INTERNAL_SERVER_ERROR);
            }
        };
        match self.source.admit(pool, boot_image_version.as_deref()) {
            Admission::Allowed => {}
            Admission::Refused(why) => {
                self.metrics.record_boot_image_skew_refusal(pool);
                tracing::warn!(%peer, pool, "{}", truncate(why.lines().next().unwrap_or_default()));
                return text(StatusCode::FORBIDDEN, why);
            }
            Admission::Invalid(why) => {
                tracing::warn!(%peer, pool, "{}", truncate(why.trim_end()));
                return text(StatusCode::BAD_REQUEST, why);
            }
        }
        let Ok(target) = version.to_string().parse::<Target>() else {
            tracing::error!(pool, "couldn't convert config: no conversion to Ignition spec {version}");
            return empty(StatusCode::INTERNAL_SERVER_ERROR);
        };
        let body = match snapshot.body(target).await {
            Ok(body) => body,
            Err(e) => {
                tracing::error!(pool, "couldn't convert config to spec {target}: {e}");
                return empty(StatusCode::INTERNAL_SERVER_ERROR);
            }
        };
        let len = body.len();
        let body = if req.method() == Method::HEAD { Bytes::new() } else { body };
        let mut response = Response::new(Full::new(body));
        response.headers_mut().insert(CONTENT_LENGTH, HeaderValue::from(len));
        response.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        response
    }
}

/// Fails writes (and flushes) that make no progress for `timeout`. Wraps the TCP stream, under
/// TLS, so handshake and response writes are both covered.
struct WriteStallGuard<IO> {
    io: IO,
    timeout: Duration,
    /// Running while the current write is blocked.
    stalled: Option<Pin<Box<Sleep>>>,
}

impl<IO> WriteStallGuard<IO> {
    fn new(io: IO, timeout: Duration) -> Self {
        WriteStallGuard { io, timeout, stalled: None }
    }

    fn guard<T>(&mut self, cx: &mut Context<'_>, poll: Poll<std::io::Result<T>>) -> Poll<std::io::Result<T>> {
        if poll.is_ready() {
            self.stalled = None;
            return poll;
        }
        let timeout = self.timeout;
        let stalled = self.stalled.get_or_insert_with(|| Box::pin(tokio::time::sleep(timeout)));
        match stalled.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                format!("the client read nothing for {timeout:?}"),
            ))),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl<IO: AsyncRead + Unpin> AsyncRead for WriteStallGuard<IO> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_read(cx, buf)
    }
}

impl<IO: AsyncWrite + Unpin> AsyncWrite for WriteStallGuard<IO> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
        let poll = Pin::new(&mut self.io).poll_write(cx, buf);
        self.guard(cx, poll)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        let poll = Pin::new(&mut self.io).poll_write_vectored(cx, bufs);
        self.guard(cx, poll)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        let poll = Pin::new(&mut self.io).poll_flush(cx);
        self.guard(cx, poll)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        let poll = Pin::new(&mut self.io).poll_shutdown(cx);
        self.guard(cx, poll)
    }
}

fn empty(status: StatusCode) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::new()));
    *response.status_mut() = status;
    response.headers_mut().insert(CONTENT_LENGTH, HeaderValue::from_static("0"));
    response
}

/// A plain-text answer saying why the request was refused and what to do.
fn text(status: StatusCode, body: String) -> Response<Full<Bytes>> {
    let len = body.len();
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = status;
    response.headers_mut().insert(CONTENT_LENGTH, HeaderValue::from(len));
    response.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("text/plain; charset=utf-8"));
    response
}

/// Client-controlled text in logs is cut short so a huge header cannot flood them.
fn truncate(s: &str) -> String {
    const MAX: usize = 256;
    match s.char_indices().nth(MAX) {
        Some((i, _)) => format!("{}...({} bytes)", &s[..i], s.len()),
        None => s.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes() {
        for (path, want) in [
            ("/config/worker", Route::Config("worker".into())),
            ("/config/master", Route::Config("master".into())),
            ("/config/infra-2.east", Route::Config("infra-2.east".into())),
            ("/config/w%6Frker", Route::Config("worker".into())),
            ("/config/", Route::BadPool),
            ("/config/..", Route::BadPool),
            ("/config/../machine-configs/x", Route::BadPool),
            ("/config/..%2fmachine-pools%2fmaster", Route::BadPool),
            ("/config/%2e%2e", Route::BadPool),
            ("/config/a/b", Route::BadPool),
            ("/config/a%2Fb", Route::BadPool),
            ("/config/master%00", Route::BadPool),
            ("/config/Master", Route::BadPool),
            ("/config/-x", Route::BadPool),
            ("/config/x.", Route::BadPool),
            ("/config/%ff", Route::BadPool),
            ("/config/%", Route::BadPool),
            ("/healthz", Route::Health),
            ("/healthz/", Route::Other),
            ("/config", Route::Other),
            ("/", Route::Other),
            ("/machine-pools/master.yaml", Route::Other),
        ] {
            assert_eq!(route(path), want, "{path}");
        }
        assert_eq!(route(&format!("/config/{}", "a".repeat(253))), Route::Config("a".repeat(253)));
        assert_eq!(route(&format!("/config/{}", "a".repeat(254))), Route::BadPool);
    }

    #[test]
    fn only_existing_pools_become_labels() {
        let existing = |pool: &str| ["master", "worker"].contains(&pool);
        for (path, want) in [
            ("/config/master", "master"),
            ("/config/w%6Frker", "worker"),
            ("/config/nosuchpool", ""),
            ("/config/infra", ""),
            ("/healthz", ""),
            ("/", ""),
            ("/etc/passwd", ""),
        ] {
            assert_eq!(pool_label(&route(path), existing), want, "{path}");
        }
        // What cannot name a pool is not even looked up (the bootstrap source looks for a file).
        for path in ["/config/", "/config/..%2fmaster", "/config/master%00", "/healthz", "/config"] {
            assert_eq!(pool_label(&route(path), |pool| panic!("{path} looked up {pool:?}")), "", "{path}");
        }
    }

    #[tokio::test]
    async fn a_write_that_makes_no_progress_fails_after_the_timeout() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let timeout = Duration::from_millis(200);
        // Nobody reads: the 16-byte pipe fills and the write stalls.
        let (client, server) = tokio::io::duplex(16);
        let mut guarded = WriteStallGuard::new(server, timeout);
        let started = std::time::Instant::now();
        let err = guarded.write_all(&[0; 64]).await.unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::TimedOut);
        assert!(started.elapsed() >= timeout, "{:?}", started.elapsed());
        drop(client);

        // A slow reader that keeps reading is never cut off, however long the whole write takes.
        let (mut client, server) = tokio::io::duplex(16);
        let mut guarded = WriteStallGuard::new(server, timeout);
        let reader = tokio::spawn(async move {
            let mut received = Vec::new();
            let mut chunk = [0u8; 8];
            loop {
                tokio::time::sleep(Duration::from_millis(20)).await;
                match client.read(&mut chunk).await.unwrap() {
                    0 => return received,
                    n => received.extend_from_slice(&chunk[..n]),
                }
            }
        });
        let data: Vec<u8> = (0..=255).collect();
        guarded.write_all(&data).await.unwrap();
        guarded.shutdown().await.unwrap();
        drop(guarded);
        assert_eq!(reader.await.unwrap(), data);
    }

    #[test]
    fn logs_are_truncated() {
        assert_eq!(truncate("short"), "short");
        let long = "x".repeat(10_000);
        assert_eq!(truncate(&long), format!("{}...(10000 bytes)", "x".repeat(256)));
    }
}
