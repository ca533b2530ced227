//! serde_json's compact JSON text of a [`Value`], byte for byte, written straight into a
//! `String`.
//!
//! Readers keep every opaque block and unknown field as its compact JSON ([`super::RawJson`]),
//! and the counts, hashes and snapshots are of exactly that text, so it must not change. Going
//! through serde_json's serializer costs a formatter call per string piece and a byte-by-byte
//! escape table walk; here a string's runs that need no escape are copied whole (found by
//! [`crate::escape::quoted_pieces`], sixteen bytes at a time), which makes a transcript's opaque blocks several times cheaper to keep.

use crate::escape::Piece;
use serde_json::{Map, Value};

/// Appends `value` as serde_json's compact JSON (`Value`'s `Display`) to `out`.
pub(super) fn write(value: &Value, out: &mut String) {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(true) => out.push_str("true"),
        Value::Bool(false) => out.push_str("false"),
        // Rare, and spelled by serde_json itself (integers, ryu's shortest floats).
        Value::Number(n) => out.push_str(&n.to_string()),
        Value::String(s) => string(s, out),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write(item, out);
            }
            out.push(']');
        }
        Value::Object(map) => write_map(map, out),
    }
}

/// Appends an object's compact JSON to `out` (as [`write`](fn@write) of the object).
pub(super) fn write_map(map: &Map<String, Value>, out: &mut String) {
    out.push('{');
    for (i, (key, item)) in map.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        string(key, out);
        out.push(':');
        write(item, out);
    }
    out.push('}');
}

/// About the length of `value`'s compact JSON, a little more when its strings hold a few
/// escapes: sizing the text once saves reallocating (and copying) it as it grows.
pub(super) fn size_hint(value: &Value) -> usize {
    match value {
        Value::Null | Value::Bool(_) => 5,
        Value::Number(_) => 20,
        // The quotes, and one escape in 32 bytes (a line end every few dozen).
        Value::String(s) => s.len() + s.len() / 32 + 2,
        Value::Array(items) => 2 + items.iter().map(|v| size_hint(v) + 1).sum::<usize>(),
        Value::Object(map) => map_size_hint(map),
    }
}

/// [`size_hint`] of an object.
pub(super) fn map_size_hint(map: &Map<String, Value>) -> usize {
    2 + map
        .iter()
        .map(|(k, v)| k.len() + 4 + size_hint(v))
        .sum::<usize>()
}

/// A JSON string as serde_json escapes it ([`crate::escape::quoted_pieces`]).
fn string(s: &str, out: &mut String) {
    let pieces = crate::escape::quoted_pieces(s, |piece| {
        out.push_str(match piece {
            Piece::Run(run) => run,
            Piece::Spelled(spelled) => spelled,
        });
        Ok::<(), std::convert::Infallible>(())
    });
    // Infallible: pushing onto a String cannot fail.
    let Ok(()) = pieces;
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;

    fn same_as_serde(value: &Value) {
        let mut out = String::new();
        write(value, &mut out);
        assert_eq!(out, value.to_string());
    }

    #[test]
    fn every_byte_is_escaped_as_serde_json_escapes_it() {
        let all: String = (0u32..0x300).filter_map(char::from_u32).collect();
        same_as_serde(&Value::String(all.clone()));
        // Each character alone and at every offset of an 8-byte word, so the word scan meets it
        // in every lane.
        for c in (0u32..0x100).filter_map(char::from_u32) {
            for pad in 0..9 {
                let s = format!("{}{c}{}", "a".repeat(pad), "é".repeat(pad % 3));
                same_as_serde(&json!({ s.clone(): [s] }));
            }
        }
        same_as_serde(&Value::String("\u{7f}\u{80}\u{10ffff}日本語\"\\/".into()));
    }

    #[test]
    fn values_are_written_as_serde_json_writes_them() {
        same_as_serde(&json!(null));
        same_as_serde(&json!({}));
        same_as_serde(&json!([]));
        same_as_serde(
            &json!({"b": [1, -2, 3.5, 1e300, -0.0, u64::MAX, i64::MIN, 0.1],
            "a": {"t": true, "f": false, "n": null, "e": "", "x": [[], {}]}}),
        );
        let parsed: Value =
            serde_json::from_str(r#"{"z":1,"a":[1E2,-0,12345678901234567890,1.5e-7]}"#).unwrap();
        same_as_serde(&parsed);
    }
}
