//! Small text helpers for stage reports and markers, so every stage words numbers alike.
//!
//! ```
//! use condense_abi::text::{plural, thousands};
//! assert_eq!(thousands(1_234_567), "1,234,567");
//! assert_eq!(plural(1, "tool result", "tool results"), "1 tool result");
//! assert_eq!(plural(12_000, "file", "files"), "12,000 files");
//! ```

/// `n` with thousands separators: `1234567` → `1,234,567`.
pub fn thousands(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// `n` and the noun that fits it: `plural(3, "file", "files")` → `3 files`.
pub fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{} {}", thousands(n), if n == 1 { one } else { many })
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
}
