//! Tests of tool-call recognition: file, editor, patch and shell tools of every agent, and
//! how a failed call's error is described and keyed.

use super::*;
use condense_model::RawJson;
use serde_json::json;
use FileOp::*;

fn call(name: &str, input: Value) -> Call {
    call_raw(name, &input.to_string())
}

fn call_raw(name: &str, input: &str) -> Call {
    Call::of(&ToolUse {
        id: "t".into(),
        name: name.into(),
        input: RawJson::from_string_unchecked(input.into()),
        extra: RawJson::default(),
    })
}

fn ops(name: &str, input: Value) -> Vec<(String, FileOp)> {
    call(name, input).ops
}

fn p(s: &str, op: FileOp) -> (String, FileOp) {
    (s.to_string(), op)
}

#[test]
fn file_tools() {
    assert_eq!(
        ops("Write", json!({"file_path": "/a.rs"})),
        vec![p("/a.rs", Write)]
    );
    assert_eq!(
        ops("write_file", json!({"path": "./b.rs"})),
        vec![p("b.rs", Write)]
    );
    assert_eq!(
        ops("create-file", json!({"filepath": "c.rs"})),
        vec![p("c.rs", Write)]
    );
    assert_eq!(
        ops("MultiEdit", json!({"file_path": "b.rs", "edits": []})),
        vec![p("b.rs", Edit)]
    );
    assert_eq!(
        ops("NotebookEdit", json!({"notebook_path": "n.ipynb"})),
        vec![p("n.ipynb", Edit)]
    );
    for name in ["Edit", "edit_file", "str_replace", "insert", "replace"] {
        assert_eq!(
            ops(name, json!({"path": "x"})),
            vec![p("x", Edit)],
            "{name}"
        );
    }
    for name in [
        "Read",
        "read_file",
        "view",
        "view_file",
        "open_file",
        "NotebookRead",
    ] {
        assert_eq!(
            ops(name, json!({"filename": "y"})),
            vec![p("y", Read)],
            "{name}"
        );
    }
    assert_eq!(ops("Glob", json!({"path": "src"})), vec![]);
    assert_eq!(ops("Write", json!({"content": "no path"})), vec![]);
}

#[test]
fn editor_tools_follow_their_command() {
    for name in [
        "str_replace_editor",
        "str_replace_based_edit_tool",
        "text_editor",
        "file_editor",
        "edit_tool",
    ] {
        let c = |command: &str| ops(name, json!({"command": command, "path": "/w/x.py"}));
        assert_eq!(c("create"), vec![p("/w/x.py", Create)], "{name}");
        for edit in ["str_replace", "insert", "undo_edit", "edit", "write"] {
            assert_eq!(c(edit), vec![p("/w/x.py", Edit)], "{name} {edit}");
        }
        assert_eq!(c("view"), vec![p("/w/x.py", Read)]);
        assert_eq!(c("read"), vec![p("/w/x.py", Read)]);
        assert_eq!(c("bogus"), vec![]);
    }
}

#[test]
fn openhands_edit_events() {
    // An OpenHands `edit` action's args (the reader makes them the tool input; the function
    // may be `str_replace_editor` or a tool named `edit`).
    let args = json!({"path": "/workspace/p/src/parser.c", "command": "str_replace",
        "file_text": null, "old_str": "a", "new_str": "b", "insert_line": null,
        "content": "", "start": 1, "end": -1, "thought": "", "impl_source": "oh_aci"});
    assert_eq!(
        ops("str_replace_editor", args.clone()),
        vec![p("/workspace/p/src/parser.c", Edit)]
    );
    assert_eq!(
        ops("edit", args),
        vec![p("/workspace/p/src/parser.c", Edit)]
    );
    assert_eq!(
        ops(
            "edit",
            json!({"path": "/w/new.py", "command": "create", "file_text": "x"})
        ),
        vec![p("/w/new.py", Create)]
    );
    assert_eq!(
        ops("edit", json!({"path": "/w/a.py", "command": "view"})),
        vec![p("/w/a.py", Read)]
    );
    // An LLM-based edit without a command.
    assert_eq!(
        ops(
            "edit",
            json!({"path": "/w/b.py", "content": "x", "start": 1, "end": -1})
        ),
        vec![p("/w/b.py", Edit)]
    );
}

