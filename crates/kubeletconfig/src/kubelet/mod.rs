//! The kubelet's `KubeletConfiguration` as the original's Go code holds it: read from JSON or
//! YAML, merged with mergo, written as YAML by the Kubernetes serializer.

mod duration;
mod schema;
mod value;

use std::collections::BTreeMap;

use serde_json::Value;

use schema::{KUBELET_CONFIGURATION, Kind};
use value::Go;

const KIND: Kind = Kind::Struct(&KUBELET_CONFIGURATION);

/// A `kubelet.config.k8s.io/v1beta1` `KubeletConfiguration`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct KubeletConfiguration(Go);

impl KubeletConfiguration {
    /// `DecodeKubeletConfig` of JSON bytes (a KubeletConfig's `spec.kubeletConfig`), with its
    /// YAML retry; the error is Go's.
    pub(crate) fn from_json(value: &Value) -> Result<Self, String> {
        value::decode_json_or_yaml(value, KIND).map(Self)
    }

    /// `DecodeKubeletConfig` of a YAML document (the pool's template), read as
    /// [`mco_goser::yaml_documents`] reads it.
    pub(crate) fn from_yaml(document: &Value) -> Result<Self, String> {
        value::decode_yaml(document, KIND).map(Self)
    }

    /// What `EncodeKubeletConfig` writes for `runtime.ContentTypeYAML`: the JSON with `kind` and
    /// `apiVersion` set, through sigs.k8s.io/yaml.
    pub(crate) fn to_yaml(&self) -> String {
        let mut typed = self.clone();
        typed.set_str("kind", "KubeletConfiguration");
        typed.set_str("apiVersion", "kubelet.config.k8s.io/v1beta1");
        mco_goser::ghodss_yaml(&value::encode(&typed.0, KIND)).expect("a kubelet config always converts to YAML")
    }

    /// `mergo.Merge(self, other, mergo.WithOverride)`.
    pub(crate) fn merge(&mut self, other: &KubeletConfiguration) {
        value::merge(&mut self.0, &other.0, KIND);
    }

    fn field(&self, name: &str) -> &Go {
        let Go::Struct(fields) = &self.0 else { unreachable!("a KubeletConfiguration is a struct") };
        &fields[index(name)]
    }

    fn field_mut(&mut self, name: &str) -> &mut Go {
        let Go::Struct(fields) = &mut self.0 else { unreachable!("a KubeletConfiguration is a struct") };
        &mut fields[index(name)]
    }

    /// A string field (`""` when unset).
    pub(crate) fn str(&self, name: &str) -> &str {
        match self.field(name) {
            Go::Str(s) => s,
            other => unreachable!("{name} is not a string: {other:?}"),
        }
    }

    pub(crate) fn set_str(&mut self, name: &str, value: &str) {
        *self.field_mut(name) = Go::Str(value.to_string());
    }

    /// A `[]string` field (`None` when nil).
    pub(crate) fn strings(&self, name: &str) -> Option<Vec<String>> {
        match self.field(name) {
            Go::Slice(items) => items.as_ref().map(|items| items.iter().map(go_string).collect()),
            other => unreachable!("{name} is not a list: {other:?}"),
        }
    }

    pub(crate) fn set_strings(&mut self, name: &str, values: Vec<String>) {
        *self.field_mut(name) = Go::Slice(Some(values.into_iter().map(Go::Str).collect()));
    }

    /// A `map[string]string` or `map[string]bool` field, values as Go's `%v` prints them
    /// (`None` when nil).
    pub(crate) fn map(&self, name: &str) -> Option<BTreeMap<String, String>> {
        match self.field(name) {
            Go::Map(map) => map.as_ref().map(|map| map.iter().map(|(k, v)| (k.clone(), go_string(v))).collect()),
            other => unreachable!("{name} is not a map: {other:?}"),
        }
    }

    /// Removes `key` from a map field.
    pub(crate) fn remove_key(&mut self, name: &str, key: &str) {
        if let Go::Map(Some(map)) = self.field_mut(name) {
            map.remove(key);
        }
    }

    /// Sets every feature gate of `gates` (`featureGates` is a `map[string]bool`).
    pub(crate) fn set_feature_gates(&mut self, gates: &BTreeMap<String, bool>) {
        let Go::Map(map) = self.field_mut("featureGates") else { unreachable!("featureGates is a map") };
        map.get_or_insert_with(BTreeMap::new).extend(gates.iter().map(|(k, v)| (k.clone(), Go::Bool(*v))));
    }

    /// Makes `featureGates` nil.
    pub(crate) fn clear_feature_gates(&mut self) {
        *self.field_mut("featureGates") = Go::Map(None);
    }

    /// `featureGates` (`None` when nil).
    pub(crate) fn feature_gates(&self) -> Option<BTreeMap<String, bool>> {
        match self.field("featureGates") {
            Go::Map(map) => map.as_ref().map(|m| m.iter().map(|(k, v)| (k.clone(), v == &Go::Bool(true))).collect()),
            other => unreachable!("featureGates is not a map: {other:?}"),
        }
    }

    /// A `*bool` field as Go's `%v` of the value prints it (`None` when nil).
    pub(crate) fn bool_ptr(&self, name: &str) -> Option<bool> {
        match self.field(name) {
            Go::Ptr(Some(b)) => Some(**b == Go::Bool(true)),
            Go::Ptr(None) => None,
            other => unreachable!("{name} is not a *bool: {other:?}"),
        }
    }

    pub(crate) fn set_bool(&mut self, name: &str, value: bool) {
        *self.field_mut(name) = Go::Bool(value);
    }

    /// `memorySwap.swapBehavior`.
    pub(crate) fn swap_behavior(&self) -> &str {
        match self.field("memorySwap") {
            Go::Struct(fields) => go_str(&fields[0]),
            other => unreachable!("memorySwap is not a struct: {other:?}"),
        }
    }

    /// Sets a `metav1.Duration` field, in nanoseconds.
    pub(crate) fn set_duration(&mut self, name: &str, nanos: i64) {
        *self.field_mut(name) = Go::Duration(nanos);
    }
}

fn index(name: &str) -> usize {
    KUBELET_CONFIGURATION
        .fields
        .iter()
        .position(|f| f.json == name)
        .unwrap_or_else(|| panic!("KubeletConfiguration has no field {name}"))
}

fn go_str(value: &Go) -> &str {
    match value {
        Go::Str(s) => s,
        other => unreachable!("not a string: {other:?}"),
    }
}

/// Go's `%v` of a scalar.
fn go_string(value: &Go) -> String {
    match value {
        Go::Str(s) => s.clone(),
        Go::Bool(b) => b.to_string(),
        other => unreachable!("not a scalar: {other:?}"),
    }
}
