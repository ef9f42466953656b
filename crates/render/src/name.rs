//! The rendered config name: `rendered-<pool>-<md5(salt ‖ yaml(spec))>`.
//!
//! The bytes hashed are what the original's `ghodss/yaml.Marshal(MachineConfigSpec)` prints:
//! Go's `encoding/json` of the spec (with the Ignition config as written by clarketm/json),
//! converted to YAML by go-yaml v2. Any difference renames every rendered config, which on a
//! live cluster would roll every node, so the serializers are emulated byte for byte in
//! `mco-goser` and this module only assembles the pieces.

use mco_goser::Escaping;
use md5::{Digest, Md5};
use serde::Serialize;
use serde_json::value::RawValue;

use crate::merge::Merged;

/// The fixed salt the original prepends before hashing.
const SALT: [u8; 80] = [
    16, 124, 206, 228, 139, 56, 175, 175, 79, 229, 134, 118, 157, 154, 211, 110, 25, 93, 47, 253, 172, 106, 37, 7, 174,
    13, 160, 185, 110, 17, 87, 52, 219, 131, 12, 206, 218, 141, 116, 135, 188, 181, 192, 151, 233, 62, 126, 165, 64,
    83, 179, 119, 15, 168, 208, 197, 146, 107, 58, 227, 133, 188, 238, 26, 33, 26, 235, 202, 32, 173, 31, 234, 41, 144,
    148, 79, 6, 206, 23, 22,
];

/// `MachineConfigSpec` in Go field order; the config is either pre-serialized bytes or the typed
/// config (same fields, since both go through the config's `Serialize`).
#[derive(Serialize)]
struct GoSpec<'a, C: Serialize + ?Sized> {
    #[serde(rename = "osImageURL")]
    os_image_url: &'a str,
    #[serde(rename = "baseOSExtensionsContainerImage")]
    base_os_extensions_container_image: &'a str,
    config: &'a C,
    #[serde(rename = "kernelArguments")]
    kernel_arguments: &'a [String],
    extensions: &'a [String],
    fips: bool,
    #[serde(rename = "kernelType")]
    kernel_type: &'a str,
}

/// The serialized forms of a merged spec.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Serialized {
    /// The Ignition config as clarketm/json writes it (the rendered MC's `spec.config`).
    pub config_json: String,
    /// The spec as Go's encoding/json writes it.
    pub spec_json: String,
    /// The exact bytes hashed after the salt.
    pub hash_input: String,
}

/// Fails where ghodss/yaml fails in the original (some control characters), so no name exists.
pub fn serialize(merged: &Merged) -> Result<Serialized, mco_goser::GhodssError> {
    let config_json = to_string(&merged.config, Escaping::Legacy);
    let raw = RawValue::from_string(config_json.clone()).expect("the Go JSON writer emits valid JSON");
    let spec_json = to_string(&go_spec(merged, &*raw), Escaping::Modern);
    // The value ghodss converts is the JSON read back; building it from the typed config is the
    // same value without parsing megabytes of JSON again.
    let value = serde_json::to_value(go_spec(merged, &merged.config)).expect("plain data types always serialize");
    let hash_input = mco_goser::ghodss_yaml(&value)?;
    Ok(Serialized { config_json, spec_json, hash_input })
}

fn go_spec<'a, C: Serialize + ?Sized>(merged: &'a Merged, config: &'a C) -> GoSpec<'a, C> {
    GoSpec {
        os_image_url: &merged.os_image_url,
        base_os_extensions_container_image: &merged.base_os_extensions_container_image,
        config,
        kernel_arguments: &merged.kernel_arguments,
        extensions: &merged.extensions,
        fips: merged.fips,
        kernel_type: &merged.kernel_type,
    }
}

/// `rendered-<pool>-<hex md5>`.
pub fn rendered_name(pool: &str, hash_input: &str) -> String {
    let mut md5 = Md5::new();
    md5.update(SALT);
    md5.update(hash_input.as_bytes());
    let digest = md5.finalize();
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    format!("rendered-{pool}-{hex}")
}

/// Go-compatible JSON as a string. Serializing our own plain types cannot fail.
pub(crate) fn to_string<T: Serialize + ?Sized>(value: &T, escaping: Escaping) -> String {
    let bytes = mco_goser::to_go_json(value, escaping).expect("plain data types always serialize");
    String::from_utf8(bytes).expect("JSON output is UTF-8")
}
