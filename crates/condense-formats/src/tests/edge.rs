//! Hand-made edge cases: round trips, and writing back what a stage changed.

use super::support::{counts, fixture, round_trip};
use crate::{read, Format, ReadOptions};
use condense_model::{Block, Content, ContentShape, Message, Role};
use serde_json::{json, Value};

fn auto() -> ReadOptions {
    ReadOptions::default()
}

fn write_value(doc: &crate::Document) -> Value {
    serde_json::from_slice(&doc.write().unwrap()).unwrap()
}

#[test]
fn edge_fixtures_round_trip() {
    let cases: [(&str, Vec<u8>, Format); 8] = [
        (
            "anthropic_body.json",
            fixture!("edge/anthropic_body.json"),
            Format::Anthropic,
        ),
        (
            "anthropic_list.json",
            fixture!("edge/anthropic_list.json"),
            Format::Anthropic,
        ),
        (
            "openai_body.json",
            fixture!("edge/openai_body.json"),
            Format::OpenAi,
        ),
        (
            "openai_compact.json",
            fixture!("edge/openai_compact.json"),
            Format::OpenAi,
        ),
        (
            "claude_code_session.jsonl",
            fixture!("edge/claude_code_session.jsonl"),
            Format::ClaudeCode,
        ),
        (
            "openhands_events.json",
            fixture!("edge/openhands_events.json"),
            Format::OpenHands,
        ),
        (
            "responses_request.json",
            fixture!("edge/responses_request.json"),
            Format::Responses,
        ),
        (
            "cline_api_conversation_history.json",
            fixture!("edge/cline_api_conversation_history.json"),
            Format::Cline,
        ),
    ];
    for (name, bytes, format) in cases {
        let doc = round_trip(&bytes, name, &auto());
        assert_eq!(doc.format(), format, "{name}");
    }
}

#[test]
fn layout_is_kept_byte_for_byte_where_the_model_keeps_key_order() {
    // Compact JSON with a trailing newline comes back identical.
    let bytes = fixture!("edge/openai_compact.json");
    assert_eq!(
        read(&bytes, "c.json", &auto()).unwrap().write().unwrap(),
        bytes
    );
    // Four-space indent is detected.
    let out = read(&fixture!("edge/openai_body.json"), "o.json", &auto())
        .unwrap()
        .write()
        .unwrap();
    assert!(String::from_utf8(out)
        .unwrap()
        .starts_with("{\n    \"model\": \"gpt-4o\",\n"));
    // A JSONL file without a trailing newline stays without one.
    let session = fixture!("edge/claude_code_session.jsonl");
    let trimmed = &session[..session.len() - 1];
    let out = read(trimmed, "s.jsonl", &auto()).unwrap().write().unwrap();
    assert_eq!(out.last(), Some(&b'}'));
    // Top-level keys keep their order.
    let bytes = br#"{"z":1,"messages":[],"a":2}"#;
    let out = read(bytes, "x.json", &auto()).unwrap().write().unwrap();
    assert_eq!(out, bytes);
}

