//! Small text helpers of the record's own: first lines marked where cut, case-insensitive
//! search without allocating, stable keys, Markdown code spans that never escape their content.
//! The general cuts (`prefix_chars`, `cut_chars`) are `condense-text`'s.

use condense_text::prefix_chars;
use std::borrow::Cow;

/// The first line of `s` (trimmed), cut to `max` characters; `…` marks anything left out
/// (the rest of the line or further lines). Borrowed from `s` when nothing was left out, so a
/// renderer can compare it with other forms of `s` without allocating.
pub(crate) fn first_line_marked(s: &str, max: usize) -> Cow<'_, str> {
    // Most requests are one short line, neither starting nor ending with whitespace: then the
    // line is `s` itself (a running summary asks this of every request it keeps, at every
    // commit, and trimming and splitting cost several times the check).
    let edges_bare =
        |s: &str| !s.starts_with(char::is_whitespace) && !s.ends_with(char::is_whitespace);
    if s.len() <= max && edges_bare(s) && memchr::memchr(b'\n', s.as_bytes()).is_none() {
        return Cow::Borrowed(s);
    }
    first_line_cut(s, max)
}

/// [`first_line_marked`] without its shortcut.
fn first_line_cut(s: &str, max: usize) -> Cow<'_, str> {
    let trimmed = s.trim();
    let first = trimmed.split('\n').next().unwrap_or("").trim();
    // At most `max` bytes is at most `max` characters: no need to walk them.
    let head = if first.len() <= max {
        first
    } else {
        prefix_chars(first, max)
    };
    if head.len() == trimmed.len() {
        Cow::Borrowed(head)
    } else {
        Cow::Owned(format!("{}…", head.trim_end()))
    }
}

/// Byte offset of the first ASCII-case-insensitive occurrence of `needle` (ASCII) in `hay`,
/// from `from`. No allocation. (The tests' plain reference for faster searches.)
#[cfg(test)]
pub(crate) fn find_ci(hay: &str, needle: &str, from: usize) -> Option<usize> {
    let (h, n) = (hay.as_bytes(), needle.as_bytes());
    let first = *n.first()?;
    if h.len() < n.len() {
        return None;
    }
    (from..=h.len() - n.len())
        .find(|&i| h[i].eq_ignore_ascii_case(&first) && h[i..i + n.len()].eq_ignore_ascii_case(n))
}

/// A stable 64-bit FNV-1a hash as 16 hex digits (the same on every platform and run).
pub(crate) fn stable_hash(s: &str) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in s.as_bytes() {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    format!("{h:016x}")
}

/// `text` as a Markdown code span that holds it verbatim: the backtick fence is one longer than
/// the longest backtick run inside, and a space pads each side when the text starts or ends with
/// a backtick or a space (CommonMark strips exactly one such pair). [`read_code_span`] reads it
/// back.
#[cfg(test)]
pub(crate) fn code_span(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 4);
    push_code_span(&mut out, text);
    out
}

/// A code span (as the test-only `code_span` makes it) appended to `out`: a running summary renders hundreds of paths at every
/// commit, and a string for each was most of what rendering them cost.
pub(crate) fn push_code_span(out: &mut String, text: &str) {
    let fence = longest_backtick_run(text) + 1;
    let pad = text.starts_with(['`', ' ']) || text.ends_with(['`', ' ']);
    let push_fence = |out: &mut String| out.extend(std::iter::repeat_n('`', fence));
    push_fence(out);
    if pad {
        out.push(' ');
    }
    out.push_str(text);
    if pad {
        out.push(' ');
    }
    push_fence(out);
}

/// The longest run of backticks in `text`.
pub(crate) fn longest_backtick_run(text: &str) -> usize {
    let (mut best, mut run) = (0, 0);
    // By bytes: a backtick is ASCII, and no byte of a multi-byte character is one.
    for c in text.bytes() {
        if c == b'`' {
            run += 1;
            best = best.max(run);
        } else {
            run = 0;
        }
    }
    best
}

/// A piece of a Markdown line: plain text, or a code span's content.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Piece<'a> {
    Plain(&'a str),
    Code(String),
}

