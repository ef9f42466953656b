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

/// The docker-registry configuration of a registry on 127.0.0.1:`port` storing blobs in `data`,
/// open to all, or only to the users of the `htpasswd` file when given (pure).
fn config_text(data: &Path, port: u16, htpasswd: Option<&Path>) -> String {
    let mut text = format!(
        "version: 0.1\nstorage:\n  filesystem:\n    rootdirectory: {}\n  delete:\n    enabled: true\n\
         http:\n  addr: 127.0.0.1:{port}\n",
        data.display()
    );
    if let Some(htpasswd) = htpasswd {
        text += &format!("auth:\n  htpasswd:\n    realm: mco-test\n    path: {}\n", htpasswd.display());
    }
    text
}

/// Writes `DIR/config.yml` for an open docker-registry on 127.0.0.1:`port` storing blobs in
/// `DIR/data`; returns its path.
pub fn write_config(dir: &Path, port: u16) -> Result<PathBuf> {
    write_config_with(dir, port, None)
}

fn write_config_with(dir: &Path, port: u16, htpasswd: Option<&Path>) -> Result<PathBuf> {
    let config = dir.join("config.yml");
    fs::write(&config, config_text(&dir.join("data"), port, htpasswd))
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
        Self::start_with(dir, None)
    }

    /// Starts a registry like [`LocalRegistry::start`] that answers only the users of `htpasswd`,
    /// the text of an htpasswd file (`USER:HASH` lines; docker-registry accepts bcrypt hashes
    /// only), for pulls and pushes alike.
    pub fn start_authenticated(dir: &Path, htpasswd: &str) -> Result<Self> {
        Self::start_with(dir, Some(htpasswd))
    }

    #[context("Starting docker-registry in {}", dir.display())]
    fn start_with(dir: &Path, htpasswd: Option<&str>) -> Result<Self> {
        fs::create_dir_all(dir)?;
        let port = TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
        let htpasswd_file = dir.join("htpasswd");
        if let Some(text) = htpasswd {
            fs::write(&htpasswd_file, text).with_context(|| format!("Writing {}", htpasswd_file.display()))?;
        }
        let config = write_config_with(dir, port, htpasswd.map(|_| htpasswd_file.as_path()))?;
        let registries_conf = dir.join("registries.conf");
        fs::write(&registries_conf, registries_conf_text(port))?;
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
        let open = config_text(Path::new("/r/data"), 5000, None);
        assert!(open.contains("rootdirectory: /r/data\n") && open.contains("addr: 127.0.0.1:5000\n"), "{open}");
        assert!(!open.contains("auth:"), "{open}");
        let authenticated = config_text(Path::new("/r/data"), 5000, Some(Path::new("/r/htpasswd")));
        assert_eq!(
            authenticated.strip_prefix(open.as_str()),
            Some("auth:\n  htpasswd:\n    realm: mco-test\n    path: /r/htpasswd\n")
        );
    }
}
