//! One case per rule upstream enforces in the API server, each valid and invalid.

use std::path::PathBuf;

use mco_api::validate::{self, FieldError};
use mco_api::{MachineConfigPool, MachineConfiguration, MachineOSConfig};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

fn object<T: DeserializeOwned>(api_version: &str, kind: &str, name: &str, rest: Value) -> T {
    let mut doc = json!({"apiVersion": api_version, "kind": kind, "metadata": {"name": name}});
    doc.as_object_mut().unwrap().extend(rest.as_object().unwrap().clone());
    serde_json::from_value(doc).unwrap()
}

fn mcfg_named(name: &str, rest: Value) -> Vec<FieldError> {
    let object: MachineConfiguration = object("operator.openshift.io/v1", "MachineConfiguration", name, rest);
    validate::machine_configuration(&object)
}

fn mcfg(spec: Value) -> Vec<FieldError> {
    mcfg_named("cluster", json!({"spec": spec}))
}

fn pool(max_unavailable: Value) -> Vec<FieldError> {
    let pool: MachineConfigPool = object(
        "machineconfiguration.openshift.io/v1",
        "MachineConfigPool",
        "worker",
        json!({"spec": {"maxUnavailable": max_unavailable}}),
    );
    validate::machine_config_pool(&pool)
}

fn mosc(name: &str, spec: Value) -> Vec<FieldError> {
    let mut full = json!({
        "machineConfigPool": {"name": "worker"},
        "imageBuilder": {"imageBuilderType": "Job"},
        "renderedImagePushSecret": {"name": "push"},
        "renderedImagePushSpec": "quay.io/example/os:latest",
    });
    full.as_object_mut().unwrap().extend(spec.as_object().unwrap().clone());
    let mosc: MachineOSConfig =
        object("machineconfiguration.openshift.io/v1", "MachineOSConfig", name, json!({"spec": full}));
    validate::machine_os_config(&mosc)
}

fn manager(resource: &str, selection: Value) -> Value {
    json!({"resource": resource, "apiGroup": "machine.openshift.io", "selection": selection})
}

fn ndp_file(path: &str, actions: Value) -> Value {
    json!({"nodeDisruptionPolicy": {"files": [{"path": path, "actions": actions}]}})
}

fn unit(name: &str) -> Value {
    json!({"nodeDisruptionPolicy": {"units": [{"name": name, "actions": [{"type": "DaemonReload"}]}]}})
}

fn skew(value: Value) -> Value {
    json!({"bootImageSkewEnforcement": value})
}

fn automatic(spec: Value, status_managers: Value) -> Vec<FieldError> {
    mcfg_named(
        "cluster",
        json!({
            "spec": spec,
            "status": {
                "bootImageSkewEnforcementStatus": {"mode": "Automatic", "automatic": {"ocpVersion": "4.19.0"}},
                "managedBootImagesStatus": {"machineManagers": status_managers},
            },
        }),
    )
}

