//! Parser errors: one line naming the source, the line or pointer, and what was expected.

use crate::{read, Format, FormatError, ReadOptions};

fn err(bytes: &[u8], source: &str, opts: &ReadOptions) -> String {
    read(bytes, source, opts).unwrap_err().to_string()
}

fn auto() -> ReadOptions {
    ReadOptions::default()
}

#[test]
fn truncated_json() {
    let e = err(
        br#"{"messages": [{"role": "user", "content": "hi"#,
        "req.json",
        &auto(),
    );
    assert_eq!(
        e,
        "req.json:1: invalid JSON: EOF while parsing a string at column 45"
    );
}

#[test]
fn jsonl_line_that_is_not_json() {
    let bytes = b"{\"type\":\"user\",\"message\":{\"role\":\"user\",\"content\":\"a\"}}\n{\"type\":\"user\",\n{\"type\":\"summary\"}\n";
    let e = err(bytes, "session.jsonl", &auto());
    assert_eq!(
        e,
        "session.jsonl:2: invalid JSON: EOF while parsing a value at column 15"
    );
    // Without the .jsonl name the line is still found.
    let e = err(bytes, "-", &auto());
    assert!(e.starts_with("<stdin>:2: invalid JSON:"), "{e}");
}

#[test]
fn message_that_is_not_an_object() {
    let e = err(
        br#"{"messages": [{"role": "user", "content": "a"}, 42]}"#,
        "req.json",
        &auto(),
    );
    assert_eq!(
        e,
        "req.json: /messages/1: expected a message object, found a number"
    );
}

#[test]
fn content_of_the_wrong_type() {
    let e = err(
        br#"{"messages": [{"role": "user", "content": 7}]}"#,
        "req.json",
        &auto(),
    );
    assert_eq!(
        e,
        "req.json: /messages/0/content: expected a string, an array of content blocks or null, found a number"
    );
    let bytes = br#"{"system": "s", "messages": [{"role": "user", "content": [{"type": "text", "text": "a"}, 3]}]}"#;
    let e = err(bytes, "req.json", &auto());
    assert_eq!(
        e,
        "req.json: /messages/0/content/1: expected a content block object, found a number"
    );
    let bytes = br#"{"system": "s", "messages": [{"role": "user", "content": [{"type": "text", "text": 5}]}]}"#;
    let e = err(bytes, "req.json", &auto());
    assert_eq!(
        e,
        "req.json: /messages/0/content/0/text: expected a string, found a number"
    );
}

#[test]
fn claude_code_line_errors_name_the_line() {
    let bytes = b"{\"type\":\"user\",\"sessionId\":\"s\",\"message\":{\"role\":\"user\",\"content\":\"a\"}}\n{\"type\":\"assistant\",\"message\":{\"role\":\"assistant\",\"content\":[{\"type\":\"tool_use\",\"id\":\"t\"}]}}\n";
    let e = err(bytes, "s.jsonl", &auto());
    assert_eq!(
        e,
        "s.jsonl:2: /message/content/0: expected a string `name`, found nothing (the key is missing)"
    );
}

#[test]
fn openai_tool_call_errors() {
    let bytes = br#"{"messages":[{"role":"assistant","content":null,"tool_calls":[{"id":"c","function":"f"}]}]}"#;
    let e = err(bytes, "o.json", &auto());
    assert_eq!(e, "o.json: /messages/0/tool_calls/0/function: expected a function object, found the string \"f\"");
}

#[test]
fn unknown_format() {
    let e = FormatError::from("gemini".parse::<Format>().unwrap_err());
    assert_eq!(e, FormatError::UnknownFormat("gemini".into()));
    assert_eq!(
        e.to_string(),
        "unknown format `gemini` (expected one of: anthropic, openai, claude-code, openhands, \
         codex, responses, cline)"
    );
}

