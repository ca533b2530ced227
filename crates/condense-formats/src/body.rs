//! Request bodies and bare message lists, shared by the Anthropic and OpenAI formats.
//!
//! A request body is an object with a `messages` array: its `system` (Anthropic only) and `tools`
//! map to the conversation, every other key goes to `Conversation.extra`. A bare message list (a
//! selected array, e.g. SWE-agent's `history`) holds messages only.

use crate::error::Ctx;
use crate::frames::Member;
use crate::json::{has_hint, raw_map, raw_value, set_hint, str_at, take, Map, Result};
use crate::{anthropic, FormatError};
use condense_model::{Block, Content, Conversation, Message, Opaque, RawJson, Role, ToolDef};
use serde_json::Value;

/// Hint on a message: it is one opaque block holding the whole JSON it was read from (a role or
/// item condense does not map), written back as that JSON while no stage changed it.
const HINT_VERBATIM: &str = "verbatim";
/// Hint on a message: its original role, for a writer that has to write it another way.
pub(crate) const HINT_ROLE: &str = "role";

/// How one chat format reads and writes a message.
#[derive(Clone, Copy)]
pub(crate) struct MessageCodec {
    /// Reads the message at `index` of its list, `ptr` being its JSON pointer.
    pub read: fn(Value, usize, &Ctx<'_>, &str) -> Result<Message>,
    pub write: fn(&Message) -> Result<Value>,
    /// Whether the format has a top-level `system` (Anthropic) rather than system messages.
    pub system_key: bool,
}

/// The member of a request body that holds its messages, in `format`: a Responses body's
/// `input`, any other's `messages`.
pub(crate) fn list_member(format: crate::Format) -> &'static str {
    match format {
        crate::Format::Responses => "input",
        _ => "messages",
    }
}

/// Reads every element of a message list.
pub(crate) fn read_messages(
    items: Vec<Value>,
    codec: MessageCodec,
    ctx: &Ctx<'_>,
    ptr: &str,
) -> Result<Vec<Message>> {
    crate::parallel::read_all(items, ctx, |item, i, ctx| {
        (codec.read)(item, i, ctx, &crate::json::child_at(ptr, i))
    })
}

/// Reads a bare message list into a conversation (`quick`: its messages, already read by
/// [`crate::quick`]; `items` then holds their stubs).
pub(crate) fn read_list(
    items: Vec<Value>,
    codec: MessageCodec,
    ctx: &Ctx<'_>,
    ptr: &str,
    quick: Option<Vec<Message>>,
) -> Result<Conversation> {
    list_conversation(quick, || read_messages(items, codec, ctx, ptr))
}

