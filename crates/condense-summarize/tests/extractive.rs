//! The extractive summarizer: every section on a hand-made session, the real Claude Code
//! transcript's artifact trail, incremental merges, and the token budget.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use condense_model::{Block, Conversation, Message};
use condense_summarize::{build, Summarizer, SummarizerConfig, SummaryRequest};
use condense_tokens::TokenCounter;
use serde_json::json;
use std::collections::BTreeSet;
use std::sync::Arc;
use support::{assistant, call, result, user};

fn extractive() -> Box<dyn Summarizer> {
    build(
        &SummarizerConfig::default(),
        Arc::new(TokenCounter::default()),
    )
    .unwrap()
}

fn summarize(messages: &[Message], previous: Option<&str>, max_tokens: usize) -> String {
    extractive()
        .summarize(&SummaryRequest {
            messages,
            previous_summary: previous,
            max_tokens,
            purpose: "context-collapse",
        })
        .unwrap()
}

/// A debugging session that fills every section.
fn session() -> Vec<Message> {
    vec![
        user("u1", "Fix the 401 on /api/auth/login.\nThe tests are in tests/auth.test.ts."),
        user("u2", "<system-reminder>The date is today.</system-reminder>"),
        call("a1", "I'll read the controller first.", "toolu_01", "Read", json!({"file_path": "src/auth/controller.ts"})),
        result("r1", "toolu_01", "export function login() {}", None),
        call("a2", "", "toolu_02", "Bash", json!({"command": "cat config/redis.ts && head -n 20 src/session/store.ts"})),
        result("r2", "toolu_02", "export const redis = {}", None),
        call("a3", "", "toolu_03", "Bash", json!({"command": "npm test"})),
        result(
            "r3",
            "toolu_03",
            "FAIL tests/auth.test.ts\n  login returns 200\n    Error: expected 200, got 401\nTests:       2 failed, 14 passed, 16 total",
            Some(true),
        ),
        assistant("a4", "The root cause is a stale Redis connection in the session store. I'll use a connection pool instead of per-request connections."),
        call("a5", "", "toolu_05", "Edit", json!({"file_path": "config/redis.ts", "old_string": "a", "new_string": "b"})),
        result("r5", "toolu_05", "The file config/redis.ts has been updated.", None),
        call("a6", "", "toolu_06", "Write", json!({"file_path": "src/session/retry.ts", "content": "export {}"})),
        result("r6", "toolu_06", "File created successfully", None),
        call("a7", "", "toolu_07", "Bash", json!({"command": "sed -i 's/timeout: 5/timeout: 30/' src/session/store.ts"})),
        result("r7", "toolu_07", "", None),
        call("a8", "", "toolu_08", "TodoWrite", json!({"todos": [
            {"content": "Fix connection pooling", "status": "completed", "activeForm": "Fixing"},
            {"content": "Fix remaining test failures", "status": "in_progress", "activeForm": "Fixing"},
            {"content": "Update documentation", "status": "pending", "activeForm": "Updating"}
        ]})),
        result("r8", "toolu_08", "Todos have been modified successfully", None),
        call("a9", "", "toolu_09", "Bash", json!({"command": "npm test -- auth"})),
        result("r9", "toolu_09", "Tests:       1 failed, 15 passed, 16 total", Some(true)),
        assistant("a10", "One failure left: the session mock still returns the old client."),
        user("u3", "Also add a retry test, and don't touch the CORS middleware."),
    ]
}

#[test]
fn hand_made_session_fills_every_section() {
    let s = summarize(&session(), None, 2_000);
    insta::assert_snapshot!("hand_made_session", s);
    assert_eq!(s, summarize(&session(), None, 2_000), "deterministic");
}

