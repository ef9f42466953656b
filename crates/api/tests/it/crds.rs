//! The generated CRDs match upstream's names, scopes and subresources, and their schemas are
//! structural (what a real kube-apiserver requires of a v1 CRD).

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use mco_api::{crds, crds_yaml};
use serde::Deserialize;
use serde_json::Value;

fn crd(kind: &str) -> CustomResourceDefinition {
    crds().into_iter().find(|crd| crd.spec.names.kind == kind).unwrap_or_else(|| panic!("no CRD for {kind}"))
}

#[test]
fn names_scopes_and_subresources_match_upstream() {
    struct Expected {
        kind: &'static str,
        group: &'static str,
        version: &'static str,
        plural: &'static str,
        short_names: &'static [&'static str],
        scope: &'static str,
        status: bool,
        scale: bool,
    }
    const MCFG: &str = "machineconfiguration.openshift.io";
    let table = [
        Expected {
            kind: "MachineConfig",
            group: MCFG,
            version: "v1",
            plural: "machineconfigs",
            short_names: &["mc"],
            scope: "Cluster",
            status: false,
            scale: false,
        },
        Expected {
            kind: "MachineConfigPool",
            group: MCFG,
            version: "v1",
            plural: "machineconfigpools",
            short_names: &["mcp"],
            scope: "Cluster",
            status: true,
            scale: false,
        },
        Expected {
            kind: "ControllerConfig",
            group: MCFG,
            version: "v1",
            plural: "controllerconfigs",
            short_names: &[],
            scope: "Cluster",
            status: true,
            scale: false,
        },
        Expected {
            kind: "MachineOSConfig",
            group: MCFG,
            version: "v1",
            plural: "machineosconfigs",
            short_names: &[],
            scope: "Cluster",
            status: true,
            scale: false,
        },
        Expected {
            kind: "MachineOSBuild",
            group: MCFG,
            version: "v1",
            plural: "machineosbuilds",
            short_names: &[],
            scope: "Cluster",
            status: true,
            scale: false,
        },
        Expected {
            kind: "MachineConfiguration",
            group: "operator.openshift.io",
            version: "v1",
            plural: "machineconfigurations",
            short_names: &[],
            scope: "Cluster",
            status: true,
            scale: false,
        },
        Expected {
            kind: "KubeletConfig",
            group: MCFG,
            version: "v1",
            plural: "kubeletconfigs",
            short_names: &[],
            scope: "Cluster",
            status: true,
            scale: false,
        },
        Expected {
            kind: "ContainerRuntimeConfig",
            group: MCFG,
            version: "v1",
            plural: "containerruntimeconfigs",
            short_names: &["ctrcfg"],
            scope: "Cluster",
            status: true,
            scale: false,
        },
        Expected {
            kind: "PinnedImageSet",
            group: MCFG,
            version: "v1",
            plural: "pinnedimagesets",
            short_names: &[],
            scope: "Cluster",
            status: false,
            scale: false,
        },
        Expected {
            kind: "OSImageStream",
            group: MCFG,
            version: "v1",
            plural: "osimagestreams",
            short_names: &[],
            scope: "Cluster",
            status: true,
            scale: false,
        },
        Expected {
            kind: "MachineConfigNode",
            group: MCFG,
            version: "v1",
            plural: "machineconfignodes",
            short_names: &[],
            scope: "Cluster",
            status: true,
            scale: false,
        },
        Expected {
            kind: "MachineSet",
            group: "machine.openshift.io",
            version: "v1beta1",
            plural: "machinesets",
            short_names: &[],
            scope: "Namespaced",
            status: true,
            scale: true,
        },
        Expected {
            kind: "ControlPlaneMachineSet",
            group: "machine.openshift.io",
            version: "v1",
            plural: "controlplanemachinesets",
            short_names: &[],
            scope: "Namespaced",
            status: true,
            scale: true,
        },
        // The cluster's image configuration (openshift/api's names).
        Expected {
            kind: "Image",
            group: "config.openshift.io",
            version: "v1",
            plural: "images",
            short_names: &[],
            scope: "Cluster",
            status: true,
            scale: false,
        },
        Expected {
            kind: "ImageDigestMirrorSet",
            group: "config.openshift.io",
            version: "v1",
            plural: "imagedigestmirrorsets",
            short_names: &["idms"],
            scope: "Cluster",
            status: true,
            scale: false,
        },
        Expected {
            kind: "ImageTagMirrorSet",
            group: "config.openshift.io",
            version: "v1",
            plural: "imagetagmirrorsets",
            short_names: &["itms"],
            scope: "Cluster",
            status: true,
            scale: false,
        },
        Expected {
            kind: "ImageContentSourcePolicy",
            group: "operator.openshift.io",
            version: "v1alpha1",
            plural: "imagecontentsourcepolicies",
            short_names: &[],
            scope: "Cluster",
            status: true,
            scale: false,
        },
    ];
    assert_eq!(crds().len(), table.len());
    for e in table {
        let crd = crd(e.kind);
        assert_eq!(crd.metadata.name.as_deref(), Some(format!("{}.{}", e.plural, e.group).as_str()));
        assert_eq!(crd.spec.group, e.group, "{}", e.kind);
        assert_eq!(crd.spec.names.plural, e.plural, "{}", e.kind);
        assert_eq!(crd.spec.names.singular.as_deref(), Some(e.kind.to_lowercase().as_str()));
        assert_eq!(crd.spec.names.list_kind, Some(format!("{}List", e.kind)));
        let short_names = crd.spec.names.short_names.clone().unwrap_or_default();
        assert_eq!(short_names, e.short_names, "{}", e.kind);
        assert_eq!(crd.spec.scope, e.scope, "{}", e.kind);
        let [version] = &crd.spec.versions[..] else { panic!("{}: one version expected", e.kind) };
        assert_eq!(version.name, e.version, "{}", e.kind);
        assert!(version.served && version.storage, "{}", e.kind);
        let subresources = version.subresources.as_ref();
        assert_eq!(subresources.and_then(|s| s.status.as_ref()).is_some(), e.status, "{}", e.kind);
        assert_eq!(subresources.and_then(|s| s.scale.as_ref()).is_some(), e.scale, "{}", e.kind);
    }
    let scale = crd("MachineSet").spec.versions[0].subresources.clone().unwrap().scale.unwrap();
    assert_eq!(scale.spec_replicas_path, ".spec.replicas");
    assert_eq!(scale.status_replicas_path, ".status.replicas");
    assert_eq!(scale.label_selector_path.as_deref(), Some(".status.labelSelector"));
}

