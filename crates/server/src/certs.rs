//! A CA and a serving certificate for the server (`mco certs create`): what the installer creates
//! as `machine-config-server-ca` and `machine-config-server-tls`. The serving certificate names
//! every host in its subjectAltName (IP addresses as IP SANs): clients verify the SAN, never the CN.

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::time::{Duration, SystemTime};

use anyhow::Context;
use fn_error_context::context;
use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair,
    KeyUsagePurpose,
};

/// File names, as the server's secret mounts them (`tls.crt`, `tls.key`) plus the CA.
pub const CA_CERT: &str = "ca.crt";
pub const CA_KEY: &str = "ca.key";
pub const TLS_CERT: &str = "tls.crt";
pub const TLS_KEY: &str = "tls.key";

const VALIDITY: Duration = Duration::from_secs(10 * 365 * 24 * 3600);

/// PEM texts of a fresh CA and a serving certificate it signed.
#[derive(Debug, Clone)]
pub struct Generated {
    pub ca_cert: String,
    pub ca_key: String,
    pub cert: String,
    pub key: String,
}

/// Creates a CA and a serving certificate for `sans` (host names and IP addresses), valid for ten
/// years from now.
pub fn generate(sans: &[String]) -> anyhow::Result<Generated> {
    anyhow::ensure!(!sans.is_empty(), "at least one subject alternative name is needed");
    for san in sans {
        anyhow::ensure!(
            !san.is_empty() && !san.contains(|c: char| c.is_whitespace() || c == '/' || c == ':' && !is_ip(san)),
            "invalid subject alternative name {san:?}: expected a host name or an IP address"
        );
    }
    let now = SystemTime::now();
    let validity = |params: &mut CertificateParams| -> anyhow::Result<()> {
        params.not_before = (now - Duration::from_secs(3600)).into();
        params.not_after = (now + VALIDITY).into();
        Ok(())
    };

    let ca_key = KeyPair::generate()?;
    let mut ca_params = CertificateParams::new(Vec::<String>::new())?;
    ca_params.distinguished_name.push(DnType::CommonName, "machine-config-server-ca");
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params.key_usages =
        vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign, KeyUsagePurpose::DigitalSignature];
    validity(&mut ca_params)?;
    let ca_key_pem = ca_key.serialize_pem();
    let ca = CertifiedIssuer::self_signed(ca_params, ca_key)?;

    let key = KeyPair::generate()?;
    let mut params =
        CertificateParams::new(sans.to_vec()).with_context(|| format!("invalid subject alternative names {sans:?}"))?;
    params.distinguished_name.push(DnType::CommonName, "system:machine-config-server");
    params.is_ca = IsCa::ExplicitNoCa;
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature, KeyUsagePurpose::KeyEncipherment];
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    params.use_authority_key_identifier_extension = true;
    validity(&mut params)?;
    let cert = params.signed_by(&key, &ca)?;
    Ok(Generated { ca_cert: ca.pem(), ca_key: ca_key_pem, cert: cert.pem(), key: key.serialize_pem() })
}

fn is_ip(s: &str) -> bool {
    s.parse::<std::net::IpAddr>().is_ok()
}

/// Writes the four files into `dir` (created if missing). Refuses to replace existing files;
/// each file is written under a temporary name and renamed, keys with mode 0600.
#[context("writing certificates to {}", dir.display())]
pub fn write(dir: &Path, generated: &Generated) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir)?;
    let files = [
        (CA_CERT, &generated.ca_cert, 0o644),
        (CA_KEY, &generated.ca_key, 0o600),
        (TLS_CERT, &generated.cert, 0o644),
        (TLS_KEY, &generated.key, 0o600),
    ];
    for (name, _, _) in &files {
        let path = dir.join(name);
        anyhow::ensure!(!path.exists(), "{} already exists; remove it to create new certificates", path.display());
    }
    for (name, contents, mode) in files {
        let tmp = dir.join(format!(".{name}.tmp"));
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(mode)
            .open(&tmp)
            .with_context(|| format!("creating {}", tmp.display()))?;
        f.write_all(contents.as_bytes())?;
        f.sync_all()?;
        std::fs::rename(&tmp, dir.join(name)).with_context(|| format!("renaming {}", tmp.display()))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_bad_names() {
        for bad in [vec![], vec![String::new()], vec!["a b".to_string()], vec!["https://x".to_string()]] {
            assert!(generate(&bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn write_refuses_to_overwrite_and_sets_key_modes() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let generated = generate(&["127.0.0.1".to_string(), "api-int.example.com".to_string()]).unwrap();
        write(dir.path(), &generated).unwrap();
        for (name, mode) in [(CA_CERT, 0o644), (CA_KEY, 0o600), (TLS_CERT, 0o644), (TLS_KEY, 0o600)] {
            let meta = std::fs::metadata(dir.path().join(name)).unwrap();
            assert_eq!(meta.permissions().mode() & 0o777, mode, "{name}");
        }
        assert_eq!(std::fs::read_to_string(dir.path().join(TLS_CERT)).unwrap(), generated.cert);
        let err = write(dir.path(), &generated).unwrap_err();
        assert!(format!("{err:#}").contains("already exists"), "{err:#}");
    }
}
