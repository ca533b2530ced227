//! Anthropic Messages API: content blocks, messages, request bodies.
//!
//! The block reader and writer here are shared with the Claude Code format, whose `message`
//! objects are Anthropic messages.

pub(crate) mod direct;

use crate::body::{verbatim_json, verbatim_message, MessageCodec, HINT_ROLE};
use crate::error::Ctx;
use crate::json::{
    into_object, into_string_or_empty, keys_of, leftover, merge_extra, merge_fields, raw_map,
    raw_value, read_content, remember_order, require_string, take, take_hint, write_content, Map,
    Result,
};
use condense_model::{
    Block, Content, Image, ImageSource, Message, Opaque, RawJson, Role, TextBlock, ThinkingBlock,
    ToolResult, ToolUse,
};
use serde_json::{json, Value};

/// How Anthropic request bodies and their messages are read and written.
pub(crate) const CODEC: MessageCodec = MessageCodec {
    read: read_message,
    write: write_message,
    system_key: true,
};

/// Reads one content block. Known types map to model blocks, anything else is kept opaque.
pub(crate) fn read_block(value: Value, ctx: &Ctx<'_>, ptr: &str) -> Result<Block> {
    let mut map = into_object(value, ctx, ptr, "a content block object")?;
    let kind = match map.get("type") {
        Some(Value::String(s)) => s.clone(),
        Some(other) => {
            return Err(ctx.unexpected(&format!("{ptr}/type"), "a string block type", other))
        }
        None => return Err(ctx.missing(ptr, "a content block with a string `type`")),
    };
    let known = matches!(
        kind.as_str(),
        "text" | "thinking" | "tool_use" | "tool_result" | "image"
    );
    if !known {
        return Ok(Block::Opaque(Opaque {
            json: RawJson::from_value(&Value::Object(map)),
        }));
    }
    let keys = keys_of(&map);
    take(&mut map, "type");
    Ok(match kind.as_str() {
        "text" => {
            let text = require_string(&mut map, "text", ctx, ptr)?;
            Block::Text(TextBlock {
                text,
                extra: leftover(keys, &["type", "text"], map),
            })
        }
        "thinking" => {
            let thinking = require_string(&mut map, "thinking", ctx, ptr)?;
            Block::Thinking(ThinkingBlock {
                thinking,
                extra: leftover(keys, &["type", "thinking"], map),
            })
        }
        "tool_use" => {
            let id = require_string(&mut map, "id", ctx, ptr)?;
            let name = require_string(&mut map, "name", ctx, ptr)?;
            let input = take(&mut map, "input")
                .ok_or_else(|| ctx.missing(ptr, "a tool_use block with an `input`"))?;
            Block::ToolUse(ToolUse {
                id,
                name,
                input: RawJson::from_value(&input),
                extra: leftover(keys, &["type", "id", "name", "input"], map),
            })
        }
        "tool_result" => {
            let tool_use_id = require_string(&mut map, "tool_use_id", ctx, ptr)?;
            let content_ptr = crate::json::child(ptr, "content");
            let content =
                read_content(take(&mut map, "content"), ctx, &content_ptr, &mut |v, p| {
                    read_block(v, ctx, p)
                })?;
            let is_error = match map.get("is_error") {
                Some(Value::Bool(b)) => {
                    let b = *b;
                    take(&mut map, "is_error");
                    Some(b)
                }
                _ => None,
            };
            Block::ToolResult(ToolResult {
                tool_use_id,
                content,
                is_error,
                extra: leftover(keys, &["type", "tool_use_id", "content", "is_error"], map),
            })
        }
        _ => {
            let source = take(&mut map, "source")
                .ok_or_else(|| ctx.missing(ptr, "an image block with a `source`"))?;
            Block::Image(Image {
                source: read_image_source(source),
                extra: leftover(keys, &["type", "source"], map),
            })
        }
    })
}

/// `{type: base64, media_type, data}` and nothing else is inline data; any other source (URL,
/// file id, base64 with extra keys) is kept whole as a reference.
fn read_image_source(source: Value) -> ImageSource {
    let inline = match &source {
        Value::Object(map) => {
            map.len() == 3
                && map.get("type").and_then(Value::as_str) == Some("base64")
                && matches!(map.get("media_type"), Some(Value::String(_)))
                && matches!(map.get("data"), Some(Value::String(_)))
        }
        _ => false,
    };
    match source {
        // Moved out, not copied: `data` is the whole image.
        Value::Object(mut map) if inline => ImageSource::Base64 {
            media_type: into_string_or_empty(map.remove("media_type").unwrap_or_default()),
            data: into_string_or_empty(map.remove("data").unwrap_or_default()),
        },
        source => ImageSource::Reference {
            json: RawJson::from_value(&source),
        },
    }
}

