//! [`RawJson`]: JSON text carried verbatim through the model.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::ops::Range;

mod canonical;
mod compact;

/// JSON text kept verbatim: unknown fields, tool inputs, opaque blocks.
///
/// An empty string means "nothing" (no unknown fields). For `extra` fields the text is a JSON
/// object whose keys the writer merges back into the object it came from.
#[derive(Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct RawJson(String);

impl RawJson {
    /// Wraps JSON text without checking it. Readers and the plugin boundary use this: the text
    /// came from a parser or from a previous `RawJson`, and writers re-parse it anyway.
    pub fn from_string_unchecked(text: String) -> Self {
        RawJson(text)
    }

    /// Serializes a value. An empty object becomes the empty `RawJson`.
    pub fn from_value(value: &serde_json::Value) -> Self {
        match value {
            serde_json::Value::Object(map) if map.is_empty() => RawJson::default(),
            // The same text as `Value`'s `Display` (serde_json's compact JSON), written without
            // its formatter: readers keep every unknown field and opaque block this way.
            other => {
                let mut out = String::with_capacity(compact::size_hint(other));
                compact::write(other, &mut out);
                RawJson(out)
            }
        }
    }

    /// The `RawJson` of `text`, copied, when `text` is exactly what [`RawJson::from_value`]
    /// writes for the value it parses to (compact, escaped and numbered as serde_json does,
    /// no key twice); `None` otherwise. A reader that holds a value's text as well as the
    /// value skips writing the value back this way (see `canonical.rs` for the rules).
    ///
    /// ```
    /// use condense_model::RawJson;
    /// let line = r#"{"type":"user","uuid":"u1","n":3}"#;
    /// let value: serde_json::Value = serde_json::from_str(line).unwrap();
    /// assert_eq!(RawJson::from_canonical_text(line), Some(RawJson::from_value(&value)));
    /// assert_eq!(RawJson::from_canonical_text(r#"{"type": "user"}"#), None);
    /// ```
    pub fn from_canonical_text(text: &str) -> Option<Self> {
        if text == "{}" {
            // As `from_value` has it: no fields.
            return Some(RawJson::default());
        }
        canonical::is_canonical(text).then(|| RawJson(text.to_string()))
    }

    /// The members of a JSON object text that [`RawJson::from_canonical_text`] would copy: the
    /// span of each key (quotes included) and of its value, in order; `None` for any other
    /// text. A reader that keeps such an object with one member changed can then splice the
    /// text instead of writing the object back.
    pub fn canonical_members(text: &str) -> Option<Vec<(Range<usize>, Range<usize>)>> {
        canonical::object_members(text)
    }

    /// [`RawJson::from_map`] of a map the caller keeps.
    pub fn from_map_ref(map: &serde_json::Map<String, serde_json::Value>) -> Self {
        if map.is_empty() {
            RawJson::default()
        } else {
            let mut out = String::with_capacity(compact::map_size_hint(map));
            compact::write_map(map, &mut out);
            RawJson(out)
        }
    }

    /// Serializes a map of unknown fields; an empty map becomes the empty `RawJson`.
    pub fn from_map(map: serde_json::Map<String, serde_json::Value>) -> Self {
        if map.is_empty() {
            RawJson::default()
        } else {
            RawJson::from_value(&serde_json::Value::Object(map))
        }
    }

    /// Parses the text. The empty `RawJson` parses as an empty object.
    pub fn to_value(&self) -> Result<serde_json::Value, serde_json::Error> {
        if self.0.is_empty() {
            Ok(serde_json::Value::Object(serde_json::Map::new()))
        } else {
            serde_json::from_str(&self.0)
        }
    }

    /// Parses the text as an object of fields (empty for the empty `RawJson`). Anything but an
    /// object is an error: `extra` and `envelope` must be objects.
    pub fn to_map(&self) -> Result<serde_json::Map<String, serde_json::Value>, serde_json::Error> {
        match self.to_value()? {
            serde_json::Value::Object(map) => Ok(map),
            other => Err(serde::de::Error::custom(format!(
                "expected a JSON object of fields, found {}",
                kind_of(&other)
            ))),
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    pub fn into_string(self) -> String {
        self.0
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }
}

impl fmt::Debug for RawJson {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "RawJson({})", self.0)
    }
}

impl fmt::Display for RawJson {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A short name for the kind of a JSON value, for error messages.
pub fn kind_of(value: &serde_json::Value) -> &'static str {
    match value {
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "a boolean",
        serde_json::Value::Number(_) => "a number",
        serde_json::Value::String(_) => "a string",
        serde_json::Value::Array(_) => "an array",
        serde_json::Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_object_is_empty_raw() {
        assert!(RawJson::from_value(&serde_json::json!({})).is_empty());
        assert_eq!(RawJson::default().to_map().map(|m| m.len()).ok(), Some(0));
    }

    #[test]
    fn non_object_extra_is_rejected() {
        let raw = RawJson::from_value(&serde_json::json!([1, 2]));
        assert!(raw.to_map().is_err());
    }
}
