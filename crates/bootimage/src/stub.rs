//! The stub ("pointer") Ignition config in a `*-user-data` secret: upgrade spec 2 to spec 3
//! (new boot images only read spec 3), and check the Machine Config Server CA it carries and
//! the server certificate new machines will be shown (seed 001).
//!
//! The upgrade keeps every customisation of the stub: it is the original's
//! `ParseAndConvertConfig` (de-duplication, 2.2→3 translation with `ignition.config.append`
//! becoming `merge`), then a conversion down to the requested 3.x version.

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
pub use k8s_openapi::api::core::v1::Secret;
use mco_api::constants::{STUB_IGNITION_UPGRADED_TO_ANNOTATION, USER_DATA_KEY};
use mco_goser::Escaping;
use mco_ignition::{AnyConfig, Target, v3};
pub use rustls_pki_types::UnixTime;
use rustls_pki_types::{CertificateDer, ServerName};
use x509_parser::extensions::GeneralName;
use x509_parser::prelude::{FromDer, X509Certificate};

/// Time at which a user-data secret's stub was upgraded (RFC 3339), next to
/// [`STUB_IGNITION_UPGRADED_TO_ANNOTATION`].
pub const STUB_IGNITION_UPGRADED_AT_ANNOTATION: &str = "machineconfiguration.openshift.io/stub-ignition-upgraded-at";

/// `time` (since the Unix epoch) as RFC 3339 in UTC with whole seconds, the form of the
/// original's `stub-ignition-upgraded-at` annotation (Go's `time.RFC3339`).
pub fn rfc3339(time: std::time::Duration) -> String {
    let seconds = i64::try_from(time.as_secs()).unwrap_or(i64::MAX);
    k8s_openapi::jiff::Timestamp::from_second(seconds)
        .unwrap_or(k8s_openapi::jiff::Timestamp::MAX)
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}

/// Why a stub could not be upgraded or checked.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StubError {
    #[error("not an Ignition config: {0}")]
    NotIgnition(String),
    #[error("cannot upgrade the stub Ignition config: {0}")]
    Upgrade(String),
    #[error("the upgrade target must be an Ignition spec 3 version, not {0}")]
    TargetNotSpec3(Target),
    #[error(
        "the stub has {0} certificate authorities in ignition.security.tls.certificateAuthorities; exactly one (the Machine Config Server CA) is expected"
    )]
    SeveralCas(usize),
    #[error("the stub's certificate authority: {0}")]
    Ca(String),
    #[error("the stub has no ignition.config.merge source (the Machine Config Server URL)")]
    NoConfigSource,
    #[error("the server certificate: {0}")]
    ServerCert(String),
    #[error("secret {secret}: {problem}")]
    Secret { secret: String, problem: String },
}

/// What upgrading a stub did.
#[derive(Debug, Clone, PartialEq)]
pub enum StubUpgrade {
    /// Already spec 3: left exactly as it was.
    AlreadySpec3 { version: String },
    /// Upgraded from spec 2.
    Upgraded {
        from: String,
        /// The upgraded config (in the target version).
        config: Box<v3::Config>,
        /// Its JSON, written as the original writes Ignition configs.
        json: String,
    },
}

/// Upgrades a spec 2 stub to `target` (a 3.x version); spec 3 stubs are left alone, as the
/// original does for any version starting with "3".
pub fn upgrade_stub(raw: &[u8], target: Target) -> Result<StubUpgrade, StubError> {
    if target == Target::V2_2 {
        return Err(StubError::TargetNotSpec3(target));
    }
    let parsed = mco_ignition::parse(raw).map_err(|e| StubError::NotIgnition(e.to_string()))?;
    let from = parsed.config.version().to_string();
    if from.starts_with(mco_api::constants::MIN_STUB_IGNITION_SPEC_MAJOR) {
        return Ok(StubUpgrade::AlreadySpec3 { version: from });
    }
    let internal = mco_ignition::to_internal(parsed.config).map_err(|e| StubError::Upgrade(e.to_string()))?;
    let config = match mco_ignition::convert(&internal, target).map_err(|e| StubError::Upgrade(e.to_string()))? {
        AnyConfig::V3(config) => config,
        AnyConfig::V2(_) => unreachable!("a spec 3 target converts to spec 3"),
    };
    let bytes = mco_goser::to_go_json(&config, Escaping::Legacy).map_err(|e| StubError::Upgrade(e.to_string()))?;
    let json = String::from_utf8(bytes).expect("serde_json writes UTF-8");
    Ok(StubUpgrade::Upgraded { from, config: Box::new(config), json })
}

