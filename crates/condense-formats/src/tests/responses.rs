//! OpenAI Responses API request bodies: the same items as Codex rollouts, in a request.

use super::support::{counts, fixture, round_trip, writes_back, Counts};
use crate::{read, Format, ReadOptions};
use condense_model::{Block, Content, Message, RawJson, Role};
use serde_json::{json, Value};

fn auto() -> ReadOptions {
    ReadOptions::default()
}

fn request() -> Vec<u8> {
    fixture!("edge/responses_request.json")
}

#[test]
fn the_request_maps_its_items_instructions_and_tools() {
    let bytes = request();
    let doc = round_trip(&bytes, "responses_request.json", &auto());
    assert!(writes_back(&doc, &bytes));
    assert_eq!(doc.format(), Format::Responses);
    assert!(doc.warnings().is_empty(), "{:?}", doc.warnings());
    // 9 messages (one developer), 7 function calls and outputs, an apply_patch call and
    // output, 6 reasoning items and a web search.
    assert_eq!(
        counts(doc.conversations()),
        Counts {
            messages: 32,
            events: 0,
            tool_uses: 8,
            tool_results: 8,
            opaque: 7,
            images: 0,
        }
    );
    let conv = &doc.conversations()[0];
    assert!(conv
        .system
        .as_ref()
        .unwrap()
        .text()
        .starts_with("You are Codex"));
    let tools: Vec<&str> = conv.tools.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(
        tools,
        [
            "exec_command",
            "write_stdin",
            "update_plan",
            "apply_patch",
            "web_search"
        ]
    );
    let extra = conv.extra.to_map().unwrap();
    assert_eq!(extra["model"], "gpt-5.5");
    assert_eq!(extra["include"], json!(["reasoning.encrypted_content"]));
    assert_eq!(conv.messages[0].role, Role::System);
    let patch = conv
        .messages
        .iter()
        .flat_map(|m| m.tool_uses())
        .find(|tu| tu.name == "apply_patch")
        .unwrap();
    assert!(patch
        .input
        .to_value()
        .unwrap()
        .as_str()
        .unwrap()
        .starts_with("*** Begin Patch"));
}

#[test]
fn codex_and_responses_share_one_item_mapping() {
    let body: Value = serde_json::from_slice(&request()).unwrap();
    let mut rollout = String::new();
    for item in body["input"].as_array().unwrap() {
        let line = json!({"timestamp": "t", "type": "response_item", "payload": item});
        rollout.push_str(&line.to_string());
        rollout.push('\n');
    }
    let from_rollout = read(rollout.as_bytes(), "r.jsonl", &auto()).unwrap();
    assert_eq!(from_rollout.format(), Format::Codex);
    let from_request = read(&request(), "q.json", &auto()).unwrap();
    let a = &from_rollout.conversations()[0].messages;
    let b = &from_request.conversations()[0].messages;
    assert_eq!(a.len(), b.len());
    for (x, y) in a.iter().zip(b) {
        assert_eq!(
            (x.role, &x.content, &x.extra),
            (y.role, &y.content, &y.extra),
            "{}",
            x.id
        );
    }
}

#[test]
fn a_string_input_stays_a_string() {
    let bytes = br#"{"model":"gpt-4.1","input":"Tell me a joke","instructions":"Be brief."}"#;
    let mut doc = round_trip(bytes, "q.json", &auto());
    assert!(writes_back(&doc, bytes));
    assert_eq!(doc.format(), Format::Responses);
    let conv = &mut doc.conversations_mut()[0];
    conv.messages[0].content = Content::string("Tell me a pun");
    let v: Value = serde_json::from_slice(&doc.write().unwrap()).unwrap();
    assert_eq!(v["input"], "Tell me a pun");
    // A message a stage added makes it a list of items.
    let conv = &mut doc.conversations_mut()[0];
    conv.messages.push(Message::new(
        "n",
        Role::Assistant,
        vec![Block::text("Why?")],
    ));
    let v: Value = serde_json::from_slice(&doc.write().unwrap()).unwrap();
    assert_eq!(
        v["input"],
        json!([
            {"type": "message", "role": "user", "content": "Tell me a pun"},
            {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Why?"}]},
        ])
    );
}

#[test]
fn messages_without_type_and_stage_built_messages() {
    let bytes = br#"{"model":"o3","input":[{"role":"user","content":"hi"},{"type":"message","role":"assistant","id":"msg_1","content":[{"type":"output_text","text":"hello","annotations":[]}],"status":"completed"}]}"#;
    let mut doc = round_trip(bytes, "q.json", &auto());
    assert!(writes_back(&doc, bytes));
    // A message holding text and a call is written as a message item and a call item.
    let conv = &mut doc.conversations_mut()[0];
    conv.messages.push(Message::new(
        "n",
        Role::Assistant,
        vec![
            Block::text("Listing."),
            Block::tool_use(
                "c9",
                "shell",
                RawJson::from_string_unchecked(r#"{"cmd":"ls"}"#.into()),
            ),
        ],
    ));
    conv.messages.push(Message::new(
        "r",
        Role::Tool,
        vec![Block::tool_result("c9", Content::string("a.rs"))],
    ));
    let v: Value = serde_json::from_slice(&doc.write().unwrap()).unwrap();
    assert_eq!(
        v["input"].as_array().unwrap()[2..],
        [
            json!({"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Listing."}]}),
            json!({"type": "function_call", "name": "shell", "arguments": "{\"cmd\":\"ls\"}", "call_id": "c9"}),
            json!({"type": "function_call_output", "call_id": "c9", "output": "a.rs"}),
        ]
    );
}

