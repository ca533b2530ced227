//! Tool-call recognition: which paths a call reads and writes, and how an error of the call is
//! described (tool, command or path) and keyed (what a later success must match to fix it).
//!
//! Tool names are compared case-insensitively with `-` and spaces read as `_`:
//!
//! - file tools, the path in `file_path`, `path`, `notebook_path`, `filepath` or `filename`:
//!   `Write`, `write_file`, `create_file` (write); `Edit`, `MultiEdit`, `NotebookEdit`,
//!   `edit_file`, `str_replace`, `insert`, `replace` (edit); `Read`, `read_file`, `view`,
//!   `view_file`, `open_file`, `NotebookRead` (read);
//! - editor tools whose `command` says what they do: `str_replace_editor`,
//!   `str_replace_based_edit_tool`, `text_editor`, `file_editor`, `edit_tool`, and `edit` when
//!   it has a `command` (OpenHands): `create` (create), `str_replace`, `insert`, `undo_edit`,
//!   `edit`, `write` (edit), `view`, `read` (read);
//! - `apply_patch` / `patch` (any string argument, or the whole input when it is text):
//!   `*** Add File: P` (create), `*** Update File: P` (edit), `*** Delete File: P` (delete),
//!   `*** Move to: P` (the updated file moves there: move-from it, move-to `P`);
//! - shell tools (`bash`, `execute_bash`, `shell`, `local_shell`, `exec_command`,
//!   `run_shell_command`, `run_terminal_cmd`, `execute_command`, `terminal`, `cmd_run`), the
//!   command in `command` or `cmd`, a string or an argv array (`["bash", "-lc", "..."]`): see
//!   [`crate::shell`]; a command holding `*** Begin Patch` is read as a patch too.

use crate::artifacts::FileOp;
use crate::shell;
use crate::text::{first_line_marked, stable_hash};
use condense_model::ToolUse;
use serde_json::{Map, Value};

/// Characters kept of a command (its first line) or other description in an error entry.
pub(crate) const ABOUT_CHARS: usize = 100;

/// Lower-case tool name with `-` and spaces as `_` (`Execute-Bash` → `execute_bash`).
pub fn normalize_name(name: &str) -> String {
    name.to_ascii_lowercase().replace(['-', ' '], "_")
}

/// Whether a tool runs shell commands.
pub fn is_shell_tool(name: &str) -> bool {
    matches!(
        normalize_name(name).as_str(),
        "bash"
            | "execute_bash"
            | "shell"
            | "local_shell"
            | "exec_command"
            | "run_shell_command"
            | "run_terminal_cmd"
            | "execute_command"
            | "terminal"
            | "cmd_run"
    )
}

fn simple_file_op(norm: &str) -> Option<FileOp> {
    match norm {
        "write" | "write_file" | "create_file" | "notebookwrite" => Some(FileOp::Write),
        "edit" | "multiedit" | "multi_edit" | "notebookedit" | "notebook_edit" | "edit_file"
        | "replace" | "str_replace" | "insert" => Some(FileOp::Edit),
        "read" | "view" | "read_file" | "view_file" | "notebookread" | "notebook_read"
        | "open_file" => Some(FileOp::Read),
        _ => None,
    }
}

fn is_editor(norm: &str) -> bool {
    matches!(
        norm,
        "str_replace_editor"
            | "str_replace_based_edit_tool"
            | "text_editor"
            | "file_editor"
            | "edit_tool"
    )
}

fn editor_op(command: &str) -> Option<FileOp> {
    match command {
        "create" => Some(FileOp::Create),
        "str_replace" | "insert" | "undo_edit" | "edit" | "write" => Some(FileOp::Edit),
        "view" | "read" => Some(FileOp::Read),
        _ => None,
    }
}

/// Whether a tool works on one file named by a path argument (file and editor tools).
pub fn is_file_tool(name: &str) -> bool {
    let n = normalize_name(name);
    simple_file_op(&n).is_some() || is_editor(&n)
}

