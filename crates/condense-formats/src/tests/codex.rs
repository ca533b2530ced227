//! Codex CLI rollouts: the real sessions map what Codex sends, compactions start the context,
//! edits are written back into their lines.

use super::support::{counts, fixture, round_trip, writes_back, Counts};
use crate::{read, Format, ReadOptions, ReportedUsage};
use condense_model::{Block, Content, Message, Role};
use serde_json::{json, Value};

const FIRST: &str = "transcripts/codemie-ai__codemie-code/rollout-2026-05-11T11-26-55-019e1625-789d-76c0-80ab-3724b5ddb799.jsonl";

fn auto() -> ReadOptions {
    ReadOptions::default()
}

fn first() -> Vec<u8> {
    fixture!("transcripts/codemie-ai__codemie-code/rollout-2026-05-11T11-26-55-019e1625-789d-76c0-80ab-3724b5ddb799.jsonl")
}

fn second() -> Vec<u8> {
    fixture!("transcripts/codemie-ai__codemie-code/rollout-2026-05-11T13-28-45-019e1695-0522-7c83-8b39-0dd379793f80.jsonl")
}

fn lines(values: &[Value]) -> Vec<u8> {
    let mut out = String::new();
    for v in values {
        out.push_str(&v.to_string());
        out.push('\n');
    }
    out.into_bytes()
}

fn line(ts: &str, kind: &str, payload: Value) -> Value {
    json!({"timestamp": ts, "type": kind, "payload": payload})
}

