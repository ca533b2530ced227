//! Known frames ([`crate::frames`]): a body whose system prompt and tools come from the memo
//! reads as a read of the whole text does, writes back byte for byte, and a changed member is
//! read again.

use crate::frames::FrameMemo;
use crate::{read, Document, ReadOptions};
use condense_model::{Content, Format};
use std::sync::Arc;

fn anthropic() -> ReadOptions {
    ReadOptions {
        format: Some(Format::Anthropic),
        ..ReadOptions::default()
    }
}

/// `text` read as the proxy reads it: nothing known of its list, `memo` for its frame.
fn read_framed(text: &str, opts: &ReadOptions, memo: &FrameMemo) -> Document {
    let nothing = |_: u64| Vec::new();
    crate::read_shared_knowing(
        Arc::new(text.to_string()),
        "body.json",
        opts,
        (&nothing, None),
        Some(memo),
    )
    .unwrap()
}

/// A body with a long system prompt (`system` as given) and tool list, the list where `at`
/// says (`"first"` or `"last"`). Its messages are ones the quick reader reads: a memo is taken
/// only beside a quick list.
fn body(system: &str, tools: usize, at: &str) -> String {
    let messages: Vec<String> = (0..12).map(super::known::message).collect();
    let messages = format!("[{}]", messages.join(", "));
    let tools: Vec<String> = (0..tools)
        .map(|k| format!(r#"{{"name": "Tool{k}", "description": "Runs step {k} \"well\".", "input_schema": {{"type": "object"}}}}"#))
        .collect();
    let frame = format!(r#""system": {system}, "tools": [{}]"#, tools.join(", "));
    match at {
        "first" => format!(r#"{{"messages": {messages}, "model": "m", {frame}}}"#),
        _ => format!(r#"{{"model": "m", {frame}, "max_tokens": 10, "messages": {messages}}}"#),
    }
}

#[test]
fn a_frame_from_the_memo_reads_and_writes_as_the_whole_text_does() {
    let long = "Follow the conventions, caf\\u00e9.\\n".repeat(60);
    let systems = [
        format!(r#""{long}""#),
        format!(
            r#"[{{"type": "text", "text": "{long}", "cache_control": {{"type": "ephemeral"}}}}]"#
        ),
    ];
    let memo = FrameMemo::default();
    for system in &systems {
        for at in ["first", "last"] {
            let text = body(system, 30, at);
            let plain = read(text.as_bytes(), "body.json", &anthropic()).unwrap();
            // The first read keeps the members, the next ones take them.
            for round in 0..3 {
                let doc = read_framed(&text, &anthropic(), &memo);
                assert_eq!(doc.conversations(), plain.conversations(), "{at} {round}");
                let out = doc.write().unwrap();
                assert_eq!(out, text.as_bytes(), "{at} {round}");
                assert!(doc.unchanged());
            }
        }
    }
    // Each system prompt and the tool list (the same bytes in every body), taken by every read
    // but the first of each.
    assert_eq!(memo.len(), 3);
    assert_eq!(memo.taken(), 2 * 2 * 3 * 2 - 3);

    // A stage's change to a system prompt from the memo is written, and the memo's copy is
    // not changed by it.
    let text = body(&systems[0], 30, "last");
    let mut doc = read_framed(&text, &anthropic(), &memo);
    doc.conversations_mut()[0].system = Some(Content::string("short"));
    let out = String::from_utf8(doc.write().unwrap()).unwrap();
    assert!(out.contains(r#""system": "short""#), "{out}");
    let again = read_framed(&text, &anthropic(), &memo);
    let plain = read(text.as_bytes(), "body.json", &anthropic()).unwrap();
    assert_eq!(again.conversations(), plain.conversations());

    // Another system prompt is read, and kept too.
    let other = body(&format!(r#""{}""#, "Be brief. ".repeat(200)), 30, "last");
    let doc = read_framed(&other, &anthropic(), &memo);
    let plain = read(other.as_bytes(), "body.json", &anthropic()).unwrap();
    assert_eq!(doc.conversations(), plain.conversations());
    assert_eq!(memo.len(), 4);
}

#[test]
fn what_the_memo_does_not_cover_is_read_as_before() {
    let memo = FrameMemo::default();
    let long = format!(r#""{}""#, "Follow the conventions. ".repeat(80));
    let text = body(&long, 30, "last");
    read_framed(&text, &anthropic(), &memo);
    assert_eq!(memo.len(), 2);

    // A member written twice keeps its last value, as serde_json reads it: the second system
    // prompt (not in the memo), then the first (in it).
    let twice = text.replacen(
        r#""model": "m","#,
        &format!(r#""model": "m", "system": "{}","#, "x".repeat(2000)),
        1,
    );
    let reversed = text.replacen(
        r#", "max_tokens": 10"#,
        &format!(r#", "system": "{}", "max_tokens": 10"#, "y".repeat(2000)),
        1,
    );
    let taken = memo.taken();
    for text in [&twice, &reversed] {
        for _ in 0..2 {
            let doc = read_framed(text, &anthropic(), &memo);
            let plain = read(text.as_bytes(), "body.json", &anthropic()).unwrap();
            assert_eq!(doc.conversations(), plain.conversations());
            assert_eq!(doc.write().unwrap(), text.as_bytes());
        }
    }
    // Only the value a repeated key keeps is looked up: the tools at every read; in `twice`
    // the system prompt written last (the memo's) at both reads, in `reversed` the new one
    // (kept at the first read) at the second.
    assert_eq!(memo.taken() - taken, 2 * 2 + 2 + 1);

    // A system prompt the reader refuses is not kept, and the read names the same error.
    let bad = body(
        &format!(r#"[{{"type": 5, "text": "{}"}}]"#, "z".repeat(2000)),
        0,
        "last",
    );
    let before = memo.len();
    let nothing = |_: u64| Vec::new();
    let err = crate::read_shared_knowing(
        Arc::new(bad.clone()),
        "body.json",
        &anthropic(),
        (&nothing, None),
        Some(&memo),
    )
    .unwrap_err();
    let plain = read(bad.as_bytes(), "body.json", &anthropic()).unwrap_err();
    assert_eq!(err.to_string(), plain.to_string());
    assert_eq!(memo.len(), before);

    // A format not said (detected): the memo is not asked.
    let memo = FrameMemo::default();
    let doc = read_framed(&text, &ReadOptions::default(), &memo);
    let plain = read(text.as_bytes(), "body.json", &ReadOptions::default()).unwrap();
    assert_eq!(doc.conversations(), plain.conversations());
    assert!(memo.is_empty());
    // Said to be OpenAI Chat, whose `system` member is not its system prompt (that is a
    // message): only the tools are kept.
    let openai = ReadOptions {
        format: Some(Format::OpenAi),
        ..ReadOptions::default()
    };
    for _ in 0..2 {
        let doc = read_framed(&text, &openai, &memo);
        let plain = read(text.as_bytes(), "body.json", &openai).unwrap();
        assert_eq!(doc.conversations(), plain.conversations());
        assert_eq!(doc.write().unwrap(), text.as_bytes());
    }
    assert_eq!(memo.len(), 1);
}