/// A tool call's arguments.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Input {
    Object(Map<String, Value>),
    /// A JSON string, or arguments that are not JSON at all (OpenAI keeps them verbatim; a
    /// Codex custom tool's `input` is free text).
    Text(String),
    Other,
}

impl Input {
    pub(crate) fn of(tool_use: &ToolUse) -> Input {
        match tool_use.input.to_value() {
            Ok(Value::Object(map)) => Input::Object(map),
            Ok(Value::String(s)) => Input::Text(s),
            Ok(_) => Input::Other,
            Err(_) => Input::Text(tool_use.input.as_str().to_string()),
        }
    }

    fn object(&self) -> Option<&Map<String, Value>> {
        match self {
            Input::Object(m) => Some(m),
            _ => None,
        }
    }
}

/// A shell tool's command: a script for a shell, or an argument vector run directly.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ShellCommand {
    Script(String),
    Argv(Vec<String>),
}

impl ShellCommand {
    /// The command as one text: the script, or the arguments joined by spaces.
    pub fn text(&self) -> String {
        match self {
            ShellCommand::Script(s) => s.clone(),
            ShellCommand::Argv(words) => words.join(" "),
        }
    }
}

/// The command of a shell tool call: `command` (or `cmd`) as a string, or as an argv array
/// (`["bash", "-lc", "cat x"]` is the script `cat x`).
pub fn shell_command(input: &Map<String, Value>) -> Option<ShellCommand> {
    match input.get("command").or_else(|| input.get("cmd"))? {
        Value::String(s) => Some(ShellCommand::Script(s.clone())),
        Value::Array(parts) => {
            let words: Vec<&str> = parts.iter().filter_map(Value::as_str).collect();
            let shell = words
                .first()
                .is_some_and(|w| matches!(w.rsplit('/').next(), Some("bash" | "sh" | "zsh")));
            let flag = words
                .iter()
                .position(|w| w.starts_with('-') && !w.starts_with("--") && w.contains('c'));
            match (shell, flag) {
                (true, Some(i)) if i + 2 == words.len() => {
                    Some(ShellCommand::Script(words[i + 1].to_string()))
                }
                _ => Some(ShellCommand::Argv(
                    words.iter().map(|w| (*w).to_string()).collect(),
                )),
            }
        }
        _ => None,
    }
}

/// The path argument of a file tool, `./` removed.
fn path_arg(input: &Map<String, Value>) -> Option<String> {
    ["file_path", "path", "notebook_path", "filepath", "filename"]
        .iter()
        .find_map(|k| input.get(*k).and_then(Value::as_str))
        .map(|p| p.strip_prefix("./").unwrap_or(p).to_string())
        .filter(|p| !p.is_empty())
}

/// The paths an `apply_patch` envelope names, in order.
pub fn patch_ops(text: &str) -> Vec<(String, FileOp)> {
    let mut ops = Vec::new();
    let mut updating: Option<String> = None;
    for line in text.lines() {
        let line = line.trim();
        let (op, rest) = if let Some(r) = line.strip_prefix("*** Add File:") {
            (FileOp::Create, r)
        } else if let Some(r) = line.strip_prefix("*** Update File:") {
            (FileOp::Edit, r)
        } else if let Some(r) = line.strip_prefix("*** Delete File:") {
            (FileOp::Delete, r)
        } else if let Some(r) = line.strip_prefix("*** Move to:") {
            (FileOp::MoveTo, r)
        } else {
            continue;
        };
        let path = rest.trim();
        let path = path.strip_prefix("./").unwrap_or(path);
        if path.is_empty() {
            continue;
        }
        if op == FileOp::MoveTo {
            if let Some(source) = updating.take() {
                ops.push((source, FileOp::MoveFrom));
            }
        }
        updating = (op == FileOp::Edit).then(|| path.to_string());
        ops.push((path.to_string(), op));
    }
    ops
}

