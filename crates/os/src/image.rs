//! OS images: an OSTree commit encapsulated into an OCI image with ostree-ext (the format of
//! Fedora CoreOS / RHCOS "ostree native containers"), and inspection of such images.
//!
//! Images are read through ostree-ext's importer, which talks to skopeo's image proxy: so
//! `oci:` directories and registries (`docker://`, honouring `CONTAINERS_REGISTRIES_CONF`)
//! behave exactly as on a node.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use anyhow::{Context, Result};
use fn_error_context::context;
use ostree_ext::container::store::{self, ImageImporter, LayeredImageState, PrepareResult, PreparedImport};
use ostree_ext::container::{ImageReference, OstreeImageReference, SignatureSource, Transport};
use ostree_ext::containers_image_proxy::ImageProxyConfig;
use ostree_ext::oci_spec::image as oci_image;
use ostree_ext::prelude::*;
use ostree_ext::{gio, glib, ostree};

use crate::tree;

/// An image reference mco cannot use.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ImageRefError {
    #[error("image reference {0:?}: transport must be oci:DIR[:TAG] or docker://HOST/NAME[:TAG|@DIGEST]")]
    UnsupportedTransport(String),
    #[error("image reference {0:?}: empty directory or name")]
    EmptyName(String),
    #[error("image reference {0:?}: a destination needs a tag (oci:DIR:TAG, docker://HOST/NAME:TAG)")]
    MissingTag(String),
}

/// Parse `oci:DIR[:TAG]` or `docker://HOST/NAME[:TAG|@DIGEST]`.
pub fn parse_image_ref(s: &str) -> Result<ImageReference, ImageRefError> {
    let (transport, name) = if let Some(rest) = s.strip_prefix("oci:") {
        (Transport::OciDir, rest)
    } else if let Some(rest) = s.strip_prefix("docker://") {
        (Transport::Registry, rest)
    } else {
        return Err(ImageRefError::UnsupportedTransport(s.into()));
    };
    let base = match transport {
        Transport::OciDir => name.split(':').next().unwrap_or_default(),
        _ => name.split(['@']).next().unwrap_or_default(),
    };
    if base.is_empty() || (transport == Transport::Registry && !base.contains('/')) {
        return Err(ImageRefError::EmptyName(s.into()));
    }
    Ok(ImageReference { transport, name: name.into() })
}

/// Parse a destination to push to: like [`parse_image_ref`], but it must name a tag, so that
/// writing never replaces a whole OCI directory nor pushes an unnamed manifest.
pub fn parse_destination(s: &str) -> Result<ImageReference, ImageRefError> {
    let r = parse_image_ref(s)?;
    let tagged = match r.transport {
        Transport::OciDir => r.name.split_once(':').is_some_and(|(_, tag)| !tag.is_empty()),
        _ => registry_tag(&r.name).is_some(),
    };
    if !tagged {
        return Err(ImageRefError::MissingTag(s.into()));
    }
    Ok(r)
}

/// The tag of a registry name (`host:port/ns/name:tag`); the port's colon is not a tag.
fn registry_tag(name: &str) -> Option<&str> {
    let last = name.rsplit('/').next()?;
    if last.contains('@') {
        return None;
    }
    last.split_once(':').map(|(_, tag)| tag).filter(|t| !t.is_empty())
}

/// The reference pinned to `digest`, so that a tag is resolved once and never again: for a
/// registry `docker://HOST/NAME@DIGEST`. OCI directories have no by-digest syntax in the
/// containers tools, so they stay as given.
pub fn pinned(r: &ImageReference, digest: &str) -> String {
    match r.transport {
        Transport::Registry => {
            let repo = r.name.split('@').next().unwrap_or_default();
            let repo = match registry_tag(repo) {
                Some(tag) => &repo[..repo.len() - tag.len() - 1],
                None => repo,
            };
            format!("docker://{repo}@{digest}")
        }
        _ => r.to_string(),
    }
}

/// Encapsulate the commit `ostree_ref` of the repository at `repo_path` into an OCI image at
/// `dest` and return the manifest digest (`sha256:...`).
///
/// The image is labelled with the commit's version (`org.opencontainers.image.version`), its
/// bootable metadata (`ostree.bootable`, `ostree.linux`, `containers.bootc`) and every other
/// string metadata key of the commit (the labels given at commit time).
pub async fn encapsulate(repo_path: &Path, ostree_ref: &str, dest: &str) -> Result<String> {
    encapsulate_with(repo_path, ostree_ref, dest, &PullConfig::default(), LayerCompression::Default).await
}

/// How image layers are compressed (gzip, as every OCI tool reads it).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum LayerCompression {
    /// gzip's default level.
    #[default]
    Default,
    /// gzip level 1: layers about a fifth bigger, written several times faster (ostree-ext's
    /// `skip_compression`), for images that only cross a fast network.
    Fast,
}

