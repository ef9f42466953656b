//! `mco crds` against upstream's CRD files (`tests/fixtures/upstream-crds`, from openshift/api; the
//! README there names the commit), path by path: every schema node's type, format, enum,
//! required fields, default, bounds, pattern, `x-kubernetes-*` extensions and CEL rules, plus the
//! names, scope, labels, versions, subresources and printer columns. Descriptions and titles are
//! not compared.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::{Map, Value};

/// Every schema keyword compared, i.e. all of them but `description` and the ones that hold
/// subschemas (`properties`, `items`, `additionalProperties`), which are walked into instead.
const FACETS: &[&str] = &[
    "type",
    "format",
    "enum",
    "required",
    "default",
    "nullable",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "minLength",
    "maxLength",
    "minItems",
    "maxItems",
    "minProperties",
    "maxProperties",
    "pattern",
    "anyOf",
    "x-kubernetes-preserve-unknown-fields",
    "x-kubernetes-int-or-string",
    "x-kubernetes-embedded-resource",
    "x-kubernetes-list-type",
    "x-kubernetes-list-map-keys",
    "x-kubernetes-map-type",
    "x-kubernetes-validations",
];

fn upstream(file: &str) -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/upstream-crds").join(file);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_yaml::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn ours(name: &str) -> Value {
    let crd = mco_api::crds()
        .into_iter()
        .find(|crd| crd.metadata.name.as_deref() == Some(name))
        .unwrap_or_else(|| panic!("mco crds has no {name}"));
    serde_json::to_value(crd).unwrap()
}

/// The schema as `path -> keyword -> value`; `.name` is a property, `[]` the items, `{}` the
/// additional properties.
fn flatten(path: &str, schema: &Value, out: &mut BTreeMap<String, Map<String, Value>>) {
    let node = schema.as_object().unwrap_or_else(|| panic!("{path}: not an object"));
    let mut facets: Map<String, Value> =
        FACETS.iter().filter_map(|f| node.get(*f).map(|v| (f.to_string(), v.clone()))).collect();
    if let Some(Value::Array(required)) = facets.get_mut("required") {
        required.sort_by_key(|r| r.to_string());
    }
    // A bound is a number: `10` and `10.0` are the same bound.
    for bound in ["minimum", "maximum"] {
        if let Some(n) = facets.get(bound).and_then(Value::as_f64) {
            facets.insert(bound.into(), n.into());
        }
    }
    for key in node.keys() {
        let known = FACETS.contains(&key.as_str())
            || matches!(key.as_str(), "description" | "title" | "properties" | "items" | "additionalProperties");
        assert!(known, "{path}: keyword {key} is not compared; add it to FACETS");
    }
    out.insert(path.to_string(), facets);
    for (name, property) in node.get("properties").and_then(Value::as_object).into_iter().flatten() {
        flatten(&format!("{path}.{name}"), property, out);
    }
    if let Some(items) = node.get("items") {
        flatten(&format!("{path}[]"), items, out);
    }
    match node.get("additionalProperties") {
        Some(additional @ Value::Object(_)) => flatten(&format!("{path}{{}}"), additional, out),
        Some(other) => {
            out.get_mut(path).unwrap().insert("additionalProperties".into(), other.clone());
        }
        None => {}
    }
}

/// What is compared outside the schema, per version.
fn version_facts(version: &Value) -> Value {
    let columns: Vec<Value> = version["additionalPrinterColumns"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| {
            let mut c = c.clone();
            c.as_object_mut().unwrap().remove("description");
            c
        })
        .collect();
    serde_json::json!({
        "served": version["served"],
        "storage": version["storage"],
        "deprecated": version.get("deprecated"),
        "subresources": version.get("subresources"),
        "additionalPrinterColumns": columns,
    })
}

