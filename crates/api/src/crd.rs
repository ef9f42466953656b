//! CustomResourceDefinitions generated from the Rust types.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceDefinition, JSONSchemaProps, JSONSchemaPropsOrArray, JSONSchemaPropsOrBool, ValidationRule,
};
use kube::CustomResourceExt;
use serde_json::Value;

use crate::image_config::{Image, ImageContentSourcePolicy, ImageDigestMirrorSet, ImageTagMirrorSet};
use crate::machineconfiguration::{
    CONTAINER_RUNTIME_CONFIG_SCHEMA, KUBELET_CONFIG_SCHEMA, MACHINE_CONFIG_NODE_SCHEMA, OS_IMAGE_STREAM_SCHEMA,
};
use crate::{
    ContainerRuntimeConfig, ControlPlaneMachineSet, ControllerConfig, KubeletConfig, MachineConfig, MachineConfigNode,
    MachineConfigPool, MachineConfiguration, MachineOSBuild, MachineOSConfig, MachineSet, OSImageStream,
    PinnedImageSet,
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
        ControlPlaneMachineSet::crd(),
        KUBELET_CONFIG_SCHEMA.apply(KubeletConfig::crd()),
        CONTAINER_RUNTIME_CONFIG_SCHEMA.apply(ContainerRuntimeConfig::crd()),
        UpstreamSchema::default().apply(PinnedImageSet::crd()),
        OS_IMAGE_STREAM_SCHEMA.apply(OSImageStream::crd()),
        MACHINE_CONFIG_NODE_SCHEMA.apply(MachineConfigNode::crd()),
        // The cluster's image configuration (OpenShift's kinds), for clusters that do not serve it.
        Image::crd(),
        ImageDigestMirrorSet::crd(),
        ImageTagMirrorSet::crd(),
        ImageContentSourcePolicy::crd(),
    ]
    .into_iter()
    .map(tidy)
    .collect()
}

/// `crds` as one multi-document YAML stream (`---` before each document).
pub fn crds_yaml(crds: &[CustomResourceDefinition]) -> String {
    crds.iter()
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

/// What a kind's schema needs beyond its types to be upstream's, path by path. kube-derive makes
/// every `Option` field `nullable`; upstream's CRDs are nullable only where the Go type says
/// `+nullable`, so for the kinds this is applied to every other `nullable` is dropped.
#[derive(Default)]
pub(crate) struct UpstreamSchema {
    /// The nullable fields: property names joined by `.`, `[]` for a list's items
    /// (`status.conditions[].lastTransitionTime`).
    pub nullable: &'static [&'static str],
    /// CEL rules (rule, message) on the object itself, which kube-derive only puts on fields.
    pub root_rules: &'static [(&'static str, &'static str)],
}

impl UpstreamSchema {
    fn apply(&self, mut crd: CustomResourceDefinition) -> CustomResourceDefinition {
        let kind = crd.spec.names.kind.clone();
        for schema in root_schemas(&mut crd) {
            not_nullable(schema);
            for path in self.nullable {
                let node = path.split('.').try_fold(&mut *schema, |node, step| {
                    let (name, items) = step.strip_suffix("[]").map_or((step, false), |name| (name, true));
                    let node = node.properties.as_mut()?.get_mut(name)?;
                    if !items {
                        return Some(node);
                    }
                    match node.items.as_mut() {
                        Some(JSONSchemaPropsOrArray::Schema(items)) => Some(&mut **items),
                        _ => None,
                    }
                });
                node.unwrap_or_else(|| panic!("{kind}: no schema at {path}")).nullable = Some(true);
            }
            let rules = self.root_rules.iter().map(|(rule, message)| ValidationRule {
                rule: rule.to_string(),
                message: Some(message.to_string()),
                ..Default::default()
            });
            if !self.root_rules.is_empty() {
                schema.x_kubernetes_validations.get_or_insert_with(Vec::new).extend(rules);
            }
        }
        crd
    }
}

fn not_nullable(schema: &mut JSONSchemaProps) {
    schema.nullable = None;
    for_each_subschema(schema, not_nullable);
}

fn for_each_subschema(schema: &mut JSONSchemaProps, mut f: impl FnMut(&mut JSONSchemaProps)) {
    for property in schema.properties.iter_mut().flat_map(|p| p.values_mut()) {
        f(property);
    }
    match schema.items.as_mut() {
        Some(JSONSchemaPropsOrArray::Schema(items)) => f(items),
        Some(JSONSchemaPropsOrArray::Schemas(items)) => items.iter_mut().for_each(&mut f),
        None => {}
    }
    if let Some(JSONSchemaPropsOrBool::Schema(additional)) = schema.additional_properties.as_mut() {
        f(additional);
    }
}

/// What every CRD gets, as controller-gen writes it upstream: `listKind`, the `apiVersion`, `kind`
/// and `metadata` properties of the root, and [`tidy_schema`].
fn tidy(mut crd: CustomResourceDefinition) -> CustomResourceDefinition {
    crd.spec.names.list_kind = Some(format!("{}List", crd.spec.names.kind));
    for schema in root_schemas(&mut crd) {
        let string = JSONSchemaProps { type_: Some("string".into()), ..Default::default() };
        let object = JSONSchemaProps { type_: Some("object".into()), ..Default::default() };
        let properties = schema.properties.get_or_insert_with(Default::default);
        properties.insert("apiVersion".into(), string.clone());
        properties.insert("kind".into(), string);
        properties.insert("metadata".into(), object);
        tidy_schema(schema);
    }
    crd
}

fn root_schemas(crd: &mut CustomResourceDefinition) -> impl Iterator<Item = &mut JSONSchemaProps> {
    crd.spec.versions.iter_mut().filter_map(|version| version.schema.as_mut()?.open_api_v3_schema.as_mut())
}

/// Removes what schemars adds but upstream's CRDs do not have, and adds what controller-gen adds:
/// * `default`s equal to the type's zero value are removed. They come from `#[serde(default)]`,
///   mean nothing to a Go client (absent and zero are the same there), and would make the API
///   server write fields no client set. A deliberate default (any other value) is kept.
/// * empty `required` lists are removed.
/// * int-or-string fields get `anyOf: [{type: integer}, {type: string}]` (kube-derive's rewriter
///   empties the alternatives of an `anyOf`).
fn tidy_schema(schema: &mut JSONSchemaProps) {
    if schema.default.as_ref().is_some_and(|d| is_zero(&d.0)) {
        schema.default = None;
    }
    if schema.required.as_ref().is_some_and(Vec::is_empty) {
        schema.required = None;
    }
    if schema.x_kubernetes_int_or_string == Some(true) {
        let of_type = |t: &str| JSONSchemaProps { type_: Some(t.into()), ..Default::default() };
        schema.any_of = Some(vec![of_type("integer"), of_type("string")]);
    }
    for_each_subschema(schema, tidy_schema);
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
