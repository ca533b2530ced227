//! JSONL text: its lines parsed, and an incomplete last line set aside.
//!
//! A session still being written ends in a line cut short. That line is not read: it is kept
//! whole (with whatever follows it) as the document's tail, written back byte for byte after the
//! lines, and a warning says so. Any other line that is not JSON is an error naming its line and
//! column.
//!
//! ```text
//! {"type":"user",...}\n{"type":"assistant",...}\n{"type":"assi      ← the tail, 3rd line
//! ```

use crate::error::Ctx;
use crate::json::Result;
use serde_json::Value;
use std::ops::Range;

/// The parsed lines of a JSONL text: each a JSON tree, or what a format's own line reader made
/// of it ([`parse_with`]).
pub(crate) struct Lines<'t, T = Value> {
    /// Every complete non-empty line, with its 1-based number.
    pub values: Vec<(usize, T)>,
    /// Where each value's line is in the text (without its line end; trailing spaces in).
    pub spans: Vec<Range<usize>>,
    /// The text the values were read from: all of it, or what comes before the tail.
    pub body: &'t str,
    /// The incomplete last line and what follows it (empty: none).
    pub tail: &'t str,
}

impl<'t, T> Lines<'t, T> {
    /// The same lines, each value made another (`f`).
    pub(crate) fn map<U>(self, mut f: impl FnMut(T) -> U) -> Lines<'t, U> {
        Lines {
            values: self.values.into_iter().map(|(n, v)| (n, f(v))).collect(),
            spans: self.spans,
            body: self.body,
            tail: self.tail,
        }
    }
}

/// Parses every non-empty line. The last non-empty line, when it is JSON cut short (and not the
/// only one), becomes the tail with a warning instead of an error.
pub(crate) fn parse<'t>(text: &'t str, ctx: &Ctx<'_>) -> Result<Lines<'t>> {
    parse_with(text, ctx, |line| serde_json::from_str::<Value>(line))
}

/// Every non-empty line of `text`: its 1-based number, where it starts, where the line after
/// it starts, and its text without its line end (`\n`, or `\r\n`). The line ends are found
/// with `memchr` (vectorized): `str::split` went a word at a time, 2 instructions a byte, a
/// twentieth of a long Claude Code session's turn (its input split, and its output read back).
pub(crate) fn non_empty(text: &str) -> impl Iterator<Item = (usize, usize, usize, &str)> {
    non_empty_from(text, (0, 0))
}

/// [`non_empty`] from the line that starts at byte `start`, numbered on from `number` (the
/// number of the line before it; the line at `start` is `number + 1`).
pub(crate) fn non_empty_from(
    text: &str,
    (mut start, mut number): (usize, usize),
) -> impl Iterator<Item = (usize, usize, usize, &str)> {
    // Each line ends at a `\n`; the last one at the end of the text.
    let from = text.as_bytes().get(start..).unwrap_or_default();
    let mut ends = memchr::memchr_iter(b'\n', from)
        .map(move |end| end + start)
        .chain(std::iter::once(text.len()));
    std::iter::from_fn(move || loop {
        let end = ends.next()?;
        let line_start = start;
        let line = &text[line_start..end];
        start = end + 1;
        number += 1;
        let line = line.strip_suffix('\r').unwrap_or(line);
        if !line.trim().is_empty() {
            return Some((number, line_start, start, line));
        }
    })
}

/// [`parse`], each line read by `read` (which fails as `serde_json::from_str` does on a line
/// that is not JSON: the error and the tail are decided by it).
pub(crate) fn parse_with<'t, T: Send>(
    text: &'t str,
    ctx: &Ctx<'_>,
    read: impl Fn(&str) -> serde_json::Result<T> + Sync,
) -> Result<Lines<'t, T>> {
    parse_with_from(text, (0, 0), ctx, read)
}

