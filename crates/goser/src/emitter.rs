//! The block-style subset of gopkg.in/yaml.v2 v2.4.0's `emitterc.go` (a Go port of libyaml's
//! emitter) that JSON-shaped documents reach, ported function by function.
//!
//! yaml.v2 drives the emitter with events and a state stack; here the document tree is walked
//! recursively instead, calling the same state handlers in the same order with the same context
//! flags, so the writer state (`column`, `whitespace`, `indention`, the indent stack) evolves
//! exactly as in Go. What JSON-shaped data never reaches is left out and noted where it would be:
//! anchors, aliases, tags, canonical mode, folded scalars, and flow collections with content
//! (yaml.v2 uses flow style only for empty sequences and mappings, so no scalar is ever emitted
//! in flow context and `flow_level` is always 0 when one is). The document start/end markers
//! never appear: yaml.v2 emits an implicit first document, and clears `open_ended` before the
//! stream end, so no `...` is written either.

use std::borrow::Cow;

/// `best_width`: yaml.v2 leaves it 0, which the emitter turns into 80.
const BEST_WIDTH: usize = 80;
/// `best_indent`: yaml.v2 leaves it 0, which the emitter turns into 2.
const BEST_INDENT: isize = 2;

/// The scalar style yaml.v2's encoder asks for (the emitter may override it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Style {
    Plain,
    DoubleQuoted,
    Literal,
}

/// A scalar as yaml.v2's encoder emits it: its text and requested style.
#[derive(Debug)]
pub(crate) struct Scalar<'a> {
    /// Borrowed from the input value wherever the round trip leaves the text unchanged.
    pub(crate) value: Cow<'a, str>,
    pub(crate) style: Style,
}

/// A document node. Mapping keys are always scalars in JSON-shaped data.
#[derive(Debug)]
pub(crate) enum Node<'a> {
    Scalar(Scalar<'a>),
    Sequence(Vec<Node<'a>>),
    Mapping(Vec<(Scalar<'a>, Node<'a>)>),
}

/// The style the emitter finally writes (`yaml_emitter_select_scalar_style`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Written {
    Plain,
    SingleQuoted,
    DoubleQuoted,
    Literal,
}

/// `is_printable` of yamlprivateh.go, decoded from its UTF-8 byte tests: LF, printable ASCII,
/// U+00A0..U+D7FF and U+E000..U+FFFD except the BOM. Everything outside the BMP counts as
/// non-printable (so it is `\U`-escaped in double quotes).
fn is_printable(c: char) -> bool {
    matches!(c, '\n' | '\u{20}'..='\u{7E}' | '\u{A0}'..='\u{D7FF}' | '\u{E000}'..='\u{FFFD}') && c != '\u{FEFF}'
}

/// `is_break`: CR, LF, NEL, LS, PS.
fn is_break(c: char) -> bool {
    matches!(c, '\r' | '\n' | '\u{85}' | '\u{2028}' | '\u{2029}')
}

/// `is_blank`: space or tab.
fn is_blank(c: char) -> bool {
    c == ' ' || c == '\t'
}

/// `is_blankz`: blank, break or NUL.
fn is_blankz(c: char) -> bool {
    is_blank(c) || is_break(c) || c == '\0'
}

/// What `yaml_emitter_analyze_scalar` learns about a scalar, minus `flow_plain_allowed` (only
/// read in flow context, where no scalar is ever emitted here).
struct Analysis {
    multiline: bool,
    block_plain_allowed: bool,
    single_quoted_allowed: bool,
    block_allowed: bool,
}

/// Printable ASCII other than space, `:` and `#`: the characters that change nothing in the
/// analysis except ending runs of spaces and breaks (when not the first character).
fn is_ordinary(b: u8) -> bool {
    (b'!'..=b'~').contains(&b) && b != b':' && b != b'#'
}

const ONES: u64 = 0x0101_0101_0101_0101;
const HIGHS: u64 = 0x8080_8080_8080_8080;

