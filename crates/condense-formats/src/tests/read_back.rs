//! Reading a written document back ([`crate::read_back`]): the conversation read from only
//! what the write serialized is the one a read of the whole output gives, in every layout a
//! body comes in, as a session grows; and anything the short way does not cover is read whole.

use super::memo::{compress, layouts, session_body};
use crate::{read, Document, ReadBack, ReadOptions, WriteMemo, Written};
use condense_model::{Content, Conversation, Format};

fn anthropic() -> ReadOptions {
    ReadOptions {
        format: Some(Format::Anthropic),
        ..ReadOptions::default()
    }
}

/// `bytes` read, changed by `change`, written with `memo`: the document and its output.
fn written(
    bytes: &[u8],
    memo: &mut WriteMemo,
    change: impl Fn(&mut Document),
) -> (Document, Written) {
    let mut doc = read(bytes, "body.json", &anthropic()).unwrap();
    change(&mut doc);
    let out = doc.write_remembering(memo).unwrap();
    (doc, out)
}

/// What a read back stands for: the conversations a read of the whole output gives.
fn whole_of(doc: &Document, back: Vec<ReadBack>) -> Vec<Conversation> {
    let produced = doc.conversations();
    back.into_iter()
        .zip(produced)
        .map(|(b, p)| b.into_conversation(p))
        .collect()
}

/// A read back of the whole output: nothing left out.
fn read_whole(back: Vec<ReadBack>) -> Vec<Conversation> {
    assert!(back.iter().all(|b| b.same.is_empty()));
    back.into_iter().map(|b| b.conversation).collect()
}

#[test]
fn what_the_write_serialized_reads_back_as_the_whole_output_does() {
    let whole = session_body();
    let total = whole["messages"].as_array().unwrap().len();
    let (mut short, mut reused) = (0, 0);
    for layout in 0..4 {
        // A memo kept from request to request (the proxy's, or the keys `compress` stores) and
        // one per write.
        let mut kept = WriteMemo::new();
        for n in (total - 60..=total).step_by(6).chain([3, 30]) {
            let (name, bytes) = layouts(&whole, n).swap_remove(layout);
            for memo in [&mut kept, &mut WriteMemo::off()] {
                let (doc, out) = written(&bytes, memo, |d| compress(&mut d.conversations_mut()[0]));
                let full = read(&out, "out.json", &anthropic()).unwrap();
                if *out != *bytes {
                    let echo = memo.echo().expect("a body written with its frame as read");
                    // A body at the root: its system prompt, tools and other members are not
                    // read again.
                    assert!(echo.frame_elided(), "{name} at {n}");
                    // The short way, not a read of the whole output, gives it.
                    let (short_way, _) = doc.read_serialized(&out, memo, &anthropic()).unwrap();
                    let left_out = short_way.same.iter().filter(|s| **s).count();
                    assert!(
                        n < 40 || left_out > 10,
                        "{name} at {n}: {left_out} left out"
                    );
                    assert_eq!(
                        whole_of(&doc, vec![short_way]),
                        full.conversations(),
                        "{name} at {n}"
                    );
                    let known = echo.known();
                    assert!(n < 40 || known > 10, "{name} at {n}: {known} known");
                    reused += echo.reused();
                    short += 1;
                }
                let back = doc
                    .read_back((&out, "out.json"), memo, &anthropic())
                    .unwrap();
                assert_eq!(
                    whole_of(&doc, back),
                    full.conversations(),
                    "{name} at {n} messages"
                );
            }
        }
    }
    assert!(
        short >= 4 * 2 * 11,
        "{short} outputs read back the short way"
    );
    // The cut results written again as the session grows (those among the last 20 messages of
    // the request before) were read back once: without the memo's keys, none.
    assert!(
        reused >= 20,
        "{reused} texts known from an earlier read back"
    );
}

