//! Anthropic messages read straight from their text, without a `serde_json::Value` tree.
//!
//! A long message list (the `messages` of a large request body, or a large bare list) is most of
//! a read, and building serde_json's tree of every message, then taking it apart into the model,
//! costs about as much time as parsing and holds the whole list twice. Here each element is
//! deserialized by serde straight into a [`Message`] when it has the common shape, exactly as
//! the Anthropic reader would read it:
//! - `{"role": "user" | "assistant", "content": ...}`, those keys in that order (`content` may
//!   be missing);
//! - content a string, `null`, or an array of `text` (`type`, `text`), `tool_use` (`type`, `id`,
//!   `name`, `input`) and `tool_result` (`type`, `tool_use_id`, then optionally `content` and a
//!   boolean `is_error`) blocks, each with exactly those keys in that order (a tool result's
//!   content nests the same blocks);
//! - a tool input whose numbers are all non-negative integers (so that its compact text parses
//!   back to the very same value, see [`to_value`]).
//!
//! Anything else (another key, another order, a repeated key, another block type, a `system`
//! role) makes the element "not quick": it is consumed all the same and parsed by serde_json as
//! before. A message [`message`] reads has no unknown fields and no hints, which is exactly
//! when the Anthropic reader's `extra` is empty. [`message_any_order`] also reads the same
//! shapes in any key order, with a block's `cache_control` and thinking blocks, as Claude Code
//! sends them (with the Anthropic reader's order hints and extras). [`crate::parallel`] keeps
//! the result only when every element of the list is read one way or the other; otherwise
//! those read are turned back into their exact `Value`s ([`to_value`]) and the list is read as
//! before.
//!
//! The format is still decided on JSON ([`crate::detect()`]): the list holds stubs ([`stubs`]) with
//! everything detection reads of it (which roles and block types occur); a list with a user text
//! that starts with a Cline result marker (`[name] Result:`, [`crate::cline`]) is never kept
//! quick, since telling Cline apart reads the texts. (Other user texts starting with `[` are
//! common: condense's own summaries, Claude Code's `[Request interrupted by user]`.)

use condense_model::{Block, Content, ContentShape, Message, RawJson, Role};
use condense_model::{TextBlock, ToolResult, ToolUse};
use serde::de::{self, Deserialize, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::Value;
use std::collections::HashSet;
use std::fmt;

/// The message at `index` of its list read from its `text`: `Ok(None)` when it is not quick,
/// an error when the text is not one JSON value.
pub(crate) fn message(text: &str, index: usize) -> serde_json::Result<Option<Message>> {
    let mut de = serde_json::Deserializer::from_str(text);
    let quick = QuickMessage::deserialize(&mut de)?;
    de.end()?;
    Ok(quick.0.map(|(role, content)| Message {
        id: condense_model::synthetic_id(index),
        role,
        timestamp: None,
        content,
        extra: RawJson::default(),
        envelope: RawJson::default(),
    }))
}

/// A message [`message`] refuses only for its keys' order, a block's `cache_control` or a
/// thinking block (with its `signature`), read with [`crate::anthropic::direct`] as the Anthropic
/// reader reads it (an order hint in `extra` where the writer's order differs). Claude Code
/// writes its tool results `tool_use_id` first and marks blocks with `cache_control`, so its
/// requests were read through a JSON tree, about 1.5x the time of a list read quick. `None`
/// for anything detection may read or the quick reader leaves to the tree: another key on the
/// message or a block, another block type, another role.
///
/// Its tool inputs and extras hold no number but non-negative integers, as a quick message's:
/// [`to_value`] gives back its exact value (the order hints put the keys back in place).
pub(crate) fn message_any_order(text: &str, index: usize) -> Option<Message> {
    let direct = crate::anthropic::direct::read(text)?;
    // The message's own keys are `role` and `content` only (an order hint aside).
    let keys_only_hints =
        |map: &crate::json::Map| map.keys().all(|k| k.starts_with(crate::json::HINT_PREFIX));
    if !keys_only_hints(&direct.rest) || !direct.content.blocks.iter().all(plain_block) {
        return None;
    }
    Some(Message {
        id: condense_model::synthetic_id(index),
        role: direct.role,
        timestamp: None,
        content: direct.content,
        extra: RawJson::from_map(direct.rest),
        envelope: RawJson::default(),
    })
}

/// A block of a type the quick reader reads (or a thinking block), whose only other keys are
/// `cache_control` and a thinking block's `signature` (with an order hint), nested blocks alike.
fn plain_block(block: &Block) -> bool {
    let plain_extra = |extra: &RawJson| {
        extra.is_empty()
            || integers_only(extra.as_str())
                && extra.to_map().is_ok_and(|map| {
                    map.keys().all(|k| {
                        k == condense_model::cache_marks::CACHE_CONTROL
                            || k == "signature"
                            || k.starts_with(crate::json::HINT_PREFIX)
                    })
                })
    };
    match block {
        Block::Text(b) => plain_extra(&b.extra),
        Block::Thinking(b) => plain_extra(&b.extra),
        Block::ToolUse(b) => plain_extra(&b.extra) && integers_only(b.input.as_str()),
        Block::ToolResult(b) => plain_extra(&b.extra) && b.content.blocks.iter().all(plain_block),
        _ => false,
    }
}

/// Whether compact JSON `text` has no number but non-negative integers, so that it parses back
/// to an equal value (serde_json may read a fraction one unit off in its last place, and write
/// it back otherwise): outside its strings, no `-`, `.`, or exponent after a digit.
fn integers_only(text: &str) -> bool {
    let (mut in_string, mut escaped, mut after_digit) = (false, false, false);
    for b in text.bytes() {
        if in_string {
            match (escaped, b) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_string = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'-' | b'.' => return false,
            b'e' | b'E' if after_digit => return false,
            _ => {}
        }
        after_digit = b.is_ascii_digit();
    }
    true
}

/// What the format detection reads of a quick list ([`crate::detect::decide`],
/// [`crate::cline::is_history`], the wrapper detection) stands in for it: one stub per distinct
/// role, content shape and sequence of block types, with no texts (a list of messages that all
/// have roles and none of whose user texts starts a Cline marker: detection only asks whether
/// some message has a given role or block type).
pub(crate) fn stubs<'m>(messages: impl IntoIterator<Item = &'m Message>) -> Vec<Value> {
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    for m in messages {
        let kinds: Vec<&'static str> = m.content.blocks.iter().map(Block::kind).collect();
        if !seen.insert((m.role, m.content.shape, kinds)) {
            continue;
        }
        let mut map = crate::json::Map::new();
        map.insert("role".into(), Value::String(m.role.as_str().into()));
        if let Some(content) = content_stub(&m.content) {
            map.insert("content".into(), content);
        }
        out.push(Value::Object(map));
    }
    out
}

