//! The HTTPS listener.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use bytes::Bytes;
use fn_error_context::context;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use mco_metrics::Registry;
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio_rustls::TlsAcceptor;

use crate::review::{Authorizer, Decision, bearer_token};

/// A client gets this long for its TLS handshake and for each request's head.
const CLIENT_TIMEOUT: Duration = Duration::from_secs(10);
/// Connections served at once; more wait to be accepted (scrapers are few).
const MAX_CONNECTIONS: usize = 64;

/// Where the secure metrics port listens and where its certificate is.
#[derive(Debug, Clone)]
pub struct SecureListen {
    pub addr: SocketAddr,
    /// A mounted Secret's directory ([`tls_config`]).
    pub tls_dir: Option<PathBuf>,
}

/// Starts [`listen`]ing as `options` say, for the requests that `client`'s API server allows to
/// read mco's namespace's metrics.
pub async fn start(
    options: &SecureListen,
    client: kube::Client,
    registry: Arc<Registry>,
) -> anyhow::Result<impl Future<Output = ()> + use<>> {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    let names: Vec<String> = [host.trim().to_string(), "localhost".into(), options.addr.ip().to_string()]
        .into_iter()
        .filter(|n| !n.is_empty())
        .collect();
    let tls = tls_config(options.tls_dir.as_deref(), &names)?;
    let authorizer = Arc::new(Authorizer::new(client, mco_api::constants::MCO_NAMESPACE));
    listen(options.addr, tls, registry, authorizer).await
}

/// The serving certificate: `dir`'s `tls.crt` and `tls.key` (as a Secret mounts them, e.g. the
/// one OpenShift's service CA fills; reloaded when they change). Without `dir`, or while `dir`
/// holds neither file (an optional Secret not created), a self-signed certificate for `names`
/// made now, as kube-rbac-proxy makes one when given none.
#[context("the metrics port's TLS certificate")]
pub fn tls_config(dir: Option<&Path>, names: &[String]) -> anyhow::Result<Arc<rustls::ServerConfig>> {
    use mco_server::certs::{TLS_CERT, TLS_KEY};
    if let Some(dir) = dir {
        let (cert, key) = (dir.join(TLS_CERT), dir.join(TLS_KEY));
        if cert.exists() || key.exists() {
            return mco_server::tls::server_config(cert, key);
        }
        tracing::info!(dir = %dir.display(), "no certificate for the metrics port: serving a self-signed one");
    }
    let generated = mco_server::certs::generate(names)?;
    let chain = vec![CertificateDer::from_pem_slice(generated.cert.as_bytes()).context("the generated certificate")?];
    let key = PrivateKeyDer::from_pem_slice(generated.key.as_bytes()).context("the generated key")?;
    let mut config = rustls::ServerConfig::builder_with_provider(mco_server::tls::provider())
        .with_safe_default_protocol_versions()
        .context("TLS protocol versions")?
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .context("the generated certificate")?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// Binds `addr` (a failure to bind is the caller's error) and serves `GET /metrics` from
/// `registry` over TLS to requests `authorizer` allows, until dropped.
pub async fn listen(
    addr: SocketAddr,
    tls: Arc<rustls::ServerConfig>,
    registry: Arc<Registry>,
    authorizer: Arc<Authorizer>,
) -> anyhow::Result<impl Future<Output = ()>> {
    let listener = TcpListener::bind(addr).await.with_context(|| format!("listening for metrics on {addr}"))?;
    let acceptor = TlsAcceptor::from(tls);
    let connections = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    Ok(async move {
        loop {
            let permit = Arc::clone(&connections).acquire_owned().await.expect("never closed");
            let Ok((stream, peer)) = listener.accept().await else {
                // Out of file descriptors and the like: wait instead of spinning.
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            };
            let (acceptor, registry, authorizer) = (acceptor.clone(), Arc::clone(&registry), Arc::clone(&authorizer));
            tokio::spawn(async move {
                let stream = match tokio::time::timeout(CLIENT_TIMEOUT, acceptor.accept(stream)).await {
                    Ok(Ok(stream)) => stream,
                    Ok(Err(e)) => return tracing::debug!(%peer, "metrics TLS handshake failed: {e}"),
                    Err(_) => return tracing::debug!(%peer, "metrics TLS handshake timed out"),
                };
                let service = hyper::service::service_fn(move |request| {
                    let (registry, authorizer) = (Arc::clone(&registry), Arc::clone(&authorizer));
                    async move { Ok::<_, Infallible>(answer(request, &registry, &authorizer).await) }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .timer(TokioTimer::new())
                    .header_read_timeout(CLIENT_TIMEOUT)
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
                drop(permit);
            });
        }
    })
}

/// Every request is authenticated and authorized first, whatever it asks for (as kube-rbac-proxy
/// does): an unauthorized client learns nothing, not even which paths exist.
async fn answer(request: Request<Incoming>, registry: &Registry, authorizer: &Authorizer) -> Response<Full<Bytes>> {
    let header = request.headers().get(hyper::header::AUTHORIZATION).and_then(|v| v.to_str().ok());
    match authorizer.decide(bearer_token(header)).await {
        Decision::Allowed => {}
        Decision::Unauthenticated => return text(StatusCode::UNAUTHORIZED, "Unauthorized\n".into()),
        Decision::Forbidden(message) => return text(StatusCode::FORBIDDEN, format!("{message}\n")),
    }
    match (request.method(), request.uri().path()) {
        (&Method::GET, "/metrics") => {
            let mut response = text(StatusCode::OK, mco_metrics::render(registry));
            response.headers_mut().insert(
                hyper::header::CONTENT_TYPE,
                hyper::header::HeaderValue::from_static(mco_metrics::CONTENT_TYPE),
            );
            response
        }
        _ => text(StatusCode::NOT_FOUND, "not found\n".into()),
    }
}

fn text(status: StatusCode, body: String) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = status;
    response
        .headers_mut()
        .insert(hyper::header::CONTENT_TYPE, hyper::header::HeaderValue::from_static("text/plain; charset=utf-8"));
    response
}
