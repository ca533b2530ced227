//! The orphan rule, explicitly: the kept tail never starts on a tool result whose call was
//! dropped, in OpenAI shape (one `tool` message per result) and Anthropic shape (results in a
//! user message); and over every budget, calls and results stay together.

use crate::fixture::kept_tokens;
use crate::support::{check_invariants, filler, run_with_budget};
use condense_model::{Block, Content, Conversation, Message, Role};
use condense_testing::{ids, text, tool_result, tool_use};
use serde_json::json;

/// A call `id` of tool `name` (the input does not matter here).
fn tool_call(id: &str, name: &str) -> Block {
    tool_use(id, name, json!({"command": "make test"}))
}

/// OpenAI shape: a system message, the task, an assistant with two calls and their two `tool`
/// messages, then more turns.
fn openai() -> Conversation {
    let a = |id: &str, blocks| Message::new(id, Role::Assistant, blocks);
    let tool = |id: &str, call: &str, n| {
        Message::new(
            id,
            Role::Tool,
            vec![tool_result(call, Content::string(filler(call, n)), None)],
        )
    };
    Conversation {
        messages: vec![
            text("sys", Role::System, "You are a helpful assistant."),
            text("task", Role::User, "Book the cheapest flight to Lisbon."),
            a(
                "a1",
                vec![tool_call("callA", "search"), tool_call("callB", "prices")],
            ),
            tool("tA", "callA", 1_500),
            tool("tB", "callB", 1_500),
            text("a2", Role::Assistant, "Found two options."),
            text("u3", Role::User, "Take the morning one."),
            a("a4", vec![tool_call("callC", "book")]),
            tool("tC", "callC", 300),
            text("a5", Role::Assistant, "Booked."),
        ],
        ..Conversation::default()
    }
}

#[test]
fn a_tool_message_whose_call_is_dropped_is_dropped_too() {
    let conv = openai();
    // The budget is met exactly by cutting at tB, which would keep callB's result alone.
    let out = run_with_budget(kept_tokens(&conv, 4), &conv);
    assert_eq!(
        ids(&out.conversation),
        vec!["sys", "task", "a2", "u3", "a4", "tC", "a5"]
    );
    assert_eq!(out.conversation.messages[2].role, Role::Assistant);
    assert!(
        out.report
            .notes
            .contains(&"dropped 1 message more than the budget needed, to keep tool calls and results together".to_string()),
        "{:?}",
        out.report.notes
    );
    let dropped: Vec<&str> = out
        .report
        .events
        .iter()
        .map(|e| e.message_id.as_str())
        .collect();
    assert_eq!(dropped, vec!["a1", "tA", "tB"]);
    check_invariants(&conv, &out.conversation, true);
}

#[test]
fn a_user_message_of_results_whose_calls_are_dropped_is_dropped_too() {
    let conv = Conversation {
        messages: vec![
            text("task", Role::User, "Refactor the parser."),
            Message::new(
                "a1",
                Role::Assistant,
                vec![tool_call("t1", "Read"), tool_call("t2", "Read")],
            ),
            Message::new(
                "u2",
                Role::User,
                vec![
                    tool_result("t1", Content::string(filler("parser.py", 4_000)), None),
                    tool_result("t2", Content::string(filler("lexer.py", 100)), None),
                    Block::text("(the user interrupted)"),
                ],
            ),
            text("a3", Role::Assistant, "Both files read; starting."),
            text("u4", Role::User, "Go on."),
        ],
        ..Conversation::default()
    };
    // Cutting at u2 fits (dropping a1 alone) but would orphan t1 and t2: u2 goes as well.
    let out = run_with_budget(kept_tokens(&conv, 2), &conv);
    assert_eq!(ids(&out.conversation), vec!["task", "a3", "u4"]);
    check_invariants(&conv, &out.conversation, true);
}

#[test]
fn calls_and_results_stay_together_at_every_budget() {
    for conv in [openai(), crate::fixture::conversation()] {
        let total = kept_tokens(&conv, 0);
        for budget in 0..=total + 1 {
            let out = run_with_budget(budget, &conv);
            check_invariants(&conv, &out.conversation, true);
            let first_kept_tail =
                out.conversation.messages.iter().find(|m| {
                    m.is_chat() && m.role != Role::System && m.id != "task" && m.id != "m0"
                });
            if let Some(m) = first_kept_tail {
                // The tail never starts on a result whose call is gone.
                for r in m.tool_results() {
                    assert!(
                        out.conversation
                            .messages
                            .iter()
                            .flat_map(|m| m.tool_uses())
                            .any(|u| u.id == r.tool_use_id),
                        "budget {budget}: tail starts on orphan {}",
                        r.tool_use_id
                    );
                }
            }
        }
    }
}
