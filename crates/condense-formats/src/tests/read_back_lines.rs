//! A Claude Code session's output read back parsing only the lines the write serialized
//! (`claude_code::read_back`): the conversation a read of the whole output gives, on real
//! sessions changed the ways stages change them, lines whose place in the thread moves
//! included; and what the short way does not cover is read whole.

use super::support::fixture;
use crate::{read, Document, ReadOptions, WriteMemo, Written};
use condense_model::{Block, Content, Conversation, Format, Message, Role};

fn claude_code() -> ReadOptions {
    ReadOptions {
        format: Some(Format::ClaudeCode),
        ..ReadOptions::default()
    }
}

fn sessions() -> Vec<Vec<u8>> {
    vec![
        fixture!(
            "transcripts/d-kimuson__claude-code-viewer/fe5e1c67-53e7-4862-81ae-d0e013e3270b.jsonl"
        ),
        fixture!("transcripts/DRMacIver__claude-reliability/transcript.jsonl"),
        fixture!("edge/claude_code_session.jsonl"),
    ]
}

/// A change a run makes to a session's conversation.
type Change = Box<dyn Fn(&mut Conversation)>;

/// The ways a run changes a session's lines, each by name.
fn changes() -> Vec<(&'static str, Change)> {
    let chat = |c: &Conversation| -> Vec<usize> {
        (0..c.messages.len())
            .filter(|&i| c.messages[i].role != Role::Event)
            .collect()
    };
    vec![
        ("nothing", Box::new(|_: &mut Conversation| {})),
        (
            "every third message's content replaced",
            Box::new(move |c: &mut Conversation| {
                for (k, i) in chat(c).into_iter().enumerate() {
                    if k % 3 == 0 {
                        c.messages[i].content = Content::string(format!("[cleared {k}]"));
                    }
                }
            }),
        ),
        (
            "a span of messages folded into a summary",
            Box::new(move |c: &mut Conversation| {
                let at = chat(c);
                if at.len() < 4 {
                    return;
                }
                let (from, to) = (at[1], at[at.len() / 2]);
                let summary = Message::new(
                    "summary-1",
                    Role::User,
                    vec![Block::text("## Summary\n- what happened")],
                );
                c.messages.splice(from..=to, [summary]);
            }),
        ),
        (
            "the oldest half of the lines dropped",
            Box::new(|c: &mut Conversation| {
                let half = c.messages.len() / 2;
                c.messages.drain(..half);
            }),
        ),
        (
            "the last messages dropped (the leaf moves)",
            Box::new(move |c: &mut Conversation| {
                let at = chat(c);
                if let Some(&cut) = at.get(at.len().saturating_sub(3)) {
                    c.messages.truncate(cut);
                }
            }),
        ),
        (
            "a line's parent named away (its place in the thread moves)",
            Box::new(move |c: &mut Conversation| {
                // Every chat line's envelope points at a parent no line has: each continues
                // from the main-thread line before it, so branches join the thread.
                for i in chat(c) {
                    let text = c.messages[i]
                        .envelope
                        .as_str()
                        .replace("\"parentUuid\":\"", "\"parentUuid\":\"gone-");
                    c.messages[i].envelope = condense_model::RawJson::from_string_unchecked(text);
                }
            }),
        ),
    ]
}

/// `bytes` read, changed, written with `memo`.
fn written(
    bytes: &[u8],
    memo: &mut WriteMemo,
    change: &dyn Fn(&mut Conversation),
) -> (Document, Written) {
    let mut doc = read(bytes, "s.jsonl", &claude_code()).unwrap();
    change(&mut doc.conversations_mut()[0]);
    let out = doc.write_remembering(memo).unwrap();
    (doc, out)
}

#[test]
fn only_the_lines_serialized_are_parsed_and_the_output_reads_back_as_a_whole_read_does() {
    let (mut left_out, mut parsed, mut moved) = (0, 0, 0);
    for bytes in sessions() {
        for (name, change) in changes() {
            let mut memo = WriteMemo::off();
            let (doc, out) = written(&bytes, &mut memo, change.as_ref());
            let whole = read(&out, "out.jsonl", &claude_code()).unwrap();
            let short = doc
                .read_lines_back(&out, &memo, &claude_code())
                .unwrap_or_else(|| panic!("{name}: not read the short way"));
            let copied = memo.lines_echo().map(|e| e.copied().to_vec()).unwrap();
            left_out += short.same.iter().filter(|s| **s).count();
            parsed += copied.iter().filter(|c| c.is_none()).count();
            moved += copied
                .iter()
                .zip(&short.same)
                .filter(|(c, same)| c.is_some() && !**same)
                .count();
            let produced = &doc.conversations()[0];
            assert_eq!(
                short.into_conversation(produced),
                whole.conversations()[0],
                "{name}"
            );
            // The document's own read back takes the short way and gives the same.
            let back = doc
                .read_back((&out, "out.jsonl"), &mut memo, &claude_code())
                .unwrap();
            assert!(back[0].same.iter().any(|s| *s), "{name}");
        }
    }
    // Most lines were left out; some were serialized; some copied lines changed their place
    // in the thread and were read again.
    assert!(left_out > 1_000, "{left_out} lines left out");
    assert!(parsed > 50, "{parsed} lines parsed");
    assert!(moved > 0, "{moved} copied lines read again");
}

#[test]
fn what_the_short_way_does_not_cover_is_read_whole() {
    let bytes = sessions().swap_remove(0);
    let mut memo = WriteMemo::off();
    let (doc, out) = written(&bytes, &mut memo, &|c: &mut Conversation| {
        c.messages.truncate(c.messages.len() - 1);
    });
    assert!(doc.read_lines_back(&out, &memo, &claude_code()).is_some());
    // Another output than the memo's write.
    let unmarked = Written::unmarked(out.to_vec());
    assert!(doc
        .read_lines_back(&unmarked, &memo, &claude_code())
        .is_none());
    // Read without the format said, or with a pointer.
    let guessed = ReadOptions::default();
    assert!(doc.read_lines_back(&out, &memo, &guessed).is_none());
    // A line written anew that does not parse: the short way gives up, and the read of the
    // whole output reports it.
    let (doc, out) = written(&bytes, &mut memo, &|c: &mut Conversation| {
        c.messages[1].content = Content::string("changed");
    });
    let copied = memo.lines_echo().unwrap().copied().to_vec();
    let at = copied.iter().position(Option::is_none).unwrap();
    let text = std::str::from_utf8(&out).unwrap();
    let bad: String = text
        .lines()
        .enumerate()
        .map(|(i, line)| {
            if i == at {
                "{not json\n".to_string()
            } else {
                format!("{line}\n")
            }
        })
        .collect();
    let (known, produced) = (doc.claude_lines.as_ref().unwrap(), &doc.conversations()[0]);
    assert!(crate::claude_code::read_back(text, &copied, known, produced).is_some());
    assert!(crate::claude_code::read_back(&bad, &copied, known, produced).is_none());
    assert!(read(bad.as_bytes(), "out.jsonl", &claude_code()).is_err());
    // A session with an incomplete last line carried through.
    let mut cut = bytes.clone();
    cut.extend_from_slice(br#"{"type":"user","uuid":"x"#);
    let (doc, out) = written(&cut, &mut memo, &|c: &mut Conversation| {
        c.messages.truncate(c.messages.len() - 1);
    });
    assert!(doc.read_lines_back(&out, &memo, &claude_code()).is_none());
    let back = doc
        .read_back((&out, "o"), &mut memo, &claude_code())
        .unwrap();
    assert!(back[0].same.is_empty());
}
