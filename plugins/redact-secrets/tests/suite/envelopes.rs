//! The raw JSON the formats keep verbatim: message envelopes (Claude Code's `toolUseResult`
//! copy of each tool result, whole OpenHands events) and the `extra` fields of the
//! conversation, messages and blocks. Files are read and written back with `condense-formats`:
//! the written file holds no fragment of a secret, and differs from the input only where a
//! secret was.

use crate::support::{rand, ALNUM, BASE64};
use condense_formats::{Document, ReadOptions};
use condense_model::{Block, Conversation, Message, RawJson, Role, TextBlock, ThinkingBlock};
use condense_testing::{run, stage, MemoryHost};
use redact_secrets::RedactSecrets;
use serde_json::{json, Value};

fn ghp(seed: u64) -> String {
    format!("ghp_{}", rand(seed, 36, ALNUM))
}

const GHP: &str = "[REDACTED:github-token]";

fn jsonl(lines: &[Value]) -> String {
    lines.iter().map(|l| format!("{l}\n")).collect()
}

fn read(text: &str, name: &str) -> Document {
    condense_formats::read(text.as_bytes(), name, &ReadOptions::default()).unwrap()
}

/// Runs the stage over every conversation of `doc`; returns the written file and the events
/// as `message_id detail tokens`.
fn redact_doc(stage: &RedactSecrets, doc: &mut Document) -> (String, Vec<String>) {
    let mut events = Vec::new();
    for conv in doc.conversations_mut() {
        let out = run(stage, conv, &MemoryHost::default());
        for e in &out.report.events {
            events.push(format!("{} {} {}", e.message_id, e.detail, e.tokens));
        }
        *conv = out.conversation;
    }
    (String::from_utf8(doc.write().unwrap()).unwrap(), events)
}

/// No 8-character piece of `secret` appears in `text`.
fn assert_no_fragment(text: &str, secret: &str) {
    let chars: Vec<char> = secret.chars().collect();
    for piece in chars.windows(8) {
        let piece: String = piece.iter().collect();
        assert!(!text.contains(&piece), "leaks {piece:?}:\n{text}");
    }
}

/// A Claude Code session: a `summary` event line, a prompt, a `cat .env` call, and its result,
/// whose line keeps a second copy of the output in `toolUseResult`.
fn claude_code_session(token: &str) -> String {
    let wrapper = |kind: &str, uuid: &str, parent: Value| {
        json!({
            "parentUuid": parent, "isSidechain": false, "userType": "external",
            "cwd": "/home/dev/shop", "sessionId": "6f1c2d9e-0b7a-4c55-9d3e-2a8f4b1c7e60",
            "version": "2.1.12", "gitBranch": "main", "type": kind, "message": null,
            "uuid": uuid, "timestamp": "2026-01-20T13:17:49.858Z"
        })
    };
    let with = |mut line: Value, key: &str, value: Value| {
        line[key] = value;
        line
    };
    let output = format!("GITHUB_TOKEN={token}\nDEBUG=true\n");
    let prompt = with(
        wrapper("user", "u1", Value::Null),
        "message",
        json!({"role": "user", "content": "Why does the push fail?"}),
    );
    let call = with(
        wrapper("assistant", "a1", json!("u1")),
        "message",
        json!({
            "id": "msg_01", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
            "content": [{"type": "tool_use", "id": "toolu_01", "name": "Bash",
                         "input": {"command": "cat .env", "description": "Show the env file"}}],
            "stop_reason": "tool_use", "usage": {"input_tokens": 12, "output_tokens": 30}
        }),
    );
    let result = with(
        with(
            wrapper("user", "u2", json!("a1")),
            "message",
            json!({"role": "user", "content": [
                {"tool_use_id": "toolu_01", "type": "tool_result", "content": output}
            ]}),
        ),
        "toolUseResult",
        json!({"stdout": output, "stderr": "", "interrupted": false, "isImage": false}),
    );
    let summary = json!({"type": "summary", "summary": format!("Push with {token} fails"),
                         "leafUuid": "u2"});
    jsonl(&[summary, prompt, call, result])
}