fn real_transcript() -> Conversation {
    let dir = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../tests/fixtures/transcripts/d-kimuson__claude-code-viewer"
    );
    let path = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "jsonl"))
        .unwrap();
    let bytes = std::fs::read(&path).unwrap();
    let doc = condense_formats::read(&bytes, &path.to_string_lossy(), &Default::default()).unwrap();
    doc.conversations()[0].clone()
}

/// Paths the session wrote or edited, from its tool calls.
fn written_paths(messages: &[Message]) -> BTreeSet<String> {
    messages
        .iter()
        .flat_map(|m| m.tool_uses())
        .filter(|tu| matches!(tu.name.as_str(), "Write" | "Edit" | "MultiEdit"))
        .filter_map(|tu| {
            tu.input_object()?
                .get("file_path")?
                .as_str()
                .map(str::to_string)
        })
        .collect()
}

/// The text of one `## ` section.
fn section<'a>(summary: &'a str, heading: &str) -> &'a str {
    let start = summary
        .find(&format!("## {heading}\n"))
        .unwrap_or_else(|| panic!("no {heading} in\n{summary}"));
    let rest = &summary[start..];
    let end = rest[3..].find("\n## ").map_or(rest.len(), |e| e + 3);
    rest[..end].trim_end()
}

#[test]
fn real_transcript_names_every_file_written_or_edited() {
    let conv = real_transcript();
    let expected = written_paths(&conv.messages);
    assert!(expected.len() >= 20, "{expected:?}");
    let s = summarize(&conv.messages, None, 8_000);
    let files = section(&s, "Files");
    for p in &expected {
        assert!(
            files.contains(&format!("`{p}`")),
            "{p} missing from\n{files}"
        );
    }
    // Written or edited files are never listed as read only.
    let read = files.split("### Read").nth(1).unwrap_or("");
    for p in &expected {
        assert!(!read.contains(&format!("`{p}`")), "{p} listed as read");
    }
    assert!(section(&s, "Session intent").contains("/orchestrator create TODO app by Next.js"));
    assert!(TokenCounter::default().count_text(&s) <= 8_000);
    insta::assert_snapshot!("claude_code_viewer", s);
}

/// Whether cutting at `split` keeps every tool call with its result (spans are cut between
/// turns).
fn between_turns(msgs: &[Message], split: usize) -> bool {
    let (a, b) = msgs.split_at(split);
    let calls: Vec<&str> = a
        .iter()
        .flat_map(|m| m.tool_uses())
        .map(|t| t.id.as_str())
        .collect();
    !b.iter()
        .flat_map(|m| m.tool_results())
        .any(|r| calls.contains(&r.tool_use_id.as_str()))
}

/// The first cut at or after `at` that is between turns.
fn turn_split(msgs: &[Message], at: usize) -> usize {
    (at..msgs.len())
        .find(|s| between_turns(msgs, *s))
        .unwrap_or(msgs.len())
}

#[test]
fn merging_a_span_into_the_previous_summary_matches_summarizing_both() {
    let conv = real_transcript();
    let msgs = &conv.messages;
    let whole = summarize(msgs, None, 20_000);
    for at in [msgs.len() / 4, msgs.len() / 2, msgs.len() * 3 / 4] {
        let split = turn_split(msgs, at);
        let (a, b) = msgs.split_at(split);
        let first = summarize(a, None, 20_000);
        let merged = summarize(b, Some(&first), 20_000);
        assert_eq!(
            section(&merged, "Files"),
            section(&whole, "Files"),
            "split at {split}"
        );
        assert_eq!(
            section(&merged, "Session intent"),
            section(&whole, "Session intent")
        );
        assert_eq!(
            section(&merged, "Pending tasks and next steps"),
            section(&whole, "Pending tasks and next steps")
        );
        // Everything the previous summary named is still there.
        for line in section(&first, "Files")
            .lines()
            .filter(|l| l.starts_with("- "))
        {
            assert!(merged.contains(line), "{line} lost at split {split}");
        }
    }
    // Three rounds, as a long session would go.
    let (one, two) = (
        turn_split(msgs, msgs.len() / 3),
        turn_split(msgs, msgs.len() * 2 / 3),
    );
    let (a, b, c) = (&msgs[..one], &msgs[one..two], &msgs[two..]);
    let s1 = summarize(a, None, 20_000);
    let s2 = summarize(b, Some(&s1), 20_000);
    let s3 = summarize(c, Some(&s2), 20_000);
    assert_eq!(section(&s3, "Files"), section(&whole, "Files"));
    assert_eq!(
        s3,
        summarize(&[], Some(&s3), 20_000),
        "merging nothing changes nothing"
    );
}

