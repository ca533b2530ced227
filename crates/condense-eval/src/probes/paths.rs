//! Written paths: the artifact probes.
//!
//! A path is *written* when a tool call (of a chat message, or of a sub-agent's line carried as
//! an event with its content) created, overwrote, edited, appended to, moved or copied to, or
//! deleted it. The calls recognised (tool names compared case-insensitively, `-` and spaces as
//! `_`):
//!
//! - `Write`, `write_file`, `create_file`: always (created or overwritten);
//! - `Edit`, `MultiEdit`, `NotebookEdit`, `edit_file`, `str_replace`, `insert`, `replace`:
//!   always (edited);
//! - `str_replace_editor`, `str_replace_based_edit_tool`, `text_editor`, `file_editor`,
//!   `edit_tool`, OpenHands `edit`: when `command` is `create`, `str_replace`, `insert`,
//!   `undo_edit`, `edit` or `write`;
//! - `apply_patch`, `patch`: the `*** Add File:`, `*** Update File:`, `*** Delete File:` and
//!   `*** Move to:` lines of any string argument;
//! - shell tools (`bash`, `shell`, `exec_command`, ...): see [`super::shell`].
//!
//! File and editor tools name the path in `file_path`, `path`, `notebook_path`, `filepath` or
//! `filename`. A file, editor or patch call whose result says `is_error: true` wrote nothing; a
//! failed shell command may have written, so it counts.
//!
//! ```
//! use condense_eval::probes::paths::written_paths;
//! use condense_model::{Block, Conversation, Message, RawJson, Role};
//!
//! let call = |id: &str, name: &str, input: &str| {
//!     Block::tool_use(id, name, RawJson::from_string_unchecked(input.into()))
//! };
//! let mut conv = Conversation::default();
//! conv.messages.push(Message::new("a", Role::Assistant, vec![
//!     call("1", "Write", r#"{"file_path":"./src/lib.rs","content":"..."}"#),
//!     call("2", "Read", r#"{"file_path":"README.md"}"#),
//!     call("3", "str_replace_editor", r#"{"command":"create","path":"/repo/new.py"}"#),
//! ]));
//! assert_eq!(written_paths(&conv), ["src/lib.rs", "/repo/new.py"]);
//! ```

use super::{norm_tool, push_distinct, shell, work_messages};
use condense_model::{Conversation, ToolUse};
use serde_json::{Map, Value};
use std::collections::HashSet;

/// Tools that create or overwrite the file they name.
const WRITE_TOOLS: &[&str] = &["write", "write_file", "create_file"];
/// Tools that edit the file they name.
const EDIT_TOOLS: &[&str] = &[
    "edit",
    "multiedit",
    "notebookedit",
    "edit_file",
    "str_replace",
    "insert",
    "replace",
];
/// Editor tools whose `command` argument says what they do.
const EDITOR_TOOLS: &[&str] = &[
    "str_replace_editor",
    "str_replace_based_edit_tool",
    "text_editor",
    "file_editor",
    "edit_tool",
];
/// Editor commands that write the file.
const EDITOR_WRITES: &[&str] = &[
    "create",
    "str_replace",
    "insert",
    "undo_edit",
    "edit",
    "write",
];
/// Patch tools: every string argument may hold a patch.
const PATCH_TOOLS: &[&str] = &["apply_patch", "patch"];
/// Shell tools: the command is in `command` or `cmd`.
pub(crate) const SHELL_TOOLS: &[&str] = &[
    "bash",
    "execute_bash",
    "shell",
    "local_shell",
    "exec_command",
    "run_shell_command",
    "run_terminal_cmd",
    "execute_command",
    "terminal",
    "cmd_run",
];
/// Where file and editor tools name their path.
const PATH_KEYS: &[&str] = &["file_path", "path", "notebook_path", "filepath", "filename"];

/// The written paths of a conversation, distinct, in the order first written.
pub fn written_paths(conv: &Conversation) -> Vec<String> {
    let failed: HashSet<&str> = work_messages(conv)
        .flat_map(|m| m.tool_results())
        .filter(|tr| tr.is_error == Some(true))
        .map(|tr| tr.tool_use_id.as_str())
        .collect();
    let mut out = Vec::new();
    for tu in work_messages(conv).flat_map(|m| m.tool_uses()) {
        for path in call_writes(tu, failed.contains(tu.id.as_str())) {
            push_distinct(&mut out, path);
        }
    }
    out
}

