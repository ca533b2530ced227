//! The pre-tokenizers of `o200k_base` and `cl100k_base`, written out by hand.
//!
//! OpenAI splits text into pieces with a regex before byte-pair encoding each piece. Compiling
//! that regex (Unicode classes, several alternatives) costs milliseconds at every start-up, so
//! the two patterns, as bpe-openai states them, are matched here directly with leftmost-first
//! (backtracking priority) semantics, over Unicode classes that build.rs takes from regex-syntax:
//!
//! ```text
//! o200k_base:  [^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?
//!            | [^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?
//!            | \p{N}{1,3} |  ?[^\s\p{L}\p{N}]+[\r\n/]* | \s*[\r\n]+ | \s+$
//! cl100k_base: (?i:'s|'t|'re|'ve|'m|'ll|'d) | [^\r\n\p{L}\p{N}]?\p{L}+ | \p{N}{1,3}
//!            |  ?[^\s\p{L}\p{N}]+[\r\n]* | \s*[\r\n]+ | \s+$
//! then, both:  \s+(?!\S) (a run of whitespace but its last character) | \s+
//! ```
//!
//! Every character starts some alternative (a letter the word ones, a number the digits, a
//! space the whitespace ones, anything else the punctuation one), so a piece is never empty.
//! Tests compare the counts with bpe-openai and tiktoken-rs on every shipped transcript.

use twox_hash::XxHash3_64;

/// Flags of a character (kept in step with build.rs).
const LETTER: u8 = 1;
const NUMBER: u8 = 2;
const SPACE: u8 = 4;
/// `[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]`.
const UPPERISH: u8 = 8;
/// `[\p{Ll}\p{Lm}\p{Lo}\p{M}]`.
const LOWERISH: u8 = 16;

static ASCII: &[u8; 128] = include_bytes!(concat!(env!("OUT_DIR"), "/ascii.bin"));
/// Runs of equal flags above ASCII: u32 LE first, last, flags; sorted, disjoint.
static RUNS: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/classes.bin"));

/// Which pattern splits the text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Pattern {
    O200k,
    Cl100k,
}

fn read_u32(bytes: &[u8], at: usize) -> u32 {
    match bytes.get(at..at + 4) {
        Some(b) => u32::from_le_bytes([b[0], b[1], b[2], b[3]]),
        None => 0,
    }
}

fn flags_of(c: char) -> u8 {
    let cp = u32::from(c);
    if let Some(&f) = ASCII.get(cp as usize) {
        return f;
    }
    let (mut lo, mut hi) = (0, RUNS.len() / 12);
    while lo < hi {
        let mid = (lo + hi) / 2;
        if cp < read_u32(RUNS, mid * 12) {
            hi = mid;
        } else if cp > read_u32(RUNS, mid * 12 + 4) {
            lo = mid + 1;
        } else {
            return read_u32(RUNS, mid * 12 + 8) as u8;
        }
    }
    0
}

/// The character at byte `i` of `t` (a char boundary) and its flags.
#[inline]
fn at(t: &str, i: usize) -> Option<(char, u8)> {
    let &b = t.as_bytes().get(i)?;
    if b < 0x80 {
        return Some((char::from(b), ASCII[usize::from(b)]));
    }
    let c = t.get(i..)?.chars().next()?;
    Some((c, flags_of(c)))
}

/// `[^\r\n\p{L}\p{N}]`
fn is_prefix(c: char, f: u8) -> bool {
    c != '\r' && c != '\n' && f & (LETTER | NUMBER) == 0
}

/// `[^\s\p{L}\p{N}]`
fn is_punct(f: u8) -> bool {
    f & (SPACE | LETTER | NUMBER) == 0
}

/// The end of the run of characters that have `flag`, from `i`.
fn run(t: &str, mut i: usize, flag: u8) -> usize {
    while let Some((c, f)) = at(t, i) {
        if f & flag == 0 {
            break;
        }
        i += c.len_utf8();
    }
    i
}

/// The end of `(?i:'s|'t|'re|'ve|'m|'ll|'d)` at `i`, or `i` when there is none. build.rs checks
/// that `ſ` is the only case fold of these letters beyond ASCII.
fn contraction(t: &str, i: usize) -> usize {
    let Some(rest) = t.get(i..).and_then(|r| r.strip_prefix('\'')) else {
        return i;
    };
    let mut cs = rest.chars();
    let second = |c: Option<char>, want: char| c.is_some_and(|c| c.eq_ignore_ascii_case(&want));
    match cs.next() {
        Some(c @ ('s' | 'S' | 'ſ' | 't' | 'T' | 'm' | 'M' | 'd' | 'D')) => i + 1 + c.len_utf8(),
        Some('r' | 'R') if second(cs.next(), 'e') => i + 3,
        Some('v' | 'V') if second(cs.next(), 'e') => i + 3,
        Some('l' | 'L') if second(cs.next(), 'l') => i + 3,
        _ => i,
    }
}

