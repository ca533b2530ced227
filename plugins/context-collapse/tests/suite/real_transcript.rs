//! The stage on a real Claude Code session (the in-repo copy of the shared transcripts),
//! counted with the o200k tokenizer in a 32,000-token window with 8,000 output tokens:
//! effective window 24,000, commit at 21,600, block at 22,800; the session is 78,727 tokens.
//!
//! The session is an orchestrator run: after a slash command, the agent starts subagents with
//! parallel `Task` calls (one response written as several lines, one per call), twice, and the
//! subagents' own conversations (405 of the 438 lines, `isSidechain` lines, with their own
//! prompts and 160 tool calls) sit between those calls and their results. Grouped by user
//! prompts this was three turns, one of 431 messages, and `keep_recent_turns = 4` could
//! collapse nothing. Grouped by API rounds it is ten API turns: each `Task` batch is one turn
//! (one model call whose results come back after the subagents finish, so everything in between
//! stays in it: a turn never separates a call from its result), and the default config collapses
//! the six oldest turns, both batches included, and keeps the four most recent.

use crate::support::{assert_no_orphans, assert_unique_ids, report_json, run, stage, tokens, Host};
use condense_formats::ReadOptions;
use condense_model::Conversation;
use condense_tokens::TokenCounter;
use context_collapse::ACTIVE_FLAG;
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
    Host::default()
        .with_summarizer(crate::support::extractive())
        .with_window(32_000, 8_000)
        .with_counter(move |t| counter.count_text(t))
        .with_format("claude-code")
}

#[test]
fn the_session_is_ten_api_turns() {
    let input = transcript();
    let messages = &input.messages;
    let turns = condense_turns::group(messages);
    assert_eq!(turns.leading_end, 1, "the leading summary event line");
    let ranges: Vec<_> = turns.turns.iter().map(|t| t.range()).collect();
    assert_eq!(
        ranges,
        [
            1..2,     // the slash command
            2..8,     // its expanded prompt, the first response (text, TodoWrite) and result
            8..11,    // TodoWrite again
            11..223,  // three parallel Task calls (three lines), the subagents, the results
            223..225, // TodoWrite
            225..430, // two parallel Task calls, the subagents, the results
            430..432, // TodoWrite
            432..433, // the report to the user
            433..437, // "Thanks! Please update CLAUDE.md": Write and its result
            437..438, // the last answer
        ]
    );
    // No turn separates a call from its result: every result's call is in its turn.
    for t in &turns.turns {
        let orphans = condense_model::orphaned_tool_results(&messages[t.range()]);
        assert!(orphans.is_empty(), "{:?}: {orphans:?}", t.range());
    }
}

#[test]
fn the_default_config_collapses_the_old_turns() {
    let input = transcript();
    let mut h = host();
    let out = run(&stage(""), &input, &mut h);
    assert_eq!(h.conversation_tokens, 78_727);
    insta::assert_snapshot!(
        "real_transcript_defaults_output",
        condense_model::render::render(&out.conversation)
    );
    insta::assert_json_snapshot!("real_transcript_defaults_report", report_json(&out.report));
    // The summary itself (the rendering above elides it): the user's requests, the full
    // artifact trail and the error ledger first, from the original messages, then the prose.
    let summary = out.conversation.messages[1].content.text();
    insta::assert_snapshot!("real_transcript_defaults_summary", summary);
    for path in [
        "/path/to/Demo/todo-app/src/app/page.tsx",
        "/path/to/Demo/todo-app/src/hooks/useTodos.ts",
        "types/README.md",
    ] {
        assert!(summary.contains(&format!("`{path}`")), "{path} missing");
    }
    assert!(summary.contains("error TS2307: Cannot find module '@testing-library/react'"));
    assert_eq!(
        out.report.flags,
        vec![ACTIVE_FLAG],
        "autocompact stands down"
    );
    // Two spans, the second merged into the first's summary: turns 1-4, then turns 5-6.
    let requests = h.summary_requests.borrow();
    assert_eq!(requests.len(), 2);
    assert_eq!(requests[1].messages[0].id, input.messages[223].id);
    assert!(requests[1].previous_summary.is_some());
    // Each turn holds a sub-agent's whole run (about 20,000 tokens): the first span stands for
    // 39,791 tokens, 15% of which is over the cap of 20% of the 24,000-token effective window.
    assert_eq!(requests[0].max_tokens, 4_800);
    assert_eq!(requests[1].max_tokens, 4_800);
    // From 78,727 tokens to 4,365, below commit_at (21,600): the turns are that large.
    assert_eq!(tokens(&h, &out.conversation), 4_365);
    assert!(out.report.notes[0].starts_with("78,727 tokens, 4,365 projected with the collapses"));
    // Never a call separated from its result.
    assert_no_orphans(&out.conversation);
    assert_unique_ids(&out.conversation);
    // The leading event line, the summary, and the 4 most recent turns (8 messages) as they were.
    assert_eq!(out.conversation.messages.len(), 10);
    assert_eq!(out.conversation.messages[0], input.messages[0]);
    assert!(context_collapse::is_summary_message(
        &out.conversation.messages[1]
    ));
    assert_eq!(&out.conversation.messages[2..], &input.messages[430..]);
    // The summary line carries the session's fields (the host finds the session by them).
    let envelope = out.conversation.messages[1].envelope.to_map().unwrap();
    assert_eq!(
        envelope["sessionId"],
        "fe5e1c67-53e7-4862-81ae-d0e013e3270b"
    );
    assert_eq!(envelope["type"], "user");
}

#[test]
fn reruns_are_stable() {
    let input = transcript();
    let stage = stage("");
    let mut h = host();
    let first = run(&stage, &input, &mut h);
    let puts = h.state_puts.get();
    let second = run(&stage, &input, &mut h);
    assert_eq!(second.conversation, first.conversation);
    assert_eq!(h.state_puts.get(), puts);
    let third = run(&stage, &first.conversation, &mut h);
    assert_eq!(third.conversation, first.conversation);
    assert_eq!(h.summary_requests.borrow().len(), 2);
}

#[test]
fn the_output_reads_back_as_written() {
    // Written as a Claude Code session and read back, every message is the same (the host finds
    // what to expand by the messages' content, wrapper line included), and a rerun on it changes
    // nothing.
    let bytes = std::fs::read(TRANSCRIPT).unwrap();
    let mut doc = condense_formats::read(&bytes, TRANSCRIPT, &ReadOptions::default()).unwrap();
    let stage = stage("");
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
