//! Claude Code lines read from their text (`claude_code::line`) against the same lines read
//! from their trees: the same messages, facts, usage and errors, on real sessions and on lines
//! made to take every turn of the reader.

use super::support::fixture;
use crate::claude_code::{parse_line, read, Line};
use crate::error::Ctx;
use crate::lines;
use condense_model::Conversation;
use serde_json::{json, Value};
use std::sync::Arc;

/// The session read with its compact lines read light (as the reader does), and with every
/// line's tree; and how many lines were compact. The light read is made twice, its events'
/// lines copied and taken as pieces of the text shared: both must read the same.
fn both_ways(text: &str) -> (Result<String, String>, Result<String, String>, usize) {
    let ctx = Ctx::new("s.jsonl");
    let show = |read: crate::json::Result<(Conversation, Option<crate::ReportedUsage>, _)>| {
        read.map(|(conv, usage, _)| format!("{conv:#?}\n{usage:?}"))
            .map_err(|e| e.to_string())
    };
    let shared = Arc::new(text.to_string());
    let light = lines::parse_with(&shared, &ctx, parse_line).unwrap();
    let compact = light
        .values
        .iter()
        .filter(|(_, l)| matches!(l, Line::Compact(_)))
        .count();
    let texts: Vec<&str> = light.spans.iter().map(|s| &light.body[s.clone()]).collect();
    let again = lines::parse_with(&shared, &ctx, parse_line).unwrap();
    let copied = show(read(again.values, (&texts, None), &ctx));
    let light = show(read(light.values, (&texts, Some(&shared)), &ctx));
    assert_eq!(light, copied);
    let tree = lines::parse(text, &ctx).unwrap().map(Line::Tree);
    let texts: Vec<&str> = tree.spans.iter().map(|s| &tree.body[s.clone()]).collect();
    let tree = show(read(tree.values, (&texts, None), &ctx));
    (light, tree, compact)
}

