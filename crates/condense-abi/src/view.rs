//! Reading the conversation without copying it: [`View`].
//!
//! Inside a plugin the conversation stays on the host's side of the boundary. A view reads it
//! where it lies: every string is borrowed from the host, nothing is allocated per message or
//! per block. A stage that only has to look (is anything over its budget? which results are
//! old?) decides through the view and copies the conversation in with
//! [`Input::into_conversation`](crate::Input::into_conversation) only when it changes something.
//! At 200,000 tokens the copy and its drop cost about 3 M instructions per stage, a third of a
//! typical stage's whole run on a turn that changes nothing.
//!
//! The view answers what the model answers, with the same rules: [`ContentView::text`] joins
//! text as [`Content::text`](condense_model::Content::text) does (one function does both), and
//! [`View::tool_results`] visits what
//! [`Conversation::tool_results`](condense_model::Conversation::tool_results) visits.
//!
//! ```
//! use condense_abi::{BlockView, Input};
//! use condense_model::{Block, Content, Conversation, Message, RawJson, Role};
//! let mut conv = Conversation::default();
//! conv.messages.push(Message::new("a1", Role::Assistant, vec![Block::tool_use("c1", "Read", RawJson::default())]));
//! conv.messages.push(Message::new("r1", Role::User, vec![Block::tool_result("c1", Content::string("fn main() {}"))]));
//! let input = Input::of(&conv);
//! let view = input.view().unwrap();
//! let results: Vec<_> = view.tool_results().collect();
//! assert_eq!((results[0].message_id, results[0].tool), ("r1", Some("Read")));
//! assert_eq!(results[0].result.content().text(), "fn main() {}");
//! assert!(matches!(view.message(0).unwrap().blocks().next(), Some(BlockView::ToolUse { name: "Read", .. })));
//! ```

use crate::ffi::{
    role_from_u8, shape_from_u8, FfiBlockOf, FfiContentOf, FfiConversationRef, FfiMessageOf,
    KIND_IMAGE_BASE64, KIND_IMAGE_REF, KIND_OPAQUE, KIND_TEXT, KIND_THINKING, KIND_TOOL_RESULT,
    KIND_TOOL_USE,
};
use abi_stable::std_types::RStr;
use condense_model::ids::{id_map, IdMap};
use condense_model::{
    join_text, Block, Content, ContentShape, Conversation, Image, ImageSource, Message, Opaque,
    Piece, RawJson, ReadMessage, Role, TextBlock, TextPiece, ThinkingBlock, ToolDef, ToolResult,
    ToolResultRef, ToolUse,
};
use std::borrow::Cow;

type FfiBlockRef<'v> = FfiBlockOf<RStr<'v>>;

/// The conversation a stage is handed, read in place: see the `view` module docs.
#[derive(Clone, Copy, Debug)]
pub struct View<'v> {
    conv: &'v FfiConversationRef<'v>,
}

impl<'v> View<'v> {
    /// A view of `conv` once its tags are known good: after this every accessor answers
    /// without failing (a malformed tag is the host's error, reported once, here).
    pub(crate) fn new(conv: &'v FfiConversationRef<'v>) -> Result<Self, String> {
        if let Some(system) = conv.system.as_ref().into_option() {
            check_content(system.shape, &system.blocks)?;
        }
        for m in conv.messages.iter() {
            role_from_u8(m.role)?;
            check_content(m.content.shape, &m.content.blocks)?;
        }
        Ok(View { conv })
    }

    /// Number of messages.
    pub fn len(&self) -> usize {
        self.conv.messages.len()
    }

    /// Whether there is no message.
    pub fn is_empty(&self) -> bool {
        self.conv.messages.is_empty()
    }

