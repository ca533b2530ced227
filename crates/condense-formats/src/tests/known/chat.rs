//! Known lists of OpenAI Chat bodies: the format said, the elements parsed for that format's
//! reader, the known prefix left unread; the document writes, fingerprints and reads back as
//! the document of a full read, and its lists are kept under keys of their own.

use super::{assert_read_as_whole, kept, unread_count};
use crate::known::{KnownList, ALWAYS_READ};
use crate::{read, Document, ReadOptions};
use condense_model::{Content, Format};

fn chat() -> ReadOptions {
    ReadOptions {
        format: Some(Format::OpenAi),
        ..ReadOptions::default()
    }
}

/// Message `i` of a long OpenAI Chat session: a system message first, then users, assistant
/// tool calls and tool results.
fn message(i: usize) -> String {
    let filler = "line of output \\\"quoted\\\"\\n".repeat(10);
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

fn body(n: usize, head: &str) -> String {
    let items: Vec<String> = (0..n).map(message).collect();
    format!(
        "{{{head}\"messages\": [\n  {}\n], \"tools\": [{{\"type\": \"function\", \"function\": {{\"name\": \"bash\"}}}}]}}",
        items.join(",\n  ")
    )
}

/// `text` read with `opts`, knowing only `known`.
fn read_knowing(text: &str, opts: &ReadOptions, known: &[(u64, KnownList)]) -> Document {
    super::try_read_knowing_as(text.as_bytes().to_vec(), opts, known).unwrap()
}

#[test]
fn a_chat_list_that_starts_with_a_known_one_reads_only_what_it_must() {
    for n in [40, 400] {
        // The first read knows nothing, and keeps a list for the next.
        let earlier = read_knowing(&body(n, ""), &chat(), &[]);
        assert_eq!(unread_count(&earlier), 0);
        let (key, list) = earlier
            .known_list(&kept(&earlier, &[n - 30, n - 20]))
            .expect("a chat list is kept");
        assert_eq!(list.messages, n);
        let text = body(n + 3, "\"model\": \"gpt-4o\", ");
        let doc = read_knowing(&text, &chat(), &[(key, list.clone())]);
        let full = read(text.as_bytes(), "in.json", &chat()).unwrap();
        let mask = doc.unread(0).expect("some left unread").to_vec();
        let expected: Vec<bool> = (0..n + 3)
            .map(|i| (ALWAYS_READ..n).contains(&i) && i != n - 30 && i != n - 20)
            .collect();
        assert_eq!(mask, expected, "{n}");
        assert_read_as_whole(&doc, &full, &mask);
        // Unchanged, it writes back as read; a changed message as the full read writes it.
        assert_eq!(doc.write().unwrap(), text.as_bytes());
        let (mut doc, mut full) = (doc, full);
        for d in [&mut doc, &mut full] {
            d.conversations_mut()[0].messages[n + 1].content = Content::string("cut");
        }
        assert_eq!(doc.write().unwrap(), full.write().unwrap());
        // The list kept for the next turn is the full read's, and the rest reads as it does.
        let out = kept(&full, &[n + 2]);
        let (next_key, next) = doc.known_list(&out).unwrap();
        let (full_key, full_next) = full_list(&text, &out);
        assert_eq!(next_key, full_key);
        assert!(next.bytes == full_next.bytes && next.prints == full_next.prints);
        let whole = read(text.as_bytes(), "in.json", &chat()).unwrap();
        assert_eq!(doc.read_unread(0).unwrap(), whole.conversations()[0]);

        // Read as anything but OpenAI Chat, the text does not take the chat list: its key is
        // another.
        let anthropic = ReadOptions {
            format: Some(Format::Anthropic),
            ..ReadOptions::default()
        };
        for opts in [ReadOptions::default(), anthropic] {
            let other = read_knowing(&text, &opts, &[(key, list.clone())]);
            assert_eq!(unread_count(&other), 0);
        }
    }
}

/// A Chat body whose history a known list covers takes its tool definitions from the frame
/// memo when their bytes were read before, and reads as a read of the whole text does.
#[test]
fn a_chat_body_takes_its_tools_from_the_frame_memo() {
    use std::sync::Arc;
    let tools: Vec<String> = (0..20)
        .map(|k| format!(r#"{{"type": "function", "function": {{"name": "t{k}", "description": "Runs step {k} of the task.", "parameters": {{"type": "object"}}}}}}"#))
        .collect();
    let with_tools = |n: usize| {
        body(n, "").replacen(
            r#""tools": [{"type": "function", "function": {"name": "bash"}}]"#,
            &format!(r#""tools": [{}]"#, tools.join(", ")),
            1,
        )
    };
    let memo = crate::frames::FrameMemo::default();
    let read_with = |text: &str, known: &[(u64, KnownList)]| {
        let shared = Arc::new(text.to_string());
        let lookup = super::lookup_in(known);
        crate::read_shared_knowing(shared, "in.json", &chat(), (&lookup, None), Some(&memo))
            .unwrap()
    };
    let earlier = read_with(&with_tools(60), &[]);
    let known = earlier.known_list(&[]).unwrap();
    assert_eq!(memo.len(), 1);
    let text = with_tools(63);
    let doc = read_with(&text, &[known]);
    assert!(unread_count(&doc) > 0);
    assert_eq!(memo.taken(), 1, "the second read took the tools");
    let full = read(text.as_bytes(), "in.json", &chat()).unwrap();
    assert_read_as_whole(&doc, &full, doc.unread(0).unwrap());
    assert_eq!(doc.write().unwrap(), text.as_bytes());
}

/// The list a read of the whole `text` keeps (read knowing nothing).
fn full_list(text: &str, out: &[u128]) -> (u64, KnownList) {
    read_knowing(text, &chat(), &[]).known_list(out).unwrap()
}

/// An OpenAI Chat body written turn after turn with one memo reads back the short way, as a
/// read of the whole output does (the Anthropic layouts: `tests::read_back`).
#[test]
fn a_chat_body_reads_back_the_short_way() {
    let mut memo = crate::WriteMemo::new();
    let mut short = 0;
    for n in (60..=120).step_by(6) {
        let text = body(n, "");
        let mut doc = read_knowing(&text, &chat(), &[]);
        crate::tests::memo::compress(&mut doc.conversations_mut()[0]);
        let out = doc.write_remembering(&mut memo).unwrap();
        let full = read(&out, "out.json", &chat()).unwrap();
        if let Some((back, _)) = doc.read_serialized(&out, &memo, &chat()) {
            short += 1;
            let produced = &doc.conversations()[0];
            assert_eq!(back.into_conversation(produced), full.conversations()[0]);
        }
        let back = doc
            .read_back((&out, "out.json"), &mut memo, &chat())
            .unwrap();
        let [back] = <[crate::ReadBack; 1]>::try_from(back).unwrap();
        let produced = &doc.conversations()[0];
        assert_eq!(
            back.into_conversation(produced),
            full.conversations()[0],
            "{n}"
        );
    }
    assert_eq!(short, 11);
}

/// The OpenAI Chat format said of a file whose root list holds conversations, not messages
/// (tau-bench's results): its lists are read as before, and none is kept.
#[test]
fn a_root_list_of_conversations_said_to_be_chat_reads_as_before() {
    let text = r#"[{"task_id": 0, "traj": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]},
 {"task_id": 1, "traj": [{"role": "system", "content": "be brief"}, {"role": "user", "content": "yo"}]}]"#;
    for doc in [
        read(text.as_bytes(), "runs.json", &chat()).unwrap(),
        read_knowing(text, &chat(), &[]),
    ] {
        assert_eq!(doc.conversations().len(), 2);
        assert_eq!(doc.conversations()[1].messages.len(), 2);
        assert_eq!(doc.write().unwrap(), text.as_bytes());
        assert!(doc.known_list(&[]).is_none());
    }
}
