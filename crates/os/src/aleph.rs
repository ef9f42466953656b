//! Reading the aleph file coreos-assembler writes into every boot image's sysroot
//! (`/sysroot/.coreos-aleph-version.json`, written here by [`crate::sysroot::aleph`]): which
//! build the machine was installed from. The daemon reports it on the Node; firstboot judges
//! boot image skew by its `build`.

use std::path::Path;

use serde::{Deserialize, Serialize};

pub use crate::sysroot::ALEPH_FILE;

/// The fields of an aleph file the MCO reads (the file's own key names).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BootImage {
    pub build: String,
    #[serde(rename = "ostree-commit")]
    pub ostree_commit: String,
}

#[derive(Debug, thiserror::Error)]
pub enum AlephError {
    #[error("reading {path}: {source}")]
    Read { path: String, source: std::io::Error },
    #[error("{path}: not an aleph file (a JSON object with \"build\" and \"ostree-commit\" strings): {source}")]
    Invalid { path: String, source: serde_json::Error },
}

/// Parses an aleph file (other keys, e.g. `imgid` and `ref`, are ignored).
pub fn parse(text: &str) -> Result<BootImage, serde_json::Error> {
    serde_json::from_str(text)
}

/// Reads the aleph file at `path`; `Ok(None)` when there is none (not a CoreOS boot image).
pub fn read(path: &Path) -> Result<Option<BootImage>, AlephError> {
    let name = || path.display().to_string();
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(source) => return Err(AlephError::Read { path: name(), source }),
    };
    parse(&text).map(Some).map_err(|source| AlephError::Invalid { path: name(), source })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_real_aleph_files() {
        // As RHCOS 4.16 and FCOS 40 boot images carry them.
        let rhcos = r#"{"build": "416.94.202405211741-0", "imgid": "rhcos-416.94.202405211741-0-metal.x86_64.raw",
            "ostree-commit": "3d8e3c0f3e9f9f6fd4b5c0e5c2f1b0a9a8e7d6c5b4a3f2e1d0c9b8a7f6e5d4c3",
            "ref": ""}"#;
        let image = parse(rhcos).unwrap();
        assert_eq!(image.build, "416.94.202405211741-0");
        assert_eq!(image.ostree_commit, "3d8e3c0f3e9f9f6fd4b5c0e5c2f1b0a9a8e7d6c5b4a3f2e1d0c9b8a7f6e5d4c3");
        let fcos = r#"{"build":"40.20240504.3.0","container-image":{"image":"quay.io/fedora/fedora-coreos"},
            "imgid":"fedora-coreos-40.20240504.3.0-metal.x86_64.raw","ostree-commit":"abc","ref":"fedora/x86_64/coreos/stable"}"#;
        assert_eq!(parse(fcos).unwrap(), BootImage { build: "40.20240504.3.0".into(), ostree_commit: "abc".into() });
    }

    #[test]
    fn reads_what_install_writes() {
        let written = crate::sysroot::aleph("reg/os@sha256:1", Some("9.6.20260101-0"), "abc");
        let image = parse(&written.to_string()).unwrap();
        assert_eq!(image, BootImage { build: "9.6.20260101-0".into(), ostree_commit: "abc".into() });
    }

    #[test]
    fn refuses_what_is_not_an_aleph_file() {
        let cases = [
            ("{}", "missing field `build`"),
            (r#"{"build": "1"}"#, "missing field `ostree-commit`"),
            (r#"{"build": 416, "ostree-commit": "abc"}"#, "invalid type: integer `416`"),
            ("not json", "expected ident"),
        ];
        for (text, want) in cases {
            let err = parse(text).unwrap_err().to_string();
            assert!(err.contains(want), "{text}: {err}");
        }
    }

    #[test]
    fn a_missing_file_is_no_boot_image() {
        let dir = tempfile::tempdir().unwrap();
        assert!(read(&dir.path().join(ALEPH_FILE)).unwrap().is_none());
        std::fs::write(dir.path().join(ALEPH_FILE), "[]").unwrap();
        let err = read(&dir.path().join(ALEPH_FILE)).unwrap_err().to_string();
        assert!(err.contains(".coreos-aleph-version.json: not an aleph file"), "{err}");
    }
}