#[test]
fn wrong_format() {
    let bytes = br#"{"messages":[{"role":"user","content":"a"}]}"#;
    let opts = ReadOptions {
        format: Some(Format::OpenHands),
        select: None,
    };
    let e = err(bytes, "req.json", &opts);
    assert_eq!(
        e,
        "req.json: expected an OpenHands event list (an array), found an object with keys messages"
    );
    let opts = ReadOptions {
        format: Some(Format::ClaudeCode),
        select: None,
    };
    let e = err(b"[1, 2]\n", "x.json", &opts);
    assert_eq!(
        e,
        "x.json:1: expected a Claude Code line (a JSON object), found an array"
    );
    let opts = ReadOptions {
        format: Some(Format::Anthropic),
        select: None,
    };
    let e = err(
        br#"{"messages":[{"role":7,"content":"a"}]}"#,
        "r.json",
        &opts,
    );
    assert_eq!(
        e,
        "r.json: /messages/0/role: expected a string role, found a number"
    );
    let opts = ReadOptions {
        format: Some(Format::Codex),
        select: None,
    };
    assert_eq!(
        err(bytes, "req.json", &opts),
        "req.json:1: expected a Codex rollout line with a string `type`, found nothing (the key \
         is missing)"
    );
    let opts = ReadOptions {
        format: Some(Format::Responses),
        select: None,
    };
    assert_eq!(
        err(bytes, "req.json", &opts),
        "req.json: expected a Responses request body (an object with `input`) or an item list, \
         found an object with keys messages"
    );
    let opts = ReadOptions {
        format: Some(Format::Cline),
        select: None,
    };
    assert_eq!(
        err(br#"{"history":[{"action":"run"}]}"#, "h.json", &opts),
        "h.json: /history/0: expected a message with a string `role`, found nothing (the key is \
         missing)"
    );
    let opts = ReadOptions {
        format: Some(Format::OpenAi),
        select: Some("/history".into()),
    };
    let bytes = br#"{"history":[{"id":1,"action":"run","args":{}}]}"#;
    let e = err(bytes, "h.json", &opts);
    assert_eq!(
        e,
        "h.json: /history/0: expected a message with a string `role`, found nothing (the key is missing)"
    );
}

#[test]
fn bad_select() {
    let bytes = br#"{"data":{"items":[]}, "n": 3}"#;
    let sel = |s: &str| ReadOptions {
        format: None,
        select: Some(s.into()),
    };
    assert_eq!(
        err(bytes, "f.json", &sel("/nope")),
        "f.json: --select /nope: no key `nope` at / (found an object with keys data, n)"
    );
    assert_eq!(
        err(bytes, "f.json", &sel("messages")),
        "f.json: --select messages: a JSON pointer starts with `/` (e.g. /messages or /*/traj)"
    );
    assert_eq!(
        err(bytes, "f.json", &sel("/data/items/*/traj")),
        "f.json: --select /data/items/*/traj: selects nothing (every `*` matched an empty list)"
    );
    assert_eq!(
        err(bytes, "f.json", &sel("/n")),
        "f.json: --select /n: /n is not a conversation: expected an array of messages, found a number"
    );
    assert_eq!(
        err(bytes, "f.json", &sel("/n/*")),
        "f.json: --select /n/*: `*` at /n needs an array or object, found a number"
    );
    let e = err(
        b"{\"history\":[]}\n{\"other\":[]}\n",
        "o.jsonl",
        &sel("/history"),
    );
    assert_eq!(
        e,
        "o.jsonl:2: --select /history: no key `history` at / (found an object with keys other)"
    );
    let opts = ReadOptions {
        format: Some(Format::ClaudeCode),
        select: Some("/x".into()),
    };
    assert!(err(b"{}", "s.jsonl", &opts).contains("--select does not apply"));
}

#[test]
fn undetectable_and_empty_inputs() {
    assert_eq!(
        err(br#"{"foo": 1}"#, "x.json", &auto()),
        "x.json: no conversation found: expected an object with a `messages` or `history` array or a Responses `input`, or an array of messages, found an object with keys foo (use --select to point at the messages)"
    );
    assert_eq!(
        err(b"  \n", "x.json", &auto()),
        "x.json: the input is empty"
    );
    assert_eq!(
        err(b"\xff\xfe", "x.json", &auto()),
        "x.json:1: not UTF-8 text: invalid byte at offset 0"
    );
}

#[test]
fn never_panics_on_odd_inputs() {
    let inputs: [&[u8]; 18] = [
        b"null",
        b"42",
        b"\"s\"",
        b"[]",
        b"[null]",
        b"{\"messages\": null}",
        b"{\"messages\": [{}]}",
        b"{\"history\": [{\"action\": 1}]}",
        b"{\"type\": \"user\", \"message\": {\"role\": \"user\"}}",
        b"{\"type\": \"user\", \"sessionId\": 1}\n{\"type\": 2}\n",
        b"[{\"role\":\"assistant\",\"tool_calls\":[1]}]",
        b"[{\"role\":\"user\",\"content\":[{\"type\":\"image_url\"}]}]",
        b"{\"input\": [{\"type\": \"function_call\"}], \"model\": \"m\"}",
        b"{\"input\": [{\"type\": \"message\", \"role\": \"user\", \"content\": 3}]}",
        b"{\"type\":\"response_item\",\"payload\":{\"type\":\"function_call_output\",\"call_id\":1}}",
        b"{\"type\":\"compacted\",\"payload\":{\"replacement_history\":[1]}}\n{\"type\":\"session_meta\",\"payload\":{}}",
        b"[{\"role\":\"assistant\",\"content\":\"<a>\"},{\"role\":\"user\",\"content\":\"[a] Result:\"}]",
        b"{\"a\":1}\n{\"b\":",
    ];
    for input in inputs {
        for format in std::iter::once(None).chain(Format::ALL.map(Some)) {
            let opts = ReadOptions {
                format,
                select: None,
            };
            if let Ok(doc) = read(input, "x.json", &opts) {
                let _ = doc.write();
            }
        }
    }
}
