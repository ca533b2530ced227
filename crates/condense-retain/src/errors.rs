//! Error results and their first meaningful line.
//!
//! A tool result is an *error result* when any of:
//!
//! 1. `is_error == Some(true)`;
//! 2. its text shows a non-zero exit status: `<returncode>N</returncode>` (mini-swe-agent),
//!    `exit code N` in any case with an optional `:` or `=` (`[Command finished with exit code
//!    N]`, Codex's first line `Exit code: N`), `exited with code N` (`Process exited with code
//!    N`); or the message envelope's `extras.metadata.exit_code` is a non-zero number
//!    (OpenHands);
//! 3. its text holds a Python traceback (`Traceback (most recent call last):`).
//!
//! Its *first meaningful line*: the text without the wrapper tags (the whole
//! `<returncode>N</returncode>` element, and the tags `<output>`, `</output>`,
//! `<tool_use_error>`, `</tool_use_error>`, `<error>`, `</error>`, whose content stays); with a
//! traceback, the exception line ending it (the first line after the `Traceback` header that is
//! neither empty nor indented); otherwise the first non-empty line that is not a warning
//! (`warning`, `npm warn`, `warn `, any case, at its start) and contains an error word
//! (`error`, `Error`, `ERROR`, `FAIL`, `fatal`, `panicked`, `Exception`, `No such file`,
//! `not found`, `cannot`, `Cannot`, `denied`, `Denied`, `invalid`, `Invalid`, `failed`,
//! `Failed`, `malformed`, `Unknown`, `unknown`, `refused`); otherwise the first non-empty line
//! that is not a warning; otherwise the first non-empty line. The header Codex writes before a
//! command's output (`Chunk ID:`, `Wall time:`, `Process exited with code N`, `Exit code: N`,
//! `Original token count:`, `Output:` lines at the start) is left out first: a result that is
//! only that header has no line. (npm prints `npm warn Unknown env
//! config ...` before the real `error TS2307: ...`: a warning is never the error.) Lines are trimmed, then cut to 200 characters. An empty text has no line.

use condense_formats::openhands::failed_exit;
use condense_model::{Block, Content, RawJson, ToolResult};
use condense_text::prefix_chars;
use memchr::memmem;
use std::sync::LazyLock;

/// Characters kept of an error line.
pub const ERROR_LINE_CHARS: usize = 200;

const TRACEBACK: &str = "Traceback (most recent call last):";

/// [`TRACEBACK`]'s searcher: every tool result of a session is searched for it, and std's
/// `str::contains` checks a needle this long (over 32 bytes) a byte at a time, where memchr's
/// searcher is vectorized (2.4% of a first run at 1M tokens went to the search).
static TRACEBACK_SEARCH: LazyLock<memmem::Finder<'static>> =
    LazyLock::new(|| memmem::Finder::new(TRACEBACK));

/// Where [`TRACEBACK`] first occurs in `text`.
fn find_traceback(text: &str) -> Option<usize> {
    TRACEBACK_SEARCH.find(text.as_bytes())
}

const ERROR_WORDS: [&str; 21] = [
    "error",
    "Error",
    "ERROR",
    "FAIL",
    "fatal",
    "panicked",
    "Exception",
    "No such file",
    "not found",
    "cannot",
    "Cannot",
    "denied",
    "Denied",
    "invalid",
    "Invalid",
    "failed",
    "Failed",
    "malformed",
    "Unknown",
    "unknown",
    "refused",
];

const WRAPPER_TAGS: [&str; 6] = [
    "<output>",
    "</output>",
    "<tool_use_error>",
    "</tool_use_error>",
    "<error>",
    "</error>",
];

/// Calls `f` on every text piece of `content` (text blocks, nested tool results) until it
/// returns true.
fn any_piece(content: &Content, f: &mut dyn FnMut(&str) -> bool) -> bool {
    content.blocks.iter().any(|b| match b {
        Block::Text(t) => f(&t.text),
        Block::ToolResult(tr) => any_piece(&tr.content, f),
        _ => false,
    })
}