    /// The messages, in order.
    pub fn messages(&self) -> impl DoubleEndedIterator<Item = MessageView<'v>> + ExactSizeIterator {
        self.conv.messages.as_slice().iter().map(MessageView)
    }

    /// The message at `index`.
    pub fn message(&self, index: usize) -> Option<MessageView<'v>> {
        self.conv.messages.as_slice().get(index).map(MessageView)
    }

    /// The index of the first message with id `id`.
    pub fn position(&self, id: &str) -> Option<usize> {
        self.messages().position(|m| m.id() == id)
    }

    /// The system prompt, when the conversation has one.
    pub fn system(&self) -> Option<ContentView<'v>> {
        let system: Option<&'v FfiContentOf<RStr<'v>>> = self.conv.system.as_ref().into_option();
        system.map(ContentView::of)
    }

    /// The names of the tool definitions, in order.
    pub fn tool_names(&self) -> impl Iterator<Item = &'v str> {
        self.conv.tools.as_slice().iter().map(|t| t.name.as_str())
    }

    /// The conversation's fields this model does not know (the request's other fields), as
    /// raw JSON text.
    pub fn extra(&self) -> &'v str {
        self.conv.extra.as_str()
    }

    /// The conversation without its messages (system prompt, tools, request fields), copied:
    /// what a stage that builds new messages hands back around them.
    pub fn header(&self) -> Conversation {
        Conversation {
            system: self.system().map(|c| c.to_content()),
            tools: self
                .conv
                .tools
                .as_slice()
                .iter()
                .map(|t| ToolDef {
                    name: t.name.as_str().to_string(),
                    raw: raw(t.raw.as_str()),
                })
                .collect(),
            messages: Vec::new(),
            extra: raw(self.extra()),
        }
    }

    /// Tool name by tool_use id, over the whole conversation (as
    /// [`Conversation::tool_names_by_id`](condense_model::Conversation::tool_names_by_id)).
    pub fn tool_names_by_id(&self) -> IdMap<&'v str, &'v str> {
        // Sized for a tool use every other message, so that a long conversation's map is not
        // rehashed doubling after doubling (every stage that walks tool results builds it).
        let mut names = id_map(self.len() / 2);
        for message in self.messages() {
            for block in message.blocks() {
                if let BlockView::ToolUse { id, name, .. } = block {
                    names.insert(id, name);
                }
            }
        }
        names
    }

    /// Every top-level tool result, in message order, with where it sits and its tool (as
    /// [`Conversation::tool_results`](condense_model::Conversation::tool_results)).
    pub fn tool_results(&self) -> impl Iterator<Item = ToolResultSlot<'v>> {
        let names = self.tool_names_by_id();
        self.messages()
            .enumerate()
            .flat_map(|(mi, message)| {
                message
                    .blocks()
                    .enumerate()
                    .filter_map(move |(bi, block)| match block {
                        BlockView::ToolResult(result) => Some((mi, bi, message, result)),
                        _ => None,
                    })
            })
            .map(move |(mi, bi, message, result)| ToolResultSlot {
                message: mi,
                block: bi,
                message_id: message.id(),
                role: message.role(),
                tool: names.get(result.tool_use_id()).copied(),
                result,
            })
    }
}

/// Checks the tags of a content's blocks (nested results included).
fn check_content(shape: u8, blocks: &[FfiBlockRef<'_>]) -> Result<(), String> {
    shape_from_u8(shape)?;
    for b in blocks {
        match b.kind {
            KIND_TOOL_RESULT => check_content(b.shape, &b.children)?,
            KIND_TEXT | KIND_THINKING | KIND_TOOL_USE | KIND_IMAGE_BASE64 | KIND_IMAGE_REF
            | KIND_OPAQUE => {}
            other => return Err(format!("unknown block kind tag {other}")),
        }
    }
    Ok(())
}

/// One message, read in place.
#[derive(Clone, Copy, Debug)]
pub struct MessageView<'v>(&'v FfiMessageOf<RStr<'v>>);

impl<'v> MessageView<'v> {
    pub fn id(&self) -> &'v str {
        self.0.id.as_str()
    }

    pub fn role(&self) -> Role {
        // Checked when the view was made.
        role_from_u8(self.0.role).unwrap_or(Role::User)
    }

    pub fn timestamp(&self) -> Option<&'v str> {
        let timestamp: Option<&'v RStr<'v>> = self.0.timestamp.as_ref().into_option();
        timestamp.map(RStr::as_str)
    }

    /// Whether the message is part of the chat the model sees (not an event line).
    pub fn is_chat(&self) -> bool {
        self.role() != Role::Event
    }

    pub fn content(&self) -> ContentView<'v> {
        ContentView::of(&self.0.content)
    }

    /// The content's blocks.
    pub fn blocks(&self) -> impl DoubleEndedIterator<Item = BlockView<'v>> + ExactSizeIterator {
        self.content().blocks()
    }

    /// The message's fields this model does not know, as raw JSON text.
    pub fn extra(&self) -> &'v str {
        self.0.extra.as_str()
    }

    /// The wrapper line of JSONL formats, as raw JSON text (empty for other formats).
    pub fn envelope(&self) -> &'v str {
        self.0.envelope.as_str()
    }
}

