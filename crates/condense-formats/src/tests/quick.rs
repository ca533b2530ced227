//! Large message lists read without a JSON tree ([`crate::quick`]) read exactly as through one:
//! each body is read as usual and with `--select ""` (the same conversation, never read quick),
//! and both must give the same format, conversations, warnings, errors and output bytes.

use crate::error::Ctx;
use crate::quick::{may_be_cline, message, message_any_order, stubs, to_value};
use crate::{read, ReadOptions};
use condense_model::Message;
use serde_json::Value;

/// A message list of `n` messages (at least 256, over 64 KB in all: read on every core), whose
/// message `i` is `message(i)`.
fn list(n: usize, message: impl Fn(usize) -> String) -> String {
    let items: Vec<String> = (0..n).map(message).collect();
    format!("[{}]", items.join(", "))
}

fn exchange(i: usize) -> String {
    let filler = "lorem ipsum \\\"dolor\\\" sit amet\\n".repeat(8);
    match i % 3 {
        0 => format!(r#"{{"role": "user", "content": "do step {i}: {filler}"}}"#),
        1 => format!(
            r#"{{"role":"assistant","content":[{{"type":"text","text":"ok {i}"}},{{"type":"tool_use","id":"t{i}","name":"Read","input":{{"path":"/a/{i}","n":[{i},2],"o":{{}}}}}}]}}"#
        ),
        _ => format!(
            r#"{{"role":"user","content":[{{"type":"tool_result","tool_use_id":"t{}","content":"{filler} é\ud83d\ude00"}},{{"type":"text","text":"next"}}]}}"#,
            i - 1
        ),
    }
}

/// Reads `text` as usual and through `--select ""`, and checks both agree in everything.
fn same_as_slow(text: &str) -> Option<crate::Format> {
    assert!(text.len() >= crate::container::PARALLEL_FROM);
    let fast = read(text.as_bytes(), "big.json", &ReadOptions::default());
    let slow_opts = ReadOptions {
        select: Some(String::new()),
        ..ReadOptions::default()
    };
    let slow = read(text.as_bytes(), "big.json", &slow_opts);
    match (fast, slow) {
        (Ok(fast), Ok(slow)) => {
            assert_eq!(fast.format(), slow.format());
            assert_eq!(fast.conversations(), slow.conversations());
            assert_eq!(fast.warnings(), slow.warnings());
            assert_eq!(fast.write().unwrap(), text.as_bytes(), "byte for byte");
            Some(fast.format())
        }
        (Err(fast), Err(slow)) => {
            assert_eq!(fast.to_string(), slow.to_string());
            None
        }
        (fast, slow) => panic!("{:?} / {:?}", fast.err(), slow.err()),
    }
}

/// How many messages of `text` the parallel parse reads quick (`None`: it reads the list as
/// JSON).
pub(super) fn quick_messages(text: &str) -> Option<usize> {
    let mut finder = crate::scan::Finder::default();
    finder.scan(text, crate::scan::trimmed(text.as_bytes(), 0..text.len()));
    let (_, list) = crate::parallel::parse(text, &finder, true, (None, None))?;
    list.map(|l| l.messages.len())
}

#[test]
fn large_bodies_and_lists_read_as_through_a_json_tree() {
    use crate::Format;
    let messages = list(900, exchange);
    let body = format!(r#"{{"model": "m", "messages": {messages}, "max_tokens": 5}}"#);
    assert_eq!(same_as_slow(&body), Some(Format::Anthropic));
    assert_eq!(same_as_slow(&messages), Some(Format::Anthropic));
    assert_eq!(quick_messages(&body), Some(900));
    assert_eq!(quick_messages(&messages), Some(900));

    // One message the quick reader does not take: the list is read as before.
    let odd = |at: usize, with: &'static str| {
        list(900, move |i| {
            if i == at {
                with.to_string()
            } else {
                exchange(i)
            }
        })
    };
    for with in [
        r#"{"role":"assistant","content":[{"type":"tool_use","id":"x","name":"n","input":{"f":-1.5e3}}]}"#,
        r#"{"role":"user","content":"x","name":"n"}"#,
        r#"{"role":"weird","content":"x"}"#,
    ] {
        let messages = odd(500, with);
        assert_eq!(quick_messages(&messages), None, "{with}");
        assert_eq!(same_as_slow(&messages), Some(Format::Anthropic), "{with}");
        let body = format!(r#"{{"messages": {messages}}}"#);
        assert_eq!(same_as_slow(&body), Some(Format::Anthropic), "{with}");
    }
    // Keys in another order, `cache_control`, thinking: read in any order, the list quick.
    for with in [
        r#"{"role":"user","content":[{"type":"text","text":"a","cache_control":{"type":"ephemeral"}}]}"#,
        r#"{"content":"x","role":"user"}"#,
        r#"{"role":"user","content":[{"tool_use_id":"t1","type":"tool_result","content":"ok"}]}"#,
    ] {
        let messages = odd(500, with);
        assert_eq!(quick_messages(&messages), Some(900), "{with}");
        assert_eq!(same_as_slow(&messages), Some(Format::Anthropic), "{with}");
        let body = format!(r#"{{"messages": {messages}}}"#);
        assert_eq!(same_as_slow(&body), Some(Format::Anthropic), "{with}");
    }
    // OpenAI evidence in one message, and none at all: read as OpenAI.
    let system = odd(0, r#"{"role":"system","content":"be brief"}"#);
    assert_eq!(same_as_slow(&system), Some(Format::OpenAi));
    let plain = list(900, |i| {
        format!(
            r#"{{"role":"user","content":"{}"}}"#,
            "w ".repeat(40 + i % 7)
        )
    });
    assert_eq!(same_as_slow(&plain), Some(Format::OpenAi));
    let body = format!(r#"{{"system": "s", "messages": {plain}}}"#);
    assert_eq!(same_as_slow(&body), Some(Format::Anthropic));
    // A Cline history: its texts decide the format.
    let cline = list(900, |i| {
        match i {
        400 => r#"{"role":"assistant","content":[{"type":"text","text":"<read_file>\n<path>a</path>\n</read_file>"}]}"#.into(),
        401 => r#"{"role":"user","content":[{"type":"text","text":"[read_file for 'a'] Result:"},{"type":"text","text":"body"}]}"#.into(),
        _ => exchange(i),
    }
    });
    assert_eq!(same_as_slow(&cline), Some(Format::Cline));
    assert_eq!(
        quick_messages(&cline),
        None,
        "texts that may be Cline's markers"
    );
    // A repeated `messages` key: the last one is the list.
    let twice = format!(
        r#"{{"messages": {}, "messages": {messages}}}"#,
        list(300, exchange)
    );
    assert_eq!(same_as_slow(&twice), Some(Format::Anthropic));
    let twice = format!(r#"{{"messages": {messages}, "messages": []}}"#);
    assert_eq!(
        same_as_slow(&twice),
        Some(Format::OpenAi),
        "no evidence left"
    );
    // Errors are the reader's own.
    let bad = odd(
        300,
        r#"{"role":"user","content":[{"type":"tool_use","id":"x"}]}"#,
    );
    assert_eq!(same_as_slow(&bad), None);
    let bad = odd(300, r#"{"role":"user","content":"\q"}"#);
    assert_eq!(same_as_slow(&bad), None);
}

/// The Anthropic reader's message for `text`.
fn slow(text: &str, index: usize) -> Message {
    let value: Value = serde_json::from_str(text).unwrap();
    (crate::anthropic::CODEC.read)(value, index, &Ctx::new("t"), "/0").unwrap()
}

#[test]
fn a_quick_message_is_the_readers_message_and_gives_back_its_value() {
    let quick = [
        r#"{"role":"user","content":"plain \"quoted\"\n\u00e9\ud83d\ude00"}"#,
        r#"{"role": "assistant", "content": [{"type": "text", "text": "a"},
            {"type": "tool_use", "id": "t1", "name": "Read", "input": {"b": [1, 2], "a": {}}},
            {"type": "tool_use", "id": "t2", "name": "X", "input": {}}]}"#,
        r#"{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"x"},
            {"type":"tool_result","tool_use_id":"t2","content":[{"type":"text","text":"y"}],"is_error":true},
            {"type":"tool_result","tool_use_id":"t3"},
            {"type":"tool_result","tool_use_id":"t4","content":null,"is_error":false}]}"#,
        r#"{"role":"user"}"#,
        r#"{"role":"assistant","content":null}"#,
        r#"{"role":"user","content":[]}"#,
    ];
    for (i, text) in quick.iter().enumerate() {
        let m = message(text, i).unwrap().expect(text);
        assert_eq!(m, slow(text, i), "{text}");
        assert_eq!(
            to_value(m),
            serde_json::from_str::<Value>(text).unwrap(),
            "{text}"
        );
    }
}

/// Messages as Claude Code and the SDKs send them: what the strict reader refuses for their
/// key order, a `cache_control` or a thinking block is read in any order, as the Anthropic
/// reader reads it, and gives back its exact value (its keys in their order).
#[test]
fn a_message_in_any_order_is_the_readers_message_and_gives_back_its_value() {
    let any_order = [
        r#"{"role":"user","content":[{"tool_use_id":"t1","type":"tool_result","content":"x","is_error":false}]}"#,
        r#"{"role":"user","content":[{"type":"text","text":"a","cache_control":{"type":"ephemeral","ttl":"5m"}}]}"#,
        r#"{"role":"assistant","content":[{"type":"thinking","thinking":"t","signature":"s"},{"type":"tool_use","id":"t","name":"n","input":{"a":[1,{"b":"-1.5e3"}]},"cache_control":{"type":"ephemeral"}}]}"#,
        r#"{"content":[{"text":"a","type":"text"}],"role":"user"}"#,
        r#"{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":[{"type":"text","text":"y","cache_control":{"type":"ephemeral"}}]}]}"#,
    ];
    for (i, text) in any_order.iter().enumerate() {
        assert_eq!(message(text, i).unwrap(), None, "quick already: {text}");
        let m = message_any_order(text, i).expect(text);
        assert_eq!(m, slow(text, i), "{text}");
        let value: Value = serde_json::from_str(text).unwrap();
        assert_eq!(
            serde_json::to_string(&to_value(m)).unwrap(),
            serde_json::to_string(&value).unwrap(),
            "{text}"
        );
    }
    let still_not = [
        r#"{"role":"user","content":"x","name":"n"}"#,
        r#"{"role":"system","content":"x"}"#,
        r#"{"role":"user","content":[{"type":"text","text":"a","citations":[]}]}"#,
        r#"{"role":"user","content":[{"type":"image","source":{"type":"url","url":"u"}}]}"#,
        r#"{"role":"user","content":[{"type":"server_tool_use","id":"s","name":"n","input":{}}]}"#,
        r#"{"role":"user","content":[{"id":"t","type":"tool_use","name":"n","input":{"x":-1}}]}"#,
        r#"{"role":"user","content":[{"id":"t","type":"tool_use","name":"n","input":[1.5]}]}"#,
        r#"{"role":"user","content":[{"id":"t","type":"tool_use","name":"n","input":{"x":2e3}}]}"#,
        r#"{"role":"user","content":[{"type":"text","text":"a","cache_control":{"n":-1}}]}"#,
    ];
    for (i, text) in still_not.iter().enumerate() {
        assert_eq!(message_any_order(text, i), None, "{text}");
    }
}

#[test]
fn anything_else_is_not_quick_and_still_consumed() {
    let not_quick = [
        r#"{"content":"x","role":"user"}"#,
        r#"{"role":"user","content":"x","role":"user"}"#,
        r#"{"role":"system","content":"x"}"#,
        r#"{"role":"tool","content":"x"}"#,
        r#"{"role":5,"content":"x"}"#,
        r#"{"role":"user","content":"x","name":"n"}"#,
        r#"{"role":"user","content":[{"type":"text","text":"a","cache_control":{"type":"ephemeral"}}]}"#,
        r#"{"role":"user","content":[{"text":"a","type":"text"}]}"#,
        r#"{"role":"user","content":[{"type":"image","source":{"type":"url","url":"u"}}]}"#,
        r#"{"role":"user","content":[{"type":"thinking","thinking":"t","signature":"s"}]}"#,
        r#"{"role":"user","content":[{"type":"tool_use","id":"t","name":"n","input":{"x":-1}}]}"#,
        r#"{"role":"user","content":[{"type":"tool_use","id":"t","name":"n","input":[1.5]}]}"#,
        r#"{"role":"user","content":[{"type":"tool_use","id":"t","name":"n"}]}"#,
        r#"{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","is_error":"no"}]}"#,
        r#"{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":[{"type":"image"}]}]}"#,
        r#"{"role":"user","content":[{"type":5}]}"#,
        r#"{"role":"user","content":[{"type":"text","text":7}]}"#,
        r#"{"role":"user","content":[1, [2], "s", null, {}]}"#,
        r#"{"role":"user","content":{"a":[1,{"b":2}]}}"#,
        r#"{"role":"user","content":7}"#,
        r#"[{"role":"user"}]"#,
        r#""text""#,
    ];
    for (i, text) in not_quick.iter().enumerate() {
        assert_eq!(message(text, i).unwrap(), None, "{text}");
    }
    assert!(
        message(r#"{"role":"user"} {}"#, 0).is_err(),
        "one value only"
    );
    assert!(message(r#"{"role":"user","#, 0).is_err());
}

#[test]
fn stubs_keep_what_detection_reads() {
    let texts = [
        r#"{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":"x"},{"type":"text","text":"[read_file for 'a.rs'] Result:\nfn f() {}"}]}"#,
        r#"{"role":"user","content":"a"}"#,
        r#"{"role":"user","content":[{"type":"tool_result","tool_use_id":"u","content":"y"},{"type":"text","text":"b"}]}"#,
        r#"{"role":"assistant","content":null}"#,
        r#"{"role":"user","content":"c"}"#,
    ];
    let messages: Vec<Message> = texts
        .iter()
        .map(|t| message(t, 0).unwrap().unwrap())
        .collect();
    assert!(may_be_cline(&messages[0]));
    assert!(!may_be_cline(&messages[2]));
    // Other user texts that start with `[` are not Cline markers: condense's own summaries,
    // Claude Code's interruption notes. A list holding them stays quick.
    for text in [
        r#"{"role":"user","content":"[condense: collapsed 12 earlier messages (ids #0…#11)]\nx"}"#,
        r#"{"role":"user","content":[{"type":"text","text":"[Request interrupted by user]"}]}"#,
        r#"{"role":"user","content":"[hi] Result: no name check"}"#,
    ] {
        assert!(!may_be_cline(&message(text, 0).unwrap().unwrap()), "{text}");
    }
    assert_eq!(
        Value::Array(stubs(&messages)),
        serde_json::json!([
            {"role":"user","content":[{"type":"tool_result"},{"type":"text"}]},
            {"role":"user","content":""},
            {"role":"assistant","content":null},
        ])
    );
}
