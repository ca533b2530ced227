//! The stage on a real Claude Code session (the in-repo copy of the shared transcripts), with
//! tokens counted by the real o200k tokenizer: DRMacIver/claude-reliability's, whose 54 tool
//! calls are all the agent's own (in the other shipped session, 156 of 167 are subagents' lines,
//! which are not context and which the stage leaves alone). Its last assistant message is at
//! 2026-01-20T13:20:35.208Z.

use crate::support::MINUTE;
use condense_abi::StageReport;
use condense_formats::{Document, ReadOptions};
use condense_model::{Conversation, Format, Role, ToolResult};
use condense_testing::{changed_messages, o200k, report_json, run, stage, MemoryHost};
use condense_tokens::{TokenCounter, TokenizerKind};
use microcompact::time::parse_rfc3339_ms;
use microcompact::{is_cleared_marker, Microcompact, CLEARED_MARKER};
use serde_json::{json, Value};
use std::collections::BTreeMap;

const HOT: &str = "trigger_tokens = 5000\nclear_at_least = 2000";

fn document() -> Document {
    condense_testing::transcript("DRMacIver__claude-reliability/transcript.jsonl")
}

fn transcript() -> Conversation {
    let doc = document();
    assert_eq!(doc.conversations().len(), 1);
    doc.conversations()[0].clone()
}

/// A host counting with o200k, its clock `minutes` after the last assistant message.
fn host_after(conv: &Conversation, minutes: i64) -> MemoryHost {
    let last = conv
        .messages
        .iter()
        .rev()
        .find(|m| m.role == Role::Assistant)
        .and_then(|m| m.timestamp.as_deref())
        .unwrap();
    assert_eq!(last, "2026-01-20T13:20:35.208Z");
    MemoryHost::default()
        .with_now_ms(parse_rfc3339_ms(last).unwrap() + minutes * MINUTE)
        .with_format(Some(Format::ClaudeCode))
        .with_counter(o200k())
}

fn results(conv: &Conversation) -> Vec<&ToolResult> {
    conv.messages
        .iter()
        .filter(|m| m.is_chat())
        .flat_map(|m| m.tool_results())
        .collect()
}

/// The tokens the host would count (messages, system, tools; not request fields).
fn tokens(conv: &Conversation) -> usize {
    TokenCounter::new(TokenizerKind::O200k)
        .count_conversation(conv)
        .total
}

/// The report without its per-result events, which the summaries list.
fn report_summary(report: &StageReport) -> Value {
    let mut v = report_json(report);
    let mut kinds: BTreeMap<String, usize> = BTreeMap::new();
    for e in &report.events {
        *kinds.entry(e.kind.clone()).or_default() += 1;
    }
    v["events"] = json!(kinds);
    v
}

/// Ids by tool name.
fn by_tool<'a>(
    conv: &Conversation,
    ids: impl Iterator<Item = &'a str>,
) -> BTreeMap<String, Vec<String>> {
    let names = conv.tool_names_by_id();
    let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for id in ids {
        out.entry(names[id].to_string())
            .or_default()
            .push(id.to_string());
    }
    out
}

#[test]
fn two_hours_idle_takes_the_time_path() {
    let input = transcript();
    let host = host_after(&input, 120);
    let out = run(&stage::<Microcompact>(""), &input, &host);
    // Cleared in place: only the messages holding a cleared result cross back.
    assert!(!out.copied && out.changed);
    assert_eq!(out.replaced, changed_messages(&input, &out.conversation));

    let cleared: Vec<&str> = results(&input)
        .into_iter()
        .zip(results(&out.conversation))
        .filter(|(a, b)| a != b)
        .map(|(a, b)| {
            // An error result keeps its first meaningful line in its marker.
            let text = b.content.text();
            assert!(is_cleared_marker(&text), "{text}");
            assert_eq!(text == CLEARED_MARKER, a.is_error != Some(true), "{text}");
            assert_eq!(
                (&a.tool_use_id, a.is_error, &a.extra),
                (&b.tool_use_id, b.is_error, &b.extra)
            );
            a.tool_use_id.as_str()
        })
        .collect();
    let (before, after) = (tokens(&input), tokens(&out.conversation));
    insta::assert_json_snapshot!(
        "real_cold_summary",
        json!({
            "tool_results": results(&input).len(),
            "cleared": cleared.len(),
            "cleared_by_tool": by_tool(&input, cleared.iter().copied()),
            "tokens_before": before,
            "tokens_after": after,
        })
    );
    insta::assert_json_snapshot!("real_cold_report", report_summary(&out.report));
    assert_eq!(
        out.report.tokens_freed,
        Some(before - after),
        "o200k counts agree"
    );
    assert_eq!(out.conversation.messages.len(), input.messages.len());
    for (a, b) in input.messages.iter().zip(&out.conversation.messages) {
        assert_eq!(
            (&a.id, a.role, &a.extra, &a.envelope),
            (&b.id, b.role, &b.extra, &b.envelope)
        );
    }
}

