//! Floats through `ghodss_yaml`: Go prints the float64 as JSON, yaml.v2 reads that text back
//! (as an int when it has no fraction or exponent and fits 64 bits) and prints it again.

use mco_goser::ghodss_yaml;
use serde_json::{Number, Value};

/// `data/floats64.tsv`, third column: what ghodss/yaml v1.0.0 `Marshal(float64)` printed
/// (without the final newline).
#[test]
fn f64_matches_go() {
    let tsv = include_str!("../data/floats64.tsv");
    let mut checked = 0;
    for row in tsv.lines().filter(|l| !l.starts_with('#')) {
        let cols: Vec<&str> = row.split('\t').collect();
        let f = f64::from_bits(u64::from_str_radix(cols[0], 16).expect("hex bits"));
        let value = Value::Number(Number::from_f64(f).expect("finite"));
        assert_eq!(ghodss_yaml(&value).expect("no error"), format!("{}\n", cols[2]), "bits {}", cols[0]);
        checked += 1;
    }
    assert!(checked > 2000);
}