impl ReadMessage for MessageView<'_> {
    fn id(&self) -> &str {
        MessageView::id(self)
    }

    fn role(&self) -> Role {
        MessageView::role(self)
    }

    fn tool_use_ids(&self) -> impl Iterator<Item = &str> {
        self.blocks().filter_map(|b| match b {
            BlockView::ToolUse { id, .. } => Some(id),
            _ => None,
        })
    }

    fn tool_result_ids(&self) -> impl Iterator<Item = &str> {
        self.blocks().filter_map(|b| match b {
            BlockView::ToolResult(r) => Some(r.tool_use_id()),
            _ => None,
        })
    }

    fn has_non_result_block(&self) -> bool {
        self.blocks()
            .any(|b| !matches!(b, BlockView::ToolResult(_)))
    }

    fn only_text(&self) -> Option<&str> {
        let mut blocks = self.blocks();
        match (blocks.next(), blocks.next()) {
            (Some(BlockView::Text { text, .. }), None) => Some(text),
            _ => None,
        }
    }

    fn block_count(&self) -> usize {
        self.content().len()
    }

    fn pieces(&self, visit: &mut dyn FnMut(Piece<'_>)) {
        self.content().pieces(visit);
    }

    fn to_message(&self) -> Message {
        Message {
            id: MessageView::id(self).to_string(),
            role: MessageView::role(self),
            timestamp: self.timestamp().map(str::to_string),
            content: self.content().to_content(),
            extra: raw(self.extra()),
            envelope: raw(self.envelope()),
        }
    }

    fn is(&self, m: &Message) -> bool {
        m.id == MessageView::id(self)
            && m.role == MessageView::role(self)
            && m.timestamp.as_deref() == self.timestamp()
            && m.extra.as_str() == self.extra()
            && m.envelope.as_str() == self.envelope()
            && same_content(&m.content, self.content())
    }
}

/// Whether `view` shows `block` exactly (every field, nested results included).
pub(crate) fn same_block(block: &Block, view: BlockView<'_>) -> bool {
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

/// Whether `view` shows `content` exactly.
pub(crate) fn same_content(content: &Content, view: ContentView<'_>) -> bool {
    content.shape == view.shape()
        && content.blocks.len() == view.len()
        && content
            .blocks
            .iter()
            .zip(view.blocks())
            .all(|(b, v)| same_block(b, v))
}

/// A message's or a tool result's content, read in place.
#[derive(Clone, Copy, Debug)]
pub struct ContentView<'v> {
    shape: u8,
    blocks: &'v [FfiBlockRef<'v>],
}

impl<'v> ContentView<'v> {
    fn of(content: &'v FfiContentOf<RStr<'v>>) -> Self {
        ContentView {
            shape: content.shape,
            blocks: &content.blocks,
        }
    }

    /// The shape the source gave the content (a string stays a string).
    pub fn shape(&self) -> ContentShape {
        // Checked when the view was made.
        shape_from_u8(self.shape).unwrap_or_default()
    }

    pub fn blocks(&self) -> impl DoubleEndedIterator<Item = BlockView<'v>> + ExactSizeIterator {
        self.blocks.iter().map(BlockView::of)
    }

    /// Number of blocks.
    pub fn len(&self) -> usize {
        self.blocks.len()
    }

    pub fn is_empty(&self) -> bool {
        self.blocks.is_empty()
    }

    /// Every [`Piece`] of the content, nested tool results included, in order: the pieces
    /// [`condense_model::read::content_pieces`] gives for the model's content (measuring counts
    /// these; a stage with its own rule for a piece, such as a flat image estimate, walks them
    /// too).
    pub fn pieces(&self, visit: &mut dyn FnMut(Piece<'_>)) {
        for block in self.blocks() {
            match block {
                BlockView::Text { text, .. } => visit(Piece::Text(text)),
                BlockView::Thinking { thinking, .. } => visit(Piece::Text(thinking)),
                BlockView::ToolUse { name, input, .. } => {
                    visit(Piece::Text(name));
                    visit(Piece::Text(input));
                }
                BlockView::ToolResult(r) => r.content().pieces(visit),
                BlockView::ImageBase64 { data, .. } => visit(Piece::Image { base64: Some(data) }),
                BlockView::ImageReference { .. } => visit(Piece::Image { base64: None }),
                BlockView::Opaque { json } => visit(Piece::Text(json)),
            }
        }
    }

    /// The content copied into the model.
    pub fn to_content(&self) -> Content {
        Content {
            shape: self.shape(),
            blocks: self.blocks().map(|b| b.to_block()).collect(),
        }
    }

    /// [`text`](Self::text), borrowed when the content is one text block (most tool results):
    /// a stage that only measures or compares every result need not copy them all.
    pub fn text_cow(&self) -> Cow<'v, str> {
        match self.blocks {
            [one] if one.kind == KIND_TEXT => Cow::Borrowed(one.a.as_str()),
            _ => Cow::Owned(self.text()),
        }
    }

    /// All text of the text blocks, joined by newlines, nested results included: exactly
    /// [`Content::text`](condense_model::Content::text).
    pub fn text(&self) -> String {
        join_text(self.blocks, &|b: &'v FfiBlockRef<'v>| match b.kind {
            KIND_TEXT => TextPiece::Text(b.a.as_str()),
            KIND_TOOL_RESULT => TextPiece::Nested(&b.children),
            _ => TextPiece::Other,
        })
    }
}

