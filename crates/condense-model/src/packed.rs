//! Messages packed into bytes for the store: every string length-prefixed, nothing escaped.
//!
//! A session's resume point keeps the messages the stages changed or made (the results snip
//! cut, the collapse summaries) as records of their own, and every turn reads them back: 183
//! of them at a million tokens. As JSON, reading one meant scanning every string for escapes
//! and buffering every block to find its `type` first (about 25,000 instructions a message);
//! packed, a string is a length and a copy.
//!
//! ```
//! use condense_model::{packed, Block, Content, Message, Role};
//!
//! let m = Message::new("#3", Role::User, vec![Block::tool_result("t1", Content::string("ok"))]);
//! let bytes = packed::pack_message(&m);
//! assert_eq!(packed::unpack_message(&bytes), Some(m));
//! assert_eq!(packed::unpack_message(&bytes[..bytes.len() - 1]), None); // damaged: no message
//! ```
//!
//! The layout (integers LEB128, a string its byte length then its bytes, an option a byte 0 or
//! 1 then the value): [`VERSION`], then the message's id, role, timestamp, content, `extra`
//! and `envelope`; a content its shape and blocks; a block a tag byte then its fields in
//! declaration order. Every struct is taken apart whole (`let Message { id, .. } = m` without
//! `..`), so a field added to the model fails to compile here until it is packed. A length
//! spelled in more bytes than it needs (`0x85 0x00` for 5) reads as the same length.

use crate::{
    Block, Content, ContentShape, Image, ImageSource, Message, Opaque, RawJson, Role, TextBlock,
    ThinkingBlock, ToolResult, ToolUse,
};

/// The first byte of a packed message; bumped when the layout changes (another one does not
/// unpack).
pub const VERSION: u8 = 1;

/// How deep tool results may nest in a packed message (a damaged record claiming more is no
/// message, rather than a stack overflow).
const MAX_DEPTH: usize = 64;

/// `message` packed (see the [module docs](self)).
pub fn pack_message(message: &Message) -> Vec<u8> {
    let text: usize = message.content.blocks.iter().map(Block::text_len).sum();
    let mut out = Vec::with_capacity(64 + text);
    pack_message_into(&mut out, message);
    out
}

/// [`pack_message`] onto the end of `out` (a buffer reused for many messages).
pub fn pack_message_into(out: &mut Vec<u8>, message: &Message) {
    out.push(VERSION);
    let Message {
        id,
        role,
        timestamp,
        content,
        extra,
        envelope,
    } = message;
    put_str(out, id);
    out.push(role_byte(*role));
    match timestamp {
        Some(t) => {
            out.push(1);
            put_str(out, t);
        }
        None => out.push(0),
    }
    put_content(out, content);
    put_str(out, extra.as_str());
    put_str(out, envelope.as_str());
}

/// The message [`pack_message`] packed into `bytes`; `None` for bytes that do not unpack whole
/// (damaged, cut short, or of another [`VERSION`]).
pub fn unpack_message(bytes: &[u8]) -> Option<Message> {
    let mut r = Reader::new(bytes.strip_prefix(&[VERSION])?);
    let message = Message {
        id: r.string()?,
        role: role_of(r.byte()?)?,
        timestamp: match r.byte()? {
            0 => None,
            1 => Some(r.string()?),
            _ => return None,
        },
        content: content(&mut r, 0)?,
        extra: r.raw_json()?,
        envelope: r.raw_json()?,
    };
    r.is_done().then_some(message)
}

