//! The conversation model that every condense crate and every stage works on.
//!
//! A [`Conversation`] is an optional system prompt, the tool definitions, and an ordered list of
//! [`Message`]s. A message has a stable id, a [`Role`], an optional timestamp and [`Content`]: a
//! list of [`Block`]s (text, thinking, tool use, tool result, image, or an opaque block kept
//! verbatim) plus the [`ContentShape`] the source used, so a string stays a string on the way out.
//!
//! Nothing is dropped on the way through: every object keeps the fields this model does not know
//! in a [`RawJson`] (`extra` for the fields of the object itself, `envelope` for the wrapper line
//! of JSONL formats), as raw JSON text. Raw text rather than a parsed map is deliberate: it moves
//! across the plugin boundary without being serialized again.
//!
//! The crate does no I/O. Reading and writing real formats lives in `condense-formats`.
//!
//! ```
//! use condense_model::{Block, Conversation, Message, Role};
//!
//! let mut conv = Conversation::default();
//! conv.messages.push(Message::new("m0", Role::User, vec![Block::text("Fix the failing test")]));
//! assert_eq!(conv.messages[0].content.text(), "Fix the failing test");
//! ```

mod block;
pub mod cache_marks;
pub mod duplicate;
pub mod escape;
pub mod fingerprint;
mod format;
pub mod id_list;
pub mod ids;
pub mod packed;
pub mod prehashed;
mod raw_json;
pub mod read;
pub mod recent;
pub mod render;
pub mod time;
pub mod visit;

pub use block::{Block, Image, ImageSource, Opaque, TextBlock, ThinkingBlock, ToolResult, ToolUse};
pub use format::{Format, UnknownFormat};
pub use raw_json::{kind_of, RawJson};
pub use read::{Piece, ReadMessage};
pub use visit::{ToolResultAt, ToolResultMut, ToolResultRef};

/// How every message condense writes in place of others starts (a context-collapse or
/// autocompact summary, a restored file): `[condense: `. Stages, the summarizer, the archive and
/// the retention rules all recognise condense's own messages by it.
pub const CONDENSE_MARKER: &str = "[condense: ";

/// Counts tokens the way the pipeline does. The host's token counter, the services a stage is
/// handed and the test host all implement it, so the measuring helpers (`condense-turns`) work
/// on either side of the plugin boundary.
pub trait CountTokens {
    /// Tokens in `text` with the pipeline's tokenizer.
    fn count_tokens(&self, text: &str) -> usize;
}

use serde::{Deserialize, Serialize};

/// A whole conversation: what one request to the model (or one agent session) holds.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Conversation {
    /// The top-level system prompt (Anthropic `system`). Formats that put the system prompt in
    /// the message list (OpenAI) keep it there as a [`Role::System`] message instead.
    pub system: Option<Content>,
    /// Tool definitions offered to the model, each kept verbatim.
    pub tools: Vec<ToolDef>,
    pub messages: Vec<Message>,
    /// Unknown top-level keys of the request body (`model`, `max_tokens`, `metadata`, ...).
    pub extra: RawJson,
}

impl Conversation {
    /// Map from tool_use id to tool name, for every tool_use block in the conversation.
    pub fn tool_names_by_id(&self) -> ids::IdMap<&str, &str> {
        let mut names = ids::id_map(self.messages.len() / 2);
        for msg in &self.messages {
            for block in &msg.content.blocks {
                if let Block::ToolUse(tu) = block {
                    names.insert(tu.id.as_str(), tu.name.as_str());
                }
            }
        }
        names
    }

    /// Messages that reach the model (every role but [`Role::Event`]).
    pub fn chat_messages(&self) -> impl Iterator<Item = &Message> {
        self.messages.iter().filter(|m| m.is_chat())
    }

    /// Index of the message with this id.
    pub fn position(&self, id: &str) -> Option<usize> {
        self.messages.iter().position(|m| m.id == id)
    }
}

/// Every `tool_result` (in a chat message) whose `tool_use` is not in an earlier chat message,
/// as (message index, tool_use id), in message order. The host's output guard and the stages
/// that restructure messages check with it: a stage must not orphan a result the input did not
/// already orphan.
pub fn orphaned_tool_results<M: ReadMessage>(messages: &[M]) -> Vec<(usize, &str)> {
    // Sized for a tool call every other message: growing rehashes the ids seen so far.
    let mut seen = ids::id_set::<&str>(messages.len() / 2);
    let mut orphans = Vec::new();
    for (i, m) in messages.iter().enumerate().filter(|(_, m)| m.is_chat()) {
        for id in m.tool_result_ids() {
            if !seen.contains(id) {
                orphans.push((i, id));
            }
        }
        // Results inside this message answer calls of earlier messages only; calls made here
        // become answerable from the next message on.
        seen.extend(m.tool_use_ids());
    }
    orphans
}

