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

/// A `resource.Quantity` as upstream's CRDs describe it: an integer or a string in quantity
/// syntax (the `anyOf` of an int-or-string is added to every CRD afterwards).
pub(crate) fn quantity(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "pattern": r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$",
        "x-kubernetes-int-or-string": true,
    })
}

/// An OCI image pull spec by digest (upstream's `ImageDigestFormat`):
/// `host[:port][/namespace]/name@sha256:<64 hex>`, 1 to 447 characters.
pub(crate) fn image_digest(_: &mut SchemaGenerator) -> Schema {
    digest_pull_spec(
        r"([a-zA-Z0-9-]+\\.)+[a-zA-Z0-9-]+",
        "the OCI Image name should follow the host[:port][/namespace]/name format, resembling a valid URL without the scheme",
    )
}

/// A pull spec by digest whose host matches the regular expression `host` (`message` when not).
pub(crate) fn digest_pull_spec(host: &str, message: &str) -> Schema {
    json_schema!({
        "type": "string",
        "minLength": 1,
        "maxLength": 447,
        "x-kubernetes-validations": [
            {
                "rule": "(self.split('@').size() == 2 && self.split('@')[1].matches('^sha256:[a-f0-9]{64}$'))",
                "message": "the OCI Image reference must end with a valid '@sha256:<digest>' suffix, where '<digest>' is 64 characters long",
            },
            {
                "rule": format!(r"(self.split('@')[0].matches('^{host}(:[0-9]{{2,5}})?/([a-zA-Z0-9-_]{{0,61}}/)?[a-zA-Z0-9-_.]*?$'))"),
                "message": message,
            },
        ],
    })
}

/// An RFC 1123 subdomain of 1 to 253 characters, checked with the API server's CEL format library.
pub(crate) fn dns1123_subdomain(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "string",
        "minLength": 1,
        "maxLength": 253,
        "x-kubernetes-validations": [{
            "rule": "!format.dns1123Subdomain().validate(self).hasValue()",
            "message": "a RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character.",
        }],
    })
}

/// An RFC 1123 subdomain of at most 253 characters as upstream's MachineConfigNode writes it: no
/// minimum length (the CEL rule refuses an empty name) and "a lowercase RFC 1123 subdomain" in the
/// message, where [`dns1123_subdomain`] has `minLength: 1` and "a RFC 1123 subdomain".
pub(crate) fn lowercase_dns1123_subdomain(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "string",
        "maxLength": 253,
        "x-kubernetes-validations": [{
            "rule": "!format.dns1123Subdomain().validate(self).hasValue()",
            "message": "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character.",
        }],
    })
}

/// A list of `metav1.Condition`s as upstream's CRDs describe it: a list map keyed by `type`, each
/// condition with the bounds, patterns and enum of the kubebuilder markers on `metav1.Condition`
/// (k8s-openapi's schema has only the types). The list's own bounds are the field's
/// (`#[schemars(length(...))]`).
pub(crate) fn conditions(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "array",
        "items": {
            "type": "object",
            "description": "Condition contains details for one aspect of the current state of this API Resource.",
            "properties": {
                "lastTransitionTime": {
                    "type": "string",
                    "format": "date-time",
                    "description": "lastTransitionTime is the last time the condition transitioned from one status to another.",
                },
                "message": {
                    "type": "string",
                    "maxLength": 32768,
                    "description": "message is a human readable message indicating details about the transition. This may be an empty string.",
                },
                "observedGeneration": {
                    "type": "integer",
                    "format": "int64",
                    "minimum": 0,
                    "description": "observedGeneration represents the .metadata.generation that the condition was set based upon.",
                },
                "reason": {
                    "type": "string",
                    "minLength": 1,
                    "maxLength": 1024,
                    "pattern": "^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$",
                    "description": "reason contains a programmatic identifier indicating the reason for the condition's last transition, in CamelCase.",
                },
                "status": {
                    "type": "string",
                    "enum": ["True", "False", "Unknown"],
                    "description": "status of the condition, one of True, False, Unknown.",
                },
                "type": {
                    "type": "string",
                    "maxLength": 316,
                    "pattern": r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$",
                    "description": "type of condition in CamelCase or in foo.example.com/CamelCase.",
                },
            },
            "required": ["lastTransitionTime", "message", "reason", "status", "type"],
        },
        "x-kubernetes-list-type": "map",
        "x-kubernetes-list-map-keys": ["type"],
    })
}

/// A `metav1.LabelSelector` as upstream's CRDs describe it (atomic map and lists; k8s-openapi's
/// schema lacks those markers).
pub(crate) fn label_selector(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "object",
        "description": "A label query over a set of resources. An empty or null selector matches nothing here.",
        "properties": {
            "matchExpressions": {
                "type": "array",
                "description": "Label selector requirements, ANDed.",
                "items": {
                    "type": "object",
                    "description": "A key, an operator (In, NotIn, Exists, DoesNotExist) and values.",
                    "properties": {
                        "key": {"type": "string", "description": "The label key."},
                        "operator": {"type": "string", "description": "In, NotIn, Exists or DoesNotExist."},
                        "values": {
                            "type": "array",
                            "description": "Values for In and NotIn; empty for Exists and DoesNotExist.",
                            "items": {"type": "string"},
                            "x-kubernetes-list-type": "atomic",
                        },
                    },
                    "required": ["key", "operator"],
                },
                "x-kubernetes-list-type": "atomic",
            },
            "matchLabels": {
                "type": "object",
                "description": "{key: value} pairs, each equivalent to an In requirement with one value.",
                "additionalProperties": {"type": "string"},
            },
        },
        "x-kubernetes-map-type": "atomic",
    })
}
