//! The `tiktoken-rs` backend, guarded against its pathological inputs.
//!
//! `tiktoken-rs` pre-tokenizes with `fancy-regex` (the `\s+(?!\S)` look-ahead needs a
//! backtracking engine). Measured on 0.12: a run of about 1M spaces fills fancy-regex's
//! backtracking stack (a heap `Vec` capped at 1,000,000 entries), `encode_ordinary` unwraps the
//! resulting `RuntimeError(StackOverflow)` and panics; long runs of one character are 30-100x
//! slower than the default engine.
//!
//! The guard, in order:
//!
//! 1. The text is cut into chunks of about [`CHUNK_TARGET_BYTES`] at *safe boundaries*: places
//!    where the o200k and cl100k pre-tokenizer regexes always end a piece and where the text on
//!    either side tokenizes alone exactly as it does in place (after a `\n` before a non-space
//!    other than `/`, or at a space between an ASCII letter or digit and an ASCII letter).
//!    Summing the chunks' counts gives exactly the count of the whole text; tests check this
//!    against unguarded `tiktoken-rs` with tiny chunks on adversarial alphabets.
//! 2. A chunk longer than [`MAX_TIKTOKEN_CHUNK_BYTES`] (text with no safe boundary for that
//!    long: one huge run, minified code, base64) or holding a run of one character of at least
//!    [`LONG_RUN_CHARS`] is counted by the default engine (`crate::fast`) with the same
//!    encoding, which gives the same counts (tests compare it with tiktoken-rs and bpe-openai).
//! 3. Every other chunk goes to `tiktoken-rs` inside `catch_unwind`; a panic falls back to
//!    the default engine for that chunk.
//!
//! So `tiktoken-rs` only ever sees inputs of bounded size with no long runs, and the cost is
//! linear in the input. A real (uncatchable) thread stack overflow is not possible on this
//! path: fancy-regex's matcher keeps its backtracking stack on the heap and reports overflow as
//! an error, and nothing in the call recurses with the input size.

use crate::tokenizer::{bpe_count, Encoding};
use std::panic::{catch_unwind, AssertUnwindSafe};

/// Preferred chunk size for `tiktoken-rs`.
pub const CHUNK_TARGET_BYTES: usize = 8 * 1024;

/// Chunks longer than this (no safe boundary nearby) are counted by the default engine instead.
pub const MAX_TIKTOKEN_CHUNK_BYTES: usize = 64 * 1024;

/// A chunk holding a run of one repeated character this long is counted by the default engine.
pub const LONG_RUN_CHARS: usize = 256;

/// Counts `text` with `tiktoken-rs`, guarded (see the module docs). Never panics.
pub(crate) fn count(encoding: Encoding, text: &str) -> usize {
    count_with_target(encoding, text, CHUNK_TARGET_BYTES)
}

fn count_with_target(encoding: Encoding, text: &str, target: usize) -> usize {
    Chunks::new(text, target)
        .map(|chunk| count_chunk(encoding, chunk))
        .sum()
}

fn count_chunk(encoding: Encoding, chunk: &str) -> usize {
    if chunk.len() > MAX_TIKTOKEN_CHUNK_BYTES || has_long_run(chunk, LONG_RUN_CHARS) {
        return bpe_count(encoding, chunk);
    }
    tiktoken_count(encoding, chunk).unwrap_or_else(|| bpe_count(encoding, chunk))
}

/// Unguarded `tiktoken-rs` (ordinary encoding, special tokens as text) inside `catch_unwind`.
/// `None` if it panicked.
pub(crate) fn tiktoken_count(encoding: Encoding, text: &str) -> Option<usize> {
    catch_unwind(AssertUnwindSafe(|| {
        let bpe = match encoding {
            Encoding::O200k => tiktoken_rs::o200k_base_singleton(),
            Encoding::Cl100k => tiktoken_rs::cl100k_base_singleton(),
        };
        bpe.count_ordinary(text)
    }))
    .ok()
}

/// Whether `text` holds `limit` or more consecutive copies of one character.
fn has_long_run(text: &str, limit: usize) -> bool {
    let mut prev = None;
    let mut run = 0usize;
    for c in text.chars() {
        if Some(c) == prev {
            run += 1;
            if run >= limit {
                return true;
            }
        } else {
            prev = Some(c);
            run = 1;
        }
    }
    false
}

/// Whether byte offset `i` of `bytes` (a UTF-8 string) is a safe place to cut: both the o200k
/// and the cl100k pre-tokenizers end a piece there, and neither side's pieces depend on the
/// other. Two cases, both ASCII so `i` is a char boundary:
///
/// - after `\n`, before a character that is neither whitespace nor `/`. No piece holds a
///   newline followed by a non-space, except o200k's punctuation piece, whose tail
///   `[\r\n/]*` may go on with `/`. The whitespace or punctuation piece before ends at the last
///   newline whatever follows, and `\s+$` / `\s+(?!\S)` cannot match differently there;
/// - at a space between an ASCII letter or digit and an ASCII letter (`foo bar`): letter and
///   digit pieces never take a space after them, and the next piece (` bar`) starts here.
///
/// Neither regex has `^`, `\b` or look-behind, so the text after the cut splits alone as it
/// does in place.
fn is_safe_boundary(bytes: &[u8], i: usize) -> bool {
    if i == 0 || i >= bytes.len() {
        return false;
    }
    let (before, at) = (bytes[i - 1], bytes[i]);
    if before == b'\n' {
        return at.is_ascii() && !char::from(at).is_whitespace() && at != b'/';
    }
    at == b' '
        && before.is_ascii_alphanumeric()
        && bytes.get(i + 1).is_some_and(u8::is_ascii_alphabetic)
}

