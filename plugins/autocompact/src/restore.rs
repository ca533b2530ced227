//! Post-compaction restoration: the most recently read files and the pinned content, found in
//! the messages a compaction summarizes, given back as plain user text messages.
//!
//! # Files
//!
//! A file counts as read by:
//! - a call of a tool named in `read_tools` (`Read`, `read_file`, `view`, `cat`, ...) whose input
//!   names a path (`file_path`, `path`, `filePath`, `file`, `filename`, `target_file`,
//!   `notebook_path`, `absolute_path`), with a result that is not an error: the content is the
//!   result's text, as the model saw it (line numbers included);
//! - an editor tool (`str_replace_editor`, `str_replace_based_edit_tool`) called with
//!   `command = "view"` and a path;
//! - a shell call (`Bash`, `bash`, `shell`, `execute_bash`, `run`, `run_command`) whose command
//!   is exactly `cat <one path>`;
//! - a write: a `Write`/`write_file`/`create_file` call with a path and a `content` (or an editor
//!   `create` with `file_text`): the content is what was written;
//! - a file restored by an earlier compaction (its restoration message is read back).
//!
//! The latest read or write of a path wins. An edit after it (`Edit`, `MultiEdit`, `edit_file`,
//! `NotebookEdit`, an editor `str_replace`/`insert`) is noted in the restored message ("edited
//! later in message X: may be stale") rather than guessed at. A read with an offset or a limit is
//! marked partial.
//!
//! # Pins
//!
//! `pin` rules name a tool (`{ tool = "TodoWrite" }`: the latest call of that tool, its input and
//! result) or a regex (`{ regex = "IMPORTANT:.*" }`: every distinct match in the text of user
//! messages and tool results, the latest occurrence of each). Pinned items of an earlier
//! compaction are read back and kept while a rule still selects them, unless a newer occurrence
//! replaces them.

use crate::{is_condense_message, FILE_MARKER, PIN_MARKER};
use condense_model::{Block, Message, Role, ToolResult, ToolUse};
use regex::Regex;
use std::borrow::Cow;
use std::collections::HashMap;

/// Tool names whose calls read a file, by default.
pub const DEFAULT_READ_TOOLS: &[&str] = &[
    "Read",
    "read_file",
    "ReadFile",
    "view",
    "View",
    "view_file",
    "open_file",
    "cat",
    "NotebookRead",
];

const PATH_KEYS: &[&str] = &[
    "file_path",
    "path",
    "filePath",
    "file",
    "filename",
    "target_file",
    "notebook_path",
    "absolute_path",
];
const EDITOR_TOOLS: &[&str] = &["str_replace_editor", "str_replace_based_edit_tool"];
const SHELL_TOOLS: &[&str] = &[
    "Bash",
    "bash",
    "shell",
    "execute_bash",
    "run",
    "run_command",
];
const WRITE_TOOLS: &[&str] = &["Write", "write_file", "create_file"];
const EDIT_TOOLS: &[&str] = &["Edit", "MultiEdit", "edit_file", "NotebookEdit"];

/// The latest known content of one file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileSeen {
    pub path: String,
    pub content: String,
    /// The message the content comes from.
    pub message_id: String,
    /// Its index in the conversation (recency).
    pub position: usize,
    /// How the content was obtained: `read`, `partial read`, `written`, `restored`.
    pub how: &'static str,
    /// An edit after the content was seen.
    pub edited_in: Option<String>,
}

/// What a call does to a file.
enum FileOp {
    Read { path: String, partial: bool },
    Write { path: String, content: String },
    Edit { path: String },
}

fn path_of(input: &serde_json::Map<String, serde_json::Value>) -> Option<String> {
    PATH_KEYS
        .iter()
        .find_map(|k| input.get(*k).and_then(|v| v.as_str()))
        .filter(|p| !p.is_empty())
        .map(str::to_string)
}

fn str_field<'a>(
    input: &'a serde_json::Map<String, serde_json::Value>,
    key: &str,
) -> Option<&'a str> {
    input.get(key).and_then(|v| v.as_str())
}

/// `cat <path>` with exactly one plain argument.
fn cat_path(command: &str) -> Option<String> {
    let rest = command.trim().strip_prefix("cat ")?.trim();
    let plain = !rest.is_empty()
        && !rest.starts_with('-')
        && !rest.contains(|c: char| {
            c.is_whitespace() || matches!(c, '|' | '>' | '<' | ';' | '&' | '$' | '`' | '*' | '?')
        });
    let unquoted = rest.trim_matches(|c| c == '\'' || c == '"');
    (plain && !unquoted.is_empty()).then(|| unquoted.to_string())
}

