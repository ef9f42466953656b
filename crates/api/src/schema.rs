//! Hand-written OpenAPI schemas for fields whose Rust type has no structural schema of its own.
//!
//! A Kubernetes CRD schema must be *structural*: every node has a `type`, or says
//! `x-kubernetes-preserve-unknown-fields: true` (or `x-kubernetes-int-or-string: true`). schemars
//! emits `true` (anything) for a `serde_json::Value`, which the API server rejects, so every
//! free-form field points at one of these functions with `#[schemars(schema_with = ...)]`.

use schemars::{Schema, SchemaGenerator, json_schema};

/// A JSON object of any shape, kept verbatim (e.g. an Ignition config, a providerSpec).
pub(crate) fn preserve_unknown_object(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "object",
        "x-kubernetes-preserve-unknown-fields": true,
    })
}

/// Like [`preserve_unknown_object`], and `null` is a valid value (Go `+nullable` RawExtension).
pub(crate) fn nullable_preserve_unknown_object(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "object",
        "nullable": true,
        "x-kubernetes-preserve-unknown-fields": true,
    })
}

/// A whole Kubernetes object embedded in a field (apiVersion, kind, metadata and anything else),
/// as upstream marks ControllerConfig's `infra` and `dns` (`+kubebuilder:validation:EmbeddedResource`).
pub(crate) fn nullable_embedded_resource(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "object",
        "nullable": true,
        "x-kubernetes-embedded-resource": true,
        "x-kubernetes-preserve-unknown-fields": true,
    })
}

/// Base64-encoded bytes (Go `[]byte`).
pub(crate) fn bytes(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "string",
        "format": "byte",
    })
}

/// Base64-encoded bytes that may be `null` (a nil Go `[]byte`).
pub(crate) fn nullable_bytes(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "string",
        "format": "byte",
        "nullable": true,
    })
}