/// The integer starting at `s` after optional spaces and one optional `:` or `=`.
fn number_after(s: &str) -> Option<i64> {
    let s = s.trim_start_matches([' ', '\t']);
    let s = s
        .strip_prefix([':', '='])
        .unwrap_or(s)
        .trim_start_matches([' ', '\t']);
    let end = s
        .char_indices()
        .find(|(i, c)| !(c.is_ascii_digit() || (*i == 0 && (*c == '-' || *c == '+'))))
        .map_or(s.len(), |(i, _)| i);
    s[..end].parse().ok()
}

/// The exit phrases, in any ASCII case. Both start with `exit`.
const EXIT_PHRASES: [&str; 2] = ["exit code", "exited with code"];

/// Byte offsets where `exit` starts, in any ASCII case, in order. Found through its `x`, a
/// rare letter, with the standard library's fast byte search: scanning every byte for an
/// `e` of either case was most of the time a stage spent telling errors from other results.
fn exit_starts(piece: &str) -> impl Iterator<Item = usize> + '_ {
    let bytes = piece.as_bytes();
    let next = |c: char, from: usize| piece[from..].find(c).map_or(bytes.len(), |i| from + i);
    let (mut lower, mut upper) = (next('x', 0), next('X', 0));
    std::iter::from_fn(move || loop {
        let x = lower.min(upper);
        if x >= bytes.len() {
            return None;
        }
        if x == lower {
            lower = next('x', x + 1);
        } else {
            upper = next('X', x + 1);
        }
        if x >= 1 && bytes.len() - (x - 1) >= 4 && bytes[x - 1..x + 3].eq_ignore_ascii_case(b"exit")
        {
            return Some(x - 1);
        }
    })
}

/// Whether a text piece shows a non-zero exit status.
fn nonzero_exit(piece: &str) -> bool {
    // Each phrase's occurrences as a search from the end of the previous one finds them
    // (a case-insensitive search from there): one pass over the `exit`s serves both.
    let mut from = [0; 2];
    for at in exit_starts(piece) {
        for (k, phrase) in EXIT_PHRASES.iter().enumerate() {
            let end = at + phrase.len();
            if at < from[k]
                || end > piece.len()
                || !piece.as_bytes()[at..end].eq_ignore_ascii_case(phrase.as_bytes())
            {
                continue;
            }
            if number_after(&piece[end..]).is_some_and(|n| n != 0) {
                return true;
            }
            from[k] = end;
        }
    }
    nonzero_returncode(piece)
}

/// Whether a `<returncode>` element (mini-swe-agent's observations) holds a non-zero number.
fn nonzero_returncode(piece: &str) -> bool {
    let mut rest = piece;
    while let Some(at) = rest.find("<returncode>") {
        rest = &rest[at + "<returncode>".len()..];
        let end = rest.find("</returncode>").unwrap_or(rest.len());
        if rest[..end].trim().parse::<i64>().is_ok_and(|n| n != 0) {
            return true;
        }
    }
    false
}

/// Whether `result` is an error result (see the module docs). `envelope` is its message's.
/// Cheap when it is not: no text is copied.
pub fn is_error_result(result: &ToolResult, envelope: &RawJson) -> bool {
    result.is_error == Some(true)
        || failed_exit(envelope)
        || any_piece(&result.content, &mut |p| {
            find_traceback(p).is_some() || nonzero_exit(p)
        })
}