impl LayerCompression {
    pub fn gzip(self) -> flate2::Compression {
        match self {
            LayerCompression::Default => flate2::Compression::default(),
            LayerCompression::Fast => flate2::Compression::fast(),
        }
    }
}

/// [`encapsulate`] with the registry settings and credentials (`authfile`) of `registries`, for
/// pushes to a registry, and the layer compression.
#[context("Encapsulating {ostree_ref} from {} to {dest}", repo_path.display())]
pub async fn encapsulate_with(
    repo_path: &Path,
    ostree_ref: &str,
    dest: &str,
    registries: &PullConfig,
    compression: LayerCompression,
) -> Result<String> {
    let dest = parse_destination(dest)?;
    let repo = ostree::Repo::new_for_path(repo_path);
    repo.open(gio::Cancellable::NONE)?;
    let commit = repo.require_rev(ostree_ref)?;
    let (commit_v, _) = repo.load_commit(&commit)?;
    let label_keys =
        string_metadata(&commit_v.child_value(0)).into_keys().filter(|k| !tree::is_reserved_key(k)).collect();
    let mut opts = ostree_ext::container::ExportOpts::default();
    opts.copy_meta_keys = label_keys;
    opts.skip_compression = compression == LayerCompression::Fast;
    let config = ostree_ext::container::Config::default();
    let digest = if dest.transport == Transport::OciDir {
        ostree_ext::container::encapsulate(&repo, ostree_ref, &config, Some(opts), &dest).await?.to_string()
    } else {
        // Through an OCI directory and our own skopeo, which gets the registries configuration
        // (see `skopeo`); ostree-ext's push would not.
        let work = tempfile::Builder::new().prefix("mco-image-encapsulate-").tempdir()?;
        let oci = ImageReference { transport: Transport::OciDir, name: format!("{}:image", work.path().display()) };
        ostree_ext::container::encapsulate(&repo, ostree_ref, &config, Some(opts), &oci).await?;
        let digestfile = work.path().join("digest");
        let dest_authfile = registries.authfile.as_deref();
        skopeo_copy_with(registries.skopeo(), dest_authfile, &oci.to_string(), &dest.to_string(), Some(&digestfile))?;
        std::fs::read_to_string(&digestfile).context("Reading skopeo's digest file")?.trim().to_string()
    };
    tracing::info!(%digest, %dest, commit = %commit, "encapsulated");
    Ok(digest)
}

/// `skopeo`, told about the registries configuration named by `CONTAINERS_REGISTRIES_CONF`:
/// the containers tools document that variable, but skopeo 1.9 (Debian 12) only honours the
/// `--registries-conf` flag, and a plain-HTTP test registry must be marked insecure there.
pub fn skopeo() -> Command {
    let mut cmd = Command::new("skopeo");
    if let Some(conf) = std::env::var_os("CONTAINERS_REGISTRIES_CONF") {
        cmd.arg("--registries-conf").arg(conf);
    }
    cmd
}

/// What skopeo says went wrong, from its error output: the `msg` of its last log line, without
/// the log decoration (time, level).
pub fn skopeo_message(stderr: &str) -> String {
    let last = stderr.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("no error output").trim();
    match last.split_once(" msg=") {
        Some((_, quoted)) => serde_json::from_str::<String>(quoted).unwrap_or_else(|_| quoted.to_string()),
        None => last.to_string(),
    }
}

/// The line `skopeo copy` prints once c/image's policy accepted the image (copy.go prints it
/// right after `IsRunningImageAllowed`, before it reads any layer).
const POLICY_ACCEPTED: &str = "Getting image source signatures";

/// How long a signature check may take.
pub const VERIFY_TIMEOUT: Duration = Duration::from_secs(120);

/// Why [`verify_signatures`] did not accept an image.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Unverified {
    /// The policy refuses it (c/image's words: `Source image rejected: …`).
    #[error("{0}")]
    Refused(String),
    /// It could not be checked (registry, signature store, policy file), with why.
    #[error("{0}")]
    Unchecked(String),
}

/// Checks `image` (`HOST/NAME@sha256:…`, or a tag, whose signatures must then name that tag)
/// against the containers policy of `pull` as c/image checks it when the image is copied: its
/// signatures, from where `pull`'s registries.d says they are, must meet the policy's
/// requirements for the image's scope. For an image index, the image of `arch` (default: this
/// machine's) is checked. The check is `skopeo copy`'s, stopped as soon as the policy accepted
/// the image, so no layer is fetched: skopeo 1.9's image proxy, which ostree-ext pulls through,
/// does not check the policy at all (skopeo 1.13 does).
pub fn verify_signatures(
    image: &str,
    arch: Option<&str>,
    pull: &PullConfig,
) -> Result<std::result::Result<(), Unverified>> {
    let scratch = tempfile::Builder::new().prefix("mco-signature-check-").tempdir()?;
    verify_signatures_in(image, arch, pull, scratch.path())
}

