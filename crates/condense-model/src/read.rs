//! Reading a message without owning it: [`ReadMessage`], what code that only looks at messages
//! (turn grouping, measuring, finding a stage's own messages) needs of one.
//!
//! The model's [`Message`] implements it, and so does the borrowed view a stage reads the host's
//! conversation through (`condense_abi::MessageView`), so such code is written once and runs
//! over either: a stage decides over the host's strings and copies only what it keeps or
//! changes ([`ReadMessage::to_message`]).
//!
//! ```
//! use condense_model::{Block, Message, ReadMessage, Role};
//! let m = Message::new("u1", Role::User, vec![Block::text("fix the test")]);
//! assert_eq!((m.id(), m.only_text()), ("u1", Some("fix the test")));
//! let mut texts = Vec::new();
//! m.pieces(&mut |p| texts.push(format!("{p:?}")));
//! assert_eq!(texts, [r#"Text("fix the test")"#]);
//! ```

use crate::{Block, Content, ImageSource, Message, Role};

/// One thing a message's content holds that costs tokens, as measuring sees it: a string
/// counted on its own (a text, a thought, a tool's name, its input, an opaque block's JSON), or
/// an image (with its base64 data when it has some).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Piece<'a> {
    Text(&'a str),
    Image { base64: Option<&'a str> },
}

/// A message as code that only reads it sees it (see the [module docs](self)).
pub trait ReadMessage {
    fn id(&self) -> &str;
    fn role(&self) -> Role;
    /// Whether the message is part of the chat the model sees (not an event line).
    fn is_chat(&self) -> bool {
        self.role() != Role::Event
    }
    /// The ids of its `tool_use` blocks, in order.
    fn tool_use_ids(&self) -> impl Iterator<Item = &str>;
    /// The `tool_use_id`s of its (top-level) `tool_result` blocks, in order.
    fn tool_result_ids(&self) -> impl Iterator<Item = &str>;
    /// Whether a block of its content is not a tool result.
    fn has_non_result_block(&self) -> bool;
    /// The text of its content when that is exactly one text block.
    fn only_text(&self) -> Option<&str>;
    /// The number of blocks of its content.
    fn block_count(&self) -> usize;
    /// Every [`Piece`] of its content, nested tool results included, in order.
    fn pieces(&self, visit: &mut dyn FnMut(Piece<'_>));
    /// The message, owned (a copy).
    fn to_message(&self) -> Message;
    /// Whether it is `message`, field by field.
    fn is(&self, message: &Message) -> bool;
}

impl ReadMessage for Message {
    fn id(&self) -> &str {
        &self.id
    }

    fn role(&self) -> Role {
        self.role
    }

    fn tool_use_ids(&self) -> impl Iterator<Item = &str> {
        self.tool_uses().map(|t| t.id.as_str())
    }

    fn tool_result_ids(&self) -> impl Iterator<Item = &str> {
        self.tool_results().map(|t| t.tool_use_id.as_str())
    }

    fn has_non_result_block(&self) -> bool {
        self.content
            .blocks
            .iter()
            .any(|b| !matches!(b, Block::ToolResult(_)))
    }

    fn only_text(&self) -> Option<&str> {
        match self.content.blocks.as_slice() {
            [Block::Text(t)] => Some(&t.text),
            _ => None,
        }
    }

    fn block_count(&self) -> usize {
        self.content.blocks.len()
    }

    fn pieces(&self, visit: &mut dyn FnMut(Piece<'_>)) {
        content_pieces(&self.content, visit);
    }

    fn to_message(&self) -> Message {
        self.clone()
    }

    fn is(&self, message: &Message) -> bool {
        self == message
    }
}

/// Every [`Piece`] of `content`, nested tool results included, in order.
pub fn content_pieces(content: &Content, visit: &mut dyn FnMut(Piece<'_>)) {
    for block in &content.blocks {
        match block {
            Block::Text(t) => visit(Piece::Text(&t.text)),
            Block::Thinking(t) => visit(Piece::Text(&t.thinking)),
            Block::ToolUse(t) => {
                visit(Piece::Text(&t.name));
                visit(Piece::Text(t.input.as_str()));
            }
            Block::ToolResult(t) => content_pieces(&t.content, visit),
            Block::Image(image) => visit(Piece::Image {
                base64: match &image.source {
                    ImageSource::Base64 { data, .. } => Some(data),
                    ImageSource::Reference { .. } => None,
                },
            }),
            Block::Opaque(o) => visit(Piece::Text(o.json.as_str())),
        }
    }
}

impl<M: ReadMessage + ?Sized> ReadMessage for &M {
    fn id(&self) -> &str {
        (**self).id()
    }

    fn role(&self) -> Role {
        (**self).role()
    }

    fn tool_use_ids(&self) -> impl Iterator<Item = &str> {
        (**self).tool_use_ids()
    }

    fn tool_result_ids(&self) -> impl Iterator<Item = &str> {
        (**self).tool_result_ids()
    }

    fn has_non_result_block(&self) -> bool {
        (**self).has_non_result_block()
    }

    fn only_text(&self) -> Option<&str> {
        (**self).only_text()
    }

    fn block_count(&self) -> usize {
        (**self).block_count()
    }

    fn pieces(&self, visit: &mut dyn FnMut(Piece<'_>)) {
        (**self).pieces(visit);
    }

    fn to_message(&self) -> Message {
        (**self).to_message()
    }

    fn is(&self, message: &Message) -> bool {
        (**self).is(message)
    }
}
