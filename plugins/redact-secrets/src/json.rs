//! Redacting inside the string literals of JSON text (tool inputs, `extra` fields, envelopes)
//! without touching anything else: every other byte stays as it was, so key order, spacing and number spellings survive,
//! and the result is valid JSON whenever the input was.
//!
//! Each string literal is decoded, redacted, and when it changed, encoded again (minimal
//! escapes, so never longer than the original literal for the same text) and put back in place.

use serde::de::IgnoredAny;

/// Whether `raw` is valid JSON.
pub fn is_json(raw: &str) -> bool {
    serde_json::from_str::<IgnoredAny>(raw).is_ok()
}

/// Applies `redact(value, key)` to every string literal of the valid JSON text `raw` (object
/// keys too, with `key = None`; a value directly under an object key gets that key). Returns
/// the new text, or `None` when nothing changed.
pub fn redact_literals(
    raw: &str,
    redact: &mut dyn FnMut(&str, Option<&str>) -> Option<String>,
) -> Result<Option<String>, String> {
    let bytes = raw.as_bytes();
    let mut out = String::new();
    let mut copied = 0;
    let mut last_key: Option<String> = None;
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] != b'"' {
            i += 1;
            continue;
        }
        let end = literal_end(bytes, i).ok_or_else(|| "unterminated JSON string".to_string())?;
        let literal = &raw[i..=end];
        let text: String =
            serde_json::from_str(literal).map_err(|e| format!("invalid JSON string: {e}"))?;
        let is_key = next_non_space(bytes, end + 1) == Some(b':');
        let key = if is_key {
            None
        } else if prev_non_space(bytes, i) == Some(b':') {
            last_key.as_deref()
        } else {
            None
        };
        if let Some(new) = redact(&text, key) {
            let encoded = serde_json::to_string(&new)
                .map_err(|e| format!("cannot encode a redacted JSON string: {e}"))?;
            out.push_str(&raw[copied..i]);
            out.push_str(&encoded);
            copied = end + 1;
        }
        if is_key {
            last_key = Some(text);
        }
        i = end + 1;
    }
    if copied == 0 {
        return Ok(None);
    }
    out.push_str(&raw[copied..]);
    if !is_json(&out) {
        return Err("redacting broke the JSON (a bug: please report)".to_string());
    }
    Ok(Some(out))
}

/// Index of the closing quote of the string literal opening at `start`.
fn literal_end(bytes: &[u8], start: usize) -> Option<usize> {
    let mut k = start + 1;
    while k < bytes.len() {
        match bytes[k] {
            b'\\' => k += 2,
            b'"' => return Some(k),
            _ => k += 1,
        }
    }
    None
}

fn next_non_space(bytes: &[u8], from: usize) -> Option<u8> {
    bytes[from.min(bytes.len())..]
        .iter()
        .copied()
        .find(|b| !b.is_ascii_whitespace())
}

fn prev_non_space(bytes: &[u8], before: usize) -> Option<u8> {
    bytes[..before]
        .iter()
        .rev()
        .copied()
        .find(|b| !b.is_ascii_whitespace())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn upper_secret(s: &str, _key: Option<&str>) -> Option<String> {
        s.contains("SECRET").then(|| s.replace("SECRET", "[X]"))
    }

    #[test]
    fn only_changed_literals_are_rewritten() {
        let raw = "{ \"a\" : \"keep \\u00e9\",\n  \"b\": [1.0e3, \"SECRET \\\"q\\\"\\n\"] }";
        let out = redact_literals(raw, &mut upper_secret).unwrap().unwrap();
        assert_eq!(
            out,
            "{ \"a\" : \"keep \\u00e9\",\n  \"b\": [1.0e3, \"[X] \\\"q\\\"\\n\"] }"
        );
        assert!(is_json(&out));
    }

    #[test]
    fn values_get_their_key_and_keys_get_none() {
        let raw = r#"{"k1": "v1", "k2": {"k3": "v3"}, "arr": ["x"]}"#;
        let mut seen = Vec::new();
        let mut f = |s: &str, key: Option<&str>| {
            seen.push((s.to_string(), key.map(str::to_string)));
            None
        };
        assert_eq!(redact_literals(raw, &mut f).unwrap(), None);
        let seen: Vec<(&str, Option<&str>)> = seen
            .iter()
            .map(|(s, k)| (s.as_str(), k.as_deref()))
            .collect();
        assert_eq!(
            seen,
            vec![
                ("k1", None),
                ("v1", Some("k1")),
                ("k2", None),
                ("k3", None),
                ("v3", Some("k3")),
                ("arr", None),
                ("x", None),
            ]
        );
    }
}
