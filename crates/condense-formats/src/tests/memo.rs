//! Writing with a [`WriteMemo`] ([`crate::memo`]): a session's request bodies written one after
//! another, each the previous one plus a turn with its long tool results cut, give exactly the
//! bytes of a plain write, in every layout a body comes in, while the memo serves the messages
//! changed as in the previous request.

use super::support::fixture;
use crate::{read, Document, ReadOptions, WriteMemo};
use condense_model::{Block, Content, Conversation, Format, Message, Role};
use serde_json::Value;

/// The real Claude Code session's user and assistant lines as one Anthropic request body: each
/// line's message, its text, tool use and tool result blocks (a request has no thinking
/// signatures of another session).
pub(super) fn session_body() -> Value {
    let bytes = fixture!(
        "transcripts/d-kimuson__claude-code-viewer/fe5e1c67-53e7-4862-81ae-d0e013e3270b.jsonl"
    );
    let kept = |b: &&Value| {
        matches!(
            b["type"].as_str(),
            Some("text" | "tool_use" | "tool_result")
        )
    };
    let messages: Vec<Value> = String::from_utf8(bytes)
        .unwrap()
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|line| matches!(line["type"].as_str(), Some("user" | "assistant")))
        .map(|line| {
            let m = &line["message"];
            let content = match &m["content"] {
                Value::Array(blocks) => Value::Array(blocks.iter().filter(kept).cloned().collect()),
                other => other.clone(),
            };
            serde_json::json!({"role": m["role"], "content": content})
        })
        .collect();
    // A frame as Claude Code and the SDKs send it, some of it after the messages: a system
    // prompt of blocks, tool definitions, metadata.
    serde_json::json!({
        "model": "claude-sonnet-4-5",
        "max_tokens": 8192,
        "messages": messages,
        "system": [
            {"type": "text", "text": "You are Claude Code.\nFollow the conventions."},
            {"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}
        ],
        "tools": [
            {"name": "Read", "description": "Reads a file", "input_schema": {"type": "object"}},
            {"name": "Bash", "description": "Runs \"sh\"", "input_schema": {"type": "object"}}
        ],
        "metadata": {"user_id": "user_1_account__session_7"},
        "stream": true
    })
}

/// `value` as written with Python's separators (`", "`, `": "`).
fn python_style(value: &Value) -> Vec<u8> {
    struct Spaced;
    impl serde_json::ser::Formatter for Spaced {
        fn begin_array_value<W: ?Sized + std::io::Write>(
            &mut self,
            w: &mut W,
            first: bool,
        ) -> std::io::Result<()> {
            if first {
                Ok(())
            } else {
                w.write_all(b", ")
            }
        }
        fn begin_object_key<W: ?Sized + std::io::Write>(
            &mut self,
            w: &mut W,
            first: bool,
        ) -> std::io::Result<()> {
            self.begin_array_value(w, first)
        }
        fn begin_object_value<W: ?Sized + std::io::Write>(
            &mut self,
            w: &mut W,
        ) -> std::io::Result<()> {
            w.write_all(b": ")
        }
    }
    let mut out = Vec::new();
    let mut ser = serde_json::Serializer::with_formatter(&mut out, Spaced);
    serde::Serialize::serialize(value, &mut ser).unwrap();
    out
}

/// The body with its first `n` messages, in each layout: compact, Python's separators, pretty
/// (two spaces), pretty with CRLF line ends.
pub(super) fn layouts(whole: &Value, n: usize) -> Vec<(&'static str, Vec<u8>)> {
    let mut body = whole.clone();
    let messages = body["messages"].as_array_mut().unwrap();
    messages.truncate(n);
    let pretty = serde_json::to_vec_pretty(&body).unwrap();
    let crlf = String::from_utf8(pretty.clone())
        .unwrap()
        .replace('\n', "\r\n");
    vec![
        ("compact", serde_json::to_vec(&body).unwrap()),
        ("python", python_style(&body)),
        ("pretty", pretty),
        ("crlf", crlf.into_bytes()),
    ]
}

