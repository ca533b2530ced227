//! Small text helpers, one definition each, for every condense crate and stage: numbers worded
//! alike in every report (`1,234 files`, `92.5%`) and text cut the same way everywhere (never
//! inside a character, with `…` where something was left out).
//!
//! It sits at the bottom of the crate graph (no dependencies, not even the model), so the
//! binary, the host, the libraries and the plugins can all use it.
//!
//! ```
//! use condense_text::{cut_chars, one_line, percent, plural, thousands, utf8_prefix};
//! assert_eq!(thousands(1_234_567), "1,234,567");
//! assert_eq!(plural(1, "tool result", "tool results"), "1 tool result");
//! assert_eq!(plural(12_000, "file", "files"), "12,000 files");
//! assert_eq!(percent(0.925), "92.5%");
//! assert_eq!(utf8_prefix("aé", 2), "a");
//! assert_eq!(cut_chars("hello world", 5), "hello…");
//! assert_eq!(one_line(" a\n  b "), "a b");
//! ```

/// `n` with thousands separators, as every report words numbers: `1234567` → `1,234,567`.
/// Built from `decimal_digits`, not `to_string`: a stage's events word a number each, by
/// the hundred at every run.
pub fn thousands(n: usize) -> String {
    let mut buf = [0u8; 20];
    let digits = decimal_digits(n, &mut buf);
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, &d) in digits.iter().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(char::from(d));
    }
    out
}

/// Appends `n` in decimal to `out`, digit by digit: the formatting machinery costs about 900
/// instructions a number, and readers number thousands of messages and JSON pointers a read.
///
/// ```
/// let mut s = String::from("/messages/");
/// condense_text::push_decimal(&mut s, 42);
/// assert_eq!(s, "/messages/42");
/// ```
pub fn push_decimal(out: &mut String, n: usize) {
    let mut buf = [0u8; 20];
    out.extend(decimal_digits(n, &mut buf).iter().map(|&d| char::from(d)));
}

