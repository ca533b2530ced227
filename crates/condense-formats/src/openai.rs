//! OpenAI Chat Completions: messages, content parts, tool calls, request bodies.
//!
//! System and developer messages stay in the message list. Assistant `tool_calls` become
//! [`ToolUse`] blocks after the text; their `arguments` string is kept verbatim as the input.
//! A `role: "tool"` message holds one [`ToolResult`]. A message with a role this model does not
//! know (SWE-agent's `exit`, legacy `function`) is kept whole as one opaque block of a user
//! message, counted by its JSON and named in the document's warnings.

use crate::anthropic;
use crate::body::{verbatim_json, verbatim_message, write_event, MessageCodec, HINT_ROLE};
use crate::error::Ctx;
use crate::json::{
    child, child_at, into_object, keys_of, leftover, merge_extra, merge_fields, raw_map, raw_value,
    read_content, remember_order, require_string, set_hint, split_data_url, take, take_hint,
    take_string, write_content, Map, Result,
};
use condense_model::{
    Block, Content, ContentShape, Image, ImageSource, Message, Opaque, RawJson, Role, TextBlock,
    ToolResult, ToolUse,
};
use serde_json::{json, Value};

pub(crate) const CODEC: MessageCodec = MessageCodec {
    read: read_message,
    write: write_message,
    system_key: false,
};

/// Hint: a tool message had no string `tool_call_id` (the id came from elsewhere or is empty).
const HINT_NO_TOOL_CALL_ID: &str = "no_tool_call_id";
/// Hint on a tool call: `arguments` was not a string (`"json"`) or was missing (`"absent"`).
const HINT_ARGUMENTS: &str = "arguments";

fn read_message(value: Value, index: usize, ctx: &Ctx<'_>, ptr: &str) -> Result<Message> {
    let mut map = into_object(value, ctx, ptr, "a message object")?;
    let role_name = match map.get("role") {
        Some(Value::String(s)) => s.clone(),
        Some(other) => return Err(ctx.unexpected(&format!("{ptr}/role"), "a string role", other)),
        None => return Err(ctx.missing(ptr, "a message with a string `role`")),
    };
    let role = match role_name.as_str() {
        "system" | "developer" => Role::System,
        "user" => Role::User,
        "assistant" => Role::Assistant,
        "tool" => Role::Tool,
        _ => {
            ctx.note_unknown(format!("role `{role_name}`"));
            let id = condense_model::synthetic_id(index);
            return Ok(verbatim_message(
                Value::Object(map),
                id,
                Role::User,
                Some(&role_name),
            ));
        }
    };
    let keys = keys_of(&map);
    take(&mut map, "role");
    let mut hints = Map::new();
    if role_name == "developer" {
        set_hint(&mut hints, HINT_ROLE, Value::String(role_name));
    }
    let content_ptr = child(ptr, "content");
    let mut content = read_content(take(&mut map, "content"), ctx, &content_ptr, &mut |v, p| {
        read_part(v, ctx, p)
    })?;
    if role == Role::Tool {
        let tool_use_id = match take_string(&mut map, "tool_call_id") {
            Some(id) => id,
            None => {
                set_hint(&mut hints, HINT_NO_TOOL_CALL_ID, Value::Bool(true));
                single_tool_call_id(&map).unwrap_or_default()
            }
        };
        content = Content::blocks(vec![Block::ToolResult(ToolResult {
            tool_use_id,
            content,
            is_error: None,
            extra: RawJson::default(),
        })]);
    } else if role == Role::Assistant && non_empty_array(map.get("tool_calls")) {
        if let Some(Value::Array(calls)) = take(&mut map, "tool_calls") {
            for (i, call) in calls.into_iter().enumerate() {
                let call_ptr = child_at(&child(ptr, "tool_calls"), i);
                content.blocks.push(read_tool_call(call, ctx, &call_ptr)?);
            }
        }
    }
    remember_order(
        keys,
        &["role", "tool_call_id", "content", "tool_calls"],
        &mut map,
    );
    map.extend(hints);
    Ok(Message {
        id: condense_model::synthetic_id(index),
        role,
        timestamp: None,
        content,
        extra: RawJson::from_map(map),
        envelope: RawJson::default(),
    })
}

fn non_empty_array(value: Option<&Value>) -> bool {
    matches!(value, Some(Value::Array(items)) if !items.is_empty())
}