fn content_stub(content: &Content) -> Option<Value> {
    Some(match content.shape {
        ContentShape::Absent => return None,
        ContentShape::Null => Value::Null,
        ContentShape::String => Value::String(String::new()),
        ContentShape::Array => Value::Array(
            content
                .blocks
                .iter()
                .map(|b| {
                    let mut map = crate::json::Map::new();
                    map.insert("type".into(), Value::String(b.kind().into()));
                    Value::Object(map)
                })
                .collect(),
        ),
    })
}

/// Whether a user message of a quick list has a text that starts with a Cline result marker:
/// then the list is not kept quick (see the module docs).
pub(crate) fn may_be_cline(message: &Message) -> bool {
    message.role == Role::User
        && message.content.blocks.iter().any(|b| match b {
            Block::Text(t) => crate::cline::has_marker(&t.text),
            _ => false,
        })
}

/// The exact JSON a quick message was read from (the same `Value` serde_json gives for its
/// text): what the readers get when the list is not kept quick. The Anthropic writer writes a
/// quick message's keys in the order they were read (in the known order, or as its order hints
/// say), and its tool inputs and extras parse back to themselves: their numbers are all
/// non-negative integers ([`integers_only`]), written and read exactly.
pub(crate) fn to_value(message: Message) -> Value {
    // A quick message has nothing the writer can refuse: known blocks only, and extras that
    // are objects (made by `RawJson::from_map`).
    Value::Object(crate::anthropic::write_message_object(&message).unwrap_or_default())
}

/// Consumes whatever remains of a map.
fn drain_map<'de, A: MapAccess<'de>>(map: &mut A) -> Result<(), A::Error> {
    while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
    Ok(())
}

/// Consumes whatever remains of a sequence.
fn drain_seq<'de, A: SeqAccess<'de>>(seq: &mut A) -> Result<(), A::Error> {
    while seq.next_element::<IgnoredAny>()?.is_some() {}
    Ok(())
}

/// Visitor methods for the kinds of value a quick reader does not take: consumed, "not quick".
macro_rules! not_quick_scalars {
    ($out:expr) => {
        fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self::Value, E> {
            Ok($out)
        }
        fn visit_i64<E: de::Error>(self, _: i64) -> Result<Self::Value, E> {
            Ok($out)
        }
        fn visit_u64<E: de::Error>(self, _: u64) -> Result<Self::Value, E> {
            Ok($out)
        }
        fn visit_f64<E: de::Error>(self, _: f64) -> Result<Self::Value, E> {
            Ok($out)
        }
    };
}

