//! An Anthropic message object read straight from its text into the model: serde visits the
//! object once, with no `serde_json::Value` tree of its content. A Claude Code chat line's
//! `message` is read so ([`crate::claude_code::line`]), and so is a message of a request body
//! that the stricter [`crate::quick`] reader refuses only for its key order or its
//! `cache_control` ([`crate::quick::message_any_order`]).
//!
//! The map read (the line reader's fallback) parses the object into a map, then takes the role,
//! the content and each block out of it ([`crate::anthropic::read_role_and_content`]): a map
//! built for every block, then taken apart key by key. On a long session that was about a third
//! of a turn's instructions (the maps 170 M, taking them apart 145 M, of 892 M). Here each key the Anthropic reader maps goes to its place as it
//! is read, a block's content is read into the model directly (a tool result's output is most
//! of a session's bytes), and every other key is kept, in order, as the leftovers the map read
//! would have left; the same [`leftover`] and [`remember_order`] make the extras and their order
//! hints from them. So a message read here is the very one the map read gives.
//!
//! Anything the map read would treat another way, or refuse, is declined (`None`) and read the
//! map way: a role other than `user` or `assistant` (or none), content that is not a string,
//! `null` or an array of block objects, a block without a string `type`, an `image` block, a
//! block missing a key its type requires (or holding it as another kind of value), a `content`
//! on a block whose type does not read one, and a key given twice. Claude Code writes none of
//! these in its chat lines but the images.
//!
//! ```text
//! {"role":"user","content":[{"tool_use_id":"t1","type":"tool_result","content":"ok"}]}
//!   -> role user; one tool result (t1, "ok"), its extra the order hint the writer needs to put
//!      `tool_use_id` first again; no other keys
//! ```

use crate::claude_code::thread::BlockFacts;
use crate::json::{leftover, remember_order, Map};
use condense_model::{Block, Content, ContentShape, Opaque, RawJson, Role};
use condense_model::{TextBlock, ThinkingBlock, ToolResult, ToolUse};
use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::value::RawValue;
use serde_json::Value;
use std::fmt;

/// A chat message read directly ([`read`]).
#[derive(Debug)]
pub(crate) struct Direct {
    pub role: Role,
    pub content: Content,
    /// The message's keys besides `role` and `content`, in order, with an order hint when the
    /// writer would not put them back in that order.
    pub rest: Map,
    /// The facts of its content's blocks, when the content is an array.
    pub blocks: Option<Vec<BlockFacts>>,
}

/// The chat message `text` holds, read directly; `None` when it is declined (module docs), or
/// when `text` is not one JSON object.
pub(crate) fn read(text: &str) -> Option<Direct> {
    read_as(text, Text::Any)
}

/// [`read`] of a text that is its own compact form (a piece of a text
/// [`RawJson::canonical_members`] accepted: a Claude Code line's `message`). Its tool uses'
/// inputs are then kept as the text they are, which is what writing their values back would
/// give, rather than parsed into values and written back: a session's tool inputs are about
/// a third of its messages' bytes.
pub(crate) fn read_canonical(text: &str) -> Option<Direct> {
    read_as(text, Text::Canonical)
}

fn read_as(text: &str, kind: Text) -> Option<Direct> {
    let mut de = serde_json::Deserializer::from_str(text);
    let direct = de.deserialize_map(MessageVisitor(kind)).ok()?;
    de.end().ok()?;
    Some(direct)
}

/// What the text a read is given is known to be.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Text {
    /// Any JSON text.
    Any,
    /// Its own compact form ([`read_canonical`]).
    Canonical,
}

/// The error that stops a direct read: the message is read the map way instead.
fn declined<E: de::Error>() -> E {
    E::custom("declined: read the map way")
}

/// A key the message or block already had (the map read keeps one of the two values).
fn repeated<E: de::Error>(keys: &[String], key: &str) -> Result<(), E> {
    if keys.iter().any(|k| k == key) {
        return Err(declined());
    }
    Ok(())
}

struct MessageVisitor(Text);

