//! Where `hack/kube-binaries.sh` put etcd and the Kubernetes control plane.
//!
//! The versions are read from the wrapper modules' `go.mod` files, which the script reads too, so
//! both agree on the cache directory without a second copy of the version numbers.

use std::path::{Path, PathBuf};

use crate::Error;

const KUBERNETES_GO_MOD: &str = include_str!("../../../hack/kube-binaries/kubernetes/go.mod");
const ETCD_GO_MOD: &str = include_str!("../../../hack/kube-binaries/etcd/go.mod");

/// Overrides the directory holding the binaries.
pub const BIN_DIR_ENV: &str = "MCO_KUBE_BIN_DIR";

/// The paths of the programs `names` (e.g. `["kube-apiserver", "etcd"]`) in `$MCO_KUBE_BIN_DIR`, or
/// else in the cache directory the script builds into; every missing one is named in the error.
pub fn find_binaries<const N: usize>(names: [&str; N]) -> Result<[PathBuf; N], Error> {
    let dir = match std::env::var_os(BIN_DIR_ENV) {
        Some(dir) => PathBuf::from(dir),
        None => default_dir(
            std::env::var_os("XDG_CACHE_HOME").as_deref().map(Path::new),
            std::env::var_os("HOME").as_deref().map(Path::new),
        ),
    };
    in_dir(&dir, names)
}

fn in_dir<const N: usize>(dir: &Path, names: [&str; N]) -> Result<[PathBuf; N], Error> {
    let paths = names.map(|name| dir.join(name));
    let missing: Vec<String> =
        paths.iter().filter(|path| !path.is_file()).map(|path| path.display().to_string()).collect();
    if missing.is_empty() { Ok(paths) } else { Err(Error::MissingBinaries { missing }) }
}

/// `<cache>/mco/kube/<kube version>-etcd-<etcd version>`, where `<cache>` is `$XDG_CACHE_HOME` or
/// `$HOME/.cache` (a relative `.cache` without either).
fn default_dir(xdg_cache_home: Option<&Path>, home: Option<&Path>) -> PathBuf {
    let cache = match (xdg_cache_home, home) {
        (Some(xdg), _) if !xdg.as_os_str().is_empty() => xdg.to_path_buf(),
        (_, Some(home)) => home.join(".cache"),
        (_, None) => PathBuf::from(".cache"),
    };
    cache.join("mco/kube").join(cache_dir_name())
}

/// The versioned directory name, e.g. `v1.36.3-etcd-v3.6.16`.
pub fn cache_dir_name() -> String {
    let kube = module_version(KUBERNETES_GO_MOD, "k8s.io/kubernetes")
        .expect("the kubernetes go.mod requires k8s.io/kubernetes");
    let etcd = module_version(ETCD_GO_MOD, "go.etcd.io/etcd/server/v3").expect("the etcd go.mod requires etcd");
    format!("{kube}-etcd-{etcd}")
}

/// The version a go.mod requires for `module`, in either `require` form (one line or a block).
/// Replace lines (`module => module vX`) name the module after `=>`, so they never match first.
fn module_version<'a>(go_mod: &'a str, module: &str) -> Option<&'a str> {
    go_mod.lines().find_map(|line| {
        let line = line.split("//").next().unwrap_or_default();
        let words: Vec<&str> = line.split_whitespace().collect();
        words.windows(2).find(|w| w[0] == module && w[1].starts_with('v')).map(|w| w[1])
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn module_version_reads_require_forms() {
        let go_mod = "module x\n\ngo 1.26.0\n\nrequire go.etcd.io/etcd/server/v3 v3.6.16\n\nrequire (\n\tk8s.io/api v0.36.3 // indirect\n\tk8s.io/kubernetes v1.36.3\n)\n\nreplace k8s.io/apimachinery => k8s.io/apimachinery v0.36.3\n";
        let cases = [
            ("go.etcd.io/etcd/server/v3", Some("v3.6.16")),
            ("k8s.io/kubernetes", Some("v1.36.3")),
            ("k8s.io/api", Some("v0.36.3")),
            // Only in a replace line: `k8s.io/apimachinery =>` is not followed by a version.
            ("k8s.io/apimachinery", Some("v0.36.3")),
            ("k8s.io/client-go", None),
            ("k8s.io", None),
        ];
        for (module, want) in cases {
            assert_eq!(module_version(go_mod, module), want, "{module}");
        }
    }

    #[test]
    fn module_version_ignores_comments() {
        assert_eq!(
            module_version("// k8s.io/kubernetes v9.9.9\nrequire k8s.io/kubernetes v1.2.3\n", "k8s.io/kubernetes"),
            Some("v1.2.3")
        );
    }

    #[test]
    fn cache_dir_name_uses_the_committed_go_mods() {
        let name = cache_dir_name();
        let (kube, etcd) = name.split_once("-etcd-").expect("two versions");
        assert!(kube.starts_with("v1."), "{name}");
        assert!(etcd.starts_with("v3."), "{name}");
    }

    #[test]
    fn default_dir_follows_xdg() {
        let name = cache_dir_name();
        let cases = [
            (Some("/x"), Some("/home/u"), format!("/x/mco/kube/{name}")),
            (Some(""), Some("/home/u"), format!("/home/u/.cache/mco/kube/{name}")),
            (None, Some("/home/u"), format!("/home/u/.cache/mco/kube/{name}")),
            (None, None, format!(".cache/mco/kube/{name}")),
        ];
        for (xdg, home, want) in cases {
            assert_eq!(default_dir(xdg.map(Path::new), home.map(Path::new)), PathBuf::from(&want), "{xdg:?} {home:?}");
        }
    }

    #[test]
    fn missing_binaries_are_named_with_the_fix() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("etcd"), "").unwrap();
        let err = in_dir(dir.path(), ["kube-apiserver", "etcd"]).unwrap_err().to_string();
        assert!(err.contains(&dir.path().join("kube-apiserver").display().to_string()), "{err}");
        assert!(!err.contains(&dir.path().join("etcd").display().to_string()), "{err}");
        assert!(err.contains("hack/kube-binaries.sh"), "{err}");
    }
}