/// What a pipeline does to a request, roughly: every tool result over 1,000 bytes cut to its
/// first 200 characters, and the messages before the last 20 replaced by one summary.
pub(super) fn compress(conv: &mut Conversation) {
    for r in conv.tool_results_mut() {
        let text = r.result.content.text();
        if text.len() > 1000 {
            let head: String = text.chars().take(200).collect();
            r.result.content = Content::string(format!("{head}\n[... cut ...]"));
        }
    }
    let n = conv.messages.len();
    if n > 40 {
        let summary = Message::new(
            "collapse-0",
            Role::User,
            vec![Block::text(format!(
                "[condense: summary of {} messages]",
                n - 20
            ))],
        );
        conv.messages.splice(..n - 20, [summary]);
    }
}

fn written(bytes: &[u8], memo: Option<&mut WriteMemo>) -> (Document, Vec<u8>) {
    let anthropic = ReadOptions {
        format: Some(Format::Anthropic),
        ..Default::default()
    };
    let mut doc = read(bytes, "body.json", &anthropic).unwrap();
    compress(&mut doc.conversations_mut()[0]);
    let out = match memo {
        Some(memo) => doc.write_remembering(memo).unwrap().into_bytes(),
        None => doc.write().unwrap(),
    };
    (doc, out)
}

#[test]
fn a_growing_session_writes_the_same_bytes_with_a_memo_that_serves_what_it_kept() {
    let whole = session_body();
    let total = whole["messages"].as_array().unwrap().len();
    assert!(total > 100, "the session has {total} messages");
    // The ids of the messages holding a cut result: changed the same way in the next request
    // while they are among its last 20 messages.
    let cut = |doc: &Document| -> std::collections::HashSet<String> {
        doc.conversations()[0]
            .messages
            .iter()
            .filter(|m| m.content.text().contains("[... cut ...]"))
            .map(|m| m.id.clone())
            .collect()
    };
    for layout in 0..4 {
        let mut memo = WriteMemo::new();
        let mut previous = std::collections::HashSet::new();
        let mut served = 0;
        for n in (total - 120..=total).step_by(8) {
            let (name, bytes) = layouts(&whole, n).swap_remove(layout);
            let (_, plain) = written(&bytes, None);
            let hits = memo.hits;
            let (doc, remembered) = written(&bytes, Some(&mut memo));
            assert!(
                plain != bytes,
                "{name} at {n}: the pipeline changed nothing"
            );
            assert!(
                remembered == plain,
                "{name} at {n} messages: not the plain write's bytes"
            );
            // Every message cut in the previous request too came from the memo.
            let now = cut(&doc);
            let again = now.intersection(&previous).count();
            assert!(
                memo.hits - hits >= again,
                "{name} at {n}: {} of {again} served",
                memo.hits - hits
            );
            served += again;
            // What the memo keeps is this write's changed messages: no more than it has.
            assert!(memo.len() <= 21, "{name} at {n}: {} texts kept", memo.len());
            previous = now;
        }
        assert!(served > 10, "{served} messages served by the memo");
    }
}