/// `[upperish]*[lowerish]+` from `i`, with backtracking: the greedy upperish run, then a
/// lowerish run after it, or else the run given back to its last lowerish character.
fn upper_star_lower_plus(t: &str, mut i: usize) -> Option<usize> {
    let mut last_lower_end = None;
    while let Some((c, f)) = at(t, i) {
        if f & UPPERISH == 0 {
            break;
        }
        i += c.len_utf8();
        if f & LOWERISH != 0 {
            last_lower_end = Some(i);
        }
    }
    match at(t, i) {
        Some((_, f)) if f & LOWERISH != 0 => Some(run(t, i, LOWERISH)),
        _ => last_lower_end,
    }
}

/// The end of the piece that starts at byte `s` (< `t.len()`) of `t`.
#[inline]
pub(crate) fn next_piece(pattern: Pattern, t: &str, s: usize) -> usize {
    if pattern == Pattern::O200k {
        if let Some(e) = ascii_word_o200k(t, s) {
            return e;
        }
    }
    next_piece_general(pattern, t, s)
}

/// o200k's word alternatives at `s` when they are decided within ASCII (most words of most
/// text): an optional prefix character, then ASCII capitals and small letters, followed by an
/// ASCII byte or the end. Both word alternatives then end where the letters do (a capital run
/// alone or capitals then small letters; ASCII capitals are not small, nor small letters
/// capitals, so nothing is given back), before a contraction. `None`: not such a word, or a
/// character beyond ASCII (which may continue it) follows; [`next_piece_general`] decides.
#[inline]
fn ascii_word_o200k(t: &str, s: usize) -> Option<usize> {
    let b = t.as_bytes();
    let c0 = *b.get(s)?;
    let f0 = *ASCII.get(usize::from(c0))?;
    let q = if f0 & LETTER != 0 {
        s
    } else if is_prefix(char::from(c0), f0) {
        s + 1
    } else {
        return None;
    };
    let mut i = q;
    while b.get(i).is_some_and(u8::is_ascii_uppercase) {
        i += 1;
    }
    while b.get(i).is_some_and(u8::is_ascii_lowercase) {
        i += 1;
    }
    if i == q || b.get(i).is_some_and(|&c| c >= 0x80) {
        return None;
    }
    Some(contraction(t, i))
}

/// [`next_piece`] by the patterns' alternatives in order.
fn next_piece_general(pattern: Pattern, t: &str, s: usize) -> usize {
    let Some((c0, f0)) = at(t, s) else {
        return t.len();
    };
    let after0 = s + c0.len_utf8();
    let prefixed = is_prefix(c0, f0).then_some(after0);
    match pattern {
        Pattern::O200k => {
            for q in [prefixed, Some(s)].into_iter().flatten() {
                if let Some(e) = upper_star_lower_plus(t, q) {
                    return contraction(t, e);
                }
            }
            for q in [prefixed, Some(s)].into_iter().flatten() {
                let k = run(t, q, UPPERISH);
                if k > q {
                    return contraction(t, run(t, k, LOWERISH));
                }
            }
        }
        Pattern::Cl100k => {
            let e = contraction(t, s);
            if e > s {
                return e;
            }
            for q in [prefixed, Some(s)].into_iter().flatten() {
                let e = run(t, q, LETTER);
                if e > q {
                    return e;
                }
            }
        }
    }
    if f0 & NUMBER != 0 {
        let mut e = after0;
        for _ in 0..2 {
            match at(t, e) {
                Some((c, f)) if f & NUMBER != 0 => e += c.len_utf8(),
                _ => break,
            }
        }
        return e;
    }
    // ` ?[^\s\p{L}\p{N}]+` then `[\r\n/]*` (o200k) or `[\r\n]*` (cl100k). Without the space the
    // run would have to start with it, which is not punctuation: one try is enough.
    let q = if c0 == ' ' { after0 } else { s };
    if matches!(at(t, q), Some((_, f)) if is_punct(f)) {
        let mut e = q;
        while let Some((c, f)) = at(t, e) {
            if !is_punct(f) {
                break;
            }
            e += c.len_utf8();
        }
        let tail: &[u8] = match pattern {
            Pattern::O200k => b"\r\n/",
            Pattern::Cl100k => b"\r\n",
        };
        while t.as_bytes().get(e).is_some_and(|b| tail.contains(b)) {
            e += 1;
        }
        return e;
    }
    if f0 & SPACE != 0 {
        // One pass over the whitespace run serves the four whitespace alternatives.
        let (mut i, mut chars, mut last_start, mut last_newline_end) = (s, 0usize, s, None);
        while let Some((c, f)) = at(t, i) {
            if f & SPACE == 0 {
                break;
            }
            chars += 1;
            last_start = i;
            i += c.len_utf8();
            if c == '\r' || c == '\n' {
                last_newline_end = Some(i);
            }
        }
        return match last_newline_end {
            // `\s*[\r\n]+`: the run given back to its last line break.
            Some(e) => e,
            // `\s+$`
            None if i == t.len() => i,
            // `\s+(?!\S)`: all but the last character, which starts the next piece.
            None if chars >= 2 => last_start,
            // `\s+`
            None => i,
        };
    }
    // Not reached (every character starts one of the alternatives above); one character keeps
    // the split moving should the classes ever disagree.
    after0
}

