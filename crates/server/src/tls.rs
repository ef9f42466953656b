//! TLS for the secure port: rustls with the `ring` provider, TLS 1.2 and 1.3, HTTP/1.1 only (as
//! upstream, which disables HTTP/2). The certificate and key are re-read when either file
//! changes, so a rotated serving certificate is used from the next handshake on.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use anyhow::Context;
use fn_error_context::context;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;

use crate::stamp::Stamp;

/// The one crypto provider the server uses.
pub fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// A rustls server config serving the certificate in `cert` (PEM chain, leaf first) with the
/// key in `key` (PEM, PKCS#8, PKCS#1 or SEC1). Fails at once if they cannot be loaded.
pub fn server_config(cert: PathBuf, key: PathBuf) -> anyhow::Result<Arc<rustls::ServerConfig>> {
    let provider = provider();
    let resolver = ReloadingCert::new(cert, key, Arc::clone(&provider))?;
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .context("TLS protocol versions")?
        .with_no_client_auth()
        .with_cert_resolver(Arc::new(resolver));
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// Serves the certificate from disk, reloading it when the files change. A broken replacement
/// (half-written, mismatched key) is logged and the previous certificate kept.
#[derive(Debug)]
pub struct ReloadingCert {
    cert_path: PathBuf,
    key_path: PathBuf,
    provider: Arc<CryptoProvider>,
    current: Mutex<Loaded>,
}

#[derive(Debug)]
struct Loaded {
    stamps: (Option<Stamp>, Option<Stamp>),
    key: Arc<CertifiedKey>,
}

impl ReloadingCert {
    pub fn new(cert_path: PathBuf, key_path: PathBuf, provider: Arc<CryptoProvider>) -> anyhow::Result<Self> {
        let stamps = (Stamp::of(&cert_path).ok(), Stamp::of(&key_path).ok());
        let key = Arc::new(load(&cert_path, &key_path, &provider)?);
        Ok(ReloadingCert { cert_path, key_path, provider, current: Mutex::new(Loaded { stamps, key }) })
    }

    fn certified_key(&self) -> Arc<CertifiedKey> {
        let mut current = self.current.lock().expect("not poisoned");
        let stamps = (Stamp::of(&self.cert_path).ok(), Stamp::of(&self.key_path).ok());
        if stamps != current.stamps {
            current.stamps = stamps;
            match load(&self.cert_path, &self.key_path, &self.provider) {
                Ok(key) => {
                    tracing::info!(cert = %self.cert_path.display(), "reloaded the serving certificate");
                    current.key = Arc::new(key);
                }
                Err(e) => tracing::warn!("keeping the previous serving certificate: {e:#}"),
            }
        }
        Arc::clone(&current.key)
    }
}

impl ResolvesServerCert for ReloadingCert {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.certified_key())
    }
}

#[context("loading TLS certificate {} and key {}", cert.display(), key.display())]
fn load(cert: &Path, key: &Path, provider: &CryptoProvider) -> anyhow::Result<CertifiedKey> {
    let chain = CertificateDer::pem_file_iter(cert)
        .with_context(|| format!("reading {}", cert.display()))?
        .collect::<Result<Vec<_>, _>>()
        .with_context(|| format!("parsing {}", cert.display()))?;
    anyhow::ensure!(!chain.is_empty(), "{} holds no certificate", cert.display());
    let key = PrivateKeyDer::from_pem_file(key).with_context(|| format!("reading the key {}", key.display()))?;
    CertifiedKey::from_der(chain, key, provider).context("the key does not fit the certificate")
}
