//! Prompt-cache breakpoints, and a message as it is without them.
//!
//! Anthropic's API caches a request's prefix up to each block marked `cache_control`. A client
//! that wants its whole conversation cached marks the newest message, or the last two, and so
//! moves the marks every turn: the message marked last turn comes back unmarked, the new one
//! marked (SWE-agent's `cache_control` processor does this with its last two messages). To
//! the model the message is the same; only the cache boundary moved. A resume point compares
//! an input's messages with the previous input's (condense-host's `resume`): compared whole,
//! a moved mark made every turn a run over the whole conversation. [`unmarked_fingerprint`] is
//! what it compares instead: a message's fingerprint as if none of its blocks had a mark.
//!
//! A mark is the `cache_control` member of a block's `extra` (a text, thinking, tool call,
//! tool result or image block, and the blocks inside a tool result), or of the message's own
//! (OpenAI Chat clients such as mini-swe-agent mark a `tool` message itself). A block the model
//! keeps verbatim ([`crate::Opaque`]) keeps its mark in its text, which the token counter
//! counts, so it is left as it is: a message whose only marks are there is compared whole.
//! The reader's order hint ([`ORDER_HINT`], the keys as they were sent when the writer would
//! write them in another order) loses the mark's name too: a mark added last, as clients add
//! it, leaves the hint the unmarked object has. A client can only mark a string content by
//! sending it as a list of one text block; unmarked, the content may come back as a string
//! (as from a client that marks a copy of its history), so a content of one plain text block
//! compares as a string.
//!
//! ```
//! use condense_model::cache_marks::unmarked_fingerprint;
//! use condense_model::fingerprint::fingerprint;
//! use condense_model::{Block, Content, Message, RawJson, Role, ToolResult};
//!
//! let result = |extra: &str| Block::ToolResult(ToolResult {
//!     extra: RawJson::from_string_unchecked(extra.into()),
//!     ..ToolResult::new("toolu_1", Content::string("3 tests failed"))
//! });
//! let mark = r#"{"cache_control":{"type":"ephemeral"}}"#;
//! let marked = Message::new("#3", Role::User, vec![result(mark)]);
//! let unmarked = Message::new("#3", Role::User, vec![result("")]);
//! assert_eq!(unmarked_fingerprint(&marked), Some(fingerprint(&unmarked)));
//! // A message without a mark is its own fingerprint.
//! assert_eq!(unmarked_fingerprint(&unmarked), None);
//! ```

use crate::fingerprint::fingerprint;
use crate::{Block, Content, ContentShape, Message, RawJson};
use serde_json::Value;

/// The member of a block's `extra` that marks a prompt-cache breakpoint.
pub const CACHE_CONTROL: &str = "cache_control";

/// The member of an `extra` in which a reader keeps an object's keys in the order they were
/// sent, when its writer would write them in another (condense-formats' readers).
pub const ORDER_HINT: &str = "condense:order";

/// `message`'s [`fingerprint`] [`unmarked`], when it has a mark; `None` when it has none (or an
/// `extra` that names one does not read as an object): its fingerprint is its own. Most
/// messages are told apart without parsing or copying anything.
pub fn unmarked_fingerprint(message: &Message) -> Option<u128> {
    if !may_mark(&message.extra) && !content_changes(&message.content, false) {
        return None;
    }
    unmarked(message).map(|m| fingerprint(&m))
}

/// `message` as it is without its cache marks (see the [module docs](self)): its blocks' and
/// its own `cache_control` members left out, and a content left with one text block and
/// nothing else written as a string, as a client that marked a string content had to send it
/// as a block, and sends it as a string again once unmarked. `None` when that is `message`
/// itself, or an `extra` that names a mark does not read as an object.
pub fn unmarked(message: &Message) -> Option<Message> {
    // Most messages have nothing to take out: told without copying them.
    if !may_mark(&message.extra) && !content_changes(&message.content, true) {
        return None;
    }
    let mut unmarked = message.clone();
    let mut changed = false;
    if may_mark(&unmarked.extra) {
        unmark_extra(&mut unmarked.extra, &mut changed)?;
    }
    unmark_content(&mut unmarked.content, &mut changed)?;
    changed.then_some(unmarked)
}