/// Whether a piece starts at byte `i` of `t` whatever came before it, when the character before
/// is `\n`. Either:
/// - the character at `i` is neither whitespace nor `/` (which o200k's `[\r\n/]*` takes after
///   punctuation); or
/// - it starts a run of whitespace with no `\r` or `\n` in it (an indented line: `\s*[\r\n]+`
///   at the `\n` before cannot reach past it for want of a line break to end on, and whatever
///   follows the run starts after a space, not after the `\n`).
///
/// Otherwise `\s*[\r\n]+` and the other whitespace alternatives would run on across `i`. No
/// other alternative of either pattern matches across a `\n`, and none looks behind its start,
/// so the pieces of `t` are those of `t[..i]` followed by those of `t[i..]`. Code is mostly
/// indented lines: with the first rule only, a source file was one part, and a stage that kept
/// its first lines counted them all again (a tenth of a first run at 1M tokens).
pub(crate) fn piece_starts_after_newline(t: &str, i: usize) -> bool {
    if i == 0 || t.as_bytes().get(i - 1) != Some(&b'\n') {
        return false;
    }
    match at(t, i) {
        Some((c, f)) if f & SPACE == 0 => c != '/',
        Some(_) => {
            let mut j = i;
            while let Some((c, f)) = at(t, j) {
                if f & SPACE == 0 {
                    break;
                }
                if c == '\r' || c == '\n' {
                    return false;
                }
                j += c.len_utf8();
            }
            true
        }
        None => false,
    }
}

/// A line ends a part when its xxh3 is 0 modulo this (and the part is long enough): about one
/// line in four.
const CUT_ONE_IN: u64 = 4;

/// `text` in consecutive parts of at least `min` bytes (the last may be shorter), each cut
/// after a `\n` where [`piece_starts_after_newline`] holds: the text's pieces are its parts'
/// pieces, so its token count is the sum of theirs. A text with no such place is one part.
///
/// Where a part ends depends on the line before the cut, not on where the part began: it ends
/// after a line whose hash selects it (one in [`CUT_ONE_IN`]), or at the first allowed place
/// once it is `max` bytes long. So a text changed near its start (a running summary that drops
/// its oldest line and says so in its first line) is cut the same way again a line or two after
/// the change, and its later parts are the ones counted before. Cut after a fixed size instead,
/// every part after an odd number of lines removed was new, and the whole text was counted
/// again. `max` at or below `min` cuts at the first allowed place after `min` bytes.
pub(crate) fn line_parts(text: &str, min: usize, max: usize) -> impl Iterator<Item = &str> {
    let bytes = text.as_bytes();
    let mut start = 0;
    std::iter::from_fn(move || {
        if start >= text.len() {
            return None;
        }
        let mut line = start;
        let end = loop {
            let Some(k) = memchr::memchr(b'\n', &bytes[line..]) else {
                break text.len();
            };
            let next = line + k + 1;
            let long = next - start;
            if long >= min
                && piece_starts_after_newline(text, next)
                && (long >= max || XxHash3_64::oneshot(&bytes[line..next]) % CUT_ONE_IN == 0)
            {
                break next;
            }
            line = next;
        };
        // `end` follows a `\n` (or is the end): a character boundary.
        let part = text.get(start..end);
        start = end;
        part
    })
}

