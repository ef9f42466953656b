//! Go `encoding/json` output as a `serde_json` formatter.
//!
//! serde_json already escapes exactly the bytes Go escapes below 0x20 plus `"` and `\`, and hands
//! us every other run of the string untouched, so the formatter only has to (1) spell those
//! escapes Go's way and (2) add the escapes Go applies on top: `<`, `>`, `&` (json.Marshal's
//! default HTML escaping) and U+2028/U+2029 (always escaped, for JSONP). Floats are re-formatted
//! too, since Go writes `3` where serde_json writes `3.0`.

use std::io;

use serde_json::ser::{CharEscape, Formatter};

use crate::emitter::has_byte;
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
        // Only `<`, `>`, `&` and the UTF-8 forms of U+2028/U+2029 (E2 80 A8, E2 80 A9) need an
        // escape here; everything between them is written in one piece.
        let bytes = fragment.as_bytes();
        let mut start = 0;
        let mut i = 0;
        while i < bytes.len() {
            // Skip eight bytes at a time while none of them can start an escape.
            if let Some(chunk) = bytes.get(i..i + 8) {
                let mut word = [0; 8];
                word.copy_from_slice(chunk);
                let x = u64::from_le_bytes(word);
                if !(has_byte(x, b'<') || has_byte(x, b'>') || has_byte(x, b'&') || has_byte(x, 0xE2)) {
                    i += 8;
                    continue;
                }
            }
            let (escape, len): (&[u8], usize) = match bytes[i] {
                b'<' => (b"\\u003c", 1),
                b'>' => (b"\\u003e", 1),
                b'&' => (b"\\u0026", 1),
                0xE2 if bytes.get(i + 1) == Some(&0x80) && bytes.get(i + 2) == Some(&0xA8) => (b"\\u2028", 3),
                0xE2 if bytes.get(i + 1) == Some(&0x80) && bytes.get(i + 2) == Some(&0xA9) => (b"\\u2029", 3),
                _ => {
                    i += 1;
                    continue;
                }
            };
            writer.write_all(&bytes[start..i])?;
            writer.write_all(escape)?;
            i += len;
            start = i;
        }
        writer.write_all(&bytes[start..])
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
