//! containers-policy.json(5) as a rendered config gives it to its nodes: which files its
//! signature requirements name (GPG `signedBy` keys, sigstore keys and certificates), and the same
//! policy read from somewhere else than `/` (a node's root mounted in the daemon's pod, or the
//! controller's copy of a rendered config's files), with those paths under that root.

use std::path::Path;

use serde_json::Value;

/// Where nodes read the policy and the signature storage configuration (containers-registries.d(5)).
pub const POLICY_PATH: &str = "/etc/containers/policy.json";
pub const REGISTRIES_D: &str = "/etc/containers/registries.d";

/// Requirement fields that name files: `signedBy`'s `keyPath`/`keyPaths`, `sigstoreSigned`'s
/// `keyPath`/`keyPaths`, `rekorPublicKeyPath`, and its `fulcio`'s `caPath`.
const PATH_FIELDS: &[&str] = &["keyPath", "keyPaths", "caPath", "rekorPublicKeyPath"];

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PolicyError {
    #[error("{POLICY_PATH} is not JSON: {0}")]
    NotJson(String),
    #[error("{POLICY_PATH}: {field} {path:?} is not an absolute path")]
    NotAbsolute { field: String, path: String },
    #[error("{POLICY_PATH}: {field} must be a path or a list of paths")]
    NotAPath { field: String },
}

/// The files `policy` names, in the order they appear, each once.
pub fn key_files(policy: &str) -> Result<Vec<String>, PolicyError> {
    let mut files = Vec::new();
    let mut value = parse(policy)?;
    visit_paths(&mut value, &mut |path| {
        if !files.contains(path) {
            files.push(path.clone());
        }
    })?;
    Ok(files)
}

/// `policy` with every file it names under `root` (`/etc/pki/key.gpg` → `ROOT/etc/pki/key.gpg`).
pub fn reroot(policy: &str, root: &Path) -> Result<String, PolicyError> {
    let mut value = parse(policy)?;
    visit_paths(&mut value, &mut |path| {
        *path = root.join(path.trim_start_matches('/')).to_string_lossy().into_owned();
    })?;
    Ok(serde_json::to_string_pretty(&value).expect("a JSON value serializes"))
}

fn parse(policy: &str) -> Result<Value, PolicyError> {
    serde_json::from_str(policy).map_err(|e| PolicyError::NotJson(e.to_string()))
}

/// Calls `f` on every file path in `value`, checking that each is absolute.
fn visit_paths(value: &mut Value, f: &mut impl FnMut(&mut String)) -> Result<(), PolicyError> {
    match value {
        Value::Object(fields) => {
            for (name, field) in fields.iter_mut() {
                if PATH_FIELDS.contains(&name.as_str()) {
                    let paths: Vec<&mut Value> = match field {
                        Value::Array(items) => items.iter_mut().collect(),
                        single => vec![single],
                    };
                    for path in paths {
                        let Value::String(path) = path else {
                            return Err(PolicyError::NotAPath { field: name.clone() });
                        };
                        if !path.starts_with('/') {
                            return Err(PolicyError::NotAbsolute { field: name.clone(), path: path.clone() });
                        }
                        f(path);
                    }
                } else {
                    visit_paths(field, f)?;
                }
            }
            Ok(())
        }
        Value::Array(items) => items.iter_mut().try_for_each(|item| visit_paths(item, f)),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const POLICY: &str = r#"{
        "default": [{"type": "reject"}],
        "transports": {
            "docker": {
                "registry.example/os": [{"type": "signedBy", "keyType": "GPGKeys", "keyPath": "/etc/pki/os.gpg",
                                          "signedIdentity": {"type": "matchRepoDigestOrExact"}}],
                "registry.example/multi": [{"type": "signedBy", "keyType": "GPGKeys",
                                             "keyPaths": ["/etc/pki/a.gpg", "/etc/pki/os.gpg"]}],
                "registry.example/sigstore": [{"type": "sigstoreSigned", "keyPath": "/etc/pki/cosign.pub",
                                                "rekorPublicKeyPath": "/etc/pki/rekor.pub",
                                                "fulcio": {"caPath": "/etc/pki/fulcio.pem"}}],
                "registry.example/inline": [{"type": "signedBy", "keyType": "GPGKeys", "keyData": "AAAA"}]
            },
            "docker-daemon": {"": [{"type": "insecureAcceptAnything"}]}
        }
    }"#;

    #[test]
    fn the_files_a_policy_names() {
        assert_eq!(
            key_files(POLICY).unwrap(),
            ["/etc/pki/os.gpg", "/etc/pki/a.gpg", "/etc/pki/cosign.pub", "/etc/pki/rekor.pub", "/etc/pki/fulcio.pem"]
        );
        assert_eq!(key_files(r#"{"default": [{"type": "insecureAcceptAnything"}]}"#).unwrap(), Vec::<String>::new());
    }

    #[test]
    fn rerooted_policies_name_the_files_under_the_root() {
        let rerooted = reroot(POLICY, Path::new("/rootfs")).unwrap();
        assert_eq!(
            key_files(&rerooted).unwrap(),
            [
                "/rootfs/etc/pki/os.gpg",
                "/rootfs/etc/pki/a.gpg",
                "/rootfs/etc/pki/cosign.pub",
                "/rootfs/etc/pki/rekor.pub",
                "/rootfs/etc/pki/fulcio.pem"
            ]
        );
        // Everything else is kept.
        let value: Value = serde_json::from_str(&rerooted).unwrap();
        assert_eq!(value["transports"]["docker"]["registry.example/inline"][0]["keyData"], "AAAA");
        assert_eq!(value["default"][0]["type"], "reject");
        assert_eq!(
            value["transports"]["docker"]["registry.example/os"][0]["signedIdentity"]["type"],
            "matchRepoDigestOrExact"
        );
    }

    #[test]
    fn bad_policies_are_named() {
        for (policy, want) in [
            ("{", "is not JSON"),
            (
                r#"{"default": [{"type": "signedBy", "keyPath": "keys/os.gpg"}]}"#,
                r#"keyPath "keys/os.gpg" is not an absolute path"#,
            ),
            (r#"{"default": [{"type": "signedBy", "keyPaths": [1]}]}"#, "keyPaths must be a path or a list of paths"),
        ] {
            let error = key_files(policy).unwrap_err().to_string();
            assert!(error.starts_with(POLICY_PATH) && error.contains(want), "{policy}: {error}");
        }
    }
}