/// Appends `n` as LEB128 (7 bits a byte, low first). The primitives of this layout
/// ([`put_len`], [`put_str`], [`put_u128`], [`Reader`]) serve the store's other packed records
/// too (`condense`'s writer texts).
pub fn put_len(out: &mut Vec<u8>, mut n: usize) {
    while n >= 0x80 {
        // The low 7 bits, and the flag saying more follow.
        out.push((n & 0x7f) as u8 | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
}

/// Appends `s` as its length ([`put_len`]) then its bytes.
pub fn put_str(out: &mut Vec<u8>, s: &str) {
    put_len(out, s.len());
    out.extend_from_slice(s.as_bytes());
}

/// Appends `n` as its 16 bytes, little-endian (a hash or a key).
pub fn put_u128(out: &mut Vec<u8>, n: u128) {
    out.extend_from_slice(&n.to_le_bytes());
}

/// Reads what [`put_len`], [`put_str`] and [`put_u128`] wrote; every method gives `None` past
/// the end or on bytes that are not what it reads.
pub struct Reader<'b> {
    rest: &'b [u8],
}

impl<'b> Reader<'b> {
    pub fn new(bytes: &'b [u8]) -> Reader<'b> {
        Reader { rest: bytes }
    }

    /// Whether every byte was read.
    pub fn is_done(&self) -> bool {
        self.rest.is_empty()
    }

    /// The next `n` bytes.
    pub fn take(&mut self, n: usize) -> Option<&'b [u8]> {
        let (head, rest) = self.rest.split_at_checked(n)?;
        self.rest = rest;
        Some(head)
    }

    pub fn byte(&mut self) -> Option<u8> {
        Some(self.take(1)?[0])
    }

    /// A length written by [`put_len`].
    pub fn length(&mut self) -> Option<usize> {
        let mut n: usize = 0;
        for shift in (0..usize::BITS).step_by(7) {
            let b = self.byte()?;
            n |= usize::from(b & 0x7f).checked_shl(shift)?;
            if b & 0x80 == 0 {
                return Some(n);
            }
        }
        None
    }

    /// A string written by [`put_str`], checked as UTF-8 with simdutf8 (AVX2 or SSE4.2,
    /// detected at run time): a long Claude Code session's turn unpacks its whole history, and
    /// std's check of it was 14 M of a 318 M instructions turn.
    pub fn str(&mut self) -> Option<&'b str> {
        let n = self.length()?;
        simdutf8::basic::from_utf8(self.take(n)?).ok()
    }

    pub fn string(&mut self) -> Option<String> {
        self.str().map(str::to_string)
    }

    /// A number written by [`put_u128`].
    pub fn u128(&mut self) -> Option<u128> {
        Some(u128::from_le_bytes(self.take(16)?.try_into().ok()?))
    }

    fn raw_json(&mut self) -> Option<RawJson> {
        self.string().map(RawJson::from_string_unchecked)
    }
}

fn role_byte(role: Role) -> u8 {
    match role {
        Role::System => 0,
        Role::User => 1,
        Role::Assistant => 2,
        Role::Tool => 3,
        Role::Event => 4,
    }
}

fn role_of(b: u8) -> Option<Role> {
    Some(match b {
        0 => Role::System,
        1 => Role::User,
        2 => Role::Assistant,
        3 => Role::Tool,
        4 => Role::Event,
        _ => return None,
    })
}

fn shape_byte(shape: ContentShape) -> u8 {
    match shape {
        ContentShape::String => 0,
        ContentShape::Array => 1,
        ContentShape::Null => 2,
        ContentShape::Absent => 3,
    }
}

fn shape_of(b: u8) -> Option<ContentShape> {
    Some(match b {
        0 => ContentShape::String,
        1 => ContentShape::Array,
        2 => ContentShape::Null,
        3 => ContentShape::Absent,
        _ => return None,
    })
}

fn put_content(out: &mut Vec<u8>, content: &Content) {
    let Content { shape, blocks } = content;
    out.push(shape_byte(*shape));
    put_len(out, blocks.len());
    for block in blocks {
        put_block(out, block);
    }
}

