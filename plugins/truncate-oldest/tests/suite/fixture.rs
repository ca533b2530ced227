//! A coding session over its budget, snapshotted: the cut that would fit lands on a tool result
//! whose call it drops, so that result goes too.

use crate::support::{check_invariants, filler, run_with_budget};
use condense_model::{render, Block, Content, Conversation, Message, RawJson, Role, ToolDef};
use condense_testing::{ids, run, stage, text, tool_result, tool_use, MemoryHost};
use condense_turns::measure::message_tokens;
use serde_json::json;
use truncate_oldest::plan::fixed_tokens;
use truncate_oldest::TruncateOldest;

pub fn conversation() -> Conversation {
    let a = |id: &str, blocks| Message::new(id, Role::Assistant, blocks);
    let u = |id: &str, blocks| Message::new(id, Role::User, blocks);
    let event = |id: &str| {
        let mut m = Message::new(id, Role::Event, vec![]);
        m.envelope = RawJson::from_string_unchecked(r#"{"type":"summary"}"#.into());
        m
    };
    // Every call runs the same command; only the size of its output matters here.
    let bash = |id: &str| tool_use(id, "bash", json!({"command": "make test"}));
    let output =
        |id: &str, label: &str, n| tool_result(id, Content::string(filler(label, n)), None);
    Conversation {
        system: Some(Content::string("You are a coding agent.")),
        tools: vec![ToolDef {
            name: "bash".into(),
            raw: RawJson::from_string_unchecked(r#"{"name":"bash","input_schema":{}}"#.into()),
        }],
        messages: vec![
            text("m0", Role::User, "Fix the flaky test in tests/test_io.py"),
            event("e0"),
            a("m1", vec![Block::text("Looking around."), bash("t1")]),
            u("m2", vec![output("t1", "ls", 2_000)]),
            event("e1"),
            a("m3", vec![bash("t2"), bash("t3")]),
            u(
                "m4",
                vec![output("t2", "cat", 3_000), output("t3", "grep", 400)],
            ),
            a("m5", vec![Block::text("Running the tests."), bash("t4")]),
            u("m6", vec![output("t4", "pytest", 1_200)]),
            text("m7", Role::User, "Also check the docs build."),
            a("m8", vec![bash("t5")]),
            u("m9", vec![output("t5", "sphinx", 600)]),
            text("m10", Role::Assistant, "Both fixed."),
        ],
        ..Conversation::default()
    }
}

/// The tokens of the conversation kept when cut at message `cut` (the first user message and
/// everything from `cut` on, plus the system prompt and tools).
pub fn kept_tokens(conv: &Conversation, cut: usize) -> usize {
    let host = MemoryHost::default();
    let first_user = conv
        .messages
        .iter()
        .position(|m| m.role == Role::User)
        .unwrap();
    fixed_tokens(&host, conv)
        + conv
            .messages
            .iter()
            .enumerate()
            .filter(|(i, m)| *i >= cut || *i == first_user || m.role == Role::System)
            .map(|(_, m)| message_tokens(&host, m))
            .sum::<usize>()
}

#[test]
fn fixture_output_and_report() {
    let conv = conversation();
    // Exactly what cutting at m4 keeps: but m4 holds the results of m3's calls.
    let budget = kept_tokens(&conv, 6);
    let out = run_with_budget(budget, &conv);
    insta::assert_snapshot!("fixture_output", render::render(&out.conversation));
    insta::assert_json_snapshot!("fixture_report", out.report);
    assert_eq!(
        ids(&out.conversation),
        vec!["m0", "e0", "m5", "m6", "m7", "m8", "m9", "m10"]
    );
    check_invariants(&conv, &out.conversation, true);
}

#[test]
fn a_conversation_under_budget_is_untouched() {
    let conv = conversation();
    let out = run_with_budget(kept_tokens(&conv, 0), &conv);
    assert_eq!(out.conversation, conv);
    assert_eq!(out.report.blocks_changed, 0);
    assert_eq!(out.report.tokens_freed, None);
    assert!(out.report.events.is_empty());
    assert!(
        out.report.notes[0].starts_with("fits: ~"),
        "{:?}",
        out.report.notes
    );
    // The default budget (200,000 - 32,000) fits easily.
    let out = run(&stage::<TruncateOldest>(""), &conv, &MemoryHost::default());
    assert_eq!(out.conversation, conv);
    assert!(out.report.notes[0].ends_with(
        "of a budget of 168,000 (context_window 200,000 - max_output_tokens 32,000); nothing dropped"
    ));
}

#[test]
fn events_go_with_the_messages_around_them() {
    let conv = conversation();
    // Cut at m5: e1 sits between m2 and m3, both dropped; e0 sits next to the kept m0.
    let out = run_with_budget(kept_tokens(&conv, 7), &conv);
    assert_eq!(out.conversation.position("e1"), None);
    assert!(out.conversation.position("e0").is_some());
    assert!(
        out.report.notes[0].contains("(4 chat, 1 event line)"),
        "{:?}",
        out.report.notes
    );
}

#[test]
fn the_first_user_message_can_be_dropped_too() {
    let conv = conversation();
    let out = run(
        &stage::<TruncateOldest>(&format!(
            "max_tokens = {}\nkeep_first_user = false",
            kept_tokens(&conv, 9) - message_tokens(&MemoryHost::default(), &conv.messages[0])
        )),
        &conv,
        &MemoryHost::default(),
    );
    assert_eq!(ids(&out.conversation), vec!["m7", "m8", "m9", "m10"]);
    check_invariants(&conv, &out.conversation, false);
}

#[test]
fn rerunning_on_the_output_changes_nothing_and_it_never_grows() {
    let conv = conversation();
    let total = kept_tokens(&conv, 0);
    for budget in (0..=total + 10).step_by(37) {
        let once = run_with_budget(budget, &conv);
        let twice = run_with_budget(budget, &once.conversation);
        assert_eq!(twice.conversation, once.conversation, "budget {budget}");
        assert!(twice.report.events.is_empty(), "budget {budget}");
        assert!(once.conversation.messages.len() <= conv.messages.len());
        check_invariants(&conv, &once.conversation, true);
        // Deterministic.
        assert_eq!(
            run_with_budget(budget, &conv).conversation,
            once.conversation
        );
    }
}

#[test]
fn far_over_budget_keeps_the_pinned_messages_and_the_last_turn() {
    let conv = conversation();
    let out = run_with_budget(10, &conv);
    assert_eq!(ids(&out.conversation), vec!["m0", "e0", "m10"]);
    assert!(out
        .report
        .notes
        .iter()
        .any(|n| n.starts_with("still over budget by ~")));
    // Ending on a result: its call stays with it.
    let mut conv = conversation();
    conv.messages.pop();
    let out = run_with_budget(10, &conv);
    assert_eq!(ids(&out.conversation), vec!["m0", "e0", "m8", "m9"]);
    // And the rerun leaves it.
    assert!(run_with_budget(10, &out.conversation)
        .report
        .events
        .is_empty());
}