/// The paths one call wrote (normalised, unfiltered for duplicates). `failed`: its result says
/// `is_error: true`.
pub fn call_writes(tu: &ToolUse, failed: bool) -> Vec<String> {
    let name = norm_tool(&tu.name);
    let input = tu.input_object();
    let mut raw = Vec::new();
    if SHELL_TOOLS.contains(&name.as_str()) {
        if let Some(obj) = &input {
            raw = shell_command_writes(obj);
        }
    } else if failed {
        return Vec::new();
    } else if PATCH_TOOLS.contains(&name.as_str()) {
        let texts = match tu.input.to_value() {
            Ok(v) => {
                let mut texts = Vec::new();
                strings_in(&v, &mut texts);
                texts
            }
            // Arguments that are not JSON (a free-form patch) are the patch itself.
            Err(_) => vec![tu.input.as_str().to_string()],
        };
        for t in texts {
            raw.extend(patch_writes(&t));
        }
    } else if let Some(obj) = &input {
        let command = obj.get("command").and_then(Value::as_str);
        let editor = EDITOR_TOOLS.contains(&name.as_str()) || (name == "edit" && command.is_some());
        let writes = if editor {
            command.is_some_and(|c| EDITOR_WRITES.contains(&c))
        } else {
            WRITE_TOOLS.contains(&name.as_str()) || EDIT_TOOLS.contains(&name.as_str())
        };
        if writes {
            raw.extend(path_argument(obj));
        }
    }
    raw.into_iter().filter_map(|p| normalise(&p)).collect()
}

/// The first of the path keys holding a string.
fn path_argument(obj: &Map<String, Value>) -> Option<String> {
    PATH_KEYS
        .iter()
        .find_map(|k| obj.get(*k).and_then(Value::as_str))
        .map(str::to_string)
}

/// Paths written by a shell tool's `command` / `cmd` (a string, or an argv array).
fn shell_command_writes(obj: &Map<String, Value>) -> Vec<String> {
    let Some(cmd) = obj.get("command").or_else(|| obj.get("cmd")) else {
        return Vec::new();
    };
    match cmd {
        Value::String(script) => script_writes(script),
        Value::Array(items) => {
            let argv: Vec<String> = items
                .iter()
                .filter_map(|v| v.as_str().map(str::to_string))
                .collect();
            argv_writes(&argv)
        }
        _ => Vec::new(),
    }
}

/// A shell script: patches it applies plus what its commands write.
fn script_writes(script: &str) -> Vec<String> {
    let mut out = Vec::new();
    if script.contains("*** Begin Patch") {
        out.extend(patch_writes(script));
    }
    out.extend(shell::writes(script));
    out
}

/// An argv array: `["bash", "-lc", SCRIPT]` runs the script; anything else is one command.
fn argv_writes(argv: &[String]) -> Vec<String> {
    let shells = ["bash", "sh", "zsh", "dash", "ksh"];
    if let [first, .., flag, script] = argv {
        let base = first.rsplit('/').next().unwrap_or(first);
        if shells.contains(&base) && flag.starts_with('-') && flag.contains('c') {
            return script_writes(script);
        }
    }
    let mut out = Vec::new();
    if argv.iter().any(|a| a.contains("*** Begin Patch")) {
        for a in argv {
            out.extend(patch_writes(a));
        }
    }
    out.extend(shell::command_writes(argv));
    out
}

/// Every string inside a JSON value.
fn strings_in(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::String(s) => out.push(s.clone()),
        Value::Array(items) => items.iter().for_each(|i| strings_in(i, out)),
        Value::Object(map) => map.values().for_each(|i| strings_in(i, out)),
        _ => {}
    }
}

/// Paths a patch in the `*** Begin Patch` format writes.
pub fn patch_writes(text: &str) -> Vec<String> {
    const MARKERS: [&str; 4] = [
        "*** Add File:",
        "*** Update File:",
        "*** Delete File:",
        "*** Move to:",
    ];
    let mut out = Vec::new();
    for line in text.lines() {
        let line = line.trim_start();
        if let Some(path) = MARKERS.iter().find_map(|m| line.strip_prefix(m)) {
            let path = path.trim();
            if !path.is_empty() {
                out.push(path.to_string());
            }
        }
    }
    out
}