#[test]
fn events_keep_their_lines_as_pieces_of_the_text_read() {
    let bytes = fixture!(
        "transcripts/d-kimuson__claude-code-viewer/fe5e1c67-53e7-4862-81ae-d0e013e3270b.jsonl"
    );
    let opts = crate::ReadOptions::default();
    let shared = crate::read_owned(bytes.clone(), "s.jsonl", &opts).unwrap();
    let copied = crate::read(&bytes, "s.jsonl", &opts).unwrap();
    let events = shared.conversations()[0]
        .messages
        .iter()
        .filter(|m| m.role == condense_model::Role::Event)
        .count();
    assert!(events > 10, "{events} events");
    // The document holds its text once more for each event whose line it kept as a piece of
    // it; the read of borrowed bytes copies them.
    assert!(Arc::strong_count(&shared.source.text) > events / 2);
    assert_eq!(Arc::strong_count(&copied.source.text), 1);
    // The same messages, the same fingerprints (kept in stores), the same output.
    assert_eq!(shared.conversations(), copied.conversations());
    assert_eq!(
        shared.message_fingerprints(0),
        copied.message_fingerprints(0)
    );
    assert_eq!(shared.write().unwrap(), bytes);
    // A text the document cuts (an incomplete last line, a session still being written) reads
    // the same, and its output keeps the cut line.
    let mut cut = bytes.clone();
    cut.extend_from_slice(br#"{"type":"user","mess"#);
    let doc = crate::read_owned(cut.clone(), "s.jsonl", &opts).unwrap();
    assert_eq!(doc.conversations(), copied.conversations());
    assert_eq!(doc.write().unwrap(), cut);
}

fn jsonl(lines: &[Value]) -> String {
    lines.iter().map(|l| format!("{l}\n")).collect()
}

#[test]
fn real_sessions_read_the_same_from_their_text() {
    for bytes in [
        fixture!(
            "transcripts/d-kimuson__claude-code-viewer/fe5e1c67-53e7-4862-81ae-d0e013e3270b.jsonl"
        ),
        fixture!("transcripts/DRMacIver__claude-reliability/transcript.jsonl"),
        fixture!("edge/claude_code_session.jsonl"),
    ] {
        let text = String::from_utf8(bytes).unwrap();
        let (light, tree, compact) = both_ways(&text);
        assert!(light.is_ok(), "{light:?}");
        assert_eq!(light, tree);
        // Claude Code writes its lines compact: the light read is the one taken.
        let all = text.lines().filter(|l| !l.trim().is_empty()).count();
        assert!(compact * 10 >= all * 9, "{compact} of {all} lines compact");
    }
}

/// Lines that take every turn: sub-agent lines, a compaction with a preserved segment, an
/// abandoned branch, parallel tool results (one block `tool_use_id` first, as Claude Code
/// writes them), an escaped uuid, a line that is not compact, a message on a system line, a
/// user message of another role, a message that is a string, a synthetic assistant line, and
/// a `toolUseResult` the read never parses.
#[test]
fn every_kind_of_line_reads_the_same_from_its_text() {
    let chat = |uuid: &str, parent: Value, kind: &str, content: Value| {
        json!({"parentUuid": parent, "isSidechain": false, "type": kind, "uuid": uuid,
            "timestamp": "2026-01-01T00:00:00Z", "message": {"role": kind, "content": content}})
    };
    let mut assistant = chat(
        "a1",
        json!("u1"),
        "assistant",
        json!([{"type": "tool_use", "id": "t1", "name": "Read", "input": {"file_path": "a.rs"}},
               {"type": "tool_use", "id": "t2", "name": "Read", "input": {"file_path": "b.rs"}}]),
    );
    assistant["message"] = json!({"id": "msg_1", "type": "message", "role": "assistant",
        "model": "claude-sonnet-4-5", "content": assistant["message"]["content"].clone(),
        "usage": {"input_tokens": 9, "output_tokens": 2}});
    let mut result1 = chat(
        "r1",
        json!("a1"),
        "user",
        json!([{"tool_use_id": "t1", "type": "tool_result", "content": "fn a() {}\n\"quoted\""}]),
    );
    result1["toolUseResult"] = json!({"file": {"filePath": "a.rs", "content": "fn a() {}"}});
    let result2 = chat(
        "r2",
        json!("a1"),
        "user",
        json!([{"type": "tool_result", "tool_use_id": "t2", "content": "fn b() {}"}]),
    );
    let mut synthetic = chat("a2", json!("r2"), "assistant", json!("API Error"));
    synthetic["message"]["model"] = json!("<synthetic>");
    synthetic["message"]["usage"] = json!({"input_tokens": 0});
    let mut sidechain = chat("s1", json!("a1"), "user", json!("a sub-agent's prompt"));
    sidechain["isSidechain"] = json!(true);
    let mut other_role = chat("o1", json!("a2"), "user", json!("hi"));
    other_role["message"]["role"] = json!("system");
    let mut string_message = chat("m1", json!("o1"), "user", json!("x"));
    string_message["message"] = json!("not an object");
    let mut system_message = json!({"type": "system", "uuid": "y1", "parentUuid": "m1",
        "message": {"role": "user", "content": "odd"}});
    system_message["subtype"] = json!("note");
    let session = [
        json!({"type": "summary", "summary": "earlier work", "leafUuid": "u0"}),
        chat("u0", Value::Null, "user", json!("the old question")),
        chat(
            "b0",
            json!("u0"),
            "assistant",
            json!([{"type": "text", "text": "old"}]),
        ),
        json!({"type": "system", "subtype": "compact_boundary", "uuid": "c1",
            "parentUuid": null, "compactMetadata":
            {"preservedSegment": {"headUuid": "u1", "anchorUuid": "k1"}}}),
        json!({"type": "user", "uuid": "k1", "parentUuid": "c1", "isCompactSummary": true,
            "message": {"role": "user", "content": "the summary"}}),
        chat("u1", json!("u0"), "user", json!("read a.rs and b.rs")),
        assistant,
        result1,
        result2,
        synthetic,
        sidechain,
        other_role,
        string_message,
        system_message,
        chat("u\"2", json!("m1"), "user", json!("an escaped uuid")),
        chat("u3", json!("u\"2"), "user", json!("the last ask")),
    ];
    let mut text = jsonl(&session);
    // A line that is not its own compact form (spaces, a number serde_json spells otherwise).
    text.push_str(
        r#"{"type": "user", "uuid": "u4", "parentUuid": "u3", "message": {"role": "user", "content": "spaced", "n": 1.0}}"#,
    );
    text.push('\n');
    let (light, tree, compact) = both_ways(&text);
    assert!(light.is_ok(), "{light:?}");
    assert_eq!(light, tree);
    assert_eq!(compact, session.len(), "every line but the spaced one");
    // The context: the compaction's summary, the preserved segment from u1, both parallel
    // results, and the user lines after them.
    let conv = crate::read(text.as_bytes(), "s.jsonl", &crate::ReadOptions::default()).unwrap();
    let context: Vec<&str> = conv.conversations()[0]
        .chat_messages()
        .map(|m| m.id.as_str())
        .collect();
    assert_eq!(
        context,
        ["k1", "u1", "a1", "r1", "r2", "a2", "u\"2", "u3", "u4"]
    );
    assert_eq!(conv.reported_usage(0).unwrap().input_tokens, 9);
}

#[test]
fn a_line_the_reader_refuses_fails_the_same_from_its_text() {
    let good = json!({"type": "user", "uuid": "u1", "parentUuid": null,
        "message": {"role": "user", "content": "hi"}});
    for bad in [
        json!({"type": "user", "uuid": "u2", "parentUuid": "u1",
            "message": {"role": "user", "content": 5}}),
        json!({"type": 7, "uuid": "u2", "parentUuid": "u1",
            "message": {"role": "user", "content": "hi"}}),
        json!({"type": "assistant", "uuid": "u2", "parentUuid": "u1",
            "message": {"role": "assistant", "content": [{"type": "tool_use", "id": 3}]}}),
    ] {
        let (light, tree, _) = both_ways(&jsonl(&[good.clone(), bad]));
        assert!(light.is_err(), "{light:?}");
        assert_eq!(light, tree);
    }
}

/// The light read is taken for the lines Claude Code writes, and left for the rare ones.
#[test]
fn the_light_read_is_taken_where_it_can_be() {
    let ctx = Ctx::new("s.jsonl");
    let light = |line: Value| {
        let text = line.to_string();
        let members = condense_model::RawJson::canonical_members(&text).unwrap();
        crate::claude_code::line::read_compact(&members, &text, &ctx).is_some()
    };
    let message = json!({"role": "user", "content":
        [{"tool_use_id": "t1", "type": "tool_result", "content": "ok"}]});
    assert!(light(
        json!({"type": "user", "uuid": "u1", "message": message,
        "toolUseResult": {"stdout": "ok"}})
    ));
    assert!(light(
        json!({"type": "summary", "summary": "s", "leafUuid": "u1"})
    ));
    assert!(light(json!({"type": "assistant", "uuid": "a1", "message":
        {"id": "m", "role": "assistant", "model": "x", "content": "hi", "usage": {}}})));
    // A message on a line of another type, a type that is not a string, a message the reader
    // refuses: the tree read.
    assert!(!light(json!({"type": "system", "message": message})));
    assert!(!light(json!({"type": 7, "message": message})));
    assert!(!light(
        json!({"type": "user", "message": {"role": "user", "content": 5}})
    ));
}
