//! The stage on a real Claude Code session (the in-repo copy of the shared transcripts), as
//! Claude Code sends it: its main thread (5,103 tokens with the o200k tokenizer) plus the
//! 16,484 tokens of system prompt and tool definitions the file does not hold (the usage the
//! session reported for its last call, 21,552 prompt tokens, less condense's count of that
//! prompt), which the host adds to `conversation_tokens` from `[model] fixed_tokens`. In a
//! 30,000-token window with 8,000 output tokens: effective window 22,000, commit at 19,800,
//! block at 20,900.
//!
//! The session is an orchestrator run: after a slash command, the agent starts subagents with
//! parallel `Task` calls (one response written as several lines, one per call), twice, and the
//! subagents' own conversations (405 of the 438 lines, `isSidechain` lines, with their own
//! prompts and 156 tool calls) sit between those calls and their results. Those lines are not
//! context (events that keep their content, 0 tokens), so the `Task` turns are small now; but
//! a turn never separates a call from its result, so each `Task` batch is still one API turn
//! with its subagents' lines inside, and the summary of a span that holds one lists the files
//! the subagents wrote and the errors they hit. The default config collapses the six oldest of
//! the ten API turns, both batches included, and keeps the four most recent.

use crate::support::tokens;
use condense_abi::Signal;
use condense_model::{Conversation, Format};
use condense_testing::{
    assert_no_orphans, assert_unique_ids, extractive, o200k, report_json, stage, transcript,
    Applied, MemoryHost,
};
use context_collapse::ContextCollapse;

/// The system prompt and tool definitions the session does not hold: its reported prompt
/// (21,552) less condense's count of the same prompt (`condense stats` shows the gap).
const FIXED_TOKENS: usize = 16_484;

const TRANSCRIPT: &str = "d-kimuson__claude-code-viewer/fe5e1c67-53e7-4862-81ae-d0e013e3270b.jsonl";

/// The session's one conversation.
pub fn session() -> Conversation {
    let doc = transcript(TRANSCRIPT);
    assert_eq!(doc.conversations().len(), 1);
    doc.conversations()[0].clone()
}

/// A host counting with o200k and summarizing with the host's default (extractive) summarizer,
/// in a 30,000-token window.
pub fn host() -> MemoryHost {
    MemoryHost::default()
        .with_summarizer(extractive())
        .with_window(30_000, 8_000)
        .with_counter(o200k())
        .with_format(Some(Format::ClaudeCode))
}

/// Runs the stage with the host's conversation count as the real host gives it: the messages
/// and the fixed tokens.
fn run(stage: &ContextCollapse, conv: &Conversation, host: &mut MemoryHost) -> Applied {
    host.run.conversation_tokens = tokens(host, conv) + FIXED_TOKENS;
    condense_testing::run(stage, conv, host)
}

#[test]
fn the_session_is_ten_api_turns() {
    let input = session();
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
    let input = session();
    let mut h = host();
    let out = run(&stage(""), &input, &mut h);
    assert_eq!(h.run.conversation_tokens, 5_103 + FIXED_TOKENS);
    insta::assert_snapshot!(
        "real_transcript_defaults_output",
        condense_model::render::render(&out.conversation)
    );
    insta::assert_json_snapshot!("real_transcript_defaults_report", report_json(&out.report));
    // The summary itself (the rendering above elides it): the user's requests, the full
    // artifact trail and the error ledger first, from the original messages, the subagents'
    // lines included, then the prose.
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
        out.report.signals,
        vec![Signal::CollapseActive],
        "autocompact stands down"
    );
    // Two spans, the second merged into the first's summary: turns 1-4, then turns 5-6.
    let requests = h.summary_requests.borrow();
    assert_eq!(requests.len(), 2);
    assert_eq!(requests[1].messages[0].id, input.messages[223].id);
    assert!(requests[1].previous_summary.is_some());
    // The summarizer is handed the subagents' lines of each span too (events, 0 tokens).
    assert!(requests[0].messages.len() > 200);
    // The spans are small now that the subagents' lines are not context: the summary budget
    // is the minimum, capped at 20% of the 22,000-token effective window.
    assert_eq!(requests[0].max_tokens, 1_000);
    assert_eq!(requests[1].max_tokens, 1_000);
    // From 21,587 tokens to 18,959, below commit_at (19,800).
    assert_eq!(tokens(&h, &out.conversation) + FIXED_TOKENS, 18_959);
    assert!(out.report.notes[0].starts_with("21,587 tokens, 18,959 projected with the collapses"));
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
    let input = session();
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
    // The stage reads the host's conversation in place: a projection is built from copies of
    // the messages it keeps, never from a copy of the whole conversation.
    assert!(first.changed && second.changed && !third.changed);
    assert!(!first.copied && !second.copied && !third.copied);
}

#[test]
fn the_output_reads_back_as_written() {
    // Written as a Claude Code session and read back, every message is the same (the host finds
    // what to expand by the messages' content, wrapper line included), and a rerun on it changes
    // nothing.
    let mut doc = transcript(TRANSCRIPT);
    let stage = stage("");
    let mut h = host();
    let out = run(&stage, &doc.conversations()[0], &mut h);
    doc.conversations_mut()[0] = out.conversation.clone();
    let written = doc.write().unwrap();
    let reread = condense_formats::read(&written, "out.jsonl", &Default::default()).unwrap();
    assert_eq!(reread.conversations()[0], out.conversation);
    let again = run(&stage, &reread.conversations()[0], &mut h);
    assert_eq!(again.conversation, out.conversation);
    assert_eq!(again.report.blocks_changed, 0);
}
