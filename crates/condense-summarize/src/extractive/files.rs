//! The artifact trail: which files a span created, modified and read, from its tool calls.
//!
//! A file's status follows the order of what happened to it:
//!
//! | before \ then | read     | write (create/overwrite) | edit     |
//! |---------------|----------|--------------------------|----------|
//! | (unseen)      | Read     | Created                  | Modified |
//! | Read          | Read     | Modified                 | Modified |
//! | Created       | Created  | Created                  | Created  |
//! | Modified      | Modified | Modified                 | Modified |
//!
//! so a file both read and changed is listed as changed, and a `Write` to a file read earlier
//! is a modification, not a creation. The table is a fold over the events, which makes merging
//! a previous summary's status with a new span's ([`FileStatus::then`]) give exactly what
//! summarizing both spans at once would.

use super::shell;
use serde_json::{Map, Value};

/// What a tool call did to a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FileOp {
    Read,
    /// Created or overwritten whole (`Write`, `create`, `> file`).
    Write,
    /// Changed in place (`Edit`, `str_replace`, `sed -i`, `>> file`).
    Edit,
}

/// Where a file is listed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FileStatus {
    Created,
    Modified,
    Read,
}

impl FileStatus {
    /// The status after `op`, from `before` (`None`: not seen yet).
    pub(crate) fn after(before: Option<FileStatus>, op: FileOp) -> FileStatus {
        match (before, op) {
            (Some(s @ (FileStatus::Created | FileStatus::Modified)), _) => s,
            (None | Some(FileStatus::Read), FileOp::Read) => FileStatus::Read,
            (None, FileOp::Write) => FileStatus::Created,
            (None, FileOp::Edit) | (Some(FileStatus::Read), _) => FileStatus::Modified,
        }
    }

    /// The status of a file that was `self` in an earlier span and `later` in the next one
    /// (each computed from "unseen").
    pub(crate) fn then(self, later: FileStatus) -> FileStatus {
        match (self, later) {
            (FileStatus::Read, FileStatus::Read) => FileStatus::Read,
            (FileStatus::Read, _) => FileStatus::Modified,
            (earlier, _) => earlier,
        }
    }

    pub(crate) fn heading(self) -> &'static str {
        match self {
            FileStatus::Created => "Created",
            FileStatus::Modified => "Modified",
            FileStatus::Read => "Read",
        }
    }
}

/// Files by path, least recently touched first.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct FileTable {
    entries: Vec<(String, FileStatus)>,
}

impl FileTable {
    /// Records an operation on `path`; the path becomes the most recent.
    pub(crate) fn touch(&mut self, path: &str, op: FileOp) {
        let before = self.take(path);
        self.entries
            .push((path.to_string(), FileStatus::after(before, op)));
    }

    /// Adds a file with a known status (from a parsed summary), as the most recent.
    pub(crate) fn insert(&mut self, path: &str, status: FileStatus) {
        let before = self.take(path);
        let status = before.map_or(status, |b| b.then(status));
        self.entries.push((path.to_string(), status));
    }

    /// Merges a later span's table into this one: statuses combine with
    /// [`FileStatus::then`], and the later span's files become the most recent, in its order.
    pub(crate) fn merge_later(&mut self, later: &FileTable) {
        for (path, status) in &later.entries {
            self.insert(path, *status);
        }
    }

    fn take(&mut self, path: &str) -> Option<FileStatus> {
        let i = self.entries.iter().position(|(p, _)| p == path)?;
        Some(self.entries.remove(i).1)
    }

    /// `(path, status)`, least recently touched first.
    pub(crate) fn entries(&self) -> &[(String, FileStatus)] {
        &self.entries
    }
}

/// Lower-case tool name with separators normalised (`Execute-Bash` → `execute_bash`).
fn norm(name: &str) -> String {
    name.to_ascii_lowercase().replace(['-', ' '], "_")
}

/// Whether a tool runs shell commands (its results are scanned for error lines).
pub(crate) fn is_shell_tool(name: &str) -> bool {
    let n = norm(name);
    matches!(
        n.as_str(),
        "bash"
            | "execute_bash"
            | "shell"
            | "local_shell"
            | "exec_command"
            | "run_shell_command"
            | "run_terminal_cmd"
            | "execute_command"
            | "terminal"
            | "bashoutput"
            | "bash_output"
            | "cmd_run"
    )
}

/// The command line of a shell tool call: `command` (or `cmd`) as a string, or as an argv
/// array (`["bash", "-lc", "cat x"]` gives `cat x`).
pub(crate) fn shell_command(input: &Map<String, Value>) -> Option<String> {
    match input.get("command").or_else(|| input.get("cmd"))? {
        Value::String(s) => Some(s.clone()),
        Value::Array(parts) => {
            let words: Vec<&str> = parts.iter().filter_map(Value::as_str).collect();
            match words.as_slice() {
                [sh, flag, script] if sh.ends_with("sh") && flag.starts_with('-') => {
                    Some((*script).to_string())
                }
                _ => Some(words.join(" ")),
            }
        }
        _ => None,
    }
}

fn path_arg(input: &Map<String, Value>) -> Option<String> {
    ["file_path", "path", "notebook_path", "filepath", "filename"]
        .iter()
        .find_map(|k| input.get(*k).and_then(Value::as_str))
        .map(|p| p.strip_prefix("./").unwrap_or(p).to_string())
        .filter(|p| !p.is_empty())
}

