//! Derived OS images, two ways:
//!
//! * [`build`]: a base image plus one layer of added directories and labels, the way a
//!   `FROM <base>` + `COPY` container build layers content on an ostree native container. The
//!   base is copied with skopeo (digests preserved) into a work OCI directory, the layer and the
//!   new config are written there, and the result is copied to the destination with skopeo, which
//!   reports the pushed digest.
//! * [`build_containerfile`]: any Containerfile (`FROM` the base, `RUN`, `COPY`, `LABEL`, ...),
//!   built by buildah as the original's on-cluster builds do, and pushed.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result};
use fn_error_context::context;
use ocidir::cap_std::{ambient_authority, fs::Dir};
use ocidir::oci_spec::image as oci_image;

use crate::image::{LayerCompression, PullConfig, parse_destination, parse_image_ref, skopeo_copy};

/// One `--add SRC:DEST`: the directory `src` becomes `dest` (absolute, under /usr or /etc) in
/// the image.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Add {
    pub src: PathBuf,
    /// Relative to the image root, no leading slash.
    pub dest: String,
}

/// A bad `--add` argument.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum AddError {
    #[error("--add {0:?}: expected SRC_DIR:/DEST")]
    Syntax(String),
    #[error("--add {0:?}: the destination must be an absolute path under /usr or /etc without '..'")]
    Destination(String),
}

/// Parse `SRC:DEST`. Only /usr and /etc are content of an ostree image (ostree-ext keeps /etc as
/// /usr/etc and drops the rest), so anything else is refused rather than silently lost.
pub fn parse_add(s: &str) -> Result<Add, AddError> {
    let (src, dest) = s.rsplit_once(':').ok_or_else(|| AddError::Syntax(s.into()))?;
    if src.is_empty() || dest.is_empty() {
        return Err(AddError::Syntax(s.into()));
    }
    let rel = dest.strip_prefix('/').ok_or_else(|| AddError::Destination(s.into()))?;
    let rel = rel.trim_end_matches('/');
    let parts: Vec<&str> = rel.split('/').collect();
    let top_ok = matches!(parts.first(), Some(&"usr") | Some(&"etc"));
    if !top_ok || parts.iter().any(|p| p.is_empty() || *p == "." || *p == "..") {
        return Err(AddError::Destination(s.into()));
    }
    Ok(Add { src: src.into(), dest: rel.into() })
}

/// Build `to` from the image `from` plus `adds` and `labels`, the new layer compressed with
/// `compression`; return the manifest digest of the result.
#[context("Building {to} from {from}")]
pub fn build(
    from: &str,
    adds: &[Add],
    labels: &BTreeMap<String, String>,
    to: &str,
    compression: LayerCompression,
) -> Result<String> {
    let from_ref = parse_image_ref(from)?;
    let to_ref = parse_destination(to)?;
    crate::tree::validate_labels(labels)?;
    for add in adds {
        if !add.src.is_dir() {
            anyhow::bail!("--add source {} is not a directory", add.src.display());
        }
    }
    let work = tempfile::Builder::new().prefix("mco-image-build-").tempdir()?;
    let oci_path = work.path().join("oci");
    skopeo_copy(&from_ref.to_string(), &format!("oci:{}:base", oci_path.display()), None)?;

    let dir = Dir::open_ambient_dir(&oci_path, ambient_authority())?;
    let oci = ocidir::OciDir::open(&dir)?;
    let mut manifest = oci.find_manifest_with_tag("base")?.context("base image missing after copy")?;
    let mut config: oci_image::ImageConfiguration = oci.read_json_blob(manifest.config())?;

    let mut layer = oci.create_layer(Some(compression.gzip()))?;
    // Fixed owner and times: the same inputs give the same layer.
    layer.mode(tar::HeaderMode::Deterministic);
    for add in adds {
        append_parents(&mut layer, &add.dest)?;
        layer
            .append_dir_all(&add.dest, &add.src)
            .with_context(|| format!("Adding {} as /{}", add.src.display(), add.dest))?;
    }
    let layer = layer.into_inner()?.complete()?;
    let description = adds.iter().map(|a| format!("/{}", a.dest)).collect::<Vec<_>>().join(" ");
    oci.push_layer(&mut manifest, &mut config, layer, &format!("mco image build: add {description}"), None);

    let mut ctrcfg = config.config().clone().unwrap_or_default();
    ctrcfg.labels_mut().get_or_insert_with(Default::default).extend(labels.clone());
    config.set_config(Some(ctrcfg));
    oci.insert_manifest_and_config(manifest, config, Some("derived"), oci_image::Platform::default())?;

    let digestfile = work.path().join("digest");
    skopeo_copy(&format!("oci:{}:derived", oci_path.display()), &to_ref.to_string(), Some(&digestfile))?;
    let digest = std::fs::read_to_string(&digestfile).context("Reading skopeo's digest file")?;
    tracing::info!(%digest, to, "built derived image");
    Ok(digest.trim().to_string())
}

