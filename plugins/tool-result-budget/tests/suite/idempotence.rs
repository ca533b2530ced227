//! Reruns make exactly the same replacements: on the output, on the input again, on the input
//! with turns appended, and after the config changed.

use crate::fixture::{conversation, lines, CONFIG};
use condense_model::{Content, Conversation, Message, Role};
use condense_testing::{apply, report_json, run, stage, tool_result, tool_use, MemoryHost};
use serde_json::json;
use tool_result_budget::ToolResultBudget;

/// The conversation with two more turns: a new 70,000-char Bash result and a small one.
fn appended() -> Conversation {
    let mut conv = conversation();
    conv.messages.push(Message::new(
        "m8",
        Role::Assistant,
        vec![
            tool_use("t8", "Bash", json!({"command": "cat huge.log"})),
            tool_use("t9", "Read", json!({"file_path": "tiny.txt"})),
        ],
    ));
    conv.messages.push(Message::new(
        "m9",
        Role::User,
        vec![
            tool_result("t8", Content::string(lines("huge.log", 70_000)), None),
            tool_result("t9", Content::string("tiny"), None),
        ],
    ));
    conv
}

#[test]
fn applying_to_its_own_output_changes_nothing() {
    let host = MemoryHost::default();
    let stage = stage::<ToolResultBudget>(CONFIG);
    let first = run(&stage, &conversation(), &host);
    let (puts, state_puts) = (host.puts.get(), host.state_puts.get());
    let state = host.state.borrow().clone();
    let second = run(&stage, &first.conversation, &host);
    assert_eq!(second.conversation, first.conversation);
    assert_eq!(second.report.blocks_changed, 0);
    assert_eq!(second.report.tokens_freed, None);
    assert_eq!(host.puts.get(), puts, "nothing persisted again");
    assert_eq!(host.state_puts.get(), state_puts, "state not rewritten");
    assert_eq!(*host.state.borrow(), state);
    assert_eq!(
        second.report.notes,
        vec![
            "no tool result over its limit (7 checked, max_result_size_chars = 50,000)",
            "4 tool results already held a persisted reference",
        ]
    );
}

#[test]
fn applying_to_the_same_input_again_makes_the_same_replacements() {
    let host = MemoryHost::default();
    let stage = stage::<ToolResultBudget>(CONFIG);
    let first = run(&stage, &conversation(), &host);
    let puts = host.puts.get();
    let second = run(&stage, &conversation(), &host);
    assert_eq!(second.conversation, first.conversation);
    assert_eq!(second.report.blocks_changed, first.report.blocks_changed);
    assert_eq!(second.report.tokens_freed, first.report.tokens_freed);
    assert_eq!(
        host.puts.get(),
        puts,
        "recorded decisions are re-applied, not recomputed"
    );
    for (a, b) in first.report.events.iter().zip(&second.report.events) {
        assert_eq!(format!("{} (earlier decision)", a.detail), b.detail);
    }
    assert_eq!(
        second.report.notes,
        vec!["re-applied 4 replacements of earlier runs (235,001 chars, already in the store)"]
    );
}

#[test]
fn appended_turns_keep_the_old_replacements() {
    let host = MemoryHost::default();
    let stage = stage::<ToolResultBudget>(CONFIG);
    let first = run(&stage, &conversation(), &host);
    let second = run(&stage, &appended(), &host);
    let n = first.conversation.messages.len();
    assert_eq!(
        second.conversation.messages[..n],
        first.conversation.messages[..]
    );
    let new_result = second.conversation.messages[n + 1]
        .tool_results()
        .next()
        .unwrap();
    assert!(new_result
        .content
        .text()
        .starts_with("[condense: tool result persisted — 70,000 chars"));
    assert_eq!(second.report.blocks_changed, 5);
    assert_eq!(
        second.report.notes,
        vec![
            "persisted 1 tool result (70,000 chars) to the store",
            "re-applied 4 replacements of earlier runs (235,001 chars, already in the store)",
        ]
    );
}

#[test]
fn a_config_change_does_not_change_earlier_decisions() {
    let host = MemoryHost::default();
    let first = run(&stage::<ToolResultBudget>(CONFIG), &conversation(), &host);
    // Much lower limits and a tiny preview: only the new turns are judged under them.
    let changed = stage::<ToolResultBudget>(
        "max_result_size_chars = 1000\npreview_bytes = 100\nper_tool = { Read = 2 }",
    );
    let second = run(&changed, &appended(), &host);
    let n = first.conversation.messages.len();
    assert_eq!(
        second.conversation.messages[..n],
        first.conversation.messages[..]
    );
    // The new Read result ("tiny", 4 chars) is over Read = 2 but a reference would be longer.
    let new = &second.conversation.messages[n + 1];
    assert_eq!(new.tool_results().nth(1).unwrap().content.text(), "tiny");
    insta::assert_json_snapshot!("config_change_report", report_json(&second.report));
    // And the decisions stay put when run with the changed config once more.
    let third = run(&changed, &appended(), &host);
    assert_eq!(third.conversation, second.conversation);
}

#[test]
fn a_different_text_under_a_recorded_id_is_left_whole() {
    let host = MemoryHost::default();
    let stage = stage::<ToolResultBudget>(CONFIG);
    run(&stage, &conversation(), &host);
    let mut conv = conversation();
    conv.messages[2].content.blocks[1] =
        tool_result("t2", Content::string(lines("other", 60_000)), None);
    let out = run(&stage, &conv, &host);
    assert_eq!(out.conversation.messages[2], conv.messages[2]);
    assert_eq!(out.report.blocks_changed, 3);
    assert!(
        out.report
            .notes
            .iter()
            .any(|n| n.ends_with("under the same id: t2")),
        "{:?}",
        out.report.notes
    );
}

#[test]
fn a_corrupt_state_is_an_error_not_a_silent_rejudgement() {
    let host = MemoryHost::default();
    *host.state.borrow_mut() = Some("{not json".into());
    let err = apply(&stage::<ToolResultBudget>(CONFIG), &conversation(), &host).unwrap_err();
    assert!(
        err.message().starts_with("stored state is not valid"),
        "{}",
        err.message()
    );
}
