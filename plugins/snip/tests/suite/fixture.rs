//! The stage on a hand-made conversation exercising each rule, snapshotted.

use crate::support::{png, summary};
use condense_model::render::render;
use condense_model::{Block, Content, Conversation, Message, RawJson, Role, ToolResult};
use condense_testing::{run, stage, tool_result, tool_use, MemoryHost};
use condense_text::thousands;
use serde_json::json;
use snip::Snip;

/// A source file of `n` functions, tagged with `version`.
pub fn source(version: &str, n: usize) -> String {
    (0..n)
        .map(|i| format!("pub fn f{i}() -> u32 {{ {i} }} // {version}\n"))
        .collect()
}

/// A build log of about `bytes` bytes whose last line is the error.
pub fn log(label: &str, bytes: usize) -> String {
    let mut out = String::new();
    let mut i = 0;
    while out.len() < bytes {
        i += 1;
        out.push_str(&format!(
            "   Compiling {label}-dep-{i:04} v0.1.{i} (registry)\n"
        ));
    }
    out.push_str(&format!("error[E0308]: mismatched types in {label}\n"));
    out
}

/// 34 bytes a line (11 three-byte chars + newline): byte 4,096 falls inside a character.
pub fn japanese(lines: usize) -> String {
    "日本語のテキストです。\n".repeat(lines)
}

pub const GIT_STATUS: &str = "On branch main\nnothing to commit, working tree clean";