/// SWE-agent writes `tool_call_ids: [id]` instead of `tool_call_id`.
fn single_tool_call_id(map: &Map) -> Option<String> {
    match map.get("tool_call_ids") {
        Some(Value::Array(ids)) if ids.len() == 1 => ids[0].as_str().map(str::to_string),
        _ => None,
    }
}

fn read_tool_call(value: Value, ctx: &Ctx<'_>, ptr: &str) -> Result<Block> {
    let mut call = into_object(value, ctx, ptr, "a tool call object")?;
    let keys = keys_of(&call);
    let id = require_string(&mut call, "id", ctx, ptr)?;
    let fn_ptr = child(ptr, "function");
    let mut function = match take(&mut call, "function") {
        Some(Value::Object(f)) => f,
        Some(other) => return Err(ctx.unexpected(&fn_ptr, "a function object", &other)),
        None => return Err(ctx.missing(ptr, "a tool call with a `function` object")),
    };
    let function_keys = keys_of(&function);
    let name = require_string(&mut function, "name", ctx, &fn_ptr)?;
    let input = match take(&mut function, "arguments") {
        Some(Value::String(args)) => RawJson::from_string_unchecked(args),
        Some(other) => {
            set_hint(&mut call, HINT_ARGUMENTS, Value::String("json".into()));
            RawJson::from_value(&other)
        }
        None => {
            set_hint(&mut call, HINT_ARGUMENTS, Value::String("absent".into()));
            RawJson::default()
        }
    };
    remember_order(function_keys, &["arguments", "name"], &mut function);
    // Before the function's leftovers go in: the writer merges them into the function it writes.
    remember_order(keys, &["id", "function"], &mut call);
    if !function.is_empty() {
        call.insert("function".into(), Value::Object(function));
    }
    Ok(Block::ToolUse(ToolUse {
        id,
        name,
        input,
        extra: RawJson::from_map(call),
    }))
}

/// Reads one content part: text, image_url, or anything else kept opaque.
fn read_part(value: Value, ctx: &Ctx<'_>, ptr: &str) -> Result<Block> {
    let mut map = into_object(value, ctx, ptr, "a content part object")?;
    let kind = match map.get("type") {
        Some(Value::String(s)) => s.clone(),
        Some(other) => {
            return Err(ctx.unexpected(&format!("{ptr}/type"), "a string part type", other))
        }
        None => return Err(ctx.missing(ptr, "a content part with a string `type`")),
    };
    let keys = keys_of(&map);
    match kind.as_str() {
        "text" => {
            take(&mut map, "type");
            let text = require_string(&mut map, "text", ctx, ptr)?;
            Ok(Block::Text(TextBlock {
                text,
                extra: leftover(keys, &["type", "text"], map),
            }))
        }
        "image_url" => {
            take(&mut map, "type");
            let image_url = take(&mut map, "image_url")
                .ok_or_else(|| ctx.missing(ptr, "an image_url part with an `image_url`"))?;
            let source = match image_url {
                Value::Object(mut obj) => match obj
                    .get("url")
                    .and_then(Value::as_str)
                    .and_then(split_data_url)
                    .map(|(m, d)| (m.to_string(), d.to_string()))
                {
                    Some((media_type, data)) => {
                        let source = ImageSource::Base64 { media_type, data };
                        let url_keys = keys_of(&obj);
                        take(&mut obj, "url");
                        remember_order(url_keys, &["url"], &mut obj);
                        remember_order(keys, &["type", "image_url"], &mut map);
                        if !obj.is_empty() {
                            map.insert("image_url".into(), Value::Object(obj));
                        }
                        source
                    }
                    None => {
                        remember_order(keys, &["type", "image_url"], &mut map);
                        ImageSource::Reference {
                            json: RawJson::from_value(&Value::Object(obj)),
                        }
                    }
                },
                other => {
                    remember_order(keys, &["type", "image_url"], &mut map);
                    ImageSource::Reference {
                        json: RawJson::from_value(&other),
                    }
                }
            };
            Ok(Block::Image(Image {
                source,
                extra: RawJson::from_map(map),
            }))
        }
        _ => Ok(Block::Opaque(Opaque {
            json: RawJson::from_value(&Value::Object(map)),
        })),
    }
}