/// A key of an object a quick reader reads: one of the names it knows, or another.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Key {
    Role,
    Content,
    Type,
    Text,
    Id,
    Name,
    Input,
    ToolUseId,
    IsError,
    Other,
}

impl<'de> Deserialize<'de> for Key {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Key;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a key")
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<Key, E> {
                Ok(match s {
                    "role" => Key::Role,
                    "content" => Key::Content,
                    "type" => Key::Type,
                    "text" => Key::Text,
                    "id" => Key::Id,
                    "name" => Key::Name,
                    "input" => Key::Input,
                    "tool_use_id" => Key::ToolUseId,
                    "is_error" => Key::IsError,
                    _ => Key::Other,
                })
            }
        }
        d.deserialize_str(V)
    }
}

/// Checks that an object's keys come in the order of `known`, each at most once.
struct Order {
    known: &'static [Key],
    next: usize,
}

impl Order {
    fn new(known: &'static [Key]) -> Self {
        Order { known, next: 0 }
    }

    /// Whether `key` may come now (it is one of the known keys after the last one seen).
    fn admit(&mut self, key: Key) -> bool {
        match self.known[self.next..].iter().position(|k| *k == key) {
            Some(at) => {
                self.next += at + 1;
                true
            }
            None => false,
        }
    }
}

/// A message: `Some((role, content))` when quick.
struct QuickMessage(Option<(Role, Content)>);

impl<'de> Deserialize<'de> for QuickMessage {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(MessageVisitor)
    }
}

struct MessageVisitor;

impl<'de> Visitor<'de> for MessageVisitor {
    type Value = QuickMessage;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a message")
    }

    not_quick_scalars!(QuickMessage(None));

    fn visit_str<E: de::Error>(self, _: &str) -> Result<Self::Value, E> {
        Ok(QuickMessage(None))
    }

    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(QuickMessage(None))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        drain_seq(&mut seq)?;
        Ok(QuickMessage(None))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut order = Order::new(&[Key::Role, Key::Content]);
        let mut role = None;
        let mut content = Content::empty(ContentShape::Absent);
        while let Some(key) = map.next_key::<Key>()? {
            if !order.admit(key) {
                drain_value_and_rest(&mut map)?;
                return Ok(QuickMessage(None));
            }
            match key {
                Key::Role => {
                    role = match map.next_value::<Value>()? {
                        Value::String(s) if s == "user" => Some(Role::User),
                        Value::String(s) if s == "assistant" => Some(Role::Assistant),
                        _ => None,
                    };
                }
                _ => match map.next_value::<QuickContent>()?.0 {
                    Some(c) => content = c,
                    None => {
                        drain_map(&mut map)?;
                        return Ok(QuickMessage(None));
                    }
                },
            }
        }
        Ok(QuickMessage(role.map(|r| (r, content))))
    }
}

/// Consumes the value of the key just read and every entry after it.
fn drain_value_and_rest<'de, A: MapAccess<'de>>(map: &mut A) -> Result<(), A::Error> {
    map.next_value::<IgnoredAny>()?;
    drain_map(map)
}

/// A content value (present): `Some` when quick.
struct QuickContent(Option<Content>);

impl<'de> Deserialize<'de> for QuickContent {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(ContentVisitor)
    }
}

struct ContentVisitor;

impl<'de> Visitor<'de> for ContentVisitor {
    type Value = QuickContent;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("content")
    }

    not_quick_scalars!(QuickContent(None));

    fn visit_str<E: de::Error>(self, s: &str) -> Result<Self::Value, E> {
        Ok(QuickContent(Some(Content::string(s))))
    }

    fn visit_string<E: de::Error>(self, s: String) -> Result<Self::Value, E> {
        Ok(QuickContent(Some(Content::string(s))))
    }

    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(QuickContent(Some(Content::empty(ContentShape::Null))))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        drain_map(&mut map)?;
        Ok(QuickContent(None))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut blocks = Vec::with_capacity(seq.size_hint().unwrap_or(0));
        while let Some(block) = seq.next_element::<QuickBlock>()? {
            match block.0 {
                Some(b) => blocks.push(b),
                None => {
                    drain_seq(&mut seq)?;
                    return Ok(QuickContent(None));
                }
            }
        }
        // serde_json gives no length: the vector grew by doubling (from 4); a message holds on to
        // its blocks as long as the run does.
        blocks.shrink_to_fit();
        Ok(QuickContent(Some(Content::blocks(blocks))))
    }
}

/// A content block: `Some` when quick.
struct QuickBlock(Option<Block>);

impl<'de> Deserialize<'de> for QuickBlock {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(BlockVisitor)
    }
}