/// Cuts a text into chunks of about `target` bytes at safe boundaries: each chunk ends at the
/// last safe boundary within `target` bytes of its start, or, when there is none, at the first
/// one after (or at the end of the text). Linear: a byte is scanned at most twice.
struct Chunks<'a> {
    text: &'a str,
    start: usize,
    target: usize,
}

impl<'a> Chunks<'a> {
    fn new(text: &'a str, target: usize) -> Self {
        Chunks {
            text,
            start: 0,
            target: target.max(1),
        }
    }
}

impl<'a> Iterator for Chunks<'a> {
    type Item = &'a str;

    fn next(&mut self) -> Option<&'a str> {
        let bytes = self.text.as_bytes();
        let len = bytes.len();
        let start = self.start;
        if start >= len {
            return None;
        }
        let limit = start + self.target;
        let end = if limit >= len {
            len
        } else {
            (start + 1..=limit)
                .rev()
                .find(|&i| is_safe_boundary(bytes, i))
                .or_else(|| (limit + 1..len).find(|&i| is_safe_boundary(bytes, i)))
                .unwrap_or(len)
        };
        self.start = end;
        // Safe boundaries sit before an ASCII byte, so `end` is a char boundary; `get` keeps
        // this panic-free regardless.
        self.text.get(start..end)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(encoding: Encoding, text: &str) -> usize {
        tiktoken_count(encoding, text).expect("tiktoken ran")
    }

    /// A deterministic xorshift generator, to avoid a dev-dependency.
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
    }

    #[test]
    fn chunks_cover_the_text_in_order() {
        let text = "alpha beta\ngamma delta\n/path  x\n\n y 12 3".repeat(50);
        for target in [1, 2, 3, 7, 64, 10_000] {
            let chunks: Vec<&str> = Chunks::new(&text, target).collect();
            assert_eq!(chunks.concat(), text, "target {target}");
            assert!(chunks.iter().all(|c| !c.is_empty()));
        }
        assert_eq!(Chunks::new("", 8).count(), 0);
        assert_eq!(
            " ".repeat(100_000).len(),
            Chunks::new(&" ".repeat(100_000), 8)
                .map(str::len)
                .sum::<usize>()
        );
    }

    #[test]
    fn boundaries() {
        let b = |s: &str, i| is_safe_boundary(s.as_bytes(), i);
        assert!(b("a\nb", 2));
        assert!(b("a\n.", 2));
        assert!(
            !b("a\n/", 2),
            "o200k takes `/` after a newline into the punctuation piece"
        );
        assert!(!b("a\n ", 2));
        assert!(!b("a\n\n", 2));
        assert!(!b("a\né", 2));
        assert!(b("foo bar", 3));
        assert!(b("9 bar", 1));
        assert!(!b("foo  bar", 3));
        assert!(!b("foo 1", 3));
        assert!(!b(". bar", 1));
        assert!(!b("foo ", 3));
    }

    #[test]
    fn chunked_counts_equal_unchunked_on_adversarial_text() {
        // Characters around every alternative of both pre-tokenizer regexes.
        let alphabet = [
            "a", "B", "z", "1", "23", " ", "  ", "\n", "\r\n", "\t", "/", ".", "'", "'s", "'LL",
            "é", "É", "\u{301}", "中", "🎉", "\u{a0}", "\u{b}", "-", "=", "{", "\"", "x y",
        ];
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        for round in 0..400 {
            let n = 5 + (rng.next() % 120) as usize;
            let text: String = (0..n)
                .map(|_| alphabet[(rng.next() % alphabet.len() as u64) as usize])
                .collect();
            for encoding in [Encoding::O200k, Encoding::Cl100k] {
                let expected = raw(encoding, &text);
                assert_eq!(
                    bpe_count(encoding, &text),
                    expected,
                    "default engine {text:?}"
                );
                for target in [1, 3, 16] {
                    assert_eq!(
                        count_with_target(encoding, &text, target),
                        expected,
                        "round {round}, {encoding:?}, target {target}: {text:?}"
                    );
                }
            }
        }
    }

    #[test]
    fn unguarded_tiktoken_panics_on_a_million_spaces_and_the_guard_does_not() {
        let spaces = " ".repeat(1_000_000);
        // tiktoken-rs unwraps fancy-regex's `RuntimeError(StackOverflow)`; caught here.
        assert_eq!(tiktoken_count(Encoding::O200k, &spaces), None);
        assert_eq!(count(Encoding::O200k, &spaces), 7813);
        assert_eq!(count(Encoding::Cl100k, &spaces), 7813);
    }

    #[test]
    fn long_runs_are_detected() {
        assert!(!has_long_run("abc", 2));
        assert!(has_long_run("abbc", 2));
        assert!(has_long_run(&"é".repeat(300), LONG_RUN_CHARS));
        assert!(!has_long_run(&"ab".repeat(300), LONG_RUN_CHARS));
    }
}
