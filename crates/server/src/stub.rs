//! The stub ("pointer") Ignition config a machine boots with: it merges the pool's config from
//! the server and trusts the server's CA (upstream's `PointerConfig`).
//!
//! Beyond upstream, a stub may carry the machine's boot image version, so the server can refuse
//! a boot image that is too old ([`crate::skew`]): a header on the merge source (spec 3.1+), or a
//! query parameter for spec 2.x, which has no headers. And it may bound Ignition's fetch
//! (`timeouts.httpTotal`): Ignition retries a refused fetch until then, forever without it.

use base64::Engine;
use mco_bootimage::skew::{BOOT_IMAGE_VERSION_HEADER, BOOT_IMAGE_VERSION_QUERY, BootImageVersion, VersionError};
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
    #[error("invalid boot image version: {0}")]
    BootImageVersion(#[from] VersionError),
    #[error("invalid HTTP timeout {0}: expected a number of seconds greater than 0")]
    Timeout(i64),
    #[error(transparent)]
    Version(#[from] mco_ignition::convert::ConvertError),
}

/// Everything but URL-unreserved characters is escaped in a query value.
const QUERY_VALUE: &percent_encoding::AsciiSet =
    &percent_encoding::NON_ALPHANUMERIC.remove(b'-').remove(b'.').remove(b'_').remove(b'~');

/// What a stub may carry beyond upstream's.
#[derive(Debug, Clone, Copy, Default)]
pub struct StubOptions<'a> {
    /// The boot image version the machine tells the server (the aleph `build` of the boot image
    /// the stub is for).
    pub boot_image_version: Option<&'a str>,
    /// Seconds Ignition spends on one fetch, retries included (`ignition.timeouts.httpTotal`).
    pub http_total_timeout: Option<i64>,
}

/// The pointer config for `pool` on the server at `url` (`https://HOST:22623`), trusting `ca_pem`,
/// in spec `version` (3.5.0 upstream; 3.1-3.4 and 2.2 for older boot images).
pub fn pointer_config(
    url: &str,
    pool: &str,
    ca_pem: &[u8],
    version: &str,
    options: StubOptions<'_>,
) -> Result<String, StubError> {
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
    if let Some(v) = options.boot_image_version {
        BootImageVersion::parse(v)?;
    }
    if let Some(seconds) = options.http_total_timeout.filter(|s| *s <= 0) {
        return Err(StubError::Timeout(seconds));
    }
    let resource = |source: String| v3::Resource { source: Some(source), ..Default::default() };
    let mut config = v3::Config::new(v3::MAX_VERSION);
    let mut merge = resource(format!("{base}/config/{pool}"));
    match options.boot_image_version {
        None => {}
        // Spec 2.x has no httpHeaders.
        Some(v) if target == Target::V2_2 => {
            let v = percent_encoding::utf8_percent_encode(v, QUERY_VALUE);
            merge.source = Some(format!("{base}/config/{pool}?{BOOT_IMAGE_VERSION_QUERY}={v}"));
        }
        Some(v) => {
            merge.http_headers =
                vec![v3::HttpHeader { name: BOOT_IMAGE_VERSION_HEADER.to_string(), value: Some(v.to_string()) }];
        }
    }
    config.ignition.config.merge = vec![merge];
    config.ignition.timeouts.http_total = options.http_total_timeout;
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
        let no = StubOptions::default();
        let ca_url =
            format!("data:text/plain;charset=utf-8;base64,{}", base64::engine::general_purpose::STANDARD.encode(&ca));
        for version in ["3.5.0", "3.4", "3.3.0", "3.2.0", "3.1.0"] {
            let stub: Value = serde_json::from_str(
                &pointer_config(
                    "https://api-int.example.com:22623/",
                    "worker",
                    ca.as_bytes(),
                    version,
                    StubOptions::default(),
                )
                .unwrap(),
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
        let v2: Value = serde_json::from_str(
            &pointer_config("https://10.0.0.1:22623", "master", ca.as_bytes(), "2.2.0", no).unwrap(),
        )
        .unwrap();
        assert_eq!(v2["ignition"]["version"], "2.2.0");
        assert_eq!(v2["ignition"]["config"]["append"][0]["source"], "https://10.0.0.1:22623/config/master");
        assert_eq!(v2["ignition"]["security"]["tls"]["certificateAuthorities"][0]["source"], ca_url);
    }

    #[test]
    fn the_boot_image_version_and_the_fetch_timeout() {
        let ca = ca();
        let options = |v| StubOptions { boot_image_version: Some(v), http_total_timeout: Some(30) };
        for (version, boot_image, want_merge) in [
            (
                "3.5.0",
                "9.6.20260101-0",
                json!({"source": "https://h:22623/config/worker",
                       "httpHeaders": [{"name": "X-MCO-Boot-Image-Version", "value": "9.6.20260101-0"}]}),
            ),
            (
                "3.1.0",
                "412.86.202301010000-0",
                json!({"source": "https://h:22623/config/worker",
                       "httpHeaders": [{"name": "X-MCO-Boot-Image-Version", "value": "412.86.202301010000-0"}]}),
            ),
            (
                "3.1.0",
                "4.18.0+build",
                json!({"source": "https://h:22623/config/worker",
                       "httpHeaders": [{"name": "X-MCO-Boot-Image-Version", "value": "4.18.0+build"}]}),
            ),
        ] {
            let stub: Value = serde_json::from_str(
                &pointer_config("https://h:22623", "worker", ca.as_bytes(), version, options(boot_image)).unwrap(),
            )
            .unwrap();
            assert_eq!(stub["ignition"]["config"]["merge"], json!([want_merge]), "{version} {boot_image}");
            assert_eq!(stub["ignition"]["timeouts"], json!({"httpTotal": 30}), "{version}");
        }
        for (boot_image, want_source) in [
            ("412.86.202301010000-0", "https://h:22623/config/worker?bootImageVersion=412.86.202301010000-0"),
            ("4.18.0+build", "https://h:22623/config/worker?bootImageVersion=4.18.0%2Bbuild"),
        ] {
            let stub: Value = serde_json::from_str(
                &pointer_config("https://h:22623", "worker", ca.as_bytes(), "2.2.0", options(boot_image)).unwrap(),
            )
            .unwrap();
            assert_eq!(stub["ignition"]["config"]["append"][0]["source"], want_source, "{boot_image}");
            assert_eq!(stub["ignition"]["timeouts"]["httpTotal"], 30);
        }
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
            let err = pointer_config(url, pool, ca, version, StubOptions::default()).unwrap_err().to_string();
            assert!(err.contains(want), "{url} {pool} {version}: {err}");
        }
        for (options, want) in [
            (
                StubOptions { boot_image_version: Some("9.6.2026-0"), http_total_timeout: None },
                "invalid boot image version: invalid RHCOS version \"9.6.2026-0\"",
            ),
            (
                StubOptions { boot_image_version: Some("latest"), http_total_timeout: None },
                "invalid boot image version: invalid OCP version \"latest\"",
            ),
            (StubOptions { boot_image_version: None, http_total_timeout: Some(0) }, "invalid HTTP timeout 0"),
        ] {
            let err = pointer_config("https://h:22623", "worker", ca.as_bytes(), "3.5.0", options).unwrap_err();
            assert!(err.to_string().contains(want), "{options:?}: {err}");
        }
    }
}
