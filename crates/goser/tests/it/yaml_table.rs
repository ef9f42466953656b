//! `ghodss_yaml` on hand-picked inputs, one test per yaml.v2 rule.
//!
//! Every expectation was produced by the real code: a throwaway Go program (go1.26) that decoded
//! each input, typed numbers like serde_json does, and printed `github.com/ghodss/yaml` v1.0.0
//! `Marshal` of it (gopkg.in/yaml.v2 v2.4.0 underneath). Nothing here is a guess.

use mco_goser::GhodssError::{self, ControlCharacter, DocumentIndicator, UnreadableKey};
use mco_goser::ghodss_yaml;
use md5::{Digest, Md5};
use serde_json::Value;

fn check(cases: &[(&str, Result<&str, GhodssError>)]) {
    let mut failures = Vec::new();
    for (input, want) in cases {
        let value: serde_json::Value = serde_json::from_str(input).expect("test input is JSON");
        let got = ghodss_yaml(&value);
        if got != want.clone().map(str::to_owned) {
            failures.push(format!("input {input}\n  want {want:?}\n  got  {got:?}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Digit runs compare by value (a9 < a10), a longer zero-padded run sorts after an equal value (a1
/// < a01), non-letters before letters (a_b < ab, A-Z and a-z by code point among letters).
#[test]
fn key_order() {
    check(&[(
        r#"{"a10":1,"a9":2,"a1":3,"a01":4,"a001":5,"a_b":6,"ab":7,"aB":8,"Ab":9,"AB":10,"a-b":11,"a.b":12,"b":13,"B":14,"_a":15,"10":16,"9":17,"09":18,"é":19,"z":20}"#,
        Ok(
            "_a: 15\n\"9\": 17\n\"09\": 18\n\"10\": 16\nAB: 10\nAb: 9\nB: 14\na-b: 11\na.b: 12\na_b: 6\na1: 3\na01: 4\na001: 5\na9: 2\na10: 1\naB: 8\nab: 7\nb: 13\nz: 20\né: 19\n",
        ),
    )]);
}

/// Strings that would read back as another type are double-quoted; those that read back as strings
/// stay plain.
#[test]
fn resolve_quoting() {
    check(&[
        (r#"{"v":"true"}"#, Ok("v: \"true\"\n")),
        (r#"{"v":"True"}"#, Ok("v: \"True\"\n")),
        (r#"{"v":"TRUE"}"#, Ok("v: \"TRUE\"\n")),
        (r#"{"v":"tRUE"}"#, Ok("v: tRUE\n")),
        (r#"{"v":"yes"}"#, Ok("v: \"yes\"\n")),
        (r#"{"v":"Yes"}"#, Ok("v: \"Yes\"\n")),
        (r#"{"v":"YES"}"#, Ok("v: \"YES\"\n")),
        (r#"{"v":"Y"}"#, Ok("v: \"Y\"\n")),
        (r#"{"v":"y"}"#, Ok("v: \"y\"\n")),
        (r#"{"v":"n"}"#, Ok("v: \"n\"\n")),
        (r#"{"v":"NO"}"#, Ok("v: \"NO\"\n")),
        (r#"{"v":"on"}"#, Ok("v: \"on\"\n")),
        (r#"{"v":"On"}"#, Ok("v: \"On\"\n")),
        (r#"{"v":"off"}"#, Ok("v: \"off\"\n")),
        (r#"{"v":"OFF"}"#, Ok("v: \"OFF\"\n")),
        (r#"{"v":"null"}"#, Ok("v: \"null\"\n")),
        (r#"{"v":"Null"}"#, Ok("v: \"Null\"\n")),
        (r#"{"v":"~"}"#, Ok("v: \"~\"\n")),
        (r#"{"v":""}"#, Ok("v: \"\"\n")),
        (r#"{"v":"1"}"#, Ok("v: \"1\"\n")),
        (r#"{"v":"-1"}"#, Ok("v: \"-1\"\n")),
        (r#"{"v":"+1"}"#, Ok("v: \"+1\"\n")),
        (r#"{"v":"0x1F"}"#, Ok("v: \"0x1F\"\n")),
        (r#"{"v":"0o17"}"#, Ok("v: \"0o17\"\n")),
        (r#"{"v":"0b101"}"#, Ok("v: \"0b101\"\n")),
        (r#"{"v":"0b-101"}"#, Ok("v: \"0b-101\"\n")),
        (r#"{"v":"0777"}"#, Ok("v: \"0777\"\n")),
        (r#"{"v":"08"}"#, Ok("v: \"08\"\n")),
        (r#"{"v":"1_000"}"#, Ok("v: \"1_000\"\n")),
        (r#"{"v":"1__0"}"#, Ok("v: \"1__0\"\n")),
        (r#"{"v":"_1"}"#, Ok("v: _1\n")),
        (r#"{"v":"1.5"}"#, Ok("v: \"1.5\"\n")),
        (r#"{"v":"1."}"#, Ok("v: \"1.\"\n")),
        (r#"{"v":".5"}"#, Ok("v: \".5\"\n")),
        (r#"{"v":".inf"}"#, Ok("v: \".inf\"\n")),
        (r#"{"v":"-.Inf"}"#, Ok("v: \"-.Inf\"\n")),
        (r#"{"v":".NaN"}"#, Ok("v: \".NaN\"\n")),
        (r#"{"v":"1e3"}"#, Ok("v: \"1e3\"\n")),
        (r#"{"v":"1e400"}"#, Ok("v: 1e400\n")),
        (r#"{"v":"2024-01-02"}"#, Ok("v: \"2024-01-02\"\n")),
        (r#"{"v":"2024-1-2 10:00:00"}"#, Ok("v: \"2024-1-2 10:00:00\"\n")),
        (r#"{"v":"2024-01-02T10:00:00Z"}"#, Ok("v: \"2024-01-02T10:00:00Z\"\n")),
        (r#"{"v":"2024-02-30"}"#, Ok("v: 2024-02-30\n")),
        (r#"{"v":"12:30"}"#, Ok("v: \"12:30\"\n")),
        (r#"{"v":"1:20:30.5"}"#, Ok("v: \"1:20:30.5\"\n")),
        (r#"{"v":"1:60"}"#, Ok("v: 1:60\n")),
        (r#"{"v":"<<"}"#, Ok("v: <<\n")),
        (r#"{"v":"0x"}"#, Ok("v: 0x\n")),
        (r#"{"v":"9223372036854775808"}"#, Ok("v: \"9223372036854775808\"\n")),
        (r#"{"v":"18446744073709551616"}"#, Ok("v: \"18446744073709551616\"\n")),
    ]);
}

/// A leading indicator character rules out plain style; single quotes are used when they can carry
/// the text.
#[test]
fn indicators_at_start() {
    check(&[
        (r#"{"v":"-"}"#, Ok("v: '-'\n")),
        (r#"{"v":"- x"}"#, Ok("v: '- x'\n")),
        (r#"{"v":"-x"}"#, Ok("v: -x\n")),
        (r#"{"v":"?"}"#, Ok("v: '?'\n")),
        (r#"{"v":"? x"}"#, Ok("v: '? x'\n")),
        (r#"{"v":"?x"}"#, Ok("v: ?x\n")),
        (r#"{"v":":"}"#, Ok("v: ':'\n")),
        (r#"{"v":": x"}"#, Ok("v: ': x'\n")),
        (r#"{"v":":x"}"#, Ok("v: :x\n")),
        (r#"{"v":",x"}"#, Ok("v: ',x'\n")),
        (r#"{"v":"[x"}"#, Ok("v: '[x'\n")),
        (r#"{"v":"]x"}"#, Ok("v: ']x'\n")),
        (r#"{"v":"{x"}"#, Ok("v: '{x'\n")),
        (r#"{"v":"}x"}"#, Ok("v: '}x'\n")),
        (r##"{"v":"#x"}"##, Ok("v: '#x'\n")),
        (r#"{"v":"&x"}"#, Ok("v: '&x'\n")),
        (r#"{"v":"*x"}"#, Ok("v: '*x'\n")),
        (r#"{"v":"!x"}"#, Ok("v: '!x'\n")),
        (r#"{"v":"|x"}"#, Ok("v: '|x'\n")),
        (r#"{"v":">x"}"#, Ok("v: '>x'\n")),
        (r#"{"v":"'x"}"#, Ok("v: '''x'\n")),
        (r#"{"v":"\"x"}"#, Ok("v: '\"x'\n")),
        (r#"{"v":"%x"}"#, Ok("v: '%x'\n")),
        (r#"{"v":"@x"}"#, Ok("v: '@x'\n")),
        (r#"{"v":"`x"}"#, Ok("v: '`x'\n")),
        (r#"{"v":"---"}"#, Ok("v: '---'\n")),
        (r#"{"v":"--- x"}"#, Ok("v: '--- x'\n")),
        (r#"{"v":"..."}"#, Ok("v: '...'\n")),
        (r#"{"v":"x-"}"#, Ok("v: x-\n")),
        (r#"{"v":"x?"}"#, Ok("v: x?\n")),
    ]);
}

/// ": " and " #" inside a string need quotes; ":" and "#" without the blank do not.
#[test]
fn indicators_inside() {
    check(&[
        (r#"{"v":"a: b"}"#, Ok("v: 'a: b'\n")),
        (r#"{"v":"a:b"}"#, Ok("v: a:b\n")),
        (r#"{"v":"a:"}"#, Ok("v: 'a:'\n")),
        (r#"{"v":"a #b"}"#, Ok("v: 'a #b'\n")),
        (r#"{"v":"a#b"}"#, Ok("v: a#b\n")),
        (r#"{"v":"a,b[c]{d}?"}"#, Ok("v: a,b[c]{d}?\n")),
        (r#"{"v":"a\t#b"}"#, Ok("v: \"a\\t#b\"\n")),
    ]);
}

/// Leading/trailing spaces need quotes; a tab is not printable for yaml.v2, so it forces double
/// quotes.
#[test]
fn blanks() {
    check(&[
        (r#"{"v":" a"}"#, Ok("v: ' a'\n")),
        (r#"{"v":"a "}"#, Ok("v: 'a '\n")),
        (r#"{"v":" "}"#, Ok("v: ' '\n")),
        (r#"{"v":"a  b"}"#, Ok("v: a  b\n")),
        (r#"{"v":"\ta"}"#, Ok("v: \"\\ta\"\n")),
        (r#"{"v":"a\tb"}"#, Ok("v: \"a\\tb\"\n")),
        (r#"{" k":1}"#, Ok("' k': 1\n")),
        (r#"{"k ":1}"#, Ok("'k ': 1\n")),
    ]);
}

/// Control characters, NEL, the BOM and characters outside the BMP are escaped in double quotes (a
/// leading BOM escapes everything); other non-ASCII is raw.
#[test]
fn special_characters() {
    check(&[
        (r#"{"v":"\u0000\u0007\b\u000b\f\r\u001b\u001f"}"#, Ok("v: \"\\0\\a\\b\\v\\f\\r\\e\\x1F\"\n")),
        (r#"{"v":"\u00a0"}"#, Ok("v: \u{a0}\n")),
        (r#"{"v":"é 日本語"}"#, Ok("v: é 日本語\n")),
        (r#"{"v":"😀"}"#, Ok("v: \"\\U0001F600\"\n")),
        (r#"{"v":"\ufeffab"}"#, Ok("v: \"\\uFEFF\\x61\\x62\"\n")),
        (r#"{"v":"a\ufeff"}"#, Ok("v: \"a\\uFEFF\"\n")),
        (r#"{"v":"\ufffd"}"#, Ok("v: \u{fffd}\n")),
        (r#"{"v":"\u2028"}"#, Ok("v: '\u{2028}'\n")),
        (r#"{"v":"a\u2028b"}"#, Ok("v: 'a\u{2028}  b'\n")),
        (r#"{"v":"a\"b\\c"}"#, Ok("v: a\"b\\c\n")),
        (r#"{"v":"it's"}"#, Ok("v: it's\n")),
    ]);
}

/// Strings with a line feed use literal style with chomping (-, none, +) and an indentation
/// indicator when they start with a space or line break; trailing spaces, tabs or a space before a
/// break force double quotes.
#[test]
fn literal_blocks() {
    check(&[
        (r#"{"v":"a\nb"}"#, Ok("v: |-\n  a\n  b\n")),
        (r#"{"v":"a\nb\n"}"#, Ok("v: |\n  a\n  b\n")),
        (r#"{"v":"a\nb\n\n"}"#, Ok("v: |+\n  a\n  b\n\n")),
        (r#"{"v":"\n"}"#, Ok("v: |2+\n\n")),
        (r#"{"v":"\n\n"}"#, Ok("v: |2+\n\n\n")),
        (r#"{"v":"\na"}"#, Ok("v: |2-\n\n  a\n")),
        (r#"{"v":" a\nb"}"#, Ok("v: |2-\n   a\n  b\n")),
        (r#"{"v":"a\n b"}"#, Ok("v: |-\n  a\n   b\n")),
        (r#"{"v":"a \nb"}"#, Ok("v: \"a \\nb\"\n")),
        (r#"{"v":"a\nb "}"#, Ok("v: \"a\\nb \"\n")),
        (r#"{"v":"a\tb\nc"}"#, Ok("v: \"a\\tb\\nc\"\n")),
        (r#"{"v":"a\r\nb"}"#, Ok("v: \"a\\r\\nb\"\n")),
        (r#"{"v":"  \n  x\n"}"#, Ok("v: \"  \\n  x\\n\"\n")),
        (r#"{"k":["x\ny\n"]}"#, Ok("k:\n- |\n  x\n  y\n")),
        (r#"["a\nb"]"#, Ok("- |-\n  a\n  b\n")),
        (r#""a\nb\n""#, Ok("|\n  a\n  b\n")),
    ]);
}

/// A raw NEL in a value is folded by the YAML reader (one break becomes a space, n breaks n-1
/// newlines).
#[test]
fn nel() {
    check(&[
        (r#"{"v":"a\u0085b"}"#, Ok("v: a b\n")),
        (r#"{"v":"a \u0085  b"}"#, Ok("v: a b\n")),
        (r#"{"v":"a\u0085\u0085b"}"#, Ok("v: |-\n  a\n  b\n")),
    ]);
}

/// Past column 80 a line is broken at the next space that has no space on either side (plain,
/// single- and double-quoted styles; double-spaced text never folds), never inside a simple key.
#[test]
fn folding() {
    check(&[
        (
            r#"{"v":"lorem ipsum dolor sit amet consectetur adipiscing elit sed do eiusmod tempor incididunt ut labore et dolore magna aliqua"}"#,
            Ok(
                "v: lorem ipsum dolor sit amet consectetur adipiscing elit sed do eiusmod tempor incididunt\n  ut labore et dolore magna aliqua\n",
            ),
        ),
        (
            r#"{"v":" lorem ipsum dolor sit amet consectetur adipiscing elit sed do eiusmod tempor incididunt ut labore et dolore magna aliqua"}"#,
            Ok(
                "v: ' lorem ipsum dolor sit amet consectetur adipiscing elit sed do eiusmod tempor\n  incididunt ut labore et dolore magna aliqua'\n",
            ),
        ),
        (
            r#"{"v":"lorem ipsum dolor sit amet consectetur adipiscing elit sed do eiusmod tempor incididunt ut labore et dolore magna aliqua\t"}"#,
            Ok(
                "v: \"lorem ipsum dolor sit amet consectetur adipiscing elit sed do eiusmod tempor incididunt\n  ut labore et dolore magna aliqua\\t\"\n",
            ),
        ),
        (
            r#"{"v":"lorem  ipsum  dolor  sit  amet  consectetur  adipiscing  elit  sed  do  eiusmod  tempor  incididunt  ut  labore  et  dolore  magna  aliqua"}"#,
            Ok(
                "v: lorem  ipsum  dolor  sit  amet  consectetur  adipiscing  elit  sed  do  eiusmod  tempor  incididunt  ut  labore  et  dolore  magna  aliqua\n",
            ),
        ),
        (
            r#"{"a":[{"b":["lorem ipsum dolor sit amet consectetur adipiscing elit sed do eiusmod tempor incididunt ut labore et dolore magna aliqua"]}]}"#,
            Ok(
                "a:\n- b:\n  - lorem ipsum dolor sit amet consectetur adipiscing elit sed do eiusmod tempor incididunt\n    ut labore et dolore magna aliqua\n",
            ),
        ),
        (
            r#"{"a":{"b":{"c":{"d":" lorem ipsum dolor sit amet consectetur adipiscing elit sed do eiusmod tempor incididunt ut labore et dolore magna aliqua"}}}}"#,
            Ok(
                "a:\n  b:\n    c:\n      d: ' lorem ipsum dolor sit amet consectetur adipiscing elit sed do eiusmod tempor\n        incididunt ut labore et dolore magna aliqua'\n",
            ),
        ),
        (
            r#"{"lorem ipsum dolor sit amet consectetur adipiscing elit sed do eiusmod tempor incididunt ut labore et dolore magna aliqua":1}"#,
            Ok(
                "lorem ipsum dolor sit amet consectetur adipiscing elit sed do eiusmod tempor incididunt ut labore et dolore magna aliqua: 1\n",
            ),
        ),
        (
            r#"{"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx":"lorem ipsum dolor sit amet consectetur adipiscing elit sed do eiusmod tempor incididunt ut labore et dolore magna aliqua"}"#,
            Ok(
                "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx: lorem\n  ipsum dolor sit amet consectetur adipiscing elit sed do eiusmod tempor incididunt\n  ut labore et dolore magna aliqua\n",
            ),
        ),
        (
            r#"{"v":"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx lorem ipsum dolor sit amet consectetur adipiscing elit sed do eiusmod tempor incididunt ut labore et dolore magna aliqua"}"#,
            Ok(
                "v: xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\n  lorem ipsum dolor sit amet consectetur adipiscing elit sed do eiusmod tempor incididunt\n  ut labore et dolore magna aliqua\n",
            ),
        ),
    ]);
}

/// Keys over 128 bytes or with line breaks are written as complex keys ("? key" / ": value").
#[test]
fn complex_keys() {
    check(&[
        (
            r#"{"kkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkk":1}"#,
            Ok(
                "? kkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkk\n: 1\n",
            ),
        ),
        (
            r#"{"kkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkk":[1,2]}"#,
            Ok(
                "? kkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkk\n: - 1\n  - 2\n",
            ),
        ),
        (
            r#"{"kkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkk":{"a":1}}"#,
            Ok(
                "? kkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkk\n: a: 1\n",
            ),
        ),
        (r#"{"a\nb":"c"}"#, Ok("? |-\n  a\n  b\n: c\n")),
        (r#"{"a\u2028b":"c"}"#, Ok("? 'a\u{2028}  b'\n: c\n")),
        (
            r#"{"kkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkk":1}"#,
            Ok(
                "kkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkk: 1\n",
            ),
        ),
    ]);
}

/// Block sequences in a mapping are not indented; empty collections are flow style.
#[test]
fn structure() {
    check(&[
        (
            r#"{"a":{},"b":[],"c":null,"d":[null,{},[]],"e":[[1,[2,[]]],{"f":{"g":[]}}]}"#,
            Ok("a: {}\nb: []\nc: null\nd:\n- null\n- {}\n- []\ne:\n- - 1\n  - - 2\n    - []\n- f:\n    g: []\n"),
        ),
        (r#"[]"#, Ok("[]\n")),
        (r#"{}"#, Ok("{}\n")),
        (r#"null"#, Ok("null\n")),
        (r#""s""#, Ok("s\n")),
        (r#"[[{"a":1,"b":[1]}]]"#, Ok("- - a: 1\n    b:\n    - 1\n")),
    ]);
}

/// JSON numbers are re-read by yaml.v2: ints print in decimal, float64 through FormatFloat(f, 'g',
/// -1, 64).
#[test]
fn numbers() {
    check(&[(
        r#"{"a":0,"b":-7,"c":18446744073709551615,"d":1.5,"e":1000.0,"f":1000000.0,"g":1e+21,"h":1e-07,"i":0.0001,"j":1e+19,"k":2e+19,"l":-0.0,"m":123456789.0}"#,
        Ok(
            "a: 0\nb: -7\nc: 18446744073709551615\nd: 1.5\ne: 1000\nf: 1000000\ng: 1e+21\nh: 1e-07\ni: 0.0001\nj: 10000000000000000000\nk: 2e+19\nl: 0\nm: 123456789\n",
        ),
    )]);
}

/// Inputs ghodss/yaml fails on although json.Marshal succeeds.
#[test]
fn errors() {
    check(&[
        (r#"{"v":"a\u007fb"}"#, Err(ControlCharacter('\u{7f}'))), // Go: yaml: control characters are not allowed
        (r#"{"v":"\u009f"}"#, Err(ControlCharacter('\u{9f}'))),   // Go: yaml: control characters are not allowed
        (r#"{"v":"\ufffe"}"#, Err(ControlCharacter('\u{fffe}'))), // Go: yaml: control characters are not allowed
        (
            r#"{"kkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkk":1}"#,
            Ok(
                "? kkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkk\n: 1\n",
            ),
        ),
        (
            r#"{"kkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkk":1}"#,
            Err(UnreadableKey),
        ), // Go: yaml: did not find expected ',' or '}'
        (r#"{"a\u0085b":1}"#, Err(UnreadableKey)), // Go: yaml: line 1: did not find expected ',' or '}'
        (r#"{"v":"a\u0085--- b"}"#, Err(DocumentIndicator)), // Go: yaml: line 2: found unexpected document indicator
    ]);
}

/// The YAML scanner refuses more than 10000 nested flow collections. Go's output for 10000
/// nested sequences (`- - - … []`) is checked by length and MD5. Runs on a large stack: the
/// emitter recurses once per level, as does dropping a `serde_json::Value` that deep.
#[test]
fn nesting_limit() {
    let nested = |depth: usize| {
        let mut value = Value::Array(Vec::new());
        for _ in 1..depth {
            value = Value::Array(vec![value]);
        }
        value
    };
    std::thread::Builder::new()
        .stack_size(256 << 20)
        .spawn(move || {
            let yaml = ghodss_yaml(&nested(10_000)).expect("10000 levels are fine");
            assert_eq!(yaml.len(), 20_001);
            let digest: String = Md5::digest(yaml.as_bytes()).iter().map(|b| format!("{b:02x}")).collect();
            assert_eq!(digest, "5e88883f7ecd38854d1b4e79fc8c1ac5");
            assert_eq!(ghodss_yaml(&nested(10_001)), Err(GhodssError::TooDeep));
        })
        .expect("spawn")
        .join()
        .expect("no panic");
}