/// Whether some byte of `x` is below `n` (`n` ≤ 128; exact for existence).
fn has_less(x: u64, n: u8) -> bool {
    x.wrapping_sub(ONES * u64::from(n)) & !x & HIGHS != 0
}

/// Whether some byte of `x` equals `b`.
pub(crate) fn has_byte(x: u64, b: u8) -> bool {
    let y = x ^ (ONES * u64::from(b));
    y.wrapping_sub(ONES) & !y & HIGHS != 0
}

/// The end of the run of [`is_ordinary`] bytes starting at `start`, eight bytes at a time.
fn ordinary_run_end(bytes: &[u8], mut i: usize) -> usize {
    while let Some(chunk) = bytes.get(i..i + 8) {
        let mut word = [0; 8];
        word.copy_from_slice(chunk);
        let x = u64::from_le_bytes(word);
        // All bytes ASCII, none below `!`, none equal to DEL, `:` or `#`.
        if x & HIGHS != 0 || has_less(x, b'!') || has_byte(x, 0x7F) || has_byte(x, b':') || has_byte(x, b'#') {
            break;
        }
        i += 8;
    }
    while i < bytes.len() && is_ordinary(bytes[i]) {
        i += 1;
    }
    i
}

/// `yaml_emitter_analyze_scalar` (with the unicode flag on, as yaml.v2 sets it).
fn analyze_scalar(value: &str) -> Analysis {
    if value.is_empty() {
        return Analysis {
            multiline: false,
            block_plain_allowed: true,
            single_quoted_allowed: true,
            block_allowed: false,
        };
    }
    let bytes = value.as_bytes();

    let mut block_indicators = value.starts_with("---") || value.starts_with("...");
    let mut line_breaks = false;
    let mut special_characters = false;
    let mut leading_space = false;
    let mut leading_break = false;
    let mut trailing_space = false;
    let mut trailing_break = false;
    let mut break_space = false;
    let mut space_break = false;
    let mut preceded_by_whitespace = true;
    let mut previous_space = false;
    let mut previous_break = false;

    // `i` is a byte offset: the first character is at 0 and the last one ends at `bytes.len()`.
    // The character after `c` is blank exactly when its first byte is a space or tab.
    let mut i = 0;
    while let Some(c) = value[i..].chars().next() {
        // Printable ASCII other than `:` and `#` after the first character only resets the
        // run flags; skip whole runs of it.
        if i != 0 && is_ordinary(bytes[i]) {
            i = ordinary_run_end(bytes, i);
            previous_space = false;
            previous_break = false;
            preceded_by_whitespace = false;
            continue;
        }
        let next = i + c.len_utf8();
        let is_last = next == bytes.len();
        let followed_by_whitespace = is_last || matches!(bytes[next], b' ' | b'\t');
        if i == 0 {
            match c {
                '#' | ',' | '[' | ']' | '{' | '}' | '&' | '*' | '!' | '|' | '>' | '\'' | '"' | '%' | '@' | '`' => {
                    block_indicators = true
                }
                '?' | ':' | '-' if followed_by_whitespace => block_indicators = true,
                _ => {}
            }
        } else {
            match c {
                ':' if followed_by_whitespace => block_indicators = true,
                '#' if preceded_by_whitespace => block_indicators = true,
                _ => {}
            }
        }

        if !is_printable(c) {
            special_characters = true;
        }
        if c == ' ' {
            leading_space |= i == 0;
            trailing_space |= is_last;
            break_space |= previous_break;
            previous_space = true;
            previous_break = false;
        } else if is_break(c) {
            line_breaks = true;
            leading_break |= i == 0;
            trailing_break |= is_last;
            space_break |= previous_space;
            previous_space = false;
            previous_break = true;
        } else {
            previous_space = false;
            previous_break = false;
        }
        preceded_by_whitespace = is_blankz(c);
        i = next;
    }

    let plain_allowed = !(leading_space
        || leading_break
        || trailing_space
        || trailing_break
        || break_space
        || space_break
        || special_characters
        || line_breaks);
    Analysis {
        multiline: line_breaks,
        block_plain_allowed: plain_allowed && !block_indicators,
        single_quoted_allowed: !(break_space || space_break || special_characters),
        block_allowed: !(trailing_space || space_break || special_characters),
    }
}

