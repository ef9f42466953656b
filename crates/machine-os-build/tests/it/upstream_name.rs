//! Golden test: mco names a MachineOSBuild exactly as upstream does. The inputs and the name are
//! upstream's `TestMachineOSBuild` ("All values present"), see the fixture's `source`.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use mco_api::{MachineConfig, MachineConfigPool, MachineOSConfig};
use mco_machine_os_build::BuildRequest;
use serde_json::Value;

fn fixture() -> Value {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/upstream-mosb-name.json");
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// Deserializes the fixture's `key` as the type the binding asks for.
macro_rules! field {
    ($fixture:expr, $key:literal) => {
        serde_json::from_value($fixture[$key].clone()).unwrap_or_else(|e| panic!("fixture {}: {e}", $key))
    };
}

#[test]
fn machine_os_build_name_is_upstreams() {
    let fixture = fixture();
    let config: MachineOSConfig = field!(fixture, "machineOSConfig");
    let pool: MachineConfigPool = field!(fixture, "machineConfigPool");
    let rendered: MachineConfig = field!(fixture, "renderedMachineConfig");
    let expected = fixture["expectedName"].as_str().expect("expectedName is a string");

    let request = BuildRequest::new(&config, &pool, &rendered).expect("upstream's inputs make a build request");
    assert_eq!(request.build_name(), expected);

    let now: Time = serde_json::from_value(Value::from("2026-01-01T00:00:00Z")).unwrap();
    let build = request.machine_os_build(&now);
    assert_eq!(build.metadata.name.as_deref(), Some(expected));
    assert_eq!(build.spec.rendered_image_push_spec, format!("registry.hostname.com/org/repo:{expected}"));
}
