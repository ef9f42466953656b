//! A real OCI registry on loopback for tests, benchmarks and the lab: Debian's `docker-registry`
//! serving plain HTTP on a free port, storing in a directory, open or with basic authentication
//! (an htpasswd file), with a containers-registries.conf(5) file that marks it insecure (what
//! skopeo and ostree-ext need to talk to it, and to send credentials over plain HTTP).

use std::fs;
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use fn_error_context::context;

/// A running registry; stopped when dropped.
pub struct LocalRegistry {
    child: Child,
    pub port: u16,
    /// `[[registry]] location = "127.0.0.1:<port>"  insecure = true`.
    pub registries_conf: PathBuf,
}

/// Who may use a registry and how it is reached.
#[derive(Clone, Copy)]
enum Access<'a> {
    /// Plain HTTP, open to all.
    Open,
    /// Plain HTTP, only for the users of this htpasswd file.
    Users(&'a Path),
    /// HTTPS with this certificate and key (PEM files), open to all.
    Tls { cert: &'a Path, key: &'a Path },
}

/// The docker-registry configuration of a registry on 127.0.0.1:`port` storing blobs in `data`,
/// reached as `access` says (pure).
fn config_text(data: &Path, port: u16, access: Access) -> String {
    let mut text = format!(
        "version: 0.1\nstorage:\n  filesystem:\n    rootdirectory: {}\n  delete:\n    enabled: true\n\
         http:\n  addr: 127.0.0.1:{port}\n",
        data.display()
    );
    match access {
        Access::Open => {}
        Access::Users(htpasswd) => {
            text += &format!("auth:\n  htpasswd:\n    realm: mco-test\n    path: {}\n", htpasswd.display());
        }
        Access::Tls { cert, key } => {
            text += &format!("  tls:\n    certificate: {}\n    key: {}\n", cert.display(), key.display());
        }
    }
    text
}

/// Writes `DIR/config.yml` for an open docker-registry on 127.0.0.1:`port` storing blobs in
/// `DIR/data`; returns its path.
pub fn write_config(dir: &Path, port: u16) -> Result<PathBuf> {
    write_config_with(dir, port, Access::Open)
}

fn write_config_with(dir: &Path, port: u16, access: Access) -> Result<PathBuf> {
    let config = dir.join("config.yml");
    fs::write(&config, config_text(&dir.join("data"), port, access))
        .with_context(|| format!("Writing {}", config.display()))?;
    Ok(config)
}

/// A `registries.conf` that lets the image tools use the plain-HTTP registry on 127.0.0.1:`port`.
pub fn registries_conf_text(port: u16) -> String {
    format!("[[registry]]\nlocation = \"127.0.0.1:{port}\"\ninsecure = true\n")
}

impl LocalRegistry {
    /// Starts an open registry storing in `dir` (its config, data and registries.conf go there)
    /// and waits until it answers.
    pub fn start(dir: &Path) -> Result<Self> {
        Self::start_with(dir, Access::Open)
    }

    /// Starts a registry like [`LocalRegistry::start`] that answers only the users of `htpasswd`,
    /// the text of an htpasswd file (`USER:HASH` lines; docker-registry accepts bcrypt hashes
    /// only), for pulls and pushes alike.
    pub fn start_authenticated(dir: &Path, htpasswd: &str) -> Result<Self> {
        let file = dir.join("htpasswd");
        fs::create_dir_all(dir)?;
        fs::write(&file, htpasswd).with_context(|| format!("Writing {}", file.display()))?;
        Self::start_with(dir, Access::Users(&file))
    }

    /// Starts a registry like [`LocalRegistry::start`] that speaks HTTPS, with a certificate for
    /// 127.0.0.1 from a CA of its own, whose certificate (PEM) is returned: its registries.conf
    /// does not mark it insecure, so clients must trust that CA (containers-certs.d(5)).
    #[context("Starting a docker-registry with TLS in {}", dir.display())]
    pub fn start_tls(dir: &Path) -> Result<(Self, String)> {
        use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair, SanType};
        fs::create_dir_all(dir)?;
        let mut ca_params = CertificateParams::new(Vec::<String>::new())?;
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let ca = CertifiedIssuer::self_signed(ca_params, KeyPair::generate()?)?;
        let mut params = CertificateParams::new(Vec::<String>::new())?;
        params.subject_alt_names = vec![SanType::IpAddress(std::net::Ipv4Addr::LOCALHOST.into())];
        let key = KeyPair::generate()?;
        let cert = params.signed_by(&key, &ca)?;
        let (cert_file, key_file) = (dir.join("tls.crt"), dir.join("tls.key"));
        fs::write(&cert_file, cert.pem())?;
        fs::write(&key_file, key.serialize_pem())?;
        let registry = Self::start_with(dir, Access::Tls { cert: &cert_file, key: &key_file })?;
        Ok((registry, ca.pem()))
    }

    #[context("Starting docker-registry in {}", dir.display())]
    fn start_with(dir: &Path, access: Access) -> Result<Self> {
        fs::create_dir_all(dir)?;
        let port = TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
        let config = write_config_with(dir, port, access)?;
        let registries_conf = dir.join("registries.conf");
        let conf = match access {
            Access::Tls { .. } => String::new(),
            Access::Open | Access::Users(_) => registries_conf_text(port),
        };
        fs::write(&registries_conf, conf)?;
        let child = Command::new("docker-registry")
            .arg("serve")
            .arg(&config)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .context("Running docker-registry (Debian package docker-registry)")?;
        let mut registry = LocalRegistry { child, port, registries_conf };
        wait_listening(&mut registry.child, port, "docker-registry")?;
        Ok(registry)
    }

    /// `127.0.0.1:<port>`, the host part of image names.
    pub fn host(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }
}

/// Waits until `child` (`what`) listens on 127.0.0.1:`port`; fails if it exits first.
pub(crate) fn wait_listening(child: &mut Child, port: u16, what: &str) -> Result<()> {
    let deadline = Instant::now() + Duration::from_secs(10);
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        if let Some(status) = child.try_wait()? {
            bail!("{what} exited with {status}");
        }
        if Instant::now() > deadline {
            bail!("{what} did not listen on 127.0.0.1:{port} within 10 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(())
}

impl Drop for LocalRegistry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_with_and_without_authentication() {
        let open = config_text(Path::new("/r/data"), 5000, Access::Open);
        assert!(open.contains("rootdirectory: /r/data\n") && open.contains("addr: 127.0.0.1:5000\n"), "{open}");
        assert!(!open.contains("auth:"), "{open}");
        let authenticated = config_text(Path::new("/r/data"), 5000, Access::Users(Path::new("/r/htpasswd")));
        assert_eq!(
            authenticated.strip_prefix(open.as_str()),
            Some("auth:\n  htpasswd:\n    realm: mco-test\n    path: /r/htpasswd\n")
        );
        let tls =
            config_text(Path::new("/r/data"), 5000, Access::Tls { cert: Path::new("/r/c"), key: Path::new("/r/k") });
        assert_eq!(tls.strip_prefix(open.as_str()), Some("  tls:\n    certificate: /r/c\n    key: /r/k\n"));
    }
}