fn put_block(out: &mut Vec<u8>, block: &Block) {
    match block {
        Block::Text(TextBlock { text, extra }) => {
            out.push(0);
            put_str(out, text);
            put_str(out, extra.as_str());
        }
        Block::Thinking(ThinkingBlock { thinking, extra }) => {
            out.push(1);
            put_str(out, thinking);
            put_str(out, extra.as_str());
        }
        Block::ToolUse(ToolUse {
            id,
            name,
            input,
            extra,
        }) => {
            out.push(2);
            put_str(out, id);
            put_str(out, name);
            put_str(out, input.as_str());
            put_str(out, extra.as_str());
        }
        Block::ToolResult(ToolResult {
            tool_use_id,
            content,
            is_error,
            extra,
        }) => {
            out.push(3);
            put_str(out, tool_use_id);
            put_content(out, content);
            out.push(match is_error {
                None => 0,
                Some(false) => 1,
                Some(true) => 2,
            });
            put_str(out, extra.as_str());
        }
        Block::Image(Image { source, extra }) => {
            out.push(4);
            match source {
                ImageSource::Base64 { media_type, data } => {
                    out.push(0);
                    put_str(out, media_type);
                    put_str(out, data);
                }
                ImageSource::Reference { json } => {
                    out.push(1);
                    put_str(out, json.as_str());
                }
            }
            put_str(out, extra.as_str());
        }
        Block::Opaque(Opaque { json }) => {
            out.push(5);
            put_str(out, json.as_str());
        }
    }
}

fn content(r: &mut Reader<'_>, depth: usize) -> Option<Content> {
    if depth > MAX_DEPTH {
        return None;
    }
    let shape = shape_of(r.byte()?)?;
    let n = r.length()?;
    // Each block is at least two bytes: a damaged count cannot reserve more than the record.
    let mut blocks = Vec::with_capacity(n.min(r.rest.len() / 2));
    for _ in 0..n {
        blocks.push(block(r, depth)?);
    }
    Some(Content { shape, blocks })
}

fn block(r: &mut Reader<'_>, depth: usize) -> Option<Block> {
    Some(match r.byte()? {
        0 => Block::Text(TextBlock {
            text: r.string()?,
            extra: r.raw_json()?,
        }),
        1 => Block::Thinking(ThinkingBlock {
            thinking: r.string()?,
            extra: r.raw_json()?,
        }),
        2 => Block::ToolUse(ToolUse {
            id: r.string()?,
            name: r.string()?,
            input: r.raw_json()?,
            extra: r.raw_json()?,
        }),
        3 => Block::ToolResult(ToolResult {
            tool_use_id: r.string()?,
            content: content(r, depth + 1)?,
            is_error: match r.byte()? {
                0 => None,
                1 => Some(false),
                2 => Some(true),
                _ => return None,
            },
            extra: r.raw_json()?,
        }),
        4 => Block::Image(Image {
            source: match r.byte()? {
                0 => ImageSource::Base64 {
                    media_type: r.string()?,
                    data: r.string()?,
                },
                1 => ImageSource::Reference {
                    json: r.raw_json()?,
                },
                _ => return None,
            },
            extra: r.raw_json()?,
        }),
        5 => Block::Opaque(Opaque {
            json: r.raw_json()?,
        }),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lengths_round_trip_at_every_width() {
        for n in [
            0,
            1,
            127,
            128,
            300,
            16_383,
            16_384,
            u32::MAX as usize,
            usize::MAX,
        ] {
            let mut out = Vec::new();
            put_len(&mut out, n);
            let mut r = Reader::new(&out);
            assert_eq!(r.length(), Some(n));
            assert!(r.is_done());
        }
        // Eleven bytes that all say "more" are no length.
        assert_eq!(Reader::new(&[0xff; 11]).length(), None);
    }

    #[test]
    fn deep_nesting_unpacks_up_to_the_limit_and_no_further() {
        let nested = |depth: usize| {
            let mut content = Content::string("inner");
            for _ in 0..depth {
                content = Content::blocks(vec![Block::tool_result("t", content)]);
            }
            Message::new("#0", Role::User, content.blocks)
        };
        let ok = nested(MAX_DEPTH);
        assert_eq!(unpack_message(&pack_message(&ok)), Some(ok));
        assert_eq!(unpack_message(&pack_message(&nested(MAX_DEPTH + 2))), None);
    }
}
