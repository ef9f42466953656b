//! `github.com/ghodss/yaml.Marshal`: `json.Marshal`, then `yaml.Unmarshal` of that JSON text into
//! `interface{}` (gopkg.in/yaml.v2 v2.4.0), then `yaml.Marshal`.
//!
//! The JSON detour is not neutral. yaml.v2 reads the JSON text as a YAML flow document, so:
//! * numbers come back typed by YAML rules (`3` an int, `1e+21` a float, `10000000000000000000`
//!   a uint64), and floats are then printed with `strconv.FormatFloat(f, 'g', -1, 64)`;
//! * strings are YAML double-quoted scalars: a raw NEL (U+0085, the one line break Go's JSON
//!   encoder leaves unescaped) is folded like any YAML line break;
//! * the YAML reader and scanner reject some documents Go's JSON encoder happily writes; then
//!   ghodss.Marshal fails, and so does [`crate::ghodss_yaml`].
//!
//! This module performs that round trip on a `serde_json::Value` and builds the node tree
//! yaml.v2's encoder would emit (`encode.go`: sorted keys, `stringv`'s style choice, `floatv`).

use std::borrow::Cow;

use serde_json::Value;

use crate::emitter::{Node, Scalar, Style};
use crate::resolve::{plain_is_string, sort_entries};
use crate::strconv::{format_float_g, format_json_f64};

/// Why `github.com/ghodss/yaml.Marshal` would fail on a value whose JSON form succeeded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GhodssError {
    /// Go's JSON encoder writes DEL, the C1 controls (U+0080..U+009F except NEL) and
    /// U+FFFE/U+FFFF unescaped, and the YAML reader refuses them.
    #[error("yaml: control characters are not allowed (U+{:04X})", u32::from(*.0))]
    ControlCharacter(char),
    /// The YAML scanner gives up on a flow-mapping key whose `:` is more than 1024 characters
    /// after the key's opening quote, or that spans lines (contains a raw NEL).
    #[error("yaml: did not find expected ',' or '}}' (map key longer than 1022 JSON characters or containing U+0085)")]
    UnreadableKey,
    /// A NEL immediately followed by `---` or `...` and a space or NEL inside a string looks like
    /// a document marker at the start of a line to the YAML scanner.
    #[error("yaml: found unexpected document indicator")]
    DocumentIndicator,
    /// The YAML scanner allows at most 10000 nested flow collections.
    #[error("yaml: exceeded max depth of 10000")]
    TooDeep,
}

/// The YAML scanner's `max_flow_level`.
const MAX_FLOW_LEVEL: usize = 10_000;

/// The YAML scanner's simple-key limit: the `:` may be at most 1024 characters after the start
/// of the key (the opening quote of the JSON string).
const MAX_SIMPLE_KEY_CHARS: usize = 1024;

const NEL: char = '\u{85}';

/// Builds the node tree yaml.v2 emits for the JSON form of `value`.
pub(crate) fn to_node(value: &Value) -> Result<Node<'_>, GhodssError> {
    check_depth(value)?;
    convert(value)
}

/// Rejects documents nested deeper than the scanner allows, without recursing (so that the
/// check itself cannot overflow the stack).
fn check_depth(value: &Value) -> Result<(), GhodssError> {
    let mut stack: Vec<(&Value, usize)> = vec![(value, 0)];
    while let Some((value, depth)) = stack.pop() {
        let children: Box<dyn Iterator<Item = &Value>> = match value {
            Value::Array(items) => Box::new(items.iter()),
            Value::Object(map) => Box::new(map.values()),
            _ => continue,
        };
        if depth + 1 > MAX_FLOW_LEVEL {
            return Err(GhodssError::TooDeep);
        }
        stack.extend(children.map(|child| (child, depth + 1)));
    }
    Ok(())
}

fn convert(value: &Value) -> Result<Node<'_>, GhodssError> {
    Ok(match value {
        Value::Null => plain("null"),
        Value::Bool(b) => plain(if *b { "true" } else { "false" }),
        Value::Number(n) => Node::Scalar(number(n)),
        Value::String(s) => Node::Scalar(string_scalar(read_back_string(s)?)),
        Value::Array(items) => Node::Sequence(items.iter().map(convert).collect::<Result<_, _>>()?),
        Value::Object(map) => {
            let entries = map
                .iter()
                .map(|(k, v)| Ok((read_back_key(k)?, convert(v)?)))
                .collect::<Result<Vec<_>, GhodssError>>()?;
            let entries = sort_entries(entries);
            Node::Mapping(entries.into_iter().map(|(k, v)| (string_scalar(k), v)).collect())
        }
    })
}

