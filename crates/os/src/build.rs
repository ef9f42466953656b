//! Derived OS images: a base image plus one layer of added directories and labels, the way a
//! `FROM <base>` + `COPY` container build layers content on an ostree native container.
//!
//! The base is copied with skopeo (digests preserved) into a work OCI directory, the layer and the
//! new config are written there, and the result is copied to the destination with skopeo, which
//! reports the pushed digest.

use std::collections::BTreeMap;
use std::path::PathBuf;

use anyhow::{Context, Result};
use fn_error_context::context;
use ocidir::cap_std::{ambient_authority, fs::Dir};
use ocidir::oci_spec::image as oci_image;

use crate::image::{parse_destination, parse_image_ref, skopeo_copy};

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

/// Build `to` from the image `from` plus `adds` and `labels`; return the manifest digest of the
/// result.
#[context("Building {to} from {from}")]
pub fn build(from: &str, adds: &[Add], labels: &BTreeMap<String, String>, to: &str) -> Result<String> {
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

    let mut layer = oci.create_layer(None)?;
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