struct BlockVisitor;

/// The block types a quick reader reads, by the value of `type`.
#[derive(Clone, Copy)]
enum Kind {
    Text,
    ToolUse,
    ToolResult,
}

impl<'de> Visitor<'de> for BlockVisitor {
    type Value = QuickBlock;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a content block")
    }

    not_quick_scalars!(QuickBlock(None));

    fn visit_str<E: de::Error>(self, _: &str) -> Result<Self::Value, E> {
        Ok(QuickBlock(None))
    }

    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(QuickBlock(None))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        drain_seq(&mut seq)?;
        Ok(QuickBlock(None))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        // `type` first, a string naming a quick block.
        let kind = match map.next_key::<Key>()? {
            None => return Ok(QuickBlock(None)),
            Some(Key::Type) => match map.next_value::<Value>()? {
                Value::String(s) if s == "text" => Kind::Text,
                Value::String(s) if s == "tool_use" => Kind::ToolUse,
                Value::String(s) if s == "tool_result" => Kind::ToolResult,
                _ => {
                    drain_map(&mut map)?;
                    return Ok(QuickBlock(None));
                }
            },
            Some(_) => {
                drain_value_and_rest(&mut map)?;
                return Ok(QuickBlock(None));
            }
        };
        let block = match kind {
            Kind::Text => text_block(&mut map)?,
            Kind::ToolUse => tool_use_block(&mut map)?,
            Kind::ToolResult => tool_result_block(&mut map)?,
        };
        Ok(QuickBlock(block))
    }
}

/// The rest of a `text` block after its `type`.
fn text_block<'de, A: MapAccess<'de>>(map: &mut A) -> Result<Option<Block>, A::Error> {
    let mut order = Order::new(&[Key::Text]);
    let mut text = None;
    while let Some(key) = map.next_key::<Key>()? {
        if !order.admit(key) {
            drain_value_and_rest(map)?;
            return Ok(None);
        }
        match map.next_value::<Value>()? {
            Value::String(s) => text = Some(s),
            _ => {
                drain_map(map)?;
                return Ok(None);
            }
        }
    }
    Ok(text.map(|text| {
        Block::Text(TextBlock {
            text,
            extra: RawJson::default(),
        })
    }))
}

/// The rest of a `tool_use` block after its `type`.
fn tool_use_block<'de, A: MapAccess<'de>>(map: &mut A) -> Result<Option<Block>, A::Error> {
    let mut order = Order::new(&[Key::Id, Key::Name, Key::Input]);
    let (mut id, mut name, mut input) = (None, None, None);
    while let Some(key) = map.next_key::<Key>()? {
        if !order.admit(key) {
            drain_value_and_rest(map)?;
            return Ok(None);
        }
        let value = map.next_value::<Value>()?;
        match (key, value) {
            (Key::Id, Value::String(s)) => id = Some(s),
            (Key::Name, Value::String(s)) => name = Some(s),
            (Key::Input, v) => input = Some(RawJson::from_value(&v)),
            _ => {
                drain_map(map)?;
                return Ok(None);
            }
        }
    }
    Ok(match (id, name, input) {
        (Some(id), Some(name), Some(input)) if integers_only(input.as_str()) => {
            Some(Block::ToolUse(ToolUse {
                id,
                name,
                input,
                extra: RawJson::default(),
            }))
        }
        _ => None,
    })
}

/// The rest of a `tool_result` block after its `type`.
fn tool_result_block<'de, A: MapAccess<'de>>(map: &mut A) -> Result<Option<Block>, A::Error> {
    let mut order = Order::new(&[Key::ToolUseId, Key::Content, Key::IsError]);
    let mut tool_use_id = None;
    let mut content = Content::empty(ContentShape::Absent);
    let mut is_error = None;
    while let Some(key) = map.next_key::<Key>()? {
        if !order.admit(key) {
            drain_value_and_rest(map)?;
            return Ok(None);
        }
        let quick = match key {
            Key::ToolUseId => match map.next_value::<Value>()? {
                Value::String(s) => {
                    tool_use_id = Some(s);
                    true
                }
                _ => false,
            },
            Key::Content => match map.next_value::<QuickContent>()?.0 {
                Some(c) => {
                    content = c;
                    true
                }
                None => false,
            },
            _ => match map.next_value::<Value>()? {
                Value::Bool(b) => {
                    is_error = Some(b);
                    true
                }
                _ => false,
            },
        };
        if !quick {
            drain_map(map)?;
            return Ok(None);
        }
    }
    Ok(tool_use_id.map(|tool_use_id| {
        Block::ToolResult(ToolResult {
            tool_use_id,
            content,
            is_error,
            extra: RawJson::default(),
        })
    }))
}