#[test]
fn claude_code_tool_use_result_is_redacted_in_the_written_file() {
    let token = ghp(1);
    let input = claude_code_session(&token);
    let mut doc = read(&input, "session.jsonl");
    assert_eq!(doc.format(), condense_formats::Format::ClaudeCode);
    // The result line holds the token twice: in the message and in `toolUseResult`.
    let result = &doc.conversations()[0].messages[3];
    assert!(result.content.text().contains(&token));
    assert!(result.envelope.as_str().contains(&token));

    let (written, events) = redact_doc(&stage::<RedactSecrets>(""), &mut doc);
    assert_no_fragment(&written, &token);
    // Every other byte is as it was.
    assert_eq!(written, input.replace(&token, GHP));
    assert_eq!(written.matches(GHP).count(), 3);
    let line: Value = serde_json::from_str(written.lines().nth(3).unwrap()).unwrap();
    assert_eq!(
        line["toolUseResult"]["stdout"],
        format!("GITHUB_TOKEN={GHP}\nDEBUG=true\n")
    );
    // Envelope findings free no tokens: the model never sees them.
    assert_eq!(
        events,
        vec![
            "#0 github-token: 1 (envelope) 0",
            "u2 github-token: 1 4",
            "u2 github-token: 1 (envelope) 0",
        ]
    );
}

#[test]
fn claude_code_report() {
    let mut doc = read(&claude_code_session(&ghp(1)), "session.jsonl");
    let out = run(
        &stage::<RedactSecrets>(""),
        &doc.conversations_mut()[0],
        &MemoryHost::default(),
    );
    assert_eq!(out.report.tokens_freed, Some(4));
    assert_eq!(out.report.blocks_changed, 1);
    assert!(!out.report.archive_removed);
    insta::assert_json_snapshot!("claude_code_report", out.report);
}

/// An OpenHands output line: a user message, an `env` run, its observation (a tool result) and
/// a `recall` observation that maps to no message (an event kept whole).
fn openhands_output(token: &str) -> String {
    let metadata = |id: &str| {
        json!({
            "function_name": "execute_bash", "tool_call_id": id,
            "model_response": {"id": "gen-1746001974", "choices": [{"index": 0, "message": {
                "role": "assistant",
                "content": format!("The token {token} is set; let me check the environment.")
            }}]},
            "total_calls_in_response": 1
        })
    };
    let history = json!([
        {"id": 0, "timestamp": "2025-04-30T16:32:54.708196", "source": "user",
         "message": "Why does the push fail?", "action": "message",
         "args": {"content": "Why does the push fail?", "image_urls": null,
                  "wait_for_response": false}},
        {"id": 1, "timestamp": "2025-04-30T16:32:57.821635", "source": "agent",
         "message": "Running command: env", "action": "run",
         "tool_call_metadata": metadata("toolu_01"),
         "args": {"command": "env", "is_input": false, "thought": "", "blocking": false}},
        {"id": 2, "timestamp": "2025-04-30T16:32:58.441272", "source": "agent",
         "message": "Command `env` executed with exit code 0.", "cause": 1, "observation": "run",
         "tool_call_metadata": metadata("toolu_01"),
         "content": format!("HOME=/root\nGITHUB_TOKEN={token}\n"),
         "extras": {"command": "env", "metadata": {"exit_code": 0, "pid": -1}}},
        {"id": 3, "timestamp": "2025-04-30T16:32:59.000000", "source": "environment",
         "message": "Added workspace context", "cause": 0, "observation": "recall",
         "content": "Added workspace context",
         "extras": {"recall_type": "workspace_context",
                    "runtime_hosts": {"http://localhost:54079": 54079},
                    "additional_agent_instructions": format!("Push with GITHUB_TOKEN={token}")}}
    ]);
    format!(
        "{}\n",
        json!({"instance_id": "shop__shop-1", "history": history, "error": null})
    )
}

