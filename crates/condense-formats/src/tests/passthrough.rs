//! Byte-exact passthrough: what no stage changed is written back as the exact bytes read, for
//! any input the reader accepts; what changed is serialized in the input's style; the texts
//! `expand` restores ([`crate::Document::set_original_text`]).

use super::support::fixture;
use crate::{read, Format, ReadOptions};
use condense_model::{Content, Role};

fn auto() -> ReadOptions {
    ReadOptions::default()
}

/// Reading and writing with no change gives the input back, byte for byte (and the document
/// says so: `unchanged`, `is_input`).
fn same(bytes: &[u8], source: &str) {
    let doc = read(bytes, source, &auto()).unwrap_or_else(|e| panic!("{source}: {e}"));
    let out = doc.write().unwrap();
    assert!(doc.unchanged() && doc.is_input(&out), "{source}");
    assert!(
        out == bytes,
        "{source}: not byte-exact:\n{}\n---\n{}",
        String::from_utf8_lossy(bytes),
        String::from_utf8_lossy(&out)
    );
}

#[test]
fn numbers_are_kept_as_written() {
    let body = r#"{"model":"m","temperature":1e5,"seed":12345678901234567890123,"top_p":-0,"n":1.0,"messages":[{"role":"user","content":"hi","score":1E2},{"role":"assistant","content":"ok","n":1}]}"#;
    same(body.as_bytes(), "big.json");
    // One message changed: the numbers of the other and of the body are still as written.
    let mut doc = read(body.as_bytes(), "big.json", &auto()).unwrap();
    doc.conversations_mut()[0].messages[1].content = Content::string("changed");
    let out = String::from_utf8(doc.write().unwrap()).unwrap();
    assert_eq!(
        out,
        body.replace(r#""content":"ok""#, r#""content":"changed""#)
    );
    // The changed message itself keeps the spelling of its numbers.
    doc.conversations_mut()[0].messages[0].content = Content::string("hello");
    let out = String::from_utf8(doc.write().unwrap()).unwrap();
    assert!(
        out.contains(r#"{"role":"user","content":"hello","score":1E2}"#),
        "{out}"
    );
    let line = r#"{"type":"user","uuid":"a","sessionId":"s","n":12345678901234567890123,"t":1e5,"z":-0,"message":{"role":"user","content":"hi"}}"#;
    let jsonl = format!("{line}\n");
    same(jsonl.as_bytes(), "s.jsonl");
    let mut doc = read(jsonl.as_bytes(), "s.jsonl", &auto()).unwrap();
    doc.conversations_mut()[0].messages[0].content = Content::string("hello");
    assert_eq!(
        String::from_utf8(doc.write().unwrap()).unwrap(),
        jsonl.replace(r#""content":"hi""#, r#""content":"hello""#)
    );
}

#[test]
fn crlf_is_kept_in_json_and_jsonl() {
    let json = "{\r\n  \"model\": \"m\",\r\n  \"messages\": [\r\n    {\r\n      \"role\": \"user\",\r\n      \"content\": \"hi\"\r\n    },\r\n    {\r\n      \"role\": \"assistant\",\r\n      \"content\": \"ok\"\r\n    }\r\n  ]\r\n}\r\n";
    same(json.as_bytes(), "a.json");
    let mut doc = read(json.as_bytes(), "a.json", &auto()).unwrap();
    doc.conversations_mut()[0].messages[1].content = Content::string("changed");
    let out = String::from_utf8(doc.write().unwrap()).unwrap();
    assert_eq!(out, json.replace("\"ok\"", "\"changed\""));
    let jsonl = "{\"type\":\"user\",\"uuid\":\"a\",\"sessionId\":\"s\",\"message\":{\"role\":\"user\",\"content\":\"hi\"}}\r\n{\"type\":\"summary\",\"summary\":\"x\"}\r\n";
    same(jsonl.as_bytes(), "s.jsonl");
    // Mixed line ends are kept too.
    same(jsonl.replacen("\r\n", "\n", 1).as_bytes(), "s.jsonl");
}

#[test]
fn python_separators_blank_lines_and_trailing_spaces_in_jsonl() {
    let jsonl = concat!(
        "\n",
        "{\"type\": \"user\", \"uuid\": \"a\", \"sessionId\": \"s\", \"message\": {\"role\": \"user\", \"content\": \"hi\"}}   \n",
        "\n",
        "\n",
        "{\"type\": \"assistant\", \"uuid\": \"b\", \"parentUuid\": \"a\", \"sessionId\": \"s\", \"message\": {\"role\": \"assistant\", \"content\": [{\"type\": \"text\", \"text\": \"ok\"}]}}\t\n",
        "{\"type\": \"user\", \"uuid\": \"c\", \"parentUuid\": \"b\", \"sessionId\": \"s\", \"message\": {\"role\": \"user\", \"content\": \"more\"}}\n",
        "\n",
    );
    same(jsonl.as_bytes(), "s.jsonl");
    // The middle line changed: every other byte is the same, and the changed line has the
    // input's separators.
    let mut doc = read(jsonl.as_bytes(), "s.jsonl", &auto()).unwrap();
    assert_eq!(doc.format(), Format::ClaudeCode);
    doc.conversations_mut()[0].messages[1].content = Content::string("changed");
    let out = String::from_utf8(doc.write().unwrap()).unwrap();
    let want = jsonl.replace(
        "{\"type\": \"assistant\", \"uuid\": \"b\", \"parentUuid\": \"a\", \"sessionId\": \"s\", \"message\": {\"role\": \"assistant\", \"content\": [{\"type\": \"text\", \"text\": \"ok\"}]}}\t",
        "{\"type\": \"assistant\", \"uuid\": \"b\", \"parentUuid\": \"a\", \"sessionId\": \"s\", \"message\": {\"role\": \"assistant\", \"content\": \"changed\"}}",
    );
    assert_eq!(out, want);
}

#[test]
fn escapes_empty_objects_and_duplicate_keys_are_kept() {
    // `\/`, a surrogate pair, `{\n }`, and a repeated key (a stage sees the last value).
    let body = "{\"messages\": [{\"role\": \"user\", \"content\": \"a\\/b \\ud83d\\ude00\", \"meta\": {\n }, \"k\": 1, \"k\": 2}], \"metadata\": {\n }}";
    same(body.as_bytes(), "e.json");
    let doc = read(body.as_bytes(), "e.json", &auto()).unwrap();
    let msg = &doc.conversations()[0].messages[0];
    assert_eq!(msg.content.text(), "a/b 😀");
    assert!(msg.extra.as_str().contains("\"k\":2"), "{}", msg.extra);
}

#[test]
fn one_changed_message_in_a_pretty_json_body() {
    let bytes = fixture!("transcripts/sierra-research__tau-bench/gpt-4o-airline.json");
    let mut doc = read(&bytes, "t.json", &auto()).unwrap();
    assert!(doc.write().unwrap() == bytes);
    let conv = &mut doc.conversations_mut()[3];
    let i = conv
        .messages
        .iter()
        .position(|m| m.role == Role::Tool)
        .unwrap();
    conv.messages[i].content = Content::string("[cleared]");
    let out = doc.write().unwrap();
    // Everything before and after the changed element is the same bytes.
    let prefix = bytes.iter().zip(&out).take_while(|(a, b)| a == b).count();
    let suffix = bytes
        .iter()
        .rev()
        .zip(out.iter().rev())
        .take_while(|(a, b)| a == b)
        .count();
    let changed = String::from_utf8(out[prefix..out.len() - suffix].to_vec()).unwrap();
    assert!(changed.len() < 200, "{changed}");
    assert!(changed.contains("[cleared]"), "{changed}");
    // The changed element is indented as its neighbours.
    let element_start = String::from_utf8_lossy(&out[..prefix]).rfind('{').unwrap();
    let line_start = String::from_utf8_lossy(&out[..element_start])
        .rfind('\n')
        .unwrap();
    let indent = element_start - line_start - 1;
    let reread = read(&out, "t.json", &auto()).unwrap();
    assert_eq!(
        reread.conversations()[3].messages[i].content.text(),
        "[cleared]"
    );
    assert!(indent > 0);
}

#[test]
fn a_message_removed_and_one_added() {
    let body = "{\n  \"model\": \"m\",\n  \"messages\": [\n    {\"role\": \"user\", \"content\": \"a\"},\n    {\"role\": \"assistant\", \"content\": \"b\"},\n    {\"role\": \"user\", \"content\": \"c\"}\n  ]\n}\n";
    let mut doc = read(body.as_bytes(), "r.json", &auto()).unwrap();
    let conv = &mut doc.conversations_mut()[0];
    conv.messages.remove(1);
    let mut added = conv.messages[0].clone();
    added.content = Content::string("d");
    conv.messages.push(added);
    let out = String::from_utf8(doc.write().unwrap()).unwrap();
    assert_eq!(
        out,
        "{\n  \"model\": \"m\",\n  \"messages\": [\n    {\"role\": \"user\", \"content\": \"a\"},\n    {\"role\": \"user\", \"content\": \"c\"},\n    {\n      \"role\": \"user\",\n      \"content\": \"d\"\n    }\n  ]\n}\n"
    );
}

#[test]
fn a_changed_body_field_keeps_the_messages_bytes() {
    let body =
        "{\"messages\": [{\"role\": \"user\", \"content\": \"a\", \"n\": 1e5}], \"model\": \"m\"}";
    let mut doc = read(body.as_bytes(), "b.json", &auto()).unwrap();
    doc.conversations_mut()[0].extra =
        condense_model::RawJson::from_string_unchecked(r#"{"model":"other"}"#.into());
    let out = String::from_utf8(doc.write().unwrap()).unwrap();
    assert_eq!(
        out,
        "{\"messages\": [{\"role\": \"user\", \"content\": \"a\", \"n\": 1e5}], \"model\": \"other\"}"
    );
}

#[test]
fn identical_lines_and_original_texts() {
    let line = "{\"type\":\"user\",\"uuid\":\"a\",\"sessionId\":\"s\",\"message\":{\"role\":\"user\",\"content\":\"hi\"}}";
    let spaced = "{\"type\":\"summary\", \"summary\":\"x\"}";
    let jsonl = format!("{line}\n{spaced}\n{spaced}\n");
    let mut doc = read(jsonl.as_bytes(), "s.jsonl", &auto()).unwrap();
    let conv = doc.conversations()[0].clone();
    assert_eq!(
        doc.original_text(0, &conv.messages[0]).as_deref(),
        Some(line)
    );
    assert_eq!(
        doc.original_text(0, &conv.messages[2]).as_deref(),
        Some(spaced)
    );
    // A message no one read has no text.
    let mut other = conv.messages[0].clone();
    other.content = Content::string("bye");
    assert_eq!(doc.original_text(0, &other), None);
    assert_eq!(doc.original_text(1, &conv.messages[0]), None);

    // Expand: a stage replaced the first line; the archive gives back the message and its text.
    let original = conv.messages[0].clone();
    doc.conversations_mut()[0].messages[0] = other.clone();
    let text = doc.original_text(0, &original).unwrap().to_string();
    let mut compressed = read(&doc.write().unwrap(), "s.jsonl", &auto()).unwrap();
    assert!(compressed.write().unwrap() != jsonl.as_bytes());
    compressed.conversations_mut()[0].messages[0] = original.clone();
    // Written from the model, the restored line would be the same value in other bytes: set,
    // the text is used as it was.
    let hand = "{\"type\": \"user\",\"uuid\":\"a\",\"sessionId\":\"s\",\"message\":{\"role\":\"user\",\"content\":\"hi\"}}";
    assert!(compressed.set_original_text(0, &original, hand.to_string()));
    assert_eq!(
        String::from_utf8(compressed.write().unwrap()).unwrap(),
        format!("{hand}\n{spaced}\n{spaced}\n")
    );
    assert!(!compressed.set_original_text(0, &original, format!("{text}\n{text}")));
    assert!(!compressed.set_original_text(0, &original, "{\"a\":".into()));
}

#[test]
fn original_texts_of_json_elements() {
    let body = "[\n  {\"role\": \"user\", \"content\": \"a\"},\n  {\"role\": \"assistant\",\n   \"content\": \"b\"}\n]";
    let mut doc = read(body.as_bytes(), "l.json", &auto()).unwrap();
    let msgs = doc.conversations()[0].messages.clone();
    assert_eq!(
        doc.original_text(0, &msgs[1]).as_deref(),
        Some("{\"role\": \"assistant\",\n   \"content\": \"b\"}")
    );
    // An element's text may span lines in a JSON file.
    doc.conversations_mut()[0].messages[0].content = Content::string("x");
    let restored = msgs[0].clone();
    doc.conversations_mut()[0].messages[0] = restored.clone();
    assert!(doc.set_original_text(
        0,
        &restored,
        "{\"content\": \"a\",\n \"role\": \"user\"}".into()
    ));
    let out = String::from_utf8(doc.write().unwrap()).unwrap();
    assert_eq!(
        out,
        "[\n  {\"content\": \"a\",\n \"role\": \"user\"},\n  {\"role\": \"assistant\",\n   \"content\": \"b\"}\n]"
    );
}

#[test]
fn real_sessions_with_one_line_changed() {
    let files: [(&str, Vec<u8>); 2] = [
        (
            "claude.jsonl",
            fixture!("transcripts/DRMacIver__claude-reliability/transcript.jsonl"),
        ),
        (
            "rollout.jsonl",
            fixture!("transcripts/codemie-ai__codemie-code/rollout-2026-05-11T13-28-45-019e1695-0522-7c83-8b39-0dd379793f80.jsonl"),
        ),
    ];
    for (name, bytes) in files {
        let mut doc = read(&bytes, name, &auto()).unwrap();
        let conv = &mut doc.conversations_mut()[0];
        let i = conv
            .messages
            .iter()
            .rposition(|m| m.role == Role::User)
            .unwrap();
        conv.messages[i].content = Content::string("changed");
        let out = doc.write().unwrap();
        let lines = |b: &[u8]| -> Vec<String> {
            String::from_utf8(b.to_vec())
                .unwrap()
                .split('\n')
                .map(str::to_string)
                .collect()
        };
        let (before, after) = (lines(&bytes), lines(&out));
        assert_eq!(before.len(), after.len(), "{name}");
        let differ = before.iter().zip(&after).filter(|(a, b)| a != b).count();
        assert_eq!(differ, 1, "{name}: only the changed line differs");
    }
}

/// Every fixture file, as shipped and made non-canonical (CRLF; for JSONL also blank lines and
/// trailing spaces; and mixed line ends), reads and writes back byte for byte.
#[test]
fn every_fixture_in_every_spelling_comes_back_byte_for_byte() {
    for path in super::support::fixture_files() {
        let name = path.to_string_lossy().to_string();
        let text = String::from_utf8(std::fs::read(&path).unwrap()).unwrap();
        let mut spellings = vec![text.clone(), text.replace('\n', "\r\n")];
        if name.ends_with(".jsonl") {
            spellings.push(text.replace('\n', "  \n\n"));
            let mixed: String = text
                .split_inclusive('\n')
                .enumerate()
                .map(|(i, l)| {
                    if i % 2 == 1 {
                        l.replace('\n', "\r\n")
                    } else {
                        l.to_string()
                    }
                })
                .collect();
            spellings.push(mixed);
        }
        for spelling in spellings {
            same(spelling.as_bytes(), &name);
        }
    }
}

/// What the archive embeds unchecked: every original text a document gives is one JSON value
/// (surrounding spaces aside), in every fixture, CRLF and trailing spaces included.
#[test]
fn every_original_text_is_one_json_value() {
    let mut checked = 0;
    for path in super::support::fixture_files() {
        let name = path.to_string_lossy().to_string();
        let text = String::from_utf8(std::fs::read(&path).unwrap()).unwrap();
        for spelling in [text.clone(), text.replace('\n', " \r\n")] {
            let doc = read(spelling.as_bytes(), &name, &auto()).unwrap();
            for (i, conv) in doc.conversations().iter().enumerate() {
                for m in &conv.messages {
                    if let Some(t) = doc.original_text(i, m) {
                        assert!(
                            serde_json::from_str::<serde::de::IgnoredAny>(&t).is_ok(),
                            "{name}: {}",
                            &t[..t.len().min(80)]
                        );
                        checked += 1;
                    }
                }
            }
        }
    }
    assert!(checked > 1000, "{checked}");
}

#[test]
fn a_document_says_when_it_writes_its_input_back() {
    // A byte order mark, CRLF and an incomplete last line: all part of the input.
    let session = "\u{feff}{\"type\":\"user\",\"uuid\":\"u1\",\"message\":{\"role\":\"user\",\"content\":\"hi\"}}\r\n{\"type\":\"assistant\",\"uuid\":\"a1\",\"parentUuid\":\"u1\",\"message\":{\"role\":\"assistant\",\"content\":[{\"type\":\"text\",\"text\":\"ok\"}]}}\r\n{\"type\":\"us";
    let mut doc = read(session.as_bytes(), "s.jsonl", &auto()).unwrap();
    let out = doc.write().unwrap();
    assert!(out == session.as_bytes() && doc.unchanged() && doc.is_input(&out));
    assert!(!doc.is_input(&out[..out.len() - 1]));
    assert!(!doc.is_input(session.trim_start_matches('\u{feff}').as_bytes()));
    // A message changed: neither.
    let text = doc.conversations()[0].messages[1].content.clone();
    doc.conversations_mut()[0].messages[1].content = Content::string("changed");
    let out = doc.write().unwrap();
    assert!(!doc.unchanged() && !doc.is_input(&out));
    // Changed back: as read again.
    doc.conversations_mut()[0].messages[1].content = text;
    assert!(doc.unchanged() && doc.is_input(&doc.write().unwrap()));
}

/// A text the caller shares is the document's own: read knowing nothing, it writes back as
/// read; one with a byte order mark and an incomplete last line is kept without them in a copy
/// of its own, and the caller's text is left as it was.
#[test]
fn a_shared_text_reads_as_owned_bytes_do() {
    use std::sync::Arc;
    let nothing = |_: u64| Vec::new();
    let body = r#"{"model":"m","messages":[{"role":"user","content":"hi"}]}"#;
    let shared = Arc::new(body.to_string());
    let doc = crate::read_shared_knowing(
        Arc::clone(&shared),
        "b.json",
        &auto(),
        (&nothing, None),
        None,
    )
    .unwrap();
    let out = doc.write().unwrap();
    assert!(out == body.as_bytes() && doc.is_input(&out));
    // The caller's text itself, not a copy.
    assert!(Arc::ptr_eq(&doc.source.text, &shared));
    let session = "\u{feff}{\"type\":\"user\",\"uuid\":\"u1\",\"message\":{\"role\":\"user\",\"content\":\"hi\"}}\n{\"type\":\"us";
    let shared = Arc::new(session.to_string());
    let doc = crate::read_shared_knowing(
        Arc::clone(&shared),
        "s.jsonl",
        &auto(),
        (&nothing, None),
        None,
    )
    .unwrap();
    let owned = crate::read_owned(session.as_bytes().to_vec(), "s.jsonl", &auto()).unwrap();
    assert_eq!(doc.conversations(), owned.conversations());
    assert!(doc.write().unwrap() == session.as_bytes());
    // Without the mark and the cut line: a copy of its own, the caller's left whole.
    assert!(!Arc::ptr_eq(&doc.source.text, &shared));
    assert_eq!(*shared, session);
}
