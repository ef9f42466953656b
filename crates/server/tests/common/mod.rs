//! A running server on an ephemeral port, and a raw HTTP/1.1 client that can send anything
//! (malformed requests, partial heads) over plain TCP or TLS.

// Each test binary uses a part of this.
#![allow(dead_code)]

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use mco_metrics::server::ServerMetrics;
use mco_server::{BootstrapSource, ConfigSource, Limits, Server};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

pub const IGN: &str = "application/vnd.coreos.ignition+json";
pub const REGISTRY_HOST: &str = "registry.example.com:5000";

pub fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/bootstrap")
}

/// A private copy of the fixture directory, for tests that change files.
pub fn fixture_copy() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    copy_dir(&fixture(), dir.path());
    dir
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

/// Replaces a file atomically, as a careful writer (or kubelet's secret volume) does.
pub fn replace(path: &Path, contents: &[u8]) {
    let tmp = path.with_extension("tmp-replace");
    std::fs::write(&tmp, contents).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

pub fn source(dir: &Path) -> BootstrapSource {
    let certs = [format!("{REGISTRY_HOST}=registry-ca.crt")];
    BootstrapSource::new(dir.to_path_buf(), dir.join("kubeconfig"), &certs, Arc::default()).unwrap()
}

/// Starts a server for `dir`; TLS when `tls` is given.
pub async fn start(dir: &Path, limits: Limits, tls: Option<Arc<rustls::ServerConfig>>) -> SocketAddr {
    serve(source(dir), limits, tls, ServerMetrics::default()).await
}

/// Starts a server for `source` on an ephemeral loopback port, counting in `metrics`.
pub async fn serve<S: ConfigSource>(
    source: S,
    limits: Limits,
    tls: Option<Arc<rustls::ServerConfig>>,
    metrics: ServerMetrics,
) -> SocketAddr {
    let server = Server::new(source, limits, metrics);
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(server.serve(listener, tls.map(tokio_rustls::TlsAcceptor::from)));
    addr
}

#[derive(Debug)]
pub struct Response {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Response {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }

    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).unwrap()
    }
}

/// `GET`-style request text with the given extra header lines.
pub fn request(method: &str, path: &str, headers: &[(&str, &str)]) -> String {
    let mut r = format!("{method} {path} HTTP/1.1\r\nHost: test\r\n");
    for (n, v) in headers {
        r.push_str(&format!("{n}: {v}\r\n"));
    }
    r.push_str("\r\n");
    r
}

/// Sends one request on a new plain connection.
pub async fn send(addr: SocketAddr, raw: &str) -> Response {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    exchange(&mut stream, raw, raw.starts_with("HEAD ")).await.expect("a response")
}

pub async fn get(addr: SocketAddr, path: &str, accept: Option<&str>) -> Response {
    let headers: Vec<(&str, &str)> = accept.map(|a| vec![("Accept", a)]).unwrap_or_default();
    send(addr, &request("GET", path, &headers)).await
}

/// Writes `raw` and reads one response (no body for HEAD); `None` if the server closed first.
pub async fn exchange<S: AsyncRead + AsyncWrite + Unpin>(stream: &mut S, raw: &str, head: bool) -> Option<Response> {
    stream.write_all(raw.as_bytes()).await.ok()?;
    read_response(stream, head).await
}

pub async fn read_response<S: AsyncRead + Unpin>(stream: &mut S, head: bool) -> Option<Response> {
    let mut buf = Vec::new();
    let end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        let mut chunk = [0u8; 8192];
        let n = stream.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let text = String::from_utf8(buf[..end].to_vec()).unwrap();
    let mut lines = text.split("\r\n");
    let status = lines.next().unwrap().split(' ').nth(1).unwrap().parse().unwrap();
    let headers: Vec<(String, String)> = lines
        .filter(|l| !l.is_empty())
        .map(|l| {
            let (n, v) = l.split_once(':').unwrap();
            (n.trim().to_string(), v.trim().to_string())
        })
        .collect();
    let mut response = Response { status, headers, body: buf[end..].to_vec() };
    let len: usize = response.header("content-length").map(|l| l.parse().unwrap()).unwrap_or(0);
    if head {
        response.body.clear();
        return Some(response);
    }
    while response.body.len() < len {
        let mut chunk = vec![0u8; 65536];
        let n = stream.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        response.body.extend_from_slice(&chunk[..n]);
    }
    Some(response)
}

/// A TLS client config trusting only `ca_pem`.
pub fn client_config(ca_pem: &str) -> Arc<rustls::ClientConfig> {
    use rustls::pki_types::CertificateDer;
    use rustls::pki_types::pem::PemObject;
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
        roots.add(cert.unwrap()).unwrap();
    }
    Arc::new(
        rustls::ClientConfig::builder_with_provider(mco_server::tls::provider())
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth(),
    )
}

pub async fn tls_connect(
    addr: SocketAddr,
    ca_pem: &str,
) -> std::io::Result<tokio_rustls::client::TlsStream<TcpStream>> {
    let stream = TcpStream::connect(addr).await?;
    let name = rustls::pki_types::ServerName::IpAddress(addr.ip().into());
    tokio_rustls::TlsConnector::from(client_config(ca_pem)).connect(name, stream).await
}

/// Writes a fresh CA and serving certificate for 127.0.0.1 into `dir`; returns the CA PEM.
pub fn write_certs(dir: &Path) -> String {
    let generated = mco_server::certs::generate(&["127.0.0.1".to_string(), "localhost".to_string()]).unwrap();
    std::fs::create_dir_all(dir).unwrap();
    for (name, contents) in [("tls.crt", &generated.cert), ("tls.key", &generated.key)] {
        replace(&dir.join(name), contents.as_bytes());
    }
    generated.ca_cert
}
