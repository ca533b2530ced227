//! Error results and their first meaningful line: the error probes.
//!
//! The results looked at are those of the chat messages and of a sub-agent's lines (carried as
//! events with their content). A tool result is an *error result* when its `is_error` is
//! `true`; when its text shows a non-zero exit status (`<returncode>N</returncode>`, `exit code N` in any case, as in `[Command
//! finished with exit code N]`, a first line `Exit code: N`, `Process exited with code N`), or its
//! message's envelope has a non-zero `extras.metadata.exit_code` (OpenHands); or when its text
//! holds a Python traceback.
//!
//! Its *first meaningful line*: with the whole `<returncode>N</returncode>` element and the
//! wrapper tags (`<output>`, `</output>`, `<tool_use_error>`, `</tool_use_error>`, `<error>`,
//! `</error>`) removed, the exception line ending a traceback; else the first line that is not
//! a warning and matches an error pattern (npm's `npm warn Unknown env config ...` is not the
//! error the `error TS2307` line under it is); else the first line that is not a warning; else
//! the first non-empty line. Trimmed, cut to 200 characters. An exit status alone is no line:
//! `<returncode>1</returncode><output></output>` has none (a probe `1` would be found anywhere).
//!
//! ```
//! use condense_eval::probes::errors::first_meaningful_line;
//!
//! let text = "<returncode>1</returncode>\n<output>\nTraceback (most recent call last):\n  File \"x.py\", line 1\nKeyError: 'a'\n</output>";
//! assert_eq!(first_meaningful_line(text).as_deref(), Some("KeyError: 'a'"));
//! let text = "npm warn deprecated x\nnpm ERR! missing script: build";
//! assert_eq!(first_meaningful_line(text).as_deref(), Some("npm ERR! missing script: build"));
//! ```

use super::{push_distinct, work_messages};
use condense_formats::openhands::failed_exit;
use condense_model::{Conversation, ToolResult};
use condense_text::prefix_chars;

/// The longest error line kept, in characters.
pub const MAX_LINE_CHARS: usize = 200;

const TRACEBACK: &str = "Traceback (most recent call last):";

const WRAPPER_TAGS: &[&str] = &[
    "<output>",
    "</output>",
    "<tool_use_error>",
    "</tool_use_error>",
    "<error>",
    "</error>",
];