#[test]
fn openhands_event_envelopes_are_redacted_in_the_written_file() {
    let token = ghp(2);
    let input = openhands_output(&token);
    let mut doc = read(&input, "output.jsonl");
    assert_eq!(doc.format(), condense_formats::Format::OpenHands);
    let messages = &doc.conversations()[0].messages;
    assert_eq!(messages[3].role, Role::Event);
    assert!(messages[3].envelope.as_str().contains(&token));

    let (written, events) = redact_doc(&stage::<RedactSecrets>(""), &mut doc);
    assert_no_fragment(&written, &token);
    assert_eq!(written, input.replace(&token, GHP));
    assert_eq!(written.matches(GHP).count(), 4);
    assert_eq!(
        events,
        vec![
            "oh-1 github-token: 1 (envelope) 0",
            "oh-2 github-token: 1 4",
            "oh-2 github-token: 1 (envelope) 0",
            "oh-3 github-token: 1 (envelope) 0",
        ]
    );
}

#[test]
fn envelopes_false_leaves_them_as_they_were() {
    let token = ghp(3);
    let off = stage::<RedactSecrets>("envelopes = false");
    for (input, name) in [
        (claude_code_session(&token), "session.jsonl"),
        (openhands_output(&token), "output.jsonl"),
    ] {
        let mut doc = read(&input, name);
        let before = doc.conversations()[0].clone();
        let (written, events) = redact_doc(&off, &mut doc);
        let after = &doc.conversations()[0];
        for (a, b) in after.messages.iter().zip(&before.messages) {
            assert_eq!(a.envelope, b.envelope, "{name}");
            assert_eq!(a.extra, b.extra, "{name}");
        }
        // The content is still redacted; the envelopes keep their copies.
        assert_eq!(events.len(), 1, "{name}: {events:?}");
        assert!(events[0].ends_with("github-token: 1 4"), "{events:?}");
        assert_eq!(written.matches(GHP).count(), 1, "{name}");
        assert!(written.contains(&token), "{name}");
    }
}

#[test]
fn rerunning_changes_nothing() {
    let token = ghp(4);
    let stage = stage::<RedactSecrets>("");
    for (input, name) in [
        (claude_code_session(&token), "session.jsonl"),
        (openhands_output(&token), "output.jsonl"),
    ] {
        let doc = read(&input, name);
        let once = run(&stage, &doc.conversations()[0], &MemoryHost::default());
        assert!(!once.report.events.is_empty());
        let twice = run(&stage, &once.conversation, &MemoryHost::default());
        assert_eq!(twice.conversation, once.conversation, "{name}");
        assert!(twice.report.events.is_empty(), "{name}");
        assert_eq!(twice.report.tokens_freed, None, "{name}");
    }
}

fn raw(value: Value) -> RawJson {
    RawJson::from_value(&value)
}

/// Every `extra`: the conversation's, a message's (a labelled secret), a text block's, a
/// thinking block's, a tool result's and its nested blocks'.
fn extras_conversation(token: &str, aws_secret: &str) -> Conversation {
    let text = Block::Text(TextBlock {
        text: "see the citation".into(),
        extra: raw(json!({"citations": [{"type": "char_location", "cited_text": token}]})),
    });
    let thinking = Block::Thinking(ThinkingBlock {
        thinking: "checking".into(),
        extra: raw(json!({"signature": "c2ln", "note": token})),
    });
    let nested = Block::Text(TextBlock {
        text: "ok".into(),
        extra: raw(json!({"cache_control": {"type": "ephemeral"}, "source": token})),
    });
    let result = Block::ToolResult(condense_model::ToolResult {
        tool_use_id: "t1".into(),
        content: condense_model::Content::blocks(vec![nested]),
        is_error: None,
        extra: raw(json!({"meta": {"env": format!("GH={token}")}})),
    });
    let mut user = Message::new("m0", Role::User, vec![text, result]);
    user.extra = raw(json!({"name": "dev", "aws_secret_access_key": aws_secret}));
    Conversation {
        messages: vec![user, Message::new("m1", Role::Assistant, vec![thinking])],
        extra: raw(json!({"model": "claude-sonnet-4-5", "metadata": {"user_id": token}})),
        ..Conversation::default()
    }
}