/// [`parse_with`] of the lines from the one that starts at byte `start`, numbered on from
/// `number` ([`non_empty_from`]); the spans, the body and the tail are still `text`'s. Lines
/// before `start` (`start > 0`) count as lines read: a line cut short at the end is then the
/// tail even when it is the only one from `start`.
pub(crate) fn parse_with_from<'t, T: Send>(
    text: &'t str,
    from: (usize, usize),
    ctx: &Ctx<'_>,
    read: impl Fn(&str) -> serde_json::Result<T> + Sync,
) -> Result<Lines<'t, T>> {
    // Each line is a JSON text of its own: they are parsed on every core (a Claude Code
    // session's lines were half of a turn's instructions, on one), then taken in order, so the
    // first bad line is the one reported, as when they were parsed one by one.
    let found: Vec<(usize, usize, usize, &str)> = non_empty_from(text, from).collect();
    let parsed = crate::parallel::map_in_order(found.iter().map(|f| f.3).collect(), read);
    let mut values = Vec::with_capacity(found.len());
    let mut spans = Vec::with_capacity(found.len());
    for ((number, line_start, next, line), value) in found.into_iter().zip(parsed) {
        match value {
            Ok(value) => {
                values.push((number, value));
                spans.push(line_start..line_start + line.len());
            }
            Err(e) => {
                let rest = text.get(next.min(text.len())..).unwrap_or_default();
                let last = rest.trim().is_empty();
                if last && e.is_eof() && (!values.is_empty() || from.0 > 0) {
                    ctx.warn(format!(
                        "line {number} is incomplete (a session still being written?): it is \
                         carried through untouched and not read"
                    ));
                    return Ok(Lines {
                        values,
                        spans,
                        body: &text[..line_start],
                        tail: &text[line_start..],
                    });
                }
                return Err(ctx.at_line(number).invalid_json(&e));
            }
        }
    }
    Ok(Lines {
        values,
        spans,
        body: text,
        tail: "",
    })
}

/// Where `text`'s first `\n` is. `memchr`, not `str::find`: a compact JSON body has none, so
/// the whole text is searched, and the portable search walked a 3.2 MB one at about a byte per
/// instruction (the style, CRLF and JSONL checks each search it).
pub(crate) fn first_line_break(text: &str) -> Option<usize> {
    memchr::memchr(b'\n', text.as_bytes())
}

/// Whether the text's lines end with CRLF (decided by its first line end).
pub(crate) fn is_crlf(text: &str) -> bool {
    first_line_break(text).is_some_and(|i| text[..i].ends_with('\r'))
}

/// Whether the first non-empty line is a JSON value of its own (the file is JSONL).
pub(crate) fn first_line_parses(text: &str) -> bool {
    // A text of one line (a compact JSON body) is not walked to find its first line.
    first_line_break(text.trim()).is_some()
        && text
            .lines()
            .find(|l| !l.trim().is_empty())
            .is_some_and(|l| serde_json::from_str::<Value>(l).is_ok())
}

