//! Signed images for tests, benchmarks and the lab, with the real tools: GPG keys made by `gpg`,
//! images signed by `skopeo copy --sign-by` (containers "simple signing", which c/image checks
//! for a policy's `signedBy` requirement), signatures kept in a lookaside directory that
//! busybox's httpd serves over HTTP, where nodes and the controller read them as
//! containers-registries.d(5) tells c/image to.
//!
//! (sigstore signatures would live in the registry itself, but Debian 12's skopeo is built
//! without them: "Debian-local change: sigstore disabled", for signing and checking alike.)

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use anyhow::{Context, Result, bail};
use fn_error_context::context;

use crate::registry::wait_listening;

/// busybox's httpd serving `dir` on 127.0.0.1:`port`, in the foreground.
pub fn server_command(dir: &Path, port: u16) -> Command {
    let mut command = Command::new("busybox");
    command.args(["httpd", "-f", "-p", &format!("127.0.0.1:{port}"), "-h"]).arg(dir);
    command
}

/// A containers-registries.d(5) file that makes c/image read the signatures of the images of
/// `registry_host` from `url`.
pub fn lookaside_config(registry_host: &str, url: &str) -> String {
    format!("docker:\n  {registry_host}:\n    lookaside: {url}\n")
}

/// A lookaside signature store on loopback; stopped when dropped.
pub struct SignatureStore {
    child: Child,
    /// Where the signatures are written (`NAME@sha256=HEX/signature-N`).
    pub dir: PathBuf,
    pub port: u16,
}

impl SignatureStore {
    /// Serves `dir` (created if needed) on a free loopback port.
    #[context("Starting a signature store in {}", dir.display())]
    pub fn start(dir: &Path) -> Result<Self> {
        std::fs::create_dir_all(dir)?;
        let port = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
        let child = server_command(dir, port)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .context("Running busybox httpd (Debian package busybox-static)")?;
        let mut store = SignatureStore { child, dir: dir.to_path_buf(), port };
        wait_listening(&mut store.child, port, "busybox httpd")?;
        Ok(store)
    }

    /// The URL signatures are read from.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// A containers-registries.d(5) file that makes c/image read the signatures of the images of
    /// `registry_host` from this store.
    pub fn registries_d_text(&self, registry_host: &str) -> String {
        lookaside_config(registry_host, &self.url())
    }

    /// Where the signatures of `HOST/NAME@sha256:HEX` are (c/image's lookaside layout).
    pub fn signatures_of(&self, image: &str) -> Result<PathBuf> {
        let Some((name, hex)) = image.split_once("@sha256:") else { bail!("{image} is not named by digest") };
        let path = name.split_once('/').map_or(name, |(_, path)| path);
        Ok(self.dir.join(format!("{path}@sha256={hex}")))
    }
}

impl Drop for SignatureStore {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A GPG signing key in a keyring of its own; its agent is stopped when dropped.
pub struct SigningKey {
    home: tempfile::TempDir,
    pub fingerprint: String,
}

impl SigningKey {
    /// A new ed25519 key of `name`, without a passphrase.
    #[context("Generating the GPG key {name}")]
    pub fn generate(name: &str) -> Result<Self> {
        let mut key =
            SigningKey { home: tempfile::Builder::new().prefix("mco-gpg-").tempdir()?, fingerprint: String::new() };
        let user = format!("{name} <{name}@mco.invalid>");
        key.gpg(&["--batch", "--passphrase", "", "--quick-gen-key", &user, "ed25519", "sign", "never"])?;
        let listing = key.gpg(&["--with-colons", "--list-keys"])?;
        key.fingerprint = String::from_utf8_lossy(&listing)
            .lines()
            .find_map(|l| l.strip_prefix("fpr:").map(|rest| rest.trim_matches(':').to_string()))
            .context("gpg listed no fingerprint")?;
        Ok(key)
    }

    /// Runs gpg on this key's keyring; returns its output.
    fn gpg(&self, args: &[&str]) -> Result<Vec<u8>> {
        succeeded(Command::new("gpg").arg("--homedir").arg(self.home.path()).args(args).output()?)
    }

    /// The public key, ASCII-armored (what a policy's `keyPath` file holds).
    pub fn public_key(&self) -> Result<Vec<u8>> {
        self.gpg(&["--armor", "--export", &self.fingerprint])
    }

    /// Signs `image` (`HOST/NAME@sha256:…`, in a registry `registries_conf` lets skopeo reach)
    /// for `identity` (`HOST/NAME:TAG`, which then names the image) and writes the signature in
    /// the signature store directory `signatures`.
    #[context("Signing {image} as {identity}")]
    pub fn sign(&self, registries_conf: &Path, signatures: &Path, image: &str, identity: &str) -> Result<()> {
        let host = image.split_once('/').map_or(image, |(host, _)| host);
        let staging = tempfile::Builder::new().prefix("mco-registries-d-").tempdir()?;
        let text = format!("docker:\n  {host}:\n    lookaside-staging: file://{}\n", signatures.display());
        std::fs::write(staging.path().join("staging.yaml"), text)?;
        let out = Command::new("skopeo")
            .arg("--registries-conf")
            .arg(registries_conf)
            .arg("--registries.d")
            .arg(staging.path())
            .args(["--insecure-policy", "copy", "--preserve-digests", "--sign-by", &self.fingerprint])
            .arg(format!("docker://{image}"))
            .arg(format!("docker://{identity}"))
            .env("GNUPGHOME", self.home.path())
            .output()?;
        succeeded(out).map(drop)
    }
}

impl Drop for SigningKey {
    fn drop(&mut self) {
        let _ = Command::new("gpgconf").arg("--homedir").arg(self.home.path()).args(["--kill", "gpg-agent"]).output();
    }
}

fn succeeded(out: std::process::Output) -> Result<Vec<u8>> {
    if !out.status.success() {
        bail!("{}", String::from_utf8_lossy(&out.stderr).trim());
    }
    Ok(out.stdout)
}