/// One tool the model may call, kept verbatim; `name` is extracted for reports.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ToolDef {
    pub name: String,
    /// The whole definition object as it appeared in the source.
    pub raw: RawJson,
}

/// Who speaks a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    System,
    User,
    Assistant,
    /// OpenAI-style `role: "tool"` messages. Anthropic-style tool results stay in user messages.
    Tool,
    /// A transcript line that is not sent to the model (a Claude Code `summary` or
    /// `queue-operation` line, an OpenHands state change). Kept in place, never counted.
    Event,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::System => "system",
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::Tool => "tool",
            Role::Event => "event",
        }
    }
}

/// One message (or one kept-in-place transcript line, see [`Role::Event`]).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Message {
    /// Stable id: the source's own id when it has one (Claude Code `uuid`), otherwise one the
    /// reader derives from the position (`#12`), which stays stable when turns are appended.
    pub id: String,
    pub role: Role,
    /// RFC 3339 timestamp when the source records one. Writers put it back where it came from.
    pub timestamp: Option<String>,
    pub content: Content,
    /// Unknown fields of the message object itself.
    pub extra: RawJson,
    /// For JSONL formats: the wrapper line around the message (all its fields but the message),
    /// or the whole line for [`Role::Event`] lines. Empty elsewhere.
    pub envelope: RawJson,
}

/// The id a reader gives the message at `index` of a list whose messages carry none of their
/// own: `#index`. Built without `format!` ([`push_decimal`]): a read of a long session makes
/// thousands of them (placeholders for the messages it leaves unread included).
///
/// ```
/// assert_eq!(condense_model::synthetic_id(1234), "#1234");
/// ```
pub fn synthetic_id(index: usize) -> String {
    let mut id = String::with_capacity(8);
    id.push('#');
    push_decimal(&mut id, index);
    id
}

/// The index a [`synthetic_id`] was made of: `None` for any other id (`#01`, `#`, `#7a`, a
/// uuid).
///
/// ```
/// assert_eq!(condense_model::synthetic_index("#1234"), Some(1234));
/// assert_eq!(condense_model::synthetic_index("#01"), None);
/// ```
pub fn synthetic_index(id: &str) -> Option<usize> {
    let digits = id.strip_prefix('#')?;
    let canonical = digits.bytes().all(|b| b.is_ascii_digit())
        && !digits.is_empty()
        && (digits == "0" || !digits.starts_with('0'));
    canonical.then(|| digits.parse().ok()).flatten()
}

pub use condense_text::push_decimal;

impl Message {
    /// A message with array-shaped content and nothing extra.
    pub fn new(id: impl Into<String>, role: Role, blocks: Vec<Block>) -> Self {
        Message {
            id: id.into(),
            role,
            timestamp: None,
            content: Content::blocks(blocks),
            extra: RawJson::default(),
            envelope: RawJson::default(),
        }
    }

    /// Whether `other` is this message but for its id: what a message read back from the
    /// place of another in a list (whose synthetic `#n` id is its place) is compared by.
    pub fn same_but_id(&self, other: &Message) -> bool {
        self.role == other.role
            && self.timestamp == other.timestamp
            && self.content == other.content
            && self.extra == other.extra
            && self.envelope == other.envelope
    }

    /// Whether this message reaches the model.
    pub fn is_chat(&self) -> bool {
        self.role != Role::Event
    }

    /// The tool_result blocks of this message.
    pub fn tool_results(&self) -> impl Iterator<Item = &ToolResult> {
        self.content.blocks.iter().filter_map(|b| match b {
            Block::ToolResult(tr) => Some(tr),
            _ => None,
        })
    }

    /// The tool_use blocks of this message.
    pub fn tool_uses(&self) -> impl Iterator<Item = &ToolUse> {
        self.content.blocks.iter().filter_map(|b| match b {
            Block::ToolUse(tu) => Some(tu),
            _ => None,
        })
    }
}

/// How the source spelled a content field, so writers can reproduce it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ContentShape {
    /// `"content": "text"`: one text block. If a stage leaves anything but a single plain text
    /// block, writers fall back to an array.
    String,
    /// `"content": [ ... ]`.
    #[default]
    Array,
    /// `"content": null`.
    Null,
    /// No content key at all.
    Absent,
}

/// The content of a message, a tool result or a system prompt.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Content {
    pub shape: ContentShape,
    pub blocks: Vec<Block>,
}

impl Content {
    /// No blocks, spelled as `shape` (`ContentShape::Absent`: no content key; `Null`: `null`).
    pub fn empty(shape: ContentShape) -> Self {
        Content {
            shape,
            blocks: Vec::new(),
        }
    }

    /// Array-shaped content.
    pub fn blocks(blocks: Vec<Block>) -> Self {
        Content {
            shape: ContentShape::Array,
            blocks,
        }
    }

    /// String-shaped content holding one text block.
    pub fn string(text: impl Into<String>) -> Self {
        Content {
            shape: ContentShape::String,
            blocks: vec![Block::text(text)],
        }
    }

