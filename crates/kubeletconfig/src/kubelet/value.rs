//! Go values of the [`schema`](super::schema) types, and what the original does with them:
//! `encoding/json` decoding (with the YAML retry of `YAMLOrJSONDecoder`), `mergo.Merge` with
//! `WithOverride`, and `encoding/json` encoding.

use std::collections::BTreeMap;

use serde_json::{Map, Number, Value};

use super::duration;
use super::schema::{GoStruct, Kind};
use mco_api::quantity::Quantity;

/// A Go value of a [`Kind`].
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Go {
    Bool(bool),
    Int(i64),
    Uint(u64),
    Float(f64),
    Str(String),
    /// `metav1.Duration`, in nanoseconds.
    Duration(i64),
    /// logsapi `TimeOrMetaDuration`: nanoseconds, and whether it was read from a string.
    NanosOrDuration {
        nanos: i64,
        as_string: bool,
    },
    /// A quantity as written; empty is the zero quantity.
    Quantity(String),
    /// A `metav1.Time` as written; empty is the zero time.
    Time(String),
    /// Field values in the struct's field order.
    Struct(Vec<Go>),
    Ptr(Option<Box<Go>>),
    Slice(Option<Vec<Go>>),
    Map(Option<BTreeMap<String, Go>>),
}

impl Go {
    /// The zero value of `kind`.
    pub(crate) fn zero(kind: Kind) -> Go {
        match kind {
            Kind::Bool => Go::Bool(false),
            Kind::Int { .. } => Go::Int(0),
            Kind::Uint32 { .. } => Go::Uint(0),
            Kind::Float64 => Go::Float(0.0),
            Kind::Str { .. } => Go::Str(String::new()),
            Kind::Duration => Go::Duration(0),
            Kind::NanosOrDuration => Go::NanosOrDuration { nanos: 0, as_string: false },
            Kind::Quantity => Go::Quantity(String::new()),
            Kind::Time => Go::Time(String::new()),
            Kind::Struct(s) => Go::Struct(s.fields.iter().map(|f| Go::zero(f.kind)).collect()),
            Kind::Ptr(_) => Go::Ptr(None),
            Kind::Slice { .. } => Go::Slice(None),
            Kind::Map { .. } => Go::Map(None),
        }
    }

    /// Go's `isEmptyValue` as `encoding/json`'s `omitempty` sees it (structs are never empty).
    fn omitted_when_empty(&self) -> bool {
        match self {
            Go::Bool(b) => !b,
            Go::Int(i) => *i == 0,
            Go::Uint(u) => *u == 0,
            Go::Float(x) => *x == 0.0,
            Go::Str(s) => s.is_empty(),
            Go::Ptr(p) => p.is_none(),
            Go::Slice(s) => s.as_ref().is_none_or(Vec::is_empty),
            Go::Map(m) => m.as_ref().is_none_or(BTreeMap::is_empty),
            Go::Duration(_) | Go::NanosOrDuration { .. } | Go::Quantity(_) | Go::Time(_) | Go::Struct(_) => false,
        }
    }

    /// mergo's `isEmptyValue` of a scalar (pointers are dereferenced before it is asked).
    fn mergo_empty(&self) -> bool {
        self.omitted_when_empty()
    }
}

/// Decoding `value` as `encoding/json` decodes it into a zero value of `kind`, or Go's error.
pub(crate) fn decode_json(value: &Value, kind: Kind) -> Result<Go, String> {
    let mut decoder = Decoder { saved: None, fields: Vec::new(), struct_name: None };
    let mut out = Go::zero(kind);
    decoder.decode(&mut out, kind, value)?;
    match decoder.saved {
        Some(error) => Err(error),
        None => Ok(out),
    }
}

/// What k8s.io's `YAMLOrJSONDecoder` makes of the JSON `value`: `encoding/json`, and when that
/// fails, the same text read as YAML by sigs.k8s.io/yaml (scalars become strings where the Go
/// type is a string, integral floats integers); the JSON error if both fail.
pub(crate) fn decode_json_or_yaml(value: &Value, kind: Kind) -> Result<Go, String> {
    decode_json(value, kind).or_else(|json_error| decode_yaml(value, kind).map_err(|_| json_error))
}

