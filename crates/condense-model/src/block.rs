//! Content blocks.

use crate::{Content, RawJson};
use serde::{Deserialize, Serialize};
use std::hash::Hasher as _;
use twox_hash::xxhash3_64::{RawHasher, SecretBuffer, DEFAULT_SECRET_LENGTH};
use twox_hash::XxHash3_64;

/// twox-hash's streaming xxh3-64 with the default secret borrowed, not allocated.
type Streaming = RawHasher<&'static [u8; DEFAULT_SECRET_LENGTH]>;

const SEED_TEXT: u64 = 0x7465_7874; // "text"
const SEED_RESULT: u64 = 0x7265_7375_6c74; // "result"
const SEED_TOOL_USE: u64 = 0x746f_6f6c_5f75_7365; // "tool_use"
const SEED_TOOL_NAME: u64 = 0x6e61_6d65; // "name"

/// One piece of message content.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Block {
    Text(TextBlock),
    Thinking(ThinkingBlock),
    ToolUse(ToolUse),
    ToolResult(ToolResult),
    Image(Image),
    /// A block of a type this model does not know, kept verbatim.
    Opaque(Opaque),
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct TextBlock {
    pub text: String,
    pub extra: RawJson,
}

/// Model reasoning. The signature and other fields stay in `extra`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ThinkingBlock {
    pub thinking: String,
    pub extra: RawJson,
}

/// A call the model made.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ToolUse {
    pub id: String,
    pub name: String,
    /// The arguments as JSON text, verbatim. OpenAI sends arguments as a string that usually,
    /// but not always, holds JSON; it is kept exactly as sent.
    pub input: RawJson,
    pub extra: RawJson,
}

impl ToolResult {
    /// A result answering the call `tool_use_id`, `is_error` not stated, nothing extra.
    pub fn new(tool_use_id: impl Into<String>, content: Content) -> Self {
        ToolResult {
            tool_use_id: tool_use_id.into(),
            content,
            is_error: None,
            extra: RawJson::default(),
        }
    }
}

impl ToolUse {
    /// The input parsed as a JSON object, when it is one.
    pub fn input_object(&self) -> Option<serde_json::Map<String, serde_json::Value>> {
        match self.input.to_value() {
            Ok(serde_json::Value::Object(map)) => Some(map),
            _ => None,
        }
    }
}

/// What a tool call returned.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ToolResult {
    pub tool_use_id: String,
    pub content: Content,
    /// `None` when the source did not say.
    pub is_error: Option<bool>,
    pub extra: RawJson,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Image {
    pub source: ImageSource,
    pub extra: RawJson,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ImageSource {
    /// Inline image data.
    Base64 { media_type: String, data: String },
    /// A URL, file id or any other reference, as the source wrote it.
    Reference { json: RawJson },
}

/// A block of unknown type, verbatim.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Opaque {
    pub json: RawJson,
}

impl Block {
    /// A plain text block.
    pub fn text(text: impl Into<String>) -> Self {
        Block::Text(TextBlock {
            text: text.into(),
            extra: RawJson::default(),
        })
    }

    /// A tool call; `input` is the arguments' JSON text.
    pub fn tool_use(id: impl Into<String>, name: impl Into<String>, input: RawJson) -> Self {
        Block::ToolUse(ToolUse {
            id: id.into(),
            name: name.into(),
            input,
            extra: RawJson::default(),
        })
    }

    /// A tool result answering the call `tool_use_id` (`is_error` not stated).
    pub fn tool_result(tool_use_id: impl Into<String>, content: Content) -> Self {
        Block::ToolResult(ToolResult::new(tool_use_id, content))
    }

    /// The block's unknown fields (`extra`); `None` for an opaque block, whose every field is in
    /// its verbatim JSON.
    pub fn extra(&self) -> Option<&RawJson> {
        match self {
            Block::Text(b) => Some(&b.extra),
            Block::Thinking(b) => Some(&b.extra),
            Block::ToolUse(b) => Some(&b.extra),
            Block::ToolResult(b) => Some(&b.extra),
            Block::Image(b) => Some(&b.extra),
            Block::Opaque(_) => None,
        }
    }

    /// [`Block::extra`], to change.
    pub fn extra_mut(&mut self) -> Option<&mut RawJson> {
        match self {
            Block::Text(b) => Some(&mut b.extra),
            Block::Thinking(b) => Some(&mut b.extra),
            Block::ToolUse(b) => Some(&mut b.extra),
            Block::ToolResult(b) => Some(&mut b.extra),
            Block::Image(b) => Some(&mut b.extra),
            Block::Opaque(_) => None,
        }
    }