pub fn conversation() -> Conversation {
    let read = |id: &str, path: &str| tool_use(id, "Read", json!({ "file_path": path }));
    let bash = |id: &str, cmd: &str| tool_use(id, "Bash", json!({ "command": cmd }));
    let text = |t: &str| Content::string(t);
    let t8 = Block::ToolResult(ToolResult {
        tool_use_id: "t8".into(),
        content: Content::blocks(vec![Block::text(log("build", 10_000))]),
        is_error: Some(true),
        extra: RawJson::from_string_unchecked(r#"{"x_exit_code":101}"#.into()),
    });
    let messages = vec![
        Message::new(
            "m0",
            Role::User,
            vec![
                Block::text("The build fails, see the screenshot"),
                png(800, 600, 3_000),
            ],
        ),
        Message::new(
            "m1",
            Role::Assistant,
            vec![
                Block::text("Let me look."),
                read("t1", "src/lib.rs"),
                read("t2", "src/main.rs"),
            ],
        ),
        Message::new(
            "m2",
            Role::User,
            vec![
                tool_result("t1", text(&source("v1", 20)), None),
                tool_result(
                    "t2",
                    Content::blocks(vec![Block::text(source("main", 12))]),
                    None,
                ),
            ],
        ),
        Message::new(
            "m3",
            Role::Assistant,
            vec![read("t3", "src/lib.rs"), bash("t4", "git status")],
        ),
        // t3: the same file read again, unchanged: a duplicate of t1. t4: short.
        Message::new(
            "m4",
            Role::User,
            vec![
                tool_result("t3", text(&source("v1", 20)), None),
                tool_result("t4", text(GIT_STATUS), None),
            ],
        ),
        Message::new(
            "m5",
            Role::Assistant,
            vec![
                tool_use("t5", "Edit", json!({ "file_path": "src/lib.rs" })),
                bash("t6", "git status"),
            ],
        ),
        // t6 repeats t4, but under 200 chars: kept.
        Message::new(
            "m6",
            Role::User,
            vec![
                tool_result("t5", text("The file src/lib.rs has been updated."), None),
                tool_result("t6", text(GIT_STATUS), None),
            ],
        ),
        Message::new("m7", Role::Assistant, vec![read("t7", "src/lib.rs")]),
        // Read again after the edit: different text, not a duplicate.
        Message::new(
            "m8",
            Role::User,
            vec![tool_result("t7", text(&source("v2", 20)), None)],
        ),
        Message::new(
            "m9",
            Role::Assistant,
            vec![
                bash("t8", "cargo build"),
                read("t9", "docs/notes_ja.md"),
                read("t10", "src/main.rs"),
            ],
        ),
        // t8: oversized error log (truncated); t9: oversized multibyte text; t10: string-shaped
        // duplicate of the array-shaped t2.
        Message::new(
            "m10",
            Role::User,
            vec![
                t8,
                tool_result("t9", text(&japanese(180)), None),
                tool_result("t10", text(&source("main", 12)), None),
            ],
        ),
        Message::new(
            "m11",
            Role::Assistant,
            vec![tool_use("t11", "Screenshot", json!({}))],
        ),
        Message::new(
            "m12",
            Role::User,
            vec![tool_result(
                "t11",
                Content::blocks(vec![
                    Block::text("Screenshot of the failing page"),
                    png(1024, 768, 4_000),
                ]),
                None,
            )],
        ),
        // The last tool-calling turn: its results are protected from truncation.
        Message::new(
            "m13",
            Role::Assistant,
            vec![
                bash("t12", "cargo test"),
                read("t13", "src/lib.rs"),
                bash("t14", "cat target/build.log"),
            ],
        ),
        // t12: oversized but protected. t13: duplicate of t7 (whole): replaced. t14: duplicate
        // of t8, which is truncated: kept whole, the agent is acting on it.
        Message::new(
            "m14",
            Role::User,
            vec![
                tool_result("t12", text(&log("test", 8_000)), None),
                tool_result("t13", text(&source("v2", 20)), None),
                tool_result(
                    "t14",
                    Content::blocks(vec![Block::text(log("build", 10_000))]),
                    None,
                ),
            ],
        ),
        // Event lines never reach the model: left alone, and not counted as earlier copies.
        Message::new(
            "e0",
            Role::Event,
            vec![tool_result("t3", text(&source("v1", 20)), None)],
        ),
        Message::new(
            "m15",
            Role::Assistant,
            vec![Block::text("The failure is a type mismatch.")],
        ),
    ];
    Conversation {
        messages,
        ..Conversation::default()
    }
}

fn snapshot(name: &str, config: &str) -> snip::Snip {
    let host = MemoryHost::default();
    let s = stage::<Snip>(config);
    let input = conversation();
    let out = run(&s, &input, &host);
    insta::assert_snapshot!(format!("{name}_output"), render(&out.conversation));
    insta::assert_yaml_snapshot!(format!("{name}_report"), out.report);
    insta::assert_json_snapshot!(
        format!("{name}_summary"),
        summary(&input, &out.conversation, &host)
    );
    s
}

#[test]
fn keep_first() {
    snapshot("keep_first", "");
}

#[test]
fn keep_last() {
    snapshot("keep_last", "keep = \"last\"");
}

#[test]
fn keep_tail() {
    snapshot("keep_tail", "keep_tail_bytes = 1000");
}

#[test]
fn nothing_protected() {
    snapshot("unprotected", "protect_recent_turns = 0");
}

fn result_text(conv: &Conversation, id: &str) -> String {
    crate::support::results(conv)
        .into_iter()
        .find(|(_, r)| r.tool_use_id == id)
        .map(|(_, r)| r.content.text())
        .unwrap()
}

#[test]
fn each_rule_in_detail() {
    let host = MemoryHost::default();
    let input = conversation();
    let out = run(&stage::<Snip>(""), &input, &host);
    let conv = &out.conversation;
    let marker = |id: &str| {
        format!("[Duplicate file content, see earlier in conversation: tool_use_id {id}]")
    };
    assert_eq!(result_text(conv, "t3"), marker("t1"));
    assert_eq!(result_text(conv, "t10"), marker("t2"));
    assert_eq!(result_text(conv, "t13"), marker("t7"));
    // Shapes stay: t3 was a string, t10 too, t2 an array.
    assert_eq!(
        conv.messages[4].content.blocks[0],
        tool_result("t3", Content::string(marker("t1")), None)
    );
    // Kept whole: the first reads, the changed re-read, the short duplicate, the protected ones.
    for id in ["t1", "t2", "t4", "t6", "t7", "t12", "t14"] {
        assert_eq!(result_text(conv, id), result_text(&input, id), "{id}");
    }
    // The error log keeps its first 4,096 bytes, its error flag and extra fields.
    let t8 = result_text(conv, "t8");
    let original = result_text(&input, "t8");
    let (head, notice) = t8.split_once("\n... [truncated, ").unwrap();
    assert_eq!(head, &original[..4_096]);
    let key = notice
        .strip_prefix(&format!(
            "{} total chars, store key ",
            thousands(original.len())
        ))
        .unwrap();
    // The log's error line was in the part cut out: it follows the notice.
    let (key, error) = key.split_once("]\n").unwrap();
    assert_eq!(
        error,
        "[the error was: error[E0308]: mismatched types in build]"
    );
    assert!(!head.contains("error[E0308]"));
    assert_eq!(host.store.borrow()[key], original.as_bytes());
    let Block::ToolResult(r) = &conv.messages[10].content.blocks[0] else {
        panic!()
    };
    assert_eq!(r.is_error, Some(true));
    assert_eq!(r.extra.as_str(), r#"{"x_exit_code":101}"#);
    // The multibyte text is cut at 4,095 bytes, before the character straddling 4,096.
    let t9 = result_text(conv, "t9");
    let head = t9.split("\n... [truncated").next().unwrap();
    assert_eq!(head.len(), 4_095);
    assert!(japanese(180).starts_with(head));
    assert!(t9.ends_with(&format!(
        "[truncated, {} total chars, store key {}]",
        thousands(japanese(180).chars().count()),
        host.store
            .borrow()
            .iter()
            .find(|(_, v)| **v == japanese(180).into_bytes())
            .unwrap()
            .0
    )));
    // Images: the user's screenshot and the one inside t11.
    let Block::Text(m0) = &conv.messages[0].content.blocks[1] else {
        panic!()
    };
    assert!(
        m0.text
            .starts_with("[image removed: image/png, 3,033 bytes decoded, 800x600, store key "),
        "{}",
        m0.text
    );
    assert_eq!(result_text(conv, "t11").lines().count(), 2);
    assert!(result_text(conv, "t11").contains("4,033 bytes decoded, 1024x768"));
    // The event line is untouched.
    assert_eq!(conv.messages[15], input.messages[15]);
    // One event per change, in conversation order; tokens add up.
    let kinds: Vec<&str> = out.report.events.iter().map(|e| e.kind.as_str()).collect();
    assert_eq!(
        kinds,
        [
            "image-stripped",
            "deduplicated",
            "truncated",
            "truncated",
            "deduplicated",
            "image-stripped",
            "deduplicated"
        ]
    );
    let sum: usize = out.report.events.iter().map(|e| e.tokens).sum();
    assert_eq!(out.report.tokens_freed, Some(sum));
    assert_eq!(out.report.blocks_changed, 7);
    assert_eq!(
        out.report.notes[0],
        format!(
            "3 duplicate tool results, 2 truncated, 2 images; {} tokens freed",
            thousands(sum)
        )
    );
}

#[test]
fn keep_last_points_forward() {
    let host = MemoryHost::default();
    let out = run(&stage::<Snip>("keep = \"last\""), &conversation(), &host);
    let conv = &out.conversation;
    let marker =
        |id: &str| format!("[Duplicate file content, see later in conversation: tool_use_id {id}]");
    assert_eq!(result_text(conv, "t1"), marker("t3"));
    assert_eq!(result_text(conv, "t2"), marker("t10"));
    assert_eq!(result_text(conv, "t7"), marker("t13"));
    // The latest copy of the log is protected and whole, so the earlier one points to it.
    assert_eq!(result_text(conv, "t8"), marker("t14"));
    assert_eq!(result_text(conv, "t14"), log("build", 10_000));
    // t2 was array-shaped: it stays an array.
    let Block::ToolResult(t2) = &conv.messages[2].content.blocks[1] else {
        panic!()
    };
    assert_eq!(
        t2.content,
        Content::blocks(vec![Block::text(marker("t10"))])
    );
}

#[test]
fn keep_tail_keeps_the_error_at_the_end() {
    let host = MemoryHost::default();
    let out = run(
        &stage::<Snip>("keep_tail_bytes = 1000"),
        &conversation(),
        &host,
    );
    let t8 = result_text(&out.conversation, "t8");
    assert!(t8.ends_with("error[E0308]: mismatched types in build\n"));
    let (head, rest) = t8.split_once("\n... [truncated ").unwrap();
    assert_eq!(head.len(), 4_096);
    let (_, tail) = rest.split_once("] ...\n").unwrap();
    assert_eq!(tail.len(), 1_000);
    // Multibyte tail: starts on a character boundary, at most 1,000 bytes.
    let t9 = result_text(&out.conversation, "t9");
    let tail = t9.split_once("] ...\n").unwrap().1;
    assert!(tail.len() <= 1_000 && tail.len() > 996);
    assert!(japanese(180).ends_with(tail));
}

#[test]
fn images_are_kept_when_disabled_or_not_answered_yet() {
    let host = MemoryHost::default();
    let out = run(
        &stage::<Snip>("strip_images = false"),
        &conversation(),
        &host,
    );
    assert_eq!(out.conversation.messages[0], conversation().messages[0]);
    assert!(out.report.events.iter().all(|e| e.kind != "image-stripped"));

    // A screenshot the user just pasted has not been seen by the model yet.
    let mut conv = conversation();
    conv.messages.push(Message::new(
        "m16",
        Role::User,
        vec![Block::text("and this one?"), png(640, 480, 2_000)],
    ));
    let out = run(&stage::<Snip>(""), &conv, &host);
    assert_eq!(out.conversation.messages[17], conv.messages[17]);
    assert!(
        out.report
            .notes
            .iter()
            .any(|n| n.starts_with("kept 1 image: protected")),
        "{:?}",
        out.report.notes
    );
    // Unless nothing is protected.
    let out = run(&stage::<Snip>("protect_recent_turns = 0"), &conv, &host);
    assert!(matches!(
        out.conversation.messages[17].content.blocks[1],
        Block::Text(_)
    ));
}
