//! The stub ("pointer") Ignition config a machine boots with: it merges the pool's config from
//! the server and trusts the server's CA (upstream's `PointerConfig`, mco-behaviour.md §4.6).

use base64::Engine;
use mco_ignition::convert::Target;
use mco_ignition::{AnyConfig, v3};
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;

use crate::http::valid_pool_name;

/// Why a stub cannot be made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StubError {
    #[error("invalid pool name {0:?}: expected a Kubernetes object name such as \"worker\"")]
    Pool(String),
    #[error("invalid server URL {0:?}: expected https://HOST:PORT (or http:// for the insecure port)")]
    Url(String),
    #[error("the CA file holds no PEM certificate")]
    Ca,
    #[error(transparent)]
    Version(#[from] mco_ignition::convert::ConvertError),
}

/// The pointer config for `pool` on the server at `url` (`https://HOST:22623`), trusting `ca_pem`,
/// in spec `version` (3.5.0 upstream; 3.1-3.4 and 2.2 for older boot images).
pub fn pointer_config(url: &str, pool: &str, ca_pem: &[u8], version: &str) -> Result<String, StubError> {
    let target: Target = version.parse()?;
    if !valid_pool_name(pool) {
        return Err(StubError::Pool(pool.to_string()));
    }
    let base = url.trim_end_matches('/');
    let host = base.strip_prefix("https://").or_else(|| base.strip_prefix("http://"));
    if !host.is_some_and(|h| !h.is_empty() && !h.contains(['/', '?', '#', ' ', '@'])) {
        return Err(StubError::Url(url.to_string()));
    }
    let has_cert = CertificateDer::pem_slice_iter(ca_pem).next().is_some_and(|c| c.is_ok());
    if !has_cert {
        return Err(StubError::Ca);
    }
    let resource = |source: String| v3::Resource { source: Some(source), ..Default::default() };
    let mut config = v3::Config::new(v3::MAX_VERSION);
    config.ignition.config.merge = vec![resource(format!("{base}/config/{pool}"))];
    config.ignition.security.tls.certificate_authorities = vec![resource(format!(
        "data:text/plain;charset=utf-8;base64,{}",
        base64::engine::general_purpose::STANDARD.encode(ca_pem)
    ))];
    let converted = mco_ignition::convert(&config, target)?;
    let json = match &converted {
        AnyConfig::V3(c) => mco_goser::to_go_json(c, mco_goser::Escaping::Legacy),
        AnyConfig::V2(c) => mco_goser::to_go_json(c, mco_goser::Escaping::Modern),
    }
    .expect("Ignition types serialize");
    Ok(String::from_utf8(json).expect("JSON is UTF-8"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn ca() -> String {
        crate::certs::generate(&["127.0.0.1".to_string()]).unwrap().ca_cert
    }

    #[test]
    fn pointer_configs_per_version() {
        let ca = ca();
        let ca_url =
            format!("data:text/plain;charset=utf-8;base64,{}", base64::engine::general_purpose::STANDARD.encode(&ca));
        for version in ["3.5.0", "3.4", "3.3.0", "3.2.0", "3.1.0"] {
            let stub: Value = serde_json::from_str(
                &pointer_config("https://api-int.example.com:22623/", "worker", ca.as_bytes(), version).unwrap(),
            )
            .unwrap();
            let want_version = if version.len() == 3 { format!("{version}.0") } else { version.to_string() };
            assert_eq!(
                stub,
                json!({"ignition": {
                    "config": {"merge": [{"source": "https://api-int.example.com:22623/config/worker"}]},
                    "security": {"tls": {"certificateAuthorities": [{"source": ca_url}]}},
                    "version": want_version
                }}),
                "{version}"
            );
        }
        let v2: Value =
            serde_json::from_str(&pointer_config("https://10.0.0.1:22623", "master", ca.as_bytes(), "2.2.0").unwrap())
                .unwrap();
        assert_eq!(v2["ignition"]["version"], "2.2.0");
        assert_eq!(v2["ignition"]["config"]["append"][0]["source"], "https://10.0.0.1:22623/config/master");
        assert_eq!(v2["ignition"]["security"]["tls"]["certificateAuthorities"][0]["source"], ca_url);
    }

    #[test]
    fn bad_input_is_refused() {
        let ca = ca();
        let cases: [(&str, &str, &[u8], &str, &str); 6] = [
            ("https://h:22623", "worker", ca.as_bytes(), "3.0.0", "conversion to Ignition spec version \"3.0.0\""),
            ("https://h:22623", "../etc", ca.as_bytes(), "3.5.0", "invalid pool name"),
            ("https://h:22623", "", ca.as_bytes(), "3.5.0", "invalid pool name"),
            ("ftp://h", "worker", ca.as_bytes(), "3.5.0", "invalid server URL"),
            ("https://h/config/worker", "worker", ca.as_bytes(), "3.5.0", "invalid server URL"),
            ("https://h:22623", "worker", b"not a cert", "3.5.0", "holds no PEM certificate"),
        ];
        for (url, pool, ca, version, want) in cases {
            let err = pointer_config(url, pool, ca, version).unwrap_err().to_string();
            assert!(err.contains(want), "{url} {pool} {version}: {err}");
        }
    }
}
