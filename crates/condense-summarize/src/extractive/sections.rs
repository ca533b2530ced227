//! What the extractive summary holds ([`Digest`]) and how it is read off a span of messages.

use super::files::{self, FileTable};
use super::shell;
use crate::text::{cut_chars, one_line};
use condense_model::{Block, Message, Role, ToolUse};
use serde_json::{Map, Value};
use std::collections::{HashMap, HashSet};

/// Characters kept of each user request.
const REQUEST_CHARS: usize = 600;
/// Characters kept of the latest assistant message.
const ASSISTANT_CHARS: usize = 600;
/// Characters kept of one decision sentence, one error line, one todo item, a command.
const SENTENCE_CHARS: usize = 300;
const ERROR_LINE_CHARS: usize = 240;
const COMMAND_CHARS: usize = 100;
/// Error lines kept per tool result.
const ERROR_LINES: usize = 3;
/// Most errors and decisions a summary keeps (the most recent win).
pub(crate) const MAX_ERRORS: usize = 20;
pub(crate) const MAX_DECISIONS: usize = 12;

/// The sections of an extractive summary, as items (a bullet's text; lines after the first are
/// its continuation lines).
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Digest {
    /// User requests, oldest first.
    pub intent: Vec<String>,
    pub files: FileTable,
    /// `` `id` Tool `context`: `` followed by error lines; oldest first.
    pub errors: Vec<String>,
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
    /// Sections of a previous summary this summarizer does not know: `(heading, body)`.
    pub extra: Vec<(String, String)>,
}

pub(crate) const LAST_TEST: &str = "Last test run";
pub(crate) const LAST_ASSISTANT: &str = "Last assistant message: ";
pub(crate) const UNANSWERED: &str = "Unanswered user request: ";

/// Claude Code envelope flags: `isMeta` (expanded slash-command prompts, caveats) and
/// `isSidechain` (sub-agent turns).
fn flags(m: &Message) -> (bool, bool) {
    let env = m.envelope.as_str();
    if !env.contains("isMeta") && !env.contains("isSidechain") {
        return (false, false);
    }
    let map = m.envelope.to_map().unwrap_or_default();
    let flag = |k: &str| map.get(k).and_then(Value::as_bool).unwrap_or(false);
    (flag("isMeta"), flag("isSidechain"))
}

