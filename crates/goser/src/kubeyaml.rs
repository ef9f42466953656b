//! YAML manifests read the way `kubectl` and `oc` read them: sigs.k8s.io/yaml's `YAMLToJSON` over
//! gopkg.in/yaml.v2, i.e. YAML 1.1 plain scalars. `mode: 0644` is the octal 420 (a YAML 1.2
//! reader sees the string "0644" and the MachineConfig fails to parse), `on`/`yes` are true,
//! timestamps stay strings, and non-string map keys become strings.

use std::collections::HashMap;

use granit_parser::{Event, Marker, Options, Parser, ScalarStyle, StrInput, Tag};
use serde_json::{Map, Number, Value};

use crate::resolve::{Resolved, resolve_plain};
use crate::strconv::format_float_g;

/// Why a YAML text cannot be read, with where.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line} column {column}: {message}")]
pub struct YamlError {
    /// 1-based index of the document being read.
    pub document: usize,
    pub line: usize,
    pub column: usize,
    pub message: String,
}

/// Every document of `text` as the JSON kubectl would send (empty documents are `null`).
pub fn yaml_documents(text: &str) -> Result<Vec<Value>, YamlError> {
    // Comments are not data; the parser skips them when told not to report them.
    let mut options = Options::default();
    options.emit_comments = false;
    let parser = Parser::new_from_str_with_options(text, options);
    let mut loader = Loader { parser, anchors: HashMap::new(), decoded: 0, aliased: 0 };
    let mut documents = Vec::new();
    loop {
        let (event, marker) = loader.next().map_err(in_document(documents.len() + 1))?;
        match event {
            Event::StreamStart | Event::DocumentEnd => {}
            Event::StreamEnd => return Ok(documents),
            Event::DocumentStart(..) => {
                let document = match loader.next().map_err(in_document(documents.len() + 1))? {
                    // `---` directly followed by another document or the end: an empty document.
                    (Event::DocumentEnd, _) => Value::Null,
                    (event, marker) => loader.node(event, marker).map_err(in_document(documents.len() + 1))?,
                };
                documents.push(document);
            }
            event => return Err(in_document(documents.len() + 1)(error(marker, format!("unexpected {event:?}")))),
        }
    }
}

/// Why a file holding one object cannot be read as that object.
#[derive(Debug, thiserror::Error)]
pub enum ObjectError {
    #[error("invalid YAML in document {}: {}", .0.document, .0)]
    Yaml(YamlError),
    #[error("expected one object, found {0} documents")]
    DocumentCount(usize),
    #[error(transparent)]
    Decode(#[from] serde_json::Error),
}

/// The one object of a YAML or JSON file, read as kubectl reads it ([`yaml_documents`]); empty
/// documents (a leading `---`) are skipped, a second object is an error rather than ignored.
pub fn yaml_object<T: serde::de::DeserializeOwned>(text: &str) -> Result<T, ObjectError> {
    let mut objects: Vec<Value> =
        yaml_documents(text).map_err(ObjectError::Yaml)?.into_iter().filter(|d| !d.is_null()).collect();
    if objects.len() != 1 {
        return Err(ObjectError::DocumentCount(objects.len()));
    }
    Ok(serde_json::from_value(objects.remove(0))?)
}

/// Marks an error as found in the `document`-th document.
fn in_document(document: usize) -> impl Fn(YamlError) -> YamlError {
    move |e| YamlError { document, ..e }
}

fn error(marker: Marker, message: impl Into<String>) -> YamlError {
    YamlError { document: 0, line: marker.line(), column: marker.col() + 1, message: message.into() }
}

struct Loader<'a> {
    parser: Parser<'a, StrInput<'a>>,
    /// Each anchored value with the number of nodes it holds.
    anchors: HashMap<usize, (Value, usize)>,
    /// Nodes read so far, those under aliases counted each time an alias repeats them.
    decoded: usize,
    /// Of those, the nodes that aliases repeated.
    aliased: usize,
}

/// The share of nodes aliases may repeat (gopkg.in/yaml's `allowedAliasRatio`): 99% in a
/// document of up to 400,000 nodes, falling to 10% at 4,000,000. What keeps a few hundred bytes of
/// nested aliases from expanding to gigabytes ("billion laughs").
fn allowed_alias_ratio(decoded: usize) -> f64 {
    const FEW: f64 = 400_000.0;
    const MANY: f64 = 4_000_000.0;
    let decoded = decoded as f64;
    if decoded <= FEW {
        0.99
    } else if decoded >= MANY {
        0.10
    } else {
        0.99 - 0.89 * (decoded - FEW) / (MANY - FEW)
    }
}

impl<'a> Loader<'a> {
    fn next(&mut self) -> Result<(Event<'a>, Marker), YamlError> {
        match self.parser.next_event() {
            Some(Ok((event, span))) => Ok((event, span.start)),
            Some(Err(e)) => Err(error(*e.marker(), e.kind().to_string())),
            None => Ok((Event::StreamEnd, Marker::default())),
        }
    }