/// A Containerfile build: what `mco image build -f` takes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ContainerBuild {
    pub containerfile: PathBuf,
    /// The build context (`COPY` sources).
    pub context: PathBuf,
    /// `ARG` values.
    pub build_args: BTreeMap<String, String>,
    pub labels: BTreeMap<String, String>,
    /// Destination: `oci:DIR:TAG` or `docker://HOST/NAME:TAG`.
    pub to: String,
}

/// How many of buildah's last output lines a failed build's error carries: the failing step and
/// what the step printed before it.
const BUILD_ERROR_LINES: usize = 20;

/// Build `spec` with buildah (rootful, `--isolation chroot`) and push it to `spec.to`, pulling the
/// base and pushing with `registries`' settings and credentials; return the pushed manifest
/// digest. See [`build_containerfile_pushing_with`].
pub fn build_containerfile(spec: &ContainerBuild, registries: &PullConfig) -> Result<String> {
    build_containerfile_pushing_with(spec, registries, registries.authfile.as_deref())
}

/// Build `spec` with buildah (rootful, `--isolation chroot`) and push it to `spec.to`, with
/// `registries`' settings; return the pushed manifest digest. The build's pulls (`FROM` images)
/// use the credentials of `registries.authfile`, the push those of `push_authfile` (none:
/// buildah's default credentials files), as upstream's build pod does (the base image's pull secret for `buildah build`,
/// the push secret for `buildah push`): push-only credentials for the base image's registry host
/// cannot fail its pull. A failed step's error names the step and carries buildah's output;
/// nothing is pushed then.
///
/// buildah's storage (vfs: it works in a pod and on any filesystem, at the price of a full copy of
/// the tree per layer) and its temporary files are in a directory of their own under `$TMPDIR`,
/// else `/var/tmp` (a pod's scratch disk, not a tmpfs), removed afterwards.
#[context("Building {} from {}", spec.to, spec.containerfile.display())]
pub fn build_containerfile_pushing_with(
    spec: &ContainerBuild,
    registries: &PullConfig,
    push_authfile: Option<&Path>,
) -> Result<String> {
    let to = parse_destination(&spec.to)?;
    crate::tree::validate_labels(&spec.labels)?;
    if !spec.containerfile.is_file() {
        anyhow::bail!("Containerfile {} is not a file", spec.containerfile.display());
    }
    if !spec.context.is_dir() {
        anyhow::bail!("build context {} is not a directory", spec.context.display());
    }
    let work = tempfile::Builder::new().prefix("mco-image-build-").tempdir_in(scratch_dir())?;
    let buildah_tmp = work.path().join("tmp");
    std::fs::create_dir(&buildah_tmp)?;
    // As for skopeo: buildah 1.28 (Debian 12) takes the registries file as a flag only.
    let registries_conf = registries
        .registries_conf
        .clone()
        .or_else(|| std::env::var_os("CONTAINERS_REGISTRIES_CONF").map(PathBuf::from));
    let buildah = |subcommand: &str, authfile: Option<&Path>| {
        let mut cmd = Command::new("buildah");
        cmd.env("BUILDAH_TMPDIR", &buildah_tmp);
        let storage = work.path().join("storage");
        cmd.arg("--root").arg(&storage).arg("--runroot").arg(&storage).args(["--storage-driver", "vfs"]);
        if let Some(conf) = &registries_conf {
            cmd.arg("--registries-conf").arg(conf);
        }
        cmd.arg(subcommand);
        if let Some(authfile) = authfile {
            cmd.arg("--authfile").arg(authfile);
        }
        cmd
    };
    const TAG: &str = "localhost/mco-image-build:latest";
    let mut bud = buildah("build", registries.authfile.as_deref());
    bud.args(["--isolation", "chroot", "--layers=false", "--tag", TAG]).arg("--file").arg(&spec.containerfile);
    for (key, value) in &spec.build_args {
        bud.arg("--build-arg").arg(format!("{key}={value}"));
    }
    for (key, value) in &spec.labels {
        bud.arg("--label").arg(format!("{key}={value}"));
    }
    bud.arg(&spec.context);
    run_buildah(bud, "buildah build")?;
    let digestfile = work.path().join("digest");
    let mut push = buildah("push", push_authfile);
    push.arg("--digestfile").arg(&digestfile).arg(TAG).arg(to.to_string());
    run_buildah(push, "buildah push")?;
    let digest = std::fs::read_to_string(&digestfile).context("Reading buildah's digest file")?;
    tracing::info!(digest = digest.trim(), to = spec.to, "built image from a Containerfile");
    Ok(digest.trim().to_string())
}