/// What sigs.k8s.io/yaml's `Unmarshal` makes of a YAML document read as JSON `value` (as
/// [`mco_goser::yaml_documents`] reads it).
pub(crate) fn decode_yaml(value: &Value, kind: Kind) -> Result<Go, String> {
    decode_json(&yaml_to_json(value, Some(kind)), kind)
}

/// sigs.k8s.io/yaml's `convertToJSONableObject` with the target type, then `json.Marshal`: a
/// number or bool becomes a string where the target is a string type, and a float that Go
/// prints without a fraction or exponent is an integer in the JSON text.
fn yaml_to_json(value: &Value, target: Option<Kind>) -> Value {
    // Types with their own UnmarshalJSON end the targeting.
    let target = match target {
        Some(Kind::Ptr(elem)) => Some(*elem),
        Some(Kind::Duration | Kind::NanosOrDuration | Kind::Quantity | Kind::Time) => None,
        other => other,
    };
    match (value, target) {
        (Value::Object(object), _) => Value::Object(
            object
                .iter()
                .map(|(key, v)| {
                    let elem = match target {
                        Some(Kind::Struct(s)) => field_index(s, key).map(|i| s.fields[i].kind),
                        Some(Kind::Map { elem, .. }) => Some(*elem),
                        _ => None,
                    };
                    (key.clone(), yaml_to_json(v, elem))
                })
                .collect(),
        ),
        (Value::Array(items), _) => {
            let elem = match target {
                Some(Kind::Slice { elem, .. }) => Some(*elem),
                _ => None,
            };
            Value::Array(items.iter().map(|v| yaml_to_json(v, elem)).collect())
        }
        (Value::Number(n), Some(Kind::Str { .. })) => Value::String(match n.as_f64().filter(|_| n.is_f64()) {
            Some(float) => format_float32_g(float),
            None => n.to_string(),
        }),
        (Value::Bool(b), Some(Kind::Str { .. })) => Value::String(b.to_string()),
        (Value::Number(n), _) => match n.as_f64().filter(|f| n.is_f64() && f.fract() == 0.0 && f.abs() < 1e21) {
            Some(integral) if integral >= i64::MIN as f64 && integral < i64::MAX as f64 => Value::from(integral as i64),
            _ => value.clone(),
        },
        _ => value.clone(),
    }
}

/// Go's `strconv.FormatFloat(f, 'g', -1, 32)`.
fn format_float32_g(f: f64) -> String {
    let single = f as f32;
    let plain = format!("{single}");
    let exponent = if single == 0.0 { 0 } else { single.abs().log10().floor() as i32 };
    if (-4..21).contains(&exponent) {
        return plain;
    }
    // Shortest digits in scientific form, Go style: 1e+21, 1.5e-07.
    let sci = format!("{single:e}");
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    format!("{mantissa}e{}{:02}", if exp < 0 { '-' } else { '+' }, exp.abs())
}

/// The field `key` names: the exact JSON name, else the first matching it case-insensitively.
fn field_index(s: &GoStruct, key: &str) -> Option<usize> {
    s.fields
        .iter()
        .position(|f| f.json == key)
        .or_else(|| s.fields.iter().position(|f| f.json.eq_ignore_ascii_case(key)))
}

struct Decoder {
    /// The first type error: Go records it and goes on decoding.
    saved: Option<String>,
    /// JSON names of the fields being decoded, outermost first.
    fields: Vec<&'static str>,
    /// The struct type whose field is being decoded.
    struct_name: Option<&'static str>,
}

