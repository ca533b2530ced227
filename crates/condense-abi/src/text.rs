//! Small text helpers for stage reports and markers, so every stage words numbers alike and
//! cuts text the same way.
//!
//! ```
//! use condense_abi::text::{plural, thousands};
//! assert_eq!(thousands(1_234_567), "1,234,567");
//! assert_eq!(plural(1, "tool result", "tool results"), "1 tool result");
//! assert_eq!(plural(12_000, "file", "files"), "12,000 files");
//! ```

/// `n` with thousands separators: `1234567` → `1,234,567`.
pub use condense_model::render::thousands;

/// `n` and the noun that fits it: `plural(3, "file", "files")` → `3 files`.
pub fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{} {}", thousands(n), if n == 1 { one } else { many })
}

/// The longest prefix of `text` of at most `max_bytes` bytes that ends on a character boundary
/// (a character is never split).
pub fn utf8_prefix(text: &str, max_bytes: usize) -> &str {
    if max_bytes >= text.len() {
        return text;
    }
    let mut end = max_bytes;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// The longest suffix of `text` of at most `max_bytes` bytes that starts on a character
/// boundary.
pub fn utf8_suffix(text: &str, max_bytes: usize) -> &str {
    if max_bytes >= text.len() {
        return text;
    }
    let mut start = text.len() - max_bytes;
    while !text.is_char_boundary(start) {
        start += 1;
    }
    &text[start..]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn separators_fall_every_three_digits() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1_000), "1,000");
        assert_eq!(thousands(12_345_678), "12,345,678");
    }

    #[test]
    fn cuts_never_split_a_character() {
        let s = "aé日";
        assert_eq!(utf8_prefix(s, 2), "a");
        assert_eq!(utf8_prefix(s, 3), "aé");
        assert_eq!(utf8_prefix(s, 99), s);
        assert_eq!(utf8_suffix(s, 2), "");
        assert_eq!(utf8_suffix(s, 4), "日");
        assert_eq!(utf8_suffix(s, 5), "é日");
    }
}
