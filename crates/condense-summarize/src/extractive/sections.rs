//! What the extractive summary holds ([`Digest`]) and how it is read off a span of messages.

use super::test_command::is_test_command;
use condense_formats::claude_code::line_flags;
use condense_model::{Block, Message, Role};
use condense_retain::{is_shell_tool, request_text, shell_command};
use condense_text::{cut_chars, one_line};
use memchr::memmem;
use serde_json::{Map, Value};
use std::collections::HashMap;
use std::sync::LazyLock;

/// Characters kept of the latest assistant message.
const ASSISTANT_CHARS: usize = 600;
/// Characters kept of one decision sentence, one todo item, a command.
const SENTENCE_CHARS: usize = 300;
const COMMAND_CHARS: usize = 100;
/// Most decisions a summary keeps (the most recent win).
pub(crate) const MAX_DECISIONS: usize = 12;
/// Characters kept of one agent note, and the most notes a summary keeps (the newest win).
const NOTE_CHARS: usize = 1_500;
pub(crate) const MAX_NOTES: usize = 40;
/// Tools whose result is a sub-agent's report (its final answer to the agent).
const SUBAGENT_TOOLS: [&str; 4] = ["task", "agent", "dispatch_agent", "delegate"];

/// The sections of an extractive summary, as items (a bullet's text; lines after the first are
/// its continuation lines). The user's requests, the files and the errors are not here: the
/// host renders them from a `condense_retain::Retained` record in front of these sections.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Digest {
    /// Decision sentences, oldest first.
    pub decisions: Vec<String>,
    /// `Last test run (...)` item.
    pub last_test: Option<String>,
    /// `Last assistant message: ...` item.
    pub last_assistant: Option<String>,
    /// Unfinished items of the latest todo list; `Some(vec![])` when a list was seen and all of
    /// it is done.
    pub todos: Option<Vec<String>>,
    /// `Unanswered user request: ...` item.
    pub unanswered: Option<String>,
    /// The span had an assistant turn (so an earlier unanswered request was answered).
    pub saw_assistant: bool,
    /// Verbatim excerpts, oldest first: the agent's own text messages and its sub-agents'
    /// reports. The lowest priority: they fill what the budget leaves.
    pub notes: Vec<String>,
    /// Sections of a previous summary this summarizer does not know: `(heading, body)`.
    pub extra: Vec<(String, String)>,
}

pub(crate) const LAST_TEST: &str = "Last test run";
pub(crate) const LAST_ASSISTANT: &str = "Last assistant message: ";
pub(crate) const UNANSWERED: &str = "Unanswered user request: ";

/// Reads the sections off a span.
pub(crate) fn digest(messages: &[Message]) -> Digest {
    let mut d = Digest::default();
    // Each call with its input parsed once (both the call and its result read the input).
    let calls: HashMap<&str, (&str, Map<String, Value>)> = messages
        .iter()
        .flat_map(|m| m.tool_uses())
        .map(|tu| {
            (
                tu.id.as_str(),
                (tu.name.as_str(), tu.input_object().unwrap_or_default()),
            )
        })
        .collect();
    let mut last_request: Option<String> = None;

    for m in messages.iter().filter(|m| m.is_chat()) {
        let sidechain = line_flags(&m.envelope).sidechain;
        match m.role {
            Role::User => {
                if let Some(req) = request_text(m) {
                    last_request = Some(cut_chars(&req, REQUEST_CHARS));
                }
            }
            // A sub-agent's lines do not answer the user.
            Role::Assistant if !sidechain => {
                d.saw_assistant = true;
                last_request = None;
                let text = m.content.text();
                if !text.trim().is_empty() {
                    let tidy = tidy_lines(&text);
                    d.last_assistant = Some(format!(
                        "{LAST_ASSISTANT}{}",
                        cut_chars(&tidy, ASSISTANT_CHARS)
                    ));
                    decisions(&text, &mut d.decisions);
                    d.notes.push(cut_chars(&tidy, NOTE_CHARS));
                }
            }
            _ => {}
        }
        for block in &m.content.blocks {
            match block {
                Block::ToolUse(tu) if !sidechain => {
                    let input = calls.get(tu.id.as_str()).map(|(_, input)| input);
                    if let Some(todos) = input.and_then(|input| todo_items(&tu.name, input)) {
                        d.todos = Some(todos);
                    }
                }
                Block::ToolResult(tr) => {
                    let Some((name, input)) = calls.get(tr.tool_use_id.as_str()) else {
                        continue;
                    };
                    if !sidechain && SUBAGENT_TOOLS.contains(&name.to_ascii_lowercase().as_str()) {
                        let report = tidy_lines(&tr.content.text());
                        if !report.is_empty() {
                            d.notes.push(format!(
                                "Sub-agent report (`{}`): {}",
                                tr.tool_use_id,
                                cut_chars(&report, NOTE_CHARS)
                            ));
                        }
                    }
                    if !is_shell_tool(name) {
                        continue;
                    }
                    let Some(cmd) = shell_command(input).map(|c| c.text()) else {
                        continue;
                    };
                    if is_test_command(&cmd) {
                        let failed = tr.is_error == Some(true);
                        d.last_test = Some(format!(
                            "{LAST_TEST} (`{}`): `{}` → {}",
                            tr.tool_use_id,
                            short_command(&cmd),
                            test_outcome(&tr.content.text(), failed)
                        ));
                    }
                }
                _ => {}
            }
        }
    }
    d.unanswered = last_request.map(|r| format!("{UNANSWERED}{r}"));
    let skip = d.decisions.len().saturating_sub(MAX_DECISIONS);
    d.decisions.drain(..skip);
    let skip = d.notes.len().saturating_sub(MAX_NOTES);
    d.notes.drain(..skip);
    d
}

