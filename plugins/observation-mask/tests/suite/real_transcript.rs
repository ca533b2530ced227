//! The stage on the real mini-swe-agent trajectory (OpenAI format, one `bash` tool, 156 tool
//! results): a compact summary is snapshotted, not the whole rendering.

use crate::support::{masked_ids, results, tokens};
use condense_formats::ReadOptions;
use condense_model::Conversation;
use condense_testing::{changed_messages, run, stage, MemoryHost};
use observation_mask::{is_placeholder, ObservationMask};
use serde_json::{json, Value};

const TRANSCRIPT: &str = "SWE-agent__mini-swe-agent/sqlfluff__sqlfluff-1733.traj.json";

fn transcript() -> Conversation {
    let doc = condense_testing::transcript(TRANSCRIPT);
    assert_eq!(doc.conversations().len(), 1);
    doc.conversations()[0].clone()
}

/// Counts, the ids left whole, tokens before and after, and the report without its events
/// (their number, the first and the last instead).
fn summary(
    input: &Conversation,
    output: &Conversation,
    report: &condense_abi::StageReport,
) -> Value {
    let before = results(input);
    let after = results(output);
    let whole: Vec<&str> = after
        .iter()
        .filter(|(_, t)| !is_placeholder(t))
        .map(|(id, _)| id.as_str())
        .collect();
    json!({
        "tool_results": before.len(),
        "masked": masked_ids(output).len(),
        "left_whole": whole,
        "first_masked": masked_ids(output).first(),
        "last_masked": masked_ids(output).last(),
        "tokens_before": tokens(input),
        "tokens_after": tokens(output),
        "report": {
            "blocks_changed": report.blocks_changed,
            "tokens_freed": report.tokens_freed,
            "notes": report.notes,
            "events": report.events.len(),
            "first_event": report.events.first(),
            "last_event": report.events.last(),
        },
    })
}

#[test]
fn real_mini_swe_agent_trajectory() {
    let input = transcript();
    let out = run(
        &stage::<ObservationMask>(""),
        &input,
        &MemoryHost::default(),
    );
    insta::assert_json_snapshot!(
        "mini_swe_agent_summary",
        summary(&input, &out.conversation, &out.report)
    );
    // Only tool result contents changed, and only their messages crossed back.
    assert!(!out.copied);
    assert_eq!(out.replaced, changed_messages(&input, &out.conversation));
    assert!(!out.replaced.is_empty());
    assert_eq!(out.conversation.messages.len(), input.messages.len());
    for (a, b) in input.messages.iter().zip(&out.conversation.messages) {
        assert_eq!((&a.id, a.role, &a.extra), (&b.id, b.role, &b.extra));
        if a.tool_results().next().is_none() {
            assert_eq!(a, b);
        }
    }
    // The last five results are whole.
    let after = results(&out.conversation);
    assert!(after[after.len() - 5..]
        .iter()
        .all(|(_, t)| !is_placeholder(t)));
    // Idempotent, and never bigger.
    let again = run(
        &stage::<ObservationMask>(""),
        &out.conversation,
        &MemoryHost::default(),
    );
    assert_eq!(again.conversation, out.conversation);
    assert!(tokens(&out.conversation) < tokens(&input));
}

#[test]
fn real_trajectory_written_and_read_back_is_left_alone() {
    let mut doc = condense_testing::transcript(TRANSCRIPT);
    let out = run(
        &stage::<ObservationMask>(""),
        &doc.conversations()[0],
        &MemoryHost::default(),
    );
    doc.conversations_mut()[0] = out.conversation;
    let written = doc.write().unwrap();
    let reread = condense_formats::read(&written, "written.json", &ReadOptions::default()).unwrap();
    let again = run(
        &stage::<ObservationMask>(""),
        &reread.conversations()[0],
        &MemoryHost::default(),
    );
    assert_eq!(again.report.blocks_changed, 0, "{:?}", again.report.notes);
    assert!(!again.copied && !again.changed);
}
