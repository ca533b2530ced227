//! [`RawJson`]: JSON text carried verbatim through the model.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;
use std::hash::{Hash, Hasher};
use std::ops::Range;
use std::sync::Arc;

mod canonical;
mod compact;

/// JSON text kept verbatim: unknown fields, tool inputs, opaque blocks.
///
/// An empty string means "nothing" (no unknown fields). For `extra` fields the text is a JSON
/// object whose keys the writer merges back into the object it came from.
///
/// The text is a string of its own, or a piece of a larger text it shares
/// ([`RawJson::shared_slice`]): a reader that keeps whole lines of its input as they were (a
/// Claude Code event's envelope is its line) takes them from the input's text without a copy.
/// Either way it is the same text: equal, hashed and serialized as its `&str`.
#[derive(Clone, Default)]
pub struct RawJson(Repr);

#[derive(Clone)]
enum Repr {
    Owned(String),
    /// `range` of `text` (on character boundaries, checked when made).
    Shared {
        text: Arc<String>,
        range: Range<usize>,
    },
}

impl Default for Repr {
    fn default() -> Self {
        Repr::Owned(String::new())
    }
}

impl RawJson {
    /// Wraps JSON text without checking it. Readers and the plugin boundary use this: the text
    /// came from a parser or from a previous `RawJson`, and writers re-parse it anyway.
    pub fn from_string_unchecked(text: String) -> Self {
        RawJson(Repr::Owned(text))
    }

    /// `slice`, a piece of `text`, without checking it is JSON (as
    /// [`from_string_unchecked`](Self::from_string_unchecked)) and without copying it: the
    /// `RawJson` keeps `text` alive. A `slice` that is not a piece of `text` is copied.
    ///
    /// ```
    /// use condense_model::RawJson;
    /// use std::sync::Arc;
    /// let text = Arc::new(String::from(r#"[{"a":1},{"b":2}]"#));
    /// let second = RawJson::shared_slice(&text, &text[9..16]);
    /// assert_eq!(second.as_str(), r#"{"b":2}"#);
    /// assert_eq!(second, RawJson::from_string_unchecked(r#"{"b":2}"#.into()));
    /// // Not a piece of `text`: copied.
    /// let other = RawJson::shared_slice(&text, r#"{"c":3}"#);
    /// assert_eq!(other.as_str(), r#"{"c":3}"#);
    /// ```
    pub fn shared_slice(text: &Arc<String>, slice: &str) -> Self {
        match condense_text::range_in(text, slice) {
            Some(range) => RawJson(Repr::Shared {
                text: Arc::clone(text),
                range,
            }),
            None => RawJson::from_string_unchecked(slice.to_string()),
        }
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
                RawJson::from_string_unchecked(out)
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
        (text == "{}" || canonical::is_canonical(text))
            .then(|| RawJson::from_canonical_text_unchecked(text))
    }

    /// [`RawJson::from_canonical_text`] of a text the caller knows to be canonical (a piece
    /// of a text the check accepted is: every value inside a canonical text is canonical),
    /// without checking it again.
    pub fn from_canonical_text_unchecked(text: &str) -> Self {
        if text == "{}" {
            // As `from_value` has it: no fields.
            return RawJson::default();
        }
        RawJson::from_string_unchecked(text.to_string())
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
            RawJson::from_string_unchecked(out)
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
        if self.is_empty() {
            Ok(serde_json::Value::Object(serde_json::Map::new()))
        } else {
            serde_json::from_str(self.as_str())
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
        match &self.0 {
            Repr::Owned(text) => text,
            // The range was checked against the text when the `RawJson` was made.
            Repr::Shared { text, range } => text.get(range.clone()).unwrap_or_default(),
        }
    }

    pub fn into_string(self) -> String {
        match self.0 {
            Repr::Owned(text) => text,
            Repr::Shared { .. } => self.as_str().to_string(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.as_str().is_empty()
    }

    pub fn len(&self) -> usize {
        self.as_str().len()
    }
}

impl PartialEq for RawJson {
    fn eq(&self, other: &Self) -> bool {
        self.as_str() == other.as_str()
    }
}

impl Eq for RawJson {}

/// As its `&str` (so as the `String` it was before it could be shared: fingerprints of the
/// model, kept in stores, do not change).
impl Hash for RawJson {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.as_str().hash(state);
    }
}

impl Serialize for RawJson {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for RawJson {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        String::deserialize(deserializer).map(RawJson::from_string_unchecked)
    }
}

impl fmt::Debug for RawJson {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "RawJson({})", self.as_str())
    }
}

impl fmt::Display for RawJson {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
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

    /// A piece of a shared text is the text it holds, to everything that looks at it: equal,
    /// hashed (so fingerprinted, and fingerprints are kept in stores) and serialized as a
    /// string of its own.
    #[test]
    fn a_shared_piece_is_its_text() {
        let text = Arc::new(String::from("{\"a\":\"é\"}\n{\"b\":[1,2]}\n"));
        let piece = RawJson::shared_slice(&text, &text[11..22]);
        let owned = RawJson::from_string_unchecked(r#"{"b":[1,2]}"#.to_string());
        assert!(matches!(piece.0, Repr::Shared { .. }));
        assert_eq!(piece, owned);
        assert_eq!(piece.as_str(), owned.as_str());
        assert_eq!(piece.len(), 11);
        let print = |r: &RawJson| crate::fingerprint::fingerprint(r);
        assert_eq!(print(&piece), print(&owned));
        assert_eq!(
            serde_json::to_string(&piece).unwrap(),
            serde_json::to_string(&owned).unwrap()
        );
        let back: RawJson = serde_json::from_str(&serde_json::to_string(&piece).unwrap()).unwrap();
        assert_eq!(back, owned);
        assert_eq!(piece.to_map().unwrap(), owned.to_map().unwrap());
        assert_eq!(piece.clone().into_string(), owned.clone().into_string());
        assert_eq!(format!("{piece} {piece:?}"), format!("{owned} {owned:?}"));
        // The text lives as long as a piece of it.
        drop(text);
        assert_eq!(piece.as_str(), r#"{"b":[1,2]}"#);
        // Not a piece of the text (another string, or not on its bytes): a copy.
        let text = Arc::new(String::from(r#"{"a":1}"#));
        let elsewhere = String::from(r#"{"a":1}"#);
        let copied = RawJson::shared_slice(&text, &elsewhere);
        assert!(matches!(copied.0, Repr::Owned(_)));
        assert_eq!(copied.as_str(), r#"{"a":1}"#);
    }
}
