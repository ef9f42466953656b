//! A real containerd (v2, built by hack/kube-binaries.sh) for tests of the daemon's image pinning,
//! and images pushed with buildah to test registries.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use crate::find_binaries;

/// A containerd serving its API (CRI included) on `socket`, reaching registries over plain HTTP
/// (as the lab's nodes reach theirs). Killed when dropped.
pub struct Containerd {
    child: Child,
    pub socket: PathBuf,
    log: PathBuf,
}

impl Containerd {
    /// Starts containerd with its state in `dir`, serving on `socket`. `registries`: each name
    /// images use (`docker.io`, `127.0.0.1:5000`) with the `host:port` that serves it; `sandbox`:
    /// an image containerd pins itself (its sandbox image), as a node's does.
    pub fn start(
        dir: &Path,
        socket: &Path,
        registries: &[(&str, &str)],
        sandbox: Option<&str>,
    ) -> anyhow::Result<Containerd> {
        let [containerd] = find_binaries(["containerd"])?;
        let certs = dir.join("certs.d");
        for (name, address) in registries {
            let hosts = certs.join(name);
            std::fs::create_dir_all(&hosts)?;
            let text = format!(
                "server = \"http://{address}\"\n[host.\"http://{address}\"]\n  capabilities = [\"pull\", \"resolve\"]\n"
            );
            std::fs::write(hosts.join("hosts.toml"), text)?;
        }
        if let Some(parent) = socket.parent() {
            std::fs::create_dir_all(parent)?;
        }
        let config = dir.join("config.toml");
        let text = format!(
            "version = 3\nroot = \"{root}\"\nstate = \"{state}\"\n[grpc]\n  address = \"{socket}\"\n[ttrpc]\n  address = \
             \"{socket}.ttrpc\"\n[plugins.'io.containerd.cri.v1.images'.registry]\n  config_path = \"{certs}\"\n{sandbox}",
            root = dir.join("root").display(),
            state = dir.join("state").display(),
            socket = socket.display(),
            certs = certs.display(),
            sandbox = sandbox
                .map(|image| format!(
                    "[plugins.'io.containerd.cri.v1.images'.pinned_images]\n  sandbox = \"{image}\"\n"
                ))
                .unwrap_or_default(),
        );
        std::fs::write(&config, text)?;
        let log = dir.join("containerd.log");
        let child = Command::new(containerd)
            .arg("--config")
            .arg(&config)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log)?)
            .spawn()?;
        Ok(Containerd { child, socket: socket.to_path_buf(), log })
    }

    /// What containerd has logged, for failure messages.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Waits until `probe` (a client's first request) succeeds: containerd serves its socket once
    /// its plugins are loaded, the CRI a moment later. A failure shows containerd's log.
    pub async fn eventually_serving<T, F, Fut>(&self, mut probe: F) -> T
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = anyhow::Result<T>>,
    {
        crate::eventually("containerd to answer", || {
            let answer = probe();
            async move { answer.await.map_err(|e| crate::Verbatim(format!("{e:#}\n{}", self.log()))) }
        })
        .await
    }
}

impl Drop for Containerd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Pushes an image built with buildah from scratch, configured with `config` (`buildah config`
/// flags), as `HOST/NAME:TAG` (`registries_conf` says how to reach HOST; `creds`: `USER:PASSWORD`
/// if the registry asks); returns its digest.
pub fn push_buildah_image(
    dir: &Path,
    host: &str,
    registries_conf: &Path,
    name_tag: &str,
    config: &[&str],
    creds: Option<&str>,
) -> String {
    let storage = dir.join("buildah");
    let buildah = |args: &[&str]| {
        let mut cmd = Command::new("buildah");
        cmd.arg("--root").arg(&storage).arg("--runroot").arg(&storage).args(["--storage-driver", "vfs"]).args(args);
        cmd.env("CONTAINERS_REGISTRIES_CONF", registries_conf);
        let out = cmd.output().unwrap();
        assert!(out.status.success(), "{cmd:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap()
    };
    let container = buildah(&["from", "scratch"]);
    let container = container.trim();
    let mut configure = vec!["config"];
    configure.extend_from_slice(config);
    configure.push(container);
    buildah(&configure);
    let local = format!("localhost/{name_tag}");
    buildah(&["commit", "--rm", "--format", "oci", container, &local]);
    let digest_file = dir.join("digest");
    let to = format!("docker://{host}/{name_tag}");
    let mut push = vec!["push", "--digestfile", digest_file.to_str().unwrap()];
    if let Some(creds) = creds {
        push.extend(["--creds", creds]);
    }
    push.extend([local.as_str(), to.as_str()]);
    buildah(&push);
    std::fs::read_to_string(digest_file).unwrap().trim().to_string()
}
