//! `to_go_json` against recorded outputs of Go's encoders.

use mco_goser::{Escaping, to_go_json};
use serde::Deserialize;

fn go_json<T: serde::Serialize + ?Sized>(value: &T, flavor: Escaping) -> String {
    String::from_utf8(to_go_json(value, flavor).expect("serializes")).expect("UTF-8")
}

#[derive(Deserialize)]
struct StringRecord {
    s: String,
    modern: String,
    legacy: String,
}

/// `data/json_strings.json`: every code point below U+0100, the special cases above it, and 500
/// random strings, with what go1.26 `json.Marshal` (Modern) and github.com/clarketm/json v1.17.1
/// `Marshal` (Legacy) printed for them.
#[test]
fn strings_match_go() {
    let records: Vec<StringRecord> =
        serde_json::from_str(include_str!("../data/json_strings.json")).expect("vector file parses");
    assert!(records.len() > 700);
    for r in &records {
        assert_eq!(go_json(&r.s, Escaping::Modern), r.modern, "modern, {:?}", r.s);
        assert_eq!(go_json(&r.s, Escaping::Legacy), r.legacy, "legacy, {:?}", r.s);
    }
}

/// The escaping rules spelled out (same Go outputs as above).
#[test]
fn escaping_table() {
    let cases: &[(&str, &str, &str)] = &[
        ("\"\\/", r#""\"\\/""#, r#""\"\\/""#),
        ("\n\r\t", r#""\n\r\t""#, r#""\n\r\t""#),
        ("\u{8}\u{c}", r#""\b\f""#, r#""\u0008\u000c""#),
        ("\u{0}\u{1}\u{1b}\u{1f}", r#""\u0000\u0001\u001b\u001f""#, r#""\u0000\u0001\u001b\u001f""#),
        (
            "<a href='x'>&</a>",
            r#""\u003ca href='x'\u003e\u0026\u003c/a\u003e""#,
            r#""\u003ca href='x'\u003e\u0026\u003c/a\u003e""#,
        ),
        ("\u{2028}\u{2029}", r#""\u2028\u2029""#, r#""\u2028\u2029""#),
        ("\u{7f}\u{85}é😀\u{feff}", "\"\u{7f}\u{85}é😀\u{feff}\"", "\"\u{7f}\u{85}é😀\u{feff}\""),
    ];
    for (s, modern, legacy) in cases {
        assert_eq!(go_json(*s, Escaping::Modern), *modern, "{s:?}");
        assert_eq!(go_json(*s, Escaping::Legacy), *legacy, "{s:?}");
    }
}

/// Keys go through the same escaping; structure is compact with no spaces.
#[test]
fn keys_and_structure() {
    #[derive(serde::Serialize)]
    struct File<'a> {
        path: &'a str,
        mode: Option<u32>,
        overwrite: bool,
        tags: Vec<&'a str>,
    }
    let file = File { path: "/etc/<motd>", mode: Some(420), overwrite: true, tags: vec![] };
    assert_eq!(
        go_json(&file, Escaping::Modern),
        r#"{"path":"/etc/\u003cmotd\u003e","mode":420,"overwrite":true,"tags":[]}"#
    );
    let map: std::collections::BTreeMap<&str, Option<i32>> = [("a&b", None), ("c\u{8}", Some(-1))].into();
    assert_eq!(go_json(&map, Escaping::Legacy), r#"{"a\u0026b":null,"c\u0008":-1}"#);
}

fn parse_floats(tsv: &str) -> Vec<Vec<&str>> {
    tsv.lines().filter(|l| !l.starts_with('#')).map(|l| l.split('\t').collect()).collect()
}

/// `data/floats64.tsv`: random bit patterns, "human" decimals, powers of ten across the whole
/// exponent range and the neighbours of the format cut-offs (1e-6, 1e21), with go1.26's
/// `json.Marshal(float64)`.
#[test]
fn f64_matches_go() {
    let rows = parse_floats(include_str!("../data/floats64.tsv"));
    assert!(rows.len() > 2000);
    for row in rows {
        let f = f64::from_bits(u64::from_str_radix(row[0], 16).expect("hex bits"));
        assert_eq!(go_json(&f, Escaping::Modern), row[1], "bits {}", row[0]);
    }
}

/// `data/floats32.tsv`: the same for `json.Marshal(float32)`.
#[test]
fn f32_matches_go() {
    let rows = parse_floats(include_str!("../data/floats32.tsv"));
    assert!(rows.len() > 1000);
    for row in rows {
        let f = f32::from_bits(u32::from_str_radix(row[0], 16).expect("hex bits"));
        assert_eq!(go_json(&f, Escaping::Modern), row[1], "bits {}", row[0]);
    }
}

/// Found by the `rendered_name` fuzz target: numbers too long for an integer are read as the
/// nearest float64, as Go's decoder reads them (serde_json's default fast parse can miss by one
/// unit in the last place, which would print other digits and so hash another rendered name), and
/// written back in digits that read as the same float64.
#[test]
fn long_numbers_read_as_the_nearest_float64_and_round_trip() {
    let literals = [
        "18446744444444444444444444444444444444444444444444444444444444444444073709551615",
        "184467440737095516152",
        "1.8446744444444442e+76",
    ];
    for literal in literals {
        let nearest: f64 = literal.parse().unwrap();
        let read: serde_json::Value = serde_json::from_str(literal).unwrap();
        assert_eq!(read.as_f64(), Some(nearest), "{literal}");
        let written = go_json(&read, Escaping::Modern);
        assert_eq!(written.parse::<f64>().unwrap(), nearest, "{literal} -> {written}");
    }
}
