//! Golden tests over the conformance cases the original implementation produced
//! (`testdata/conformance/render/<case>/expected/`, plus `MCO_CONFORMANCE_DIR`). Every case
//! directory is picked up, so new cases are covered without touching this file.
//!
//! * `hash-input.yaml` is exactly the byte string the controller hashed, i.e. ghodss/yaml's
//!   output for the rendered spec. Unlike the other expected files it *does* end with a newline:
//!   yaml.v2 terminates its output with one, and the file holds the hashed bytes unchanged. The
//!   test proves that by recomputing the rendered name from the file (`md5(salt ‖ file)`).
//! * `rendered.json` and `rendered-mc.json` are Go `encoding/json` output, `config.ign.json` is
//!   clarketm/json output; re-serializing them (keeping their key order) must give the same bytes.

use std::fs;
use std::path::{Path, PathBuf};

use mco_goser::{Escaping, ghodss_yaml, to_go_json};
use md5::{Digest, Md5};
use ordered::OrderedValue;

/// The fixed salt prepended to the YAML before hashing
/// (`docs/concepts/rendered-configs.md#rendered-names`).
const SALT: [u8; 80] = [
    16, 124, 206, 228, 139, 56, 175, 175, 79, 229, 134, 118, 157, 154, 211, 110, 25, 93, 47, 253, 172, 106, 37, 7, 174,
    13, 160, 185, 110, 17, 87, 52, 219, 131, 12, 206, 218, 141, 116, 135, 188, 181, 192, 151, 233, 62, 126, 165, 64,
    83, 179, 119, 15, 168, 208, 197, 146, 107, 58, 227, 133, 188, 238, 26, 33, 26, 235, 202, 32, 173, 31, 234, 41, 144,
    148, 79, 6, 206, 23, 22,
];

#[path = "../../../../testdata/conformance/cases.rs"]
mod cases;

/// The `expected/` directory of every case.
fn case_dirs() -> Vec<PathBuf> {
    cases::render_case_dirs().into_iter().map(|case| case.join("expected")).collect()
}

fn read(dir: &Path, name: &str) -> Vec<u8> {
    fs::read(dir.join(name)).unwrap_or_else(|e| panic!("{}/{name}: {e}", dir.display()))
}

fn md5_hex(data: &[u8]) -> String {
    Md5::digest(data).iter().map(|b| format!("{b:02x}")).collect()
}

#[test]
fn hash_input_is_ghodss_yaml_of_rendered_spec() {
    for dir in case_dirs() {
        let rendered: serde_json::Value =
            serde_json::from_slice(&read(&dir, "rendered.json")).expect("rendered.json parses");
        let expected = read(&dir, "hash-input.yaml");
        let yaml = ghodss_yaml(&rendered).expect("ghodss_yaml succeeds");
        assert_eq!(yaml, String::from_utf8_lossy(&expected), "{}", dir.display());
    }
}

#[test]
fn hash_input_file_is_what_was_hashed() {
    for dir in case_dirs() {
        let name = String::from_utf8(read(&dir, "name.txt")).expect("UTF-8 name");
        let yaml = read(&dir, "hash-input.yaml");
        assert_eq!(yaml.last(), Some(&b'\n'), "{}: the YAML ends with a newline", dir.display());
        let hash = md5_hex(&[&SALT[..], &yaml].concat());
        assert!(
            name.starts_with("rendered-") && name.ends_with(&format!("-{hash}")),
            "{}: {name} vs {hash}",
            dir.display()
        );
    }
}

#[test]
fn json_files_reserialize_byte_for_byte() {
    for dir in case_dirs() {
        for (file, flavor) in [
            ("rendered.json", Escaping::Modern),
            ("rendered-mc.json", Escaping::Modern),
            ("config.ign.json", Escaping::Legacy),
        ] {
            if !dir.join(file).is_file() {
                continue;
            }
            let bytes = read(&dir, file);
            let value: OrderedValue = serde_json::from_slice(&bytes).expect("parses");
            let out = to_go_json(&value, flavor).expect("serializes");
            assert_eq!(String::from_utf8_lossy(&out), String::from_utf8_lossy(&bytes), "{}/{file}", dir.display());
        }
    }
}

/// A JSON value that keeps object keys in document order whatever serde_json's features are
/// (its `preserve_order` is unified across the workspace, so it cannot be relied on here).
mod ordered {
    use std::fmt;

    use serde::de::{Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
    use serde::ser::{Serialize, SerializeMap, Serializer};

    pub enum OrderedValue {
        Null,
        Bool(bool),
        Number(serde_json::Number),
        String(String),
        Array(Vec<OrderedValue>),
        Object(Vec<(String, OrderedValue)>),
    }

    impl Serialize for OrderedValue {
        fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            match self {
                OrderedValue::Null => s.serialize_unit(),
                OrderedValue::Bool(b) => s.serialize_bool(*b),
                OrderedValue::Number(n) => n.serialize(s),
                OrderedValue::String(v) => s.serialize_str(v),
                OrderedValue::Array(items) => items.serialize(s),
                OrderedValue::Object(entries) => {
                    let mut map = s.serialize_map(Some(entries.len()))?;
                    for (k, v) in entries {
                        map.serialize_entry(k, v)?;
                    }
                    map.end()
                }
            }
        }
    }

    struct OrderedVisitor;

    impl<'de> Visitor<'de> for OrderedVisitor {
        type Value = OrderedValue;

        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("any JSON value")
        }
        fn visit_unit<E>(self) -> Result<OrderedValue, E> {
            Ok(OrderedValue::Null)
        }
        fn visit_bool<E>(self, v: bool) -> Result<OrderedValue, E> {
            Ok(OrderedValue::Bool(v))
        }
        fn visit_i64<E>(self, v: i64) -> Result<OrderedValue, E> {
            Ok(OrderedValue::Number(v.into()))
        }
        fn visit_u64<E>(self, v: u64) -> Result<OrderedValue, E> {
            Ok(OrderedValue::Number(v.into()))
        }
        fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<OrderedValue, E> {
            serde_json::Number::from_f64(v).map(OrderedValue::Number).ok_or_else(|| E::custom("non-finite"))
        }
        fn visit_str<E>(self, v: &str) -> Result<OrderedValue, E> {
            Ok(OrderedValue::String(v.to_owned()))
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<OrderedValue, A::Error> {
            let mut items = Vec::new();
            while let Some(item) = seq.next_element()? {
                items.push(item);
            }
            Ok(OrderedValue::Array(items))
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<OrderedValue, A::Error> {
            let mut entries = Vec::new();
            while let Some(entry) = map.next_entry()? {
                entries.push(entry);
            }
            Ok(OrderedValue::Object(entries))
        }
    }

    impl<'de> Deserialize<'de> for OrderedValue {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            d.deserialize_any(OrderedVisitor)
        }
    }
}