/// What the retention code needs of one tool call.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Call {
    pub name: String,
    pub shell: bool,
    /// The file operations, in order.
    pub ops: Vec<(String, FileOp)>,
    /// The command's first line, or the path, or a short description (error entries).
    pub about: String,
    /// What a later success must match to fix an error of this call: the whole command, or
    /// the tool and its path, or the tool and its whole input.
    pub key: String,
}

/// The key of a shell command (its whole text).
pub(crate) fn shell_key(command: &str) -> String {
    format!("sh:{}", stable_hash(command))
}

/// The key of a file tool on a path.
pub(crate) fn file_key(tool: &str, path: &str) -> String {
    format!("file:{}:{path}", normalize_name(tool))
}

impl Call {
    pub(crate) fn of(tool_use: &ToolUse) -> Call {
        let input = Input::of(tool_use);
        let name = tool_use.name.clone();
        let norm = normalize_name(&name);
        let shell = is_shell_tool(&name);
        let other_key = || format!("tool:{norm}:{}", stable_hash(tool_use.input.as_str()));
        let mut call = Call {
            name,
            shell,
            ops: Vec::new(),
            about: String::new(),
            key: String::new(),
        };
        if shell {
            if let Some(cmd) = input.object().and_then(shell_command) {
                let text = cmd.text();
                call.ops = match &cmd {
                    ShellCommand::Script(s) => shell::file_ops(s),
                    ShellCommand::Argv(words) => {
                        let words: Vec<&str> = words.iter().map(String::as_str).collect();
                        shell::argv_file_ops(&words)
                    }
                };
                if text.contains("*** Begin Patch") {
                    call.ops.extend(patch_ops(&text));
                }
                call.about = first_line_marked(&text, ABOUT_CHARS).into_owned();
                call.key = shell_key(&text);
            } else {
                call.key = other_key();
            }
            return call;
        }
        if norm == "apply_patch" || norm == "patch" {
            call.ops = match &input {
                Input::Object(map) => map
                    .values()
                    .filter_map(Value::as_str)
                    .flat_map(patch_ops)
                    .collect(),
                Input::Text(t) => patch_ops(t),
                Input::Other => Vec::new(),
            };
            match call.ops.first() {
                Some((path, _)) => {
                    call.about = path.clone();
                    call.key = file_key(&norm, path);
                }
                None => call.key = other_key(),
            }
            return call;
        }
        if let Some(map) = input.object() {
            let command = map.get("command").and_then(Value::as_str);
            let op = if is_editor(&norm) || (norm == "edit" && command.is_some()) {
                command.and_then(editor_op)
            } else {
                simple_file_op(&norm)
            };
            if is_editor(&norm) || simple_file_op(&norm).is_some() {
                if let Some(path) = path_arg(map) {
                    call.key = file_key(&norm, &path);
                    if let Some(op) = op {
                        call.ops.push((path.clone(), op));
                    }
                    call.about = path;
                    return call;
                }
            }
        }
        call.about = describe(&input);
        call.key = other_key();
        call
    }
}

/// A short description of another tool's input: its first string argument's first line.
fn describe(input: &Input) -> String {
    let text = match input {
        Input::Object(map) => map.values().find_map(Value::as_str).unwrap_or(""),
        Input::Text(t) => t.as_str(),
        Input::Other => "",
    };
    first_line_marked(text, ABOUT_CHARS).into_owned()
}

/// The file operations of one tool call (see the module docs), whatever the call's outcome.
///
/// ```
/// use condense_model::{RawJson, ToolUse};
/// use condense_retain::{tool_file_ops, FileOp};
///
/// let call = ToolUse {
///     id: "t1".into(),
///     name: "str_replace_editor".into(),
///     input: RawJson::from_string_unchecked(r#"{"command":"create","path":"/w/app.py"}"#.into()),
///     extra: RawJson::default(),
/// };
/// assert_eq!(tool_file_ops(&call), vec![("/w/app.py".to_string(), FileOp::Create)]);
/// ```
pub fn tool_file_ops(tool_use: &ToolUse) -> Vec<(String, FileOp)> {
    Call::of(tool_use).ops
}

#[cfg(test)]
mod tests;