#[test]
fn time_path_output_written_and_read_back_is_left_alone() {
    let mut doc = document();
    let input = doc.conversations()[0].clone();
    let host = host_after(&input, 120);
    let stage = stage::<Microcompact>("clear_tool_inputs = true");
    let out = run(&stage, &input, &host);
    let (before, after) = (tokens(&input), tokens(&out.conversation));
    assert_eq!(out.report.tokens_freed, Some(before - after));
    insta::assert_json_snapshot!("real_cold_inputs_report", report_summary(&out.report));
    doc.conversations_mut()[0] = out.conversation.clone();
    let written = doc.write().unwrap();
    let reread =
        condense_formats::read(&written, "written.jsonl", &ReadOptions::default()).unwrap();
    let again = run(&stage, &reread.conversations()[0], &host);
    assert_eq!(again.report.blocks_changed, 0, "{:?}", again.report.notes);
    assert_eq!(again.conversation, reread.conversations()[0]);
}

#[test]
fn one_minute_after_takes_the_cache_edit_path() {
    let input = transcript();
    let host = host_after(&input, 1);
    let out = run(&stage::<Microcompact>(HOT), &input, &host);
    assert_eq!(out.conversation, input, "messages stay byte-identical");
    assert!(
        !out.copied,
        "the cache-edit path decides through the view: no copy"
    );
    let edited: Vec<String> = host.state_json()["pinned"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["tool_use_id"].as_str().unwrap().to_string())
        .collect();
    let freed: usize = out.report.events.iter().map(|e| e.tokens).sum();
    insta::assert_json_snapshot!(
        "real_hot_summary",
        json!({
            "cache_edits": edited.len(),
            "edited_by_tool": by_tool(&input, edited.iter().map(String::as_str))
                .into_iter()
                .map(|(tool, ids)| (tool, ids.len()))
                .collect::<BTreeMap<_, _>>(),
            "tokens_freed_server_side": freed,
        })
    );
    insta::assert_json_snapshot!("real_hot_report", report_summary(&out.report));

    // Anthropic output with context_management: the token count does not move.
    let anthropic = host_after(&input, 1).with_format(Some(Format::Anthropic));
    let emit = format!("{HOT}\nemit_context_management = true");
    let out = run(&stage::<Microcompact>(&emit), &input, &anthropic);
    assert_eq!(out.conversation.messages, input.messages);
    assert!(!out.conversation.extra.is_empty());
    assert!(
        out.copied && out.changed,
        "new request fields are written in a copy"
    );
    // Sent again with the same edits: the fields it would write are already there.
    let again = run(&stage::<Microcompact>(&emit), &out.conversation, &anthropic);
    assert!(!again.copied && !again.changed, "{:?}", again.report.notes);
    assert_eq!(
        tokens(&out.conversation),
        tokens(&input),
        "request fields are not counted"
    );
    let fields = out.conversation.extra.to_value().unwrap();
    let edit = &fields["context_management"]["edits"][0];
    assert_eq!(
        edit["exclude_tools"],
        json!(["Task", "TodoWrite"]),
        "the excluded tools the session used"
    );

    // Claude Code output: not written.
    let claude_code = host_after(&input, 1);
    let out = run(&stage::<Microcompact>(&emit), &input, &claude_code);
    assert_eq!(out.conversation, input);
    assert!(!out.copied);
}
