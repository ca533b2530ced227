//! The cache-edit path on the hand-made fixture: the cache is hot, messages stay untouched.

use crate::support::{fixture, host_after, lines, result_of};
use condense_model::render::render;
use condense_model::{Block, Content, Conversation, Format, Message, Role};
use condense_testing::{report_json, run, stage, tool_result, tool_use, MemoryHost};
use microcompact::{Microcompact, CLEARED_MARKER};
use serde_json::{json, Value};

/// Low thresholds: the fixture's old results hold about 1,500 tokens (bytes / 4).
const HOT: &str = "trigger_tokens = 1000\nclear_at_least = 500";
const HOT_EMIT: &str =
    "trigger_tokens = 1000\nclear_at_least = 500\nemit_context_management = true";

fn cache_edit_ids(report: &condense_abi::StageReport) -> Vec<(String, bool)> {
    report
        .events
        .iter()
        .filter(|e| e.kind == "cache-edit")
        .map(|e| {
            let id = e
                .detail
                .split(" result ")
                .nth(1)
                .unwrap()
                .split(':')
                .next()
                .unwrap();
            (id.to_string(), e.detail.contains("re-sent"))
        })
        .collect()
}

fn pinned_ids(host: &MemoryHost) -> Vec<String> {
    host.state_json()["pinned"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["tool_use_id"].as_str().unwrap().to_string())
        .collect()
}

/// The fixture with three more tool calls after it, the last assistant message 4 minutes later.
fn extended() -> Conversation {
    let mut conv = fixture();
    let turn = |id: &str, role, minute: u32, blocks| {
        let mut m = Message::new(id, role, blocks);
        m.timestamp = Some(format!("2025-06-15T10:{minute:02}:00Z"));
        m
    };
    conv.messages.extend([
        turn(
            "m20",
            Role::User,
            31,
            vec![Block::text("Now the lexer test.")],
        ),
        turn(
            "m21",
            Role::Assistant,
            31,
            vec![tool_use(
                "t9",
                "Read",
                json!({"file_path": "tests/lexer.rs"}),
            )],
        ),
        turn(
            "m22",
            Role::User,
            31,
            vec![tool_result(
                "t9",
                Content::string(lines("tests/lexer.rs", 40)),
                None,
            )],
        ),
        turn(
            "m23",
            Role::Assistant,
            32,
            vec![tool_use(
                "t10",
                "Bash",
                json!({"command": "cargo test lexer"}),
            )],
        ),
        turn(
            "m24",
            Role::User,
            33,
            vec![tool_result(
                "t10",
                Content::string(lines("cargo test lexer", 30)),
                None,
            )],
        ),
        turn(
            "m25",
            Role::Assistant,
            33,
            vec![tool_use("t11", "Grep", json!({"pattern": "todo!"}))],
        ),
        turn(
            "m26",
            Role::User,
            34,
            vec![tool_result("t11", Content::string("none"), None)],
        ),
        turn(
            "m27",
            Role::Assistant,
            34,
            vec![Block::text("Both tests pass.")],
        ),
    ]);
    conv
}

#[test]
fn cache_hot_records_edits_and_leaves_messages_byte_identical() {
    let input = fixture();
    let host = host_after(2);
    let out = run(&stage::<Microcompact>(HOT), &input, &host);
    assert_eq!(out.conversation, input, "the cached prefix must not change");
    assert_eq!(out.report.blocks_changed, 0);
    assert_eq!(out.report.tokens_freed, Some(0));
    insta::assert_json_snapshot!("cache_edit_report", report_json(&out.report));
    insta::assert_json_snapshot!("cache_edit_state", host.state_json());
    let new: Vec<_> = ["t1", "t2", "t4", "t5"]
        .map(|id| (id.to_string(), false))
        .into();
    assert_eq!(cache_edit_ids(&out.report), new);
    assert_eq!(pinned_ids(&host), ["t1", "t2", "t4", "t5"]);
}

#[test]
fn emit_context_management_writes_the_request_field_for_anthropic() {
    let input = fixture();
    let host = host_after(2).with_format(Some(Format::Anthropic));
    let out = run(&stage::<Microcompact>(HOT_EMIT), &input, &host);
    assert_eq!(out.conversation.messages, input.messages);
    assert_eq!(out.conversation.system, input.system);
    let fields: Value = out.conversation.extra.to_value().unwrap();
    insta::assert_json_snapshot!("cache_edit_request_fields", fields);
    assert_eq!(
        fields["model"], "claude-sonnet-4-5",
        "other request fields are kept"
    );
    assert!(render(&out.conversation).contains("[request fields] {\"model\""));
    assert!(out.report.notes.contains(
        &"wrote context_management clear_tool_uses_20250919 edit into the request fields \
          (trigger 1,000, keep 3, clear_at_least 500)"
            .to_string()
    ));
    // The same request again: the edit is replaced in place, not appended.
    let again = run(&stage::<Microcompact>(HOT_EMIT), &out.conversation, &host);
    assert_eq!(again.conversation, out.conversation);
}

