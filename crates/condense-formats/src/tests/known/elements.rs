//! Known lists of OpenAI Chat and Responses bodies: the format said, the elements parsed for
//! that format's reader, the known prefix left unread; the document writes, fingerprints and
//! reads back as the document of a full read, and its lists are kept under keys of their own.

use super::{assert_read_as_whole, unread_count};
use crate::known::{KnownList, ALWAYS_READ};
use crate::{read, Document, ReadOptions};
use condense_model::{Content, Format};

/// The formats whose lists are read for their own reader.
const FORMATS: [Format; 2] = [Format::OpenAi, Format::Responses];

fn said(format: Format) -> ReadOptions {
    ReadOptions {
        format: Some(format),
        ..ReadOptions::default()
    }
}

/// Message `i` of a long session in `format`. OpenAI Chat: a system message first, then users,
/// assistant tool calls and tool results. Responses: user messages, reasoning, function calls
/// and their outputs.
fn message(format: Format, i: usize) -> String {
    let filler = "line of output \\\"quoted\\\"\\n".repeat(10);
    if format == Format::Responses {
        return match i % 4 {
            0 => format!(
                r#"{{"type": "message", "role": "user", "content": [{{"type": "input_text", "text": "step {i}"}}]}}"#
            ),
            1 => {
                format!(r#"{{"type": "reasoning", "summary": [], "encrypted_content": "gAAA{i}"}}"#)
            }
            2 => format!(
                r#"{{"type": "function_call", "name": "shell", "arguments": "{{\"n\": {i}}}", "call_id": "c{i}"}}"#
            ),
            _ => format!(
                r#"{{"type": "function_call_output", "call_id": "c{}", "output": "{filler}"}}"#,
                i - 1
            ),
        };
    }
    match (i, i % 3) {
        (0, _) => r#"{"role": "system", "content": "You are an agent."}"#.to_string(),
        (_, 0) => format!(r#"{{"role": "user", "content": "step {i}"}}"#),
        (_, 1) => format!(
            r#"{{"role": "assistant", "content": null, "tool_calls": [{{"id": "c{i}", "type": "function", "function": {{"name": "bash", "arguments": "{{\"n\": {i}}}"}}}}]}}"#
        ),
        _ => format!(
            r#"{{"role": "tool", "tool_call_id": "c{}", "content": "{filler}"}}"#,
            i - 1
        ),
    }
}

/// A request body of `n` messages in `format`, `head` before its list, `tools` its tool list.
fn body_with(format: Format, n: usize, head: &str, tools: &str) -> String {
    let items: Vec<String> = (0..n).map(|i| message(format, i)).collect();
    let items = items.join(",\n  ");
    match format {
        Format::Responses => format!(
            "{{{head}\"instructions\": \"You are an agent.\", \"input\": [\n  {items}\n], \"tools\": [{tools}]}}"
        ),
        _ => format!("{{{head}\"messages\": [\n  {items}\n], \"tools\": [{tools}]}}"),
    }
}

fn body(format: Format, n: usize, head: &str) -> String {
    let tool = match format {
        Format::Responses => r#"{"type": "function", "name": "shell"}"#,
        _ => r#"{"type": "function", "function": {"name": "bash"}}"#,
    };
    body_with(format, n, head, tool)
}

/// `text` read with `opts`, knowing only `known`.
fn read_knowing(text: &str, opts: &ReadOptions, known: &[(u64, KnownList)]) -> Document {
    super::try_read_knowing_as(text.as_bytes().to_vec(), opts, known).unwrap()
}

#[test]
fn a_list_that_starts_with_a_known_one_reads_only_what_it_must() {
    for (format, n) in FORMATS.into_iter().flat_map(|f| [(f, 40), (f, 400)]) {
        let opts = said(format);
        // The first read knows nothing, and keeps a list for the next.
        let earlier = read_knowing(&body(format, n, ""), &opts, &[]);
        assert_eq!(unread_count(&earlier), 0);
        let (key, list) = earlier.known_list().expect("the list is kept");
        assert_eq!(list.messages, n);
        let text = body(format, n + 3, "\"model\": \"gpt-5\", ");
        let doc = read_knowing(&text, &opts, &[(key, list.clone())]);
        let full = read(text.as_bytes(), "in.json", &opts).unwrap();
        let mask = doc.unread(0).expect("some left unread").to_vec();
        let expected: Vec<bool> = (0..n + 3).map(|i| (ALWAYS_READ..n).contains(&i)).collect();
        assert_eq!(mask, expected, "{format:?} {n}");
        assert_read_as_whole(&doc, &full, &mask);
        // Unchanged, it writes back as read; a changed message as the full read writes it.
        assert_eq!(doc.write().unwrap(), text.as_bytes());
        let (mut doc, mut full) = (doc, full);
        for d in [&mut doc, &mut full] {
            d.conversations_mut()[0].messages[n + 1].content = Content::string("cut");
        }
        assert_eq!(doc.write().unwrap(), full.write().unwrap());
        // The list kept for the next turn is the full read's, and the rest reads as it does.
        let (next_key, next) = doc.known_list().unwrap();
        let (full_key, full_next) = full_list(format, &text);
        assert_eq!(next_key, full_key);
        assert!(next.bytes == full_next.bytes && next.prints == full_next.prints);
        let whole = read(text.as_bytes(), "in.json", &opts).unwrap();
        assert_eq!(doc.read_unread(0).unwrap(), whole.conversations()[0]);

        // Read as another format, or not said, the text does not take the list: its key is
        // another. Detected, the text reads (as its own format); said to be another, it may
        // not read at all, which takes nothing either.
        let knowing = [(key, list.clone())];
        let detected =
            super::try_read_knowing_as(text.as_bytes().to_vec(), &Default::default(), &knowing)
                .expect("the text reads with its format detected");
        assert_eq!(detected.format(), format);
        assert_eq!(unread_count(&detected), 0, "{format:?} detected");
        for other in FORMATS.into_iter().chain([Format::Anthropic]) {
            if other == format {
                continue;
            }
            let opts = ReadOptions {
                format: Some(other),
                ..ReadOptions::default()
            };
            if let Ok(doc) = super::try_read_knowing_as(text.as_bytes().to_vec(), &opts, &knowing) {
                assert_eq!(unread_count(&doc), 0, "{format:?} read as {other:?}");
            }
        }
    }
}

/// A client that masks an older tool result in place (OpenHands' observation masking) sends
/// the list changed there: an OpenAI Chat or Responses list is left unread up to the last
/// multiple of [`crate::known::STRIDE`] before the edit, and reads, fingerprints and writes as
/// a full read.
#[test]
fn a_list_edited_in_place_leaves_the_messages_before_the_edit_unread() {
    for format in FORMATS {
        let opts = said(format);
        let earlier = read_knowing(&body(format, 400, ""), &opts, &[]);
        let known = [earlier.known_list().expect("the list is kept")];
        // The tool result (or function call output) at 302 or 303 masked.
        let at = (300..310)
            .find(|&i| message(format, i).contains("line of output"))
            .unwrap();
        let masked =
            message(format, at).replace(&"line of output \\\"quoted\\\"\\n".repeat(10), "<MASKED>");
        assert_ne!(masked, message(format, at));
        let text = body(format, 403, "").replacen(&message(format, at), &masked, 1);
        let doc = read_knowing(&text, &opts, &known);
        let mask = doc.unread(0).expect("some left unread").to_vec();
        assert_eq!(mask.iter().rposition(|&u| u), Some(255), "{format:?}");
        let full = read(text.as_bytes(), "in.json", &opts).unwrap();
        assert_read_as_whole(&doc, &full, &mask);
        assert_eq!(doc.write().unwrap(), text.as_bytes());
    }
}

/// A bare Responses item list is known as a body's `input` is.
#[test]
fn a_bare_item_list_is_known_as_a_body_is() {
    let opts = said(Format::Responses);
    let list = |n: usize| {
        let items: Vec<String> = (0..n).map(|i| message(Format::Responses, i)).collect();
        format!("[{}]", items.join(", "))
    };
    let earlier = read_knowing(&list(50), &opts, &[]);
    let known = earlier.known_list().expect("the list is kept");
    let text = list(53);
    let doc = read_knowing(&text, &opts, &[known]);
    assert_eq!(unread_count(&doc), 50 - ALWAYS_READ);
    let full = read(text.as_bytes(), "in.json", &opts).unwrap();
    assert_read_as_whole(&doc, &full, doc.unread(0).unwrap());
    assert_eq!(doc.write().unwrap(), text.as_bytes());
}

/// A body whose history a known list covers takes its frame from the memo when its bytes were
/// read before (an OpenAI Chat body its tool definitions; a Responses body its tools and its
/// `instructions`), and reads as a read of the whole text does.
#[test]
fn a_body_takes_its_frame_from_the_memo() {
    use std::sync::Arc;
    for format in FORMATS {
        let tools: Vec<String> = (0..20)
            .map(|k| match format {
                Format::Responses => format!(r#"{{"type": "function", "name": "t{k}", "description": "Runs step {k} of the task.", "parameters": {{"type": "object"}}}}"#),
                _ => format!(r#"{{"type": "function", "function": {{"name": "t{k}", "description": "Runs step {k} of the task.", "parameters": {{"type": "object"}}}}}}"#),
            })
            .collect();
        let instructions = "Follow the repository's conventions. ".repeat(40);
        let with_frame = |n: usize| {
            body_with(format, n, "", &tools.join(", ")).replacen(
                "\"You are an agent.\"",
                &format!("\"{instructions}\""),
                1,
            )
        };
        let memo = crate::frames::FrameMemo::default();
        let read_with = |text: &str, known: &[(u64, KnownList)]| {
            let shared = Arc::new(text.to_string());
            let lookup = super::lookup_in(known);
            let opts = said(format);
            crate::read_shared_knowing(shared, "in.json", &opts, (&lookup, None), Some(&memo))
                .unwrap()
        };
        let earlier = read_with(&with_frame(60), &[]);
        let known = earlier.known_list().unwrap();
        // Chat's system prompt is a message: only its tools are kept.
        let members = if format == Format::Responses { 2 } else { 1 };
        assert_eq!(memo.len(), members, "{format:?}");
        let text = with_frame(63);
        let doc = read_with(&text, &[known]);
        assert!(unread_count(&doc) > 0);
        assert_eq!(
            memo.taken(),
            members,
            "{format:?}: the second read took them"
        );
        let full = read(text.as_bytes(), "in.json", &said(format)).unwrap();
        assert_read_as_whole(&doc, &full, doc.unread(0).unwrap());
        assert_eq!(doc.write().unwrap(), text.as_bytes());
    }
}

/// The list a read of the whole `text` keeps (read knowing nothing).
fn full_list(format: Format, text: &str) -> (u64, KnownList) {
    read_knowing(text, &said(format), &[]).known_list().unwrap()
}

/// A body written turn after turn with one memo reads back the short way, as a read of the
/// whole output does (the Anthropic layouts: `tests::read_back`).
#[test]
fn a_body_reads_back_the_short_way() {
    for format in FORMATS {
        let opts = said(format);
        let mut memo = crate::WriteMemo::new();
        let mut short = 0;
        for n in (60..=120).step_by(6) {
            let text = body(format, n, "");
            let mut doc = read_knowing(&text, &opts, &[]);
            crate::tests::memo::compress(&mut doc.conversations_mut()[0]);
            let out = doc.write_remembering(&mut memo).unwrap();
            let full = read(&out, "out.json", &opts).unwrap();
            if let Some((back, _)) = doc.read_serialized(&out, &memo, &opts) {
                short += 1;
                let produced = &doc.conversations()[0];
                assert_eq!(back.into_conversation(produced), full.conversations()[0]);
            }
            let back = doc.read_back((&out, "out.json"), &mut memo, &opts).unwrap();
            let [back] = <[crate::ReadBack; 1]>::try_from(back).unwrap();
            let produced = &doc.conversations()[0];
            assert_eq!(
                back.into_conversation(produced),
                full.conversations()[0],
                "{format:?} {n}"
            );
        }
        assert_eq!(short, 11, "{format:?}");
    }
}

/// The OpenAI Chat format said of a file whose root list holds conversations, not messages
/// (tau-bench's results): its lists are read as before, and none is kept.
#[test]
fn a_root_list_of_conversations_said_to_be_chat_reads_as_before() {
    let text = r#"[{"task_id": 0, "traj": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]},
 {"task_id": 1, "traj": [{"role": "system", "content": "be brief"}, {"role": "user", "content": "yo"}]}]"#;
    for doc in [
        read(text.as_bytes(), "runs.json", &said(Format::OpenAi)).unwrap(),
        read_knowing(text, &said(Format::OpenAi), &[]),
    ] {
        assert_eq!(doc.conversations().len(), 2);
        assert_eq!(doc.conversations()[1].messages.len(), 2);
        assert_eq!(doc.write().unwrap(), text.as_bytes());
        assert!(doc.known_list().is_none());
    }
}

/// A Responses body whose `input` is a string is read as before, and no list is kept.
#[test]
fn a_responses_body_with_a_string_input_keeps_no_list() {
    let text = r#"{"model": "gpt-5", "instructions": "Be brief.", "input": "just this"}"#;
    let doc = read_knowing(text, &said(Format::Responses), &[]);
    assert_eq!(doc.conversations()[0].messages.len(), 1);
    assert_eq!(doc.write().unwrap(), text.as_bytes());
    assert!(doc.known_list().is_none());
}

/// A list whose read noted a message it does not understand (an OpenAI Chat `function` role,
/// kept verbatim) is not kept: a later read that left that message unread would not note it,
/// and its warnings would not be a full read's. The campaign's knowing check found this.
#[test]
fn a_list_with_a_message_the_read_does_not_understand_is_not_kept() {
    let opts = said(Format::OpenAi);
    let legacy = r#"{"role": "function", "name": "bash", "content": "ok"}"#;
    let text = body(Format::OpenAi, 40, "").replacen(
        r#"{"role": "user", "content": "step 12"}"#,
        legacy,
        1,
    );
    let earlier = read_knowing(&text, &opts, &[]);
    assert_eq!(earlier.warnings().len(), 1, "{:?}", earlier.warnings());
    assert!(earlier.known_list().is_none());
    // Without it, the list is kept.
    assert!(read_knowing(&body(Format::OpenAi, 40, ""), &opts, &[])
        .known_list()
        .is_some());
}