/// Characters kept of an unanswered request (the whole request is in the retained record).
const REQUEST_CHARS: usize = 600;

/// Lines trimmed at the end, blank lines dropped.
fn tidy_lines(text: &str) -> String {
    text.lines()
        .map(str::trim_end)
        .filter(|l| !l.trim().is_empty())
        .collect::<Vec<_>>()
        .join("\n")
}

/// Searchers for fixed phrases, made once ([`memmem::Finder`]).
type Finders = Vec<memmem::Finder<'static>>;

fn finders(phrases: &[&'static str]) -> Finders {
    phrases.iter().map(|p| memmem::Finder::new(*p)).collect()
}

/// Decision sentences of an assistant text, appended to `out`.
fn decisions(text: &str, out: &mut Vec<String>) {
    const STRONG: [&str; 10] = [
        "decided",
        "decide to",
        "instead",
        "the fix is",
        "root cause",
        "the problem is",
        "the issue is",
        "rather than",
        "switch to",
        "chose",
    ];
    const WEAK: [&str; 6] = [
        "i'll ",
        "i will ",
        "we will ",
        "we'll ",
        "going to ",
        "let's ",
    ];
    // Exploration, not a decision: "I'll read the file", "Let me check".
    const TRIVIAL: [&str; 22] = [
        "read", "check", "look", "examine", "explore", "start", "begin", "run", "help", "see",
        "verify", "search", "find", "view", "open", "take", "analyze", "first", "now", "also",
        "continue", "mark",
    ];
    // Searchers made once: `str::contains` makes one per call, 16 per sentence here (the
    // larger part of reading a span's decisions).
    static FINDERS: LazyLock<(Finders, Finders)> =
        LazyLock::new(|| (finders(&STRONG), finders(&WEAK)));
    let (strong_finders, weak_finders) = &*FINDERS;
    for sentence in sentences(text) {
        let lower = sentence.to_lowercase();
        let strong = strong_finders
            .iter()
            .any(|f| f.find(lower.as_bytes()).is_some());
        // Each phrase's occurrences left to right, not overlapping (as `match_indices`).
        let weak = weak_finders.iter().any(|f| {
            f.find_iter(lower.as_bytes()).any(|i| {
                let rest = lower.get(i + f.needle().len()..).unwrap_or("");
                let next = rest.split_whitespace().next().unwrap_or("");
                !TRIVIAL.contains(&next.trim_matches(|c: char| !c.is_alphanumeric()))
            })
        });
        if strong || weak {
            let s = cut_chars(&sentence, SENTENCE_CHARS);
            out.retain(|d| *d != s);
            out.push(s);
        }
    }
}

/// Sentences: split at line breaks and at `. `, `! `, `? `; list markers dropped.
fn sentences(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for line in text.lines() {
        let line = line
            .trim()
            .trim_start_matches(['-', '*', '#', '>'])
            .trim_start();
        if line.starts_with("```") {
            continue;
        }
        let mut start = 0;
        let bytes = line.as_bytes();
        for i in 0..bytes.len() {
            let end = matches!(bytes[i], b'.' | b'!' | b'?')
                && bytes.get(i + 1).is_none_or(|b| *b == b' ');
            if end {
                out.push(line[start..=i].trim().to_string());
                start = i + 1;
            }
        }
        if start < line.len() {
            out.push(line[start..].trim().to_string());
        }
    }
    out.retain(|s| s.len() > 12);
    out
}

/// A command's first line (a here-document body is not shown), cut.
fn short_command(cmd: &str) -> String {
    let mut lines = cmd.trim().lines();
    let first = lines.next().unwrap_or("");
    let more = if lines.next().is_some() { " …" } else { "" };
    format!("{}{more}", cut_chars(&one_line(first), COMMAND_CHARS))
}

/// The summary line of a test run's output: cargo's `test result:` lines added up, or the last
/// line that counts passed/failed tests.
fn test_outcome(text: &str, failed: bool) -> String {
    let mut totals = [0u64; 3];
    let mut cargo_lines = 0;
    for line in text
        .lines()
        .filter(|l| l.trim_start().starts_with("test result:"))
    {
        cargo_lines += 1;
        for part in line.split([';', '.']) {
            let mut words = part.split_whitespace().rev();
            if let (Some(kind), Some(n)) = (words.next(), words.next()) {
                if let Ok(n) = n.parse::<u64>() {
                    match kind {
                        "passed" => totals[0] += n,
                        "failed" => totals[1] += n,
                        "ignored" => totals[2] += n,
                        _ => {}
                    }
                }
            }
        }
    }
    if cargo_lines > 0 {
        let mut s = format!("{} passed; {} failed", totals[0], totals[1]);
        if totals[2] > 0 {
            s.push_str(&format!("; {} ignored", totals[2]));
        }
        return s;
    }
    static COUNT_WORDS: LazyLock<Finders> =
        LazyLock::new(|| finders(&["passed", "failed", "passing", "failing", "tests:", "errors"]));
    let counts = |l: &&str| {
        l.chars().any(|c| c.is_ascii_digit()) && {
            let lower = l.to_lowercase();
            COUNT_WORDS
                .iter()
                .any(|f| f.find(lower.as_bytes()).is_some())
        }
    };
    match text.lines().map(str::trim).rfind(counts) {
        Some(line) => cut_chars(
            &one_line(line.trim_matches(['=', '-', ' '])),
            SENTENCE_CHARS,
        ),
        None if failed => "failed (no summary line)".to_string(),
        None => "finished (no summary line)".to_string(),
    }
}

/// Unfinished items of a todo-list tool call (`TodoWrite` `todos`, Codex `update_plan` `plan`,
/// OpenHands `task_tracker` `task_list`); `None` if the call is not one.
fn todo_items(name: &str, input: &Map<String, Value>) -> Option<Vec<String>> {
    let n = name.to_ascii_lowercase();
    if !matches!(
        n.as_str(),
        "todowrite" | "todo_write" | "update_plan" | "task_tracker"
    ) {
        return None;
    }
    let list = ["todos", "plan", "task_list"]
        .iter()
        .find_map(|k| input.get(*k).and_then(Value::as_array))?;
    let items = list
        .iter()
        .filter_map(|item| {
            let status = item
                .get("status")
                .and_then(Value::as_str)
                .unwrap_or("pending");
            if matches!(
                status,
                "completed" | "complete" | "done" | "cancelled" | "canceled"
            ) {
                return None;
            }
            let text = ["content", "step", "title", "task", "description"]
                .iter()
                .find_map(|k| item.get(*k).and_then(Value::as_str))?;
            Some(format!(
                "[{status}] {}",
                cut_chars(&one_line(text), SENTENCE_CHARS)
            ))
        })
        .collect();
    Some(items)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decision_markers() {
        let mut out = Vec::new();
        decisions(
            "I'll read the file first. The root cause is a stale pool. I'll use a connection pool instead of per-request connections. Done.",
            &mut out,
        );
        assert_eq!(
            out,
            vec![
                "The root cause is a stale pool.".to_string(),
                "I'll use a connection pool instead of per-request connections.".to_string()
            ]
        );
        // A weak phrase counts at any of its occurrences followed by a word that is not
        // exploration; uppercase and punctuation around the word do not matter.
        let mut out = Vec::new();
        decisions(
            "We will read it. LET'S CHECK. I'll look, then I'll \"rewrite\" the cache. Going to: now.",
            &mut out,
        );
        assert_eq!(out, ["I'll look, then I'll \"rewrite\" the cache."]);
    }

    #[test]
    fn outcomes() {
        let cargo = "running 3 tests\ntest result: ok. 3 passed; 0 failed; 0 ignored\n\ntest result: FAILED. 11 passed; 2 failed; 1 ignored; 0 measured";
        assert_eq!(test_outcome(cargo, true), "14 passed; 2 failed; 1 ignored");
        let pytest = "....F\n===== 14 passed, 2 failed in 0.52s =====\n";
        assert_eq!(test_outcome(pytest, true), "14 passed, 2 failed in 0.52s");
        let jest = "Tests:       2 failed, 14 passed, 16 total\nTime: 1s";
        assert_eq!(
            test_outcome(jest, true),
            "Tests: 2 failed, 14 passed, 16 total"
        );
        assert_eq!(test_outcome("nothing", false), "finished (no summary line)");
    }
}