#[test]
fn numbers_are_spelled_as_read_and_a_message_of_several_items_is_kept_whole() {
    // An Anthropic message with a number spelled `1e5`, changed in another block.
    let body = br#"{"model": "m", "messages": [{"role": "user", "content": "go"}, {"role": "assistant", "content": [{"type": "text", "text": "running"}, {"type": "tool_use", "id": "t1", "name": "Bash", "input": {"timeout": 1e5, "n": -0.0}}]}]}"#;
    let change = |doc: &mut Document| {
        let m = &mut doc.conversations_mut()[0].messages[1];
        m.content.blocks[0] = Block::text("running it");
    };
    let mut memo = WriteMemo::new();
    for round in 0..3 {
        let mut doc = read(body, "body.json", &ReadOptions::default()).unwrap();
        change(&mut doc);
        let plain = doc.write().unwrap();
        let remembered = doc.write_remembering(&mut memo).unwrap();
        assert_eq!(*remembered, *plain, "round {round}");
        let text = String::from_utf8(plain).unwrap();
        assert!(text.contains("1e5") && text.contains("-0.0"), "{text}");
        assert_eq!(memo.hits, round);
    }

    // An OpenAI Responses body: an assistant's text and its function call are one message
    // written as two items.
    let body = br#"{"model": "m", "input": [{"type": "message", "role": "user", "content": "go"}, {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "calling"}]}, {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"}, {"type": "function_call_output", "call_id": "c1", "output": "a long output"}]}"#;
    let responses = ReadOptions {
        format: Some(Format::Responses),
        ..Default::default()
    };
    let mut memo = WriteMemo::new();
    for round in 0..3 {
        let mut doc = read(body, "body.json", &responses).unwrap();
        for m in &mut doc.conversations_mut()[0].messages {
            if let Some(Block::Text(t)) = m.content.blocks.first_mut() {
                t.text.push_str(" (changed)");
            }
        }
        let plain = doc.write().unwrap();
        assert!(plain.as_slice() != body.as_slice());
        assert_eq!(
            doc.write_remembering(&mut memo).unwrap().into_bytes(),
            plain,
            "round {round}"
        );
        assert!(memo.hits >= round, "round {round}: {} hits", memo.hits);
    }
}

#[test]
fn a_memo_keeps_only_what_the_last_write_used_and_forgets_another_style() {
    let whole = session_body();
    let mut memo = WriteMemo::new();
    let (_, bytes) = layouts(&whole, 120).swap_remove(0);
    written(&bytes, Some(&mut memo));
    let full = memo.len();
    assert!(full > 0);
    // A shorter request whose changed messages are fewer: the others are dropped.
    let (_, bytes) = layouts(&whole, 30).swap_remove(0);
    written(&bytes, Some(&mut memo));
    assert!(memo.len() < full, "{} of {full} kept", memo.len());
    // Another style: what was written in the first is not used.
    let hits = memo.hits;
    let (_, pretty) = layouts(&whole, 30).swap_remove(2);
    let (_, plain) = written(&pretty, None);
    let (_, out) = written(&pretty, Some(&mut memo));
    assert_eq!(out, plain);
    assert_eq!(memo.hits, hits);
}

/// A caller's fingerprints of the messages as they are now ([`Document::vouch_fingerprints`]):
/// the writer takes texts by them, so the right ones write what it would have made itself; a
/// count that is not the conversation's, or any later change, leaves them unused.
#[test]
fn vouched_fingerprints_are_what_the_writer_looks_texts_up_by() {
    let body = serde_json::to_vec(&session_body()).unwrap();
    let read_it = || read(&body, "in.json", &ReadOptions::default()).unwrap();
    let mut doc = read_it();
    // A change, so that the writer matches each message to its text.
    doc.conversations_mut()[0].messages.truncate(40);
    let own = doc.write().unwrap();
    let prints: Vec<u128> = doc.conversations()[0]
        .messages
        .iter()
        .map(condense_model::fingerprint::fingerprint)
        .collect();
    doc.vouch_fingerprints(0, prints.clone());
    assert!(doc.write().unwrap() == own, "the right ones write the same");
    // Swapped: the writer takes the texts they name, so they must be the messages' own.
    let mut swapped = prints.clone();
    swapped.swap(0, 2);
    doc.vouch_fingerprints(0, swapped.clone());
    assert!(doc.write().unwrap() != own, "they are used");
    // One too few, or vouched before a change: not used.
    doc.vouch_fingerprints(0, swapped[1..].to_vec());
    assert!(doc.write().unwrap() == own, "one too few");
    doc.vouch_fingerprints(0, swapped);
    doc.conversations_mut()[0].messages.truncate(40);
    assert!(doc.write().unwrap() == own, "changed after");
}
