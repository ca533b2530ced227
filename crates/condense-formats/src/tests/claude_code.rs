//! Claude Code sessions: the context is the main thread (sidechains, abandoned branches and what
//! a compaction replaced are events that keep their content), and the session's own usage.

use super::support::{fixture, round_trip};
use crate::{read, ReadOptions, ReportedUsage};
use condense_model::{Block, Role};
use serde_json::{json, Value};

fn auto() -> ReadOptions {
    ReadOptions::default()
}

fn jsonl(lines: &[Value]) -> Vec<u8> {
    let mut out = String::new();
    for line in lines {
        out.push_str(&line.to_string());
        out.push('\n');
    }
    out.into_bytes()
}

#[test]
fn the_shipped_session_is_its_main_thread_and_reports_its_usage() {
    let bytes = fixture!(
        "transcripts/d-kimuson__claude-code-viewer/fe5e1c67-53e7-4862-81ae-d0e013e3270b.jsonl"
    );
    // Written back byte for byte: the sub-agent lines come back from their envelopes.
    let doc = read(&bytes, "s.jsonl", &auto()).unwrap();
    assert_eq!(doc.write().unwrap(), bytes);

    let conv = &doc.conversations()[0];
    let chat: Vec<_> = conv.chat_messages().collect();
    assert_eq!(chat.len(), 32, "the main thread");
    assert!(chat
        .iter()
        .all(|m| !m.envelope.as_str().contains("\"isSidechain\":true")));
    let sidechain: Vec<_> = conv
        .messages
        .iter()
        .filter(|m| m.role == Role::Event && !m.content.blocks.is_empty())
        .collect();
    assert_eq!(sidechain.len(), 405);
    assert!(sidechain
        .iter()
        .all(|m| m.envelope.as_str().contains("\"isSidechain\":true")));
    // Their content is kept for retention: the sub-agents made most of the calls.
    let calls = |ms: &[&condense_model::Message]| ms.iter().flat_map(|m| m.tool_uses()).count();
    assert_eq!((calls(&chat), calls(&sidechain)), (11, 156));
    let writes = sidechain
        .iter()
        .flat_map(|m| m.tool_uses())
        .filter(|tu| tu.name == "Write")
        .count();
    assert!(writes > 0);

    assert_eq!(
        doc.reported_usage(0),
        Some(&ReportedUsage {
            input_tokens: 6,
            cache_read_tokens: 20_542,
            cache_write_tokens: 1_004,
            output_tokens: 10,
            source: "line 438: the last main-thread assistant message's usage".into(),
        })
    );
    assert_eq!(doc.reported_usage(0).unwrap().prompt_tokens(), 21_552);
}

#[test]
fn parallel_tool_results_stay_in_the_context() {
    // Claude Code 2.1 hangs each parallel result under its own call's line: only one of them is
    // an ancestor of the last message, yet every one was sent.
    let bytes = fixture!("transcripts/DRMacIver__claude-reliability/transcript.jsonl");
    let doc = round_trip(&bytes, "t.jsonl", &auto());
    let conv = &doc.conversations()[0];
    assert_eq!(conv.chat_messages().count(), 117);
    assert!(condense_model::orphaned_tool_results(&conv.messages).is_empty());
    let usage = doc.reported_usage(0).unwrap();
    assert_eq!(usage.prompt_tokens(), 97 + 40_773);
}

#[test]
fn what_a_compaction_replaced_is_events_with_their_content() {
    let doc = round_trip(
        &fixture!("edge/claude_code_session.jsonl"),
        "s.jsonl",
        &auto(),
    );
    let roles: Vec<Role> = doc.conversations()[0]
        .messages
        .iter()
        .map(|m| m.role)
        .collect();
    use Role::{Assistant as A, Event as E, User as U};
    // summary, u-1..u-4 (before the compact_boundary), the boundary, a snapshot, a user line
    // without a message, then the messages after the compaction.
    assert_eq!(roles, [E, E, E, E, E, E, E, E, U, A, E, A]);
    let before = &doc.conversations()[0].messages[3];
    assert!(matches!(&before.content.blocks[..], [Block::ToolUse(tu)] if tu.id == "toolu_a"));
    // The usage is the main thread's: the lines before the compaction are not.
    assert_eq!(doc.reported_usage(0), None);
}