impl<'de> Visitor<'de> for MessageVisitor {
    type Value = Direct;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a message object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Direct, A::Error> {
        let mut keys: Vec<String> = Vec::new();
        // An assistant message's other keys: `id`, `type`, `model`, `stop_reason`,
        // `stop_sequence`, `usage`, and the order hint (grown one at a time, the map was
        // rehashed three times).
        let mut rest = Map::with_capacity(8);
        let mut role = None;
        let mut content = None;
        while let Some(key) = map.next_key::<String>()? {
            repeated(&keys, &key)?;
            match key.as_str() {
                "role" => {
                    role = Some(match map.next_value::<Value>()? {
                        Value::String(s) if s == "user" => Role::User,
                        Value::String(s) if s == "assistant" => Role::Assistant,
                        _ => return Err(declined()),
                    });
                }
                "content" => content = Some(map.next_value_seed(ContentSeed(self.0))?),
                _ => {
                    rest.insert(key.clone(), map.next_value::<Value>()?);
                }
            }
            keys.push(key);
        }
        let role = role.ok_or_else(declined)?;
        let (content, blocks) = match content {
            Some((content, facts)) => (content, facts),
            None => (Content::empty(ContentShape::Absent), None),
        };
        remember_order(keys, &["role", "content"], &mut rest);
        Ok(Direct {
            role,
            content,
            rest,
            blocks,
        })
    }
}

/// A `content` value: the content, and its blocks' facts when it is an array.
struct ContentSeed(Text);

impl<'de> DeserializeSeed<'de> for ContentSeed {
    type Value = (Content, Option<Vec<BlockFacts>>);

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for ContentSeed {
    type Value = (Content, Option<Vec<BlockFacts>>);

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a string, an array of content blocks or null")
    }

    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        let null = Content::empty(ContentShape::Null);
        Ok((null, None))
    }

    fn visit_str<E: de::Error>(self, s: &str) -> Result<Self::Value, E> {
        Ok((Content::string(s), None))
    }

    fn visit_string<E: de::Error>(self, s: String) -> Result<Self::Value, E> {
        Ok((Content::string(s), None))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut blocks = Vec::new();
        let mut facts = Vec::new();
        while let Some((block, fact)) = seq.next_element_seed(BlockSeed(self.0))? {
            blocks.push(block);
            facts.push(fact);
        }
        // serde_json gives no length: the vector grew by doubling; a message holds on to its
        // blocks as long as the run does.
        blocks.shrink_to_fit();
        Ok((Content::blocks(blocks), Some(facts)))
    }
}

/// A content block, and its facts.
struct BlockSeed(Text);