fn columns(kind: &str) -> Vec<(String, String, String)> {
    crd(kind).spec.versions[0]
        .additional_printer_columns
        .clone()
        .unwrap_or_default()
        .into_iter()
        .map(|c| (c.name, c.json_path, c.type_))
        .collect()
}

#[test]
fn printer_columns_match_upstream() {
    let expected_pool = [
        ("Config", ".status.configuration.name", "string"),
        ("Updated", r#".status.conditions[?(@.type=="Updated")].status"#, "string"),
        ("Updating", r#".status.conditions[?(@.type=="Updating")].status"#, "string"),
        ("Degraded", r#".status.conditions[?(@.type=="Degraded")].status"#, "string"),
        ("MachineCount", ".status.machineCount", "number"),
        ("ReadyMachineCount", ".status.readyMachineCount", "number"),
        ("UpdatedMachineCount", ".status.updatedMachineCount", "number"),
        ("DegradedMachineCount", ".status.degradedMachineCount", "number"),
        ("Age", ".metadata.creationTimestamp", "date"),
    ];
    let expected_mc = [
        (
            "GeneratedByController",
            r".metadata.annotations.machineconfiguration\.openshift\.io/generated-by-controller-version",
            "string",
        ),
        ("IgnitionVersion", ".spec.config.ignition.version", "string"),
        ("Age", ".metadata.creationTimestamp", "date"),
    ];
    let owned = |cols: &[(&str, &str, &str)]| -> Vec<(String, String, String)> {
        cols.iter().map(|(a, b, c)| (a.to_string(), b.to_string(), c.to_string())).collect()
    };
    assert_eq!(columns("MachineConfigPool"), owned(&expected_pool));
    assert_eq!(columns("MachineConfig"), owned(&expected_mc));
}

#[test]
fn machine_config_node_printer_columns_match_upstream() {
    let condition = |name: &str, condition: &str| -> (String, String, Option<i32>) {
        (name.into(), format!(r#".status.conditions[?(@.type=="{condition}")].status"#), Some(1))
    };
    let mut expected: Vec<(String, String, Option<i32>)> = vec![
        ("PoolName".into(), ".spec.pool.name".into(), None),
        ("DesiredConfig".into(), ".spec.configVersion.desired".into(), None),
        ("CurrentConfig".into(), ".status.configVersion.current".into(), None),
        ("Updated".into(), r#".status.conditions[?(@.type=="Updated")].status"#.into(), None),
        ("Age".into(), ".metadata.creationTimestamp".into(), None),
    ];
    expected.extend([
        condition("UpdatePrepared", "UpdatePrepared"),
        condition("UpdateExecuted", "UpdateExecuted"),
        condition("UpdatePostActionComplete", "UpdatePostActionComplete"),
        condition("UpdateComplete", "UpdateComplete"),
        condition("Resumed", "Resumed"),
        condition("UpdatedFilesAndOS", "AppliedFilesAndOS"),
        condition("CordonedNode", "Cordoned"),
        condition("DrainedNode", "Drained"),
        condition("RebootedNode", "RebootedNode"),
        condition("UncordonedNode", "Uncordoned"),
    ]);
    let columns = crd("MachineConfigNode").spec.versions[0].additional_printer_columns.clone().unwrap();
    let actual: Vec<_> = columns.iter().map(|c| (c.name.clone(), c.json_path.clone(), c.priority)).collect();
    assert_eq!(actual, expected);
    let types: Vec<_> = columns.iter().map(|c| c.type_.as_str()).collect();
    assert_eq!(types[4], "date");
    assert!(types.iter().enumerate().all(|(i, t)| i == 4 || *t == "string"), "{types:?}");
}

fn schema(kind: &str) -> Value {
    let crd = crd(kind);
    let schema = crd.spec.versions[0].schema.clone().unwrap().open_api_v3_schema.unwrap();
    serde_json::to_value(schema).unwrap()
}

#[test]
fn spec_is_required_only_where_upstream_requires_it() {
    for (kind, required) in [
        ("MachineConfig", false),
        ("MachineConfigPool", true),
        ("ControllerConfig", true),
        ("MachineOSConfig", true),
        ("MachineOSBuild", true),
        ("MachineConfiguration", true),
        ("MachineSet", false),
        ("KubeletConfig", true),
        ("ContainerRuntimeConfig", true),
        ("PinnedImageSet", true),
        ("OSImageStream", true),
        ("MachineConfigNode", true),
    ] {
        let root = schema(kind);
        let listed = root["required"].as_array().is_some_and(|r| r.contains(&"spec".into()));
        assert_eq!(listed, required, "{kind}");
    }
}

#[test]
fn free_form_fields_preserve_unknown_fields() {
    let mc = schema("MachineConfig");
    let config = &mc["properties"]["spec"]["properties"]["config"];
    assert_eq!(config["type"], "object");
    assert_eq!(config["x-kubernetes-preserve-unknown-fields"], true);

    let ms = schema("MachineSet");
    let machine = &ms["properties"]["spec"]["properties"]["template"]["properties"]["spec"];
    assert_eq!(machine["x-kubernetes-preserve-unknown-fields"], true);
    let value = &machine["properties"]["providerSpec"]["properties"]["value"];
    assert_eq!(value["x-kubernetes-preserve-unknown-fields"], true);

    let cc = schema("ControllerConfig");
    let infra = &cc["properties"]["spec"]["properties"]["infra"];
    assert_eq!(infra["x-kubernetes-embedded-resource"], true);

    let pool = schema("MachineConfigPool");
    let max_unavailable = &pool["properties"]["spec"]["properties"]["maxUnavailable"];
    assert_eq!(max_unavailable["x-kubernetes-int-or-string"], true);
}

/// Collects the violations of the structural-schema rules of apiextensions v1 below `schema`.
fn structural_violations(path: &str, schema: &Value, out: &mut Vec<String>) {
    let Some(node) = schema.as_object() else {
        out.push(format!("{path}: schema is not an object"));
        return;
    };
    let flag = |key: &str| node.get(key) == Some(&Value::Bool(true));
    let preserve = flag("x-kubernetes-preserve-unknown-fields");
    let int_or_string = flag("x-kubernetes-int-or-string");
    if !node.contains_key("type") && !preserve && !int_or_string {
        out.push(format!("{path}: no type"));
    }
    if int_or_string && node.contains_key("type") {
        out.push(format!("{path}: int-or-string with a type"));
    }
    for key in ["$ref", "anyOf", "oneOf", "allOf", "not", "definitions", "$schema"] {
        // The one `anyOf` a structural schema may have: an int-or-string's two types.
        let int_or_string_types = key == "anyOf"
            && int_or_string
            && node[key] == serde_json::json!([{"type": "integer"}, {"type": "string"}]);
        if node.contains_key(key) && !int_or_string_types {
            out.push(format!("{path}: uses {key}"));
        }
    }
    if node.contains_key("properties") && node.contains_key("additionalProperties") {
        out.push(format!("{path}: properties and additionalProperties"));
    }
    if node.get("additionalProperties") == Some(&Value::Bool(false)) {
        out.push(format!("{path}: additionalProperties false"));
    }
    if flag("x-kubernetes-embedded-resource") && node.get("type") != Some(&"object".into()) {
        out.push(format!("{path}: embedded resource not of type object"));
    }
    if let Some(enum_values) = node.get("enum") {
        let type_ = node.get("type").and_then(Value::as_str);
        if type_ != Some("string") || !enum_values.as_array().unwrap().iter().all(Value::is_string) {
            out.push(format!("{path}: enum of a non-string type"));
        }
    }
    if let Some(properties) = node.get("properties").and_then(Value::as_object) {
        for (name, property) in properties {
            structural_violations(&format!("{path}.{name}"), property, out);
        }
    }
    if let Some(items) = node.get("items") {
        structural_violations(&format!("{path}[]"), items, out);
        if node.get("x-kubernetes-list-type") == Some(&"map".into()) {
            let required = items["required"].as_array().cloned().unwrap_or_default();
            for key in node["x-kubernetes-list-map-keys"].as_array().unwrap() {
                let property = &items["properties"][key.as_str().unwrap()];
                if !required.contains(key) && property.get("default").is_none() {
                    out.push(format!("{path}: list-map key {key} neither required nor defaulted"));
                }
                if property.get("nullable") == Some(&Value::Bool(true)) {
                    out.push(format!("{path}: list-map key {key} is nullable"));
                }
                if !matches!(property["type"].as_str(), Some("string" | "integer" | "boolean")) {
                    out.push(format!("{path}: list-map key {key} is not a scalar"));
                }
            }
        }
    } else if node.get("type") == Some(&"array".into()) {
        out.push(format!("{path}: array without items"));
    }
    if let Some(additional) = node.get("additionalProperties").filter(|a| a.is_object()) {
        structural_violations(&format!("{path}{{}}"), additional, out);
    }
}

#[test]
fn schemas_are_structural() {
    for crd in crds() {
        let kind = crd.spec.names.kind.clone();
        let mut violations = Vec::new();
        structural_violations(&kind, &schema(&kind), &mut violations);
        assert!(violations.is_empty(), "{kind}:\n{}", violations.join("\n"));
    }
}

#[test]
fn zero_value_defaults_are_not_in_the_schema() {
    // A default would make the API server write fields no client set.
    let mc = schema("MachineConfig");
    for field in ["osImageURL", "fips", "kernelType"] {
        assert!(mc["properties"]["spec"]["properties"][field].get("default").is_none(), "{field}");
    }
    // Deliberate upstream default: a list-map key that is not required needs one.
    let mosc = schema("MachineOSConfig");
    let arch = &mosc["properties"]["spec"]["properties"]["containerFile"]["items"]["properties"]["containerfileArch"];
    assert_eq!(arch["default"], "NoArch");
}

#[test]
fn yaml_stream_holds_every_crd() {
    let yaml = crds_yaml(&crds());
    assert!(yaml.starts_with("---\n"));
    let parsed: Vec<CustomResourceDefinition> = serde_yaml::Deserializer::from_str(&yaml)
        .map(|doc| CustomResourceDefinition::deserialize(doc).unwrap())
        .collect();
    assert_eq!(parsed, crds());
}