impl Decoder {
    /// Decodes into `out`; `Err` is an error that stops Go's decoder at once (those of types
    /// with their own UnmarshalJSON).
    fn decode(&mut self, out: &mut Go, kind: Kind, value: &Value) -> Result<(), String> {
        match (kind, value) {
            (Kind::Duration, _) => *out = Go::Duration(parse_meta_duration(value)?),
            (Kind::NanosOrDuration, Value::String(_)) => {
                *out = Go::NanosOrDuration { nanos: parse_meta_duration(value)?, as_string: true }
            }
            (Kind::NanosOrDuration, _) => {
                let nanos = match value {
                    Value::Null => 0,
                    Value::Number(n) if n.as_i64().is_some() => n.as_i64().unwrap_or_default(),
                    other => {
                        let what = describe(other, true);
                        return Err(format!(
                            "invalid duration \"{other}\": json: cannot unmarshal {what} into Go value of type time.Duration"
                        ));
                    }
                };
                *out = Go::NanosOrDuration { nanos, as_string: false };
            }
            (Kind::Quantity, Value::Null) => *out = Go::Quantity(String::new()),
            (Kind::Quantity, Value::String(s)) => *out = Go::Quantity(parse_quantity(s.trim())?),
            (Kind::Quantity, Value::Number(n)) => *out = Go::Quantity(parse_quantity(&n.to_string())?),
            (Kind::Quantity, _) => {
                return Err(
                    "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
                        .to_string(),
                );
            }
            (Kind::Time, Value::String(s)) => *out = Go::Time(s.clone()),
            (Kind::Time, Value::Null) => *out = Go::Time(String::new()),
            (Kind::Ptr(_) | Kind::Slice { .. } | Kind::Map { .. }, Value::Null) => *out = Go::zero(kind),
            (_, Value::Null) => {}
            (Kind::Ptr(elem), _) => {
                let Go::Ptr(target) = out else { unreachable!("a pointer kind holds a pointer") };
                let inner = target.get_or_insert_with(|| Box::new(Go::zero(*elem)));
                self.decode(inner, *elem, value)?;
            }
            (Kind::Bool, Value::Bool(b)) => *out = Go::Bool(*b),
            (Kind::Str { .. }, Value::String(s)) => *out = Go::Str(s.clone()),
            (Kind::Float64, Value::Number(n)) => *out = Go::Float(n.as_f64().unwrap_or_default()),
            (Kind::Int { bits, .. }, Value::Number(n)) => {
                let limit = 1i128 << (bits - 1);
                match n.as_i64().map(i128::from).or_else(|| n.as_u64().map(i128::from)) {
                    Some(i) if (-limit..limit).contains(&i) => *out = Go::Int(i as i64),
                    _ => self.type_error(value, kind, true),
                }
            }
            (Kind::Uint32 { .. }, Value::Number(n)) => match n.as_u64().filter(|u| *u <= u64::from(u32::MAX)) {
                Some(u) => *out = Go::Uint(u),
                None => self.type_error(value, kind, true),
            },
            (Kind::Struct(s), Value::Object(object)) => {
                let Go::Struct(fields) = out else { unreachable!("a struct kind holds a struct") };
                for (key, v) in object {
                    let Some(i) = field_index(s, key) else { continue };
                    let outer = self.struct_name.replace(s.name);
                    self.fields.push(s.fields[i].json);
                    let result = self.decode(&mut fields[i], s.fields[i].kind, v);
                    self.fields.pop();
                    self.struct_name = outer;
                    result?;
                }
            }
            (Kind::Slice { elem, .. }, Value::Array(items)) => {
                let mut decoded = Vec::with_capacity(items.len());
                for item in items {
                    let mut v = Go::zero(*elem);
                    self.decode(&mut v, *elem, item)?;
                    decoded.push(v);
                }
                *out = Go::Slice(Some(decoded));
            }
            (Kind::Map { elem, .. }, Value::Object(object)) => {
                let Go::Map(map) = out else { unreachable!("a map kind holds a map") };
                let map = map.get_or_insert_with(BTreeMap::new);
                for (key, v) in object {
                    let mut decoded = Go::zero(*elem);
                    self.decode(&mut decoded, *elem, v)?;
                    map.insert(key.clone(), decoded);
                }
            }
            _ => self.type_error(value, kind, false),
        }
        Ok(())
    }

