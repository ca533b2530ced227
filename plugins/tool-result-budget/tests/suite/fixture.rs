//! The stage on a hand-made conversation covering each case, snapshotted.

use crate::support::{render, state_summary};
use condense_model::{Block, Content, Conversation, Message, RawJson, Role, TextBlock, ToolResult};
use condense_testing::{image, report_json, run, stage, tool_result, tool_use, MemoryHost};
use serde_json::json;
use tool_result_budget::ToolResultBudget;

/// `n` numbered lines of roughly `width` chars each, exactly `chars` chars in total.
pub fn lines(label: &str, chars: usize) -> String {
    let mut out = String::new();
    let mut i = 0;
    while out.len() < chars {
        i += 1;
        out.push_str(&format!(
            "{label} line {i:05}: lorem ipsum dolor sit amet\n"
        ));
    }
    out.truncate(chars);
    out
}

/// The fixture, with the config it is meant for: default limits, `Read` raised to 150,000.
pub const CONFIG: &str = "per_tool = { Read = 150000 }";

pub fn conversation() -> Conversation {
    // 60,000 chars of 3-byte characters: the 2,000-byte preview boundary falls inside one.
    let japanese = "日本語のテキスト".repeat(7_500);
    // 45,000 chars but 90,000 bytes: under the char limit although over it in bytes.
    let accents = "éèà".repeat(15_000);
    let mut messages = vec![
        Message::new(
            "m0",
            Role::User,
            vec![Block::text("Please look at the repo")],
        ),
        Message::new(
            "m1",
            Role::Assistant,
            vec![
                tool_use("t1", "Bash", json!({"command": "ls"})),
                tool_use("t2", "Bash", json!({"command": "find /"})),
            ],
        ),
        Message::new(
            "m2",
            Role::User,
            vec![
                tool_result("t1", Content::string("Cargo.toml\nsrc\n"), None),
                tool_result("t2", Content::string(lines("find", 60_000)), Some(false)),
            ],
        ),
        Message::new(
            "m3",
            Role::Assistant,
            vec![
                tool_use("t3", "Read", json!({"file_path": "big.rs"})),
                tool_use("t4", "Bash", json!({"command": "cat notes_ja.md"})),
                tool_use("t5", "Grep", json!({"pattern": "é"})),
            ],
        ),
        Message::new(
            "m4",
            Role::User,
            vec![
                tool_result(
                    "t3",
                    Content::blocks(vec![Block::text(lines("big.rs", 120_000))]),
                    None,
                ),
                tool_result("t4", Content::string(japanese), None),
                tool_result("t5", Content::string(accents), None),
            ],
        ),
        Message::new(
            "m5",
            Role::Assistant,
            vec![
                tool_use("t6", "Bash", json!({"command": "cargo test"})),
                tool_use("t7", "Screenshot", json!({})),
            ],
        ),
    ];
    // An error result over the limit, array-shaped in two text blocks, with extra fields on the
    // block and on its last text block.
    let t6 = Block::ToolResult(ToolResult {
        tool_use_id: "t6".into(),
        content: Content::blocks(vec![
            Block::text(lines("stdout", 30_000)),
            Block::Text(TextBlock {
                text: lines("stderr", 30_000),
                extra: RawJson::from_string_unchecked(
                    r#"{"cache_control":{"type":"ephemeral"}}"#.into(),
                ),
            }),
        ]),
        is_error: Some(true),
        extra: RawJson::from_string_unchecked(r#"{"x_exit_code":101}"#.into()),
    });
    // A screenshot with a long log: the image stays, after the reference.
    let t7 = tool_result(
        "t7",
        Content::blocks(vec![Block::text(lines("log", 55_000)), image()]),
        None,
    );
    messages.push(Message::new("m6", Role::User, vec![t6, t7]));
    // An event line holding a big result must be ignored: it never reaches the model.
    messages.push(Message::new(
        "e0",
        Role::Event,
        vec![tool_result(
            "t2",
            Content::string(lines("event", 70_000)),
            None,
        )],
    ));
    messages.push(Message::new(
        "m7",
        Role::Assistant,
        vec![Block::text("Done.")],
    ));
    Conversation {
        messages,
        ..Conversation::default()
    }
}

#[test]
fn fixture_output_and_report() {
    let host = MemoryHost::default();
    let out = run(&stage::<ToolResultBudget>(CONFIG), &conversation(), &host);
    insta::assert_snapshot!("fixture_output", render(&out.conversation));
    insta::assert_json_snapshot!("fixture_report", report_json(&out.report));
    insta::assert_json_snapshot!("fixture_state", state_summary(&host));
}

#[test]
fn fixture_originals_are_in_the_store_and_previews_are_prefixes() {
    let host = MemoryHost::default();
    let input = conversation();
    let out = run(&stage::<ToolResultBudget>(CONFIG), &input, &host);
    assert_eq!(out.report.blocks_changed, 4);
    assert_eq!(host.puts.get(), 4);
    let originals = input.messages.iter().flat_map(|m| m.tool_results());
    let outputs = out
        .conversation
        .messages
        .iter()
        .flat_map(|m| m.tool_results());
    for (before, after) in originals.zip(outputs) {
        assert_eq!(before.tool_use_id, after.tool_use_id);
        assert_eq!(before.is_error, after.is_error);
        assert_eq!(before.extra, after.extra);
        let text = after.content.text();
        if before == after {
            continue;
        }
        let original = before.content.text();
        assert!(text.len() < original.len());
        let key = text
            .split("key ")
            .nth(1)
            .unwrap()
            .split(']')
            .next()
            .unwrap();
        assert_eq!(host.store.borrow()[key], original.as_bytes());
        let preview = text
            .split_once("):\n")
            .unwrap()
            .1
            .rsplit_once("\n[... ")
            .unwrap()
            .0;
        assert!(original.starts_with(preview));
        assert!(preview.len() <= 2_000 && preview.len() > 1_990);
    }
    // The multibyte one is cut at 1,998 bytes.
    let t4 = out.conversation.messages[4]
        .tool_results()
        .nth(1)
        .unwrap()
        .content
        .text();
    assert!(t4.contains("Preview (first 1,998 bytes):"), "{t4}");
    assert_eq!(
        out.conversation.messages[4].content.blocks[1].kind(),
        "tool_result"
    );
    // Event lines are left alone.
    assert_eq!(out.conversation.messages[7], input.messages[7]);
}

#[test]
fn nothing_over_the_limit_says_so() {
    let host = MemoryHost::default();
    let out = run(
        &stage::<ToolResultBudget>("max_result_size_chars = 200000"),
        &conversation(),
        &host,
    );
    assert_eq!(out.conversation, conversation());
    assert!(!out.changed);
    assert_eq!(out.report.blocks_changed, 0);
    assert_eq!(out.report.tokens_freed, None);
    assert!(out.report.events.is_empty());
    assert_eq!(
        out.report.notes,
        vec!["no tool result over its limit (7 checked, max_result_size_chars = 200,000)"]
    );
    assert_eq!(host.puts.get(), 0);
}

#[test]
fn never_makes_a_result_bigger() {
    // 101 chars over a limit of 100 with a 100-byte preview: the reference would be longer.
    let conv = Conversation {
        messages: vec![
            Message::new("a", Role::Assistant, vec![tool_use("x", "Bash", json!({}))]),
            Message::new(
                "u",
                Role::User,
                vec![tool_result("x", Content::string("y".repeat(101)), None)],
            ),
        ],
        ..Conversation::default()
    };
    let host = MemoryHost::default();
    let out = run(
        &stage::<ToolResultBudget>("max_result_size_chars = 100\npreview_bytes = 100"),
        &conv,
        &host,
    );
    assert_eq!(out.conversation, conv);
    assert_eq!(out.report.blocks_changed, 0);
    assert!(
        out.report
            .notes
            .iter()
            .any(|n| n.contains("reference would not be shorter")),
        "{:?}",
        out.report.notes
    );
    assert_eq!(host.puts.get(), 0, "nothing stored for a result left whole");
}

#[test]
fn a_reference_is_never_persisted_again_even_without_state() {
    let host = MemoryHost::default();
    let once = run(&stage::<ToolResultBudget>(CONFIG), &conversation(), &host).conversation;
    // A fresh host: no state, an empty store, and a tiny limit the references exceed.
    let other = MemoryHost::default();
    let out = run(
        &stage::<ToolResultBudget>("max_result_size_chars = 100\npreview_bytes = 10"),
        &once,
        &other,
    );
    let t2 = out.conversation.messages[2].tool_results().nth(1).unwrap();
    assert!(t2
        .content
        .text()
        .starts_with("[condense: tool result persisted — 60,000 chars"));
    assert_eq!(out.conversation.messages[2], once.messages[2]);
    assert!(other
        .store
        .borrow()
        .values()
        .all(|v| !v.starts_with(b"[condense: ")));
    assert!(out
        .report
        .notes
        .iter()
        .any(|n| n == "4 tool results already held a persisted reference"));
}
