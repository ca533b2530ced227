//! Turning names from transcripts into safe single path components.

use xxhash_rust::xxh3::xxh3_64;

const MAX_LEN: usize = 80;

/// Maps any string to one safe file-name component inside a store directory.
///
/// Keeps `[A-Za-z0-9._-]`, replaces everything else with `_`, never yields `.`, `..` or an
/// empty name, and bounds the length. When the result differs from the input (or was cut), a
/// hash of the original is appended, so two different names never share a component.
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
    let all_dots = clean.chars().all(|c| c == '.');
    let changed = clean != name;
    if clean.starts_with('.') {
        clean.replace_range(0..1, "_");
    }
    if changed || all_dots {
        clean.push_str(&format!("-{:016x}", xxh3_64(name.as_bytes())));
    }
    clean
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
}
