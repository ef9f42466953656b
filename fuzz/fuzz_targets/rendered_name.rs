//! Any JSON value through the serializers a rendered config's name is hashed from (Go's
//! encoding/json in both escapings, ghodss/yaml): nothing may panic, the JSON read back is the
//! value written (numbers compared as Go's float64s), and the YAML handed out in pieces is the
//! whole text, or nothing when the conversion fails.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mco_goser::{Escaping, ghodss_yaml, ghodss_yaml_in_pieces, to_go_json};
use serde_json::Value;

/// Numbers as float64s, as Go holds a JSON number it decoded into `interface{}`.
fn as_go(value: &Value) -> Value {
    match value {
        Value::Number(n) => n.as_f64().and_then(serde_json::Number::from_f64).map_or(Value::Null, Value::Number),
        Value::Array(items) => Value::Array(items.iter().map(as_go).collect()),
        Value::Object(map) => Value::Object(map.iter().map(|(k, v)| (k.clone(), as_go(v))).collect()),
        other => other.clone(),
    }
}

fuzz_target!(|data: &[u8]| {
    let Ok(value) = serde_json::from_slice::<Value>(data) else { return };
    for escaping in [Escaping::Legacy, Escaping::Modern] {
        let bytes = to_go_json(&value, escaping).expect("a JSON value always serializes");
        let back: Value = serde_json::from_slice(&bytes).expect("Go's JSON is JSON");
        assert_eq!(as_go(&back), as_go(&value), "{escaping:?}: {}", String::from_utf8_lossy(&bytes));
    }
    let mut pieces = String::new();
    let whole = ghodss_yaml(&value);
    match ghodss_yaml_in_pieces(&value, &mut |piece| pieces.push_str(piece)) {
        Ok(()) => assert_eq!(Some(pieces.as_str()), whole.as_deref().ok()),
        Err(_) => assert!(pieces.is_empty() && whole.is_err()),
    }
});