/// A case name, the errors found, and the (field, message fragment) pairs expected, in order.
type Case = (&'static str, Vec<FieldError>, Vec<(&'static str, &'static str)>);

const ALL: &str = r#"{"mode":"All"}"#;

fn sel(text: &str) -> Value {
    serde_json::from_str(text).unwrap()
}

#[test]
fn rules() {
    let long_service = format!("{}.service", "a".repeat(250));
    let many_files: Vec<Value> =
        (0..51).map(|i| json!({"path": format!("/etc/f{i}"), "actions": [{"type": "None"}]})).collect();
    let many_actions: Vec<Value> = (0..11).map(|_| json!({"type": "Drain"})).collect();
    let six_managers: Vec<Value> = (0..6).map(|_| manager("machinesets", sel(ALL))).collect();
    let five_files: Vec<Value> = (0..5).map(|_| json!({"content": "FROM configs"})).collect();

    let cases: Vec<Case> = vec![
        // --- MachineConfiguration: name
        ("singleton name", mcfg(json!({})), vec![]),
        (
            "other name",
            mcfg_named("other", json!({"spec": {}})),
            vec![("metadata.name", "only a single object named \"cluster\"")],
        ),
        // --- managedBootImages
        (
            "five managers at most",
            mcfg(json!({"managedBootImages": {"machineManagers": six_managers}})),
            vec![
                ("spec.managedBootImages.machineManagers", "at most 5 items"),
                ("spec.managedBootImages.machineManagers[1]", "duplicate entry"),
                ("spec.managedBootImages.machineManagers[2]", "duplicate entry"),
                ("spec.managedBootImages.machineManagers[3]", "duplicate entry"),
                ("spec.managedBootImages.machineManagers[4]", "duplicate entry"),
                ("spec.managedBootImages.machineManagers[5]", "duplicate entry"),
            ],
        ),
        (
            "one manager per resource and group",
            mcfg(json!({"managedBootImages": {"machineManagers": [
                manager("machinesets", sel(ALL)),
                manager("controlplanemachinesets", sel(ALL)),
                manager("machinesets", sel(r#"{"mode":"None"}"#)),
            ]}})),
            vec![("spec.managedBootImages.machineManagers[2]", "duplicate entry")],
        ),
        (
            "partial selector with mode Partial",
            mcfg(json!({"managedBootImages": {"machineManagers": [manager(
                "machinesets",
                sel(r#"{"mode":"Partial","partial":{"machineResourceSelector":{"matchLabels":{"a":"b"}}}}"#),
            )]}})),
            vec![],
        ),
        (
            "mode Partial without partial",
            mcfg(
                json!({"managedBootImages": {"machineManagers": [manager("machinesets", sel(r#"{"mode":"Partial"}"#))]}}),
            ),
            vec![(
                "spec.managedBootImages.machineManagers[0].selection.partial",
                "partial is required when mode is Partial, and forbidden otherwise",
            )],
        ),
        (
            "partial without mode Partial",
            mcfg(json!({"managedBootImages": {"machineManagers": [manager(
                "machinesets",
                sel(r#"{"mode":"All","partial":{"machineResourceSelector":{}}}"#),
            )]}})),
            vec![("spec.managedBootImages.machineManagers[0].selection.partial", "forbidden otherwise")],
        ),
        (
            "partial needs a selector",
            mcfg(json!({"managedBootImages": {"machineManagers": [manager(
                "machinesets",
                sel(r#"{"mode":"Partial","partial":{}}"#),
            )]}})),
            vec![(
                "spec.managedBootImages.machineManagers[0].selection.partial.machineResourceSelector",
                "is required",
            )],
        ),
        (
            "CPMS All or None",
            mcfg(
                json!({"managedBootImages": {"machineManagers": [manager("controlplanemachinesets", sel(r#"{"mode":"None"}"#))]}}),
            ),
            vec![],
        ),
        (
            "CPMS not Partial",
            mcfg(json!({"managedBootImages": {"machineManagers": [manager(
                "controlplanemachinesets",
                sel(r#"{"mode":"Partial","partial":{"machineResourceSelector":{}}}"#),
            )]}})),
            vec![(
                "spec.managedBootImages.machineManagers[0].selection.mode",
                "Only All or None selection mode is permitted for ControlPlaneMachineSets",
            )],
        ),
        // --- nodeDisruptionPolicy
        (
            "valid file, unit and sshkey policies",
            mcfg(json!({"nodeDisruptionPolicy": {
                "files": [{"path": "/etc/a", "actions": [{"type": "Restart", "restart": {"serviceName": "a.service"}}, {"type": "DaemonReload"}]}],
                "units": [{"name": "kubelet-dependencies.target", "actions": [{"type": "Reload", "reload": {"serviceName": "crio.service"}}]}],
                "sshkey": {"actions": [{"type": "None"}]},
            }})),
            vec![],
        ),
        (
            "fifty files at most",
            mcfg(json!({"nodeDisruptionPolicy": {"files": many_files}})),
            vec![("spec.nodeDisruptionPolicy.files", "at most 50 items")],
        ),
        (
            "file paths are absolute",
            mcfg(ndp_file("etc/a", json!([{"type": "None"}]))),
            vec![("spec.nodeDisruptionPolicy.files[0].path", "must be an absolute path")],
        ),
        (
            "file paths are unique",
            mcfg(json!({"nodeDisruptionPolicy": {"files": [
                {"path": "/etc/a", "actions": [{"type": "None"}]},
                {"path": "/etc/a", "actions": [{"type": "Drain"}]},
            ]}})),
            vec![("spec.nodeDisruptionPolicy.files[1].path", "duplicate value")],
        ),
        (
            "ten actions at most",
            mcfg(ndp_file("/etc/a", Value::Array(many_actions))),
            vec![("spec.nodeDisruptionPolicy.files[0].actions", "at most 10 items")],
        ),
        (
            "Reboot stands alone",
            mcfg(ndp_file("/etc/a", json!([{"type": "Reboot"}, {"type": "Drain"}]))),
            vec![(
                "spec.nodeDisruptionPolicy.files[0].actions",
                "Reboot action can only be specified standalone, as it will override any other actions",
            )],
        ),
        (
            "None stands alone",
            mcfg(json!({"nodeDisruptionPolicy": {"sshkey": {"actions": [{"type": "Drain"}, {"type": "None"}]}}})),
            vec![("spec.nodeDisruptionPolicy.sshkey.actions", "None action can only be specified standalone")],
        ),
        (
            "Reload needs reload",
            mcfg(ndp_file("/etc/a", json!([{"type": "Reload"}]))),
            vec![(
                "spec.nodeDisruptionPolicy.files[0].actions[0].reload",
                "reload is required when type is Reload, and forbidden otherwise",
            )],
        ),
        (
            "restart only with Restart",
            mcfg(ndp_file("/etc/a", json!([{"type": "Drain", "restart": {"serviceName": "a.service"}}]))),
            vec![(
                "spec.nodeDisruptionPolicy.files[0].actions[0].restart",
                "restart is required when type is Restart, and forbidden otherwise",
            )],
        ),
        (
            "service name needs a unit suffix",
            mcfg(ndp_file("/etc/a", json!([{"type": "Restart", "restart": {"serviceName": "crio.foo"}}]))),
            vec![(
                "spec.nodeDisruptionPolicy.files[0].actions[0].restart.serviceName",
                r"must match \.(service|socket|",
            )],
        ),
        (
            "service name characters",
            mcfg(unit("my unit.service")),
            vec![("spec.nodeDisruptionPolicy.units[0].name", r"must match ^[a-zA-Z0-9:._\\-]+\..")],
        ),
        (
            "service name without a dot",
            mcfg(unit("crio")),
            vec![
                ("spec.nodeDisruptionPolicy.units[0].name", r"must match ^[a-zA-Z0-9:._\\-]+\.."),
                ("spec.nodeDisruptionPolicy.units[0].name", r"must match \.(service|"),
            ],
        ),
        (
            "service name length",
            mcfg(unit(&long_service)),
            vec![("spec.nodeDisruptionPolicy.units[0].name", "at most 255 characters")],
        ),
        // --- bootImageSkewEnforcement
        ("skew None", mcfg(skew(json!({"mode": "None"}))), vec![]),
        ("skew mode required", mcfg(skew(json!({}))), vec![("spec.bootImageSkewEnforcement.mode", "is required")]),
        (
            "Manual needs manual",
            mcfg(skew(json!({"mode": "Manual"}))),
            vec![(
                "spec.bootImageSkewEnforcement.manual",
                "manual is required when mode is Manual, and forbidden otherwise",
            )],
        ),
        (
            "manual only with Manual",
            mcfg(skew(json!({"mode": "None", "manual": {"mode": "OCPVersion", "ocpVersion": "4.17.0"}}))),
            vec![("spec.bootImageSkewEnforcement.manual", "forbidden otherwise")],
        ),
        (
            "manual mode required",
            mcfg(skew(json!({"mode": "Manual", "manual": {}}))),
            vec![("spec.bootImageSkewEnforcement.manual.mode", "is required")],
        ),
        (
            "OCPVersion needs ocpVersion, forbids rhcosVersion",
            mcfg(skew(json!({"mode": "Manual", "manual": {"mode": "OCPVersion", "rhcosVersion": "9.6.20251023-0"}}))),
            vec![
                ("spec.bootImageSkewEnforcement.manual.ocpVersion", "ocpVersion is required when mode is OCPVersion"),
                (
                    "spec.bootImageSkewEnforcement.manual.rhcosVersion",
                    "rhcosVersion is required when mode is RHCOSVersion",
                ),
            ],
        ),
        (
            "ocpVersion format",
            mcfg(skew(json!({"mode": "Manual", "manual": {"mode": "OCPVersion", "ocpVersion": "4.x"}}))),
            vec![
                ("spec.bootImageSkewEnforcement.manual.ocpVersion", "must be 5 to 10 characters long"),
                ("spec.bootImageSkewEnforcement.manual.ocpVersion", r"must match ^[0-9]+\.[0-9]+\.[0-9]+$"),
            ],
        ),
        (
            "ocpVersion length",
            mcfg(skew(json!({"mode": "Manual", "manual": {"mode": "OCPVersion", "ocpVersion": "4.100.1000"}}))),
            vec![],
        ),
        (
            "ocpVersion too long",
            mcfg(skew(json!({"mode": "Manual", "manual": {"mode": "OCPVersion", "ocpVersion": "4.100.10000"}}))),
            vec![("spec.bootImageSkewEnforcement.manual.ocpVersion", "must be 5 to 10 characters long")],
        ),
        (
            "legacy rhcosVersion",
            mcfg(skew(
                json!({"mode": "Manual", "manual": {"mode": "RHCOSVersion", "rhcosVersion": "416.94.202510081640-0"}}),
            )),
            vec![],
        ),
        (
            "rhcosVersion format",
            mcfg(skew(
                json!({"mode": "Manual", "manual": {"mode": "RHCOSVersion", "rhcosVersion": "9.6.202510230-10"}}),
            )),
            vec![(
                "spec.bootImageSkewEnforcement.manual.rhcosVersion",
                r"must match ^[0-9]+\.[0-9]+\.([0-9]{8}|[0-9]{12})-[0-9]+$",
            )],
        ),
        // --- irreconcilableValidationOverrides
        (
            "storage overrides",
            mcfg(json!({"irreconcilableValidationOverrides": {"storage": ["Disks", "Raid"]}})),
            vec![],
        ),
        (
            "overrides need storage",
            mcfg(json!({"irreconcilableValidationOverrides": {}})),
            vec![("spec.irreconcilableValidationOverrides.storage", "is required")],
        ),
        (
            "storage not empty",
            mcfg(json!({"irreconcilableValidationOverrides": {"storage": []}})),
            vec![("spec.irreconcilableValidationOverrides.storage", "at least 1 item")],
        ),
        (
            "storage is a set of at most 3",
            mcfg(json!({"irreconcilableValidationOverrides": {"storage": ["Disks", "Raid", "FileSystems", "Disks"]}})),
            vec![
                ("spec.irreconcilableValidationOverrides.storage", "at most 3 items"),
                ("spec.irreconcilableValidationOverrides.storage[3]", "duplicate value"),
            ],
        ),
        // --- Automatic skew enforcement status constrains the spec
        ("Automatic with machinesets All", automatic(json!({}), json!([manager("machinesets", sel(ALL))])), vec![]),
        (
            "Automatic needs a boot image configuration",
            mcfg_named(
                "cluster",
                json!({"spec": {}, "status": {"bootImageSkewEnforcementStatus": {"mode": "Automatic", "automatic": {"ocpVersion": "4.19.0"}}}}),
            ),
            vec![("spec.managedBootImages", "a boot image configuration is required")],
        ),
        (
            "Automatic forbids an empty spec list",
            automatic(json!({"managedBootImages": {"machineManagers": []}}), json!([manager("machinesets", sel(ALL))])),
            vec![("spec.managedBootImages.machineManagers", "must not be an empty list")],
        ),
        (
            "Automatic needs machinesets All in the spec",
            automatic(
                json!({"managedBootImages": {"machineManagers": [manager("machinesets", sel(r#"{"mode":"None"}"#))]}}),
                json!([manager("machinesets", sel(ALL))]),
            ),
            vec![("spec.managedBootImages.machineManagers", "must use selection mode 'All'")],
        ),
        (
            "Automatic needs machinesets All in the status",
            automatic(json!({}), json!([manager("machinesets", sel(r#"{"mode":"None"}"#))])),
            vec![("status.managedBootImagesStatus.machineManagers", "opting in all MachineAPI MachineSets")],
        ),
        // --- MachineConfigPool maxUnavailable
        ("maxUnavailable integer", pool(json!(2)), vec![]),
        ("maxUnavailable zero", pool(json!(0)), vec![]),
        ("maxUnavailable percent", pool(json!("25%")), vec![]),
        ("maxUnavailable negative", pool(json!(-1)), vec![("spec.maxUnavailable", "greater than or equal to 0")]),
        ("maxUnavailable string", pool(json!("2")), vec![("spec.maxUnavailable", "integer or a percentage")]),
        ("maxUnavailable bad percent", pool(json!("-5%")), vec![("spec.maxUnavailable", "integer or a percentage")]),
        // --- MachineOSConfig
        ("MOSC valid", mosc("worker", json!({})), vec![]),
        (
            "MOSC named like its pool",
            mosc("infra", json!({})),
            vec![(
                "spec.machineConfigPool.name",
                "MachineOSConfig name must match the referenced MachineConfigPool name",
            )],
        ),
        (
            "push spec with port and namespaces",
            mosc("worker", json!({"renderedImagePushSpec": "registry.example.com:5000/my_org/sub-ns/os-image:v1.2"})),
            vec![],
        ),
        (
            "push spec to an in-cluster service",
            mosc(
                "worker",
                json!({"renderedImagePushSpec": "image-registry.openshift-image-registry.svc:5000/ns/os:latest"}),
            ),
            vec![],
        ),
        (
            "push spec needs a tag",
            mosc("worker", json!({"renderedImagePushSpec": "quay.io/example/os@sha256:0123"})),
            vec![("spec.renderedImagePushSpec", "host[:port][/namespace]/name format")],
        ),
        (
            "push spec length",
            mosc("worker", json!({"renderedImagePushSpec": format!("quay.io/{}/os:latest", "a".repeat(440))})),
            vec![
                ("spec.renderedImagePushSpec", "must be 1 to 447 characters long"),
                ("spec.renderedImagePushSpec", "host[:port][/namespace]/name format"),
            ],
        ),
        (
            "four containerfiles at most",
            mosc("worker", json!({"containerFile": five_files})),
            vec![
                ("spec.containerFile", "at most 4 items"),
                ("spec.containerFile[1].containerfileArch", "duplicate value"),
                ("spec.containerFile[2].containerfileArch", "duplicate value"),
                ("spec.containerFile[3].containerfileArch", "duplicate value"),
                ("spec.containerFile[4].containerfileArch", "duplicate value"),
            ],
        ),
        (
            "one containerfile per architecture (unset is NoArch)",
            mosc(
                "worker",
                json!({"containerFile": [{"containerfileArch": "NoArch", "content": "a"}, {"content": "b"}, {"containerfileArch": "ARM64", "content": "c"}]}),
            ),
            vec![("spec.containerFile[1].containerfileArch", "duplicate value")],
        ),
        (
            "containerfile content length",
            mosc("worker", json!({"containerFile": [{"content": "x".repeat(4097)}]})),
            vec![("spec.containerFile[0].content", "at most 4096 characters")],
        ),
    ];

    let mut failures = Vec::new();
    for (case, errors, expected) in cases {
        let matches = errors.len() == expected.len()
            && errors
                .iter()
                .zip(&expected)
                .all(|(e, (field, fragment))| e.field == *field && e.message.contains(fragment));
        if !matches {
            let got: Vec<String> = errors.iter().map(ToString::to_string).collect();
            failures.push(format!("{case}:\n  expected {expected:?}\n  got {got:#?}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn display_names_object_field_value_and_rule() {
    let errors = mcfg(skew(json!({"mode": "Manual", "manual": {"mode": "OCPVersion", "ocpVersion": "4.1.x"}})));
    assert_eq!(
        errors.iter().map(ToString::to_string).collect::<Vec<_>>(),
        [
            r#"MachineConfiguration cluster: spec.bootImageSkewEnforcement.manual.ocpVersion "4.1.x": must match ^[0-9]+\.[0-9]+\.[0-9]+$"#
        ]
    );
    let errors = mcfg(ndp_file("/etc/a", json!([{"type": "Reload"}])));
    assert_eq!(
        errors[0].to_string(),
        "MachineConfiguration cluster: spec.nodeDisruptionPolicy.files[0].actions[0].reload: reload is required when type is Reload, and forbidden otherwise"
    );
}

#[test]
fn fixtures_are_valid() {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/machineconfigurations.yaml");
    let text = std::fs::read_to_string(path).unwrap();
    for doc in serde_yaml::Deserializer::from_str(&text) {
        let object: MachineConfiguration = serde::Deserialize::deserialize(doc).unwrap();
        let errors = validate::machine_configuration(&object);
        assert!(errors.is_empty(), "{errors:#?}");
    }
}

fn os_image_stream(name: &str, spec_default: &str, status: Value) -> mco_api::OSImageStream {
    let rest = json!({"spec": {"defaultStream": spec_default}, "status": status});
    object("machineconfiguration.openshift.io/v1", "OSImageStream", name, rest)
}

fn stream_set(name: &str) -> Value {
    let digest = "0".repeat(64);
    json!({"name": name, "osImage": format!("quay.io/os@sha256:{digest}"),
        "osExtensionsImage": format!("quay.io/ext@sha256:{digest}")})
}

#[test]
fn os_image_streams_are_a_singleton_whose_defaults_are_available_streams() {
    let available =
        json!({"availableStreams": [stream_set("rhel-9"), stream_set("rhel-10")], "defaultStream": "rhel-9"});
    assert_eq!(validate::os_image_stream(&os_image_stream("cluster", "rhel-10", available.clone())), []);
    let shown = |errors: Vec<FieldError>| errors.iter().map(ToString::to_string).collect::<Vec<_>>();
    assert_eq!(
        shown(validate::os_image_stream(&os_image_stream("other", "rhel-9", available))),
        [
            "OSImageStream other: metadata.name \"other\": osimagestream is a singleton, .metadata.name must be 'cluster'"
        ]
    );
    let bad = json!({"availableStreams": [stream_set("rhel-9"), stream_set("rhel-9")], "defaultStream": "rhel-8"});
    assert_eq!(
        shown(validate::os_image_stream(&os_image_stream("cluster", "centos-10", bad))),
        [
            "OSImageStream cluster: status.availableStreams[1] \"rhel-9\": Duplicate value",
            "OSImageStream cluster: status.defaultStream \"rhel-8\": defaultStream must reference a stream name from availableStreams",
            "OSImageStream cluster: spec.defaultStream \"centos-10\": spec.defaultStream must reference an existing stream name from status.availableStreams",
        ]
    );
    // Before the operator has filled in the status, any default is accepted.
    let unfilled: mco_api::OSImageStream = object(
        "machineconfiguration.openshift.io/v1",
        "OSImageStream",
        "cluster",
        json!({"spec": {"defaultStream": "rhel-10"}}),
    );
    assert_eq!(validate::os_image_stream(&unfilled), []);
}

#[test]
fn a_pool_names_a_stream_the_cluster_offers() {
    let stream = os_image_stream(
        "cluster",
        "rhel-9",
        json!({"availableStreams": [stream_set("rhel-9")], "defaultStream": "rhel-9"}),
    );
    let pool = |stream_name: Option<&str>| -> MachineConfigPool {
        let spec = match stream_name {
            Some(name) => json!({"osImageStream": {"name": name}}),
            None => json!({}),
        };
        object("machineconfiguration.openshift.io/v1", "MachineConfigPool", "infra", json!({"spec": spec}))
    };
    assert_eq!(validate::pool_os_image_stream(&pool(None), &stream), []);
    assert_eq!(validate::pool_os_image_stream(&pool(Some("rhel-9")), &stream), []);
    let errors = validate::pool_os_image_stream(&pool(Some("rhel-10")), &stream);
    assert_eq!(
        errors.iter().map(ToString::to_string).collect::<Vec<_>>(),
        [
            "MachineConfigPool infra: spec.osImageStream.name \"rhel-10\": The specified osImageStream name must reference a valid stream from the cluster OSImageStream resource"
        ]
    );
}