    fn node(&mut self, event: Event<'a>, marker: Marker) -> Result<Value, YamlError> {
        let start = self.decoded;
        self.decoded += 1;
        let (value, anchor) = match event {
            Event::Scalar(text, style, anchor, tag) => (scalar(&text, style, tag.as_deref(), marker)?, anchor),
            Event::SequenceStart(_, anchor, _) => {
                let mut items = Vec::new();
                loop {
                    match self.next()? {
                        (Event::SequenceEnd, _) => break,
                        (event, marker) => items.push(self.node(event, marker)?),
                    }
                }
                (Value::Array(items), anchor)
            }
            Event::MappingStart(_, anchor, _) => (Value::Object(self.mapping()?), anchor),
            Event::Alias(id) => {
                let (value, nodes) = self.anchors.get(&id).ok_or_else(|| error(marker, "unknown anchor"))?;
                // Counted before the copy is made: the refusal comes before the memory is spent.
                self.decoded += nodes - 1;
                self.aliased += nodes;
                let ratio = self.aliased as f64 / self.decoded as f64;
                if self.aliased > 100 && self.decoded > 1000 && ratio > allowed_alias_ratio(self.decoded) {
                    return Err(error(marker, "document contains excessive aliasing"));
                }
                return Ok(value.clone());
            }
            event => return Err(error(marker, format!("unexpected {event:?}"))),
        };
        if anchor != 0 {
            self.anchors.insert(anchor, (value.clone(), self.decoded - start));
        }
        Ok(value)
    }

    fn mapping(&mut self) -> Result<Map<String, Value>, YamlError> {
        let mut map = Map::new();
        let mut merged = Vec::new();
        loop {
            let (event, marker) = self.next()?;
            if event == Event::MappingEnd {
                break;
            }
            let merge = matches!(&event, Event::Scalar(text, ScalarStyle::Plain, _, None) if text == "<<");
            let key = self.node(event, marker)?;
            let (event, value_marker) = self.next()?;
            let value = self.node(event, value_marker)?;
            if merge {
                merged.push((value, marker));
            } else {
                map.insert(key_string(key, marker)?, value);
            }
        }
        // `<<: *base` (or a list of them): keys the mapping does not set itself.
        for (value, marker) in merged {
            let sources = match value {
                Value::Array(items) => items,
                other => vec![other],
            };
            for source in sources {
                let Value::Object(source) = source else {
                    return Err(error(marker, "map merge requires map or sequence of maps as the value"));
                };
                for (key, value) in source {
                    map.entry(key).or_insert(value);
                }
            }
        }
        Ok(map)
    }
}

fn is_str_tag(tag: &Tag) -> bool {
    let (handle, suffix) = tag.parts();
    suffix == "str" && (handle == "!!" || handle == "tag:yaml.org,2002:")
        || handle.is_empty() && suffix == "tag:yaml.org,2002:str"
}

fn scalar(text: &str, style: ScalarStyle, tag: Option<&Tag>, marker: Marker) -> Result<Value, YamlError> {
    if style != ScalarStyle::Plain || tag.is_some_and(is_str_tag) {
        return Ok(Value::String(text.to_string()));
    }
    Ok(match resolve_plain(text) {
        Resolved::Str | Resolved::Timestamp => Value::String(text.to_string()),
        Resolved::Null => Value::Null,
        Resolved::Bool(b) => Value::Bool(b),
        Resolved::Int(i) => Value::from(i),
        Resolved::Uint(u) => Value::from(u),
        Resolved::Float(f) => float(f).ok_or_else(|| error(marker, format!("json: unsupported value: {text}")))?,
    })
}

/// A float as Go's `json.Marshal` writes it and a decoder then reads it: integral values are
/// integers (`1.0` is `1`), infinities and NaN are errors.
fn float(f: f64) -> Option<Value> {
    if !f.is_finite() {
        return None;
    }
    // Exactly representable integers below 2^63 print without a fraction or exponent in Go.
    if f.fract() == 0.0 && f.abs() < 9.2e18 {
        return Some(Value::from(f as i64));
    }
    Number::from_f64(f).map(Value::Number)
}

