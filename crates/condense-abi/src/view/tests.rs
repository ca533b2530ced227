//! The view against the model: every shipped transcript and every block kind read the same
//! both ways, the host is asked for the mirror once, and a malformed tag is an error.

use super::*;
use crate::ffi::FfiMessageOf;
use crate::{Input, StageError};
use condense_model::{
    Block, Content, Conversation, ImageSource, Message, RawJson, ReadMessage, ToolResult,
};
use std::borrow::Cow;
use std::cell::Cell;
use std::path::Path;

fn same_message(m: &Message, v: MessageView<'_>) -> bool {
    v.is(m)
        && m.is_chat() == v.is_chat()
        && m.content.text() == v.content().text()
        && v.content().text_cow() == v.content().text()
}

/// Asserts that `conv` read through a view is `conv`, field by field, with the same tool
/// results, tool names and joined texts. Returns the number of tool results compared.
fn assert_view_reads(conv: &Conversation, name: &str) -> usize {
    let input = Input::of(conv);
    let view = input.view().unwrap();
    assert_eq!(view.len(), conv.messages.len(), "{name}");
    for (i, (m, v)) in conv.messages.iter().zip(view.messages()).enumerate() {
        assert!(
            same_message(m, v),
            "{name}: message {i} ({}) reads differently",
            m.id
        );
    }
    assert_eq!(view.extra(), conv.extra.as_str(), "{name}");
    let header = Conversation {
        system: conv.system.clone(),
        tools: conv.tools.clone(),
        messages: Vec::new(),
        extra: conv.extra.clone(),
    };
    assert_eq!(view.header(), header, "{name}");
    assert_eq!(
        view.system().map(|s| s.text()),
        conv.system.as_ref().map(Content::text),
        "{name}"
    );
    assert!(
        view.tool_names()
            .eq(conv.tools.iter().map(|t| t.name.as_str())),
        "{name}"
    );
    assert_eq!(view.tool_names_by_id(), conv.tool_names_by_id(), "{name}");
    let model: Vec<_> = conv
        .tool_results()
        .map(|r| {
            let at = r.at();
            (at, r.message_id, r.role, r.result.content.text())
        })
        .collect();
    let viewed: Vec<_> = view
        .tool_results()
        .map(|r| (r.at(), r.message_id, r.role, r.result.content().text()))
        .collect();
    for r in view.tool_results() {
        let content = r.result.content();
        assert_eq!(
            content.text_cow(),
            content.text(),
            "{name}: {}",
            r.message_id
        );
    }
    assert_eq!(viewed, model, "{name}: tool results");
    for (slot, r) in view.tool_results().zip(conv.tool_results()) {
        assert_eq!(&slot.result.to_tool_result(), r.result, "{name}");
    }
    // What code written over `ReadMessage` (turn grouping, measuring) reads of each message.
    let views: Vec<MessageView<'_>> = view.messages().collect();
    fn pieces(m: &impl ReadMessage) -> Vec<String> {
        let mut out = Vec::new();
        m.pieces(&mut |p| out.push(format!("{p:?}")));
        out
    }
    for (m, v) in conv.messages.iter().zip(&views) {
        assert!(v.tool_use_ids().eq(ReadMessage::tool_use_ids(m)), "{name}");
        assert!(v.tool_result_ids().eq(m.tool_result_ids()), "{name}");
        assert_eq!(v.has_non_result_block(), m.has_non_result_block(), "{name}");
        assert_eq!(v.only_text(), m.only_text(), "{name}");
        assert_eq!(v.block_count(), m.block_count(), "{name}");
        assert_eq!(pieces(v), pieces(m), "{name}");
        assert_eq!(&v.to_message(), m, "{name}");
    }
    assert_eq!(
        condense_model::orphaned_tool_results(&views),
        condense_model::orphaned_tool_results(&conv.messages),
        "{name}"
    );
    if let Some(last) = conv.messages.last() {
        assert_eq!(view.position(&last.id), conv.position(&last.id), "{name}");
    }
    model.len()
}

/// Every shipped transcript (Claude Code, Codex, OpenHands, SWE-agent, tau-bench) reads the
/// same through a view as through the model it was read into.
#[test]
fn every_shipped_transcript_reads_the_same_through_a_view() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/transcripts");
    let (mut files, mut results) = (0, 0);
    for dir in std::fs::read_dir(&root).unwrap() {
        let dir = dir.unwrap().path();
        if !dir.is_dir() {
            continue;
        }
        for file in std::fs::read_dir(&dir).unwrap() {
            let path = file.unwrap().path();
            let name = path.display().to_string();
            if name.contains("LICENSE") {
                continue;
            }
            let bytes = std::fs::read(&path).unwrap();
            let doc = condense_formats::read(&bytes, &name, &Default::default())
                .unwrap_or_else(|e| panic!("{name}: {e}"));
            for conv in doc.conversations() {
                results += assert_view_reads(conv, &name);
            }
            files += 1;
        }
    }
    assert!(
        files >= 8,
        "only {files} transcripts found under {}",
        root.display()
    );
    assert!(results > 1_000, "only {results} tool results compared");
}