/// Writes one block as Anthropic JSON. `at` names the owner for errors.
pub(crate) fn write_block(block: &Block, at: &dyn Fn() -> String) -> Result<Value> {
    let (mut obj, extra) = match block {
        Block::Text(t) => (obj(json!({"type": "text", "text": t.text})), &t.extra),
        Block::Thinking(t) => (
            obj(json!({"type": "thinking", "thinking": t.thinking})),
            &t.extra,
        ),
        Block::ToolUse(t) => (
            obj(json!({
                "type": "tool_use",
                "id": t.id,
                "name": t.name,
                "input": raw_value(&t.input, at)?,
            })),
            &t.extra,
        ),
        Block::ToolResult(t) => {
            let mut o = obj(json!({"type": "tool_result", "tool_use_id": t.tool_use_id}));
            let blocks: Vec<&Block> = t.content.blocks.iter().collect();
            if let Some(content) =
                write_content(t.content.shape, &blocks, &mut |b| write_block(b, at))?
            {
                o.insert("content".into(), content);
            }
            if let Some(is_error) = t.is_error {
                o.insert("is_error".into(), Value::Bool(is_error));
            }
            (o, &t.extra)
        }
        Block::Image(i) => {
            let source = match &i.source {
                ImageSource::Base64 { media_type, data } => {
                    json!({"type": "base64", "media_type": media_type, "data": data})
                }
                ImageSource::Reference { json } => raw_value(json, at)?,
            };
            (obj(json!({"type": "image", "source": source})), &i.extra)
        }
        Block::Opaque(o) => return raw_value(&o.json, at),
    };
    merge_extra(&mut obj, extra, at)?;
    Ok(Value::Object(obj))
}

fn obj(value: Value) -> Map {
    match value {
        Value::Object(map) => map,
        _ => Map::new(),
    }
}

/// Reads the role and content of an Anthropic message object, leaving the other keys (and an
/// order hint) in `map`.
pub(crate) fn read_role_and_content(
    map: &mut Map,
    ctx: &Ctx<'_>,
    ptr: &str,
) -> Result<(Role, Content)> {
    let role = match map.get("role") {
        Some(Value::String(s)) => match s.as_str() {
            "user" => Role::User,
            "assistant" => Role::Assistant,
            "system" => Role::System,
            _ => {
                let found = Value::String(s.clone());
                return Err(ctx.unexpected(
                    &format!("{ptr}/role"),
                    "role \"user\" or \"assistant\"",
                    &found,
                ));
            }
        },
        Some(other) => return Err(ctx.unexpected(&format!("{ptr}/role"), "a string role", other)),
        None => return Err(ctx.missing(ptr, "a message with a string `role`")),
    };
    let keys = keys_of(map);
    take(map, "role");
    let content_ptr = crate::json::child(ptr, "content");
    let content = read_content(take(map, "content"), ctx, &content_ptr, &mut |v, p| {
        read_block(v, ctx, p)
    })?;
    remember_order(keys, &["role", "content"], map);
    Ok((role, content))
}

/// Writes the message object (`role`, `content`, extra keys) of a chat message. A message kept
/// whole that a stage changed gets its original role back.
pub(crate) fn write_message_object(msg: &Message) -> Result<Map> {
    let at = || format!("message {}", msg.id);
    let mut extra = raw_map(&msg.extra, &at)?;
    let role = match take_hint(&mut extra, HINT_ROLE) {
        Some(Value::String(role)) => role,
        _ => match msg.role {
            Role::Assistant => "assistant",
            Role::System => "system",
            Role::User | Role::Tool | Role::Event => "user",
        }
        .to_string(),
    };
    let mut obj = Map::new();
    obj.insert("role".into(), Value::String(role));
    let blocks: Vec<&Block> = msg.content.blocks.iter().collect();
    if let Some(content) = write_content(msg.content.shape, &blocks, &mut |b| write_block(b, &at))?
    {
        obj.insert("content".into(), content);
    }
    merge_fields(&mut obj, extra);
    Ok(obj)
}

fn read_message(value: Value, index: usize, ctx: &Ctx<'_>, ptr: &str) -> Result<Message> {
    let mut map = into_object(value, ctx, ptr, "a message object")?;
    let role = map.get("role").and_then(Value::as_str).unwrap_or("user");
    if !matches!(role, "user" | "assistant" | "system") && map.get("role").is_some() {
        let role = role.to_string();
        ctx.note_unknown(format!("role `{role}`"));
        let id = condense_model::synthetic_id(index);
        return Ok(verbatim_message(
            Value::Object(map),
            id,
            Role::User,
            Some(&role),
        ));
    }
    let (role, content) = read_role_and_content(&mut map, ctx, ptr)?;
    Ok(Message {
        id: condense_model::synthetic_id(index),
        role,
        timestamp: None,
        content,
        extra: RawJson::from_map(map),
        envelope: RawJson::default(),
    })
}

fn write_message(msg: &Message) -> Result<Value> {
    if msg.role == Role::Event {
        return crate::body::write_event(msg);
    }
    if let Some(whole) = verbatim_json(msg) {
        return whole;
    }
    Ok(Value::Object(write_message_object(msg)?))
}