    /// Records Go's `UnmarshalTypeError` (the first one wins).
    fn type_error(&mut self, value: &Value, kind: Kind, literal: bool) {
        if self.saved.is_some() {
            return;
        }
        let what = describe(value, literal);
        let into = match self.struct_name {
            Some(name) => format!("Go struct field {name}.{}", self.fields.join(".")),
            None => "Go value".to_string(),
        };
        self.saved = Some(format!("json: cannot unmarshal {what} into {into} of type {}", kind.go_type()));
    }
}

/// How Go's JSON errors name a value: `string`, `number`, `number 1.5` (a number literal that
/// did not fit), `bool`, `array`, `object`.
fn describe(value: &Value, literal: bool) -> String {
    match value {
        Value::String(_) => "string".into(),
        Value::Number(n) if literal => format!("number {n}"),
        Value::Number(_) => "number".into(),
        Value::Bool(_) => "bool".into(),
        Value::Array(_) => "array".into(),
        Value::Object(_) => "object".into(),
        Value::Null => "null".into(),
    }
}

/// `metav1.Duration.UnmarshalJSON`: a JSON string parsed by `time.ParseDuration` (`null` is the
/// empty string, which does not parse).
fn parse_meta_duration(value: &Value) -> Result<i64, String> {
    match value {
        Value::String(s) => duration::parse(s),
        Value::Null => duration::parse(""),
        other => Err(format!("json: cannot unmarshal {} into Go value of type string", describe(other, false))),
    }
}

/// `resource.ParseQuantity`'s check; the text is kept as written.
fn parse_quantity(text: &str) -> Result<String, String> {
    Quantity::parse(text).map(|_| text.to_string())
}

/// `mergo.Merge(dst, src, mergo.WithOverride)`: what `src` sets (non-empty scalars, non-empty
/// slices, every map key, pointers where `dst` has none) replaces `dst`'s.
pub(crate) fn merge(dst: &mut Go, src: &Go, kind: Kind) {
    match (kind, dst, src) {
        (Kind::Struct(s), Go::Struct(d), Go::Struct(from)) => {
            for ((field, d), from) in s.fields.iter().zip(d.iter_mut()).zip(from) {
                merge(d, from, field.kind);
            }
        }
        (Kind::Duration, Go::Duration(d), Go::Duration(from)) if *from != 0 => *d = *from,
        (
            Kind::NanosOrDuration,
            Go::NanosOrDuration { nanos, as_string },
            Go::NanosOrDuration { nanos: n, as_string: s },
        ) => {
            if *n != 0 {
                *nanos = *n;
            }
            *as_string |= *s;
        }
        // A Quantity's amount lives in unexported fields, which mergo cannot set.
        (Kind::Quantity, _, _) => {}
        (Kind::Ptr(elem), dst @ Go::Ptr(_), Go::Ptr(Some(from))) => match dst {
            Go::Ptr(Some(d)) => merge(d, from, *elem),
            other => *other = Go::Ptr(Some(from.clone())),
        },
        (Kind::Slice { .. }, dst, from @ Go::Slice(Some(items))) if !items.is_empty() => *dst = from.clone(),
        (Kind::Map { .. }, Go::Map(d), Go::Map(Some(from))) => {
            d.get_or_insert_with(BTreeMap::new).extend(from.iter().map(|(k, v)| (k.clone(), v.clone())));
        }
        (
            Kind::Bool | Kind::Int { .. } | Kind::Uint32 { .. } | Kind::Float64 | Kind::Str { .. } | Kind::Time,
            dst,
            from,
        ) if !from.mergo_empty() => *dst = from.clone(),
        _ => {}
    }
}

