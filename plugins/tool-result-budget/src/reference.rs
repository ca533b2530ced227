//! The reference text that replaces a persisted tool result, and its small helpers.

pub use condense_text::{thousands, utf8_prefix};

/// Every reference starts with this; a result whose text starts with it is never persisted.
pub const MARKER: &str = "[condense: tool result persisted — ";

/// Whether `text` is (starts like) a reference this stage wrote.
pub fn is_reference(text: &str) -> bool {
    text.starts_with(MARKER)
}

/// The text that stands in for a persisted result:
///
/// ```text
/// [condense: tool result persisted — 81,234 chars, key <key>]
/// Preview (first 2,000 bytes):
/// <preview>
/// [... 79,234 more chars; full output in the condense store under key <key>]
/// ```
///
/// `original_chars` is the char count of `original`; the preview is its first `preview_bytes`
/// bytes cut back to a character boundary, and the byte count shown is the preview's real
/// length. With an empty preview the two middle lines are left out.
pub fn reference_text(
    original: &str,
    original_chars: usize,
    key: &str,
    preview_bytes: usize,
) -> String {
    let preview = utf8_prefix(original, preview_bytes);
    let rest = original_chars.saturating_sub(preview.chars().count());
    let head = format!("{MARKER}{} chars, key {key}]\n", thousands(original_chars));
    let preview_part = if preview.is_empty() {
        String::new()
    } else {
        format!(
            "Preview (first {} bytes):\n{preview}\n",
            thousands(preview.len())
        )
    };
    let tail = format!(
        "[... {} more chars; full output in the condense store under key {key}]",
        thousands(rest)
    );
    format!("{head}{preview_part}{tail}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_at_2000_bytes_of_three_byte_text_stops_at_1998() {
        let text = "日本".repeat(1_000);
        let p = utf8_prefix(&text, 2_000);
        assert_eq!(p.len(), 1_998);
        assert_eq!(p.chars().count(), 666);
    }

    #[test]
    fn reference_layout() {
        let original = "é".repeat(10);
        let r = reference_text(&original, 10, "k1", 5);
        assert_eq!(
            r,
            "[condense: tool result persisted — 10 chars, key k1]\nPreview (first 4 bytes):\néé\n\
             [... 8 more chars; full output in the condense store under key k1]"
        );
        assert!(is_reference(&r));
        let bare = reference_text(&original, 10, "k1", 0);
        assert_eq!(
            bare,
            "[condense: tool result persisted — 10 chars, key k1]\n\
             [... 10 more chars; full output in the condense store under key k1]"
        );
    }
}
