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

#[path = "../../../../testdata/conformance/cases.rs"]
mod cases;
use cases::render_case_dirs as case_dirs;

fn yaml<T: serde::de::DeserializeOwned>(path: &Path) -> T {
    serde_yaml::from_str(&fs::read_to_string(path).unwrap()).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn text(dir: &Path, name: &str) -> String {
    fs::read_to_string(dir.join("expected").join(name)).unwrap()
}

fn lines(s: &str) -> Vec<String> {
    s.lines().map(str::to_string).filter(|l| !l.is_empty()).collect()
}

fn case_pool_and_controller_config(dir: &Path) -> (MachineConfigPool, ControllerConfig) {
    (yaml(&dir.join("input/pool.yaml")), yaml(&dir.join("input/controllerconfig.yaml")))
}

fn case_machine_configs(dir: &Path) -> Vec<MachineConfig> {
    let mut files: Vec<PathBuf> =
        fs::read_dir(dir.join("input/machineconfigs")).unwrap().map(|e| e.unwrap().path()).collect();
    files.sort();
    files.iter().map(|p| yaml(p)).collect()
}

fn render_case(
    pool: &MachineConfigPool,
    cc: &ControllerConfig,
    machine_configs: &[MachineConfig],
) -> Result<mco_render::Rendered, mco_render::RenderError> {
    render(Inputs {
        pool,
        machine_configs,
        controller_config: cc,
        version: &golden_version(),
        current: None,
        storage_overrides: StorageOverrides::default(),
        streams: Default::default(),
        offline: false,
    })
}

#[test]
fn conformance_cases_render_byte_identically() {
    let dirs = case_dirs();
    assert!(dirs.len() >= 2, "conformance cases missing");
    for dir in dirs {
        let case = dir.file_name().unwrap().to_string_lossy().to_string();
        let (pool, cc) = case_pool_and_controller_config(&dir);
        let rendered = render_case(&pool, &cc, &case_machine_configs(&dir)).unwrap_or_else(|e| panic!("{case}: {e}"));

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

/// A spec 2.0 or 2.1 MachineConfig renders to the name the original gives it: the same as the
/// spec 3.5 config the original's `ParseAndConvertConfig` makes of it (crates/ignition/testdata/spec2
/// holds both, the latter produced by the original's code), since the original merges that.
#[test]
fn spec2_machine_configs_render_as_the_original_renders_them() {
    let spec2 = Path::new(env!("CARGO_MANIFEST_DIR")).join("../ignition/testdata/spec2");
    let dir = case_dirs().into_iter().find(|d| d.ends_with("basic-worker")).expect("the basic-worker case");
    let (pool, cc) = case_pool_and_controller_config(&dir);
    for case in ["2.0-machineconfig", "2.1-machineconfig"] {
        let config = |file: String| -> serde_json::Value {
            let path = spec2.join(file);
            serde_json::from_str(&fs::read_to_string(&path).unwrap())
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        };
        let with_config = |config: serde_json::Value| {
            let mut mcs = case_machine_configs(&dir);
            let mut extra = mcs.iter().find(|mc| mc.metadata.name.as_deref() == Some("99-worker-ssh")).unwrap().clone();
            extra.metadata.name = Some("99-worker-spec2".into());
            extra.spec.config = Some(config);
            mcs.push(extra);
            render_case(&pool, &cc, &mcs).unwrap_or_else(|e| panic!("{case}: {e}")).machine_config.metadata.name
        };
        let original = with_config(config(format!("{case}.v35.json")));
        assert_eq!(with_config(config(format!("{case}.json"))), original, "{case}");
        // The translators' defaults matter: the same config without them renders differently.
        let mut without_defaults = config(format!("{case}.v35.json"));
        for file in without_defaults["storage"]["files"].as_array_mut().unwrap() {
            file.as_object_mut().unwrap().retain(|key, value| key != "mode" || value != 0);
        }
        assert_ne!(with_config(without_defaults), original, "{case}: a file's mode 0 is part of the name");
    }
}