fn file_op(call: &ToolUse, read_tools: &[String]) -> Option<FileOp> {
    let input = call.input_object()?;
    let name = call.name.as_str();
    if read_tools.iter().any(|t| t == name) {
        let path = path_of(&input)?;
        let partial = ["offset", "limit", "view_range", "start_line", "end_line"]
            .iter()
            .any(|k| input.get(*k).is_some_and(|v| !v.is_null()));
        return Some(FileOp::Read { path, partial });
    }
    if EDITOR_TOOLS.contains(&name) {
        let path = path_of(&input)?;
        return match str_field(&input, "command")? {
            "view" => Some(FileOp::Read {
                partial: input.get("view_range").is_some_and(|v| !v.is_null()),
                path,
            }),
            "create" => Some(FileOp::Write {
                content: str_field(&input, "file_text")?.to_string(),
                path,
            }),
            "str_replace" | "insert" | "undo_edit" => Some(FileOp::Edit { path }),
            _ => None,
        };
    }
    if SHELL_TOOLS.contains(&name) {
        let path = cat_path(str_field(&input, "command")?)?;
        return Some(FileOp::Read {
            path,
            partial: false,
        });
    }
    if WRITE_TOOLS.contains(&name) {
        return Some(FileOp::Write {
            path: path_of(&input)?,
            content: str_field(&input, "content")?.to_string(),
        });
    }
    if EDIT_TOOLS.contains(&name) {
        return Some(FileOp::Edit {
            path: path_of(&input)?,
        });
    }
    None
}

/// Every file's latest known content in `messages` (indices from `positions`), newest first.
pub fn files_seen<'m>(
    messages: impl IntoIterator<Item = (usize, &'m Message)>,
    read_tools: &[String],
) -> Vec<FileSeen> {
    let mut files: HashMap<String, FileSeen> = HashMap::new();
    let mut pending: HashMap<String, (String, bool)> = HashMap::new();
    for (position, m) in messages {
        if !m.is_chat() {
            continue;
        }
        if m.role == Role::User && is_condense_message(m) {
            let text = m.content.text();
            if let Some((path, body)) = parse_restored_file(&text) {
                files.insert(
                    path.clone(),
                    FileSeen {
                        path,
                        content: body,
                        message_id: m.id.clone(),
                        position,
                        how: "restored",
                        edited_in: None,
                    },
                );
            }
            continue;
        }
        // Calls and results in one pass, in block order (not `Conversation::tool_results`,
        // which visits results alone): the order decides which content of a path wins and
        // which read a later edit marks as stale.
        for block in &m.content.blocks {
            match block {
                Block::ToolUse(call) => match file_op(call, read_tools) {
                    Some(FileOp::Read { path, partial }) => {
                        pending.insert(call.id.clone(), (path, partial));
                    }
                    Some(FileOp::Write { path, content }) => {
                        files.insert(
                            path.clone(),
                            FileSeen {
                                path,
                                content,
                                message_id: m.id.clone(),
                                position,
                                how: "written",
                                edited_in: None,
                            },
                        );
                    }
                    Some(FileOp::Edit { path }) => {
                        if let Some(f) = files.get_mut(&path) {
                            f.edited_in = Some(m.id.clone());
                        }
                    }
                    None => {}
                },
                Block::ToolResult(result) => {
                    let Some((path, partial)) = pending.remove(&result.tool_use_id) else {
                        continue;
                    };
                    if result.is_error == Some(true) {
                        continue;
                    }
                    files.insert(
                        path.clone(),
                        FileSeen {
                            path,
                            content: result.content.text(),
                            message_id: m.id.clone(),
                            position,
                            how: if partial { "partial read" } else { "read" },
                            edited_in: None,
                        },
                    );
                }
                _ => {}
            }
        }
    }
    let mut list: Vec<FileSeen> = files.into_values().collect();
    list.sort_by(|a, b| b.position.cmp(&a.position).then(a.path.cmp(&b.path)));
    list
}

/// `(path, content)` of a restored-file message.
pub fn parse_restored_file(text: &str) -> Option<(String, String)> {
    let rest = text.strip_prefix(FILE_MARKER)?;
    let (header, rest) = rest.split_once('\n')?;
    let path = header.strip_suffix(']')?.to_string();
    // The second line holds the provenance; the content follows.
    let body = rest.split_once('\n').map_or("", |(_, b)| b);
    Some((path, body.to_string()))
}

/// `(key, from, content)` of a pinned-content message.
pub fn parse_pinned(text: &str) -> Option<(String, String, String)> {
    let rest = text.strip_prefix(PIN_MARKER)?;
    let (key, rest) = rest.split_once('\n')?;
    let key = key.strip_suffix(']')?.to_string();
    let (from, body) = rest.split_once('\n').unwrap_or((rest, ""));
    let from = from
        .strip_prefix("(from message ")
        .and_then(|f| f.strip_suffix(')'))
        .unwrap_or(from)
        .to_string();
    Some((key, from, body.to_string()))
}