/// Every difference between upstream's CRD and ours, one line each.
fn differences(upstream: &Value, ours: &Value) -> Vec<String> {
    let mut out = Vec::new();
    let same = |out: &mut Vec<String>, what: &str, a: &Value, b: &Value| {
        if a != b {
            out.push(format!("{what}: upstream {a} ours {b}"));
        }
    };
    same(&mut out, "metadata.labels", &upstream["metadata"]["labels"], &ours["metadata"]["labels"]);
    for key in ["group", "scope", "names"] {
        same(&mut out, key, &upstream["spec"][key], &ours["spec"][key]);
    }
    let versions = |crd: &Value| -> BTreeMap<String, Value> {
        crd["spec"]["versions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| (v["name"].as_str().unwrap().into(), v.clone()))
            .collect()
    };
    let (up_versions, our_versions) = (versions(upstream), versions(ours));
    same(
        &mut out,
        "versions",
        &Value::from(up_versions.keys().cloned().collect::<Vec<_>>()),
        &Value::from(our_versions.keys().cloned().collect::<Vec<_>>()),
    );
    for (name, up) in &up_versions {
        let Some(our) = our_versions.get(name) else { continue };
        same(&mut out, name, &version_facts(up), &version_facts(our));
        out.extend(schema_differences(name, up, our, None));
    }
    out
}

/// The differences of one version's schemas: every facet, or only `facet` (then a path that is
/// on one side only counts when it has that facet).
fn schema_differences(version: &str, upstream: &Value, ours: &Value, facet: Option<&str>) -> Vec<String> {
    let mut out = Vec::new();
    let (mut a, mut b) = (BTreeMap::new(), BTreeMap::new());
    flatten("", &upstream["schema"]["openAPIV3Schema"], &mut a);
    flatten("", &ours["schema"]["openAPIV3Schema"], &mut b);
    let compared = |facets: &Map<String, Value>| -> Map<String, Value> {
        facets
            .iter()
            .filter(|(k, _)| facet.is_none_or(|f| f == k.as_str()))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    };
    for path in a.keys().chain(b.keys()).collect::<std::collections::BTreeSet<_>>() {
        match (a.get(path).map(compared), b.get(path).map(compared)) {
            (Some(x), Some(y)) => {
                for facet in x.keys().chain(y.keys()).collect::<std::collections::BTreeSet<_>>() {
                    let (x, y) = (x.get(facet), y.get(facet));
                    if x != y {
                        let show = |v: Option<&Value>| v.map_or("absent".to_string(), Value::to_string);
                        out.push(format!("{version} {path} {facet}: upstream {} ours {}", show(x), show(y)));
                    }
                }
            }
            (Some(x), None) if facet.is_none() || !x.is_empty() => out.push(format!("{version} {path}: only upstream")),
            (None, Some(y)) if facet.is_none() || !y.is_empty() => out.push(format!("{version} {path}: only ours")),
            _ => {}
        }
    }
    out
}

fn assert_matches_upstream(file: &str) {
    let upstream = upstream(file);
    let name = upstream["metadata"]["name"].as_str().unwrap().to_string();
    let diff = differences(&upstream, &ours(&name));
    assert!(diff.is_empty(), "{name} differs from upstream's {file}:\n{}", diff.join("\n"));
}

#[test]
fn kubeletconfig_matches_upstream() {
    assert_matches_upstream("kubeletconfigs-Default.crd.yaml");
}

#[test]
fn containerruntimeconfig_matches_upstream() {
    assert_matches_upstream("containerruntimeconfigs-Default.crd.yaml");
}

#[test]
fn pinnedimageset_matches_upstream() {
    assert_matches_upstream("pinnedimagesets.crd.yaml");
}

#[test]
fn osimagestream_matches_upstream() {
    assert_matches_upstream("osimagestreams.crd.yaml");
}

#[test]
fn machineconfignode_matches_upstream() {
    assert_matches_upstream("machineconfignodes-Default.crd.yaml");
}

/// The kinds mco does not yet match path by path (see the fixtures' README) have upstream's enums:
/// every path with an enum on either side, in every version both serve.
#[test]
fn older_kinds_enums_match_upstream() {
    for file in ["machineconfigpools-SelfManagedHA.crd.yaml", "machineosbuilds.crd.yaml", "machineosconfigs.crd.yaml"] {
        let upstream = upstream(file);
        let name = upstream["metadata"]["name"].as_str().unwrap();
        let ours = ours(name);
        let mut diff = Vec::new();
        for up in upstream["spec"]["versions"].as_array().unwrap() {
            let served = ours["spec"]["versions"].as_array().unwrap().iter().find(|v| v["name"] == up["name"]);
            let our = served.unwrap_or_else(|| panic!("{name}: mco serves no {}", up["name"]));
            diff.extend(schema_differences(up["name"].as_str().unwrap(), up, our, Some("enum")));
        }
        assert!(diff.is_empty(), "{name}'s enums differ from upstream's {file}:\n{}", diff.join("\n"));
    }
}

/// The comparison itself finds what it should.
#[test]
fn differences_are_found() {
    let upstream = upstream("pinnedimagesets.crd.yaml");
    assert!(differences(&upstream, &upstream).is_empty());
    let mut changed = upstream.clone();
    let spec = &mut changed["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"];
    spec["properties"]["pinnedImages"]["maxItems"] = 400.into();
    spec["properties"]["pinnedImages"]["items"]["properties"]["name"]["x-kubernetes-validations"][0]["rule"] =
        "true".into();
    spec["properties"]["extra"] = serde_json::json!({"type": "string"});
    spec["properties"]["pinnedImages"]["description"] = "not compared".into();
    let diff = differences(&upstream, &changed);
    assert_eq!(diff.len(), 3, "{diff:#?}");
    assert!(diff[0].starts_with("v1 .spec.extra: only ours"), "{diff:#?}");
    assert!(diff[1].starts_with("v1 .spec.pinnedImages maxItems: upstream 500 ours 400"), "{diff:#?}");
    assert!(diff[2].starts_with("v1 .spec.pinnedImages[].name x-kubernetes-validations"), "{diff:#?}");
    // Enums only: a changed enum and an enum on a path of one side are found, nothing else.
    let mut changed = upstream.clone();
    let spec = &mut changed["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"];
    spec["properties"]["pinnedImages"]["maxItems"] = 400.into();
    spec["properties"]["extra"] = serde_json::json!({"type": "string"});
    spec["properties"]["kind"] = serde_json::json!({"type": "string", "enum": ["A"]});
    spec["properties"]["pinnedImages"]["items"]["properties"]["name"]["enum"] = serde_json::json!(["x"]);
    let (up, ours) = (&upstream["spec"]["versions"][0], &changed["spec"]["versions"][0]);
    let diff = schema_differences("v1", up, ours, Some("enum"));
    assert_eq!(
        diff,
        ["v1 .spec.kind: only ours", r#"v1 .spec.pinnedImages[].name enum: upstream absent ours ["x"]"#],
        "{diff:#?}"
    );
}
