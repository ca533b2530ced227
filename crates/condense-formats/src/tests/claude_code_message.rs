//! A chat line's message read straight from its text (`anthropic::direct`) against the map
//! read: the same role, content, extras (order hints included), id and block facts, on every
//! chat message of the shipped sessions and on messages made to take every turn.

use super::support::fixture_files;
use crate::anthropic::direct;
use crate::claude_code::line::{member, read_message, read_message_map};
use crate::error::Ctx;
use condense_model::RawJson;

/// Whether `text` is read directly, after checking that the read (direct first) gives what the
/// map read gives.
fn direct_and_same(text: &str) -> bool {
    let ctx = Ctx::new("s.jsonl");
    let read = format!("{:?}", read_message(text, &ctx));
    let map = format!("{:?}", read_message_map(text, &ctx));
    assert_eq!(read, map, "{text}");
    // A text that is its own compact form (a line's message) keeps its tool inputs as written:
    // the same message as parsing them and writing them back.
    if RawJson::from_canonical_text(text).is_some() {
        let parsed = format!("{:?}", direct::read(text));
        assert_eq!(
            format!("{:?}", direct::read_canonical(text)),
            parsed,
            "{text}"
        );
    }
    direct::read(text).is_some()
}

#[test]
fn every_chat_message_of_the_shipped_sessions_reads_directly_as_the_map_read_reads_it() {
    let (mut messages, mut direct) = (0, 0);
    for path in fixture_files() {
        if path.extension().is_none_or(|e| e != "jsonl") {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        for line in text.lines() {
            let Some(members) = RawJson::canonical_members(line) else {
                continue;
            };
            let value = |key: &str| member(&members, line, key).map(|v| &line[v]);
            let chat = matches!(value("type"), Some("\"user\"" | "\"assistant\""));
            let Some(message) = value("message").filter(|m| chat && m.starts_with('{')) else {
                continue;
            };
            messages += 1;
            direct += usize::from(direct_and_same(message));
        }
    }
    // Claude Code's chat messages are read directly but for the few with an image.
    assert!(messages > 500, "{messages} chat messages");
    assert!(
        direct * 100 >= messages * 97,
        "{direct} of {messages} direct"
    );
}

#[test]
fn messages_of_every_shape_read_directly_or_are_declined() {
    let direct = [
        r#"{"role":"user","content":"hi"}"#,
        r#"{"role":"user"}"#,
        r#"{"content":null,"role":"assistant"}"#,
        // An assistant message as the API returns it: its other keys kept, in order.
        r#"{"id":"m1","type":"message","role":"assistant","model":"x","content":[{"type":"text","text":"a"},{"type":"thinking","thinking":"t","signature":"s"},{"type":"tool_use","id":"t1","name":"Read","input":{"a":1.5,"b":[1,{"c":null}]}}],"stop_reason":null,"usage":{"input_tokens":1}}"#,
        // Tool results in either order, with and without content and is_error.
        r#"{"role":"user","content":[{"tool_use_id":"t1","type":"tool_result","content":"ok","is_error":false}]}"#,
        r#"{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1"}]}"#,
        r#"{"role":"user","content":[{"type":"tool_result","is_error":true,"tool_use_id":"t1","content":[{"type":"text","text":"a"},{"text":"b","type":"text"}]}]}"#,
        r#"{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":null}]}"#,
        // An is_error that is not a boolean stays with the leftovers, where it was.
        r#"{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","is_error":"yes","content":"x"}]}"#,
        // Keys the reader does not map: kept, with an order hint when they come first.
        r#"{"role":"user","content":[{"type":"text","text":"a","cache_control":{"type":"ephemeral"}}]}"#,
        r#"{"role":"user","content":[{"citations":[],"type":"text","text":"a"}]}"#,
        r#"{"role":"user","content":[{"type":"tool_use","name":"n","id":"i","input":{}}]}"#,
        // A block of another type is kept whole, its input where it was among its keys.
        r#"{"role":"assistant","content":[{"type":"server_tool_use","id":"s","name":"web_search","input":{}}]}"#,
        r#"{"role":"assistant","content":[{"id":"s","input":{"query":"q","n":[1,2]},"type":"server_tool_use","name":"web_search"}]}"#,
        // An input on a block that reads none is a leftover like any other key.
        r#"{"role":"user","content":[{"type":"text","input":[1,{"a":"b"}],"text":"a"}]}"#,
        // Inputs of every kind of value, escapes and all, kept as written.
        r#"{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"Write","input":{"file_path":"/a\\b.rs","content":"fn main() {\n\t\"x\"\u0001 é\n}","n":-3,"ok":true,"none":null,"list":[]}},{"input":"a string","type":"tool_use","id":"t2","name":"n"},{"type":"tool_use","id":"t3","name":"n","input":[{}]}]}"#,
        // Escapes in keys, strings and ids.
        r#"{"role":"user","content":[{"type":"tool_result","tool_use_id":"t\"1","content":"a\nb\u0001"}],"i\u0064":"x\\y"}"#,
        r#"{"role":"assistant","content":[]}"#,
    ];
    for text in direct {
        assert!(direct_and_same(text), "declined: {text}");
    }
    let declined = [
        r#"{"role":"system","content":"s"}"#,
        r#"{"content":"no role"}"#,
        r#"{"role":7,"content":"x"}"#,
        r#"{"role":"user","content":5}"#,
        r#"{"role":"user","content":{"type":"text","text":"a"}}"#,
        r#"{"role":"user","content":["a string block"]}"#,
        r#"{"role":"user","content":[{"text":"no type"}]}"#,
        r#"{"role":"user","content":[{"type":3}]}"#,
        r#"{"role":"user","content":[{"type":"text"}]}"#,
        r#"{"role":"user","content":[{"type":"text","text":5}]}"#,
        r#"{"role":"user","content":[{"type":"text","text":"a","content":"b"}]}"#,
        r#"{"role":"user","content":[{"type":"tool_use","id":"i","name":"n"}]}"#,
        r#"{"role":"user","content":[{"type":"tool_result","content":"no id"}]}"#,
        r#"{"role":"user","content":[{"type":"image","source":{"type":"base64","media_type":"image/png","data":"AA=="}}]}"#,
        r#"{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":[{"type":"image","source":{"type":"url","url":"u"}}]}]}"#,
        r#"{"role":"assistant","content":[{"type":"web_search_tool_result","tool_use_id":"s","content":[]}]}"#,
        r#"{"role":"user","role":"user","content":"twice"}"#,
        r#"{"role":"user","content":[{"type":"text","text":"a","text":"b"}]}"#,
        r#""not an object""#,
        r#"{"role":"user","content":"x"} trailing"#,
    ];
    for text in declined {
        assert!(!direct_and_same(text), "read directly: {text}");
    }
}
