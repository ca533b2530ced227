//! The window on the real mini-swe-agent trajectory (OpenAI shape: system, task, then
//! assistant/tool pairs), at a 20,000-token budget: a compact summary is snapshotted.

use crate::support::{check_invariants, run_with_budget};
use condense_model::Conversation;
use serde_json::json;

fn transcript() -> Conversation {
    let doc =
        condense_testing::transcript("SWE-agent__mini-swe-agent/sqlfluff__sqlfluff-1733.traj.json");
    doc.conversations()[0].clone()
}

#[test]
fn real_trajectory_at_20000_tokens() {
    let input = transcript();
    let out = run_with_budget(20_000, &input);
    check_invariants(&input, &out.conversation, true);
    let kept: Vec<(&str, &str)> = out
        .conversation
        .messages
        .iter()
        .take(4)
        .map(|m| (m.id.as_str(), m.role.as_str()))
        .collect();
    insta::assert_json_snapshot!(
        "mini_swe_agent_summary",
        json!({
            "messages_before": input.messages.len(),
            "messages_after": out.conversation.messages.len(),
            "first_kept": kept,
            "last_kept": out.conversation.messages.last().map(|m| &m.id),
            "dropped_events": out.report.events.len(),
            "first_dropped": out.report.events.first(),
            "tokens_freed": out.report.tokens_freed,
            "notes": out.report.notes,
        })
    );
    let again = run_with_budget(20_000, &out.conversation);
    assert_eq!(again.conversation, out.conversation);
}