    /// All text of the text blocks, joined by newlines (tool results nest: their text counts).
    pub fn text(&self) -> String {
        join_text(&self.blocks, &|block| match block {
            Block::Text(t) => TextPiece::Text(&t.text),
            Block::ToolResult(tr) => TextPiece::Nested(&tr.content.blocks),
            _ => TextPiece::Other,
        })
    }

    /// Total length in bytes of the text this content carries (text blocks, nested results).
    pub fn text_len(&self) -> usize {
        self.blocks.iter().map(Block::text_len).sum()
    }

    /// This content with its text (text blocks and nested tool results) replaced by one text
    /// block holding `text`, placed first; other blocks (images, opaque ones, and text blocks
    /// `keep` says to keep) follow it. The new block takes the `extra` of the last text block it
    /// replaces. String-shaped content stays a string when nothing else remains.
    ///
    /// What stages use to swap a tool result's payload for a marker or a reference.
    pub fn with_text_replaced(&self, text: String, keep: impl Fn(&TextBlock) -> bool) -> Content {
        let mut extra = RawJson::default();
        let mut others = Vec::new();
        for block in &self.blocks {
            match block {
                Block::Text(t) if !keep(t) => extra = t.extra.clone(),
                Block::ToolResult(_) => {}
                other => others.push(other.clone()),
            }
        }
        if self.shape == ContentShape::String && others.is_empty() && extra.is_empty() {
            return Content::string(text);
        }
        let mut blocks = vec![Block::Text(TextBlock { text, extra })];
        blocks.extend(others);
        Content::blocks(blocks)
    }
}

/// What one block gives [`join_text`]: its text, the blocks of a tool result it holds, or
/// nothing.
pub enum TextPiece<'b, B> {
    Text(&'b str),
    Nested(&'b [B]),
    Other,
}

/// The text of `blocks` as [`Content::text`] joins it: text blocks joined by newlines, a tool
/// result's text (joined the same way) counting as one piece when it is not empty. Written over
/// any block type (`piece` says what a block is), so the model and the borrowed view stages
/// read through (`condense_abi::View`) join text the same way.
pub fn join_text<'b, B>(blocks: &'b [B], piece: &impl Fn(&'b B) -> TextPiece<'b, B>) -> String {
    let mut out = String::new();
    for block in blocks {
        match piece(block) {
            TextPiece::Text(text) => {
                if !out.is_empty() {
                    out.push('\n');
                }
                out.push_str(text);
            }
            TextPiece::Nested(inner) => {
                let nested = join_text(inner, piece);
                if !out.is_empty() && !nested.is_empty() {
                    out.push('\n');
                }
                out.push_str(&nested);
            }
            TextPiece::Other => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn synthetic_ids_are_the_index_after_a_hash() {
        for i in [0, 7, 9, 10, 99, 100, 12_345, usize::MAX / 3, usize::MAX] {
            assert_eq!(synthetic_id(i), format!("#{i}"));
            assert_eq!(synthetic_index(&synthetic_id(i)), Some(i));
        }
        for other in [
            "#",
            "#01",
            "#00",
            "# 1",
            "#+1",
            "#-1",
            "#1a",
            "1",
            "",
            "#184467440737095516150",
        ] {
            assert_eq!(synthetic_index(other), None, "{other:?}");
        }
    }

    #[test]
    fn orphans_are_results_without_an_earlier_call() {
        let msgs = vec![
            Message::new(
                "r0",
                Role::User,
                vec![Block::tool_result("c0", Content::string("x"))],
            ),
            // A call and its result in the same message: the result is still an orphan.
            Message::new(
                "a1",
                Role::Assistant,
                vec![
                    Block::tool_use("c1", "Read", RawJson::from_string_unchecked("{}".into())),
                    Block::tool_result("c1", Content::string("y")),
                ],
            ),
            Message::new(
                "r1",
                Role::User,
                vec![Block::tool_result("c1", Content::string("z"))],
            ),
        ];
        assert_eq!(orphaned_tool_results(&msgs), vec![(0, "c0"), (1, "c1")]);
    }

    #[test]
    fn replacing_text_keeps_shape_images_and_kept_blocks() {
        let s = Content::string("long output");
        assert_eq!(
            s.with_text_replaced("ref".into(), |_| false),
            Content::string("ref")
        );

        let image = Block::Image(Image {
            source: ImageSource::Reference {
                json: RawJson::default(),
            },
            extra: RawJson::default(),
        });
        let c = Content::blocks(vec![
            Block::text("a"),
            image.clone(),
            Block::text("[keep me]"),
        ]);
        let out = c.with_text_replaced("ref".into(), |t| t.text.starts_with('['));
        assert_eq!(
            out.blocks,
            vec![Block::text("ref"), image, Block::text("[keep me]")]
        );
        assert_eq!(out.shape, ContentShape::Array);
    }
}