/// Writes a document the way yaml.v2's `Marshal` does.
pub(crate) fn emit_document(root: &Node) -> String {
    let mut out = String::new();
    emit_document_in_pieces(root, &mut |piece| out.push_str(piece));
    out
}

/// How much output the emitter gathers before handing it over.
const PIECE_BYTES: usize = 64 * 1024;

/// [`emit_document`], handing the output to `sink` in pieces of about [`PIECE_BYTES`].
pub(crate) fn emit_document_in_pieces(root: &Node, sink: &mut dyn FnMut(&str)) {
    // yaml_emitter_emit_stream_start.
    let mut e = Emitter {
        out: String::with_capacity(PIECE_BYTES),
        sink,
        indent: -1,
        indents: Vec::new(),
        column: 0,
        whitespace: true,
        indention: true,
    };
    // The first document is implicit: nothing is written for DOCUMENT-START.
    e.emit_node(root, false, false);
    // yaml_emitter_emit_document_end (implicit: no "...").
    e.write_indent();
    (e.sink)(&e.out);
}

struct Emitter<'s> {
    /// Output not yet handed to `sink`.
    out: String,
    sink: &'s mut dyn FnMut(&str),
    indent: isize,
    indents: Vec<isize>,
    /// Characters (not bytes) since the last line break, as `put`/`write` count them.
    column: usize,
    /// The last thing written was whitespace (an indicator may follow without a space).
    whitespace: bool,
    /// Only indentation (and indicators like `-`) written on this line so far.
    indention: bool,
}