fn plain(text: &'static str) -> Node<'static> {
    Node::Scalar(Scalar { value: Cow::Borrowed(text), style: Style::Plain })
}

/// `encoder.stringv`: literal style for anything with a line feed, plain when the text would
/// read back as the same string, double quotes otherwise.
fn string_scalar(s: Cow<'_, str>) -> Scalar<'_> {
    let style = if s.contains('\n') {
        Style::Literal
    } else if plain_is_string(&s) {
        Style::Plain
    } else {
        Style::DoubleQuoted
    };
    Scalar { value: s, style }
}

/// A JSON number as Go wrote it and yaml.v2 typed it.
///
/// Integers (serde_json's i64/u64, or Go's float text without fraction or exponent when it fits)
/// become yaml.v2 ints, printed in decimal. Everything else is a float64 printed with `'g'`
/// (so 1e3 as a float prints `1000`, 1e6 prints `1e+06`, 0.000001 prints `1e-06`).
fn number(n: &serde_json::Number) -> Scalar<'static> {
    let text = if let Some(i) = n.as_i64() {
        i.to_string()
    } else if let Some(u) = n.as_u64() {
        u.to_string()
    } else {
        // Neither i64 nor u64: serde_json holds an f64, and never a non-finite one.
        let f = n.as_f64().unwrap_or_default();
        let json = format_json_f64(f);
        // ParseInt, then ParseUint, of the integer-looking texts; FormatInt normalizes "-0".
        if let Ok(i) = json.parse::<i64>() {
            i.to_string()
        } else if let Ok(u) = json.parse::<u64>() {
            u.to_string()
        } else {
            // The text reads back as exactly `f`: it is its shortest round-trip form.
            format_float_g(f)
        }
    };
    Scalar { value: Cow::Owned(text), style: Style::Plain }
}

/// The characters Go's JSON encoder leaves raw and the YAML reader refuses
/// (`yaml_parser_update_buffer` accepts TAB, LF, CR, 0x20..0x7E, NEL, U+00A0..U+D7FF,
/// U+E000..U+FFFD and everything beyond U+FFFF).
fn check_readable(s: &str) -> Result<(), GhodssError> {
    // Every refused character is encoded with bytes >= 0x7F.
    if s.is_ascii() && !s.as_bytes().contains(&0x7F) {
        return Ok(());
    }
    match s.chars().find(|&c| matches!(c, '\u{7F}'..='\u{9F}' | '\u{FFFE}' | '\u{FFFF}') && c != NEL) {
        Some(c) => Err(GhodssError::ControlCharacter(c)),
        None => Ok(()),
    }
}

/// How many characters Go's encoding/json (≥ 1.22, which ghodss/yaml calls) writes for `s`
/// between the quotes.
fn json_escaped_chars(s: &str) -> usize {
    s.chars()
        .map(|c| match c {
            '"' | '\\' | '\u{08}' | '\u{0C}' | '\n' | '\r' | '\t' => 2,
            '\0'..='\u{1F}' | '<' | '>' | '&' | '\u{2028}' | '\u{2029}' => 6,
            _ => 1,
        })
        .sum()
}

/// A map key after the round trip. Keys are simple keys of a flow mapping, so they must fit on
/// one line and end within 1024 characters of their start; otherwise the parse fails.
fn read_back_key(key: &str) -> Result<Cow<'_, str>, GhodssError> {
    check_readable(key)?;
    if key.contains(NEL) || json_escaped_chars(key) + 2 > MAX_SIMPLE_KEY_CHARS {
        return Err(GhodssError::UnreadableKey);
    }
    Ok(Cow::Borrowed(key))
}

/// A string value after the round trip: `yaml_parser_scan_flow_scalar` on Go's JSON text.
///
/// All characters are copied (escapes decode to what Go escaped) except runs of raw spaces and
/// NELs, which the scanner treats as blanks and line breaks: spaces before a line break are
/// dropped, spaces after one are indentation, one line break folds into a space and n > 1 breaks
/// into n - 1 newlines. At the start of a line (right after a NEL) `---` or `...` followed by a
/// blank is a document marker, which is an error.
fn read_back_string(s: &str) -> Result<Cow<'_, str>, GhodssError> {
    check_readable(s)?;
    if !s.contains(NEL) {
        return Ok(Cow::Borrowed(s));
    }
    let chars: Vec<char> = s.chars().collect();
    let mut out = String::with_capacity(s.len());
    let mut i = 0;
    let mut at_line_start = false;
    loop {
        if at_line_start {
            let marker = chars.get(i..i + 3);
            let is_marker = marker == Some(&['-', '-', '-'][..]) || marker == Some(&['.', '.', '.'][..]);
            if is_marker && matches!(chars.get(i + 3).copied(), Some(' ' | NEL)) {
                return Err(GhodssError::DocumentIndicator);
            }
        }
        while let Some(&c) = chars.get(i).filter(|&&c| c != ' ' && c != NEL) {
            out.push(c);
            i += 1;
        }
        if i == chars.len() {
            return Ok(Cow::Owned(out));
        }
        let mut whitespaces = String::new();
        let mut leading_break = false;
        let mut trailing_breaks = String::new();
        while let Some(&c) = chars.get(i).filter(|&&c| c == ' ' || c == NEL) {
            if c == ' ' {
                if !leading_break {
                    whitespaces.push(' ');
                }
                at_line_start = false;
            } else {
                if leading_break {
                    trailing_breaks.push('\n');
                } else {
                    whitespaces.clear();
                    leading_break = true;
                }
                at_line_start = true;
            }
            i += 1;
        }
        if !leading_break {
            out.push_str(&whitespaces);
        } else if trailing_breaks.is_empty() {
            out.push(' ');
        } else {
            out.push_str(&trailing_breaks);
        }
    }
}