/// Reads the sections off a span.
pub(crate) fn digest(messages: &[Message]) -> Digest {
    let mut d = Digest::default();
    // Each call with its input parsed once (both the call and its result read the input).
    let calls: HashMap<&str, (&ToolUse, Map<String, Value>)> = messages
        .iter()
        .flat_map(|m| m.tool_uses())
        .map(|tu| (tu.id.as_str(), (tu, tu.input_object().unwrap_or_default())))
        .collect();
    let no_input = Map::new();
    // A failed file tool call changed nothing (shell commands may have done part of their work).
    let failed: HashSet<&str> = messages
        .iter()
        .flat_map(|m| m.tool_results())
        .filter(|r| r.is_error == Some(true))
        .map(|r| r.tool_use_id.as_str())
        .collect();
    let mut last_request: Option<String> = None;
    let mut errors: Vec<ErrorItem> = Vec::new();

    for m in messages.iter().filter(|m| m.is_chat()) {
        let (meta, sidechain) = flags(m);
        match m.role {
            Role::User if !meta && !sidechain => {
                let text = user_text(m);
                if let Some(req) = clean_request(&text) {
                    if d.intent.last() != Some(&req) {
                        d.intent.push(req.clone());
                    }
                    last_request = Some(req);
                }
            }
            Role::Assistant => {
                d.saw_assistant = true;
                if !sidechain {
                    last_request = None;
                    let text = m.content.text();
                    if !text.trim().is_empty() {
                        d.last_assistant = Some(format!(
                            "{LAST_ASSISTANT}{}",
                            cut_chars(&tidy_lines(&text), ASSISTANT_CHARS)
                        ));
                        decisions(&text, &mut d.decisions);
                    }
                }
            }
            _ => {}
        }
        for block in &m.content.blocks {
            match block {
                Block::ToolUse(tu) => {
                    let parsed;
                    let input = match calls.get(tu.id.as_str()) {
                        Some((call, input)) if std::ptr::eq(*call, tu) => input,
                        // A repeated id: the map holds the other call.
                        _ => {
                            parsed = tu.input_object().unwrap_or_default();
                            &parsed
                        }
                    };
                    if !failed.contains(tu.id.as_str()) || files::is_shell_tool(&tu.name) {
                        for (path, op) in files::ops_of_tool_use(&tu.name, input) {
                            d.files.touch(&path, op);
                        }
                    }
                    if !sidechain {
                        if let Some(todos) = todo_items(&tu.name, input) {
                            d.todos = Some(todos);
                        }
                    }
                }
                Block::ToolResult(tr) => {
                    let (name, input) = calls
                        .get(tr.tool_use_id.as_str())
                        .map_or(("", &no_input), |(call, input)| (call.name.as_str(), input));
                    let shell = files::is_shell_tool(name);
                    let command = shell.then(|| files::shell_command(input)).flatten();
                    let text = tr.content.text();
                    let failed = tr.is_error == Some(true);
                    let lines = error_lines(&text, failed, shell);
                    if !lines.is_empty() {
                        let item = ErrorItem {
                            id: tr.tool_use_id.clone(),
                            what: format!(
                                "{}{}",
                                tool_label(name),
                                context(name, input, command.as_deref())
                            ),
                            lines,
                            command: command.clone(),
                            fixed_by: None,
                        };
                        // The same error again replaces the older report.
                        errors.retain(|e| (&e.what, &e.lines) != (&item.what, &item.lines));
                        errors.push(item);
                    } else if let Some(cmd) = &command {
                        let open = errors
                            .iter_mut()
                            .filter(|e| e.command.as_ref() == Some(cmd) && e.fixed_by.is_none());
                        for e in open {
                            e.fixed_by = Some(tr.tool_use_id.clone());
                        }
                    }
                    if let Some(cmd) = command.as_deref().filter(|c| shell::is_test_command(c)) {
                        d.last_test = Some(format!(
                            "{LAST_TEST} (`{}`): `{}` → {}",
                            tr.tool_use_id,
                            short_command(cmd),
                            test_outcome(&text, failed)
                        ));
                    }
                }
                _ => {}
            }
        }
    }
    d.unanswered = last_request.map(|r| format!("{UNANSWERED}{r}"));
    d.errors = errors.iter().map(ErrorItem::render).collect();
    let skip = d.errors.len().saturating_sub(MAX_ERRORS);
    d.errors.drain(..skip);
    let skip = d.decisions.len().saturating_sub(MAX_DECISIONS);
    d.decisions.drain(..skip);
    d
}

/// One failed tool result.
struct ErrorItem {
    id: String,
    /// Tool name and command or path.
    what: String,
    lines: Vec<String>,
    command: Option<String>,
    /// A later run of the same command that did not fail.
    fixed_by: Option<String>,
}

impl ErrorItem {
    fn render(&self) -> String {
        let mut out = format!("`{}` {}:", self.id, self.what);
        if let Some(later) = &self.fixed_by {
            out.push_str(&format!(" (same command succeeded later: `{later}`)"));
        }
        for l in &self.lines {
            out.push('\n');
            out.push_str(l);
        }
        out
    }
}