    /// The block's type name as the Anthropic API spells it (`text`, `tool_use`, ...).
    pub fn kind(&self) -> &'static str {
        match self {
            Block::Text(_) => "text",
            Block::Thinking(_) => "thinking",
            Block::ToolUse(_) => "tool_use",
            Block::ToolResult(_) => "tool_result",
            Block::Image(_) => "image",
            Block::Opaque(_) => "opaque",
        }
    }

    /// Bytes of model-visible payload: text, thinking, tool input, result text, image data.
    pub fn text_len(&self) -> usize {
        match self {
            Block::Text(t) => t.text.len(),
            Block::Thinking(t) => t.thinking.len(),
            Block::ToolUse(t) => t.input.len(),
            Block::ToolResult(t) => t.content.text_len(),
            Block::Image(i) => match &i.source {
                ImageSource::Base64 { data, .. } => data.len(),
                ImageSource::Reference { json } => json.len(),
            },
            Block::Opaque(o) => o.json.len(),
        }
    }

    /// The [`content_hash`](Self::content_hash) of a text block holding `text` and nothing else.
    /// A text counted on its own (what a stage measures) keys the token cache like that block,
    /// so the two share one entry.
    pub fn text_hash(text: &str) -> u64 {
        XxHash3_64::oneshot_with_seed(SEED_TEXT, text.as_bytes())
    }

    /// A 64-bit content hash (xxh3) of everything in the block. Equal blocks hash equal; the
    /// token counter caches by it, so a block a stage did not touch is never counted twice.
    pub fn content_hash(&self) -> u64 {
        // Fast paths for the common shapes: one one-shot pass over the big text, seeded with the
        // small fields. The streaming hasher costs more than the hashing itself on short blocks.
        match self {
            Block::Text(t) if t.extra.is_empty() => Self::text_hash(&t.text),
            Block::ToolUse(t) if t.extra.is_empty() => {
                let seed = XxHash3_64::oneshot_with_seed(SEED_TOOL_USE, t.id.as_bytes())
                    ^ XxHash3_64::oneshot_with_seed(SEED_TOOL_NAME, t.name.as_bytes())
                        .rotate_left(17);
                XxHash3_64::oneshot_with_seed(seed, t.input.as_str().as_bytes())
            }
            Block::ToolResult(t) if t.extra.is_empty() => match t.content.blocks.as_slice() {
                [Block::Text(inner)] if inner.extra.is_empty() => {
                    let seed = XxHash3_64::oneshot_with_seed(SEED_RESULT, t.tool_use_id.as_bytes())
                        ^ (u64::from(t.content.shape as u8) << 8
                            | u64::from(t.is_error.map_or(2, u8::from)));
                    XxHash3_64::oneshot_with_seed(seed, inner.text.as_bytes())
                }
                _ => self.streamed_hash(),
            },
            _ => self.streamed_hash(),
        }
    }

    fn streamed_hash(&self) -> u64 {
        let mut h: Streaming = RawHasher::new(SecretBuffer::default());
        hash_block(self, &mut h);
        h.finish()
    }
}

fn hash_str(h: &mut Streaming, s: &str) {
    h.write(&(s.len() as u64).to_le_bytes());
    h.write(s.as_bytes());
}

fn hash_block(block: &Block, h: &mut Streaming) {
    hash_str(h, block.kind());
    match block {
        Block::Text(t) => {
            hash_str(h, &t.text);
            hash_str(h, t.extra.as_str());
        }
        Block::Thinking(t) => {
            hash_str(h, &t.thinking);
            hash_str(h, t.extra.as_str());
        }
        Block::ToolUse(t) => {
            hash_str(h, &t.id);
            hash_str(h, &t.name);
            hash_str(h, t.input.as_str());
            hash_str(h, t.extra.as_str());
        }
        Block::ToolResult(t) => {
            hash_str(h, &t.tool_use_id);
            h.write(&[t.content.shape as u8, t.is_error.map_or(2, u8::from)]);
            h.write(&(t.content.blocks.len() as u64).to_le_bytes());
            for inner in &t.content.blocks {
                hash_block(inner, h);
            }
            hash_str(h, t.extra.as_str());
        }
        Block::Image(i) => {
            match &i.source {
                ImageSource::Base64 { media_type, data } => {
                    hash_str(h, media_type);
                    hash_str(h, data);
                }
                ImageSource::Reference { json } => hash_str(h, json.as_str()),
            }
            hash_str(h, i.extra.as_str());
        }
        Block::Opaque(o) => hash_str(h, o.json.as_str()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hash_tells_apart_field_boundaries() {
        let a = Block::ToolUse(ToolUse {
            id: "ab".into(),
            name: "c".into(),
            input: RawJson::default(),
            extra: RawJson::default(),
        });
        let b = Block::ToolUse(ToolUse {
            id: "a".into(),
            name: "bc".into(),
            input: RawJson::default(),
            extra: RawJson::default(),
        });
        assert_ne!(a.content_hash(), b.content_hash());
        assert_eq!(a.content_hash(), a.clone().content_hash());
    }

    #[test]
    fn text_and_thinking_with_same_text_differ() {
        let t = Block::text("x");
        let k = Block::Thinking(ThinkingBlock {
            thinking: "x".into(),
            extra: RawJson::default(),
        });
        assert_ne!(t.content_hash(), k.content_hash());
    }

    /// The hashes of a text, a tool call and an opaque block (one-shot seeded, one-shot with a
    /// seed made of fields, streamed) are the ones xxhash-rust's xxh3 gave before condense moved
    /// to twox-hash: the token counts a store keeps by them stay found.
    #[test]
    fn hashes_are_those_stored_before() {
        let long = "line of a long tool result\n".repeat(300);
        let input = format!("{{\"command\":\"{}\"}}", "ls -la ".repeat(60));
        let json = format!("{{\"type\":\"x\",\"data\":\"{}\"}}", "ab".repeat(700));
        let blocks = [
            Block::text(long),
            Block::tool_use("toolu_1", "Bash", RawJson::from_string_unchecked(input)),
            Block::Opaque(Opaque {
                json: RawJson::from_string_unchecked(json),
            }),
        ];
        let hashes: Vec<u64> = blocks.iter().map(Block::content_hash).collect();
        assert_eq!(
            hashes,
            [
                0xdf88_a23f_ca8c_651f,
                0xd809_7bbc_0d18_c3dd,
                0xc65e_0056_c72c_309b
            ]
        );
    }
}