#[test]
fn hand_made_session_merges_consistently() {
    let msgs = session();
    let whole = summarize(&msgs, None, 2_000);
    for split in 1..msgs.len() {
        if !between_turns(&msgs, split) {
            continue;
        }
        let (a, b) = msgs.split_at(split);
        let merged = summarize(b, Some(&summarize(a, None, 2_000)), 2_000);
        for heading in [
            "Files",
            "Session intent",
            "Current state",
            "Pending tasks and next steps",
        ] {
            assert_eq!(
                section(&merged, heading),
                section(&whole, heading),
                "{heading}, split at {split}"
            );
        }
    }
}

#[test]
fn merge_rules() {
    let previous = "## Session intent\n- Build the parser\n\n## Files\n### Created\n- `src/old.rs`\n### Read\n- `src/lib.rs`\n- `README.md`\n\n## Errors and fixes\n- `t0` Bash `make`:\n  make: *** No rule to make target\n\n## Decisions\n(none)\n\n## Current state\n- Last test run (`t1`): `cargo test` → 3 passed; 0 failed\n\n## Pending tasks and next steps\n- [pending] Write docs\n- Unanswered user request: add tests\n\n## Notes from the user\nKeep the public API stable.\n";
    let span = vec![
        call("a1", "", "t2", "Edit", json!({"file_path": "src/lib.rs"})),
        call(
            "a2",
            "",
            "t3",
            "TodoWrite",
            json!({"todos": [{"content": "Write docs", "status": "completed"}]}),
        ),
        user("u1", "Now the lexer."),
    ];
    let s = summarize(&span, Some(previous), 2_000);
    insta::assert_snapshot!("merge_rules", s);
    let files = section(&s, "Files");
    assert!(
        files.contains("### Modified\n- `src/lib.rs`"),
        "read then edited is modified:\n{files}"
    );
    assert!(
        files.contains("### Created\n- `src/old.rs`") && files.contains("### Read\n- `README.md`")
    );
    assert!(section(&s, "Session intent").contains("- Build the parser\n- Now the lexer."));
    assert!(section(&s, "Errors and fixes").contains("No rule to make target"));
    assert!(
        section(&s, "Current state").contains("3 passed"),
        "kept: the span ran no tests"
    );
    let pending = section(&s, "Pending tasks and next steps");
    assert!(
        !pending.contains("Write docs") && !pending.contains("add tests"),
        "{pending}"
    );
    assert!(pending.contains("Unanswered user request: Now the lexer."));
    assert!(section(&s, "Notes from the user").contains("Keep the public API stable."));
}

#[test]
fn a_foreign_previous_summary_is_kept() {
    let previous = "1. Primary Request and Intent:\n   Port the CLI to clap 4.\n3. Files and Code Sections:\n   - src/cli.rs";
    let s = summarize(&session(), Some(previous), 2_000);
    let earlier = section(&s, "Earlier summary");
    assert!(earlier.contains("Port the CLI to clap 4.") && earlier.contains("src/cli.rs"));
    assert!(section(&s, "Files").contains("`src/session/retry.ts`"));
}