/// Substrings that make a line an error line (case-sensitive, as listed in the spec).
const ERROR_PATTERNS: &[&str] = &[
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

/// The distinct first meaningful lines of the conversation's error results, in order.
pub fn error_lines(conv: &Conversation) -> Vec<String> {
    let mut out = Vec::new();
    for m in work_messages(conv) {
        let envelope_failed = failed_exit(&m.envelope);
        for tr in m.tool_results() {
            let text = tr.content.text();
            if is_error_result(tr, &text, envelope_failed) {
                if let Some(line) = first_meaningful_line(&text) {
                    push_distinct(&mut out, line);
                }
            }
        }
    }
    out
}

/// Whether a result (with its text, and whether its message's envelope records a non-zero exit
/// code) is an error result.
pub fn is_error_result(tr: &ToolResult, text: &str, envelope_failed: bool) -> bool {
    tr.is_error == Some(true)
        || envelope_failed
        || nonzero_exit_in_text(text)
        || text.contains(TRACEBACK)
}

/// The integer right at the start of `s` (after spaces), if any.
fn leading_int(s: &str) -> Option<i64> {
    let s = s.trim_start_matches([' ', '\t']);
    let end = s
        .char_indices()
        .find(|&(i, c)| !(c.is_ascii_digit() || (i == 0 && c == '-')))
        .map_or(s.len(), |(i, _)| i);
    s[..end].parse().ok()
}

/// Whether any occurrence of `marker` is followed by a non-zero integer (after an optional
/// `:` and spaces).
fn nonzero_after(text: &str, marker: &str) -> bool {
    text.match_indices(marker).any(|(i, _)| {
        let rest = &text[i + marker.len()..];
        let rest = rest.strip_prefix(':').unwrap_or(rest);
        leading_int(rest).is_some_and(|n| n != 0)
    })
}

/// A non-zero exit status shown in the text.
pub fn nonzero_exit_in_text(text: &str) -> bool {
    if let Some(first) = text.lines().next() {
        if let Some(rest) = first.trim_start().strip_prefix("Exit code:") {
            if leading_int(rest).is_some_and(|n| n != 0) {
                return true;
            }
        }
    }
    if nonzero_after(text, "<returncode>") || nonzero_after(text, "Process exited with code") {
        return true;
    }
    // `exit code N` in any case (`[Command finished with exit code 1]`, `Exit code 2`).
    let lower;
    let text = if text.bytes().any(|b| b.is_ascii_uppercase()) {
        lower = text.to_ascii_lowercase();
        lower.as_str()
    } else {
        text
    };
    nonzero_after(text, "exit code")
}

/// The first meaningful line of an error result's text (`None` when the text is empty).
pub fn first_meaningful_line(text: &str) -> Option<String> {
    let mut clean = without_returncode(after_codex_header(text));
    for tag in WRAPPER_TAGS {
        if clean.contains(tag) {
            clean = clean.replace(tag, "");
        }
    }
    let line = traceback_line(&clean)
        .or_else(|| nonempty_lines(&clean).find(|l| !is_warning(l) && is_error_line(l)))
        .or_else(|| nonempty_lines(&clean).find(|l| !is_warning(l)))
        .or_else(|| nonempty_lines(&clean).next())?;
    Some(prefix_chars(line.trim(), MAX_LINE_CHARS).to_string())
}

/// `text` after the lines Codex writes before a command's output (`Chunk ID:`, `Wall time:`,
/// `Process exited with code N`, `Exit code: N`, `Original token count:`, `Output:`), which
/// describe the run, not the error.
fn after_codex_header(text: &str) -> &str {
    let is_header = |line: &str| {
        let l = line.trim();
        [
            "Chunk ID:",
            "Wall time:",
            "Process exited with code",
            "Exit code:",
            "Original token count:",
            "Output:",
        ]
        .iter()
        .any(|h| l.starts_with(h))
    };
    let mut at = 0;
    for line in text.split_inclusive('\n') {
        if !is_header(line) {
            break;
        }
        at += line.len();
    }
    &text[at..]
}

/// `text` without its `<returncode>N</returncode>` elements (mini-swe-agent's exit status).
fn without_returncode(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("<returncode>") {
        out.push_str(&rest[..at]);
        rest = &rest[at..];
        rest = match rest.find("</returncode>") {
            Some(end) => &rest[end + "</returncode>".len()..],
            None => &rest["<returncode>".len()..],
        };
    }
    out.push_str(rest);
    out
}

fn nonempty_lines(text: &str) -> impl Iterator<Item = &str> {
    text.lines().map(str::trim).filter(|l| !l.is_empty())
}

/// The exception line ending the first traceback: the first line after the header that is
/// neither indented nor empty.
fn traceback_line(text: &str) -> Option<&str> {
    let at = text.find(TRACEBACK)?;
    text[at + TRACEBACK.len()..]
        .lines()
        .skip(1)
        .find(|l| !l.trim().is_empty() && !l.starts_with([' ', '\t']))
}

fn is_error_line(line: &str) -> bool {
    ERROR_PATTERNS.iter().any(|p| line.contains(p))
}

fn is_warning(line: &str) -> bool {
    let lower = line.to_lowercase();
    ["warning", "npm warn", "warn "]
        .iter()
        .any(|p| lower.starts_with(p))
}

#[cfg(test)]
mod tests {
    use super::*;
    use condense_model::{Block, Content, Message, RawJson, Role};

    fn result(text: &str, is_error: Option<bool>) -> Message {
        Message::new(
            "r",
            Role::User,
            vec![Block::ToolResult(ToolResult {
                is_error,
                ..ToolResult::new("t", Content::string(text))
            })],
        )
    }

    fn lines_of(msgs: Vec<Message>) -> Vec<String> {
        let conv = Conversation {
            messages: msgs,
            ..Conversation::default()
        };
        error_lines(&conv)
    }

    #[test]
    fn each_kind_of_error_result() {
        let msgs = vec![
            result("permission denied: /etc/x", Some(true)),
            result("<returncode>2</returncode>\n<output>\nmake: *** [all] Error 2\n</output>", None),
            result("<returncode>0</returncode>\n<output>\nerror in docs only\n</output>", None),
            result("build output\n[Command finished with exit code 1]", None),
            result("Exit code: 101\nWall time: 2s\nOutput:\nthread 'main' panicked at src/main.rs:3", None),
            result("Process exited with code 3\nsegfault", None),
            result("Traceback (most recent call last):\n  File \"a.py\", line 2, in <module>\n    f()\nValueError: bad\n", None),
            result("all good: exit code 0", None),
            result("tests done\nEXIT CODE 4", None),
            result("error: but not flagged", Some(false)),
        ];
        assert_eq!(
            lines_of(msgs),
            [
                "permission denied: /etc/x",
                "make: *** [all] Error 2",
                // No line matches a pattern: the first one that is not a warning.
                "build output",
                "thread 'main' panicked at src/main.rs:3",
                "segfault",
                "ValueError: bad",
                "tests done",
            ]
        );
    }

    #[test]
    fn openhands_exit_code_in_the_envelope() {
        let mut failed = Message::new(
            "oh-6",
            Role::Tool,
            vec![Block::tool_result(
                "t",
                Content::string("bash: ponyc: command not found"),
            )],
        );
        failed.envelope = RawJson::from_value(
            &serde_json::json!({"observation": "run", "extras": {"metadata": {"exit_code": 127}}}),
        );
        let mut ok = failed.clone();
        ok.envelope = RawJson::from_value(
            &serde_json::json!({"observation": "run", "extras": {"metadata": {"exit_code": 0}}}),
        );
        ok.content = Content::blocks(vec![Block::tool_result("u", Content::string("error-free"))]);
        assert_eq!(
            lines_of(vec![failed, ok]),
            ["bash: ponyc: command not found"]
        );
    }

    #[test]
    fn first_meaningful_line_rules() {
        // Pattern lines beat earlier plain lines; warnings are passed over.
        assert_eq!(
            first_meaningful_line("compiling\nwarning: unused\nerror[E0425]: cannot find x")
                .as_deref(),
            Some("error[E0425]: cannot find x")
        );
        assert_eq!(
            first_meaningful_line("WARNING: old\n  npm warn x\nsomething odd happened").as_deref(),
            Some("something odd happened")
        );
        assert_eq!(
            first_meaningful_line("warning: a\nWarn b").as_deref(),
            Some("warning: a")
        );
        // Tags go, their content stays.
        assert_eq!(
            first_meaningful_line("<tool_use_error>File does not exist.</tool_use_error>")
                .as_deref(),
            Some("File does not exist.")
        );
        assert_eq!(
            first_meaningful_line("<returncode>1</returncode>\n<output>\n</output>"),
            None,
            "an exit status alone is no line"
        );
        // A warning is never the error, even with an error word in it.
        assert_eq!(
            first_meaningful_line(
                "npm warn Unknown env config \"x\".\n\nsrc/a.ts(6,33): error TS2307: nope"
            )
            .as_deref(),
            Some("src/a.ts(6,33): error TS2307: nope")
        );
        assert_eq!(first_meaningful_line(""), None);
        // Codex's exec header describes the run; the error is in the output under it.
        assert_eq!(
            first_meaningful_line("Chunk ID: de4b53\nWall time: 4.1 seconds\nProcess exited with code 2\nOriginal token count: 34\nOutput:\nrg: node_modules/x: No such file or directory (os error 2)\n").as_deref(),
            Some("rg: node_modules/x: No such file or directory (os error 2)")
        );
        assert_eq!(
            first_meaningful_line("Chunk ID: a\nWall time: 0 seconds\nProcess exited with code 1\nOriginal token count: 0\nOutput:\n"),
            None
        );
        assert_eq!(first_meaningful_line("  \n\n"), None);
        // A traceback's exception line, not the first pattern line before it.
        assert_eq!(
            first_meaningful_line("Error running tests\nTraceback (most recent call last):\n  File \"t.py\"\n\nKeyError: 'k'\nDuring handling").as_deref(),
            Some("KeyError: 'k'")
        );
    }

    #[test]
    fn lines_are_cut_at_200_chars_on_a_char_boundary() {
        let long = format!("error: {}", "é".repeat(300));
        let line = first_meaningful_line(&long).unwrap();
        assert_eq!(line.chars().count(), MAX_LINE_CHARS);
        assert!(long.starts_with(&line));
    }

    #[test]
    fn distinct_lines_once() {
        let msgs = vec![
            result("boom", Some(true)),
            result("boom", Some(true)),
            result("bang", Some(true)),
        ];
        assert_eq!(lines_of(msgs), ["boom", "bang"]);
    }
}