/// The conversation of a bare list: its messages already read (`quick`), or those `read`
/// makes of its elements.
pub(crate) fn list_conversation(
    quick: Option<Vec<Message>>,
    read: impl FnOnce() -> Result<Vec<Message>>,
) -> Result<Conversation> {
    let messages = match quick {
        Some(messages) => messages,
        None => read()?,
    };
    Ok(Conversation {
        messages,
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
        out.push((codec.write)(&system_message(system))?);
    }
    for msg in &conv.messages {
        out.push((codec.write)(msg)?);
    }
    Ok(out)
}

/// The leading system message a format without a top-level `system` writes for a system prompt
/// a stage set.
pub(crate) fn system_message(system: &Content) -> Message {
    Message {
        id: "system".into(),
        role: Role::System,
        timestamp: None,
        content: system.clone(),
        extra: RawJson::default(),
        envelope: RawJson::default(),
    }
}

/// Reads a request body. Returns the conversation and the body's key order, so the writer can
/// lay the keys out as they were. `quick`: its messages, already read by [`crate::quick`] (its
/// `messages` then holds their stubs).
pub(crate) fn read_body(
    mut map: Map,
    codec: MessageCodec,
    ctx: &Ctx<'_>,
    ptr: &str,
    (quick, frame): (Option<Vec<Message>>, Vec<Member>),
) -> Result<(Conversation, Vec<String>)> {
    let order: Vec<String> = map.keys().cloned().collect();
    let messages = match take(&mut map, "messages") {
        Some(Value::Array(items)) => items,
        Some(other) => {
            return Err(ctx.unexpected(&format!("{ptr}/messages"), "an array of messages", &other))
        }
        None => return Err(ctx.missing(ptr, "a request body with a `messages` array")),
    };
    let messages = match quick {
        Some(messages) => messages,
        None => read_messages(messages, codec, ctx, &format!("{ptr}/messages"))?,
    };
    let mut conv = Conversation {
        messages,
        ..Conversation::default()
    };
    // Members a read of the same bytes made before ([`crate::frames`]): the map holds stubs.
    crate::frames::take_into(frame, &mut map, &mut conv);
    if codec.system_key && map.contains_key("system") {
        let system = take(&mut map, "system").unwrap_or_default();
        conv.system = Some(read_system(system, ctx, &format!("{ptr}/system"))?);
    }
    if let Some(Value::Array(_)) = map.get("tools") {
        if let Some(Value::Array(tools)) = take(&mut map, "tools") {
            conv.tools = read_tools(&tools);
        }
    }
    conv.extra = RawJson::from_map(map);
    Ok((conv, order))
}

/// An Anthropic body's `system` (at `ptr`) as the model's content.
pub(crate) fn read_system(value: Value, ctx: &Ctx<'_>, ptr: &str) -> Result<Content> {
    crate::json::read_content(Some(value), ctx, ptr, &mut |v, p| {
        anthropic::read_block(v, ctx, p)
    })
}

/// A body's `tools` array as the model's tool definitions.
pub(crate) fn read_tools(tools: &[Value]) -> Vec<ToolDef> {
    tools.iter().map(tool_def).collect()
}

/// A tool definition: Anthropic or Responses `{name, ...}`, OpenAI `{type, function: {name,
/// ...}}`, or a built-in tool named by its type (`{"type": "web_search"}`).
pub(crate) fn tool_def(value: &Value) -> ToolDef {
    let name = str_at(value, "name")
        .or_else(|| value.get("function").and_then(|f| str_at(f, "name")))
        .or_else(|| str_at(value, "type"))
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
    finish_body(conv, order, map, &at)
}

/// Completes a body whose conversation keys (`messages`, `system`, ...) are in `map`: adds the
/// tools and the other top-level keys, and lays the keys out in their original order (new keys
/// last).
pub(crate) fn finish_body(
    conv: &Conversation,
    order: &[String],
    mut map: Map,
    at: &dyn Fn() -> String,
) -> Result<Value> {
    // Tools: an empty list is written only when the input had the key (it is in `order`).
    if !conv.tools.is_empty()
        || (order.iter().any(|k| k == "tools") && !has_extra_key(conv, "tools"))
    {
        let tools = conv
            .tools
            .iter()
            .map(|t| crate::json::raw_value(&t.raw, at))
            .collect::<Result<Vec<_>>>()?;
        map.insert("tools".into(), Value::Array(tools));
    }
    for (key, value) in raw_map(&conv.extra, at)? {
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

/// A message kept whole: one opaque block holding `value`, counted by its JSON. `role` is what
/// the model sees it as; `original_role`, when given, is the role a writer falls back to if a
/// stage changes the message.
pub(crate) fn verbatim_message(
    value: Value,
    id: String,
    role: Role,
    original_role: Option<&str>,
) -> Message {
    let mut hints = Map::new();
    set_hint(&mut hints, HINT_VERBATIM, Value::Bool(true));
    if let Some(original) = original_role {
        set_hint(&mut hints, HINT_ROLE, Value::String(original.to_string()));
    }
    Message {
        id,
        role,
        timestamp: None,
        content: Content::blocks(vec![Block::Opaque(Opaque {
            json: RawJson::from_value(&value),
        })]),
        extra: RawJson::from_map(hints),
        envelope: RawJson::default(),
    }
}

/// The JSON of a message kept whole ([`verbatim_message`]) that is still one opaque block;
/// `None` for any other message.
pub(crate) fn verbatim_json(msg: &Message) -> Option<Result<Value>> {
    let marked = has_hint(&msg.extra, HINT_VERBATIM);
    match (marked, msg.content.blocks.as_slice()) {
        (true, [Block::Opaque(o)]) => Some(raw_value(&o.json, &|| format!("message {}", msg.id))),
        _ => None,
    }
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