/// Splits a line into plain text and code spans (CommonMark rules: a span closes at the next
/// backtick run of the same length; one space is stripped from each side when both sides have
/// one and the content is not all spaces). An unclosed run is plain text.
pub(crate) fn read_code_spans(line: &str) -> Vec<Piece<'_>> {
    let bytes = line.as_bytes();
    let mut pieces = Vec::new();
    let mut plain_start = 0;
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] != b'`' {
            i += 1;
            continue;
        }
        let open_start = i;
        while i < bytes.len() && bytes[i] == b'`' {
            i += 1;
        }
        let n = i - open_start;
        // Find a closing run of exactly n backticks.
        let mut j = i;
        let mut close = None;
        while j < bytes.len() {
            if bytes[j] == b'`' {
                let run_start = j;
                while j < bytes.len() && bytes[j] == b'`' {
                    j += 1;
                }
                if j - run_start == n {
                    close = Some(run_start);
                    break;
                }
            } else {
                j += 1;
            }
        }
        let Some(close) = close else {
            continue; // an unclosed run stays plain text
        };
        if open_start > plain_start {
            pieces.push(Piece::Plain(&line[plain_start..open_start]));
        }
        pieces.push(Piece::Code(read_code_span(&line[i..close])));
        i = close + n;
        plain_start = i;
    }
    if plain_start < line.len() {
        pieces.push(Piece::Plain(&line[plain_start..]));
    }
    pieces
}

/// A code span's content as [`push_code_span`] wrote it: one padding space stripped from each side
/// when both are there and the content is not all spaces.
pub(crate) fn read_code_span(inner: &str) -> String {
    let padded = inner.len() >= 2
        && inner.starts_with(' ')
        && inner.ends_with(' ')
        && !inner.chars().all(|c| c == ' ');
    if padded {
        inner[1..inner.len() - 1].to_string()
    } else {
        inner.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shortcut_gives_what_cutting_gives() {
        let pieces = [
            "", "a", "fix it", " ", "\t", "\r", "\n", "\u{a0}", "\u{2003}", "é", "x\ny", "`",
        ];
        let mut cases = Vec::new();
        for a in pieces {
            for b in pieces {
                for c in pieces {
                    cases.push(format!("{a}{b}{c}"));
                }
            }
        }
        cases.push("word ".repeat(30));
        cases.push("word".repeat(25));
        for s in &cases {
            for max in [0, 1, 3, 6, 8, 100] {
                assert_eq!(
                    first_line_marked(s, max),
                    first_line_cut(s, max),
                    "{s:?} {max}"
                );
            }
        }
    }

    #[test]
    fn cutting() {
        assert_eq!(first_line_marked("  fix it\nplease ", 100), "fix it…");
        assert_eq!(first_line_marked("fix it", 3), "fix…");
        assert_eq!(first_line_marked("fix it", 10), "fix it");
    }

    #[test]
    fn case_insensitive_find() {
        assert_eq!(find_ci("Process EXITED with", "exited", 0), Some(8));
        assert_eq!(find_ci("abc", "abcd", 0), None);
        assert_eq!(find_ci("exit code exit code", "exit code", 1), Some(10));
        assert_eq!(find_ci("é exit", "EXIT", 0), Some(3));
    }

    #[test]
    fn code_spans_round_trip() {
        for text in [
            "src/a.rs",
            "a`b",
            "`start",
            "end`",
            "two``runs`",
            " spaced ",
            "x y",
        ] {
            let span = code_span(text);
            let pieces = read_code_spans(&span);
            assert_eq!(
                pieces,
                vec![Piece::Code(text.to_string())],
                "{text} as {span}"
            );
        }
        let line = format!(
            "- {}: created {}, {}",
            code_span("d/"),
            code_span("d/a"),
            code_span("d/`b")
        );
        let codes: Vec<_> = read_code_spans(&line)
            .into_iter()
            .filter_map(|p| match p {
                Piece::Code(c) => Some(c),
                Piece::Plain(_) => None,
            })
            .collect();
        assert_eq!(codes, vec!["d/", "d/a", "d/`b"]);
        assert_eq!(
            read_code_spans("no `close"),
            vec![Piece::Plain("no `close")]
        );
    }

    #[test]
    fn hash_is_stable() {
        assert_eq!(stable_hash(""), "cbf29ce484222325");
        assert_ne!(stable_hash("a"), stable_hash("b"));
    }
}
