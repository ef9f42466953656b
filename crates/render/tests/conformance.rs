//! Golden tests: every case under testdata/conformance/render (outputs of the original
//! controller) must render to the same bytes, the same hash input and the same name. Set
//! MCO_CONFORMANCE_DIR to a directory of the same layout to check further cases.

use std::fs;
use std::path::{Path, PathBuf};

use mco_api::{ControllerConfig, MachineConfig, MachineConfigPool};
use mco_render::{ControllerVersion, Inputs, StorageOverrides, render};

/// The controller version the golden outputs were produced with.
fn golden_version() -> ControllerVersion {
    ControllerVersion { raw: "v0.0.0-was-not-built-properly".into(), hash: "was-not-built-properly".into() }
}

fn case_dirs() -> Vec<PathBuf> {
    let mut roots = vec![Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/conformance/render")];
    if let Ok(extra) = std::env::var("MCO_CONFORMANCE_DIR") {
        roots.push(PathBuf::from(extra));
    }
    let mut dirs: Vec<PathBuf> = roots
        .iter()
        .flat_map(|root| fs::read_dir(root).unwrap_or_else(|e| panic!("{}: {e}", root.display())))
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("expected/name.txt").exists())
        .collect();
    dirs.sort();
    dirs
}

fn yaml<T: serde::de::DeserializeOwned>(path: &Path) -> T {
    serde_yaml::from_str(&fs::read_to_string(path).unwrap()).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn text(dir: &Path, name: &str) -> String {
    fs::read_to_string(dir.join("expected").join(name)).unwrap()
}

fn lines(s: &str) -> Vec<String> {
    s.lines().map(str::to_string).filter(|l| !l.is_empty()).collect()
}

#[test]
fn conformance_cases_render_byte_identically() {
    let dirs = case_dirs();
    assert!(dirs.len() >= 2, "conformance cases missing");
    for dir in dirs {
        let case = dir.file_name().unwrap().to_string_lossy().to_string();
        let pool: MachineConfigPool = yaml(&dir.join("input/pool.yaml"));
        let cc: ControllerConfig = yaml(&dir.join("input/controllerconfig.yaml"));
        let mut mc_files: Vec<PathBuf> =
            fs::read_dir(dir.join("input/machineconfigs")).unwrap().map(|e| e.unwrap().path()).collect();
        mc_files.sort();
        let mcs: Vec<MachineConfig> = mc_files.iter().map(|p| yaml(p)).collect();
        let version = golden_version();
        let rendered = render(Inputs {
            pool: &pool,
            machine_configs: &mcs,
            controller_config: &cc,
            version: &version,
            current: None,
            storage_overrides: StorageOverrides::default(),
        })
        .unwrap_or_else(|e| panic!("{case}: {e}"));

        let mut selected = rendered.merge_order.clone();
        selected.sort();
        assert_eq!(selected, lines(&text(&dir, "selected.txt")), "{case}: selected");
        assert_eq!(rendered.merge_order, lines(&text(&dir, "merge-order.txt")), "{case}: merge order");
        assert_eq!(rendered.serialized.config_json, text(&dir, "config.ign.json"), "{case}: config bytes");
        assert_eq!(rendered.serialized.spec_json, text(&dir, "rendered.json"), "{case}: spec bytes");
        let hash_input = text(&dir, "hash-input.yaml");
        assert_eq!(rendered.serialized.hash_input, hash_input, "{case}: hash input");
        assert_eq!(
            rendered.machine_config.metadata.name.as_deref(),
            Some(text(&dir, "name.txt").trim()),
            "{case}: name"
        );
        assert_eq!(rendered.object_json, text(&dir, "rendered-mc.json"), "{case}: object bytes");
        let size: serde_json::Value = serde_json::from_str(&text(&dir, "size-check.json")).unwrap();
        assert_eq!(rendered.object_json.len() as u64, size["jsonBytes"].as_u64().unwrap(), "{case}: size");
        let controller: serde_json::Value = serde_json::from_str(&text(&dir, "controller.json")).unwrap();
        let source: Vec<String> = controller["poolSpecConfiguration"]["source"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["name"].as_str().unwrap().to_string())
            .collect();
        assert_eq!(rendered.merge_order, source, "{case}: pool source");
    }
}