#[test]
fn what_the_short_way_does_not_cover_is_read_whole() {
    let whole = session_body();
    let (_, bytes) = layouts(&whole, 50).swap_remove(0);
    let mut memo = WriteMemo::off();

    // A changed system prompt: the frame is serialized, nothing is noted.
    let (doc, out) = written(&bytes, &mut memo, |d| {
        let conv = &mut d.conversations_mut()[0];
        compress(conv);
        conv.system = Some(Content::string("a new system prompt"));
    });
    assert!(memo.echo().is_none());
    let full = read(&out, "out.json", &anthropic()).unwrap();
    let back = doc.read_back((&out, "o"), &mut memo, &anthropic()).unwrap();
    assert_eq!(read_whole(back), full.conversations());

    // Another output than the memo's write: read whole.
    let (doc, out) = written(&bytes, &mut memo, |d| {
        compress(&mut d.conversations_mut()[0])
    });
    assert!(memo.echo().is_some());
    // The write is known by its mark, not its bytes: the same bytes as no write's output, or
    // the output of an earlier write with the same memo, are read whole.
    assert!(doc.read_serialized(&out, &memo, &anthropic()).is_some());
    let unmarked = Written::unmarked(out.to_vec());
    assert!(doc
        .read_serialized(&unmarked, &memo, &anthropic())
        .is_none());
    let earlier = out;
    let (doc, out) = written(&bytes, &mut memo, |d| {
        compress(&mut d.conversations_mut()[0])
    });
    assert_eq!(*earlier, *out);
    assert!(doc.read_serialized(&earlier, &memo, &anthropic()).is_none());
    assert!(doc.read_serialized(&out, &memo, &anthropic()).is_some());
    let mut other = out.to_vec();
    other.insert(1, b' ');
    let other = Written::unmarked(other);
    assert!(doc.read_serialized(&other, &memo, &anthropic()).is_none());
    let full = read(&other, "other.json", &anthropic()).unwrap();
    let back = doc
        .read_back((&other, "o"), &mut memo, &anthropic())
        .unwrap();
    assert_eq!(read_whole(back), full.conversations());

    // OpenAI Chat: its system prompt is an element like the others, so the short way reads it
    // back; a system prompt a stage sets (written as a leading element) changes the frame.
    let openai = br#"{"model": "m", "messages": [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hello there"}, {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "ls", "arguments": "{}"}}]}, {"role": "tool", "tool_call_id": "c1", "content": "a.txt b.txt"}]}"#;
    let opts = ReadOptions {
        format: Some(Format::OpenAi),
        ..ReadOptions::default()
    };
    let mut doc = read(openai, "chat.json", &opts).unwrap();
    doc.conversations_mut()[0].messages[3].content = Content::string("2 files");
    let out = doc.write_remembering(&mut memo).unwrap();
    assert!(memo.echo().expect("noted").frame_elided());
    let full = read(&out, "chat.json", &opts).unwrap();
    let (short_way, _) = doc.read_serialized(&out, &memo, &opts).unwrap();
    assert_eq!(whole_of(&doc, vec![short_way]), full.conversations());
    doc.conversations_mut()[0].system = Some(Content::string("be terse"));
    let out = doc.write_remembering(&mut memo).unwrap();
    assert!(memo.echo().is_none());
    let full = read(&out, "chat.json", &opts).unwrap();
    let back = doc.read_back((&out, "o"), &mut memo, &opts).unwrap();
    assert_eq!(read_whole(back), full.conversations());

    // Responses: each item is read on its own, so the short way reads it back; a message a
    // stage built as several items (a text and a call) is read whole.
    let responses = br#"{"model": "m", "instructions": "be brief", "input": [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hello there"}]}, {"type": "function_call", "call_id": "c1", "name": "ls", "arguments": "{}"}, {"type": "function_call_output", "call_id": "c1", "output": "a.txt"}]}"#;
    let opts = ReadOptions {
        format: Some(Format::Responses),
        ..ReadOptions::default()
    };
    let mut doc = read(responses, "r.json", &opts).unwrap();
    doc.conversations_mut()[0].messages[0].content = Content::string("hello");
    let out = doc.write_remembering(&mut memo).unwrap();
    assert!(memo.echo().expect("noted").frame_elided());
    let full = read(&out, "r.json", &opts).unwrap();
    let (short_way, _) = doc.read_serialized(&out, &memo, &opts).unwrap();
    assert_eq!(whole_of(&doc, vec![short_way]), full.conversations());
    let call = doc.conversations()[0].messages[1].content.blocks[0].clone();
    doc.conversations_mut()[0].messages[0]
        .content
        .blocks
        .push(call);
    let out = doc.write_remembering(&mut memo).unwrap();
    assert!(memo.echo().is_none(), "four items for three messages");
    let full = read(&out, "r.json", &opts).unwrap();
    assert_eq!(full.conversations()[0].messages.len(), 4);
    let back = doc.read_back((&out, "o"), &mut memo, &opts).unwrap();
    assert_eq!(read_whole(back), full.conversations());

    // An output that does not read: the read of the whole output names the error.
    let err = doc
        .read_back(
            (&Written::unmarked(b"{".to_vec()), "broken.json"),
            &mut memo,
            &opts,
        )
        .unwrap_err();
    assert!(err.to_string().contains("broken.json"), "{err}");
}