/// Upgrades the stub in a user-data secret (`data.userData`), annotating the secret with the
/// new version and `now` (RFC 3339) as the original does. `None` when it is already spec 3.
pub fn upgrade_user_data_secret(secret: &Secret, target: Target, now: &str) -> Result<Option<Secret>, StubError> {
    let name = secret.metadata.name.clone().unwrap_or_else(|| "<unnamed>".to_string());
    let err = |problem: String| StubError::Secret { secret: name.clone(), problem };
    let user_data = secret
        .data
        .as_ref()
        .and_then(|d| d.get(USER_DATA_KEY))
        .ok_or_else(|| err(format!("has no data.{USER_DATA_KEY}")))?;
    match upgrade_stub(&user_data.0, target).map_err(|e| err(e.to_string()))? {
        StubUpgrade::AlreadySpec3 { .. } => Ok(None),
        StubUpgrade::Upgraded { json, .. } => {
            let mut upgraded = secret.clone();
            let annotations = upgraded.metadata.annotations.get_or_insert_with(BTreeMap::new);
            annotations.insert(STUB_IGNITION_UPGRADED_TO_ANNOTATION.to_string(), target.version().to_string());
            annotations.insert(STUB_IGNITION_UPGRADED_AT_ANNOTATION.to_string(), now.to_string());
            upgraded
                .data
                .get_or_insert_with(BTreeMap::new)
                .insert(USER_DATA_KEY.to_string(), ByteString(json.into_bytes()));
            Ok(Some(upgraded))
        }
    }
}

/// What a spec 3 stub points at and trusts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StubTrust {
    /// `ignition.config.merge[0].source`, e.g. `https://api-int.example.com:22623/config/worker`.
    pub source: String,
    /// Its host, the name the server certificate must carry.
    pub host: String,
    /// The certificates of the one CA entry (a bundle may hold several during a rotation), DER.
    pub ca_certificates: Vec<Vec<u8>>,
}

/// Reads the server URL and the CA of a spec 3 stub. Exactly one CA entry is accepted (the
/// original's certificate rotation refuses stubs with more); it must be an inline data URL of
/// PEM certificates, each a valid CA certificate.
pub fn stub_trust(config: &v3::Config) -> Result<StubTrust, StubError> {
    let source = config.ignition.config.merge.iter().find_map(|r| r.source.clone()).ok_or(StubError::NoConfigSource)?;
    let host = url::Url::parse(&source)
        .ok()
        .and_then(|u| u.host_str().map(str::to_string))
        .ok_or_else(|| StubError::Ca(format!("config source {source:?} is not a URL with a host")))?;
    let cas = &config.ignition.security.tls.certificate_authorities;
    let ca = match cas.as_slice() {
        [ca] => ca,
        [] => return Err(StubError::Ca("none in ignition.security.tls.certificateAuthorities".to_string())),
        several => return Err(StubError::SeveralCas(several.len())),
    };
    let ca_source = ca.source.as_deref().unwrap_or_default();
    let data = mco_ignition::dataurl::decode(ca_source)
        .map_err(|e| StubError::Ca(format!("source is not an inline data URL ({e}); it cannot be checked offline")))?;
    let certificates = pem_certificates(&data.data).map_err(StubError::Ca)?;
    for der in &certificates {
        let (_, cert) =
            X509Certificate::from_der(der).map_err(|e| StubError::Ca(format!("invalid certificate: {e}")))?;
        if !cert.is_ca() {
            return Err(StubError::Ca(format!(
                "{} is not a CA certificate (basicConstraints CA is not set)",
                cert.subject()
            )));
        }
    }
    Ok(StubTrust { source, host, ca_certificates: certificates })
}

