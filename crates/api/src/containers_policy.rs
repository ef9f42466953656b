//! containers-policy.json(5) as a rendered config gives it to its nodes: which files its
//! signature requirements name (GPG `signedBy` keys, sigstore keys and certificates), and the same
//! policy read from somewhere else than `/` (a node's root mounted in the daemon's pod, or the
//! controller's copy of a rendered config's files), with those paths under that root.

use std::fmt;
use std::path::{Component, Path, PathBuf};

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

/// Where nodes read the policy and the signature storage configuration (containers-registries.d(5)).
pub const POLICY_PATH: &str = "/etc/containers/policy.json";
pub const REGISTRIES_D: &str = "/etc/containers/registries.d";

/// Requirement fields that name a file: `signedBy`'s and `sigstoreSigned`'s `keyPath`,
/// `rekorPublicKeyPath`, and `fulcio`'s `caPath`.
const PATH_FIELDS: &[&str] = &["keyPath", "caPath", "rekorPublicKeyPath"];
/// Requirement fields that name a list of files.
const PATHS_FIELDS: &[&str] = &["keyPaths"];

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PolicyError {
    #[error("{POLICY_PATH} is not JSON: {0}")]
    NotJson(String),
    #[error("{POLICY_PATH}: {field} {path:?} is not an absolute path")]
    NotAbsolute { field: String, path: String },
    #[error("{POLICY_PATH}: {field} must be {what}")]
    NotAPath { field: String, what: &'static str },
}

/// The files `policy` names, in the order they appear, each once, as clean absolute paths
/// (`/etc//pki/./k` is `/etc/pki/k`, as the kernel resolves it).
pub fn key_files(policy: &str) -> Result<Vec<String>, PolicyError> {
    let mut files = Vec::new();
    let mut value = parse(policy)?;
    visit_paths(&mut value, &mut |path| {
        let clean = clean(path);
        if !files.contains(&clean) {
            files.push(clean);
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

/// `path` without empty and `.` components (`..` is kept: the caller refuses it).
fn clean(path: &str) -> String {
    let clean: PathBuf = Path::new(path).components().filter(|c| !matches!(c, Component::CurDir)).collect();
    clean.to_string_lossy().into_owned()
}

/// The policy as JSON. Like c/image, a key given twice in one object is refused: serde_json would
/// keep the last, and read a policy c/image refuses as one that accepts.
fn parse(policy: &str) -> Result<Value, PolicyError> {
    serde_json::from_str::<Strict>(policy).map(|s| s.0).map_err(|e| PolicyError::NotJson(e.to_string()))
}

/// A JSON value whose objects have no key twice.
struct Strict(Value);

impl<'de> Deserialize<'de> for Strict {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(StrictVisitor).map(Strict)
    }
}

struct StrictVisitor;

impl<'de> Visitor<'de> for StrictVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_string()))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        while let Some(Strict(item)) = seq.next_element()? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut object = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            if object.contains_key(&key) {
                return Err(de::Error::custom(format!("duplicate key {key:?}")));
            }
            let Strict(value) = map.next_value()?;
            object.insert(key, value);
        }
        Ok(Value::Object(object))
    }
}

/// Calls `f` on every file path in `value`, checking that each is absolute.
fn visit_paths(value: &mut Value, f: &mut impl FnMut(&mut String)) -> Result<(), PolicyError> {
    match value {
        Value::Object(fields) => {
            for (name, field) in fields.iter_mut() {
                let single = PATH_FIELDS.contains(&name.as_str());
                if single || PATHS_FIELDS.contains(&name.as_str()) {
                    let (paths, what): (Vec<&mut Value>, _) = match field {
                        Value::Array(items) if !single => (items.iter_mut().collect(), "a list of paths"),
                        one if single => (vec![one], "a path"),
                        _ => return Err(PolicyError::NotAPath { field: name.clone(), what: "a list of paths" }),
                    };
                    for path in paths {
                        let Value::String(path) = path else {
                            return Err(PolicyError::NotAPath { field: name.clone(), what });
                        };
                        if !path.starts_with('/')
                            || Path::new(path.as_str()).components().any(|c| c == Component::ParentDir)
                        {
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
        // As the kernel resolves them.
        assert_eq!(
            key_files(r#"{"default": [{"type": "signedBy", "keyPath": "/etc//pki/./k"}]}"#).unwrap(),
            ["/etc/pki/k"]
        );
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
            (r#"{"default": [{"type": "signedBy", "keyPaths": [1]}]}"#, "keyPaths must be a list of paths"),
            (r#"{"default": [{"type": "signedBy", "keyPaths": "/k.gpg"}]}"#, "keyPaths must be a list of paths"),
            (r#"{"default": [{"type": "signedBy", "keyPath": ["/k.gpg"]}]}"#, "keyPath must be a path"),
            (r#"{"default": [{"type": "signedBy", "keyPath": "/etc/../k.gpg"}]}"#, "is not an absolute path"),
            // c/image refuses a key given twice; the last one must not win here.
            (
                r#"{"default": [{"type": "reject"}], "transports": {}, "default": [{"type": "insecureAcceptAnything"}]}"#,
                r#"is not JSON: duplicate key "default""#,
            ),
        ] {
            let error = key_files(policy).unwrap_err().to_string();
            assert!(error.starts_with(POLICY_PATH) && error.contains(want), "{policy}: {error}");
        }
    }
}
