//! `MachineConfigSpec` serializes byte for byte like upstream's Go struct under `encoding/json`:
//! rendered MachineConfig names are hashes of that output.

use std::path::{Path, PathBuf};

use mco_api::MachineConfigSpec;
use serde_json::json;

#[test]
fn all_fields_set_serialize_in_go_field_order() {
    let spec = MachineConfigSpec {
        os_image_url: "quay.io/os@sha256:11".into(),
        base_os_extensions_container_image: "quay.io/ext@sha256:22".into(),
        config: Some(json!({"ignition": {"version": "3.5.0"}, "passwd": {}})),
        kernel_arguments: Some(vec!["nosmt".into(), "a=b c=d".into()]),
        extensions: Some(vec!["usbguard".into()]),
        fips: true,
        kernel_type: "realtime".into(),
    };
    assert_eq!(
        serde_json::to_string(&spec).unwrap(),
        r#"{"osImageURL":"quay.io/os@sha256:11","baseOSExtensionsContainerImage":"quay.io/ext@sha256:22","config":{"ignition":{"version":"3.5.0"},"passwd":{}},"kernelArguments":["nosmt","a=b c=d"],"extensions":["usbguard"],"fips":true,"kernelType":"realtime"}"#
    );
}

#[test]
fn unset_fields_serialize_as_go_zero_values() {
    // No field has `omitempty`; a nil RawExtension and nil slices are `null`.
    assert_eq!(
        serde_json::to_string(&MachineConfigSpec::default()).unwrap(),
        r#"{"osImageURL":"","baseOSExtensionsContainerImage":"","config":null,"kernelArguments":null,"extensions":null,"fips":false,"kernelType":""}"#
    );
}

#[test]
fn empty_lists_stay_distinct_from_nil() {
    let spec = MachineConfigSpec { kernel_arguments: Some(vec![]), extensions: Some(vec![]), ..Default::default() };
    let text = serde_json::to_string(&spec).unwrap();
    assert!(text.contains(r#""kernelArguments":[],"extensions":[]"#), "{text}");
}

#[test]
fn deserialization_accepts_missing_and_null_fields() {
    let spec: MachineConfigSpec = serde_json::from_str("{}").unwrap();
    assert_eq!(spec, MachineConfigSpec::default());

    let spec: MachineConfigSpec =
        serde_json::from_str(r#"{"config":null,"kernelArguments":[],"extensions":null}"#).unwrap();
    assert_eq!(spec.config, None);
    assert_eq!(spec.kernel_arguments, Some(vec![]));
    assert_eq!(spec.extensions, None);

    // `{}` is a config (without a version), not the absence of one.
    let spec: MachineConfigSpec = serde_json::from_str(r#"{"config":{}}"#).unwrap();
    assert_eq!(spec.config, Some(json!({})));
}

/// Parses a Go-rendered spec and checks it serializes to the very same bytes (key order inside
/// `config` included).
fn assert_golden(path: &Path) {
    let golden = std::fs::read_to_string(path).unwrap();
    let spec: MachineConfigSpec = serde_json::from_str(&golden).unwrap();
    assert_eq!(serde_json::to_string(&spec).unwrap(), golden, "{}", path.display());
}

#[test]
fn go_rendered_specs_roundtrip_byte_for_byte() {
    let fixtures = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let mut checked = 0;
    for entry in std::fs::read_dir(&fixtures).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if name.starts_with("rendered-spec-") {
            assert_golden(&path);
            checked += 1;
        }
    }
    assert!(checked >= 2, "expected the rendered-spec-* fixtures");
}

#[path = "../../../../testdata/conformance/cases.rs"]
mod cases;

/// The repository's conformance cases (and `MCO_CONFORMANCE_DIR`'s): their rendered specs too.
#[test]
fn conformance_specs_roundtrip_byte_for_byte() {
    for case in cases::render_case_dirs() {
        let golden = case.join("expected/rendered.json");
        if golden.exists() {
            assert_golden(&golden);
        }
    }
}
