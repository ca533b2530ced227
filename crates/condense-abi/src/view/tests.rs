//! The view against the model: every shipped transcript and every block kind read the same
//! both ways, the host is asked for the mirror once, and a malformed tag is an error.

use super::*;
use crate::ffi::FfiMessageOf;
use crate::{Input, StageError};
use condense_model::{Block, Content, Conversation, ImageSource, Message, RawJson, ToolResult};
use std::cell::Cell;
use std::path::Path;

/// Whether `view` shows `block` exactly (every field, nested results included).
fn same_block(block: &Block, view: BlockView<'_>) -> bool {
    match (block, view) {
        (Block::Text(t), BlockView::Text { text, extra }) => {
            t.text == text && t.extra.as_str() == extra
        }
        (Block::Thinking(t), BlockView::Thinking { thinking, extra }) => {
            t.thinking == thinking && t.extra.as_str() == extra
        }
        (
            Block::ToolUse(t),
            BlockView::ToolUse {
                id,
                name,
                input,
                extra,
            },
        ) => t.id == id && t.name == name && t.input.as_str() == input && t.extra.as_str() == extra,
        (Block::ToolResult(t), BlockView::ToolResult(r)) => {
            t.tool_use_id == r.tool_use_id()
                && t.is_error == r.is_error()
                && t.extra.as_str() == r.extra()
                && same_content(&t.content, r.content())
        }
        (
            Block::Image(i),
            BlockView::ImageBase64 {
                media_type,
                data,
                extra,
            },
        ) => {
            i.extra.as_str() == extra
                && matches!(&i.source, ImageSource::Base64 { media_type: m, data: d } if m == media_type && d == data)
        }
        (Block::Image(i), BlockView::ImageReference { json, extra }) => {
            i.extra.as_str() == extra
                && matches!(&i.source, ImageSource::Reference { json: j } if j.as_str() == json)
        }
        (Block::Opaque(o), BlockView::Opaque { json }) => o.json.as_str() == json,
        _ => false,
    }
}

fn same_content(content: &Content, view: ContentView<'_>) -> bool {
    content.shape == view.shape()
        && content.blocks.len() == view.len()
        && content.text() == view.text()
        && content
            .blocks
            .iter()
            .zip(view.blocks())
            .all(|(b, v)| same_block(b, v))
}

fn same_message(m: &Message, v: MessageView<'_>) -> bool {
    m.id == v.id()
        && m.role == v.role()
        && m.timestamp.as_deref() == v.timestamp()
        && m.is_chat() == v.is_chat()
        && m.extra.as_str() == v.extra()
        && m.envelope.as_str() == v.envelope()
        && same_content(&m.content, v.content())
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
    assert_eq!(viewed, model, "{name}: tool results");
    for (slot, r) in view.tool_results().zip(conv.tool_results()) {
        assert_eq!(&slot.result.to_tool_result().unwrap(), r.result, "{name}");
    }
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
    let materialize = || {
        asked.set(asked.get() + 1);
        Ok(FfiConversationRef::from(&conv))
    };
    let input = Input::lazy(&materialize, None);
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
        let materialize = || {
            let mut mirror = FfiConversationRef::from(&conv);
            break_it(&mut mirror.messages[0]);
            Ok::<_, StageError>(mirror)
        };
        let input = Input::lazy(&materialize, None);
        let err = input.view().map(|_| ()).unwrap_err();
        assert_eq!(err.message(), expected);
    }
}
