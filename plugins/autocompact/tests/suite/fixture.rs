//! A hand-made session covering the output's parts, snapshotted: system messages, files read
//! (one twice, one edited after its read, one written, one through `cat`, one read failing),
//! a todo list and an IMPORTANT line to pin, and a last user message still unanswered.

use crate::support::{run, tokens};
use condense_abi::Signal;
use condense_model::{Conversation, Message, Role};
use condense_testing::{
    assert_no_orphans, assert_unique_ids, call, extractive, ids, report_json, stage, text,
    MemoryHost,
};
use serde_json::json;

/// `n` numbered lines, not newline-terminated (`condense_testing::lines` words its lines
/// otherwise, and this fixture's figures and snapshots are made of these).
pub fn lines(label: &str, n: usize) -> String {
    (1..=n)
        .map(|i| format!("{label} {i:04}: lorem ipsum dolor sit amet, consectetur adipiscing"))
        .collect::<Vec<_>>()
        .join("\n")
}

pub const CONFIG: &str = r#"pin = [{ tool = "TodoWrite" }, { regex = "IMPORTANT:.*" }]"#;

pub fn conversation() -> Conversation {
    let mut m: Vec<Message> = vec![text("s0", Role::System, "You are a careful coding agent.")];
    m.push(text(
        "u1",
        Role::User,
        "Fix the parser. IMPORTANT: never touch src/generated.rs",
    ));
    m.extend(call(
        "1",
        "Read",
        json!({"file_path": "src/parser.rs"}),
        &lines("parser v1", 40),
    ));
    m.extend(call(
        "2",
        "Read",
        json!({"file_path": "src/lexer.rs"}),
        &lines("lexer", 30),
    ));
    m.extend(call(
        "3",
        "TodoWrite",
        json!({"todos": [{"content": "fix parser", "status": "in_progress"}]}),
        "Todos have been modified successfully.",
    ));
    m.push(text(
        "b3",
        Role::Assistant,
        "The lexer is fine; the parser needs work.",
    ));
    m.push(text("u2", Role::User, "Go ahead."));
    m.extend(call(
        "4",
        "Edit",
        json!({"file_path": "src/lexer.rs", "old_string": "a", "new_string": "b"}),
        "The file src/lexer.rs has been updated.",
    ));
    m.extend(call(
        "5",
        "Read",
        json!({"file_path": "src/parser.rs"}),
        &lines("parser v2", 40),
    ));
    m.extend(call(
        "6",
        "Bash",
        json!({"command": "cat Cargo.toml"}),
        "[package]\nname = \"demo\"",
    ));
    m.extend(call(
        "7",
        "Read",
        json!({"file_path": "src/missing.rs"}),
        "File does not exist.",
    ));
    if let condense_model::Block::ToolResult(r) = &mut m.last_mut().unwrap().content.blocks[0] {
        r.is_error = Some(true);
    }
    m.extend(call(
        "8",
        "Write",
        json!({"file_path": "tests/parser.rs", "content": "#[test]\nfn parses() {}\n"}),
        "File created successfully at: tests/parser.rs",
    ));
    m.extend(call(
        "9",
        "Bash",
        json!({"command": "cargo test"}),
        &format!("{}\nIMPORTANT: 2 tests ignored", lines("test", 20)),
    ));
    m.extend(call(
        "10",
        "TodoWrite",
        json!({"todos": [{"content": "fix parser", "status": "completed"}]}),
        "Todos have been modified successfully.",
    ));
    m.push(text("b10", Role::Assistant, "Parser fixed, tests pass."));
    m.push(text("u3", Role::User, "Now write the changelog entry."));
    Conversation {
        messages: m,
        ..Conversation::default()
    }
}

/// A window the fixture (2,461 tokens) reaches with [`config`]: effective 7,000 (a window of
/// 27,000 minus min(20,000 max output, 20,000)), threshold 7,000 - 5,000 buffer = 2,000; the
/// summary may take min(20,000, 7,000 / 4) = 1,750 tokens.
pub fn host() -> MemoryHost {
    MemoryHost::default().with_window(27_000, 20_000)
}

/// The fixture's pins, and a buffer for its small window.
pub fn config() -> String {
    format!("{CONFIG}\nbuffer_tokens = 5000")
}

#[test]
fn fixture_size() {
    let h = host();
    let n = tokens(&h, &conversation());
    assert_eq!(n, 2_461);
}

#[test]
fn fixture_output_and_report() {
    let mut h = host();
    let input = conversation();
    let out = run(&stage(&config()), &input, &mut h);
    insta::assert_snapshot!(
        "fixture_output",
        condense_model::render::render(&out.conversation)
    );
    insta::assert_json_snapshot!("fixture_report", report_json(&out.report));
    insta::assert_json_snapshot!("fixture_state", h.state_json());
    assert_eq!(out.report.signals, vec![Signal::Compacted]);
    assert_no_orphans(&out.conversation);
    assert_unique_ids(&out.conversation);
    assert!(tokens(&h, &out.conversation) < tokens(&h, &input));
    assert_eq!(ids(&out.conversation)[..2], ["s0", "autocompact-1"]);
    // The unanswered last user message comes last, verbatim.
    assert_eq!(out.conversation.messages.last(), input.messages.last());
    let request = &h.summary_requests.borrow()[0];
    assert_eq!(request.purpose, "autocompact");
    assert_eq!(request.previous_summary, None);
    assert_eq!(request.max_tokens, 1_750, "min(20,000, 7,000 / 4)");
    assert!(request
        .messages
        .iter()
        .all(|m| m.role != Role::System && m.id != "u3"));
}

#[test]
fn fixture_with_the_extractive_summarizer() {
    // The host's default summarizer instead of the id-listing fake: what users get offline.
    let mut h = host().with_summarizer(extractive());
    let input = conversation();
    let out = run(&stage(&config()), &input, &mut h);
    assert_no_orphans(&out.conversation);
    assert!(
        out.report.signals.contains(&Signal::Compacted),
        "{:?}",
        out.report.notes
    );
    insta::assert_snapshot!(
        "fixture_extractive_output",
        condense_model::render::render(&out.conversation)
    );
    // The rendering elides long texts; the summary itself is what to review.
    let summary = out
        .conversation
        .messages
        .iter()
        .find(|m| m.id.starts_with("autocompact-"))
        .expect("a summary message");
    insta::assert_snapshot!("fixture_extractive_summary", summary.content.text());
}