/// `\n` → `\r\n` in output that has only `\n` line ends (serialized JSON never holds a raw line
/// break inside a string).
pub(crate) fn to_crlf(out: &[u8]) -> Vec<u8> {
    let breaks = out.iter().filter(|b| **b == b'\n').count();
    let mut crlf = Vec::with_capacity(out.len() + breaks);
    for &b in out {
        if b == b'\n' {
            crlf.push(b'\r');
        }
        crlf.push(b);
    }
    crlf
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::notes::Notes;

    #[test]
    fn an_incomplete_last_line_is_the_tail() {
        let notes = Notes::default();
        let ctx = Ctx::with_notes("s.jsonl", &notes);
        let text = "{\"a\":1}\n{\"b\":2}\n{\"c\":\"unfini";
        let lines = parse(text, &ctx).unwrap();
        assert_eq!(lines.values.len(), 2);
        assert_eq!(lines.body, "{\"a\":1}\n{\"b\":2}\n");
        assert_eq!(lines.tail, "{\"c\":\"unfini");
        // Cut short but followed by a newline and blank lines: still the last line.
        let lines = parse("{\"a\":1}\r\n{\"b\":\r\n\r\n", &ctx).unwrap();
        assert_eq!(lines.tail, "{\"b\":\r\n\r\n");
        assert_eq!(notes.into_warnings().len(), 2);
    }

    /// The lines found are `str::split`'s at `\n` that are not blank: numbers, starts, the
    /// next line's start and texts without `\r`.
    #[test]
    fn non_empty_lines_are_the_split_lines_not_blank() {
        let by_split = |text: &str| -> Vec<(usize, usize, usize, String)> {
            let mut start = 0;
            let mut out = Vec::new();
            for (i, line) in text.split('\n').enumerate() {
                let line_start = start;
                start += line.len() + 1;
                let line = line.strip_suffix('\r').unwrap_or(line);
                if !line.trim().is_empty() {
                    out.push((i + 1, line_start, start, line.to_string()));
                }
            }
            out
        };
        let mut texts: Vec<String> = [
            "",
            "\n",
            "{}",
            "{}\n",
            "a\r\n\r\n  \n\tb\nc",
            "\n\n é \r\n\u{2028}\nlast\r",
            " \r",
        ]
        .map(String::from)
        .to_vec();
        texts.extend(
            crate::tests::support::fixture_files()
                .into_iter()
                .filter_map(|p| std::fs::read_to_string(p).ok()),
        );
        for text in &texts {
            let found: Vec<_> = non_empty(text)
                .map(|(n, s, e, l)| (n, s, e, l.to_string()))
                .collect();
            assert_eq!(found, by_split(text), "{:?}", &text[..text.len().min(40)]);
        }
    }

    /// Enough lines to be parsed on several threads: the same values, the first bad line the
    /// one reported, an incomplete last line the tail.
    #[test]
    fn many_lines_read_as_one_by_one() {
        let good: Vec<String> = (0..700).map(|i| format!("{{\"n\":{i}}}")).collect();
        let ctx = Ctx::new("s.jsonl");
        let text = good.join("\r\n") + "\n\n";
        let lines = parse(&text, &ctx).unwrap();
        assert_eq!(lines.values.len(), 700);
        for (k, (number, value)) in lines.values.iter().enumerate() {
            assert_eq!((*number, value["n"].as_u64()), (k + 1, Some(k as u64)));
            assert_eq!(&text[lines.spans[k].clone()], good[k]);
        }
        let mut bad = good.clone();
        bad[650] = "{\"late\" 1}".into();
        bad[400] = "{\"first\":".into();
        let e = parse(&bad.join("\n"), &ctx).err().unwrap();
        assert!(
            e.to_string().starts_with("s.jsonl:401: invalid JSON"),
            "{e}"
        );
        let notes = Notes::default();
        let ctx = Ctx::with_notes("s.jsonl", &notes);
        let cut = good.join("\n") + "\n{\"n\":";
        let lines = parse(&cut, &ctx).unwrap();
        assert_eq!(lines.values.len(), 700);
        assert_eq!(lines.tail, "{\"n\":");
        assert_eq!(notes.into_warnings().len(), 1);
    }

    #[test]
    fn other_bad_lines_are_errors() {
        let ctx = Ctx::new("s.jsonl");
        // Not the last line.
        let e = parse("{\"a\":1}\n{\"b\":\n{\"c\":3}\n", &ctx)
            .err()
            .unwrap();
        assert!(e.to_string().starts_with("s.jsonl:2: invalid JSON"), "{e}");
        // The last line, but not cut short: a syntax error.
        let e = parse("{\"a\":1}\n{\"b\" 2}\n", &ctx).err().unwrap();
        assert!(e.to_string().starts_with("s.jsonl:2: invalid JSON"), "{e}");
        // The only line.
        assert!(parse("{\"a\":", &ctx).is_err());
    }

    /// A long file: every value with its span, the first bad line the error (not a later
    /// one), a cut last line the tail.
    #[test]
    fn a_long_file_reads_as_one_line_at_a_time() {
        let line = |i: usize| format!("{{\"n\":{i},\"text\":\"line \\\"{i}\\\"\"}}");
        let mut text: String = (0..900)
            .map(|i| line(i) + if i % 7 == 0 { "\r\n\n" } else { "\n" })
            .collect();
        let ctx = Ctx::new("long.jsonl");
        let lines = parse(&text, &ctx).unwrap();
        assert_eq!(lines.values.len(), 900);
        for (k, ((number, value), span)) in lines.values.iter().zip(&lines.spans).enumerate() {
            assert_eq!(value["n"], k, "line {number}");
            assert_eq!(&text[span.clone()], line(k));
        }
        // Two bad lines: the first one in the file is the error, wherever the runs split.
        let bad = text
            .replacen(&line(700), "{\"n\":", 1)
            .replacen(&line(300), "{\"n\" 1}", 1);
        let e = parse(&bad, &ctx).err().unwrap().to_string();
        let at = bad.lines().position(|l| l == "{\"n\" 1}").unwrap() + 1;
        assert!(
            e.starts_with(&format!("long.jsonl:{at}: invalid JSON")),
            "{e}"
        );
        // The last line cut short: the tail, with one warning.
        text.push_str("{\"n\":9");
        let notes = Notes::default();
        let lines = parse(&text, &Ctx::with_notes("long.jsonl", &notes)).unwrap();
        assert_eq!((lines.values.len(), lines.tail), (900, "{\"n\":9"));
        assert_eq!(notes.into_warnings().len(), 1);
    }

    #[test]
    fn crlf_is_detected_and_written() {
        assert!(is_crlf("{}\r\n{}\r\n"));
        assert!(!is_crlf("{}\n{}\r\n"));
        assert!(!is_crlf("{}"));
        assert_eq!(to_crlf(b"{\n  \"a\": 1\n}\n"), b"{\r\n  \"a\": 1\r\n}\r\n");
    }
}
