//! The time path on a real OpenHands evaluation output, whose event timestamps carry no zone
//! (`2025-04-30T16:34:22.948624`): they are read as UTC, so the gap is known and old results
//! are cleared (before they were `unreadable` and the stage could not tell the cache was cold).

use crate::support::MINUTE;
use condense_formats::Document;
use condense_model::{Conversation, Format, Role};
use condense_testing::{run, stage, MemoryHost};
use microcompact::time::parse_rfc3339_ms;
use microcompact::{is_cleared_marker, Microcompact};

fn instances() -> Document {
    condense_testing::transcript("All-Hands-AI__OpenHands/output.jsonl")
}

/// The timestamp of the last assistant message, as written.
fn last_assistant(conv: &Conversation) -> &str {
    conv.messages
        .iter()
        .rev()
        .find(|m| m.role == Role::Assistant)
        .and_then(|m| m.timestamp.as_deref())
        .unwrap()
}

fn cleared_results(conv: &Conversation) -> usize {
    conv.tool_results()
        .filter(|r| is_cleared_marker(&r.result.content.text()))
        .count()
}

#[test]
fn zoneless_timestamps_give_a_gap_and_the_time_path_runs() {
    let doc = instances();
    assert_eq!(doc.conversations().len(), 3);
    let input = &doc.conversations()[0];
    let last = last_assistant(input);
    assert!(
        !last.ends_with('Z') && !last.contains('+'),
        "the fixture's timestamps have no zone: {last}"
    );
    let at = parse_rfc3339_ms(last).unwrap();

    // Two hours after the last assistant message: cold, old results cleared.
    let cold = MemoryHost::default()
        .with_now_ms(at + 120 * MINUTE)
        .with_format(Some(Format::OpenHands));
    let out = run(&stage::<Microcompact>(""), input, &cold);
    let note = &out.report.notes[0];
    assert!(note.starts_with("gap 2 h > 60 min: cleared "), "{note}");
    assert!(out.report.blocks_changed > 0, "{:?}", out.report.notes);
    assert_eq!(
        cleared_results(&out.conversation),
        out.report.blocks_changed
    );
    assert!(out.report.tokens_freed.unwrap_or(0) > 0);
    assert_eq!(out.conversation.messages.len(), input.messages.len());

    // Ten minutes after: the same timestamp reads as a short gap, nothing is cleared.
    let warm = MemoryHost::default()
        .with_now_ms(at + 10 * MINUTE)
        .with_format(Some(Format::OpenHands));
    let out = run(&stage::<Microcompact>(""), input, &warm);
    assert_eq!(out.report.blocks_changed, 0, "{:?}", out.report.notes);
    assert_eq!(&out.conversation, input);
}
