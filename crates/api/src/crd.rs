//! CustomResourceDefinitions generated from the Rust types.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceDefinition, JSONSchemaProps, JSONSchemaPropsOrArray, JSONSchemaPropsOrBool,
};
use kube::CustomResourceExt;
use serde_json::Value;

use crate::{
    ControllerConfig, MachineConfig, MachineConfigPool, MachineConfiguration, MachineOSBuild, MachineOSConfig,
    MachineSet,
};

/// The CRDs of every type of this crate, in a stable order.
pub fn crds() -> Vec<CustomResourceDefinition> {
    vec![
        // Upstream's `spec` is optional for these two: Go always writes one, but a manifest may
        // leave it out.
        spec_optional(MachineConfig::crd()),
        MachineConfigPool::crd(),
        ControllerConfig::crd(),
        MachineOSConfig::crd(),
        MachineOSBuild::crd(),
        MachineConfiguration::crd(),
        spec_optional(MachineSet::crd()),
    ]
    .into_iter()
    .map(tidy)
    .collect()
}

/// [`crds`] as one multi-document YAML stream (`---` before each document).
pub fn crds_yaml() -> String {
    crds()
        .iter()
        .map(|crd| {
            let yaml = serde_yaml::to_string(crd).expect("a CRD always serializes to YAML");
            format!("---\n{yaml}")
        })
        .collect()
}

/// Drops `spec` from the root `required` list (kube-derive always requires it).
fn spec_optional(mut crd: CustomResourceDefinition) -> CustomResourceDefinition {
    for schema in root_schemas(&mut crd) {
        if let Some(required) = schema.required.as_mut() {
            required.retain(|field| field != "spec");
        }
    }
    crd
}

fn tidy(mut crd: CustomResourceDefinition) -> CustomResourceDefinition {
    for schema in root_schemas(&mut crd) {
        tidy_schema(schema);
    }
    crd
}

fn root_schemas(crd: &mut CustomResourceDefinition) -> impl Iterator<Item = &mut JSONSchemaProps> {
    crd.spec.versions.iter_mut().filter_map(|version| version.schema.as_mut()?.open_api_v3_schema.as_mut())
}

/// Removes what schemars adds but upstream's CRDs do not have:
/// * `default`s equal to the type's zero value. They come from `#[serde(default)]`, mean nothing
///   to a Go client (absent and zero are the same there), and would make the API server write
///   fields no client set. A deliberate default (any other value) is kept.
/// * empty `required` lists.
fn tidy_schema(schema: &mut JSONSchemaProps) {
    if schema.default.as_ref().is_some_and(|d| is_zero(&d.0)) {
        schema.default = None;
    }
    if schema.required.as_ref().is_some_and(Vec::is_empty) {
        schema.required = None;
    }
    for property in schema.properties.iter_mut().flat_map(|p| p.values_mut()) {
        tidy_schema(property);
    }
    match schema.items.as_mut() {
        Some(JSONSchemaPropsOrArray::Schema(items)) => tidy_schema(items),
        Some(JSONSchemaPropsOrArray::Schemas(items)) => items.iter_mut().for_each(tidy_schema),
        None => {}
    }
    if let Some(JSONSchemaPropsOrBool::Schema(additional)) = schema.additional_properties.as_mut() {
        tidy_schema(additional);
    }
}

fn is_zero(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::Bool(b) => !b,
        Value::Number(n) => n.as_f64() == Some(0.0),
        Value::String(s) => s.is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty(),
    }
}