/// Whether an `extra` may hold a mark: its text names the member. Most have no `extra` at
/// all; of the rest, most are short and name nothing with an underscore (a message the reader
/// left unread is one): the text's underscores are found with `memchr`, and only around them
/// is the name looked for (a substring search cost more setting itself up than searching:
/// 90 instructions an `extra`, 200 K a turn at a million tokens).
fn may_mark(extra: &RawJson) -> bool {
    const NAME: &[u8] = b"\"cache_control\"";
    const UNDERSCORE: usize = 6;
    let bytes = extra.as_str().as_bytes();
    bytes.len() >= NAME.len() + 2
        && memchr::memchr_iter(b'_', bytes).any(|at| {
            at.checked_sub(UNDERSCORE)
                .and_then(|start| bytes.get(start..start + NAME.len()))
                == Some(NAME)
        })
}

/// Whether unmarking `content` changes it: a block's `extra` names a mark, or (`shapes`) a
/// content of one plain text block is a list, nested in tool results alike.
fn content_changes(content: &Content, shapes: bool) -> bool {
    (shapes && one_plain_text_list(content))
        || content.blocks.iter().any(|block| {
            block.extra().is_some_and(may_mark)
                || matches!(block, Block::ToolResult(r) if content_changes(&r.content, shapes))
        })
}

/// A content of one text block with nothing else, written as a list.
fn one_plain_text_list(content: &Content) -> bool {
    content.shape == ContentShape::Array
        && matches!(&content.blocks[..], [Block::Text(t)] if t.extra.is_empty())
}

/// Takes the marks out of `content`'s blocks, and writes it as a string when one plain text
/// block is left, setting `changed` when either changed something. `None` when an `extra`
/// that names a mark does not read as an object.
fn unmark_content(content: &mut Content, changed: &mut bool) -> Option<()> {
    for block in &mut content.blocks {
        if let Block::ToolResult(result) = block {
            unmark_content(&mut result.content, changed)?;
        }
        if let Some(extra) = block.extra_mut().filter(|e| may_mark(e)) {
            unmark_extra(extra, changed)?;
        }
    }
    if one_plain_text_list(content) {
        content.shape = ContentShape::String;
        *changed = true;
    }
    Some(())
}

