//! The stage on a real Claude Code session (the in-repo copy of the shared transcripts),
//! counted with the o200k tokenizer in a 32,000-token window with 8,000 output tokens:
//! effective window 24,000, commit at 21,600, block at 22,800; the session is 78,727 tokens.
//!
//! The session has only three API turns: a slash-command line, one long autonomous turn of 431
//! messages (77,747 tokens: the agent works through the task with 167 tool calls and no user
//! message in between), and a short last turn. With the default `keep_recent_turns = 4`
//! nothing may be collapsed; with `keep_recent_turns = 1` the first two turns are.

use crate::support::{assert_no_orphans, assert_unique_ids, ids, report_json, run, stage, Host};
use condense_formats::ReadOptions;
use condense_model::Conversation;
use condense_summarize::SummarizerConfig;
use condense_tokens::TokenCounter;
use std::sync::Arc;

const TRANSCRIPT: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../tests/fixtures/transcripts/d-kimuson__claude-code-viewer/",
    "fe5e1c67-53e7-4862-81ae-d0e013e3270b.jsonl"
);

pub fn transcript() -> Conversation {
    let bytes = std::fs::read(TRANSCRIPT).unwrap();
    let doc = condense_formats::read(&bytes, TRANSCRIPT, &ReadOptions::default()).unwrap();
    assert_eq!(doc.conversations().len(), 1);
    doc.conversations()[0].clone()
}

/// A host counting with o200k and summarizing with the host's default (extractive) summarizer, in a 32,000-token window.
pub fn host() -> Host {
    let counter = Arc::new(TokenCounter::new(Default::default()));
    let summarizer =
        condense_summarize::build(&SummarizerConfig::default(), Arc::clone(&counter)).unwrap();
    Host::default()
        .with_summarizer(move |r| {
            summarizer
                .summarize(&condense_summarize::SummaryRequest {
                    messages: &r.messages,
                    previous_summary: r.previous_summary.as_deref(),
                    max_tokens: r.max_tokens,
                    purpose: &r.purpose,
                })
                .map_err(|e| e.to_string())
        })
        .with_window(32_000, 8_000)
        .with_counter(move |t| counter.count_text(t))
        .with_format("claude-code")
}

#[test]
fn three_turns_and_keep_recent_turns_4_leave_nothing_to_collapse() {
    let input = transcript();
    let mut h = host();
    let out = run(&stage(""), &input, &mut h);
    assert_eq!(h.conversation_tokens, 78_727);
    assert_eq!(out.conversation, input);
    assert!(out.report.flags.is_empty(), "autocompact is not suppressed");
    assert!(h.summary_requests.borrow().is_empty());
    insta::assert_json_snapshot!("real_transcript_defaults_report", report_json(&out.report));
}

#[test]
fn with_keep_recent_turns_1_the_long_turn_is_collapsed() {
    let input = transcript();
    let mut h = host();
    let out = run(&stage("keep_recent_turns = 1"), &input, &mut h);
    insta::assert_snapshot!(
        "real_transcript_keep_1_output",
        condense_model::render::render(&out.conversation)
    );
    insta::assert_json_snapshot!("real_transcript_keep_1_report", report_json(&out.report));
    assert_no_orphans(&out.conversation);
    assert_unique_ids(&out.conversation);
    // Leading event line, the summary, the last turn (5 messages) as it was.
    assert_eq!(out.conversation.messages.len(), 7);
    assert!(ids(&out.conversation)[1].starts_with("collapse-"));
    let tail = &input.messages[input.messages.len() - 5..];
    assert_eq!(&out.conversation.messages[2..], tail);
    // The summary line carries the session's fields (the host finds the session by them).
    let envelope = out.conversation.messages[1].envelope.to_map().unwrap();
    assert_eq!(
        envelope["sessionId"],
        "fe5e1c67-53e7-4862-81ae-d0e013e3270b"
    );
    assert_eq!(envelope["type"], "user");
    let request = &h.summary_requests.borrow()[0];
    assert_eq!(request.messages.len(), 432);
    assert_eq!(request.max_tokens, 2_000);
}

#[test]
fn reruns_are_stable() {
    let input = transcript();
    let stage = stage("keep_recent_turns = 1");
    let mut h = host();
    let first = run(&stage, &input, &mut h);
    let puts = h.state_puts.get();
    let second = run(&stage, &input, &mut h);
    assert_eq!(second.conversation, first.conversation);
    assert_eq!(h.state_puts.get(), puts);
    let third = run(&stage, &first.conversation, &mut h);
    assert_eq!(third.conversation, first.conversation);
    assert_eq!(h.summary_requests.borrow().len(), 1);
}

#[test]
fn the_output_reads_back_as_written() {
    // Written as a Claude Code session and read back, every message is the same (the host finds
    // what to expand by the messages' content, wrapper line included), and a rerun on it changes
    // nothing.
    let bytes = std::fs::read(TRANSCRIPT).unwrap();
    let mut doc = condense_formats::read(&bytes, TRANSCRIPT, &ReadOptions::default()).unwrap();
    let stage = stage("keep_recent_turns = 1");
    let mut h = host();
    let out = run(&stage, &doc.conversations()[0], &mut h);
    doc.conversations_mut()[0] = out.conversation.clone();
    let written = doc.write().unwrap();
    let reread = condense_formats::read(&written, "out.jsonl", &ReadOptions::default()).unwrap();
    assert_eq!(reread.conversations()[0], out.conversation);
    let again = run(&stage, &reread.conversations()[0], &mut h);
    assert_eq!(again.conversation, out.conversation);
    assert_eq!(again.report.blocks_changed, 0);
}
