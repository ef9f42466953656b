//! `ghodss_yaml` against recorded outputs of the real Go code.
//!
//! `data/ghodss.json` (hand-picked groups, ~1700 inputs) and `data/ghodss_random.json` (1500
//! random strings full of indicators, quotes, blanks and line breaks) hold, for each input, what
//! `github.com/ghodss/yaml` v1.0.0
//! `Marshal` (over gopkg.in/yaml.v2 v2.4.0, go1.26) returned for the Go value whose JSON form
//! the input is: the YAML text, or the error. The Go program typed numbers like serde_json does
//! (integer literals as int64/uint64 when they fit, anything else as float64). See
//! `data/README.md` for the groups and how they were produced.

use mco_goser::{GhodssError, ghodss_yaml};
use serde::Deserialize;
use serde_json::Value;

#[derive(Deserialize)]
struct Record {
    group: String,
    #[serde(default)]
    note: String,
    input: Value,
    yaml: Option<String>,
    error: Option<String>,
}

fn expected_error_kind(go_error: &str) -> Option<GhodssError> {
    if go_error.contains("control characters are not allowed") {
        Some(GhodssError::ControlCharacter('\0'))
    } else if go_error.contains("did not find expected ',' or '}'") {
        Some(GhodssError::UnreadableKey)
    } else if go_error.contains("found unexpected document indicator") {
        Some(GhodssError::DocumentIndicator)
    } else if go_error.contains("exceeded max depth") {
        Some(GhodssError::TooDeep)
    } else {
        None
    }
}

fn same_kind(a: &GhodssError, b: &GhodssError) -> bool {
    std::mem::discriminant(a) == std::mem::discriminant(b)
}

#[test]
fn ghodss_matches_go() {
    check_file(include_str!("../data/ghodss.json"));
}

#[test]
fn ghodss_matches_go_on_random_strings() {
    check_file(include_str!("../data/ghodss_random.json"));
}

fn check_file(data: &str) {
    let records: Vec<Record> = serde_json::from_str(data).expect("vector file parses");
    assert!(records.len() > 1000, "vector file looks truncated");
    let mut failures = Vec::new();
    for (i, r) in records.iter().enumerate() {
        let got = ghodss_yaml(&r.input);
        let ok = match (&got, &r.yaml, &r.error) {
            (Ok(y), Some(want), None) => y == want,
            (Err(e), None, Some(go)) => expected_error_kind(go).is_some_and(|k| same_kind(e, &k)),
            _ => false,
        };
        if !ok {
            failures.push(format!(
                "#{i} [{}] {}\n  input: {}\n  want:  {:?}\n  got:   {:?}",
                r.group,
                r.note,
                r.input,
                r.yaml.as_ref().or(r.error.as_ref()),
                got
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} vectors differ from Go:\n{}",
        failures.len(),
        records.len(),
        failures.iter().take(25).cloned().collect::<Vec<_>>().join("\n")
    );
}