/// One block, read in place (the model's [`Block`] with borrowed
/// strings; raw JSON fields as their text).
#[derive(Clone, Copy, Debug)]
pub enum BlockView<'v> {
    Text {
        text: &'v str,
        extra: &'v str,
    },
    Thinking {
        thinking: &'v str,
        extra: &'v str,
    },
    ToolUse {
        id: &'v str,
        name: &'v str,
        input: &'v str,
        extra: &'v str,
    },
    ToolResult(ToolResultView<'v>),
    ImageBase64 {
        media_type: &'v str,
        data: &'v str,
        extra: &'v str,
    },
    ImageReference {
        json: &'v str,
        extra: &'v str,
    },
    Opaque {
        json: &'v str,
    },
}

impl<'v> BlockView<'v> {
    /// The block copied into the model.
    pub fn to_block(&self) -> Block {
        match *self {
            BlockView::Text { text, extra } => Block::Text(TextBlock {
                text: text.to_string(),
                extra: raw(extra),
            }),
            BlockView::Thinking { thinking, extra } => Block::Thinking(ThinkingBlock {
                thinking: thinking.to_string(),
                extra: raw(extra),
            }),
            BlockView::ToolUse {
                id,
                name,
                input,
                extra,
            } => Block::ToolUse(ToolUse {
                id: id.to_string(),
                name: name.to_string(),
                input: raw(input),
                extra: raw(extra),
            }),
            BlockView::ToolResult(r) => Block::ToolResult(r.to_tool_result()),
            BlockView::ImageBase64 {
                media_type,
                data,
                extra,
            } => Block::Image(Image {
                source: ImageSource::Base64 {
                    media_type: media_type.to_string(),
                    data: data.to_string(),
                },
                extra: raw(extra),
            }),
            BlockView::ImageReference { json, extra } => Block::Image(Image {
                source: ImageSource::Reference { json: raw(json) },
                extra: raw(extra),
            }),
            BlockView::Opaque { json } => Block::Opaque(Opaque { json: raw(json) }),
        }
    }

    fn of(b: &'v FfiBlockRef<'v>) -> Self {
        let (a, extra) = (b.a.as_str(), b.extra.as_str());
        match b.kind {
            KIND_TEXT => BlockView::Text { text: a, extra },
            KIND_THINKING => BlockView::Thinking { thinking: a, extra },
            KIND_TOOL_USE => BlockView::ToolUse {
                id: a,
                name: b.b.as_str(),
                input: b.c.as_str(),
                extra,
            },
            KIND_TOOL_RESULT => BlockView::ToolResult(ToolResultView(b)),
            KIND_IMAGE_BASE64 => BlockView::ImageBase64 {
                media_type: a,
                data: b.b.as_str(),
                extra,
            },
            KIND_IMAGE_REF => BlockView::ImageReference { json: a, extra },
            // Opaque, and (checked when the view was made) nothing else.
            _ => BlockView::Opaque { json: a },
        }
    }
}

/// A tool result block, read in place.
#[derive(Clone, Copy, Debug)]
pub struct ToolResultView<'v>(&'v FfiBlockRef<'v>);

impl<'v> ToolResultView<'v> {
    pub fn tool_use_id(&self) -> &'v str {
        self.0.a.as_str()
    }

    /// `None` when the source did not say.
    pub fn is_error(&self) -> Option<bool> {
        match self.0.flag {
            0 => Some(false),
            1 => Some(true),
            _ => None,
        }
    }

    pub fn content(&self) -> ContentView<'v> {
        ContentView {
            shape: self.0.shape,
            blocks: &self.0.children,
        }
    }

    /// The block's fields this model does not know, as raw JSON text.
    pub fn extra(&self) -> &'v str {
        self.0.extra.as_str()
    }

    /// This one result copied into the model (for the few that a model function must read,
    /// without copying the conversation).
    pub fn to_tool_result(&self) -> ToolResult {
        ToolResult {
            tool_use_id: self.tool_use_id().to_string(),
            content: self.content().to_content(),
            is_error: self.is_error(),
            extra: raw(self.extra()),
        }
    }
}

/// Raw JSON text the view borrows, copied (it was the model's raw text on the host's side).
fn raw(text: &str) -> RawJson {
    RawJson::from_string_unchecked(text.to_string())
}

/// One top-level tool result with where it sits (the model's `ToolResultRef` over a view):
/// see [`View::tool_results`].
pub type ToolResultSlot<'v> = ToolResultRef<'v, ToolResultView<'v>>;

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests;
