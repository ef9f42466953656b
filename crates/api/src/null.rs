//! Serde helper for free-form fields where an explicit `null` must survive a round trip.

use serde::{Deserialize, Deserializer};
use serde_json::Value;

/// Deserializes a present field, even `null`, as `Some`: an absent field (via `#[serde(default)]`)
/// stays `None`, so `field: null` is written back as `null` and not dropped.
pub(crate) fn keep_null<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(deserializer).map(Some)
}
