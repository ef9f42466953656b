//! The node's OS as `mcd_host_os_and_version` reports it: the `ID` of its os-release(5),
//! upper-cased as the original's label always was, and its `VERSION_ID`.

use std::path::Path;

use mco_apply::fsutil::host_path_followed;

/// The original's `os` label when the OS cannot be read.
pub const UNSUPPORTED: &str = "unsupported";

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostOs {
    pub os: String,
    pub version: String,
}

/// The host OS an os-release file's text names (pure).
pub fn parse(text: &str) -> HostOs {
    // os-release(5): an absent ID means "linux".
    let (mut id, mut version) = ("linux".to_string(), String::new());
    for line in text.lines() {
        match line.trim().split_once('=') {
            Some(("ID", value)) => id = unquote(value),
            Some(("VERSION_ID", value)) => version = unquote(value),
            _ => {}
        }
    }
    HostOs { os: id.to_uppercase(), version }
}

/// A shell-style value: in double quotes (with backslash escapes), in single quotes, or bare.
fn unquote(value: &str) -> String {
    let value = value.trim();
    if let Some(inner) = value.strip_prefix('\'').and_then(|v| v.strip_suffix('\'')) {
        return inner.to_string();
    }
    let Some(inner) = value.strip_prefix('"').and_then(|v| v.strip_suffix('"')) else { return value.to_string() };
    let mut unescaped = String::with_capacity(inner.len());
    let mut chars = inner.chars();
    while let Some(c) = chars.next() {
        unescaped.push(if c == '\\' { chars.next().unwrap_or('\\') } else { c });
    }
    unescaped
}

/// The OS of the node whose root is `root`: its /etc/os-release, else /usr/lib/os-release (as
/// os-release(5) says to look); [`UNSUPPORTED`] when neither can be read.
pub fn read(root: &Path) -> HostOs {
    for file in ["/etc/os-release", "/usr/lib/os-release"] {
        let path = match host_path_followed(root, file) {
            Ok(path) => path,
            Err(e) => {
                tracing::warn!("{e:#}");
                break;
            }
        };
        match std::fs::read_to_string(path) {
            Ok(text) => return parse(&text),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => {
                tracing::warn!("reading {file}: {e}");
                break;
            }
        }
    }
    HostOs { os: UNSUPPORTED.to_string(), version: String::new() }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_id_upper_cased_and_the_version_id() {
        let host = |os: &str, version: &str| HostOs { os: os.to_string(), version: version.to_string() };
        let cases = [
            (
                "RHCOS 4.18",
                "NAME=\"Red Hat Enterprise Linux CoreOS\"\nID=\"rhcos\"\nID_LIKE=\"rhel fedora\"\n\
                 VERSION=\"418.94.202410090804-0\"\nVERSION_ID=\"4.18\"\nRHEL_VERSION=\"9.4\"\n",
                host("RHCOS", "4.18"),
            ),
            (
                "RHCOS 4.19 (RHEL with a CoreOS variant)",
                "ID=rhel\nVARIANT_ID=coreos\nVERSION_ID=9.6\n",
                host("RHEL", "9.6"),
            ),
            ("single quotes", "ID='fedora'\nVERSION_ID='41'\n", host("FEDORA", "41")),
            ("escapes in double quotes", "ID=\"a\\\"b\"\nVERSION_ID=\"1\\\\2\"\n", host("A\"B", "1\\2")),
            ("comments and blank lines", "# ID=commented\n\n  ID=centos  \n", host("CENTOS", "")),
            ("no ID: linux, as os-release(5) says", "VERSION_ID=1\n", host("LINUX", "1")),
            ("a key that only ends like one", "VARIANT_ID=coreos\nOSTREE_VERSION_ID=2\nID=scos\n", host("SCOS", "")),
        ];
        for (name, text, want) in cases {
            assert_eq!(parse(text), want, "{name}");
        }
    }

    #[test]
    fn etc_first_then_usr_lib_else_unsupported() {
        let root = tempfile::tempdir().unwrap();
        let r = root.path();
        assert_eq!(read(r), HostOs { os: UNSUPPORTED.to_string(), version: String::new() });
        std::fs::create_dir_all(r.join("usr/lib")).unwrap();
        std::fs::write(r.join("usr/lib/os-release"), "ID=fedora\nVERSION_ID=41\n").unwrap();
        assert_eq!(read(r).os, "FEDORA");
        std::fs::create_dir_all(r.join("etc")).unwrap();
        std::fs::write(r.join("etc/os-release"), "ID=rhcos\nVERSION_ID=4.18\n").unwrap();
        assert_eq!(read(r), HostOs { os: "RHCOS".to_string(), version: "4.18".to_string() });
    }
}