/// The spec's one normalisation: a leading `./` is removed. Empty paths and `/dev/...` are
/// not paths.
pub(crate) fn normalise(path: &str) -> Option<String> {
    let p = path.strip_prefix("./").unwrap_or(path);
    if p.is_empty() || p == "." || p.starts_with("/dev/") {
        return None;
    }
    Some(p.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use condense_model::{Block, Content, Message, RawJson, Role, ToolResult};
    use serde_json::json;

    fn conv(calls: &[(&str, Value)]) -> Conversation {
        let mut c = Conversation::default();
        let blocks = calls
            .iter()
            .enumerate()
            .map(|(i, (name, input))| {
                Block::tool_use(format!("t{i}"), *name, RawJson::from_value(input))
            })
            .collect();
        c.messages.push(Message::new("a", Role::Assistant, blocks));
        c
    }

    #[test]
    fn file_tools_write_read_tools_do_not() {
        let c = conv(&[
            ("Write", json!({"file_path": "./a.txt", "content": "x"})),
            ("write_file", json!({"path": "b.txt"})),
            ("Create-File", json!({"filename": "c.txt"})),
            ("Edit", json!({"file_path": "d.rs"})),
            ("MultiEdit", json!({"file_path": "e.rs", "edits": []})),
            ("NotebookEdit", json!({"notebook_path": "f.ipynb"})),
            ("edit_file", json!({"filepath": "g.rs"})),
            ("str_replace", json!({"path": "h.rs"})),
            ("insert", json!({"path": "i.rs"})),
            ("replace", json!({"file_path": "j.rs"})),
            ("Read", json!({"file_path": "k.rs"})),
            ("view_file", json!({"path": "l.rs"})),
            ("NotebookRead", json!({"notebook_path": "m.ipynb"})),
            ("Write", json!({"file_path": "a.txt"})),
        ]);
        assert_eq!(
            written_paths(&c),
            [
                "a.txt", "b.txt", "c.txt", "d.rs", "e.rs", "f.ipynb", "g.rs", "h.rs", "i.rs",
                "j.rs"
            ]
        );
    }

    #[test]
    fn editor_tools_follow_their_command() {
        let c = conv(&[
            (
                "str_replace_editor",
                json!({"command": "create", "path": "/r/a.py"}),
            ),
            (
                "str_replace_based_edit_tool",
                json!({"command": "str_replace", "path": "/r/b.py"}),
            ),
            (
                "text_editor",
                json!({"command": "insert", "path": "/r/c.py"}),
            ),
            (
                "file_editor",
                json!({"command": "undo_edit", "path": "/r/d.py"}),
            ),
            ("edit_tool", json!({"command": "write", "path": "/r/e.py"})),
            (
                "str_replace_editor",
                json!({"command": "view", "path": "/r/f.py"}),
            ),
            (
                "str_replace_editor",
                json!({"command": "read", "path": "/r/g.py"}),
            ),
            // OpenHands `edit` action: the `edit` tool with a command.
            ("edit", json!({"command": "edit", "path": "/r/h.py"})),
            ("edit", json!({"command": "view", "path": "/r/i.py"})),
            // OpenHands read actions carry no command.
            ("str_replace_editor", json!({"path": "/r/j.py", "start": 0})),
        ]);
        assert_eq!(
            written_paths(&c),
            ["/r/a.py", "/r/b.py", "/r/c.py", "/r/d.py", "/r/e.py", "/r/h.py"]
        );
    }

    #[test]
    fn patches_add_update_delete_and_move() {
        let patch = "*** Begin Patch\n*** Add File: ./new.txt\n+hi\n*** Update File: src/old.rs\n*** Move to: src/renamed.rs\n@@\n-a\n+b\n*** Delete File: gone.md\n*** End Patch";
        let c = conv(&[
            ("apply_patch", json!({"input": patch})),
            (
                "shell",
                json!({"command": ["apply_patch", "*** Begin Patch\n*** Add File: x.txt\n*** End Patch"]}),
            ),
            (
                "bash",
                json!({"command": format!("apply_patch <<'EOF'\n{patch}\nEOF")}),
            ),
        ]);
        assert_eq!(
            written_paths(&c),
            [
                "new.txt",
                "src/old.rs",
                "src/renamed.rs",
                "gone.md",
                "x.txt"
            ]
        );
        // A free-form (non-JSON) patch argument.
        let mut raw = conv(&[]);
        raw.messages[0].content.blocks.push(Block::tool_use(
            "p",
            "apply_patch",
            RawJson::from_string_unchecked("*** Begin Patch\n*** Add File: free.txt".into()),
        ));
        assert_eq!(written_paths(&raw), ["free.txt"]);
    }

    #[test]
    fn argv_arrays_run_their_script() {
        let c = conv(&[
            (
                "local_shell",
                json!({"command": ["bash", "-lc", "echo hi > a.log"]}),
            ),
            ("exec_command", json!({"cmd": ["touch", "b.log"]})),
            ("run_shell_command", json!({"command": "rm -rf build"})),
        ]);
        assert_eq!(written_paths(&c), ["a.log", "b.log", "build"]);
    }

    #[test]
    fn failed_file_calls_wrote_nothing_failed_shell_may_have() {
        let mut c = conv(&[
            ("Write", json!({"file_path": "nope.txt"})),
            ("Bash", json!({"command": "make > build.log"})),
        ]);
        let failed = |id: &str| {
            Block::ToolResult(ToolResult {
                is_error: Some(true),
                ..ToolResult::new(id, Content::string("failed"))
            })
        };
        c.messages.push(Message::new(
            "r",
            Role::User,
            vec![failed("t0"), failed("t1")],
        ));
        assert_eq!(written_paths(&c), ["build.log"]);
    }

    #[test]
    fn normalisation() {
        assert_eq!(normalise("./a/b").as_deref(), Some("a/b"));
        assert_eq!(normalise("a/./b").as_deref(), Some("a/./b"));
        assert_eq!(normalise("/dev/null"), None);
        assert_eq!(normalise("./"), None);
    }
}