/// Every kind of block, nested results, an orphan result, event lines, a system prompt.
#[test]
fn every_block_kind_reads_the_same_through_a_view() {
    let raw = |s: &str| RawJson::from_string_unchecked(s.into());
    let nested = Block::ToolResult(ToolResult {
        tool_use_id: "inner".into(),
        content: Content::blocks(vec![Block::text(""), Block::text("deep")]),
        is_error: Some(false),
        extra: raw(r#"{"x":1}"#),
    });
    let result = Block::ToolResult(ToolResult {
        tool_use_id: "t1".into(),
        content: Content::blocks(vec![Block::text("a"), nested, Block::text("b")]),
        is_error: Some(true),
        extra: RawJson::default(),
    });
    let image = |source| {
        Block::Image(condense_model::Image {
            source,
            extra: raw(r#"{"cache_control":{}}"#),
        })
    };
    let mut assistant = Message::new(
        "a1",
        Role::Assistant,
        vec![
            Block::Thinking(condense_model::ThinkingBlock {
                thinking: "hmm".into(),
                extra: raw(r#"{"signature":"s"}"#),
            }),
            Block::tool_use("t1", "Bash", raw(r#"{"command":"ls"}"#)),
        ],
    );
    assistant.timestamp = Some("2026-12-05T00:00:00Z".into());
    let conv = Conversation {
        system: Some(Content::string("be brief")),
        tools: vec![condense_model::ToolDef {
            name: "Bash".into(),
            raw: raw(r#"{"name":"Bash"}"#),
        }],
        messages: vec![
            assistant,
            Message::new(
                "u1",
                Role::User,
                vec![
                    result,
                    Block::tool_result("orphan", Content::string("lost")),
                    image(ImageSource::Base64 {
                        media_type: "image/png".into(),
                        data: "iVBOR".into(),
                    }),
                    image(ImageSource::Reference {
                        json: raw(r#"{"type":"url","url":"u"}"#),
                    }),
                    Block::Opaque(condense_model::Opaque {
                        json: raw(r#"{"type":"server_tool_use"}"#),
                    }),
                ],
            ),
            Message::new("e1", Role::Event, vec![Block::text("compacted")]),
        ],
        extra: raw(r#"{"model":"m"}"#),
    };
    assert_eq!(assert_view_reads(&conv, "hand-made"), 2);
    let input = Input::of(&conv);
    let view = input.view().unwrap();
    let slots: Vec<_> = view.tool_results().collect();
    assert_eq!(slots[0].tool, Some("Bash"));
    assert_eq!(slots[1].tool, None);
    assert_eq!(slots[0].result.content().text(), "a\ndeep\nb");
    // Nested blocks are joined; one text block is lent, not copied.
    assert!(matches!(slots[0].result.content().text_cow(), Cow::Owned(t) if t == "a\ndeep\nb"));
    assert!(matches!(
        slots[1].result.content().text_cow(),
        Cow::Borrowed("lost")
    ));
    assert!(!view.message(2).unwrap().is_chat());
    assert!(view.message(3).is_none());
}

/// The mirror is asked for once, however often the stage views, and a copy after a view is
/// made from the same mirror.
#[test]
fn a_view_then_a_copy_ask_the_host_once() {
    let conv = Conversation {
        messages: vec![Message::new("u1", Role::User, vec![Block::text("hi")])],
        ..Conversation::default()
    };
    let asked = Cell::new(0);
    let mirror = FfiConversationRef::from(&conv);
    let lend = || {
        asked.set(asked.get() + 1);
        Ok(&mirror)
    };
    let input = Input::lent(&lend, None);
    assert_eq!(input.view().unwrap().len(), 1);
    assert_eq!(input.view().unwrap().message(0).unwrap().id(), "u1");
    assert_eq!(input.into_conversation().unwrap(), conv);
    assert_eq!(asked.get(), 1);
}

/// A malformed tag from the host (a role, a shape or a nested block kind no version knows)
/// is an error when the view is made, naming the tag, and no accessor ever sees it.
#[test]
fn a_malformed_tag_is_an_error_when_the_view_is_made() {
    let conv = Conversation {
        messages: vec![Message::new(
            "u1",
            Role::User,
            vec![Block::tool_result(
                "t1",
                Content::blocks(vec![Block::text("x")]),
            )],
        )],
        ..Conversation::default()
    };
    type Break = fn(&mut FfiMessageOf<RStr<'_>>);
    let cases: [(Break, &str); 3] = [
        (|m| m.role = 9, "unknown role tag 9"),
        (|m| m.content.shape = 7, "unknown content shape tag 7"),
        (
            |m| m.content.blocks[0].children[0].kind = 42,
            "unknown block kind tag 42",
        ),
    ];
    for (break_it, expected) in cases {
        let mut mirror = FfiConversationRef::from(&conv);
        break_it(&mut mirror.messages[0]);
        let lend = || Ok::<_, StageError>(&mirror);
        let input = Input::lent(&lend, None);
        let err = input.view().map(|_| ()).unwrap_err();
        assert_eq!(err.message(), expected);
    }
}
