//! Spec 2.0, 2.1 and 2.2 configs against what the original's own code made of them
//! (testdata/spec2, see its README): the 2.2 config Ignition's `v2_2.Parse` produces, byte for
//! byte, and the spec 3.5 config (or the refusal) of the original's `ParseAndConvertConfig`.

use std::fs;
use std::path::{Path, PathBuf};

use mco_goser::{Escaping, to_go_json};
use mco_ignition::{AnyConfig, parse, to_internal};

fn cases() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/spec2");
    let mut inputs: Vec<PathBuf> = fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| entry.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json") && !p.to_string_lossy().contains(".v"))
        .collect();
    inputs.sort();
    assert!(inputs.len() >= 8, "spec 2 cases missing under {}", dir.display());
    inputs
}

fn expected(input: &Path, suffix: &str) -> String {
    let path = input.with_extension(format!("{suffix}.json"));
    fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn parsed(input: &Path) -> AnyConfig {
    parse(&fs::read(input).unwrap()).unwrap_or_else(|e| panic!("{}: {e}", input.display())).config
}

#[test]
fn older_spec2_configs_become_the_2_2_config_ignition_makes_of_them() {
    for input in cases() {
        let AnyConfig::V2(config) = parsed(&input) else { panic!("{}: not read as spec 2", input.display()) };
        let got = String::from_utf8(to_go_json(&config, Escaping::Modern).unwrap()).unwrap();
        assert_eq!(got, expected(&input, "v22"), "{}", input.display());
    }
}

#[test]
fn spec2_configs_convert_to_the_3_5_config_the_original_renders_or_are_refused_as_it_refuses_them() {
    for input in cases() {
        let want = expected(&input, "v35");
        match to_internal(parsed(&input)) {
            Ok(config) => {
                let got = String::from_utf8(to_go_json(&config, Escaping::Legacy).unwrap()).unwrap();
                assert_eq!(got, want, "{}", input.display());
            }
            Err(e) => {
                assert!(want.starts_with("error: "), "{}: refused ({e}) but the original converts it", input.display())
            }
        }
    }
}