/// The file operations of one tool call.
pub(crate) fn ops_of_tool_use(name: &str, input: &Map<String, Value>) -> Vec<(String, FileOp)> {
    let n = norm(name);
    let simple = match n.as_str() {
        "write" | "write_file" | "create_file" | "notebookwrite" => Some(FileOp::Write),
        "edit" | "multiedit" | "multi_edit" | "notebookedit" | "notebook_edit" | "edit_file"
        | "replace" | "str_replace" | "insert" => Some(FileOp::Edit),
        "read" | "view" | "read_file" | "view_file" | "notebookread" | "open_file" => {
            Some(FileOp::Read)
        }
        // Anthropic's text editor tool and OpenHands' editor: the `command` says what it does.
        "str_replace_editor"
        | "str_replace_based_edit_tool"
        | "text_editor"
        | "file_editor"
        | "edit_tool" => match input.get("command").and_then(Value::as_str) {
            Some("create") => Some(FileOp::Write),
            Some("str_replace" | "insert" | "undo_edit" | "edit") => Some(FileOp::Edit),
            Some("view" | "read") => Some(FileOp::Read),
            _ => None,
        },
        _ => None,
    };
    if let Some(op) = simple {
        return path_arg(input).map(|p| vec![(p, op)]).unwrap_or_default();
    }
    if n == "apply_patch" || n == "patch" {
        return input
            .values()
            .filter_map(Value::as_str)
            .flat_map(patch_ops)
            .collect();
    }
    if is_shell_tool(name) {
        if let Some(cmd) = shell_command(input) {
            let mut ops = shell::file_ops(&cmd);
            if cmd.contains("*** Begin Patch") {
                ops.extend(patch_ops(&cmd));
            }
            return ops;
        }
    }
    Vec::new()
}

/// Files named by an `apply_patch` envelope (`*** Add File:`, `*** Update File:`, `*** Move to:`).
fn patch_ops(text: &str) -> Vec<(String, FileOp)> {
    text.lines()
        .filter_map(|line| {
            let line = line.trim();
            let (op, rest) = if let Some(r) = line.strip_prefix("*** Add File:") {
                (FileOp::Write, r)
            } else if let Some(r) = line.strip_prefix("*** Update File:") {
                (FileOp::Edit, r)
            } else if let Some(r) = line.strip_prefix("*** Move to:") {
                (FileOp::Write, r)
            } else {
                return None;
            };
            let path = rest.trim();
            (!path.is_empty()).then(|| (path.to_string(), op))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ops(name: &str, input: Value) -> Vec<(String, FileOp)> {
        match input {
            Value::Object(m) => ops_of_tool_use(name, &m),
            _ => Vec::new(),
        }
    }

    #[test]
    fn status_table() {
        use FileOp::*;
        let run = |events: &[FileOp]| {
            let mut t = FileTable::default();
            for e in events {
                t.touch("f", *e);
            }
            t.entries()[0].1
        };
        assert_eq!(run(&[Read]), FileStatus::Read);
        assert_eq!(run(&[Write, Edit]), FileStatus::Created);
        assert_eq!(run(&[Read, Write]), FileStatus::Modified);
        assert_eq!(run(&[Edit, Read]), FileStatus::Modified);
        assert_eq!(run(&[Read, Read, Edit]), FileStatus::Modified);
    }

    #[test]
    fn merging_equals_folding() {
        use FileOp::*;
        let all = [Read, Write, Edit];
        let seqs: Vec<Vec<FileOp>> = (0..3)
            .flat_map(|a| {
                (0..3).flat_map(move |b| (0..3).map(move |c| vec![all[a], all[b], all[c]]))
            })
            .collect();
        for s in &seqs {
            for split in 0..=s.len() {
                let (a, b) = s.split_at(split);
                let mut whole = FileTable::default();
                s.iter().for_each(|op| whole.touch("f", *op));
                let (mut ta, mut tb) = (FileTable::default(), FileTable::default());
                a.iter().for_each(|op| ta.touch("f", *op));
                b.iter().for_each(|op| tb.touch("f", *op));
                ta.merge_later(&tb);
                assert_eq!(ta, whole, "{s:?} split at {split}");
            }
        }
    }

    #[test]
    fn tools() {
        assert_eq!(
            ops("Write", json!({"file_path": "/a.rs"})),
            vec![("/a.rs".into(), FileOp::Write)]
        );
        assert_eq!(
            ops("MultiEdit", json!({"file_path": "b.rs", "edits": []})),
            vec![("b.rs".into(), FileOp::Edit)]
        );
        assert_eq!(
            ops("NotebookEdit", json!({"notebook_path": "n.ipynb"})),
            vec![("n.ipynb".into(), FileOp::Edit)]
        );
        assert_eq!(
            ops(
                "str_replace_editor",
                json!({"command": "create", "path": "/w/x.py"})
            ),
            vec![("/w/x.py".into(), FileOp::Write)]
        );
        assert_eq!(
            ops(
                "str_replace_editor",
                json!({"command": "view", "path": "/w/x.py"})
            ),
            vec![("/w/x.py".into(), FileOp::Read)]
        );
        assert_eq!(ops("Glob", json!({"path": "src"})), vec![]);
        assert_eq!(
            ops(
                "shell",
                json!({"command": ["bash", "-lc", "sed -i 's/a/b/' c.rs"]})
            ),
            vec![("c.rs".into(), FileOp::Edit)]
        );
        assert_eq!(
            ops(
                "apply_patch",
                json!({"input": "*** Begin Patch\n*** Add File: n.rs\n+x\n*** Update File: o.rs\n*** End Patch"})
            ),
            vec![
                ("n.rs".into(), FileOp::Write),
                ("o.rs".into(), FileOp::Edit)
            ]
        );
    }
}