/// `encoding/json` of `value`: fields in Go's order, `omitempty` fields left out when empty,
/// map keys sorted.
pub(crate) fn encode(value: &Go, kind: Kind) -> Value {
    match (kind, value) {
        (Kind::Struct(s), Go::Struct(fields)) => Value::Object(
            s.fields
                .iter()
                .zip(fields)
                .filter(|(field, v)| !(field.omitempty && v.omitted_when_empty()))
                .map(|(field, v)| (field.json.to_string(), encode(v, field.kind)))
                .collect::<Map<_, _>>(),
        ),
        (_, Go::Bool(b)) => Value::Bool(*b),
        (_, Go::Int(i)) => Value::from(*i),
        (_, Go::Uint(u)) => Value::from(*u),
        (_, Go::Float(x)) => Number::from_f64(*x).map_or(Value::Null, Value::Number),
        (_, Go::Str(s) | Go::Time(s)) => Value::String(s.clone()),
        (_, Go::Duration(nanos)) | (_, Go::NanosOrDuration { nanos, as_string: true }) => {
            Value::String(duration::format(*nanos))
        }
        (_, Go::NanosOrDuration { nanos, as_string: false }) => Value::from(*nanos),
        (_, Go::Quantity(q)) => Value::String(if q.is_empty() { "0".into() } else { q.clone() }),
        (Kind::Ptr(elem), Go::Ptr(Some(v))) => encode(v, *elem),
        (Kind::Slice { elem, .. }, Go::Slice(Some(items))) => {
            Value::Array(items.iter().map(|v| encode(v, *elem)).collect())
        }
        (Kind::Map { elem, .. }, Go::Map(Some(map))) => {
            Value::Object(map.iter().map(|(k, v)| (k.clone(), encode(v, *elem))).collect())
        }
        (_, Go::Ptr(None) | Go::Slice(None) | Go::Map(None)) => Value::Null,
        (kind, value) => unreachable!("{value:?} is not a value of {kind:?}"),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::kubelet::schema::KUBELET_CONFIGURATION;

    const KC: Kind = Kind::Struct(&KUBELET_CONFIGURATION);

    #[test]
    fn float32_formatting_matches_go() {
        for (f, want) in
            [(1.5, "1.5"), (0.1, "0.1"), (1.23456789, "1.2345679"), (1e21, "1e+21"), (1e-7, "1e-07"), (5.0, "5")]
        {
            assert_eq!(format_float32_g(f), want, "{f}");
        }
    }

    #[test]
    fn the_yaml_retry_turns_scalars_into_strings_only_for_string_fields() {
        let value = json!({"evictionHard": {"memory.available": 5}, "maxPods": 40.0, "tlsMinVersion": 1.2, "enableServer": true});
        assert!(decode_json(&value, KC).is_err());
        let decoded = encode(&decode_json_or_yaml(&value, KC).unwrap(), KC);
        assert_eq!(decoded["evictionHard"], json!({"memory.available": "5"}));
        assert_eq!(decoded["maxPods"], 40);
        assert_eq!(decoded["tlsMinVersion"], "1.2");
        assert_eq!(decoded["enableServer"], true);
    }

    #[test]
    fn fields_match_case_insensitively_and_unknown_ones_are_dropped() {
        let decoded = encode(&decode_json(&json!({"MAXPODS": 7, "whatever": 1}), KC).unwrap(), KC);
        assert_eq!(decoded["maxPods"], 7);
        assert!(decoded.get("whatever").is_none());
    }

    #[test]
    fn merge_is_mergo_with_override() {
        let base = decode_json(
            &json!({"maxPods": 250, "enableSystemLogQuery": true, "evictionHard": {"a": "1", "b": "2"}, "clusterDNS": ["x"]}),
            KC,
        )
        .unwrap();
        let user = decode_json(
            &json!({"maxPods": 0, "enableSystemLogQuery": false, "evictionHard": {"b": "", "c": "3"}, "clusterDNS": [], "failSwapOn": false}),
            KC,
        )
        .unwrap();
        let mut merged = base;
        merge(&mut merged, &user, KC);
        let merged = encode(&merged, KC);
        // Zero scalars and empty lists do not override; a pointer to false does not override a
        // set pointer but fills an unset one; every map key does.
        assert_eq!(merged["maxPods"], 250);
        assert_eq!(merged["enableSystemLogQuery"], true);
        assert_eq!(merged["failSwapOn"], false);
        assert_eq!(merged["evictionHard"], json!({"a": "1", "b": "", "c": "3"}));
        assert_eq!(merged["clusterDNS"], json!(["x"]));
    }
}