#[test]
fn emit_context_management_is_not_written_for_other_formats() {
    let input = fixture();
    let host = host_after(2).with_format(Some(Format::ClaudeCode));
    let out = run(&stage::<Microcompact>(HOT_EMIT), &input, &host);
    assert_eq!(out.conversation, input);
    assert!(!out.changed, "nothing written, nothing handed back");
    assert!(out.report.notes.contains(
        &"context_management not written: the claude-code format does not support it \
          (Anthropic requests only)"
            .to_string()
    ));
    assert_eq!(
        cache_edit_ids(&out.report).len(),
        4,
        "cache edits are still recorded"
    );
}

#[test]
fn pinned_edits_are_sent_again_on_later_runs() {
    let stage = stage::<Microcompact>(HOT);
    let host = host_after(2);
    run(&stage, &fixture(), &host);

    // Three more calls: t6 and t7 leave the keep window and free enough for new edits.
    let later = host_after(6);
    later.state.replace(host.state.borrow().clone());
    let input = extended();
    let second = run(&stage, &input, &later);
    assert_eq!(second.conversation, input);
    insta::assert_json_snapshot!("cache_edit_second_run_report", report_json(&second.report));
    let expected: Vec<(String, bool)> = [
        ("t1", true),
        ("t2", true),
        ("t4", true),
        ("t5", true),
        ("t6", false),
        ("t7", false),
    ]
    .iter()
    .map(|(id, resent)| (id.to_string(), *resent))
    .collect();
    assert_eq!(cache_edit_ids(&second.report), expected);
    assert_eq!(pinned_ids(&later), ["t1", "t2", "t4", "t5", "t6", "t7"]);

    // Once more on the same request: nothing new, every edit re-sent.
    let third = run(&stage, &input, &later);
    assert_eq!(third.conversation, input);
    assert_eq!(
        cache_edit_ids(&third.report)
            .iter()
            .filter(|(_, r)| *r)
            .count(),
        6
    );
    assert!(
        third.report.notes[0].ends_with(
            "but every old result already has a cache edit: no new cache edits; \
             re-sent 6 cache edits of earlier runs"
        ),
        "{}",
        third.report.notes[0]
    );
}

#[test]
fn both_conditions_true_the_time_path_wins() {
    let input = fixture();
    let host = host_after(2);
    let stage = stage::<Microcompact>(HOT);
    run(&stage, &input, &host);
    assert_eq!(pinned_ids(&host).len(), 4);

    let cold = host_after(95);
    cold.state.replace(host.state.borrow().clone());
    let out = run(&stage, &input, &cold);
    assert!(out.report.events.iter().all(|e| e.kind == "cleared"));
    assert_eq!(out.report.blocks_changed, 4);
    assert_eq!(
        result_of(&out.conversation, "t1").content.text(),
        CLEARED_MARKER
    );
    assert!(out.report.notes[0].starts_with("gap 1 h 35 min > 60 min: cleared 4 old results"));
    assert_eq!(
        out.report.notes[1],
        "dropped 4 pinned cache edits: the cache is cold and the results are cleared in the messages"
    );
    assert!(pinned_ids(&cold).is_empty());
}

#[test]
fn nothing_fires_when_the_cache_is_hot_and_results_are_small() {
    let input = fixture();
    let host = host_after(5);
    let out = run(&stage::<Microcompact>(""), &input, &host);
    assert_eq!(out.conversation, input);
    assert!(!out.changed);
    insta::assert_json_snapshot!("nothing_fires_report", report_json(&out.report));
    assert!(pinned_ids(&host).is_empty());
    assert_eq!(host.state_puts.get(), 1, "the time of the run is recorded");
}

#[test]
fn clear_at_least_holds_back_small_edits() {
    let input = fixture();
    let out = run(
        &stage::<Microcompact>("trigger_tokens = 1000\nclear_at_least = 5000"),
        &input,
        &host_after(2),
    );
    assert_eq!(out.conversation, input);
    assert!(out.report.events.is_empty());
    assert!(
        out.report.notes[0].contains("but new edits would free only"),
        "{}",
        out.report.notes[0]
    );
}