#[test]
fn every_extra_field_is_redacted_in_place() {
    let token = ghp(5);
    let aws_secret = rand(6, 40, BASE64);
    let conv = extras_conversation(&token, &aws_secret);
    let out = run(&stage::<RedactSecrets>(""), &conv, &MemoryHost::default());
    let json = serde_json::to_string(&out.conversation).unwrap();
    assert_no_fragment(&json, &token);
    assert_no_fragment(&json, &aws_secret);
    let c = &out.conversation;
    assert_eq!(c.extra.as_str(), conv.extra.as_str().replace(&token, GHP));
    // A labelled secret in an object: recognised by its key, as in tool inputs.
    assert_eq!(
        c.messages[0].extra.as_str(),
        conv.messages[0]
            .extra
            .as_str()
            .replace(&aws_secret, "[REDACTED:aws-secret-key]")
    );
    let details: Vec<String> = out
        .report
        .events
        .iter()
        .map(|e| format!("{} {} {}", e.message_id, e.detail, e.tokens))
        .collect();
    assert_eq!(
        details,
        vec![
            "(conversation) github-token: 1 (extra) 0",
            "m0 github-token: 3 (extra) 0",
            "m0 aws-secret-key: 1 (extra) 0",
            "m1 github-token: 1 (extra) 0",
        ]
    );
    // No text the model sees changed: no block counts, no tokens freed.
    assert_eq!(out.report.blocks_changed, 0);
    assert_eq!(out.report.tokens_freed, Some(0));
    assert_eq!(
        out.report.notes[0],
        "redacted 6 secrets in 0 blocks and 6 envelope or extra fields (9 texts scanned): \
         github-token 5, aws-secret-key 1"
    );
    // Nothing grows, and a rerun changes nothing.
    assert!(json.len() < serde_json::to_string(&conv).unwrap().len());
    let twice = run(
        &stage::<RedactSecrets>(""),
        &out.conversation,
        &MemoryHost::default(),
    );
    assert_eq!(twice.conversation, out.conversation);
    assert!(twice.report.events.is_empty());
}

#[test]
fn thinking_false_leaves_the_thinking_extra_too() {
    let token = ghp(7);
    let conv = extras_conversation(&token, &rand(8, 40, BASE64));
    let out = run(
        &stage::<RedactSecrets>("thinking = false"),
        &conv,
        &MemoryHost::default(),
    );
    assert_eq!(out.conversation.messages[1], conv.messages[1]);
    assert_ne!(out.conversation.messages[0], conv.messages[0]);
}

#[test]
fn a_short_secret_in_an_envelope_never_grows() {
    // A 2-byte URL password becomes `**`, not a longer placeholder.
    let mut m = Message::new("m0", Role::Event, Vec::new());
    m.envelope = raw(json!({"type": "note", "url": "redis://:pw@cache", "n": 1.5e3}));
    let conv = Conversation {
        messages: vec![m],
        ..Conversation::default()
    };
    let out = run(&stage::<RedactSecrets>(""), &conv, &MemoryHost::default());
    assert_eq!(
        out.conversation.messages[0].envelope.as_str(),
        conv.messages[0]
            .envelope
            .as_str()
            .replace("redis://:pw@", "redis://:**@")
    );
    assert_eq!(out.report.events[0].detail, "url-password: 1 (envelope)");
}