/// `extra` without its `cache_control` member, nor that key in its order hint.
fn unmark_extra(extra: &mut RawJson, changed: &mut bool) -> Option<()> {
    let mut map = extra.to_map().ok()?;
    if map.shift_remove(CACHE_CONTROL).is_some() {
        if let Some(Value::Array(order)) = map.get_mut(ORDER_HINT) {
            order.retain(|key| key.as_str() != Some(CACHE_CONTROL));
        }
        *extra = RawJson::from_map(map);
        *changed = true;
    }
    Some(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ImageSource, Role, TextBlock};

    fn raw(text: &str) -> RawJson {
        RawJson::from_string_unchecked(text.to_string())
    }

    const MARK: &str = r#""cache_control":{"type":"ephemeral"}"#;

    fn text(t: &str, extra: &str) -> Block {
        Block::Text(TextBlock {
            text: t.into(),
            extra: raw(extra),
        })
    }

    /// Every kind of block that carries a mark in its `extra`, nested in a tool result too,
    /// with other members and an order hint beside it: unmarked, each is the block as a reader
    /// gives it without the mark.
    #[test]
    fn a_marked_message_fingerprints_as_the_same_message_unmarked() {
        let with = |e: &str| {
            if e.is_empty() {
                format!("{{{MARK}}}")
            } else {
                format!("{{{e},{MARK}}}")
            }
        };
        let cases: Vec<(Vec<Block>, Vec<Block>)> = vec![
            (vec![text("a", &with(""))], vec![text("a", "")]),
            (
                vec![text("a", &with(r#""citations":null"#))],
                vec![text("a", r#"{"citations":null}"#)],
            ),
            (
                vec![Block::ToolResult(crate::ToolResult {
                    tool_use_id: "t1".into(),
                    content: Content::string("out"),
                    is_error: None,
                    extra: raw(&format!(
                        r#"{{{MARK},"condense:order":["tool_use_id","type","content","cache_control"]}}"#
                    )),
                })],
                vec![Block::ToolResult(crate::ToolResult {
                    tool_use_id: "t1".into(),
                    content: Content::string("out"),
                    is_error: None,
                    extra: raw(r#"{"condense:order":["tool_use_id","type","content"]}"#),
                })],
            ),
            (
                vec![Block::tool_result(
                    "t2",
                    Content {
                        shape: crate::ContentShape::Array,
                        blocks: vec![text("inner", &with(""))],
                    },
                )],
                // One plain text block left: as a string.
                vec![Block::tool_result("t2", Content::string("inner"))],
            ),
            (
                vec![Block::Image(crate::Image {
                    source: ImageSource::Reference {
                        json: raw(r#"{"type":"url","url":"https://x"}"#),
                    },
                    extra: raw(&with("")),
                })],
                vec![Block::Image(crate::Image {
                    source: ImageSource::Reference {
                        json: raw(r#"{"type":"url","url":"https://x"}"#),
                    },
                    extra: RawJson::default(),
                })],
            ),
        ];
        for (marked, unmarked) in cases {
            let mut blocks = vec![text("first", "")];
            let m = Message::new("#1", Role::User, [blocks.clone(), marked].concat());
            blocks.extend(unmarked);
            let u = Message::new("#1", Role::User, blocks);
            assert_eq!(unmarked_fingerprint(&m), Some(fingerprint(&u)), "{m:?}");
            assert_eq!(unmarked_fingerprint(&u), None);
        }
    }

    /// A string content a client sent as one marked text block, and a `tool` message marked
    /// itself: unmarked, each is the message as sent without the mark. One plain text block
    /// compares as a string whether it was marked or not.
    #[test]
    fn a_marked_string_content_and_a_marked_message_compare_as_sent_unmarked() {
        let mark = format!("{{{MARK}}}");
        let as_block = Message::new("#1", Role::User, vec![text("a", &mark)]);
        let mut as_string = Message::new("#1", Role::User, Vec::new());
        as_string.content = Content::string("a");
        assert_eq!(
            unmarked_fingerprint(&as_block),
            Some(fingerprint(&as_string))
        );
        let unmarked_block = Message::new("#1", Role::User, vec![text("a", "")]);
        assert_eq!(unmarked_fingerprint(&unmarked_block), None);
        assert_eq!(unmarked(&unmarked_block), Some(as_string.clone()));
        assert_eq!(unmarked(&as_string), None);

        let mut tool = Message::new("#2", Role::Tool, vec![text("out", "")]);
        tool.extra = raw(&format!(r#"{{"tool_call_id":"c1",{MARK}}}"#));
        let mut sent = Message::new("#2", Role::Tool, Vec::new());
        sent.content = Content::string("out");
        sent.extra = raw(r#"{"tool_call_id":"c1"}"#);
        assert_eq!(unmarked_fingerprint(&tool), Some(fingerprint(&sent)));
    }

    /// The quick look for the name finds it wherever it is, and only the name in quotes.
    #[test]
    fn an_extra_may_mark_only_when_it_names_the_member() {
        for (text, named) in [
            (r#"{"cache_control":{"type":"ephemeral"}}"#, true),
            (r#"{"tool_use_id":"a_b","x":1,"cache_control":{}}"#, true),
            (r#"{"a_":"_","cache_control":1}"#, true),
            (r#"{"a_":"_","b":"\"cache_control\""}"#, false),
            (r#"{"condense:unread":12}"#, false),
            (r#"{"cache_controls":1}"#, false),
            (r#"{"xcache_control":1}"#, false),
            (r#"{"cache control":1,"_":"_"}"#, false),
            ("_", false),
            ("", false),
        ] {
            assert_eq!(may_mark(&raw(text)), named, "{text}");
        }
    }

    /// What is not a mark stays: an opaque block's (counted as tokens), a member that only
    /// mentions the name in a value, an `extra` that does not read; and two messages that
    /// differ besides their marks still differ.
    #[test]
    fn only_marks_are_left_out() {
        let opaque = Block::Opaque(crate::Opaque {
            json: raw(&format!(r#"{{"type":"document",{MARK}}}"#)),
        });
        let m = Message::new("#1", Role::User, vec![opaque]);
        assert_eq!(unmarked_fingerprint(&m), None);
        let named = Message::new(
            "#1",
            Role::User,
            vec![text("a", r#"{"note":"cache_control"}"#)],
        );
        assert_eq!(unmarked_fingerprint(&named), None);
        let broken = Message::new("#1", Role::User, vec![text("a", r#"{"cache_control":"#)]);
        assert_eq!(unmarked_fingerprint(&broken), None);
        let a = Message::new("#1", Role::User, vec![text("a", &format!("{{{MARK}}}"))]);
        let b = Message::new("#1", Role::User, vec![text("b", &format!("{{{MARK}}}"))]);
        assert_ne!(unmarked_fingerprint(&a), unmarked_fingerprint(&b));
    }
}