impl Emitter<'_> {
    // ---- Output primitives: put, put_break, write, write_break. ----

    fn put(&mut self, c: char) {
        self.out.push(c);
        self.column += 1;
    }

    /// `write` for each character of `s` (none of them a line break).
    fn write_str(&mut self, s: &str) {
        self.out.push_str(s);
        self.column += s.chars().count();
    }

    fn put_break(&mut self) {
        self.out.push('\n');
        self.column = 0;
        if self.out.len() >= PIECE_BYTES {
            (self.sink)(&self.out);
            self.out.clear();
        }
    }

    fn write(&mut self, c: char) {
        self.out.push(c);
        self.column += 1;
    }

    fn write_break(&mut self, c: char) {
        if c == '\n' {
            self.put_break();
        } else {
            // NEL, LS, PS (and CR) are copied as they are and count as a line break.
            self.write(c);
            self.column = 0;
        }
    }

    // ---- yaml_emitter_increase_indent and the pops of `emitter.indents`. ----

    fn increase_indent(&mut self, flow: bool, indentless: bool) {
        self.indents.push(self.indent);
        if self.indent < 0 {
            self.indent = if flow { BEST_INDENT } else { 0 };
        } else if !indentless {
            self.indent += BEST_INDENT;
        }
    }

    fn restore_indent(&mut self) {
        if let Some(indent) = self.indents.pop() {
            self.indent = indent;
        }
    }

    // ---- yaml_emitter_write_indent / write_indicator. ----

    fn write_indent(&mut self) {
        let indent = self.indent.max(0).unsigned_abs();
        if !self.indention || self.column > indent || (self.column == indent && !self.whitespace) {
            self.put_break();
        }
        while self.column < indent {
            self.put(' ');
        }
        self.whitespace = true;
        self.indention = true;
    }

    fn write_indicator(&mut self, indicator: &str, need_whitespace: bool, is_whitespace: bool, is_indention: bool) {
        if need_whitespace && !self.whitespace {
            self.put(' ');
        }
        indicator.chars().for_each(|c| self.write(c));
        self.whitespace = is_whitespace;
        self.indention = self.indention && is_indention;
    }

    // ---- Node dispatch: yaml_emitter_emit_node and the states it enters. ----

    /// `yaml_emitter_emit_node` with root = false and sequence context irrelevant (neither
    /// `root_context` nor `sequence_context` changes what is written for these nodes).
    fn emit_node(&mut self, node: &Node, mapping_context: bool, simple_key_context: bool) {
        match node {
            Node::Scalar(scalar) => self.emit_scalar(scalar, simple_key_context),
            // yaml_emitter_emit_sequence_start / _mapping_start: empty ones go flow.
            Node::Sequence(items) if items.is_empty() => self.emit_empty_flow("[", "]"),
            Node::Mapping(entries) if entries.is_empty() => self.emit_empty_flow("{", "}"),
            Node::Sequence(items) => self.emit_block_sequence(items, mapping_context),
            Node::Mapping(entries) => self.emit_block_mapping(entries),
        }
    }

    /// yaml_emitter_emit_flow_sequence_item / _flow_mapping_key when the first event is already
    /// the end event.
    fn emit_empty_flow(&mut self, open: &str, close: &str) {
        self.write_indicator(open, true, true, false);
        self.increase_indent(true, false);
        self.restore_indent();
        self.write_indicator(close, false, false, false);
    }

    /// yaml_emitter_emit_block_sequence_item. A sequence that is a mapping value, on the line of
    /// its key, is not indented ("indentless"): `key:\n- item`.
    fn emit_block_sequence(&mut self, items: &[Node], mapping_context: bool) {
        self.increase_indent(false, mapping_context && !self.indention);
        for item in items {
            self.write_indent();
            self.write_indicator("-", true, false, true);
            self.emit_node(item, false, false);
        }
        self.restore_indent();
    }

    /// yaml_emitter_emit_block_mapping_key / _value.
    fn emit_block_mapping(&mut self, entries: &[(Scalar, Node)]) {
        self.increase_indent(false, false);
        for (key, value) in entries {
            self.write_indent();
            let analysis = analyze_scalar(&key.value);
            if check_simple_key(&key.value, &analysis) {
                self.emit_scalar(key, true);
                self.write_indicator(":", false, false, false);
            } else {
                self.write_indicator("?", true, false, true);
                self.emit_scalar(key, false);
                self.write_indent();
                self.write_indicator(":", true, false, true);
            }
            self.emit_node(value, true, false);
        }
        self.restore_indent();
    }

    /// yaml_emitter_emit_scalar: select the style, then write at one more indentation level.
    fn emit_scalar(&mut self, scalar: &Scalar, simple_key_context: bool) {
        let analysis = analyze_scalar(&scalar.value);
        let style = select_scalar_style(scalar, &analysis, simple_key_context);
        self.increase_indent(true, false);
        let value = &scalar.value;
        let allow_breaks = !simple_key_context;
        match style {
            Written::Plain => self.write_plain_scalar(value, allow_breaks),
            Written::SingleQuoted => self.write_single_quoted_scalar(value, allow_breaks),
            Written::DoubleQuoted => self.write_double_quoted_scalar(value, allow_breaks),
            Written::Literal => self.write_literal_scalar(value),
        }
        self.restore_indent();
    }

    // ---- The scalar writers. ----

    /// yaml_emitter_write_plain_scalar. Plain scalars never contain line breaks (the analysis
    /// forbids them), so only the folding of long lines at a single space applies.
    fn write_plain_scalar(&mut self, value: &str, allow_breaks: bool) {
        if !self.whitespace {
            self.put(' ');
        }
        let bytes = value.as_bytes();
        let mut spaces = false;
        let mut i = 0;
        while i < bytes.len() {
            if bytes[i] == b' ' {
                let next_is_space = bytes.get(i + 1) == Some(&b' ');
                if allow_breaks && !spaces && self.column > BEST_WIDTH && !next_is_space {
                    self.write_indent();
                } else {
                    self.write(' ');
                }
                spaces = true;
                i += 1;
            } else {
                // A run of characters up to the next space, written one by one in Go.
                let end = value[i..].find(' ').map_or(bytes.len(), |p| i + p);
                self.write_str(&value[i..end]);
                self.indention = false;
                spaces = false;
                i = end;
            }
        }
        self.whitespace = false;
        self.indention = false;
    }

    /// yaml_emitter_write_single_quoted_scalar. Reached for strings plain style cannot carry
    /// (indicators, leading/trailing spaces, "…: …", line separators U+2028/U+2029).
    fn write_single_quoted_scalar(&mut self, value: &str, allow_breaks: bool) {
        self.write_indicator("'", true, false, false);
        let bytes = value.as_bytes();
        let mut spaces = false;
        let mut breaks = false;
        let mut i = 0;
        while let Some(c) = value[i..].chars().next() {
            if c != ' ' && c != '\'' && !is_break(c) {
                // A run of ordinary characters, written one by one in Go.
                let end = run_end(value, i, |c| c == ' ' || c == '\'' || is_break(c));
                if breaks {
                    self.write_indent();
                }
                self.write_str(&value[i..end]);
                self.indention = false;
                spaces = false;
                breaks = false;
                i = end;
                continue;
            }
            let next = i + c.len_utf8();
            if c == ' ' {
                // Byte offsets: a space is the last character when it ends the value.
                let next_is_space = bytes.get(next) == Some(&b' ');
                if allow_breaks
                    && !spaces
                    && self.column > BEST_WIDTH
                    && i != 0
                    && next != bytes.len()
                    && !next_is_space
                {
                    self.write_indent();
                } else {
                    self.write(c);
                }
                spaces = true;
            } else if is_break(c) {
                if !breaks && c == '\n' {
                    self.put_break();
                }
                self.write_break(c);
                self.indention = true;
                breaks = true;
            } else {
                if breaks {
                    self.write_indent();
                }
                if c == '\'' {
                    self.put('\'');
                }
                self.write(c);
                self.indention = false;
                spaces = false;
                breaks = false;
            }
            i = next;
        }
        self.write_indicator("'", false, false, false);
        self.whitespace = false;
        self.indention = false;
    }

    /// yaml_emitter_write_double_quoted_scalar.
    fn write_double_quoted_scalar(&mut self, value: &str, allow_breaks: bool) {
        // `is_bom(value, i)` looks at the start of the whole value, not at position i: a value
        // that starts with a BOM gets every character escaped.
        let starts_with_bom = value.starts_with('\u{FEFF}');
        let bytes = value.as_bytes();
        let mut spaces = false;
        self.write_indicator("\"", true, false, false);
        let plain_char =
            |c: char| is_printable(c) && !starts_with_bom && !is_break(c) && c != '"' && c != '\\' && c != ' ';
        let mut i = 0;
        while let Some(c) = value[i..].chars().next() {
            if plain_char(c) {
                // A run of characters written as they are, one by one in Go.
                let end = run_end(value, i, |c| !plain_char(c));
                self.write_str(&value[i..end]);
                spaces = false;
                i = end;
                continue;
            }
            let next = i + c.len_utf8();
            if !is_printable(c) || starts_with_bom || is_break(c) || c == '"' || c == '\\' {
                self.put('\\');
                match c {
                    '\0' => self.put('0'),
                    '\u{07}' => self.put('a'),
                    '\u{08}' => self.put('b'),
                    '\t' => self.put('t'),
                    '\n' => self.put('n'),
                    '\u{0B}' => self.put('v'),
                    '\u{0C}' => self.put('f'),
                    '\r' => self.put('r'),
                    '\u{1B}' => self.put('e'),
                    '"' => self.put('"'),
                    '\\' => self.put('\\'),
                    '\u{85}' => self.put('N'),
                    '\u{A0}' => self.put('_'),
                    '\u{2028}' => self.put('L'),
                    '\u{2029}' => self.put('P'),
                    _ => {
                        let v = u32::from(c);
                        let (indicator, width) = match v {
                            0..=0xFF => ('x', 2),
                            0x100..=0xFFFF => ('u', 4),
                            _ => ('U', 8),
                        };
                        self.put(indicator);
                        // Uppercase hex digits, one `put` (one column) each.
                        format!("{v:0width$X}").chars().for_each(|d| self.put(d));
                    }
                }
                spaces = false;
            } else if c == ' ' {
                if allow_breaks && !spaces && self.column > BEST_WIDTH && i != 0 && next != bytes.len() {
                    self.write_indent();
                    // A space that starts the next line would be eaten as indentation: escape it.
                    if bytes.get(next) == Some(&b' ') {
                        self.put('\\');
                    }
                } else {
                    self.write(c);
                }
                spaces = true;
            } else {
                self.write(c);
                spaces = false;
            }
            i = next;
        }
        self.write_indicator("\"", false, false, false);
        self.whitespace = false;
        self.indention = false;
    }

    /// yaml_emitter_write_block_scalar_hints: an indentation indicator when the text starts with
    /// a space or line break, then the chomping indicator (`-` without a final line break, `+`
    /// with more than one, none with exactly one).
    fn write_block_scalar_hints(&mut self, value: &str) {
        let mut chars = value.chars();
        if chars.next().is_some_and(|c| c == ' ' || is_break(c)) {
            self.write_indicator(&BEST_INDENT.to_string(), false, false, false);
        }
        let mut from_end = value.chars().rev();
        let chomp = match (from_end.next(), from_end.next()) {
            (Some(last), _) if !is_break(last) => Some("-"),
            // The value is a single line break.
            (Some(_), None) => Some("+"),
            (Some(_), Some(before_last)) if is_break(before_last) => Some("+"),
            (Some(_), Some(_)) => None,
            (None, _) => Some("-"),
        };
        if let Some(chomp) = chomp {
            self.write_indicator(chomp, false, false, false);
        }
    }

    /// yaml_emitter_write_literal_scalar.
    fn write_literal_scalar(&mut self, value: &str) {
        self.write_indicator("|", true, false, false);
        self.write_block_scalar_hints(value);
        self.put_break();
        self.indention = true;
        self.whitespace = true;
        let mut breaks = true;
        let mut i = 0;
        while let Some(c) = value[i..].chars().next() {
            if is_break(c) {
                self.write_break(c);
                self.indention = true;
                breaks = true;
                i += c.len_utf8();
            } else {
                // A line (or what is left of it), written one character at a time in Go.
                let end = run_end(value, i, is_break);
                if breaks {
                    self.write_indent();
                }
                self.write_str(&value[i..end]);
                self.indention = false;
                breaks = false;
                i = end;
            }
        }
    }
}

