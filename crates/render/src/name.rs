//! The rendered config name: `rendered-<pool>-<md5(salt ‖ yaml(spec))>`.
//!
//! The bytes hashed are what the original's `ghodss/yaml.Marshal(MachineConfigSpec)` prints:
//! Go's `encoding/json` of the spec (with the Ignition config as written by clarketm/json),
//! converted to YAML by go-yaml v2. Any difference renames every rendered config, which on a
//! live cluster would roll every node, so the serializers are emulated byte for byte in
//! `mco-goser` and this module only assembles the pieces.

use std::sync::atomic::{AtomicBool, Ordering};

use mco_goser::Escaping;
use mco_ignition::v3;
use md5::{Digest, Md5};
use serde::Serialize;

use crate::merge::Merged;

/// The fixed salt the original prepends before hashing.
const SALT: [u8; 80] = [
    16, 124, 206, 228, 139, 56, 175, 175, 79, 229, 134, 118, 157, 154, 211, 110, 25, 93, 47, 253, 172, 106, 37, 7, 174,
    13, 160, 185, 110, 17, 87, 52, 219, 131, 12, 206, 218, 141, 116, 135, 188, 181, 192, 151, 233, 62, 126, 165, 64,
    83, 179, 119, 15, 168, 208, 197, 146, 107, 58, 227, 133, 188, 238, 26, 33, 26, 235, 202, 32, 173, 31, 234, 41, 144,
    148, 79, 6, 206, 23, 22,
];

/// `MachineConfigSpec` in Go field order, with the typed config: the value ghodss converts.
#[derive(Serialize)]
struct GoSpec<'a> {
    #[serde(rename = "osImageURL")]
    os_image_url: &'a str,
    #[serde(rename = "baseOSExtensionsContainerImage")]
    base_os_extensions_container_image: &'a str,
    config: &'a v3::Config,
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

/// The spec as Go's encoding/json writes it (the fields of [`GoSpec`], the config as
/// clarketm/json wrote it), kept in pieces around the config: that is megabytes, and the size
/// check needs only the total length.
pub(crate) struct SpecJson {
    before_config: String,
    pub(crate) config_json: String,
    after_config: String,
}

impl SpecJson {
    pub(crate) fn new(merged: &Merged) -> Self {
        let before_config = format!(
            "{{\"osImageURL\":{},\"baseOSExtensionsContainerImage\":{},\"config\":",
            to_string(&merged.os_image_url, Escaping::Modern),
            to_string(&merged.base_os_extensions_container_image, Escaping::Modern),
        );
        let after_config = format!(
            ",\"kernelArguments\":{},\"extensions\":{},\"fips\":{},\"kernelType\":{}}}",
            to_string(&merged.kernel_arguments, Escaping::Modern),
            to_string(&merged.extensions, Escaping::Modern),
            merged.fips,
            to_string(&merged.kernel_type, Escaping::Modern),
        );
        let config_json = to_string(&merged.config, Escaping::Legacy);
        SpecJson { before_config, config_json, after_config }
    }

    pub(crate) fn len(&self) -> usize {
        self.before_config.len() + self.config_json.len() + self.after_config.len()
    }

    pub(crate) fn to_text(&self) -> String {
        [self.before_config.as_str(), &self.config_json, &self.after_config].concat()
    }
}

/// The rendered name and, unless it was dropped, the bytes hashed for it.
pub(crate) struct Named {
    pub(crate) name: String,
    pub(crate) hash_input: Option<String>,
}

/// Names the rendered config `rendered-<pool>-<hex md5>`, hashing the ghodss YAML of the spec as
/// it is written. The YAML is kept too, until `drop_hash_input` is set: it is as large as the
/// config, and the caller may learn meanwhile that it will not need it.
/// Fails where ghodss/yaml fails in the original (some control characters), so no name exists.
pub(crate) fn name(pool: &str, merged: &Merged, drop_hash_input: &AtomicBool) -> Result<Named, mco_goser::GhodssError> {
    // The value ghodss converts is the JSON read back; building it from the typed config is the
    // same value without parsing megabytes of JSON again.
    let value = serde_json::to_value(GoSpec {
        os_image_url: &merged.os_image_url,
        base_os_extensions_container_image: &merged.base_os_extensions_container_image,
        config: &merged.config,
        kernel_arguments: &merged.kernel_arguments,
        extensions: &merged.extensions,
        fips: merged.fips,
        kernel_type: &merged.kernel_type,
    })
    .expect("plain data types always serialize");
    let mut md5 = Md5::new();
    md5.update(SALT);
    let mut hash_input = Some(String::new());
    mco_goser::ghodss_yaml_in_pieces(&value, &mut |piece| {
        md5.update(piece.as_bytes());
        if drop_hash_input.load(Ordering::Relaxed) {
            hash_input = None;
        } else if let Some(kept) = &mut hash_input {
            kept.push_str(piece);
        }
    })?;
    let hex: String = md5.finalize().iter().map(|b| format!("{b:02x}")).collect();
    Ok(Named { name: format!("rendered-{pool}-{hex}"), hash_input })
}

/// The original's other hashed names (MachineOSBuilds): hex md5 of the salt followed by the ghodss
/// YAML of each value in turn.
pub fn salted_yaml_md5(values: &[serde_json::Value]) -> Result<String, mco_goser::GhodssError> {
    let mut md5 = Md5::new();
    md5.update(SALT);
    for value in values {
        mco_goser::ghodss_yaml_in_pieces(value, &mut |piece| md5.update(piece.as_bytes()))?;
    }
    Ok(md5.finalize().iter().map(|b| format!("{b:02x}")).collect())
}

/// Go-compatible JSON as a string. Serializing our own plain types cannot fail.
pub(crate) fn to_string<T: Serialize + ?Sized>(value: &T, escaping: Escaping) -> String {
    let bytes = mco_goser::to_go_json(value, escaping).expect("plain data types always serialize");
    String::from_utf8(bytes).expect("JSON output is UTF-8")
}