/// [`verify_signatures`], with `skopeo copy`'s destination in the empty directory `scratch`
/// (which holds no whole layer afterwards: the copy is stopped before).
#[context("Checking the signatures of {image}")]
pub fn verify_signatures_in(
    image: &str,
    arch: Option<&str>,
    pull: &PullConfig,
    scratch: &Path,
) -> Result<std::result::Result<(), Unverified>> {
    let mut cmd = pull.skopeo();
    if let Some(arch) = arch {
        cmd.args(["--override-arch", arch, "--override-os", "linux"]);
    }
    cmd.arg("copy");
    match &pull.authfile {
        Some(authfile) => cmd.arg("--src-authfile").arg(authfile),
        None => cmd.arg("--src-no-creds"),
    };
    if let Some(certs) = pull.cert_dir(image) {
        cmd.arg("--src-cert-dir").arg(certs);
    }
    cmd.arg(format!("docker://{image}")).arg(format!("dir:{}", scratch.display()));
    let mut child = cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().context("Running skopeo")?;
    let (stdout, mut stderr) = (child.stdout.take().expect("piped"), child.stderr.take().expect("piped"));
    // Both pipes are read on threads (a full stderr pipe would block skopeo), so that this one
    // can give up at the deadline.
    let errors = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = std::io::Read::read_to_string(&mut stderr, &mut text);
        text
    });
    let (accepted_tx, accepted_rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let accepted = BufReader::new(stdout).lines().map_while(std::io::Result::ok).any(|l| l == POLICY_ACCEPTED);
        let _ = accepted_tx.send(accepted);
    });
    let accepted = accepted_rx.recv_timeout(VERIFY_TIMEOUT);
    if !matches!(accepted, Ok(false)) {
        // Accepted (what follows is the copy, not wanted), or out of time.
        let _ = child.kill();
    }
    let status = child.wait()?;
    let errors = errors.join().unwrap_or_default();
    Ok(match accepted {
        Ok(true) => Ok(()),
        _ if status.success() => Ok(()),
        Err(_) => Err(Unverified::Unchecked(format!("no answer within {VERIFY_TIMEOUT:?}"))),
        Ok(false) => {
            let message = skopeo_message(&errors);
            if message.starts_with("Source image rejected: ") {
                Err(Unverified::Refused(message))
            } else {
                Err(Unverified::Unchecked(message))
            }
        }
    })
}

/// `skopeo copy` preserving digests, optionally writing the pushed digest to `digestfile`.
pub(crate) fn skopeo_copy(src: &str, dest: &str, digestfile: Option<&Path>) -> Result<()> {
    skopeo_copy_with(skopeo(), None, src, dest, digestfile)
}

/// `skopeo copy` through `cmd` (skopeo with its global options), pushing with the credentials
/// of `dest_authfile` if given.
fn skopeo_copy_with(
    mut cmd: Command,
    dest_authfile: Option<&Path>,
    src: &str,
    dest: &str,
    digestfile: Option<&Path>,
) -> Result<()> {
    cmd.args(["copy", "--quiet", "--preserve-digests"]);
    if let Some(authfile) = dest_authfile {
        cmd.arg("--dest-authfile").arg(authfile);
    }
    if let Some(f) = digestfile {
        cmd.arg("--digestfile").arg(f);
    }
    cmd.args([src, dest]);
    let out = cmd.output().context("Running skopeo")?;
    if !out.status.success() {
        anyhow::bail!("skopeo copy {src} {dest}: {}", String::from_utf8_lossy(&out.stderr).trim());
    }
    Ok(())
}

/// String-typed entries of commit metadata (an `a{sv}`).
fn string_metadata(meta: &glib::Variant) -> BTreeMap<String, String> {
    meta.iter()
        .filter_map(|entry| {
            let key = entry.child_value(0).str()?.to_string();
            let value = entry.child_value(1).as_variant()?.str()?.to_string();
            Some((key, value))
        })
        .collect()
}

/// What `mco image inspect` reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageInfo {
    /// The manifest digest the reference resolved to.
    pub digest: String,
    /// The reference pinned to the digest.
    pub pinned: String,
    /// The encapsulated (base) ostree commit.
    pub commit: String,
    /// The commit of the whole image including derived layers (equal to `commit` for a base image).
    pub merge_commit: String,
    /// `org.opencontainers.image.version`, if set.
    pub version: Option<String>,
    /// All labels of the image configuration.
    pub labels: BTreeMap<String, String>,
    /// The kernel version (directory under `/usr/lib/modules` holding `vmlinuz`).
    pub kernel: Option<String>,
    /// Every file of the image, in `ostree ls -R` order.
    pub files: Vec<FileEntry>,
}