#[test]
fn apply_patch_in_every_shape() {
    let patch = "*** Begin Patch\n*** Add File: n.rs\n+x\n*** Update File: o.rs\n@@\n-a\n+b\n*** Update File: src/old.rs\n*** Move to: src/new.rs\n*** Delete File: ./gone.rs\n*** End Patch";
    let want = vec![
        p("n.rs", Create),
        p("o.rs", Edit),
        p("src/old.rs", Edit),
        p("src/old.rs", MoveFrom),
        p("src/new.rs", MoveTo),
        p("gone.rs", Delete),
    ];
    // A JSON object with the patch in any string argument.
    assert_eq!(ops("apply_patch", json!({"input": patch})), want);
    assert_eq!(ops("patch", json!({"patch": patch})), want);
    // A Codex custom tool call: the input is the patch text itself, not JSON.
    assert_eq!(call_raw("apply_patch", patch).ops, want);
    // ... or a JSON string.
    assert_eq!(ops("apply_patch", json!(patch)), want);
    // Through a shell tool, as an argv array or inside a here-document.
    assert_eq!(
        ops("shell", json!({"command": ["apply_patch", patch]})),
        want
    );
    let heredoc = format!("apply_patch <<'EOF'\n{patch}\nEOF");
    assert_eq!(ops("exec_command", json!({"cmd": heredoc})), want);
    let c = call("apply_patch", json!({"input": patch}));
    assert_eq!(
        (c.about.as_str(), c.key.as_str()),
        ("n.rs", "file:apply_patch:n.rs")
    );
}

#[test]
fn shell_tools_and_argv_arrays() {
    for name in [
        "bash",
        "Bash",
        "execute_bash",
        "shell",
        "local_shell",
        "exec_command",
        "run_shell_command",
        "run_terminal_cmd",
        "execute_command",
        "terminal",
        "cmd_run",
        "Execute-Bash",
    ] {
        assert_eq!(
            ops(name, json!({"command": "rm -f a.txt"})),
            vec![p("a.txt", Delete)],
            "{name}"
        );
    }
    assert_eq!(
        ops("exec_command", json!({"cmd": "touch t"})),
        vec![p("t", Touch)]
    );
    assert_eq!(
        ops(
            "shell",
            json!({"command": ["bash", "-lc", "sed -i 's/a/b/' c.rs"]})
        ),
        vec![p("c.rs", Edit)]
    );
    assert_eq!(
        ops(
            "local_shell",
            json!({"command": ["mv", "a", "b"], "workdir": "/r"})
        ),
        vec![p("a", MoveFrom), p("b", MoveTo)]
    );
    assert_eq!(ops("BashOutput", json!({"bash_id": "b1"})), vec![]);
}

#[test]
fn error_descriptions_and_keys() {
    let c = call("Bash", json!({"command": "npm run build\necho done"}));
    assert_eq!(c.about, "npm run build…");
    assert_eq!(c.key, shell_key("npm run build\necho done"));
    assert!(c.shell);
    let c = call(
        "Edit",
        json!({"file_path": "./src/a.rs", "old_string": "x"}),
    );
    assert_eq!(
        (c.about.as_str(), c.key.as_str()),
        ("src/a.rs", "file:edit:src/a.rs")
    );
    let c = call(
        "str_replace_editor",
        json!({"command": "bogus", "path": "/a"}),
    );
    assert_eq!((c.about.as_str(), c.ops.len()), ("/a", 0));
    let c = call(
        "WebFetch",
        json!({"url": "https://x.test/a", "prompt": "p"}),
    );
    assert_eq!(c.about, "https://x.test/a");
    assert!(c.key.starts_with("tool:webfetch:"));
    assert!(!is_file_tool("Grep") && is_file_tool("MultiEdit") && is_file_tool("file_editor"));
}
