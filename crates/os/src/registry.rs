//! A real OCI registry on loopback for tests, benchmarks and the lab: Debian's `docker-registry`
//! serving plain HTTP on a free port, storing in a directory, without authentication, with a
//! containers-registries.conf(5) file that marks it insecure (what skopeo and ostree-ext need to
//! talk to it).

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

/// Writes `DIR/config.yml` for a docker-registry on 127.0.0.1:`port` storing blobs in
/// `DIR/data`; returns its path.
pub fn write_config(dir: &Path, port: u16) -> Result<PathBuf> {
    let config = dir.join("config.yml");
    fs::write(
        &config,
        format!(
            "version: 0.1\nstorage:\n  filesystem:\n    rootdirectory: {}\n  delete:\n    enabled: true\n\
             http:\n  addr: 127.0.0.1:{port}\n",
            dir.join("data").display()
        ),
    )
    .with_context(|| format!("Writing {}", config.display()))?;
    Ok(config)
}

/// A `registries.conf` that lets the image tools use the plain-HTTP registry on 127.0.0.1:`port`.
pub fn registries_conf_text(port: u16) -> String {
    format!("[[registry]]\nlocation = \"127.0.0.1:{port}\"\ninsecure = true\n")
}

impl LocalRegistry {
    /// Starts a registry storing in `dir` (its config, data and registries.conf go there) and
    /// waits until it answers.
    #[context("Starting docker-registry in {}", dir.display())]
    pub fn start(dir: &Path) -> Result<Self> {
        fs::create_dir_all(dir)?;
        let port = TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
        let config = write_config(dir, port)?;
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
        let deadline = Instant::now() + Duration::from_secs(10);
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            if let Some(status) = registry.child.try_wait()? {
                bail!("docker-registry exited with {status}");
            }
            if Instant::now() > deadline {
                bail!("docker-registry did not listen on 127.0.0.1:{port} within 10 s");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(registry)
    }

    /// `127.0.0.1:<port>`, the host part of image names.
    pub fn host(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }
}

impl Drop for LocalRegistry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
