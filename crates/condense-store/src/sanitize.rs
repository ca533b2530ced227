//! Turning names from transcripts into safe single path components.

use twox_hash::XxHash3_64;

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
    // Most names are clean already (hex keys, session hashes, stage names): checked byte by
    // byte, they are kept without building a copy char by char (a run asks for a few hundred).
    let allowed = |b: &u8| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-');
    if !name.is_empty()
        && name.len() <= MAX_LEN
        && !name.starts_with('.')
        && name.as_bytes().iter().all(allowed)
        && !looks_suffixed(name)
    {
        return name.to_string();
    }
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
        clean.push_str(&format!("-{:016x}", XxHash3_64::oneshot(name.as_bytes())));
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
    use super::{looks_suffixed, sanitize_component};

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

    /// The check that keeps a clean name as it is agrees with cleaning it at each edge: the
    /// length bound, the leading dot, a character outside the set, a suffix-shaped end.
    #[test]
    fn clean_names_are_kept_and_only_they() {
        let at_bound = "a".repeat(80);
        assert_eq!(sanitize_component(&at_bound), at_bound);
        let over = "a".repeat(81);
        assert!(sanitize_component(&over).starts_with(&at_bound[..80]));
        assert_ne!(sanitize_component(&over), over);
        for kept in ["resume-messages-h3860e6c332e5bf1f", "a.b_c-D9", "x"] {
            assert_eq!(sanitize_component(kept), kept);
        }
        for changed in [".a", "a b", "é", "a-0123456789abcdef", ""] {
            let s = sanitize_component(changed);
            assert_ne!(s, changed);
            assert!(looks_suffixed(&s), "{s}");
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