/// One entry of a file listing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileEntry {
    pub path: String,
    /// `d`, `-` or `l` as in `ostree ls`.
    pub kind: char,
    /// Permission bits (without the file type).
    pub mode: u32,
    pub uid: u32,
    pub gid: u32,
    pub size: u64,
    pub symlink_target: Option<String>,
}

impl std::fmt::Display for FileEntry {
    /// The `ostree ls` line format.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}0{:04o} {} {} {:6} {}", self.kind, self.mode, self.uid, self.gid, self.size, self.path)?;
        if let Some(target) = &self.symlink_target {
            write!(f, " -> {target}")?;
        }
        Ok(())
    }
}

/// Import `image` (see [`parse_image_ref`]) into a throw-away repository with ostree-ext and
/// describe it.
#[context("Inspecting image {image}")]
pub async fn inspect(image: &str) -> Result<ImageInfo> {
    let imgref = parse_image_ref(image)?;
    let tmp = tempfile::Builder::new().prefix("mco-image-inspect-").tempdir()?;
    let repo = tree::open_or_create_repo(tmp.path())?;
    let state = import(&repo, &imgref).await?;
    let config = state.configuration.config().as_ref();
    let labels: BTreeMap<String, String> =
        config.and_then(|c| c.labels().clone()).unwrap_or_default().into_iter().collect();
    let (root, _) = repo.read_commit(&state.merge_commit, gio::Cancellable::NONE)?;
    // An image without /usr/lib/modules is not bootable: no kernel to report, not an error.
    let kernel = ostree_ext::bootabletree::find_kernel_dir(&root, gio::Cancellable::NONE)
        .ok()
        .flatten()
        .and_then(|d| d.basename())
        .map(|b| b.to_string_lossy().into_owned());
    let digest = state.manifest_digest.to_string();
    Ok(ImageInfo {
        pinned: pinned(&imgref, &digest),
        digest,
        commit: state.base_commit.clone(),
        merge_commit: state.merge_commit.clone(),
        version: ostree_ext::container::version_for_config(&state.configuration).map(str::to_string),
        labels,
        kernel,
        files: list_files(&root)?,
    })
}

/// Import an image into `repo` (the way a node pulls it) and return what was stored.
pub async fn import(repo: &ostree::Repo, imgref: &ImageReference) -> Result<Box<LayeredImageState>> {
    let imgref =
        OstreeImageReference { sigverify: SignatureSource::ContainerPolicyAllowInsecure, imgref: imgref.clone() };
    import_with(repo, &imgref, &PullConfig::default(), false).await
}

/// Import `imgref` into `repo` with the node's pull settings; `bootable` refuses images that are
/// not bootable OS images.
///
/// The repository ends up as ostree-ext's import leaves it (the same refs, commits and commit
/// metadata, so rpm-ostree, bootc and `ostree container image` read it), but an image that is one
/// encapsulated commit, without split-object or derived layers, skips ostree-ext's merge step:
/// see [`import_single_commit`]. Callers serialize imports into a repository (a node's under the
/// sysroot lock): ostree-ext panics when an image appears while it is fetched.
#[context("Importing {imgref}")]
pub async fn import_with(
    repo: &ostree::Repo,
    imgref: &OstreeImageReference,
    pull: &PullConfig,
    bootable: bool,
) -> Result<Box<LayeredImageState>> {
    // The image proxy of skopeo 1.9 does not check the policy itself (see `verify_signatures`).
    if pull.policy.is_some() && imgref.imgref.transport == Transport::Registry {
        let name = &imgref.imgref.name;
        verify_signatures(name, None, pull)?.map_err(|why| match why {
            Unverified::Refused(why) => anyhow::anyhow!("{name} is refused by the containers signature policy: {why}"),
            Unverified::Unchecked(why) => {
                anyhow::anyhow!("{name} could not be checked against the containers signature policy: {why}")
            }
        })?;
    }
    let mut importer = ImageImporter::new(repo, imgref, pull.proxy_config(&imgref.imgref.name)).await?;
    if bootable {
        importer.require_bootable();
    }
    match importer.prepare().await? {
        PrepareResult::AlreadyPresent(state) => Ok(state),
        PrepareResult::Ready(prep) if prep.ostree_layers.is_empty() && prep.layers.is_empty() => {
            import_single_commit(repo, importer, &prep, imgref).await
        }
        PrepareResult::Ready(prep) => importer.import(prep).await,
    }
}