/// The first meaningful line of an error result, cut to 200 chars; `None` when the result is
/// not an error result or its text has no non-empty line. `envelope` is the message's.
///
/// ```
/// use condense_model::{Content, RawJson, ToolResult};
/// use condense_retain::error_line;
///
/// let out = "<returncode>1</returncode>\n<output>\nTraceback (most recent call last):\n  File \"x.py\", line 1\nKeyError: 'user'\n</output>";
/// let result = ToolResult::new("call_1", Content::string(out));
/// assert_eq!(error_line(&result, &RawJson::default()).as_deref(), Some("KeyError: 'user'"));
///
/// let fine = ToolResult::new("call_2", Content::string("<returncode>0</returncode>\n<output>\nok\n</output>"));
/// assert_eq!(error_line(&fine, &RawJson::default()), None);
/// ```
pub fn error_line(result: &ToolResult, envelope: &RawJson) -> Option<String> {
    if !is_error_result(result, envelope) {
        return None;
    }
    meaningful_line(&result.content.text())
}

/// The first meaningful line of an error result's text (see the module docs).
pub fn meaningful_line(text: &str) -> Option<String> {
    let cleaned = strip_wrappers(without_exec_header(text));
    let lines = || cleaned.split('\n').map(str::trim).filter(|l| !l.is_empty());
    let exception = find_traceback(&cleaned).and_then(|at| {
        let after = &cleaned[at..];
        after
            .split('\n')
            .skip(1)
            .find(|l| !l.trim().is_empty() && !l.starts_with([' ', '\t']))
            .map(str::trim)
    });
    let line = exception
        .or_else(|| lines().find(|l| !is_warning(l) && ERROR_WORDS.iter().any(|w| l.contains(w))))
        .or_else(|| lines().find(|l| !is_warning(l)))
        .or_else(|| lines().next())?;
    Some(prefix_chars(line, ERROR_LINE_CHARS).to_string())
}

/// The header Codex puts before a command's output (`Chunk ID:`, `Wall time:`, `Process exited
/// with code N`, `Exit code: N`, `Original token count:`, `Output:`): what follows it. Its lines
/// say how the command ran, not what went wrong; the exit status alone is no line.
fn without_exec_header(text: &str) -> &str {
    const HEADER: [&str; 6] = [
        "Chunk ID:",
        "Wall time:",
        "Process exited with code",
        "Exit code:",
        "Original token count:",
        "Output:",
    ];
    let mut rest = text;
    loop {
        let (line, after) = rest.split_once('\n').unwrap_or((rest, ""));
        if HEADER.iter().any(|h| line.trim_start().starts_with(h)) {
            rest = after;
        } else {
            return rest;
        }
    }
}

fn is_warning(line: &str) -> bool {
    let l = line.as_bytes();
    ["warning", "npm warn", "warn "]
        .iter()
        .any(|w| l.len() >= w.len() && l[..w.len()].eq_ignore_ascii_case(w.as_bytes()))
}