/// The byte offset of the first character at or after `start` for which `stop` holds, or the
/// length of `value`.
fn run_end(value: &str, start: usize, stop: impl Fn(char) -> bool) -> usize {
    value[start..].char_indices().find(|&(_, c)| stop(c)).map_or(value.len(), |(j, _)| start + j)
}

/// yaml_emitter_check_simple_key for a scalar key: single line and at most 128 bytes.
fn check_simple_key(value: &str, analysis: &Analysis) -> bool {
    !analysis.multiline && value.len() <= 128
}

/// yaml_emitter_select_scalar_style, with `flow_level == 0` and untagged, implicit scalars.
fn select_scalar_style(scalar: &Scalar, analysis: &Analysis, simple_key_context: bool) -> Written {
    let mut style = match scalar.style {
        Style::Plain => Written::Plain,
        Style::DoubleQuoted => Written::DoubleQuoted,
        Style::Literal => Written::Literal,
    };
    if simple_key_context && analysis.multiline {
        style = Written::DoubleQuoted;
    }
    if style == Written::Plain && (!analysis.block_plain_allowed || scalar.value.is_empty() && simple_key_context) {
        style = Written::SingleQuoted;
    }
    if style == Written::SingleQuoted && !analysis.single_quoted_allowed {
        style = Written::DoubleQuoted;
    }
    if style == Written::Literal && (!analysis.block_allowed || simple_key_context) {
        style = Written::DoubleQuoted;
    }
    style
}