/// The commit metadata keys ostree-ext writes on an image's merge commit (private in ostree-ext
/// 0.15.3; `single_commit_import_is_ostree_ext_import` checks them against its own import).
const META_MANIFEST_DIGEST: &str = "ostree.manifest-digest";
const META_MANIFEST: &str = "ostree.manifest";
const META_CONFIG: &str = "ostree.container.image-config";
const META_IMPORTER_VERSION: &str = "ostree.importer.version";
/// The ostree-ext version the dependency is pinned to (`=` in Cargo.toml), which it records.
const OSTREE_EXT_VERSION: &str = "0.15.3";
/// ostree-ext's ref prefix for imported images.
const IMAGE_REF_PREFIX: &str = "ostree/container/image";

/// Import an image made of one encapsulated commit: the commit layer through ostree-ext, then
/// the merge commit written directly on the commit's own tree.
///
/// ostree-ext 0.15.3 checks the base commit out into the repository's tmp and commits the
/// checkout again to make the merge commit, even when there is no layer to merge: half of a
/// 50,000-file image's import time, for a tree that comes out identical (its files are the
/// commit's objects through the devino cache, their SELinux labels precomputed, as its own TODO
/// notes). Here the merge commit points at the base commit's tree, and the layer ref, metadata,
/// timestamp, image ref and layer garbage collection are ostree-ext's.
async fn import_single_commit(
    repo: &ostree::Repo,
    importer: ImageImporter,
    prep: &PreparedImport,
    imgref: &OstreeImageReference,
) -> Result<Box<LayeredImageState>> {
    let fetched = importer.unencapsulate().await?;
    if fetched.image_digest != prep.manifest_digest {
        // skopeo's proxy reads the manifest once per opened image: never expected.
        anyhow::bail!(
            "{imgref}: the image proxy gave manifest {} after {}",
            fetched.image_digest,
            prep.manifest_digest
        );
    }
    let base_commit = fetched.ostree_commit;
    let metadata = glib::VariantDict::new(None);
    metadata.insert(META_MANIFEST_DIGEST, prep.manifest_digest.to_string());
    metadata.insert(META_MANIFEST, serde_json::to_string(&prep.manifest)?);
    metadata.insert(META_CONFIG, serde_json::to_string(&prep.config)?);
    metadata.insert(META_IMPORTER_VERSION, OSTREE_EXT_VERSION);
    metadata.insert_value(store::META_FILTERED, &store::MetaFilteredData::new().to_variant());
    let metadata = metadata.end();
    let timestamp = image_timestamp(&prep.manifest, &prep.config).unwrap_or_else(|| {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default().as_secs()
    });
    let image_ref = ostree_ext::refescape::prefix_escape_for_ref(IMAGE_REF_PREFIX, &imgref.imgref.to_string())?;

    let repo = repo.clone();
    let layer_ref = prep.ostree_commit_layer.ostree_ref.clone();
    let state = tokio::task::spawn_blocking(move || -> Result<Box<LayeredImageState>> {
        let cancellable = gio::Cancellable::NONE;
        let txn = repo.auto_transaction(cancellable)?;
        let (root, _) = repo.read_commit(&base_commit, cancellable)?;
        let root = root.downcast::<ostree::RepoFile>().map_err(|_| anyhow::anyhow!("commit root is not a RepoFile"))?;
        let merge_commit = repo
            .write_commit_with_time(None, None, None, Some(&metadata), &root, timestamp, cancellable)
            .context("Writing the merge commit")?;
        repo.transaction_set_ref(None, &layer_ref, Some(base_commit.as_str()));
        repo.transaction_set_ref(None, &image_ref, Some(merge_commit.as_str()));
        txn.commit(cancellable)?;
        store::gc_image_layers(&repo)?;
        store::query_image_commit(&repo, &merge_commit)
    })
    .await??;
    Ok(state)
}

/// The time ostree-ext gives an image's merge commit: the manifest's `created` annotation, else
/// the configuration's `created`, if it parses as RFC 3339.
fn image_timestamp(manifest: &oci_image::ImageManifest, config: &oci_image::ImageConfiguration) -> Option<u64> {
    let created = manifest
        .annotations()
        .as_ref()
        .and_then(|a| a.get(oci_image::ANNOTATION_CREATED))
        .or_else(|| config.created().as_ref())?;
    let parsed = chrono::DateTime::parse_from_rfc3339(created);
    if let Err(e) = &parsed {
        tracing::warn!(%created, "image timestamp: {e}");
    }
    parsed.ok().and_then(|t| u64::try_from(t.timestamp()).ok())
}