/// `text` without `<returncode>…</returncode>` elements and the other wrapper tags.
fn strip_wrappers(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("<returncode>") {
        out.push_str(&rest[..at]);
        let after = &rest[at..];
        rest = match after.find("</returncode>") {
            Some(end) => &after[end + "</returncode>".len()..],
            None => &after["<returncode>".len()..],
        };
    }
    out.push_str(rest);
    for tag in WRAPPER_TAGS {
        if out.contains(tag) {
            out = out.replace(tag, "");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::text::find_ci;
    use condense_model::Content;

    /// The plain search `nonzero_exit` must agree with: each phrase's occurrences one after
    /// the other (the return code is the same scan on both sides).
    fn nonzero_exit_reference(piece: &str) -> bool {
        for phrase in EXIT_PHRASES {
            let mut from = 0;
            while let Some(at) = find_ci(piece, phrase, from) {
                let after = at + phrase.len();
                if number_after(&piece[after..]).is_some_and(|n| n != 0) {
                    return true;
                }
                from = after;
            }
        }
        nonzero_returncode(piece)
    }

    #[test]
    fn the_exit_search_agrees_with_the_plain_one() {
        // Pieces cut from words around the phrases, overlapping ones included
        // (`exit codexit code 1`: the second starts inside the first, so it is not seen).
        let parts = [
            "exit",
            "EXIT",
            "eXiT",
            " code",
            " CODE",
            "ed with code",
            "ED WITH CODE",
            " 1",
            "0",
            ": 2",
            "=-3",
            "x",
            "X",
            "e",
            "é",
            "ex",
            "it",
            "\n",
            "<returncode>1</returncode>",
            "codexit code 1",
            "exited",
            " with",
            "code 7",
        ];
        let mut seed: u64 = 42;
        let mut next = || {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (seed >> 33) as usize
        };
        let mut positive = 0;
        for _ in 0..20_000 {
            let n = next() % 7;
            let piece: String = (0..n).map(|_| parts[next() % parts.len()]).collect();
            let expected = nonzero_exit_reference(&piece);
            assert_eq!(nonzero_exit(&piece), expected, "{piece:?}");
            positive += usize::from(expected);
        }
        assert!(positive > 1000, "{positive}");
        assert!(!nonzero_exit("exit codexit code 1"));
        assert!(nonzero_exit("Process EXITED with code 2"));
        assert!(nonzero_exit("é exit code: 1"));
        assert!(!nonzero_exit("exit code 0; exited with code 0"));
    }

    fn result(text: &str, is_error: Option<bool>) -> ToolResult {
        ToolResult {
            is_error,
            ..ToolResult::new("t", Content::string(text))
        }
    }

    fn line(text: &str) -> Option<String> {
        error_line(&result(text, None), &RawJson::default())
    }

    fn flagged(text: &str) -> Option<String> {
        error_line(&result(text, Some(true)), &RawJson::default())
    }

    #[test]
    fn a_codex_exec_header_is_not_the_error() {
        let out = "Chunk ID: 1d7024\nWall time: 0.0000 seconds\nProcess exited with code 1\nOriginal token count: 9\nOutput:\nzsh:1: operation not permitted: ps\n";
        assert_eq!(
            meaningful_line(out).as_deref(),
            Some("zsh:1: operation not permitted: ps")
        );
        let empty = "Chunk ID: a642fa\nWall time: 0.0000 seconds\nProcess exited with code 1\nOriginal token count: 0\nOutput:\n";
        assert_eq!(meaningful_line(empty), None);
    }

    #[test]
    fn flagged_results() {
        assert_eq!(
            flagged("<tool_use_error>File has not been read yet. Read it first before writing to it.</tool_use_error>").as_deref(),
            Some("File has not been read yet. Read it first before writing to it.")
        );
        assert_eq!(flagged("Error").as_deref(), Some("Error"));
        assert_eq!(flagged("").as_deref(), None);
        assert_eq!(flagged("  \n ").as_deref(), None);
        // No error word: the first line that is not a warning.
        assert_eq!(
            flagged("warning: x\nWARN y\n\n  something odd  \nmore").as_deref(),
            Some("something odd")
        );
        // Only warnings: the first line.
        assert_eq!(flagged("warning: a\nwarn b").as_deref(), Some("warning: a"));
        // A warning is never the error, even with an error word in it.
        assert_eq!(
            flagged("npm warn Unknown env config \"x\".\n\nsrc/a.ts(6,33): error TS2307: nope")
                .as_deref(),
            Some("src/a.ts(6,33): error TS2307: nope")
        );
        assert_eq!(line("all fine, error-free"), None, "not an error result");
        assert_eq!(
            error_line(&result("boom", Some(false)), &RawJson::default()),
            None
        );
    }

    #[test]
    fn tracebacks() {
        let tb = "Running...\nTraceback (most recent call last):\n  File \"a.py\", line 3, in <module>\n    main()\n\nValueError: bad value\n\nDuring handling of the above exception, another exception occurred:\n\nTraceback (most recent call last):\nKeyError: 'k'";
        assert_eq!(line(tb).as_deref(), Some("ValueError: bad value"));
        // A traceback is an error result even with a zero exit code.
        let tb0 = "<returncode>0</returncode>\n<output>\nTraceback (most recent call last):\n\tFile x\nImportError: no module named y\n</output>";
        assert_eq!(line(tb0).as_deref(), Some("ImportError: no module named y"));
        // A cut-off traceback falls back to the other rules (here: the first line).
        assert_eq!(
            line("Traceback (most recent call last):\n  File \"a.py\"").as_deref(),
            Some("Traceback (most recent call last):")
        );
    }

    #[test]
    fn exit_statuses() {
        // mini-swe-agent: the returncode element is dropped, not read as a line.
        let mini = "<returncode>2</returncode>\n<output>\nls: cannot access 'x': No such file or directory\n</output>";
        assert_eq!(
            line(mini).as_deref(),
            Some("ls: cannot access 'x': No such file or directory")
        );
        assert_eq!(
            line("<returncode>1</returncode>\n<output>\nsome output\n</output>").as_deref(),
            Some("some output")
        );
        assert_eq!(
            line("<returncode>0</returncode>\n<output>\nerror: none\n</output>"),
            None
        );
        // Codex.
        assert_eq!(
            line("Exit code: 1\nWall time: 0.2 seconds\nOutput:\nthread 'main' panicked at src/main.rs:2:5").as_deref(),
            Some("thread 'main' panicked at src/main.rs:2:5")
        );
        assert_eq!(
            line("Exit code: 0\nWall time: 1s\nOutput:\nerror: fine"),
            None
        );
        assert_eq!(
            line("make: *** [all] Error 2\n[Command finished with exit code 2]").as_deref(),
            Some("make: *** [all] Error 2")
        );
        assert_eq!(line("ok\n[Command finished with exit code 0]"), None);
        assert_eq!(
            line("Process exited with code 127\nbash: foo: command not found").as_deref(),
            Some("bash: foo: command not found")
        );
        assert_eq!(
            line("EXIT CODE = -1\nhung").as_deref(),
            Some("EXIT CODE = -1")
        );
        assert_eq!(line("exit codes are documented"), None);
    }

    #[test]
    fn openhands_exit_code_in_the_envelope() {
        let env = |code: &str| {
            RawJson::from_string_unchecked(format!(
                r#"{{"id":6,"observation":"run","content":null,"extras":{{"command":"make","metadata":{{"exit_code":{code},"pid":-1}}}}}}"#
            ))
        };
        let r = result(
            "/bin/sh: 1: cd: can't cd to /w/build\nmake: *** [Makefile:192: build] Error 2",
            None,
        );
        assert_eq!(
            error_line(&r, &env("2")).as_deref(),
            Some("make: *** [Makefile:192: build] Error 2")
        );
        assert_eq!(error_line(&r, &env("0")), None);
        assert_eq!(error_line(&r, &env("0.0")), None);
        // Only `extras.metadata.exit_code` counts.
        let elsewhere = RawJson::from_string_unchecked(
            r#"{"exit_code":1,"extras":{"metadata":{"exit_code":0}}}"#.into(),
        );
        assert_eq!(error_line(&r, &elsewhere), None);
        let text_only = RawJson::from_string_unchecked(r#"{"message":"\"exit_code\": 1"}"#.into());
        assert_eq!(error_line(&r, &text_only), None);
        assert!(error_line(&r, &env("-1")).is_some());
        // A failed command with no output has no meaningful line.
        assert_eq!(error_line(&result("", None), &env("1")), None);
        assert!(is_error_result(&result("", None), &env("1")));
    }

    #[test]
    fn nested_and_multi_block_results() {
        let r = ToolResult::new(
            "t",
            Content::blocks(vec![
                Block::text("first block"),
                Block::tool_result("inner", Content::string("Process exited with code 3")),
            ]),
        );
        assert_eq!(
            error_line(&r, &RawJson::default()).as_deref(),
            Some("first block")
        );
    }

    #[test]
    fn lines_are_cut_at_200_chars() {
        let long = format!("error: {}", "é".repeat(300));
        let got = flagged(&long).unwrap_or_default();
        assert_eq!(got.chars().count(), 200);
        assert!(long.contains(&got));
    }
}
