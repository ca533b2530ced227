//! The stage on a real Claude Code session (the in-repo copy of the shared transcripts), as
//! Claude Code sends it: its main thread (32 messages, 11 tool calls, 5,103 tokens with the
//! o200k tokenizer) plus the 16,484 tokens of system prompt and tool definitions the file does
//! not hold (the prompt the session reported for its last call, 21,552, less condense's count of
//! it), which the host adds to `conversation_tokens` from `[model] fixed_tokens`. The subagents'
//! 405 lines are not context (events that keep their content): the summary still lists the
//! files they wrote and the errors they hit.

use crate::support::tokens;
use autocompact::Autocompact;
use condense_abi::Signal;
use condense_model::{Conversation, Format};
use condense_testing::{
    assert_no_orphans, assert_unique_ids, extractive, o200k, report_json, stage, transcript,
    Applied, MemoryHost,
};

/// The system prompt and tool definitions the session does not hold (`condense stats` shows
/// the gap between the usage it reported and condense's count).
const FIXED_TOKENS: usize = 16_484;

/// Runs the stage with the host's conversation count as the real host gives it: the messages
/// and the fixed tokens.
fn run(stage: &Autocompact, conv: &Conversation, host: &mut MemoryHost) -> Applied {
    host.run.conversation_tokens = tokens(host, conv) + FIXED_TOKENS;
    condense_testing::run(stage, conv, host)
}

const TRANSCRIPT: &str = "d-kimuson__claude-code-viewer/fe5e1c67-53e7-4862-81ae-d0e013e3270b.jsonl";

const CONFIG: &str = r#"pin = [{ tool = "TodoWrite" }]"#;

/// The session's one conversation.
pub fn session() -> Conversation {
    let doc = transcript(TRANSCRIPT);
    assert_eq!(doc.conversations().len(), 1);
    doc.conversations()[0].clone()
}

/// A host counting with o200k and summarizing with the host's default (extractive) summarizer,
/// in a window of `window` tokens with 8,000 output tokens.
pub fn host(window: usize) -> MemoryHost {
    MemoryHost::default()
        .with_summarizer(extractive())
        .with_window(window, 8_000)
        .with_counter(o200k())
        .with_format(Some(Format::ClaudeCode))
}

#[test]
fn a_42k_window_compacts_and_restores_files_and_the_todo_list() {
    // Effective 34,000, threshold 21,000, summary at most 8,500 tokens.
    let input = session();
    let mut h = host(42_000);
    let out = run(&stage(CONFIG), &input, &mut h);
    assert_eq!(h.run.conversation_tokens, 5_103 + FIXED_TOKENS);
    assert_eq!(out.report.signals, vec![Signal::Compacted]);
    insta::assert_snapshot!(
        "real_transcript_42k_output",
        condense_model::render::render(&out.conversation)
    );
    insta::assert_json_snapshot!("real_transcript_42k_report", report_json(&out.report));
    // The summary itself (the rendering above elides it): the user's requests with the last
    // verbatim, the full artifact trail and the error ledger, then the prose.
    let summary = out.conversation.messages[0].content.text();
    insta::assert_snapshot!("real_transcript_42k_summary", summary);
    assert!(summary.contains(
        "Last request (verbatim):\n```\nThanks! Please update CLAUDE.md for current changes\n```"
    ));
    assert!(summary.contains("`/path/to/Demo/CLAUDE.md`"));
    assert!(summary.contains("error TS2307: Cannot find module '@testing-library/react'"));
    assert_no_orphans(&out.conversation);
    assert_unique_ids(&out.conversation);
    assert!(
        tokens(&h, &out.conversation) + FIXED_TOKENS < 21_000,
        "lands below the threshold"
    );
    // Every new line carries the session's fields (the host finds the session by them).
    for m in &out.conversation.messages {
        let envelope = m.envelope.to_map().unwrap();
        assert_eq!(
            envelope["sessionId"],
            "fe5e1c67-53e7-4862-81ae-d0e013e3270b"
        );
        assert!(!envelope.contains_key("toolUseResult"));
    }
    // The summarizer is handed the subagents' lines too (events, 0 tokens).
    let request = &h.summary_requests.borrow()[0];
    assert_eq!(request.max_tokens, 8_500);
    assert!(request.messages.len() > 400);
}

#[test]
fn a_38k_window_compacts_with_a_smaller_summary() {
    // Effective 30,000, threshold 17,000, summary at most 7,500 tokens: 516 tokens are left
    // beside the fixed part, less than the summary needs (every written path and the last
    // request), so it does not land below the threshold, but it still shrinks.
    let input = session();
    let mut h = host(38_000);
    let out = run(&stage(CONFIG), &input, &mut h);
    assert_eq!(out.report.signals, vec![Signal::Compacted]);
    insta::assert_json_snapshot!("real_transcript_38k_report", report_json(&out.report));
    assert_eq!(h.summary_requests.borrow()[0].max_tokens, 7_500);
    assert_no_orphans(&out.conversation);
    assert!(tokens(&h, &out.conversation) < tokens(&h, &input));
}

#[test]
fn the_next_run_on_the_adopted_output_does_not_compact_again() {
    let mut h = host(42_000);
    let stage = stage(CONFIG);
    let first = run(&stage, &session(), &mut h);
    let again = run(&stage, &first.conversation, &mut h);
    assert!(again.report.signals.is_empty());
    assert_eq!(again.conversation, first.conversation);
    assert_eq!(h.summary_requests.borrow().len(), 1);
}

#[test]
fn the_output_reads_back_as_written() {
    // Written as a Claude Code session and read back, every message is the same: the host finds
    // what to expand by the messages' content, wrapper line included.
    let mut doc = transcript(TRANSCRIPT);
    let mut h = host(42_000);
    let out = run(&stage(CONFIG), &doc.conversations()[0], &mut h);
    doc.conversations_mut()[0] = out.conversation.clone();
    let written = doc.write().unwrap();
    let reread = condense_formats::read(&written, "out.jsonl", &Default::default()).unwrap();
    assert_eq!(reread.conversations()[0], out.conversation);
}