/// Where image pulls take their registry settings and credentials from.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PullConfig {
    /// A containers-registries.conf(5) file (mirrors, insecure registries); without one, the file
    /// named by `CONTAINERS_REGISTRIES_CONF` or the system's.
    pub registries_conf: Option<PathBuf>,
    /// A containers-auth.json(5) / docker `config.json` file (the pull secret).
    pub authfile: Option<PathBuf>,
    /// A containers-policy.json(5) file every pull must satisfy (signature requirements); without
    /// one, the system's.
    pub policy: Option<PathBuf>,
    /// A containers-registries.d(5) directory (where signatures are stored); without one, the
    /// system's.
    pub registries_d: Option<PathBuf>,
    /// A root whose containers-certs.d(5) (`etc/containers/certs.d/HOST[:PORT]/`, else
    /// `etc/docker/certs.d/…`) holds the CA certificates of registries; without one, the system's.
    pub certs_root: Option<PathBuf>,
    /// A node's proxy settings, upstream's `/etc/mco/proxy.env` (written from the
    /// ControllerConfig's proxy; the node's rpm-ostreed, CRI-O and kubelet read it): pulls go
    /// through the proxies it names and through none it does not. Without one, or when the file
    /// does not exist, the process's own proxy environment.
    pub proxy_env: Option<PathBuf>,
}

/// Where a node's proxy settings are, under its root.
pub const NODE_PROXY_ENV: &str = "etc/mco/proxy.env";

/// Whether a node's pulls of OS images read the file at the absolute `path` (its registries
/// configuration, pull secret, registries' CA certificates or proxy settings, as
/// [`PullConfig::of_node_root`] finds them).
pub fn pulls_with(path: &str) -> bool {
    let Some(relative) = path.strip_prefix('/') else { return false };
    ["etc/containers/registries.conf", "var/lib/kubelet/config.json", NODE_PROXY_ENV].contains(&relative)
        || ["etc/containers/certs.d/", "etc/docker/certs.d/"].iter().any(|dir| relative.starts_with(dir))
}

/// The proxy variables Go programs (skopeo) read, upper case first.
const PROXY_VARIABLES: [(&str, &str); 3] =
    [("HTTP_PROXY", "http_proxy"), ("HTTPS_PROXY", "https_proxy"), ("NO_PROXY", "no_proxy")];

/// Proxy variables to set (`Some`) or unset (`None`) for a pull.
pub type ProxyEnvironment = Vec<(&'static str, Option<String>)>;

/// The proxy environment an environment file gives (`KEY=VALUE` lines, `#` and `;` comments, a
/// value in one pair of quotes, as systemd's `EnvironmentFile=` reads them): each variable Go
/// reads, set to the file's first non-empty value of the upper or lower case key, or `None`.
pub fn proxy_environment(env_file: &str) -> ProxyEnvironment {
    let values: BTreeMap<&str, &str> = env_file
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#') && !l.starts_with(';'))
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.trim(), unquote(v.trim())))
        .collect();
    PROXY_VARIABLES
        .iter()
        .flat_map(|(upper, lower)| {
            let set = |key: &str| values.get(key).filter(|v| !v.is_empty());
            let value = set(upper).or_else(|| set(lower));
            [(*upper, value.map(|v| v.to_string())), (*lower, None)]
        })
        .collect()
}

/// `value` without one pair of enclosing quotes.
fn unquote(value: &str) -> &str {
    ['"', '\''].iter().find_map(|q| value.strip_prefix(*q).and_then(|v| v.strip_suffix(*q))).unwrap_or(value)
}

impl PullConfig {
    /// The registries file, pull secret and signature policy of the node whose root is `root`,
    /// as the node's rpm-ostree would use them: `etc/containers/registries.conf`,
    /// `var/lib/kubelet/config.json`, `etc/containers/policy.json` and
    /// `etc/containers/registries.d`, each only when present. The policy's key files are named as
    /// the node sees them (under `/`).
    pub fn of_node_root(root: &Path) -> Self {
        let existing = |rel: &str| Some(root.join(rel)).filter(|p| p.is_file());
        PullConfig {
            registries_conf: existing("etc/containers/registries.conf"),
            authfile: existing("var/lib/kubelet/config.json"),
            policy: existing("etc/containers/policy.json"),
            // The node's, even when it has none (c/image reads a missing directory as empty), not
            // that of whoever reads the node's root.
            registries_d: Some(root.join("etc/containers/registries.d")),
            certs_root: Some(root.to_path_buf()),
            proxy_env: Some(root.join(NODE_PROXY_ENV)),
        }
    }