#[test]
fn huge_tool_result_round_trips() {
    let big: String = "0123456789abcdef\n".repeat(64 * 1024); // ~1.1 MB
    let line1 = json!({"type": "assistant", "uuid": "a", "sessionId": "s", "message": {"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "Bash", "input": {"command": "cat big"}}]}});
    let line2 = json!({"type": "user", "uuid": "b", "sessionId": "s", "message": {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": big}]}, "toolUseResult": {"stdout": big}});
    let bytes = format!("{line1}\n{line2}\n").into_bytes();
    assert!(bytes.len() > 2_000_000);
    let doc = round_trip(&bytes, "big.jsonl", &auto());
    let tr = doc.conversations()[0].messages[1]
        .tool_results()
        .next()
        .unwrap();
    assert_eq!(tr.content.text_len(), big.len());
}

#[test]
fn crlf_jsonl_and_blank_lines_read() {
    let bytes = b"{\"type\":\"user\",\"uuid\":\"a\",\"message\":{\"role\":\"user\",\"content\":\"hi\"}}\r\n\r\n{\"type\":\"summary\",\"summary\":\"s\"}\r\n";
    let doc = round_trip(bytes, "crlf.jsonl", &auto());
    assert_eq!(doc.conversations()[0].messages.len(), 2);
}

#[test]
fn developer_role_and_tool_call_ids_round_trip() {
    let bytes = br#"{"messages":[{"role":"developer","content":"d"},{"role":"tool","tool_call_ids":["x"],"content":"r"}]}"#;
    let doc = read(bytes, "d.json", &auto()).unwrap();
    assert_eq!(doc.conversations()[0].messages[0].role, Role::System);
    let v = write_value(&doc);
    assert_eq!(v["messages"][0]["role"], "developer");
    assert!(v["messages"][1].get("tool_call_id").is_none());
}

#[test]
fn stage_edits_are_written_back_in_every_format() {
    // Anthropic: shorten a tool result; the string shape is kept.
    let mut doc = read(&fixture!("edge/anthropic_list.json"), "l.json", &auto()).unwrap();
    if let Block::ToolResult(tr) = &mut doc.conversations_mut()[0].messages[2].content.blocks[0] {
        tr.content = Content::string("[elided]");
    }
    assert_eq!(write_value(&doc)[2]["content"][0]["content"], "[elided]");

    // Claude Code: the uuid/timestamp stay in place, the message is rewritten (line 10, a
    // message after the compaction: the lines before it are events).
    let mut doc = read(
        &fixture!("edge/claude_code_session.jsonl"),
        "s.jsonl",
        &auto(),
    )
    .unwrap();
    let msg = &mut doc.conversations_mut()[0].messages[9];
    assert_eq!(msg.role, Role::Assistant);
    msg.content = Content::string("short");
    msg.timestamp = Some("2030-01-01T00:00:00Z".into());
    let out = String::from_utf8(doc.write().unwrap()).unwrap();
    let line: Value = serde_json::from_str(out.lines().nth(9).unwrap()).unwrap();
    assert_eq!(line["message"]["content"], "short");
    assert_eq!(line["timestamp"], "2030-01-01T00:00:00Z");
    let keys: Vec<&String> = line.as_object().unwrap().keys().collect();
    assert_eq!(keys, ["type", "sessionId", "message", "uuid", "timestamp"]);

    // OpenHands: the observation content and the duplicated `message` follow the model.
    let mut doc = read(&fixture!("edge/openhands_events.json"), "e.json", &auto()).unwrap();
    let conv = &mut doc.conversations_mut()[0];
    conv.messages[1].content = Content::string("Fix it");
    if let Block::ToolResult(tr) = &mut conv.messages[4].content.blocks[0] {
        tr.content = Content::string("[2 files]");
    }
    let v = write_value(&doc);
    assert_eq!(v[1]["args"]["content"], "Fix it");
    assert_eq!(v[1]["message"], "Fix it");
    assert_eq!(v[4]["content"], "[2 files]");
    assert_eq!(v[7]["message"], "Different display text");

    // OpenAI: a non-plain edit of string content falls back to parts.
    let mut doc = read(&fixture!("edge/openai_compact.json"), "c.json", &auto()).unwrap();
    doc.conversations_mut()[0].messages[0]
        .content
        .blocks
        .push(Block::text("more"));
    let v = write_value(&doc);
    assert_eq!(
        v["messages"][0]["content"][1],
        json!({"type": "text", "text": "more"})
    );
}

#[test]
fn messages_a_stage_created_are_written_plausibly() {
    let new = |role| Message::new("new-1", role, vec![Block::text("summary of earlier turns")]);

    let mut doc = read(
        &fixture!("edge/claude_code_session.jsonl"),
        "s.jsonl",
        &auto(),
    )
    .unwrap();
    // A message after the compaction (the lines before it are events).
    doc.conversations_mut()[0].messages[8] = new(Role::User);
    let out = doc.write().unwrap();
    let again = read(&out, "s.jsonl", &auto()).unwrap();
    let msg = &again.conversations()[0].messages[8];
    assert_eq!((msg.id.as_str(), msg.role), ("new-1", Role::User));
    assert_eq!(msg.content.text(), "summary of earlier turns");

    let mut doc = read(&fixture!("edge/openhands_events.json"), "e.json", &auto()).unwrap();
    doc.conversations_mut()[0].messages[1] = new(Role::User);
    let again = read(&doc.write().unwrap(), "e.json", &auto()).unwrap();
    let msg = &again.conversations()[0].messages[1];
    assert_eq!(msg.role, Role::User);
    assert_eq!(msg.content.text(), "summary of earlier turns");

    let mut doc = read(&fixture!("edge/openai_body.json"), "o.json", &auto()).unwrap();
    let mut msg = new(Role::User);
    msg.content.shape = ContentShape::String;
    doc.conversations_mut()[0].messages[0] = msg;
    let v = write_value(&doc);
    assert_eq!(
        v["messages"][0],
        json!({"role": "user", "content": "summary of earlier turns"})
    );
}

#[test]
fn unrepresentable_edits_are_errors_not_silent_loss() {
    let mut doc = read(&fixture!("edge/anthropic_list.json"), "l.json", &auto()).unwrap();
    doc.conversations_mut()[0].extra = condense_model::RawJson::from_value(&json!({"model": "x"}));
    let err = doc.write().unwrap_err().to_string();
    assert!(err.contains("bare message list"), "{err}");

    let mut doc = read(&fixture!("edge/openhands_events.json"), "e.json", &auto()).unwrap();
    doc.conversations_mut()[0].messages[3]
        .content
        .blocks
        .push(Block::text("extra"));
    let err = doc.write().unwrap_err().to_string();
    assert!(err.starts_with("cannot write message oh-3:"), "{err}");

    let mut doc = read(&fixture!("edge/openai_compact.json"), "c.json", &auto()).unwrap();
    doc.conversations_mut()[0].messages[0].extra =
        condense_model::RawJson::from_string_unchecked("{broken".into());
    let err = doc.write().unwrap_err().to_string();
    assert!(err.starts_with("cannot write message #0:"), "{err}");
}

#[test]
fn single_line_claude_code_and_one_element_lists() {
    let bytes =
        br#"{"type":"user","sessionId":"s","uuid":"u","message":{"role":"user","content":"hi"}}"#;
    let doc = round_trip(bytes, "one.json", &auto());
    assert_eq!(doc.format(), Format::ClaudeCode);

    let bytes = br#"[{"task_id":0,"traj":[{"role":"user","content":"hi"}]}]"#;
    let doc = round_trip(bytes, "tau.json", &auto());
    assert_eq!(doc.conversations().len(), 1);
    assert_eq!(doc.labels(), vec![String::new()]);
}

#[test]
fn list_of_request_bodies_and_selected_body() {
    let bytes = br#"[{"model":"a","messages":[{"role":"user","content":"x"}]},{"model":"b","messages":[]}]"#;
    let doc = round_trip(bytes, "bodies.json", &auto());
    assert_eq!(doc.labels(), vec!["/0", "/1"]);
    assert!(doc.conversations()[0].extra.as_str().contains("\"a\""));

    let bytes =
        br#"{"request":{"system":"s","messages":[{"role":"user","content":"x"}]},"other":1}"#;
    let opts = ReadOptions {
        format: None,
        select: Some("/request".into()),
    };
    let doc = round_trip(bytes, "wrapped.json", &opts);
    assert_eq!(doc.format(), Format::Anthropic);
    assert!(doc.conversations()[0].system.is_some());
}

#[test]
fn select_with_escaped_keys_and_star_over_objects() {
    let bytes = br#"{"a/b":{"x":{"msgs":[{"role":"user","content":"1"}]},"y":{"msgs":[{"role":"user","content":"2"}]}}}"#;
    let opts = ReadOptions {
        format: Some(Format::OpenAi),
        select: Some("/a~1b/*/msgs".into()),
    };
    let doc = round_trip(bytes, "esc.json", &opts);
    assert_eq!(doc.labels(), vec!["/a~1b/x/msgs", "/a~1b/y/msgs"]);
    assert_eq!(counts(doc.conversations()).messages, 2);
}

#[test]
fn format_names() {
    for f in Format::ALL {
        assert_eq!(f.as_str().parse::<Format>().unwrap(), f);
        assert_eq!(f.to_string(), f.as_str());
    }
    assert_eq!("OpenAI".parse::<Format>().unwrap(), Format::OpenAi);
    assert_eq!(
        crate::detect(&fixture!("edge/anthropic_list.json"), "l.json").unwrap(),
        Format::Anthropic
    );
}

#[test]
fn byte_order_mark_and_odd_names() {
    let mut bytes = "\u{feff}".as_bytes().to_vec();
    bytes.extend_from_slice(&fixture!("edge/openai_compact.json"));
    let doc = read(&bytes, "bom.json", &auto()).unwrap();
    assert_eq!(doc.write().unwrap(), bytes);

    // A pretty JSON file with a .jsonl name is still read as JSON.
    let bytes = fixture!("edge/anthropic_list.json");
    let doc = round_trip(&bytes, "misnamed.jsonl", &auto());
    assert_eq!(doc.format(), Format::Anthropic);
}

#[test]
fn owned_bytes_read_as_borrowed_ones() {
    let mut bom = "\u{feff}".as_bytes().to_vec();
    bom.extend_from_slice(&fixture!("edge/openai_compact.json"));
    // A session still being written: its last line, cut inside a character, is the tail.
    let session = b"{\"type\":\"user\",\"uuid\":\"u1\",\"parentUuid\":null,\"sessionId\":\"s\",\
        \"message\":{\"role\":\"user\",\"content\":\"hi\"}}\n{\"type\":\"assistant\",\"uuid\":\"a\xc3"
        .to_vec();
    for (bytes, name) in [(bom, "bom.json"), (session, "s.jsonl")] {
        let borrowed = read(&bytes, name, &auto()).unwrap();
        let mut owned = crate::read_owned(bytes.clone(), name, &auto()).unwrap();
        assert_eq!(owned.conversations(), borrowed.conversations(), "{name}");
        assert_eq!(owned.write().unwrap(), bytes, "{name}");
        let first = borrowed.conversations()[0].messages[0].clone();
        assert!(owned.original_text(0, &first).is_some(), "{name}");
        assert_eq!(
            owned.original_text(0, &first),
            borrowed.original_text(0, &first)
        );
        // Changed after reading: the unchanged text is still matched to the message as read.
        owned.conversations_mut()[0].messages[0].content = Content::string("changed");
        let out = String::from_utf8_lossy(&owned.write().unwrap()).into_owned();
        assert!(out.contains("changed"), "{name}: {out}");
        assert_eq!(
            owned.original_text(0, &first),
            borrowed.original_text(0, &first)
        );
    }
}

#[test]
fn claude_code_session_starting_with_many_summaries() {
    let mut text = String::new();
    for i in 0..7 {
        text.push_str(&format!(
            "{{\"type\":\"summary\",\"summary\":\"s{i}\",\"leafUuid\":\"l{i}\"}}\n"
        ));
    }
    text.push_str("{\"type\":\"user\",\"uuid\":\"u\",\"sessionId\":\"s\",\"message\":{\"role\":\"user\",\"content\":\"hi\"}}\n");
    let doc = round_trip(text.as_bytes(), "s.jsonl", &auto());
    assert_eq!(doc.format(), Format::ClaudeCode);
    let c = counts(doc.conversations());
    assert_eq!((c.messages, c.events), (1, 7));
}

#[test]
fn python_style_ascii_escapes_are_kept() {
    let bytes = br#"{"messages": [{"role": "user", "content": "caf\u00e9 \ud83e\udd80"}]}"#;
    let mut doc = read(bytes, "p.json", &auto()).unwrap();
    assert_eq!(doc.conversations()[0].messages[0].content.text(), "café 🦀");
    // Unchanged: the bytes read, Python's separators included.
    assert_eq!(doc.write().unwrap(), bytes);
    // Changed: serialized in the input's style (separators and escaping).
    doc.conversations_mut()[0].messages[0].content = Content::string("naïve");
    assert_eq!(
        doc.write().unwrap(),
        br#"{"messages": [{"role": "user", "content": "na\u00efve"}]}"#
    );
    // Input with raw UTF-8 is written with raw UTF-8.
    let bytes = "{\"messages\":[{\"role\":\"user\",\"content\":\"café\"}]}".as_bytes();
    assert_eq!(
        read(bytes, "u.json", &auto()).unwrap().write().unwrap(),
        bytes
    );
}

/// Each message's fingerprint as read, made once per document: the same as hashing the message,
/// still the as-read ones after the conversation was taken out to be changed.
#[test]
fn message_fingerprints_are_those_of_the_messages_as_read() {
    let bytes = fixture!("edge/openai_compact.json");
    let mut doc = read(&bytes, "c.json", &auto()).unwrap();
    let as_read: Vec<u128> = doc.conversations()[0]
        .messages
        .iter()
        .map(condense_model::fingerprint::fingerprint)
        .collect();
    assert!(as_read.len() > 1);
    let taken = std::mem::take(&mut doc.conversations_mut()[0]);
    assert_eq!(taken.messages.len(), as_read.len());
    assert_eq!(doc.message_fingerprints(0), Some(as_read.as_slice()));
    assert_eq!(doc.message_fingerprints(1), None);
}

/// Two lines that read as the same message from different texts (one spells `h` as `\u0068`;
/// their parent is not in the file, so both are the context): by value the first text is
/// found; at its place, each line's own.
#[test]
fn value_equal_messages_from_different_texts_are_told_apart_by_place() {
    let one = r#"{"type":"user","uuid":"u1","parentUuid":"p0","slug":"hedgehog","message":{"role":"user","content":"hi"}}"#;
    let two = one.replace("hedgehog", r"hedge\u0068og");
    let bytes = format!("{one}\n{two}\n").into_bytes();
    let doc = read(&bytes, "s.jsonl", &auto()).unwrap();
    let messages = &doc.conversations()[0].messages;
    assert_eq!(messages[0], messages[1], "value-equal");
    assert_eq!(doc.original_text(0, &messages[1]).as_deref(), Some(one));
    assert_eq!(
        doc.original_text_at(0, &messages[0], 0).as_deref(),
        Some(one)
    );
    assert_eq!(
        doc.original_text_at(0, &messages[1], 1).as_deref(),
        Some(two.as_str())
    );
    // A place where another message stands: the first, as by value.
    assert_eq!(
        doc.original_text_at(0, &messages[1], 7).as_deref(),
        Some(one)
    );
}