/// The ASCII decimal digits of `n`, written at the end of `buf` (20 bytes hold any `usize`).
fn decimal_digits(n: usize, buf: &mut [u8; 20]) -> &[u8] {
    let (mut n, mut at) = (n, buf.len());
    loop {
        at -= 1;
        // A remainder of 10 is one digit.
        buf[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    &buf[at..]
}

/// `n` and the noun that fits it: `plural(3, "file", "files")` → `3 files`.
pub fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{} {}", thousands(n), if n == 1 { one } else { many })
}

/// A fraction as a percentage for notes, to one decimal when it has one: `0.9` → `90%`,
/// `0.925` → `92.5%`.
pub fn percent(fraction: f64) -> String {
    let p = (fraction * 1000.0).round() / 10.0;
    if p.fract() == 0.0 {
        format!("{p:.0}%")
    } else {
        format!("{p}%")
    }
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

/// Whether `text` has at least `n` characters, counted only when its bytes leave it open: a
/// character is one to four bytes, so fewer than `n` bytes are fewer than `n` characters and
/// `4 * n` bytes or more are at least `n` (stages judge every tool result against a limit in
/// characters at every run; most are far from it either way).
pub fn has_chars(text: &str, n: usize) -> bool {
    let bytes = text.len();
    bytes >= n && (bytes / 4 >= n || text.chars().count() >= n)
}

/// Where `piece` lies in `text`, when it is a slice of `text`'s own bytes (not merely equal to
/// some of them): found from the two addresses, nothing compared. A reader that hands out
/// slices of its input finds their places this way.
///
/// ```
/// let text = "ab\ncd\n";
/// assert_eq!(condense_text::range_in(text, &text[3..5]), Some(3..5));
/// assert_eq!(condense_text::range_in(text, "cd"), None);
/// ```
pub fn range_in(text: &str, piece: &str) -> Option<std::ops::Range<usize>> {
    let start = (piece.as_ptr() as usize).checked_sub(text.as_ptr() as usize)?;
    // Both are whole strings: a piece inside `text`'s bytes starts and ends on its character
    // boundaries.
    (start <= text.len() && piece.len() <= text.len() - start).then(|| start..start + piece.len())
}

/// The first `max` characters of `text` (a count of characters, not bytes), nothing appended.
pub fn prefix_chars(text: &str, max: usize) -> &str {
    match text.char_indices().nth(max) {
        None => text,
        Some((byte, _)) => &text[..byte],
    }
}

/// The first `max` characters of `text`; when something was cut, its trailing white space is
/// trimmed and `…` appended (so a cut never ends in a blank before the mark).
pub fn cut_chars(text: &str, max: usize) -> String {
    marked(text, max, true)
}

/// The first `max` characters of `text`, with `…` appended when something was cut and nothing
/// trimmed: for quoting a value in a one-line message (`found "abc  …"`).
pub fn ellipsize(text: &str, max: usize) -> String {
    marked(text, max, false)
}

/// The first `max` characters of `text`, `…` appended when something was cut, the cut's
/// trailing white space trimmed first when `trim`.
fn marked(text: &str, max: usize, trim: bool) -> String {
    let head = prefix_chars(text, max);
    if head.len() == text.len() {
        text.to_string()
    } else if trim {
        format!("{}…", head.trim_end())
    } else {
        format!("{head}…")
    }
}

/// What a panic said: its payload when it is a string (`panic!("...")` gives a `&str`, a
/// formatted `panic!` a `String`); `None` for any other payload.
pub fn panic_message(payload: &(dyn std::any::Any + Send)) -> Option<&str> {
    payload
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
}

/// `text` with every run of white space (newlines included) made one space, trimmed: a reply
/// or an error quoted on one line.
pub fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panics_message_is_its_string_payload() {
        // The panics' own lines go to the test's captured output.
        let caught = |f: fn()| std::panic::catch_unwind(f).unwrap_err();
        let literal = caught(|| panic!("boom"));
        let formatted = caught(|| panic!("boom {}", 2));
        let other = caught(|| std::panic::panic_any(7_u8));
        assert_eq!(panic_message(&*literal), Some("boom"));
        assert_eq!(panic_message(&*formatted), Some("boom 2"));
        assert_eq!(panic_message(&*other), None);
    }

    #[test]
    fn has_chars_is_a_count_of_chars_against_n() {
        // One-, two-, three- and four-byte characters, alone and mixed, around every `n` at
        // which the byte shortcuts and the count meet.
        for unit in ["a", "é", "€", "😀", "a😀é"] {
            for repeat in 0..12 {
                let text = unit.repeat(repeat);
                let chars = text.chars().count();
                for n in 0..=text.len() + 2 {
                    assert_eq!(has_chars(&text, n), chars >= n, "{text:?} against {n}");
                }
            }
        }
    }

    #[test]
    fn separators_fall_every_three_digits() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1_000), "1,000");
        assert_eq!(thousands(12_345_678), "12,345,678");
        assert_eq!(plural(0, "file", "files"), "0 files");
        assert_eq!(plural(1_000, "file", "files"), "1,000 files");
        assert_eq!(thousands(usize::MAX), "18,446,744,073,709,551,615");
        for n in [0, 7, 10, 99, 100, 1_001, 65_536, 1_000_000_007] {
            assert_eq!(thousands(n).replace(',', ""), n.to_string());
            let mut s = String::from("#");
            push_decimal(&mut s, n);
            assert_eq!(s, format!("#{n}"));
        }
    }

    #[test]
    fn percentages_keep_one_decimal_only_when_there_is_one() {
        assert_eq!(percent(0.9), "90%");
        assert_eq!(percent(0.925), "92.5%");
        assert_eq!(percent(1.0), "100%");
        assert_eq!(percent(0.0), "0%");
    }

    #[test]
    fn byte_cuts_never_split_a_character() {
        let s = "aé日";
        assert_eq!(utf8_prefix(s, 2), "a");
        assert_eq!(utf8_prefix(s, 3), "aé");
        assert_eq!(utf8_prefix(s, 99), s);
        assert_eq!(utf8_suffix(s, 2), "");
        assert_eq!(utf8_suffix(s, 4), "日");
        assert_eq!(utf8_suffix(s, 5), "é日");
        assert_eq!(utf8_suffix(s, 99), s);
    }

    #[test]
    fn char_cuts_count_characters_and_mark_the_cut() {
        assert_eq!(prefix_chars("héllo", 2), "hé");
        assert_eq!(prefix_chars("hé", 5), "hé");
        assert_eq!(cut_chars("hello", 10), "hello");
        assert_eq!(cut_chars("hello", 5), "hello");
        assert_eq!(cut_chars("hello world", 6), "hello…");
        assert_eq!(cut_chars("héllo", 2), "hé…");
        assert_eq!(ellipsize("hello world", 6), "hello …");
        assert_eq!(ellipsize("hello", 5), "hello");
    }

    #[test]
    fn one_line_folds_white_space() {
        assert_eq!(one_line("  a\n\tb  c \r\n"), "a b c");
        assert_eq!(one_line("\n \n"), "");
    }
}