    /// The proxy environment of pulls with these settings ([`PullConfig::proxy_env`]); `None` to
    /// keep the process's.
    pub fn proxy_environment(&self) -> Result<Option<ProxyEnvironment>> {
        let Some(path) = &self.proxy_env else { return Ok(None) };
        let text = match std::fs::read_to_string(path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e).with_context(|| format!("Reading {}", path.display())),
        };
        Ok(Some(proxy_environment(&text)))
    }

    /// The directory of CA certificates for the registry of `image` (`HOST[:PORT]/NAME…`) under
    /// [`PullConfig::certs_root`], if there is one.
    pub fn cert_dir(&self, image: &str) -> Option<PathBuf> {
        let root = self.certs_root.as_ref()?;
        let (host, _) = image.split_once('/')?;
        ["etc/containers/certs.d", "etc/docker/certs.d"].iter().map(|d| root.join(d).join(host)).find(|p| p.is_dir())
    }

    fn skopeo(&self) -> Command {
        let mut cmd = match &self.registries_conf {
            Some(conf) => {
                let mut cmd = Command::new("skopeo");
                cmd.arg("--registries-conf").arg(conf);
                cmd
            }
            None => skopeo(),
        };
        if let Some(policy) = &self.policy {
            cmd.arg("--policy").arg(policy);
        }
        if let Some(dir) = &self.registries_d {
            cmd.arg("--registries.d").arg(dir);
        }
        // An unreadable file leaves the process's proxy environment (the pull then says what fails).
        for (key, value) in self.proxy_environment().ok().flatten().unwrap_or_default() {
            match value {
                Some(value) => cmd.env(key, value),
                None => cmd.env_remove(key),
            };
        }
        cmd
    }

    /// The settings of ostree-ext's image proxy (skopeo) to pull `image` with these registries,
    /// credentials and CA certificates.
    pub fn proxy_config(&self, image: &str) -> ImageProxyConfig {
        ImageProxyConfig {
            skopeo_cmd: Some(self.skopeo()),
            authfile: self.authfile.clone(),
            certificate_directory: self.cert_dir(image),
            ..Default::default()
        }
    }
}

/// Walk a commit like `ostree ls -R <ref> /`: each directory, then its children in libostree's
/// order, descending into directories as they come.
#[context("Listing files")]
pub fn list_files(root: &gio::File) -> Result<Vec<FileEntry>> {
    let mut out = Vec::new();
    walk(root, &mut out)?;
    Ok(out)
}

const QUERY: &str =
    "standard::name,standard::type,standard::size,standard::symlink-target,unix::mode,unix::uid,unix::gid";

fn walk(file: &gio::File, out: &mut Vec<FileEntry>) -> Result<()> {
    let flags = gio::FileQueryInfoFlags::NOFOLLOW_SYMLINKS;
    let info = file.query_info(QUERY, flags, gio::Cancellable::NONE)?;
    out.push(entry(file, &info)?);
    if info.file_type() != gio::FileType::Directory {
        return Ok(());
    }
    for child in file.enumerate_children(QUERY, flags, gio::Cancellable::NONE)? {
        let child = child?;
        let child_file = file.child(child.name());
        if child.file_type() == gio::FileType::Directory {
            walk(&child_file, out)?;
        } else {
            out.push(entry(&child_file, &child)?);
        }
    }
    Ok(())
}

