//! Turning names from transcripts into safe single path components.

use xxhash_rust::xxh3::xxh3_64;

const MAX_LEN: usize = 80;

/// Maps any string to one safe file-name component inside a store directory.
///
/// Keeps `[A-Za-z0-9._-]`, replaces everything else with `_`, never yields a hidden name (a
/// leading `.` becomes `_`), `.`, `..` or an empty name, and bounds the length.
///
/// One-to-one: a name that is already clean is kept as it is (so stores written by earlier
/// versions still find their folders), and whenever cleaning changed anything (a replaced
/// character, the leading dot, a cut) `-<16 hex of the raw name's hash>` is appended. A clean
/// name that itself ends like such a suffix gets one too, so it can never equal the cleaned
/// form of another name: `.s`, `_s` and `_s-<hash of .s>` map to three different folders.
pub fn sanitize_component(name: &str) -> String {
    let mut clean: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '_'
            }
        })
        .take(MAX_LEN)
        .collect();
    if clean.starts_with('.') {
        clean.replace_range(0..1, "_");
    }
    // Decided after every change (the leading dot included: `.s` and `_s` once shared a folder).
    if clean != name || clean.is_empty() || looks_suffixed(&clean) {
        clean.push_str(&format!("-{:016x}", xxh3_64(name.as_bytes())));
    }
    clean
}

/// Whether `name` ends like a name this function suffixed: `-` and 16 lowercase hex digits.
fn looks_suffixed(name: &str) -> bool {
    let b = name.as_bytes();
    b.len() >= 17
        && b[b.len() - 17] == b'-'
        && b[b.len() - 16..]
            .iter()
            .all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(c))
}

#[cfg(test)]
mod tests {
    use super::sanitize_component;

    #[test]
    fn plain_names_are_kept() {
        assert_eq!(sanitize_component("toolu_01ABC-x.y"), "toolu_01ABC-x.y");
    }

    #[test]
    fn separators_and_dots_cannot_escape() {
        for hostile in [
            "../../etc/passwd",
            "..",
            ".",
            "",
            "/abs",
            "a\\b",
            "a\0b",
            ".hidden",
        ] {
            let s = sanitize_component(hostile);
            assert!(
                !s.contains('/') && !s.contains('\\') && !s.contains('\0'),
                "{s}"
            );
            assert!(!s.starts_with('.'), "{s}");
            assert!(!s.is_empty());
        }
    }

    #[test]
    fn distinct_inputs_stay_distinct() {
        assert_ne!(sanitize_component("a/b"), sanitize_component("a_b"));
        assert_ne!(sanitize_component("a?b"), sanitize_component("a*b"));
        let long_a = "x".repeat(200);
        let long_b = format!("{}y", "x".repeat(199));
        assert_ne!(sanitize_component(&long_a), sanitize_component(&long_b));
        assert!(sanitize_component(&long_a).len() < 100);
    }

    #[test]
    fn a_leading_dot_never_shares_a_folder() {
        // Issue 12: `.s` and `_s` were both cleaned to `_s`, so two sessions shared state.
        assert_eq!(
            sanitize_component("_s"),
            "_s",
            "clean names are kept as they are"
        );
        assert_ne!(sanitize_component(".s"), sanitize_component("_s"));
        assert!(sanitize_component(".s").starts_with("_s-"));
        // A clean name shaped like a cleaned one cannot take its folder either.
        let cleaned = sanitize_component(".s");
        assert_ne!(sanitize_component(&cleaned), cleaned);
    }
}
