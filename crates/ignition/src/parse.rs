//! Reading an Ignition config of any supported version, as the original's `IgnParseWrapper` does.
//!
//! Spec 3.x configs are read through the `ignition-config` crate's per-version types (generated
//! from the upstream JSON schemas), so a key that does not exist in the config's own version is
//! dropped with a warning exactly as Go's parser ignores it; the result is then held in the 3.5
//! superset type. Spec 2.0-2.2 configs are read into the 2.2 type, 2.0 and 2.1 with the keys and
//! translation defaults of their own version (see [`crate::v2_older`]).

use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::{v2, v2_older, v3};

/// The list the original prints in its version errors.
pub const SUPPORTED_VERSIONS: &str = "2.2,3.0,3.1,3.2,3.3,3.4,3.5";

/// Why a config could not be read. Messages start like the original's so scripts keep matching.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    #[error("parsing Ignition config failed: config is not valid JSON: {0}")]
    NotJson(String),
    #[error(
        "parsing Ignition config failed: invalid version. Supported spec versions: {SUPPORTED_VERSIONS} (ignition.version is {0})"
    )]
    InvalidVersion(String),
    #[error(
        "parsing Ignition config failed: unknown version. Supported spec versions: {SUPPORTED_VERSIONS} (ignition.version is {0:?})"
    )]
    UnknownVersion(String),
    #[error("parsing Ignition config spec v3 failed with error: {0}")]
    V3(String),
    #[error("parsing Ignition spec v2 failed with error: {0}")]
    V2(String),
}

/// A config of either major spec version, as read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AnyConfig {
    /// Spec 2.x, normalised to 2.2.0.
    V2(v2::Config),
    /// Spec 3.x; `ignition.version` keeps the version it was written in.
    V3(v3::Config),
}

impl AnyConfig {
    /// The spec version the config declares.
    pub fn version(&self) -> &str {
        match self {
            AnyConfig::V2(c) => &c.ignition.version,
            AnyConfig::V3(c) => &c.ignition.version,
        }
    }
}

/// A parsed config and the keys that were ignored while reading it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Parsed {
    pub config: AnyConfig,
    /// `unused key $.path.to.key` for every key the config's spec version does not know.
    pub warnings: Vec<String>,
}

/// Parses raw config bytes (JSON).
pub fn parse(raw: &[u8]) -> Result<Parsed, ParseError> {
    let value: Value = serde_json::from_slice(raw).map_err(|e| ParseError::NotJson(e.to_string()))?;
    parse_value(&value)
}

/// Parses a config already decoded into JSON values (e.g. a MachineConfig's `spec.config`).
pub fn parse_value(value: &Value) -> Result<Parsed, ParseError> {
    let version = declared_version(value)?;
    let semver = semver::Version::parse(&version).map_err(|_| ParseError::InvalidVersion(format!("{version:?}")))?;
    let exact = semver.pre.is_empty() && semver.build.is_empty() && semver.patch == 0;
    let mut warnings = Vec::new();
    let config = match (exact, semver.major, semver.minor) {
        (true, 3, 0) => v3_via::<ignition_config::v3_0::Config>(value, &mut warnings)?,
        (true, 3, 1) => v3_via::<ignition_config::v3_1::Config>(value, &mut warnings)?,
        (true, 3, 2) => v3_via::<ignition_config::v3_2::Config>(value, &mut warnings)?,
        (true, 3, 3) => v3_via::<ignition_config::v3_3::Config>(value, &mut warnings)?,
        (true, 3, 4) => v3_via::<ignition_config::v3_4::Config>(value, &mut warnings)?,
        (true, 3, 5) => v3_via::<ignition_config::v3_5::Config>(value, &mut warnings)?,
        (true, 2, minor @ 0..=2) => {
            let mut own_version = value.clone();
            v2_older::drop_later_keys(&mut own_version, minor, &mut warnings);
            let mut config: v2::Config =
                deserialize_noting_unused(&own_version, &mut warnings).map_err(ParseError::V2)?;
            v2_older::translation_defaults(&mut config, minor);
            config.ignition.version = v2::VERSION.to_string();
            AnyConfig::V2(config)
        }
        _ => return Err(ParseError::UnknownVersion(version)),
    };
    Ok(Parsed { config, warnings })
}