#[test]
fn the_budget_is_respected() {
    let counter = TokenCounter::default();
    let conv = real_transcript();
    let previous = summarize(&conv.messages[..200], None, 3_000);
    for max in [0, 5, 20, 50, 100, 300, 1_000, 3_000] {
        for (msgs, prev) in [
            (&conv.messages[..], None),
            (&conv.messages[200..], Some(previous.as_str())),
            (&session()[..], None),
        ] {
            let s = summarize(msgs, prev, max);
            assert!(
                counter.count_text(&s) <= max,
                "{} > {max}:\n{s}",
                counter.count_text(&s)
            );
        }
    }
    // Small budgets keep the structure and the most important items.
    let s = summarize(&conv.messages, None, 300);
    for heading in [
        "Session intent",
        "Files",
        "Errors and fixes",
        "Decisions",
        "Current state",
        "Pending tasks and next steps",
    ] {
        assert!(
            s.contains(&format!("## {heading}\n")),
            "{heading} missing:\n{s}"
        );
    }
    assert!(
        s.contains("/orchestrator create TODO app"),
        "the first request is the anchor:\n{s}"
    );
    assert!(s.contains("more omitted)"), "{s}");
    let files = section(&s, "Files");
    assert!(
        files.contains("### Modified") || files.contains("### Created"),
        "{files}"
    );
}

#[test]
fn shell_and_editor_tools_of_other_agents() {
    let msgs = vec![
        user("u1", "Refactor the parser"),
        call(
            "a1",
            "",
            "c1",
            "str_replace_editor",
            json!({"command": "view", "path": "/workspace/parser.py"}),
        ),
        call(
            "a2",
            "",
            "c2",
            "str_replace_editor",
            json!({"command": "str_replace", "path": "/workspace/parser.py", "old_str": "a", "new_str": "b"}),
        ),
        call(
            "a3",
            "",
            "c3",
            "str_replace_editor",
            json!({"command": "create", "path": "/workspace/test_parser.py", "file_text": "x"}),
        ),
        call(
            "a4",
            "",
            "c4",
            "execute_bash",
            json!({"command": "cat > notes.md <<'EOF'\n# notes\ncat secret.txt\nEOF\necho done >> CHANGELOG.md"}),
        ),
        call(
            "a5",
            "",
            "c5",
            "shell",
            json!({"command": ["bash", "-lc", "pytest -q"]}),
        ),
        result(
            "r5",
            "c5",
            "F.\nFAILED test_parser.py::test_parse - AssertionError\n1 failed, 1 passed in 0.1s",
            None,
        ),
    ];
    let s = summarize(&msgs, None, 2_000);
    let files = section(&s, "Files");
    assert!(
        files.contains("### Created\n- `/workspace/test_parser.py`\n- `notes.md`\n"),
        "{files}"
    );
    assert!(
        files.contains("### Modified\n- `/workspace/parser.py`\n- `CHANGELOG.md`"),
        "{files}"
    );
    assert!(
        !s.contains("secret.txt"),
        "here-document bodies are not commands"
    );
    assert!(section(&s, "Errors and fixes")
        .contains("`c5` shell `pytest -q`:\n  FAILED test_parser.py::test_parse - AssertionError"));
    assert!(section(&s, "Current state")
        .contains("Last test run (`c5`): `pytest -q` → 1 failed, 1 passed in 0.1s"));
}

#[test]
fn requests_are_verbatim_and_boilerplate_is_skipped() {
    let msgs = vec![
        user("u1", "<command-message>review is running…</command-message>\n<command-name>/review</command-name>\n<command-args>src/main.rs</command-args>"),
        Message::new("u2", condense_model::Role::User, vec![Block::text("[Request interrupted by user]")]),
        user("u3", "Use `anyhow` for errors, not Box<dyn Error>."),
        assistant("a1", "Done."),
    ];
    let intent = summarize(&msgs, None, 1_000);
    let intent = section(&intent, "Session intent");
    assert_eq!(
        intent,
        "## Session intent\n- /review src/main.rs\n- Use `anyhow` for errors, not Box<dyn Error>."
    );
}