/// The certificates of a PEM bundle, DER; an error when there is none or a block is not a
/// certificate.
fn pem_certificates(pem: &[u8]) -> Result<Vec<Vec<u8>>, String> {
    let mut certificates = Vec::new();
    for block in x509_parser::pem::Pem::iter_from_buffer(pem) {
        let block = block.map_err(|e| format!("invalid PEM: {e}"))?;
        if block.label != "CERTIFICATE" {
            return Err(format!("PEM block {:?} is not a CERTIFICATE", block.label));
        }
        certificates.push(block.contents);
    }
    if certificates.is_empty() {
        return Err("no PEM certificate".to_string());
    }
    Ok(certificates)
}

/// What the server certificate check found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerCertReport {
    pub subject: String,
    pub dns_names: Vec<String>,
}

/// Checks the Machine Config Server's certificate chain (PEM, leaf first) the way a new
/// machine's Ignition (Go's TLS verifier, like rustls) will: it must chain to the stub's CA, be
/// valid at `now` for server authentication, and carry the stub's host in its Subject
/// Alternative Names. Old installer certificates have the host only in the CN, which current
/// verifiers ignore (seed 001).
pub fn check_server_certificate(
    trust: &StubTrust,
    server_chain_pem: &[u8],
    now: UnixTime,
) -> Result<ServerCertReport, StubError> {
    let chain = pem_certificates(server_chain_pem).map_err(StubError::ServerCert)?;
    let (_, leaf) = X509Certificate::from_der(&chain[0]).map_err(|e| StubError::ServerCert(format!("invalid: {e}")))?;
    let subject = leaf.subject().to_string();
    let sans = leaf.subject_alternative_name().map_err(|e| StubError::ServerCert(format!("invalid SAN: {e}")))?;
    let Some(sans) = sans else {
        return Err(StubError::ServerCert(format!(
            "{subject} has no Subject Alternative Name; Ignition ignores the CN, so new machines cannot reach {}: regenerate the Machine Config Server certificate",
            trust.host
        )));
    };
    let dns_names: Vec<String> = sans
        .value
        .general_names
        .iter()
        .filter_map(|n| match n {
            GeneralName::DNSName(d) => Some(d.to_string()),
            GeneralName::IPAddress(ip) => Some(format!("IP {ip:?}")),
            _ => None,
        })
        .collect();
    let anchors = trust
        .ca_certificates
        .iter()
        .map(|der| {
            let der = CertificateDer::from(der.as_slice());
            webpki::anchor_from_trusted_cert(&der).map(|a| a.to_owned())
        })
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| StubError::Ca(format!("not usable as a trust anchor: {e}")))?;
    let leaf_der = CertificateDer::from(chain[0].as_slice());
    let intermediates: Vec<CertificateDer<'_>> =
        chain[1..].iter().map(|c| CertificateDer::from(c.as_slice())).collect();
    let end_entity = webpki::EndEntityCert::try_from(&leaf_der).map_err(|e| StubError::ServerCert(format!("{e}")))?;
    end_entity
        .verify_for_usage(
            webpki::ALL_VERIFICATION_ALGS,
            &anchors,
            &intermediates,
            now,
            webpki::KeyUsage::server_auth(),
            None,
            None,
        )
        .map_err(|e| StubError::ServerCert(format!("{subject} is not trusted by the stub's CA: {e}")))?;
    let name = ServerName::try_from(trust.host.as_str())
        .map_err(|e| StubError::ServerCert(format!("host {:?} is not a server name: {e}", trust.host)))?;
    end_entity.verify_is_valid_for_subject_name(&name).map_err(|e| {
        StubError::ServerCert(format!(
            "{subject} is not valid for {} (Subject Alternative Names: {}): {e}",
            trust.host,
            dns_names.join(", ")
        ))
    })?;
    Ok(ServerCertReport { subject, dns_names })
}
