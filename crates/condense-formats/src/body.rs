//! Request bodies and bare message lists, shared by the Anthropic and OpenAI formats.
//!
//! A request body is an object with a `messages` array: its `system` (Anthropic only) and `tools`
//! map to the conversation, every other key goes to `Conversation.extra`. A bare message list (a
//! selected array, e.g. SWE-agent's `history`) holds messages only.

use crate::error::Ctx;
use crate::json::{raw_map, raw_value, str_at, take, Map, Result};
use crate::{anthropic, FormatError};
use condense_model::{Block, Conversation, Message, RawJson, Role, ToolDef};
use serde_json::Value;

/// How one chat format reads and writes a message.
#[derive(Clone, Copy)]
pub(crate) struct MessageCodec {
    /// Reads the message at `index` of its list, `ptr` being its JSON pointer.
    pub read: fn(Value, usize, &Ctx<'_>, &str) -> Result<Message>,
    pub write: fn(&Message) -> Result<Value>,
    /// Whether the format has a top-level `system` (Anthropic) rather than system messages.
    pub system_key: bool,
}

/// Reads every element of a message list.
pub(crate) fn read_messages(
    items: Vec<Value>,
    codec: MessageCodec,
    ctx: &Ctx<'_>,
    ptr: &str,
) -> Result<Vec<Message>> {
    items
        .into_iter()
        .enumerate()
        .map(|(i, item)| (codec.read)(item, i, ctx, &format!("{ptr}/{i}")))
        .collect()
}

/// Reads a bare message list into a conversation.
pub(crate) fn read_list(
    items: Vec<Value>,
    codec: MessageCodec,
    ctx: &Ctx<'_>,
    ptr: &str,
) -> Result<Conversation> {
    Ok(Conversation {
        messages: read_messages(items, codec, ctx, ptr)?,
        ..Conversation::default()
    })
}

/// Writes a conversation read from a bare list. A system prompt a stage set becomes a leading
/// system message where the format has those; tools and extra have nowhere to go.
pub(crate) fn write_list(conv: &Conversation, codec: MessageCodec, label: &str) -> Result<Value> {
    if !conv.tools.is_empty()
        || !conv.extra.is_empty()
        || (codec.system_key && conv.system.is_some())
    {
        return Err(FormatError::Write {
            at: conversation_name(label),
            reason: "the conversation is a bare message list: it cannot hold tools, a system \
                     prompt or top-level fields"
                .into(),
        });
    }
    Ok(Value::Array(write_messages(conv, codec)?))
}

fn write_messages(conv: &Conversation, codec: MessageCodec) -> Result<Vec<Value>> {
    let mut out = Vec::with_capacity(conv.messages.len() + 1);
    if let (false, Some(system)) = (codec.system_key, &conv.system) {
        let msg = Message {
            id: "system".into(),
            role: Role::System,
            timestamp: None,
            content: system.clone(),
            extra: RawJson::default(),
            envelope: RawJson::default(),
        };
        out.push((codec.write)(&msg)?);
    }
    for msg in &conv.messages {
        out.push((codec.write)(msg)?);
    }
    Ok(out)
}

/// Reads a request body. Returns the conversation and the body's key order, so the writer can
/// lay the keys out as they were.
pub(crate) fn read_body(
    mut map: Map,
    codec: MessageCodec,
    ctx: &Ctx<'_>,
    ptr: &str,
) -> Result<(Conversation, Vec<String>)> {
    let order: Vec<String> = map.keys().cloned().collect();
    let messages = match take(&mut map, "messages") {
        Some(Value::Array(items)) => items,
        Some(other) => {
            return Err(ctx.unexpected(&format!("{ptr}/messages"), "an array of messages", &other))
        }
        None => return Err(ctx.missing(ptr, "a request body with a `messages` array")),
    };
    let mut conv = Conversation {
        messages: read_messages(messages, codec, ctx, &format!("{ptr}/messages"))?,
        ..Conversation::default()
    };
    if codec.system_key && map.contains_key("system") {
        let system_ptr = format!("{ptr}/system");
        let content =
            crate::json::read_content(take(&mut map, "system"), ctx, &system_ptr, &mut |v, p| {
                anthropic::read_block(v, ctx, p)
            })?;
        conv.system = Some(content);
    }
    if let Some(Value::Array(_)) = map.get("tools") {
        if let Some(Value::Array(tools)) = take(&mut map, "tools") {
            conv.tools = tools.iter().map(tool_def).collect();
        }
    }
    conv.extra = RawJson::from_map(map);
    Ok((conv, order))
}

/// A tool definition: Anthropic `{name, ...}` or OpenAI `{type, function: {name, ...}}`.
fn tool_def(value: &Value) -> ToolDef {
    let name = str_at(value, "name")
        .or_else(|| value.get("function").and_then(|f| str_at(f, "name")))
        .unwrap_or_default();
    ToolDef {
        name: name.to_string(),
        raw: RawJson::from_value(value),
    }
}

/// Writes a request body, keys in their original order (new keys last).
pub(crate) fn write_body(
    conv: &Conversation,
    order: &[String],
    codec: MessageCodec,
    label: &str,
) -> Result<Value> {
    let at = || conversation_name(label);
    let mut map = Map::new();
    map.insert(
        "messages".into(),
        Value::Array(write_messages(conv, codec)?),
    );
    if let (true, Some(system)) = (codec.system_key, &conv.system) {
        let blocks: Vec<&Block> = system.blocks.iter().collect();
        let written = crate::json::write_content(system.shape, &blocks, &mut |b| {
            anthropic::write_block(b, &at)
        })?;
        map.insert("system".into(), written.unwrap_or(Value::Null));
    }
    // Tools: an empty list is written only when the input had the key (it is in `order`).
    if !conv.tools.is_empty()
        || (order.iter().any(|k| k == "tools") && !has_extra_key(conv, "tools"))
    {
        let tools = conv
            .tools
            .iter()
            .map(|t| crate::json::raw_value(&t.raw, &at))
            .collect::<Result<Vec<_>>>()?;
        map.insert("tools".into(), Value::Array(tools));
    }
    for (key, value) in raw_map(&conv.extra, &at)? {
        map.entry(key).or_insert(value);
    }
    let mut ordered = Map::new();
    for key in order {
        if let Some(value) = map.shift_remove(key) {
            ordered.insert(key.clone(), value);
        }
    }
    ordered.extend(map);
    Ok(Value::Object(ordered))
}

fn has_extra_key(conv: &Conversation, key: &str) -> bool {
    conv.extra
        .to_map()
        .map(|m| m.contains_key(key))
        .unwrap_or(false)
}

/// An event message is written back as the JSON it was read from (its envelope).
pub(crate) fn write_event(msg: &Message) -> Result<Value> {
    if msg.envelope.is_empty() {
        return Err(FormatError::Write {
            at: format!("message {}", msg.id),
            reason: "an event message without its original JSON (envelope) cannot be written"
                .into(),
        });
    }
    raw_value(&msg.envelope, &|| format!("message {}", msg.id))
}

/// How write errors name a conversation.
pub(crate) fn conversation_name(label: &str) -> String {
    if label.is_empty() {
        "the conversation".to_string()
    } else {
        format!("conversation {label}")
    }
}