#[test]
fn an_abandoned_branch_is_carried_but_not_counted() {
    let line = |uuid: &str, parent: Option<&str>, kind: &str, text: &str, input: u64| {
        let mut message = json!({"role": kind, "content": [{"type": "text", "text": text}]});
        if kind == "assistant" {
            message["usage"] = json!({"input_tokens": input, "cache_read_input_tokens": 100,
                "cache_creation_input_tokens": 10, "output_tokens": 5});
        }
        json!({"parentUuid": parent, "isSidechain": false, "type": kind, "uuid": uuid,
            "sessionId": "s", "message": message})
    };
    let mut synthetic = line("a4", Some("a3"), "assistant", "API Error", 0);
    synthetic["message"]["model"] = json!("<synthetic>");
    synthetic["message"]["usage"] = json!({"input_tokens": 0, "output_tokens": 0});
    let bytes = jsonl(&[
        line("u1", None, "user", "write the parser", 0),
        line("a1", Some("u1"), "assistant", "done", 1),
        line("u2", Some("a1"), "user", "now the writer", 0),
        line("a2", Some("u2"), "assistant", "the old answer", 2),
        line("u3", Some("a1"), "user", "now the writer, in Rust", 0),
        line("a3", Some("u3"), "assistant", "the new answer", 3),
        synthetic,
    ]);
    let doc = round_trip(&bytes, "rewind.jsonl", &auto());
    assert_eq!(doc.write().unwrap(), bytes);
    let conv = &doc.conversations()[0];
    let chat: Vec<&str> = conv.chat_messages().map(|m| m.id.as_str()).collect();
    assert_eq!(chat, ["u1", "a1", "u3", "a3", "a4"]);
    assert_eq!(conv.messages[3].content.text(), "the old answer");
    // The synthetic line's zeros are not a model call: the usage is a3's.
    let usage = doc.reported_usage(0).unwrap();
    assert_eq!((usage.input_tokens, usage.prompt_tokens()), (3, 113));
    assert_eq!(
        usage.source,
        "line 6: the last main-thread assistant message's usage"
    );
}

/// A long session (read on several threads): the messages in file order, and a bad line
/// reported by its own line number even when a later one is bad too.
#[test]
fn a_long_session_reads_in_order_and_reports_its_first_bad_line() {
    let line = |i: usize| {
        let role = if i % 2 == 0 { "user" } else { "assistant" };
        json!({
            "type": role,
            "uuid": format!("u{i}"),
            "parentUuid": if i == 0 { Value::Null } else { json!(format!("u{}", i - 1)) },
            "message": {"role": role, "content": [{"type": "text", "text": format!("line {i}")}]},
        })
    };
    let lines: Vec<Value> = (0..600).map(line).collect();
    let doc = read(&jsonl(&lines), "long.jsonl", &auto()).unwrap();
    let conv = &doc.conversations()[0];
    assert_eq!(conv.messages.len(), 600);
    for (i, m) in conv.messages.iter().enumerate() {
        assert_eq!(m.content.text(), format!("line {i}"));
        assert_eq!(
            m.role,
            if i % 2 == 0 {
                Role::User
            } else {
                Role::Assistant
            }
        );
    }
    let mut bad = lines;
    bad[550]["type"] = json!(7);
    bad[420]["type"] = json!(5);
    let e = read(&jsonl(&bad), "long.jsonl", &auto()).err().unwrap();
    assert!(e.to_string().starts_with("long.jsonl:421:"), "{e}");
}