impl<'de> DeserializeSeed<'de> for BlockSeed {
    type Value = (Block, BlockFacts);

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for BlockSeed {
    type Value = (Block, BlockFacts);

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a content block object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut fields = Fields::default();
        let mut content = None;
        while let Some(key) = map.next_key::<String>()? {
            repeated(&fields.keys, &key)?;
            if key == "content" {
                content = Some(map.next_value_seed(ContentSeed(self.0))?.0);
            } else if key == "input" && self.0 == Text::Canonical {
                let raw: &'de RawValue = map.next_value()?;
                fields.raw_input = Some((fields.keys.len(), raw.get()));
            } else {
                fields
                    .values
                    .push((fields.keys.len(), map.next_value::<Value>()?));
            }
            fields.keys.push(key);
        }
        let kind = match fields.get("type") {
            Some(Value::String(kind)) => kind.clone(),
            _ => return Err(declined()),
        };
        if kind != "tool_use" {
            // Another block's `input` is a leftover like any other key.
            fields.parse_raw_input()?;
        }
        let id_key = match kind.as_str() {
            "tool_use" => Some("id"),
            "tool_result" => Some("tool_use_id"),
            _ => None,
        };
        let facts = BlockFacts {
            id: id_key
                .and_then(|k| fields.get(k))
                .and_then(Value::as_str)
                .map(str::to_string),
            kind: Some(kind),
        };
        if matches!(
            facts.kind.as_deref(),
            Some("text" | "thinking" | "tool_use" | "tool_result")
        ) {
            fields.take("type");
        }
        let block = match (facts.kind.as_deref(), content) {
            (Some("text"), None) => Block::Text(TextBlock {
                text: fields.take_string("text")?,
                extra: fields.leftover(&["type", "text"]),
            }),
            (Some("thinking"), None) => Block::Thinking(ThinkingBlock {
                thinking: fields.take_string("thinking")?,
                extra: fields.leftover(&["type", "thinking"]),
            }),
            (Some("tool_use"), None) => {
                let id = fields.take_string("id")?;
                let name = fields.take_string("name")?;
                let input = match fields.raw_input.take() {
                    Some((_, raw)) => RawJson::from_canonical_text_unchecked(raw),
                    None => RawJson::from_value(&fields.take("input").ok_or_else(declined)?),
                };
                Block::ToolUse(ToolUse {
                    id,
                    name,
                    input,
                    extra: fields.leftover(&["type", "id", "name", "input"]),
                })
            }
            (Some("tool_result"), content) => {
                let tool_use_id = fields.take_string("tool_use_id")?;
                // Any other value stays with the leftovers, where the map read leaves it.
                let is_error = match fields.get("is_error") {
                    Some(Value::Bool(b)) => {
                        let b = *b;
                        fields.take("is_error");
                        Some(b)
                    }
                    _ => None,
                };
                Block::ToolResult(ToolResult {
                    tool_use_id,
                    content: content.unwrap_or(Content::empty(ContentShape::Absent)),
                    is_error,
                    extra: fields.leftover(&["type", "tool_use_id", "content", "is_error"]),
                })
            }
            // An image's source is read the map way; a key its type does not read is a
            // leftover there, here it was read as content.
            (Some("image" | "text" | "thinking" | "tool_use"), _) => return Err(declined()),
            // Another type is kept whole, as it was.
            (_, None) => Block::Opaque(Opaque {
                json: RawJson::from_value(&Value::Object(fields.into_map())),
            }),
            (_, Some(_)) => return Err(declined()),
        };
        Ok((block, facts))
    }
}

/// A block's keys, in order, and the values of all but `content`. The keys are kept once: a
/// leftover key is copied into the extra's map, and the keys move into its order hint when it
/// needs one (a text or a tool use block copies none).
#[derive(Default)]
struct Fields<'de> {
    keys: Vec<String>,
    /// Each value with the index of its key.
    values: Vec<(usize, Value)>,
    /// In a canonical text, the `input` as it is written, with the index of its key.
    raw_input: Option<(usize, &'de str)>,
}

impl Fields<'_> {
    /// The `input` kept as written, parsed into its place among the values.
    fn parse_raw_input<E: de::Error>(&mut self) -> Result<(), E> {
        if let Some((k, raw)) = self.raw_input.take() {
            let value = serde_json::from_str(raw).map_err(|_| declined())?;
            let at = self.values.partition_point(|(j, _)| *j < k);
            self.values.insert(at, (k, value));
        }
        Ok(())
    }

    fn position(&self, key: &str) -> Option<usize> {
        self.values.iter().position(|(k, _)| self.keys[*k] == key)
    }

    fn get(&self, key: &str) -> Option<&Value> {
        self.position(key).map(|at| &self.values[at].1)
    }

    fn take(&mut self, key: &str) -> Option<Value> {
        let at = self.position(key)?;
        Some(self.values.remove(at).1)
    }

    /// The string at `key`, taken out; declined when there is none (the map read refuses the
    /// block).
    fn take_string<E: de::Error>(&mut self, key: &str) -> Result<String, E> {
        match self.get(key) {
            Some(Value::String(_)) => match self.take(key) {
                Some(Value::String(s)) => Ok(s),
                _ => Err(declined()),
            },
            _ => Err(declined()),
        }
    }

    /// Every value left with its key (the keys moved out: for a block kept whole).
    fn into_map(mut self) -> Map {
        let mut map = Map::with_capacity(self.values.len());
        for (k, value) in self.values {
            map.insert(std::mem::take(&mut self.keys[k]), value);
        }
        map
    }

    /// What is left, as the block's extra (the keys the map read maps were `known`).
    fn leftover(self, known: &[&str]) -> RawJson {
        let map = self
            .values
            .into_iter()
            .map(|(k, value)| (self.keys[k].clone(), value))
            .collect();
        leftover(self.keys, known, map)
    }
}
