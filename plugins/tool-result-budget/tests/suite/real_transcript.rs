//! The stage on a real Claude Code session (the in-repo copy of the shared transcripts):
//! DRMacIver/claude-reliability's, whose tool results are all the agent's own (in the other
//! shipped session the large ones are subagents' lines, which are not context).
//!
//! Its largest tool result is 5,149 chars (a `Task` subagent's report), under the default
//! 50,000, so the stage runs with a limit of 2,000 here to act on it and two more.

use condense_formats::{Document, ReadOptions};
use condense_model::{Conversation, ToolResult};
use condense_testing::{changed_messages, report_json, run, stage, MemoryHost};
use serde_json::{json, Value};
use tool_result_budget::ToolResultBudget;

const TRANSCRIPT: &str = "DRMacIver__claude-reliability/transcript.jsonl";

const CONFIG: &str = "max_result_size_chars = 2000";

fn document() -> Document {
    condense_testing::transcript(TRANSCRIPT)
}

fn transcript() -> Conversation {
    let doc = document();
    assert_eq!(doc.conversations().len(), 1);
    doc.conversations()[0].clone()
}

fn results(conv: &Conversation) -> Vec<(&str, &ToolResult)> {
    conv.messages
        .iter()
        .filter(|m| m.is_chat())
        .flat_map(|m| m.tool_results().map(move |r| (m.id.as_str(), r)))
        .collect()
}

/// What changed, compactly: one entry per replaced result.
fn summary(input: &Conversation, output: &Conversation, host: &MemoryHost) -> Value {
    let names = input.tool_names_by_id();
    let mut replaced = Vec::new();
    for ((message_id, before), (_, after)) in results(input).into_iter().zip(results(output)) {
        assert_eq!(before.tool_use_id, after.tool_use_id);
        if before == after {
            continue;
        }
        let original = before.content.text();
        let reference = after.content.text();
        let key = reference
            .split("key ")
            .nth(1)
            .unwrap()
            .split(']')
            .next()
            .unwrap()
            .to_string();
        assert_eq!(host.store.borrow()[&key], original.as_bytes());
        replaced.push(json!({
            "message_id": message_id,
            "tool_use_id": before.tool_use_id,
            "tool": names.get(before.tool_use_id.as_str()),
            "original_chars": original.chars().count(),
            "reference_bytes": reference.len(),
            "key": key,
            "reference_head": reference.lines().next(),
            "reference_tail": reference.lines().last(),
        }));
    }
    json!({ "tool_results": results(input).len(), "replaced": replaced })
}

#[test]
fn real_transcript_with_a_5000_char_limit() {
    let input = transcript();
    let host = MemoryHost::default();
    let out = run(&stage::<ToolResultBudget>(CONFIG), &input, &host);
    insta::assert_json_snapshot!(
        "real_transcript_summary",
        summary(&input, &out.conversation, &host)
    );
    insta::assert_json_snapshot!("real_transcript_report", report_json(&out.report));
    // Only tool result blocks changed; everything else is as it was.
    assert_eq!(out.conversation.messages.len(), input.messages.len());
    for (a, b) in input.messages.iter().zip(&out.conversation.messages) {
        assert_eq!(
            (&a.id, a.role, &a.extra, &a.envelope),
            (&b.id, b.role, &b.extra, &b.envelope)
        );
        assert_eq!(a.content.blocks.len(), b.content.blocks.len());
    }
}

#[test]
fn real_transcript_at_the_default_limit_is_untouched() {
    let input = transcript();
    let host = MemoryHost::default();
    let out = run(&stage::<ToolResultBudget>(""), &input, &host);
    assert_eq!(out.conversation, input);
    assert_eq!(out.report.blocks_changed, 0);
    // Judged through the view: nothing replaced, nothing copied in.
    assert!(out.read && !out.copied && !out.changed);
    assert_eq!(
        out.report.notes,
        vec!["no tool result over its limit (54 checked, max_result_size_chars = 50,000)"]
    );
}

#[test]
fn real_transcript_reruns_and_resume_are_stable() {
    let full = transcript();
    let stage = stage::<ToolResultBudget>(CONFIG);

    // On its own output.
    let host = MemoryHost::default();
    let once = run(&stage, &full, &host);
    // Only the messages holding a replaced result cross back; nothing else is copied.
    assert!(!once.copied && once.changed);
    assert_eq!(once.replaced, changed_messages(&full, &once.conversation));
    assert!(!once.replaced.is_empty() && once.replaced.len() < full.messages.len() / 4);
    let twice = run(&stage, &once.conversation, &host);
    assert_eq!(twice.conversation, once.conversation);
    assert_eq!(twice.report.blocks_changed, 0);
    assert!(
        !twice.copied,
        "a rerun on its own output replaces nothing: no copy"
    );

    // Resume: the first half of the session, then the whole of it, then with a changed config.
    let host = MemoryHost::default();
    let half = Conversation {
        messages: full.messages[..full.messages.len() / 2].to_vec(),
        ..full.clone()
    };
    let first = run(&stage, &half, &host);
    assert!(
        first.report.blocks_changed >= 1,
        "the first half has a result to persist"
    );
    let resumed = run(&stage, &full, &host);
    assert_eq!(resumed.conversation, once.conversation);
    let n = half.messages.len();
    assert_eq!(
        resumed.conversation.messages[..n],
        first.conversation.messages[..]
    );
    let lower = condense_testing::stage::<ToolResultBudget>(
        "max_result_size_chars = 1000\npreview_bytes = 500",
    );
    let after_change = run(&lower, &full, &host);
    assert_eq!(
        after_change.conversation, once.conversation,
        "all results were judged already"
    );
}

#[test]
fn real_transcript_output_written_and_read_back_is_left_alone() {
    let host = MemoryHost::default();
    let stage = stage::<ToolResultBudget>(CONFIG);
    let mut doc = document();
    let out = run(&stage, &doc.conversations()[0], &host);
    doc.conversations_mut()[0] = out.conversation.clone();
    let written = doc.write().unwrap();
    let reread =
        condense_formats::read(&written, "written.jsonl", &ReadOptions::default()).unwrap();
    let again = run(&stage, &reread.conversations()[0], &host);
    assert_eq!(again.report.blocks_changed, 0, "{:?}", again.report.notes);
    assert_eq!(again.conversation, reread.conversations()[0]);
    assert!(again
        .report
        .notes
        .contains(&"3 tool results already held a persisted reference".to_string()));
}