fn user(text: &str) -> Value {
    json!({"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]})
}

fn meta() -> Value {
    line(
        "2026-01-01T00:00:00Z",
        "session_meta",
        json!({"id": "s1", "cwd": "/w", "base_instructions": {"text": "You are Codex."}}),
    )
}

#[test]
fn the_first_rollout_maps_what_codex_sends() {
    let doc = read(&first(), FIRST, &auto()).unwrap();
    assert_eq!(doc.format(), Format::Codex);
    assert!(doc.warnings().is_empty(), "{:?}", doc.warnings());
    let c = counts(doc.conversations());
    // 249 response items (13 assistant and 3 user messages, 1 developer message, 25 reasoning
    // items, 99 function calls and outputs, 3 apply_patch calls and outputs, 3 web searches);
    // 136 turn_context and event_msg lines; the session_meta line is the file's header.
    assert_eq!(
        c,
        Counts {
            messages: 249,
            events: 136,
            tool_uses: 102,
            tool_results: 102,
            opaque: 28,
            images: 0,
        }
    );
    let conv = &doc.conversations()[0];
    let system = conv.system.as_ref().unwrap().text();
    assert!(system.starts_with("You are Codex, a coding agent based on GPT-5."));
    // The instructions are not kept twice: the session_meta event holds a placeholder.
    assert_eq!(conv.messages[0].id, "#1");
    assert_eq!(conv.messages[1].role, Role::System);
    assert!(conv.messages[1]
        .extra
        .as_str()
        .contains("\"condense:role\":\"developer\""));
    // Every result answers a call of the session; an apply_patch input is its patch as a string.
    let names = conv.tool_names_by_id();
    for msg in &conv.messages {
        for tr in msg.tool_results() {
            assert!(
                names.contains_key(tr.tool_use_id.as_str()),
                "{}",
                tr.tool_use_id
            );
        }
    }
    let patch = conv
        .messages
        .iter()
        .flat_map(|m| m.tool_uses())
        .find(|tu| tu.name == "apply_patch")
        .unwrap();
    let input: Value = serde_json::from_str(patch.input.as_str()).unwrap();
    assert!(input
        .as_str()
        .unwrap()
        .starts_with("*** Begin Patch\n*** Update File: src/agents/plugins/__tests__/"));
    let shell = conv.messages[7].tool_uses().next().unwrap();
    assert_eq!(shell.name, "exec_command");
    assert!(shell
        .input
        .as_str()
        .starts_with("{\"cmd\": \"sed -n '1,180p'"));
    // The user_message events repeat the response items: they stay events.
    let requests: Vec<String> = conv
        .messages
        .iter()
        .filter(|m| m.role == Role::User)
        .map(|m| m.content.text())
        .collect();
    assert_eq!(requests.len(), 3);
    assert_eq!(
        requests[2],
        "let's update the defailt context compart to 90 in env var"
    );
    assert_eq!(
        doc.reported_usage(0),
        Some(&ReportedUsage {
            input_tokens: 131_573 - 130_432,
            cache_read_tokens: 130_432,
            cache_write_tokens: 0,
            output_tokens: 433,
            source: "line 385: the last token_count event's info.last_token_usage (input = \
                     input_tokens - cached_input_tokens, cache reads = cached_input_tokens, \
                     output = output_tokens, which includes reasoning)"
                .into(),
        })
    );
    assert_eq!(doc.reported_usage(0).unwrap().prompt_tokens(), 131_573);
}

#[test]
fn the_second_rollout_keeps_the_requests_only_its_events_hold() {
    let doc = read(&second(), "r2.jsonl", &auto()).unwrap();
    assert_eq!(doc.format(), Format::Codex);
    let c = counts(doc.conversations());
    assert_eq!((c.messages, c.events), (98, 0));
    assert_eq!((c.tool_uses, c.tool_results, c.opaque), (38, 38, 16));
    let conv = &doc.conversations()[0];
    let requests: Vec<&Message> = conv
        .messages
        .iter()
        .filter(|m| m.role == Role::User)
        .collect();
    assert_eq!(requests.len(), 3);
    assert!(requests[0]
        .content
        .text()
        .starts_with("\n# Files mentioned by the user:"));
    // The text is not kept twice: the event's `message` is a placeholder.
    assert!(!requests[0].envelope.as_str().contains("Files mentioned"));
    assert_eq!(doc.reported_usage(0), None);
}

#[test]
fn edits_are_written_into_their_lines() {
    let mut doc = read(&first(), "r.jsonl", &auto()).unwrap();
    let conv = &mut doc.conversations_mut()[0];
    let at = conv
        .messages
        .iter()
        .position(|m| m.tool_results().next().is_some())
        .unwrap();
    if let Block::ToolResult(tr) = &mut conv.messages[at].content.blocks[0] {
        tr.content = Content::string("[cleared]");
    }
    conv.system = Some(Content::string("Shorter instructions."));
    conv.messages
        .push(Message::new("new", Role::User, vec![Block::text("go on")]));
    let out = doc.write().unwrap();
    let text = String::from_utf8(out.clone()).unwrap();
    let written: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    // Line 1 is the header: message `at` is on line `at + 1`.
    assert_eq!(written[at + 1]["payload"]["output"], "[cleared]");
    assert_eq!(written[at + 1]["payload"]["type"], "function_call_output");
    assert_eq!(
        written[0]["payload"]["base_instructions"]["text"],
        "Shorter instructions."
    );
    let last = written.last().unwrap();
    assert_eq!(last["type"], "response_item");
    assert_eq!(last["payload"], user("go on"));
    // Everything else is as it was.
    let original: Vec<Value> = String::from_utf8(first())
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let same = original
        .iter()
        .zip(&written)
        .filter(|(a, b)| a == b)
        .count();
    assert_eq!(same, original.len() - 2);
    let again = read(&out, "r.jsonl", &auto()).unwrap();
    assert_eq!(
        again.conversations()[0]
            .messages
            .last()
            .unwrap()
            .content
            .text(),
        "go on"
    );
}

#[test]
fn a_compaction_without_replacement_history_keeps_the_user_messages_and_starts_with_the_summary() {
    let bytes = lines(&[
        meta(),
        line(
            "t1",
            "response_item",
            json!({"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "<permissions>"}]}),
        ),
        line("t2", "response_item", user("fix the build")),
        line(
            "t3",
            "response_item",
            json!({"type": "function_call", "name": "exec_command", "arguments": "{\"cmd\":\"make\"}", "call_id": "c1"}),
        ),
        line(
            "t4",
            "response_item",
            json!({"type": "function_call_output", "call_id": "c1", "output": "error: x"}),
        ),
        line(
            "t5",
            "response_item",
            json!({"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Fixed."}]}),
        ),
        line(
            "t6",
            "compacted",
            json!({"message": "SUMMARY: the build was fixed"}),
        ),
        line("t7", "turn_context", json!({"cwd": "/w", "model": "gpt-5"})),
        line("t8", "response_item", user("now the docs")),
    ]);
    let doc = round_trip(&bytes, "c.jsonl", &auto());
    assert!(writes_back(&doc, &bytes));
    let conv = &doc.conversations()[0];
    let roles: Vec<Role> = conv.messages.iter().map(|m| m.role).collect();
    use Role::{Event as E, System as S, User as U};
    assert_eq!(roles, [S, U, E, E, E, U, E, U]);
    assert_eq!(
        conv.messages[5].content.text(),
        "SUMMARY: the build was fixed"
    );
    // What the compaction replaced keeps its content on its event (for retention), counted 0.
    assert_eq!(conv.messages[2].tool_uses().count(), 1);
    assert_eq!(conv.messages[4].content.text(), "Fixed.");
    // The summary is written back into its line.
    let mut doc = doc;
    doc.conversations_mut()[0].messages[5].content = Content::string("SHORTER");
    let out = String::from_utf8(doc.write().unwrap()).unwrap();
    let summary: Value = serde_json::from_str(out.lines().nth(6).unwrap()).unwrap();
    assert_eq!(
        summary,
        line("t6", "compacted", json!({"message": "SHORTER"}))
    );
}

#[test]
fn a_replacement_history_is_the_context() {
    let bytes = lines(&[
        meta(),
        line("t1", "response_item", user("fix the build")),
        line(
            "t2",
            "response_item",
            json!({"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "On it."}]}),
        ),
        line(
            "t3",
            "compacted",
            json!({"message": "", "replacement_history": [
                user("fix the build"),
                {"type": "compaction", "encrypted_content": "gAAAAB..."},
                {"type": "ghost_snapshot", "ghost_commit": {"id": "abc"}},
            ]}),
        ),
        line("t4", "response_item", user("and the docs")),
    ]);
    let mut doc = round_trip(&bytes, "r.jsonl", &auto());
    assert!(writes_back(&doc, &bytes));
    let conv = &doc.conversations()[0];
    let view: Vec<(&str, Role)> = conv
        .messages
        .iter()
        .map(|m| (m.id.as_str(), m.role))
        .collect();
    assert_eq!(
        view,
        [
            ("#1", Role::Event),
            ("#2", Role::Event),
            ("#3", Role::Event),
            ("#3.0", Role::User),
            ("#3.1", Role::Assistant),
            ("#3.2", Role::Event),
            ("#4", Role::User),
        ]
    );
    assert!(matches!(
        conv.messages[4].content.blocks.as_slice(),
        [Block::Opaque(_)]
    ));
    // A stage that drops a replaced item shortens the history written back.
    doc.conversations_mut()[0].messages.remove(3);
    let out = String::from_utf8(doc.write().unwrap()).unwrap();
    let compacted: Value = serde_json::from_str(out.lines().nth(3).unwrap()).unwrap();
    assert_eq!(
        compacted["payload"]["replacement_history"],
        json!([{"type": "compaction", "encrypted_content": "gAAAAB..."}, {"type": "ghost_snapshot", "ghost_commit": {"id": "abc"}}])
    );
    // A stage that drops the compacted line and everything before it (autocompact) leaves the
    // items as plain context lines; the header keeps the instructions.
    doc.conversations_mut()[0].messages.drain(..3);
    let out = doc.write().unwrap();
    let written: Vec<Value> = String::from_utf8(out.clone())
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(written[0], meta());
    assert_eq!(written[1]["payload"]["type"], "compaction");
    let again = read(&out, "r.jsonl", &auto()).unwrap();
    assert_eq!(
        again.conversations()[0].system.as_ref().unwrap().text(),
        "You are Codex."
    );
    assert_eq!(again.conversations()[0].messages.len(), 3);
}

#[test]
fn unknown_items_are_counted_and_unknown_lines_are_carried() {
    let bytes = lines(&[
        meta(),
        line(
            "t1",
            "response_item",
            json!({"type": "mcp_tool_call_v9", "server": "x", "args": {"q": 1}}),
        ),
        line(
            "t2",
            "response_item",
            json!({"type": "function_call", "name": "f", "arguments": {"not": "a string"}, "call_id": "c"}),
        ),
        line(
            "t3",
            "response_item",
            json!({"type": "message", "role": "critic", "content": "hm"}),
        ),
        line("t4", "future_line", json!({"x": 1})),
        line(
            "t5",
            "response_item",
            json!({"type": "local_shell_call", "call_id": "ls", "status": "completed", "action": {"type": "exec", "command": ["ls"]}}),
        ),
        line(
            "t6",
            "response_item",
            json!({"type": "function_call_output", "call_id": "ls", "output": [{"type": "input_text", "text": "a.rs"}]}),
        ),
    ]);
    let doc = round_trip(&bytes, "u.jsonl", &auto());
    assert!(writes_back(&doc, &bytes));
    assert_eq!(
        doc.warnings(),
        [
            "3 messages or items condense does not understand are kept verbatim and counted as \
             their JSON: item `mcp_tool_call_v9` (1), malformed `function_call` item (1), role \
             `critic` (1)",
            "1 line of a kind condense does not know is carried verbatim and not counted: line \
             type `future_line` (1)",
        ]
    );
    let c = counts(doc.conversations());
    assert_eq!(
        (c.messages, c.events, c.opaque, c.tool_uses, c.tool_results),
        (5, 1, 3, 1, 1)
    );
    let shell = doc.conversations()[0].messages[4]
        .tool_uses()
        .next()
        .unwrap();
    assert_eq!(
        (shell.name.as_str(), shell.input.as_str()),
        ("local_shell", r#"{"type":"exec","command":["ls"]}"#)
    );
}

#[test]
fn detection_and_near_misses() {
    // One line is enough.
    let one = lines(&[meta()]);
    assert_eq!(
        read(&one, "one.json", &auto()).unwrap().format(),
        Format::Codex
    );
    // Lines with `type` and `payload` that are not Codex's: not a rollout.
    let other = lines(&[
        json!({"type": "event", "payload": {"a": 1}}),
        json!({"type": "event", "payload": {"a": 2}}),
    ]);
    let read_other = read(&other, "o.jsonl", &auto());
    assert!(read_other.map(|d| d.format()).unwrap_or(Format::OpenAi) != Format::Codex);
    // Codex line types but only events: no session or context, not detected.
    let events = lines(&[line(
        "t",
        "event_msg",
        json!({"type": "token_count", "info": null}),
    )]);
    assert!(read(&events, "e.jsonl", &auto()).is_err());
    // ... and read when asked for.
    let opts = ReadOptions {
        format: Some(Format::Codex),
        select: None,
    };
    assert_eq!(
        read(&events, "e.jsonl", &opts).unwrap().format(),
        Format::Codex
    );
    let opts = ReadOptions {
        format: Some(Format::Codex),
        select: Some("/payload".into()),
    };
    let e = read(&events, "e.jsonl", &opts).unwrap_err().to_string();
    assert_eq!(
        e,
        "e.jsonl: --select /payload: a Codex session is the whole file; --select does not apply"
    );
}

/// The model as the reader builds it from a small rollout: placeholders, hints, events.
#[test]
fn mapping_snapshot() {
    let bytes = lines(&[
        meta(),
        line("t1", "turn_context", json!({"cwd": "/w", "model": "gpt-5"})),
        line("t2", "response_item", user("add a test")),
        line(
            "t3",
            "event_msg",
            json!({"type": "user_message", "message": "add a test"}),
        ),
        line(
            "t4",
            "response_item",
            json!({"type": "reasoning", "summary": [], "content": null, "encrypted_content": "gAAA"}),
        ),
        line(
            "t5",
            "response_item",
            json!({"type": "custom_tool_call", "status": "completed", "call_id": "p1", "name": "apply_patch", "input": "*** Begin Patch\n*** Add File: t.rs\n+#[test] fn t() {}\n*** End Patch\n"}),
        ),
        line(
            "t6",
            "response_item",
            json!({"type": "custom_tool_call_output", "call_id": "p1", "output": "{\"output\":\"Success.\"}"}),
        ),
        line(
            "t7",
            "event_msg",
            json!({"type": "token_count", "info": {"last_token_usage": {"input_tokens": 900, "cached_input_tokens": 800, "output_tokens": 40}}}),
        ),
        line(
            "t8",
            "response_item",
            json!({"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Added."}], "phase": "final_answer"}),
        ),
    ]);
    let doc = round_trip(&bytes, "small.jsonl", &auto());
    assert!(writes_back(&doc, &bytes));
    insta::assert_json_snapshot!("codex_small", doc.conversations());
}

#[test]
fn the_header_holds_the_system_prompt_a_stage_sets_or_removes() {
    // No session_meta line: a system prompt a stage sets gets a minimal one.
    let bytes = lines(&[line("t1", "response_item", user("hi"))]);
    let mut doc = read(&bytes, "r.jsonl", &auto()).unwrap();
    assert!(doc.conversations()[0].system.is_none());
    doc.conversations_mut()[0].system = Some(Content::string("Be brief."));
    let out = doc.write().unwrap();
    let first: Value =
        serde_json::from_str(std::str::from_utf8(&out).unwrap().lines().next().unwrap()).unwrap();
    assert_eq!(
        first,
        json!({"type": "session_meta", "payload": {"base_instructions": {"text": "Be brief."}}})
    );
    let again = read(&out, "r.jsonl", &auto()).unwrap();
    assert_eq!(
        again.conversations()[0].system,
        Some(Content::string("Be brief."))
    );
    // A system prompt a stage removes is written as null: it reads back as none.
    let bytes = lines(&[meta(), line("t1", "response_item", user("hi"))]);
    let mut doc = read(&bytes, "r.jsonl", &auto()).unwrap();
    doc.conversations_mut()[0].system = None;
    let out = doc.write().unwrap();
    assert!(std::str::from_utf8(&out).unwrap().starts_with(
        r#"{"timestamp":"2026-01-01T00:00:00Z","type":"session_meta","payload":{"id":"s1","cwd":"/w","base_instructions":{"text":null}}}"#
    ));
    assert!(read(&out, "r.jsonl", &auto()).unwrap().conversations()[0]
        .system
        .is_none());
}