/// A compiled `pin` rule.
#[derive(Debug, Clone)]
pub enum Pin {
    Tool(String),
    Regex(Regex),
}

/// One pinned item.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PinnedItem {
    /// `tool TodoWrite` or `regex IMPORTANT:.* — <the match>`: what selects it (unique).
    pub key: String,
    pub content: String,
    pub message_id: String,
    pub position: usize,
}

fn regex_key(re: &Regex, matched: &str) -> String {
    format!("regex {} — {}", re.as_str(), first_line(matched))
}

fn first_line(s: &str) -> String {
    let line = s.lines().next().unwrap_or("");
    let short: String = line.chars().take(80).collect();
    if short.len() < line.len() || s.lines().nth(1).is_some() {
        format!("{short}…")
    } else {
        short
    }
}

/// Every pinned item in `messages`, newest first.
pub fn pinned<'m>(
    messages: impl IntoIterator<Item = (usize, &'m Message)>,
    rules: &[Pin],
) -> Vec<PinnedItem> {
    if rules.is_empty() {
        return Vec::new();
    }
    let messages: Vec<(usize, &Message)> =
        messages.into_iter().filter(|(_, m)| m.is_chat()).collect();
    let mut items: HashMap<String, PinnedItem> = HashMap::new();
    let mut put = |item: PinnedItem| match items.get(&item.key) {
        Some(old) if old.position > item.position => {}
        _ => {
            items.insert(item.key.clone(), item);
        }
    };
    // Results by call id, for the tool rules (their text is built only for a pinned call).
    let mut results: HashMap<&str, (usize, &Message, &ToolResult)> = HashMap::new();
    for (position, m) in &messages {
        for r in m.tool_results() {
            results.insert(r.tool_use_id.as_str(), (*position, m, r));
        }
    }
    let has_regex = rules.iter().any(|rule| matches!(rule, Pin::Regex(_)));
    for (position, m) in &messages {
        if m.role == Role::User && is_condense_message(m) {
            // An item pinned by an earlier compaction, kept while a rule still selects it.
            if let Some((key, from, body)) = parse_pinned(&m.content.text()) {
                let selected = rules.iter().any(|rule| match rule {
                    Pin::Tool(t) => key == format!("tool {t}"),
                    Pin::Regex(re) => key.starts_with(&format!("regex {} — ", re.as_str())),
                });
                if selected {
                    put(PinnedItem {
                        key,
                        content: body,
                        message_id: from,
                        position: *position,
                    });
                }
            }
            continue;
        }
        // What the regex rules search in this message, built once for all of them: user text,
        // and tool results.
        let mut texts: Vec<Cow<'_, str>> = Vec::new();
        if has_regex {
            if m.role == Role::User {
                texts.extend(m.content.blocks.iter().filter_map(|b| match b {
                    Block::Text(t) => Some(Cow::Borrowed(t.text.as_str())),
                    _ => None,
                }));
            }
            texts.extend(m.tool_results().map(|r| Cow::Owned(r.content.text())));
        }
        for rule in rules {
            match rule {
                Pin::Tool(name) => {
                    for call in m.tool_uses().filter(|c| &c.name == name) {
                        let result = results.get(call.id.as_str());
                        let mut content = format!("input: {}", call.input.as_str());
                        if let Some((_, _, r)) = result {
                            content.push_str("\nresult: ");
                            content.push_str(&r.content.text());
                        }
                        let (at, msg) = result.map_or((*position, *m), |(p, rm, _)| (*p, *rm));
                        put(PinnedItem {
                            key: format!("tool {name}"),
                            content,
                            message_id: msg.id.clone(),
                            position: at,
                        });
                    }
                }
                Pin::Regex(re) => {
                    for text in &texts {
                        for found in re.find_iter(text).filter(|f| !f.as_str().trim().is_empty()) {
                            put(PinnedItem {
                                key: regex_key(re, found.as_str()),
                                content: found.as_str().to_string(),
                                message_id: m.id.clone(),
                                position: *position,
                            });
                        }
                    }
                }
            }
        }
    }
    let mut list: Vec<PinnedItem> = items.into_values().collect();
    list.sort_by(|a, b| b.position.cmp(&a.position).then(a.key.cmp(&b.key)));
    list
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cat_commands() {
        assert_eq!(cat_path("cat src/lib.rs").as_deref(), Some("src/lib.rs"));
        assert_eq!(cat_path("  cat 'a.txt' ").as_deref(), Some("a.txt"));
        assert_eq!(cat_path("cat a b"), None);
        assert_eq!(cat_path("cat a | head"), None);
        assert_eq!(cat_path("cat -n a"), None);
        assert_eq!(cat_path("cat *.rs"), None);
        assert_eq!(cat_path("catalog x"), None);
    }
}