/// The text blocks of a user message (not the text inside its tool results).
fn user_text(m: &Message) -> String {
    m.content
        .blocks
        .iter()
        .filter_map(|b| match b {
            Block::Text(t) => Some(t.text.as_str()),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Lines trimmed at the end, blank lines dropped.
fn tidy_lines(text: &str) -> String {
    text.lines()
        .map(str::trim_end)
        .filter(|l| !l.trim().is_empty())
        .collect::<Vec<_>>()
        .join("\n")
}

/// Removes `<tag>...</tag>` spans.
fn strip_tag(text: &str, tag: &str) -> String {
    let (open, close) = (format!("<{tag}>"), format!("</{tag}>"));
    let mut out = String::new();
    let mut rest = text;
    while let Some(start) = rest.find(&open) {
        out.push_str(&rest[..start]);
        match rest[start..].find(&close) {
            Some(end) => rest = &rest[start + end + close.len()..],
            None => {
                rest = "";
            }
        }
    }
    out.push_str(rest);
    out
}

fn tag_content<'a>(text: &'a str, tag: &str) -> Option<&'a str> {
    let open = format!("<{tag}>");
    let start = text.find(&open)? + open.len();
    let end = text[start..].find(&format!("</{tag}>"))? + start;
    Some(text[start..end].trim())
}

/// A user text as a request, or `None` for boilerplate (system reminders, command output,
/// interruption markers, environment context).
fn clean_request(text: &str) -> Option<String> {
    if let Some(name) = tag_content(text, "command-name") {
        let args = tag_content(text, "command-args").unwrap_or("");
        return Some(cut_chars(
            one_line(&format!("{name} {args}")).as_str(),
            REQUEST_CHARS,
        ));
    }
    let mut t = text.to_string();
    for tag in [
        "system-reminder",
        "local-command-stdout",
        "local-command-stderr",
        "environment_context",
        "user_instructions",
    ] {
        t = strip_tag(&t, tag);
    }
    let t = tidy_lines(&t);
    let boilerplate = t.is_empty()
        || t.starts_with("[Request interrupted by user")
        || t.starts_with(
            "Caveat: The messages below were generated by the user while running local commands",
        )
        || t.starts_with("This session is being continued from a previous conversation");
    (!boilerplate).then(|| cut_chars(&t, REQUEST_CHARS))
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
    for sentence in sentences(text) {
        let lower = sentence.to_lowercase();
        let strong = STRONG.iter().any(|m| lower.contains(m));
        let weak = WEAK.iter().any(|m| {
            lower.match_indices(m).any(|(i, _)| {
                let next = lower[i + m.len()..].split_whitespace().next().unwrap_or("");
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

/// Whether a line reports an error.
fn is_error_line(line: &str) -> bool {
    const PATTERNS: [&str; 15] = [
        "Error:",
        "error:",
        "error[E",
        "error TS",
        "ERROR",
        "Traceback",
        "FAILED",
        "FAIL:",
        "panicked at",
        "Exception",
        "exception:",
        "fatal:",
        "npm ERR!",
        "command not found",
        "No such file or directory",
    ];
    PATTERNS.iter().any(|p| line.contains(p)) || line.starts_with("FAIL ")
}

/// The error lines of a tool result: for a failed result, the lines that look like errors (or
/// its first lines); for a shell result, the lines that look like errors.
fn error_lines(text: &str, failed: bool, shell: bool) -> Vec<String> {
    if !failed && !shell {
        return Vec::new();
    }
    let nonblank = || text.lines().map(str::trim).filter(|l| !l.is_empty());
    let mut lines: Vec<&str> = nonblank()
        .filter(|l| is_error_line(l))
        .take(ERROR_LINES)
        .collect();
    if lines.is_empty() && failed {
        lines = nonblank().take(ERROR_LINES).collect();
    }
    lines
        .iter()
        .map(|l| cut_chars(l, ERROR_LINE_CHARS))
        .collect()
}

fn tool_label(name: &str) -> &str {
    if name.is_empty() {
        "tool"
    } else {
        name
    }
}

/// ` `command`` or ` `path`` after the tool name in an error item.
fn context(name: &str, input: &Map<String, Value>, command: Option<&str>) -> String {
    if let Some(cmd) = command {
        return format!(" `{}`", short_command(cmd));
    }
    files::ops_of_tool_use(name, input)
        .first()
        .map(|(p, _)| format!(" `{p}`"))
        .unwrap_or_default()
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
    let counts = |l: &&str| {
        let lower = l.to_lowercase();
        l.chars().any(|c| c.is_ascii_digit())
            && ["passed", "failed", "passing", "failing", "tests:", "errors"]
                .iter()
                .any(|w| lower.contains(w))
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
    fn requests_skip_boilerplate() {
        assert_eq!(
            clean_request("<command-message>x is running…</command-message>\n<command-name>/orchestrator</command-name>\n<command-args>create TODO app</command-args>"),
            Some("/orchestrator create TODO app".into())
        );
        assert_eq!(
            clean_request("<system-reminder>be nice</system-reminder>"),
            None
        );
        assert_eq!(
            clean_request("[Request interrupted by user for tool use]"),
            None
        );
        assert_eq!(
            clean_request("Fix it\n<system-reminder>x</system-reminder>"),
            Some("Fix it".into())
        );
    }

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