#[test]
fn a_stored_conversation_and_unknown_items_are_warned_about() {
    let bytes = br#"{"model":"gpt-5","previous_response_id":"resp_1","input":[{"type":"mcp_call","id":"m","name":"q","arguments":"{}","server_label":"s"},{"type":"brand_new_item","x":1}]}"#;
    let doc = round_trip(bytes, "q.json", &auto());
    assert!(writes_back(&doc, bytes));
    assert_eq!(
        doc.warnings(),
        [
            "the request continues the stored response `resp_1` (previous_response_id): the \
             turns before it are on the server, not in the file, and are not counted",
            "1 message or item condense does not understand is kept verbatim and counted as its \
             JSON: item `brand_new_item` (1)",
        ]
    );
    // Both are counted as their JSON.
    assert_eq!(counts(doc.conversations()).opaque, 2);
}

#[test]
fn detection_and_near_misses() {
    let format = |bytes: &[u8]| read(bytes, "x.json", &auto()).map(|d| d.format());
    // A bare list of input items.
    let items = br#"[{"type":"function_call","name":"f","arguments":"{}","call_id":"c"},{"type":"function_call_output","call_id":"c","output":"ok"}]"#;
    assert_eq!(format(items).unwrap(), Format::Responses);
    // A list of Responses bodies.
    let bodies = br#"[{"model":"m","input":"a","instructions":"x"},{"model":"m","input":[]}]"#;
    let doc = read(bodies, "x.json", &auto()).unwrap();
    assert_eq!(
        (doc.format(), doc.conversations().len()),
        (Format::Responses, 2)
    );
    // A Chat Completions body that also has an `input` key.
    let chat =
        br#"{"model":"gpt-4o","input":"ignored","messages":[{"role":"user","content":"hi"}]}"#;
    assert_eq!(format(chat).unwrap(), Format::OpenAi);
    // Embeddings requests have an `input` too.
    for body in [
        &br#"{"model":"text-embedding-3-small","input":"The food was delicious"}"#[..],
        br#"{"model":"text-embedding-3-small","input":["a","b"],"encoding_format":"float"}"#,
        br#"{"model":"omni-moderation-latest","input":"text"}"#,
    ] {
        assert!(format(body).is_err(), "{}", String::from_utf8_lossy(body));
    }
    // Chat messages without a `type` are chat, not items.
    assert_eq!(
        format(br#"[{"role":"user","content":"hi"}]"#).unwrap(),
        Format::OpenAi
    );
    // Forced on a bare list of chat messages: read as untyped message items.
    let opts = ReadOptions {
        format: Some(Format::Responses),
        select: None,
    };
    let doc = read(br#"[{"role":"user","content":"hi"}]"#, "x.json", &opts).unwrap();
    assert!(writes_back(&doc, br#"[{"role":"user","content":"hi"}]"#));
}

/// The model as the reader builds it from a small request.
#[test]
fn mapping_snapshot() {
    let bytes = br#"{"model":"gpt-5","instructions":"Be brief.","input":[{"type":"message","role":"developer","content":[{"type":"input_text","text":"sandbox: read-only"}]},{"role":"user","content":"ls"},{"type":"reasoning","id":"rs_1","summary":[],"encrypted_content":"gAAA"},{"type":"function_call","id":"fc_1","call_id":"c1","name":"shell","arguments":"{\"cmd\":\"ls\"}"},{"type":"function_call_output","call_id":"c1","output":"a.rs"}],"tools":[{"type":"function","name":"shell","parameters":{"type":"object"}},{"type":"web_search"}],"store":false}"#;
    let doc = round_trip(bytes, "q.json", &auto());
    assert!(writes_back(&doc, bytes));
    insta::assert_json_snapshot!("responses_small", doc.conversations());
}

#[test]
fn a_jsonl_of_requests_is_one_conversation_per_line() {
    let bytes = b"{\"model\":\"m\",\"instructions\":\"a\",\"input\":\"one\"}\n{\"model\":\"m\",\"instructions\":\"b\",\"input\":[{\"role\":\"user\",\"content\":\"two\"}]}\n";
    let doc = round_trip(bytes, "requests.jsonl", &auto());
    assert!(writes_back(&doc, bytes));
    assert_eq!(doc.format(), Format::Responses);
    assert_eq!(doc.labels(), ["line 1", "line 2"]);
}