/// The pieces of `text`.
pub(crate) fn pieces(pattern: Pattern, text: &str) -> impl Iterator<Item = &str> {
    let mut s = 0;
    std::iter::from_fn(move || {
        if s >= text.len() {
            return None;
        }
        let e = next_piece(pattern, text, s);
        let piece = text.get(s..e);
        s = e;
        piece
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fast::{CL100K, O200K};

    #[test]
    fn ascii_words_end_where_the_alternatives_end() {
        let mut text = String::new();
        for t in texts() {
            text.push_str(&t);
        }
        text.push_str(
            " Hello WORLD, don't I'LL x'S a'Ve (word) \"q\" naïve Éa aÉ ABCdef AbC 12ab _x \t\tx\r\nY 'll",
        );
        let mut decided = 0;
        for (s, _) in text.char_indices() {
            if let Some(e) = ascii_word_o200k(&text, s) {
                decided += 1;
                assert_eq!(
                    e,
                    next_piece_general(Pattern::O200k, &text, s),
                    "at {s}: {:?}",
                    &text[s..]
                );
            }
        }
        assert!(decided > 50);
    }

    /// Texts made of what meets at a line break: every kind of space and line break, `/`,
    /// punctuation that takes the breaks after it, contractions, letters, digits.
    fn texts() -> Vec<String> {
        let alphabet = [
            "\n", "\r\n", "\r", " \n", "\n\n", " ", "\t", "\u{3000}", "\u{85}", "\u{a0}", "/",
            "//", "/x", ".", "!\n", "\")]", "'s", "'LL", "a", "Word", "中", "\u{301}", "1", "42",
            "## h", "- b",
        ];
        let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        (0..4000)
            .map(|_| {
                let len = 1 + (next() % 24) as usize;
                (0..len)
                    .map(|_| alphabet[(next() % alphabet.len() as u64) as usize])
                    .collect()
            })
            .collect()
    }

    #[test]
    fn a_text_counts_as_the_sum_of_its_line_parts() {
        let mut cut = 0;
        for text in texts() {
            for (min, max) in [(1, 1), (3, 3), (8, 8), (1, 16), (8, 32)] {
                let parts: Vec<&str> = line_parts(&text, min, max).collect();
                assert_eq!(parts.concat(), text);
                assert!(parts[..parts.len() - 1].iter().all(|p| p.len() >= min));
                cut += parts.len() - 1;
                for vocab in [&O200K, &CL100K] {
                    let sum: usize = parts.iter().map(|p| vocab.count(p)).sum();
                    assert_eq!(sum, vocab.count(&text), "{text:?} in {parts:?}");
                }
            }
        }
        assert!(cut > 2000, "too few cuts to test anything: {cut}");
    }

    /// A running summary's record as a commit renders it: an omission line, then one line per
    /// request kept, the oldest first.
    fn requests_section(omitted: usize, kept: std::ops::Range<usize>) -> String {
        let mut s = format!("## User requests\n({omitted} earlier requests omitted)\n");
        for i in kept {
            s.push_str(&format!(
                "- Step {i}: look at module {i} and fix what fails.\n"
            ));
        }
        s
    }

    /// The parts of `after` not among the parts of `before`: what a count by parts tokenizes.
    fn new_parts(before: &str, after: &str, min: usize, max: usize) -> usize {
        let seen: std::collections::HashSet<&str> = line_parts(before, min, max).collect();
        line_parts(after, min, max)
            .filter(|p| !seen.contains(p))
            .count()
    }

    #[test]
    fn a_text_changed_at_its_start_keeps_its_later_parts() {
        let (min, max) = (64, 4096);
        for shift in 1..=3 {
            for first in [0, 7, 130] {
                let before = requests_section(first, first..first + 600);
                let after = requests_section(first + shift, first + shift..first + 600 + shift);
                let total = line_parts(&after, min, max).count();
                // The first part or two (the omission line changed) and the last (new lines).
                let new = new_parts(&before, &after, min, max);
                assert!(
                    new <= 4,
                    "shift {shift} from {first}: {new} of {total} parts new"
                );
            }
        }
        // Parts cut at a fixed size are almost all new after one line dropped: what this
        // cutting is for.
        let before = requests_section(0, 0..600);
        let after = requests_section(1, 1..601);
        let total = line_parts(&after, min, min).count();
        assert!(new_parts(&before, &after, min, min) > total / 2);
    }

    #[test]
    fn line_parts_cut_only_before_a_character_that_starts_a_piece() {
        // `max` at `min`: every allowed place after `min` bytes.
        let parts = |t: &'static str| line_parts(t, 1, 1).collect::<Vec<_>>();
        // Not before a line break, a `/` or a whitespace run that reaches one; before an
        // indented line, yes.
        assert_eq!(
            parts("a\nb\n\nc\n d\n/e\n  \nf\n\t g"),
            ["a\n", "b\n\n", "c\n", " d\n/e\n  \n", "f\n", "\t g"]
        );
        assert_eq!(parts("no break"), ["no break"]);
        assert_eq!(parts(""), Vec::<&str>::new());
        assert_eq!(
            line_parts("ab\ncd\nef", 4, 4).collect::<Vec<_>>(),
            ["ab\ncd\n", "ef"]
        );
    }
}