fn write_part(block: &Block, at: &dyn Fn() -> String) -> Result<Value> {
    let (mut obj, extra) = match block {
        Block::Text(t) => (json!({"type": "text", "text": t.text}), &t.extra),
        Block::Image(i) => {
            let image_url = match &i.source {
                ImageSource::Base64 { media_type, data } => {
                    json!({"url": format!("data:{media_type};base64,{data}")})
                }
                ImageSource::Reference { json } => raw_value(json, at)?,
            };
            (
                json!({"type": "image_url", "image_url": image_url}),
                &i.extra,
            )
        }
        Block::Opaque(o) => return raw_value(&o.json, at),
        // Not native to OpenAI: written as their Anthropic JSON.
        other => return anthropic::write_block(other, at),
    };
    if let Value::Object(map) = &mut obj {
        merge_extra(map, extra, at)?;
    }
    Ok(obj)
}

fn write_tool_call(tool_use: &ToolUse, at: &dyn Fn() -> String) -> Result<Value> {
    let mut extra = raw_map(&tool_use.extra, at)?;
    let arguments = match take_hint(&mut extra, HINT_ARGUMENTS)
        .as_ref()
        .and_then(Value::as_str)
    {
        Some("json") => Some(raw_value(&tool_use.input, at)?),
        Some("absent") if tool_use.input.is_empty() => None,
        _ => Some(Value::String(tool_use.input.as_str().to_string())),
    };
    let mut function = Map::new();
    if let Some(arguments) = arguments {
        function.insert("arguments".into(), arguments);
    }
    function.insert("name".into(), Value::String(tool_use.name.clone()));
    let mut call = Map::new();
    call.insert("id".into(), Value::String(tool_use.id.clone()));
    call.insert("function".into(), Value::Object(function));
    merge_fields(&mut call, extra);
    Ok(Value::Object(call))
}

fn write_message(msg: &Message) -> Result<Value> {
    if msg.role == Role::Event {
        return write_event(msg);
    }
    if let Some(whole) = verbatim_json(msg) {
        return whole;
    }
    let at = || format!("message {}", msg.id);
    let mut extra = raw_map(&msg.extra, &at)?;
    let role = match take_hint(&mut extra, HINT_ROLE) {
        Some(Value::String(role)) => role,
        _ => msg.role.as_str().to_string(),
    };
    let mut obj = Map::new();
    obj.insert("role".into(), Value::String(role));
    if msg.role == Role::Tool {
        let with_id = take_hint(&mut extra, HINT_NO_TOOL_CALL_ID).is_none();
        write_tool_message(msg, with_id, &mut obj, &at)?;
    } else {
        let (calls, rest): (Vec<&Block>, Vec<&Block>) = msg
            .content
            .blocks
            .iter()
            .partition(|b| matches!(b, Block::ToolUse(_)));
        if let Some(content) = write_content(msg.content.shape, &rest, &mut |b| write_part(b, &at))?
        {
            obj.insert("content".into(), content);
        }
        if !calls.is_empty() {
            let calls = calls
                .into_iter()
                .filter_map(|b| match b {
                    Block::ToolUse(tu) => Some(write_tool_call(tu, &at)),
                    _ => None,
                })
                .collect::<Result<Vec<_>>>()?;
            obj.insert("tool_calls".into(), Value::Array(calls));
        }
    }
    merge_fields(&mut obj, extra);
    Ok(Value::Object(obj))
}

/// A tool message: the `tool_call_id` and content of its tool result. Anything else a stage put
/// in it is written as further content. `with_id`: the message had a string `tool_call_id`.
fn write_tool_message(
    msg: &Message,
    with_id: bool,
    obj: &mut Map,
    at: &dyn Fn() -> String,
) -> Result<()> {
    let first = msg.tool_results().next();
    if let (Some(tr), true) = (first, with_id) {
        obj.insert("tool_call_id".into(), Value::String(tr.tool_use_id.clone()));
    }
    let (shape, blocks): (ContentShape, Vec<&Block>) = match (msg.content.blocks.as_slice(), first)
    {
        ([Block::ToolResult(_)], Some(tr)) => {
            (tr.content.shape, tr.content.blocks.iter().collect())
        }
        _ => {
            let mut flat = Vec::new();
            for block in &msg.content.blocks {
                match block {
                    Block::ToolResult(tr) => flat.extend(tr.content.blocks.iter()),
                    other => flat.push(other),
                }
            }
            (ContentShape::Array, flat)
        }
    };
    if let Some(content) = write_content(shape, &blocks, &mut |b| write_part(b, at))? {
        obj.insert("content".into(), content);
    }
    if let Some(tr) = first {
        merge_extra(obj, &tr.extra, at)?;
    }
    Ok(())
}