/// The `ignition.version` string; anything that is not one is an invalid version, as in Go,
/// where a missing version reads as "".
fn declared_version(value: &Value) -> Result<String, ParseError> {
    let Value::Object(top) = value else {
        return Err(ParseError::NotJson(format!("expected a JSON object, found {}", kind_of(value))));
    };
    match top.get("ignition").and_then(|i| i.get("version")) {
        Some(Value::String(v)) => Ok(v.clone()),
        None | Some(Value::Null) => Err(ParseError::InvalidVersion("missing".to_string())),
        Some(other) => Err(ParseError::InvalidVersion(format!("a {}, not a string", kind_of(other)))),
    }
}

fn kind_of(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// Reads a 3.x config with the schema types of its own version, then re-reads the result as 3.5.
fn v3_via<T: DeserializeOwned + serde::Serialize>(
    value: &Value,
    warnings: &mut Vec<String>,
) -> Result<AnyConfig, ParseError> {
    let typed: T = deserialize_noting_unused(value, warnings).map_err(ParseError::V3)?;
    let mut normalised = serde_json::to_value(&typed).map_err(|e| ParseError::V3(e.to_string()))?;
    strip_nulls(&mut normalised);
    let config: v3::Config = serde_json::from_value(normalised).map_err(|e| ParseError::V3(e.to_string()))?;
    Ok(AnyConfig::V3(config))
}

/// Reads `value` as `T`, noting keys `T` has no field for; a value of the wrong type is an error
/// naming its field (`$.storage.files.0.mode: invalid type: ...`), as the original names it.
fn deserialize_noting_unused<T: DeserializeOwned>(value: &Value, warnings: &mut Vec<String>) -> Result<T, String> {
    let mut note = |path: serde_ignored::Path| warnings.push(format!("unused key {}", json_path(&path)));
    let noting = serde_ignored::Deserializer::new(value, &mut note);
    serde_path_to_error::deserialize(noting).map_err(|e| {
        use serde_path_to_error::Segment;
        let mut at = String::from("$");
        for segment in e.path() {
            match segment {
                Segment::Seq { index } => at.push_str(&format!(".{index}")),
                Segment::Map { key } => at.push_str(&format!(".{key}")),
                Segment::Enum { variant } => at.push_str(&format!(".{variant}")),
                Segment::Unknown => {}
            }
        }
        if at == "$" { e.inner().to_string() } else { format!("{at}: {}", e.inner()) }
    })
}

/// `$.storage.files.0.path`, the form Ignition's reports use.
fn json_path(path: &serde_ignored::Path) -> String {
    use serde_ignored::Path;
    match path {
        Path::Root => "$".to_string(),
        Path::Seq { parent, index } => format!("{}.{index}", json_path(parent)),
        Path::Map { parent, key } => format!("{}.{key}", json_path(parent)),
        Path::Some { parent } | Path::NewtypeStruct { parent } | Path::NewtypeVariant { parent } => json_path(parent),
    }
}

/// In Go a JSON `null` leaves a field at its zero value, which for every Ignition field is the
/// same as leaving it out.
fn strip_nulls(value: &mut Value) {
    match value {
        Value::Object(map) => {
            map.retain(|_, v| !v.is_null());
            map.values_mut().for_each(strip_nulls);
        }
        Value::Array(items) => items.iter_mut().for_each(strip_nulls),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn err(value: Value) -> String {
        parse_value(&value).unwrap_err().to_string()
    }

    #[test]
    fn version_errors_read_like_the_original() {
        let cases = [
            (
                json!({}),
                "parsing Ignition config failed: invalid version. Supported spec versions: 2.2,3.0,3.1,3.2,3.3,3.4,3.5",
            ),
            (json!({"ignition": {"version": "x"}}), "parsing Ignition config failed: invalid version."),
            (json!({"ignition": {"version": 3}}), "parsing Ignition config failed: invalid version."),
            (
                json!({"ignition": {"version": "4.0.0"}}),
                "parsing Ignition config failed: unknown version. Supported spec versions: 2.2,3.0,3.1,3.2,3.3,3.4,3.5",
            ),
            (json!({"ignition": {"version": "3.6.0"}}), "unknown version"),
            (json!({"ignition": {"version": "2.3.0"}}), "unknown version"),
            (json!({"ignition": {"version": "3.2.1"}}), "unknown version"),
            (json!({"ignition": {"version": "3.5.0-experimental"}}), "unknown version"),
            (json!("3.2.0"), "not valid JSON"),
        ];
        for (input, want) in cases {
            let got = err(input.clone());
            assert!(got.contains(want), "{input}: {got}");
        }
    }

    #[test]
    fn every_supported_version_parses() {
        for v in ["2.0.0", "2.1.0", "2.2.0", "3.0.0", "3.1.0", "3.2.0", "3.3.0", "3.4.0", "3.5.0"] {
            let parsed = parse_value(&json!({"ignition": {"version": v}})).unwrap();
            let want = if v.starts_with('2') { "2.2.0" } else { v };
            assert_eq!(parsed.config.version(), want);
        }
    }

    #[test]
    fn keys_unknown_to_the_declared_version_are_dropped_with_a_warning() {
        // kernelArguments exists from 3.3 on.
        let cfg = json!({"ignition": {"version": "3.2.0"}, "kernelArguments": {"shouldExist": ["a"]}, "bogus": 1});
        let parsed = parse_value(&cfg).unwrap();
        let AnyConfig::V3(c) = parsed.config else { panic!("not v3") };
        assert!(c.kernel_arguments.should_exist.is_empty());
        let mut warnings = parsed.warnings.clone();
        warnings.sort();
        assert_eq!(warnings, vec!["unused key $.bogus", "unused key $.kernelArguments"]);

        let cfg = json!({"ignition": {"version": "3.3.0"}, "kernelArguments": {"shouldExist": ["a"]}});
        let AnyConfig::V3(c) = parse_value(&cfg).unwrap().config else { panic!("not v3") };
        assert_eq!(c.kernel_arguments.should_exist, vec!["a"]);
    }

    #[test]
    fn wrong_types_are_errors_naming_the_problem() {
        let cfg = json!({"ignition": {"version": "3.2.0"}, "storage": {"files": [{"path": "/a", "mode": "420"}]}});
        let e = err(cfg);
        assert!(
            e.starts_with(
                "parsing Ignition config spec v3 failed with error: $.storage.files.0.mode: invalid type: string \"420\""
            ),
            "{e}"
        );
        let cfg = json!({"ignition": {"version": "2.2.0"}, "storage": {"files": [{"path": "/a", "mode": 4.5}]}});
        let e = err(cfg);
        assert!(
            e.starts_with("parsing Ignition spec v2 failed with error: $.storage.files.0.mode: invalid type"),
            "{e}"
        );
        let cfg = json!({"ignition": {"version": "3.4.0"}, "storage": {"files": [{"path": "/a", "mode": 1e20}]}});
        let e = err(cfg);
        assert!(e.starts_with("parsing Ignition config spec v3 failed with error: $.storage.files.0.mode: "), "{e}");
    }

    #[test]
    fn nulls_are_zero_values() {
        let cfg = json!({"ignition": {"version": "3.4.0"}, "storage": {"files": [{"path": "/a", "mode": null, "contents": null}]}});
        let AnyConfig::V3(c) = parse_value(&cfg).unwrap().config else { panic!("not v3") };
        assert_eq!(c.storage.files[0].mode, None);
        assert_eq!(c.storage.files[0].path, "/a");
    }
}
