//! Byte-exact reproductions of the two Go serializers the Machine Config Operator hashes.
//!
//! A rendered MachineConfig is named `rendered-<pool>-<md5(salt ‖ yaml(spec))>`, where the YAML is
//! `github.com/ghodss/yaml.Marshal` of the spec, and the spec's Ignition config is JSON written
//! by `github.com/clarketm/json`. One different byte gives a different name, and on a cluster a
//! new rendered config rolls (and reboots) every node of the pool. So this crate ports the Go
//! code paths that decide those bytes rather than approximating them:
//!
//! * [`to_go_json`]: Go's `encoding/json` (or clarketm/json) compact output for a value whose
//!   serde impl already mirrors the Go struct (field order, `omitempty`).
//! * [`ghodss_yaml`]: ghodss/yaml on top of gopkg.in/yaml.v2 v2.4.0 (JSON round trip, key order,
//!   scalar styles, line folding at 80 columns).

mod emitter;
mod ghodss;
mod json;
mod kubeyaml;
mod resolve;
mod strconv;
mod unicode_tables;

pub use ghodss::GhodssError;
pub use json::Escaping;
pub use kubeyaml::{ObjectError, YamlError, yaml_documents, yaml_object};

/// Serializes `value` as compact JSON exactly as Go's `json.Marshal` would print the Go value it
/// mirrors (with `flavor` choosing between the current encoder and the clarketm/json fork).
///
/// What is reproduced: Go's string escaping (`\"`, `\\`, `\n`, `\r`, `\t`, `\b`/`\f` per
/// `flavor`, other control bytes as lowercase `\u00XX`, `<` `>` `&` as `\u003c` `\u003e`
/// `\u0026`, U+2028/U+2029 escaped, everything else raw UTF-8 including DEL) and Go's float
/// formatting (`3` not `3.0`, `1e+21`, `1e-7`).
///
/// What stays the caller's job, because only the Go type knows it: field order, `omitempty`,
/// sorted map keys (Go sorts `map` keys; serde writes them in iteration order), `[]byte` as
/// base64, and non-finite floats (Go fails; serde_json writes `null`).
pub fn to_go_json<T: serde::Serialize + ?Sized>(value: &T, flavor: Escaping) -> serde_json::Result<Vec<u8>> {
    let mut out = Vec::new();
    let mut serializer = serde_json::Serializer::with_formatter(&mut out, json::GoFormatter { escaping: flavor });
    value.serialize(&mut serializer)?;
    Ok(out)
}

/// What `github.com/ghodss/yaml.Marshal` returns for a Go value whose `encoding/json` form is
/// `value` (so `value` must already follow Go's JSON rules: field order is irrelevant here since
/// yaml.v2 sorts keys, but omitted fields and `null`s must match).
///
/// The output ends with a newline and has no document markers. Numbers are taken as Go would
/// have printed them: serde_json integers are Go integers, serde_json floats are Go `float64`s.
///
/// Fails where ghodss/yaml itself fails although `json.Marshal` succeeded (see [`GhodssError`]:
/// DEL and C1 control characters, 1023+ character map keys, raw NELs in keys, nesting deeper
/// than 10000). Returning text, and so a name, that Go could never compute would be worse.
pub fn ghodss_yaml(value: &serde_json::Value) -> Result<String, GhodssError> {
    Ok(emitter::emit_document(&ghodss::to_node(value)?))
}

/// [`ghodss_yaml`] handed to `sink` in pieces (of some 64 KiB) as it is written, for a caller
/// that only hashes megabytes of it. Nothing is written when the conversion fails.
pub fn ghodss_yaml_in_pieces(value: &serde_json::Value, sink: &mut dyn FnMut(&str)) -> Result<(), GhodssError> {
    emitter::emit_document_in_pieces(&ghodss::to_node(value)?, sink);
    Ok(())
}
