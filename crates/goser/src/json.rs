//! Go `encoding/json` output as a `serde_json` formatter.
//!
//! serde_json already escapes exactly the bytes Go escapes below 0x20 plus `"` and `\`, and hands
//! us every other run of the string untouched, so the formatter only has to (1) spell those
//! escapes Go's way and (2) add the escapes Go applies on top: `<`, `>`, `&` (json.Marshal's
//! default HTML escaping) and U+2028/U+2029 (always escaped, for JSONP). Floats are re-formatted
//! too, since Go writes `3` where serde_json writes `3.0`.

use std::io;

use serde_json::ser::{CharEscape, Formatter};

use crate::strconv;

/// Which Go JSON encoder to reproduce; they differ only in how `\b` and `\f` are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Escaping {
    /// Go ≥ 1.22 `encoding/json`: `\b` and `\f` use the short escapes. This is what
    /// `json.Marshal` and `ghodss/yaml` use in the original.
    Modern,
    /// `github.com/clarketm/json` (a fork of Go 1.12's encoder the original uses to serialize
    /// Ignition configs): `\b` and `\f` are written `\u0008` and `\u000c`.
    Legacy,
}

/// Compact output with Go's string escaping and float formatting.
pub(crate) struct GoFormatter {
    pub(crate) escaping: Escaping,
}

impl Formatter for GoFormatter {
    fn write_string_fragment<W>(&mut self, writer: &mut W, fragment: &str) -> io::Result<()>
    where
        W: ?Sized + io::Write,
    {
        let mut start = 0;
        for (i, c) in fragment.char_indices() {
            let escape = match c {
                '<' => "\\u003c",
                '>' => "\\u003e",
                '&' => "\\u0026",
                '\u{2028}' => "\\u2028",
                '\u{2029}' => "\\u2029",
                _ => continue,
            };
            writer.write_all(&fragment.as_bytes()[start..i])?;
            writer.write_all(escape.as_bytes())?;
            start = i + c.len_utf8();
        }
        writer.write_all(&fragment.as_bytes()[start..])
    }

    fn write_char_escape<W>(&mut self, writer: &mut W, char_escape: CharEscape) -> io::Result<()>
    where
        W: ?Sized + io::Write,
    {
        let legacy = self.escaping == Escaping::Legacy;
        let escape = match char_escape {
            CharEscape::Quote => "\\\"",
            CharEscape::ReverseSolidus => "\\\\",
            // serde_json never asks for this one; Go would leave `/` alone.
            CharEscape::Solidus => "/",
            CharEscape::Backspace if legacy => "\\u0008",
            CharEscape::Backspace => "\\b",
            CharEscape::FormFeed if legacy => "\\u000c",
            CharEscape::FormFeed => "\\f",
            CharEscape::LineFeed => "\\n",
            CharEscape::CarriageReturn => "\\r",
            CharEscape::Tab => "\\t",
            // Go's hex table is lowercase: \u001b, not \u001B.
            CharEscape::AsciiControl(byte) => return write!(writer, "\\u{byte:04x}"),
        };
        writer.write_all(escape.as_bytes())
    }

    fn write_f64<W>(&mut self, writer: &mut W, value: f64) -> io::Result<()>
    where
        W: ?Sized + io::Write,
    {
        writer.write_all(strconv::format_json_f64(value).as_bytes())
    }

    fn write_f32<W>(&mut self, writer: &mut W, value: f32) -> io::Result<()>
    where
        W: ?Sized + io::Write,
    {
        writer.write_all(strconv::format_json_f32(value).as_bytes())
    }
}