fn entry(file: &gio::File, info: &gio::FileInfo) -> Result<FileEntry> {
    let kind = match info.file_type() {
        gio::FileType::Directory => 'd',
        gio::FileType::SymbolicLink => 'l',
        _ => '-',
    };
    let path = file.path().context("file without a path")?;
    Ok(FileEntry {
        path: path.to_string_lossy().into_owned(),
        kind,
        mode: info.attribute_uint32("unix::mode") & 0o7777,
        uid: info.attribute_uint32("unix::uid"),
        gid: info.attribute_uint32("unix::gid"),
        size: u64::try_from(info.size()).unwrap_or_default(),
        symlink_target: info.symlink_target().map(|t| t.to_string_lossy().into_owned()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_files_pulls_read() {
        for (path, read) in [
            ("/etc/containers/registries.conf", true),
            ("/var/lib/kubelet/config.json", true),
            ("/etc/mco/proxy.env", true),
            ("/etc/containers/certs.d/registry.example:5000/ca.crt", true),
            ("/etc/docker/certs.d/registry.example/ca.crt", true),
            ("/etc/containers/registries.conf.d/mirror.conf", false),
            ("/etc/motd", false),
            ("etc/mco/proxy.env", false),
        ] {
            assert_eq!(pulls_with(path), read, "{path}");
        }
    }

    #[test]
    fn the_nodes_proxy_file_sets_every_proxy_variable_go_reads() {
        let set = |pairs: &[(&'static str, Option<&str>)]| -> ProxyEnvironment {
            pairs.iter().map(|(k, v)| (*k, v.map(str::to_string))).collect()
        };
        let upstream = "# Proxy environment variables will be populated in this file.\n\
                        HTTP_PROXY=http://proxy:3128\nHTTPS_PROXY=\"http://proxy:3129\"\nNO_PROXY=.svc,10.0.0.0/16\n";
        assert_eq!(
            proxy_environment(upstream),
            set(&[
                ("HTTP_PROXY", Some("http://proxy:3128")),
                ("http_proxy", None),
                ("HTTPS_PROXY", Some("http://proxy:3129")),
                ("https_proxy", None),
                ("NO_PROXY", Some(".svc,10.0.0.0/16")),
                ("no_proxy", None),
            ])
        );
        // No proxy (upstream's file for a cluster without one: comments only): every variable unset.
        let none = proxy_environment("# Proxy environment variables will be populated in this file.\n");
        assert!(none.iter().all(|(_, v)| v.is_none()) && none.len() == 6, "{none:?}");
        // Lower-case keys count (an empty upper-case one does not hide them, as Go reads them);
        // an empty value is no proxy; one pair of quotes goes.
        let lower = proxy_environment("https_proxy=http://p:1\nHTTP_PROXY=\nhttp_proxy=\"x'\nNO_PROXY=\n");
        assert_eq!(lower[2], ("HTTPS_PROXY", Some("http://p:1".to_string())));
        assert_eq!(lower[0], ("HTTP_PROXY", Some("\"x'".to_string())));
        assert_eq!(lower[4], ("NO_PROXY", None));
    }

    #[test]
    fn parse_refs() {
        use ImageRefError::*;
        let oci = |n: &str| Ok(ImageReference { transport: Transport::OciDir, name: n.into() });
        let reg = |n: &str| Ok(ImageReference { transport: Transport::Registry, name: n.into() });
        let cases: &[(&str, Result<ImageReference, ImageRefError>)] = &[
            ("oci:/tmp/img:latest", oci("/tmp/img:latest")),
            ("oci:/tmp/img", oci("/tmp/img")),
            ("docker://127.0.0.1:5000/os:1", reg("127.0.0.1:5000/os:1")),
            ("docker://quay.io/a/b@sha256:abc", reg("quay.io/a/b@sha256:abc")),
            ("oci::tag", Err(EmptyName("oci::tag".into()))),
            ("docker://", Err(EmptyName("docker://".into()))),
            ("docker://noslash", Err(EmptyName("docker://noslash".into()))),
            ("registry:quay.io/a/b", Err(UnsupportedTransport("registry:quay.io/a/b".into()))),
            ("/tmp/img", Err(UnsupportedTransport("/tmp/img".into()))),
        ];
        for (input, want) in cases {
            assert_eq!(&parse_image_ref(input), want, "{input}");
        }
    }

    #[test]
    fn destinations_need_a_tag() {
        let cases: &[(&str, bool)] = &[
            ("oci:/tmp/img:latest", true),
            ("oci:/tmp/img", false),
            ("oci:/tmp/img:", false),
            ("docker://127.0.0.1:5000/os:1", true),
            ("docker://127.0.0.1:5000/os", false),
            ("docker://quay.io/a/b@sha256:abc", false),
        ];
        for (input, ok) in cases {
            let got = parse_destination(input);
            assert_eq!(got.is_ok(), *ok, "{input}: {got:?}");
            if !ok {
                assert!(matches!(got, Err(ImageRefError::MissingTag(_)) | Err(ImageRefError::EmptyName(_))));
            }
        }
    }

    #[test]
    fn pinning() {
        let d = "sha256:0123";
        let cases: &[(&str, &str)] = &[
            ("docker://127.0.0.1:5000/os:1", "docker://127.0.0.1:5000/os@sha256:0123"),
            ("docker://127.0.0.1:5000/os", "docker://127.0.0.1:5000/os@sha256:0123"),
            ("docker://quay.io/a/b@sha256:old", "docker://quay.io/a/b@sha256:0123"),
            ("oci:/tmp/img:latest", "oci:/tmp/img:latest"),
        ];
        for (input, want) in cases {
            assert_eq!(pinned(&parse_image_ref(input).unwrap(), d), *want, "{input}");
        }
    }

    #[test]
    fn ls_line_format() {
        let e = |kind, mode, size, path: &str, target: Option<&str>| FileEntry {
            path: path.into(),
            kind,
            mode,
            uid: 0,
            gid: 0,
            size,
            symlink_target: target.map(Into::into),
        };
        assert_eq!(e('d', 0o755, 0, "/usr", None).to_string(), "d00755 0 0      0 /usr");
        assert_eq!(e('-', 0o644, 1234567, "/usr/a", None).to_string(), "-00644 0 0 1234567 /usr/a");
        assert_eq!(e('l', 0o777, 21, "/usr/etc/x", Some("../y")).to_string(), "l00777 0 0     21 /usr/etc/x -> ../y");
    }
}