/// sigs.k8s.io/yaml turns non-string keys into strings.
fn key_string(key: Value, marker: Marker) -> Result<String, YamlError> {
    match key {
        Value::String(s) => Ok(s),
        Value::Bool(b) => Ok(b.to_string()),
        Value::Number(n) => Ok(match n.as_f64() {
            Some(f) if n.is_f64() => format_float_g(f),
            _ => n.to_string(),
        }),
        other => Err(error(marker, format!("unsupported map key {other}"))),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn one(text: &str) -> Value {
        let mut documents = yaml_documents(text).unwrap();
        assert_eq!(documents.len(), 1, "{text}");
        documents.remove(0)
    }

    #[test]
    fn one_object_per_file() {
        #[derive(Debug, serde::Deserialize, PartialEq)]
        struct File {
            mode: u32,
        }
        assert_eq!(yaml_object::<File>("---\nmode: 0644\n").unwrap(), File { mode: 420 });
        assert_eq!(yaml_object::<File>("{\"mode\": 420}").unwrap(), File { mode: 420 });
        for (text, message) in [
            ("", "expected one object, found 0 documents"),
            ("mode: 1\n---\nmode: 2\n", "expected one object, found 2 documents"),
            ("mode: [1\n", "invalid YAML in document 1"),
            ("mode: -1\n", "invalid value: integer `-1`, expected u32"),
        ] {
            let error = yaml_object::<File>(text).unwrap_err().to_string();
            assert!(error.contains(message), "{text:?}: {error}");
        }
    }

    #[test]
    fn nested_aliases_are_refused_before_they_expand() {
        // Nine levels of nine: 9^9 (387 million) strings from 600 bytes, as gopkg.in/yaml refuses it.
        let mut bomb =
            String::from("a: &a [\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\"]\n");
        for (level, previous) in ('b'..='i').zip('a'..) {
            let refs = vec![format!("*{previous}"); 9].join(",");
            bomb.push_str(&format!("{level}: &{level} [{refs}]\n"));
        }
        assert!(bomb.len() < 700, "{}", bomb.len());
        let err = yaml_documents(&bomb).unwrap_err();
        assert_eq!(err.message, "document contains excessive aliasing", "{err}");
        // Aliases an administrator writes (a shared block reused) read as before.
        let mut shared = String::from("base: &base {a: 1, b: [x, z]}\n");
        for i in 0..200 {
            shared.push_str(&format!("k{i}: *base\n"));
        }
        assert_eq!(one(&shared)["k199"], json!({"a": 1, "b": ["x", "z"]}));
    }

    #[test]
    fn scalars_resolve_like_yaml_v2() {
        for (yaml, expected) in [
            ("0644", json!(420)),
            ("0o644", json!(420)),
            ("644", json!(644)),
            ("0x1F", json!(31)),
            ("0b101", json!(5)),
            ("-0b101", json!(-5)),
            ("1_000", json!(1000)),
            // Not octal, so ParseFloat reads it; Go prints 8.0 as 8.
            ("08", json!(8)),
            ("18446744073709551615", json!(18446744073709551615u64)),
            ("1.5", json!(1.5)),
            ("1.0", json!(1)),
            ("1e3", json!(1000)),
            ("yes", json!(true)),
            ("On", json!(true)),
            ("n", json!(false)),
            ("OFF", json!(false)),
            ("~", json!(null)),
            ("", json!(null)),
            ("null", json!(null)),
            ("2001-12-14", json!("2001-12-14")),
            ("'0644'", json!("0644")),
            ("\"yes\"", json!("yes")),
            ("!!str 0644", json!("0644")),
            ("0644abc", json!("0644abc")),
            ("3.3.0", json!("3.3.0")),
            ("|\n  0644\n", json!("0644\n")),
        ] {
            assert_eq!(one(&format!("v: {yaml}"))["v"], expected, "{yaml:?}");
        }
    }

    #[test]
    fn keys_become_strings_and_merges_fill_missing_keys() {
        assert_eq!(one("1: a\non: b\n1.5: c\nkey: d\n"), json!({"1": "a", "true": "b", "1.5": "c", "key": "d"}));
        let merged = one("base: &b {a: 1, b: 2}\nuse:\n  <<: *b\n  b: 3\nlist: [*b]\n");
        assert_eq!(merged["use"], json!({"b": 3, "a": 1}));
        assert_eq!(merged["list"], json!([{"a": 1, "b": 2}]));
        // yaml.v2 reads the plain key `y` as the bool true.
        assert_eq!(
            one("y: 1
"),
            json!({"true": 1})
        );
    }

    #[test]
    fn documents_and_errors() {
        assert_eq!(yaml_documents("a: 1\n---\nb: 2\n").unwrap(), vec![json!({"a": 1}), json!({"b": 2})]);
        assert_eq!(yaml_documents("---\n---\na: 1\n").unwrap(), vec![Value::Null, json!({"a": 1})]);
        assert_eq!(yaml_documents("").unwrap(), Vec::<Value>::new());
        let second = yaml_documents("a: 1\n---\nb: [\n").unwrap_err();
        assert_eq!(second.document, 2, "{second}");
        for (text, problem) in [
            ("a: .inf\n", "line 1 column 4: json: unsupported value: .inf"),
            ("a: [1\n", "line 1 column 4: unclosed bracket '['"),
            ("? [1]\n: x\n", "unsupported map key [1]"),
            ("a: *nope\n", "line 1"),
        ] {
            let err = yaml_documents(text).unwrap_err().to_string();
            assert!(err.contains(problem), "{text:?}: {err}");
        }
    }
}