/// Where builds keep their work directories: `$TMPDIR`, else `/var/tmp` (a pod's scratch disk,
/// not a tmpfs).
pub fn scratch_dir() -> PathBuf {
    std::env::var_os("TMPDIR").map_or_else(|| PathBuf::from("/var/tmp"), PathBuf::from)
}

/// Run a buildah command, logging its output as it comes (stdout and stderr through one pipe, in
/// the order buildah wrote them: each `STEP` line, then what the step printed); a failure carries
/// the last lines.
fn run_buildah(mut cmd: Command, what: &str) -> Result<()> {
    let (reader, writer) = std::io::pipe()?;
    cmd.stdin(std::process::Stdio::null()).stdout(writer.try_clone()?).stderr(writer);
    let mut child = cmd.spawn().with_context(|| format!("Running {what}"))?;
    // The command holds the pipe's write ends: without dropping it the output never ends.
    drop(cmd);
    let mut tail = std::collections::VecDeque::with_capacity(BUILD_ERROR_LINES);
    for line in std::io::BufRead::lines(std::io::BufReader::new(reader)) {
        let line = line.with_context(|| format!("Reading the output of {what}"))?;
        tracing::info!(target: "buildah", "{line}");
        if line.trim().is_empty() {
            continue;
        }
        if tail.len() == BUILD_ERROR_LINES {
            tail.pop_front();
        }
        tail.push_back(line);
    }
    let status = child.wait().with_context(|| format!("Waiting for {what}"))?;
    if !status.success() {
        let tail: Vec<String> = tail.into();
        anyhow::bail!("{what} failed ({status}):\n{}", tail.join("\n"));
    }
    Ok(())
}

/// Directory entries for the parents of `dest` (`usr`, `usr/share`, ...), so the layer is a
/// complete tree on its own.
fn append_parents<W: std::io::Write>(layer: &mut tar::Builder<W>, dest: &str) -> Result<()> {
    let mut prefix = String::new();
    for part in dest.split('/').collect::<Vec<_>>().split_last().map(|(_, p)| p).unwrap_or_default() {
        if !prefix.is_empty() {
            prefix.push('/');
        }
        prefix.push_str(part);
        let mut h = tar::Header::new_gnu();
        h.set_entry_type(tar::EntryType::Directory);
        h.set_mode(0o755);
        h.set_size(0);
        h.set_uid(0);
        h.set_gid(0);
        h.set_mtime(0);
        layer.append_data(&mut h, &prefix, std::io::empty())?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_adds() {
        let ok = |src: &str, dest: &str| Ok(Add { src: src.into(), dest: dest.into() });
        let cases: &[(&str, Result<Add, AddError>)] = &[
            ("files:/usr/share/extra", ok("files", "usr/share/extra")),
            ("/tmp/a:b:/etc/foo/", ok("/tmp/a:b", "etc/foo")),
            ("files:/usr", ok("files", "usr")),
            ("files", Err(AddError::Syntax("files".into()))),
            (":/usr/x", Err(AddError::Syntax(":/usr/x".into()))),
            ("files:usr/x", Err(AddError::Destination("files:usr/x".into()))),
            ("files:/var/lib/x", Err(AddError::Destination("files:/var/lib/x".into()))),
            ("files:/usr/../var", Err(AddError::Destination("files:/usr/../var".into()))),
            ("files:/usr//x", Err(AddError::Destination("files:/usr//x".into()))),
            ("files:/", Err(AddError::Destination("files:/".into()))),
        ];
        for (input, want) in cases {
            assert_eq!(&parse_add(input), want, "{input}");
        }
    }
}
