//! Serde helpers for `null` and absent values, which Go and serde treat differently.

use serde::{Deserialize, Deserializer};
use serde_json::Value;

/// Deserializes a present field, even `null`, as `Some`: an absent field (via `#[serde(default)]`)
/// stays `None`, so `field: null` is written back as `null` and not dropped.
pub(crate) fn keep_null<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(deserializer).map(Some)
}

/// Makes an absent or `null` `spec` deserialize as the type's `Default`, like Go's zero value.
///
/// kube-derive's root struct requires `spec`, but upstream's MachineConfig and MachineSet specs are
/// optional: one spec-less object in a list would otherwise fail the whole list. The type derives
/// serde with `#[serde(remote = "Self")]`, which turns the derived code into inherent functions;
/// these trait impls wrap them. Serde asks a missing field's type to deserialize an `Option`,
/// which is what the wrapper does.
macro_rules! optional_spec {
    ($spec:ty) => {
        impl<'de> serde::Deserialize<'de> for $spec {
            fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                // Paths name the inherent (derived) functions, which take precedence over the
                // trait methods being defined.
                struct Derived($spec);
                impl<'de> serde::Deserialize<'de> for Derived {
                    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                        <$spec>::deserialize(deserializer).map(Derived)
                    }
                }
                let spec = <Option<Derived> as serde::Deserialize>::deserialize(deserializer)?;
                Ok(spec.map(|derived| derived.0).unwrap_or_default())
            }
        }

        impl serde::Serialize for $spec {
            fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                <$spec>::serialize(self, serializer)
            }
        }
    };
}
pub(crate) use optional_spec;
