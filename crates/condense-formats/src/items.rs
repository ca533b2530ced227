//! Input items: what a Codex rollout records as `response_item` payloads and what the OpenAI
//! Responses API takes as `input`. One mapping for both: each item is one message.
//!
//! | item | message |
//! |---|---|
//! | `message` (`type` may be absent) | its role (`developer`/`system` → system), content parts `input_text`/`output_text` → text, `input_image` → image, others opaque |
//! | `function_call` | assistant, one [`ToolUse`]: id = `call_id`, input = the `arguments` text verbatim |
//! | `custom_tool_call` (`apply_patch`) | assistant, one [`ToolUse`]: input = the free-text `input` as a JSON string |
//! | `local_shell_call` | assistant, one [`ToolUse`] named `local_shell`: input = the `action` |
//! | `*_call_output` of those | tool, one [`ToolResult`] answering `call_id`: a string `output` or its parts |
//! | `reasoning`, `web_search_call`, ... ([`OPAQUE_ITEMS`]) | one opaque block holding the item, counted by its JSON |
//! | `ghost_snapshot` | an event: Codex never sends it |
//! | anything else | like an opaque item, and noted in the document's warnings |
//!
//! The fields a mapping does not use stay in the `extra` of the block (calls, outputs) or of the
//! message (`message` items); `condense:` hints say what the writer cannot tell from the model
//! (the item type of a call, a part type that is not its role's default, a missing `type`).

use crate::body::{verbatim_json, verbatim_message, write_event, HINT_ROLE};
use crate::error::Ctx;
use crate::json::{
    into_object, keys_of, leftover, merge_fields, raw_map, raw_value, read_content, remember_order,
    set_hint, split_data_url, str_at, take, take_hint, take_string, write_content, Map, Result,
};
use condense_model::{
    Block, Content, ContentShape, Image, ImageSource, Message, Opaque, RawJson, Role, TextBlock,
    ToolResult, ToolUse,
};
use serde_json::{json, Value};

/// Hint on a message: the `message` item had no `type` key (a Responses "easy" input message).
const HINT_UNTYPED: &str = "untyped";
/// Hint on a call or output: its item type, when not `function_call` / `function_call_output`.
const HINT_ITEM: &str = "item";
/// Hint on a text part: its type, when not its role's default (`output_text` for the assistant,
/// `input_text` otherwise).
const HINT_PART: &str = "part";

/// Items condense knows but maps to no block of its own: one opaque block, counted by its JSON.
const OPAQUE_ITEMS: [&str; 15] = [
    "reasoning",
    "web_search_call",
    "compaction",
    "image_generation_call",
    "file_search_call",
    "code_interpreter_call",
    "computer_call",
    "computer_call_output",
    "mcp_call",
    "mcp_list_tools",
    "mcp_approval_request",
    "mcp_approval_response",
    "item_reference",
    "tool_search_call",
    "tool_search_output",
];

/// The name a `local_shell_call` gets as a tool use (the item has no name).
const LOCAL_SHELL: &str = "local_shell";

/// Whether an item never reaches the model (Codex keeps `ghost_snapshot` items, its undo
/// points, out of every prompt).
pub(crate) fn is_invisible(item: &Value) -> bool {
    str_at(item, "type") == Some("ghost_snapshot")
}

/// Whether a value has the shape of an input item: an object with a `type` naming one, or a
/// `role` (a message without `type`).
pub(crate) fn looks_like_item(value: &Value) -> bool {
    match str_at(value, "type") {
        Some(kind) => is_known_kind(kind),
        None => str_at(value, "role").is_some(),
    }
}

/// Whether condense knows this item type.
fn is_known_kind(kind: &str) -> bool {
    matches!(
        kind,
        "message"
            | "function_call"
            | "function_call_output"
            | "custom_tool_call"
            | "custom_tool_call_output"
            | "local_shell_call"
            | "local_shell_call_output"
            | "ghost_snapshot"
    ) || OPAQUE_ITEMS.contains(&kind)
}

/// Reads one item into a message with the given id.
pub(crate) fn read_item(value: Value, id: String, ctx: &Ctx<'_>, ptr: &str) -> Result<Message> {
    let map = into_object(value, ctx, ptr, "an input item (a JSON object)")?;
    if is_invisible_map(&map) {
        return Ok(Message {
            id,
            role: Role::Event,
            timestamp: None,
            content: Content::empty(ContentShape::Absent),
            extra: RawJson::default(),
            envelope: RawJson::from_map(map),
        });
    }
    let kind = map.get("type").and_then(Value::as_str).map(str::to_string);
    let read = match kind.as_deref() {
        Some("message") | None if map.get("role").is_some_and(Value::is_string) => {
            return read_message(map, id, ctx, ptr)
        }
        Some(k @ ("function_call" | "custom_tool_call" | "local_shell_call")) => {
            read_call(map, k, &id)
        }
        Some(
            k @ ("function_call_output" | "custom_tool_call_output" | "local_shell_call_output"),
        ) => read_output(map, k, &id, ctx, ptr)?,
        Some(k) if OPAQUE_ITEMS.contains(&k) => {
            let role = opaque_role(k, &map);
            return Ok(verbatim_message(Value::Object(map), id, role, None));
        }
        _ => Err(map),
    };
    match read {
        Ok(message) => Ok(message),
        Err(map) => {
            let what = match &kind {
                Some(k) if is_known_kind(k) => format!("malformed `{k}` item"),
                Some(k) => format!("item `{k}`"),
                None => "item without a `type`".to_string(),
            };
            ctx.note_unknown(what);
            let role = opaque_role(kind.as_deref().unwrap_or_default(), &map);
            Ok(verbatim_message(Value::Object(map), id, role, None))
        }
    }
}

fn is_invisible_map(map: &Map) -> bool {
    map.get("type").and_then(Value::as_str) == Some("ghost_snapshot")
}

/// The role of an item kept whole: its own `role` when it has one, else the user for what
/// answers the model (`*_output`, `*_response`) and the assistant for what the model produced.
fn opaque_role(kind: &str, map: &Map) -> Role {
    match map.get("role").and_then(Value::as_str) {
        Some("assistant") => Role::Assistant,
        Some("developer" | "system") => Role::System,
        Some(_) => Role::User,
        None if kind.ends_with("_output") || kind.ends_with("_response") => Role::User,
        None => Role::Assistant,
    }
}

fn read_message(mut map: Map, id: String, ctx: &Ctx<'_>, ptr: &str) -> Result<Message> {
    let role_name = map
        .get("role")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    let role = match role_name.as_str() {
        "user" => Role::User,
        "assistant" => Role::Assistant,
        "developer" | "system" => Role::System,
        _ => {
            ctx.note_unknown(format!("role `{role_name}`"));
            return Ok(verbatim_message(
                Value::Object(map),
                id,
                Role::User,
                Some(&role_name),
            ));
        }
    };
    let keys = keys_of(&map);
    let typed = take(&mut map, "type").is_some();
    take(&mut map, "role");
    let default_part = default_part(role);
    let content_ptr = format!("{ptr}/content");
    let content = read_content(take(&mut map, "content"), ctx, &content_ptr, &mut |v, p| {
        read_part(v, default_part, ctx, p)
    })?;
    remember_order(keys, &["type", "role", "content"], &mut map);
    if !typed {
        set_hint(&mut map, HINT_UNTYPED, Value::Bool(true));
    }
    if role_name == "developer" {
        set_hint(&mut map, HINT_ROLE, Value::String(role_name));
    }
    Ok(Message {
        id,
        role,
        timestamp: None,
        content,
        extra: RawJson::from_map(map),
        envelope: RawJson::default(),
    })
}

fn default_part(role: Role) -> &'static str {
    if role == Role::Assistant {
        "output_text"
    } else {
        "input_text"
    }
}

/// A content part: `input_text`/`output_text` → text, `input_image` with an `image_url` →
/// image, anything else opaque.
fn read_part(value: Value, default: &str, ctx: &Ctx<'_>, ptr: &str) -> Result<Block> {
    let mut map = into_object(value, ctx, ptr, "a content part object")?;
    let kind = map
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    let keys = keys_of(&map);
    match kind.as_str() {
        "input_text" | "output_text" if map.get("text").is_some_and(Value::is_string) => {
            take(&mut map, "type");
            let text = take_string(&mut map, "text").unwrap_or_default();
            if kind != default {
                set_hint(&mut map, HINT_PART, Value::String(kind));
            }
            Ok(Block::Text(TextBlock {
                text,
                extra: leftover(keys, &["type", "text"], map),
            }))
        }
        "input_image" if map.get("image_url").is_some_and(Value::is_string) => {
            take(&mut map, "type");
            let url = take_string(&mut map, "image_url").unwrap_or_default();
            let source = match split_data_url(&url) {
                Some((media_type, data)) => ImageSource::Base64 {
                    media_type: media_type.to_string(),
                    data: data.to_string(),
                },
                None => ImageSource::Reference {
                    json: RawJson::from_value(&Value::String(url)),
                },
            };
            Ok(Block::Image(Image {
                source,
                extra: leftover(keys, &["type", "image_url"], map),
            }))
        }
        _ => Ok(Block::Opaque(Opaque {
            json: RawJson::from_value(&Value::Object(map)),
        })),
    }
}

/// A call item, or the map back when it lacks what its type requires.
fn read_call(mut map: Map, kind: &str, id: &str) -> std::result::Result<Message, Map> {
    let is_string = |m: &Map, k: &str| m.get(k).is_some_and(Value::is_string);
    let complete = is_string(&map, "call_id")
        && match kind {
            "function_call" => is_string(&map, "name") && is_string(&map, "arguments"),
            "custom_tool_call" => is_string(&map, "name") && is_string(&map, "input"),
            _ => map.contains_key("action"),
        };
    if !complete {
        return Err(map);
    }
    let keys = keys_of(&map);
    take(&mut map, "type");
    let call_id = take_string(&mut map, "call_id").unwrap_or_default();
    let (name, input, known): (String, RawJson, &[&str]) = match kind {
        "function_call" => {
            let name = take_string(&mut map, "name").unwrap_or_default();
            let arguments = take_string(&mut map, "arguments").unwrap_or_default();
            (
                name,
                RawJson::from_string_unchecked(arguments),
                &["type", "name", "arguments", "call_id"],
            )
        }
        "custom_tool_call" => {
            let name = take_string(&mut map, "name").unwrap_or_default();
            let input = take(&mut map, "input").unwrap_or_default();
            (
                name,
                RawJson::from_value(&input),
                &["type", "call_id", "name", "input"],
            )
        }
        _ => {
            let action = take(&mut map, "action").unwrap_or_default();
            (
                LOCAL_SHELL.to_string(),
                RawJson::from_value(&action),
                &["type", "call_id", "action"],
            )
        }
    };
    if kind != "function_call" {
        set_hint(&mut map, HINT_ITEM, Value::String(kind.to_string()));
    }
    let block = Block::ToolUse(ToolUse {
        id: call_id,
        name,
        input,
        extra: leftover(keys, known, map),
    });
    Ok(Message::new(id, Role::Assistant, vec![block]))
}

/// An output item, or the map back when its `call_id` or `output` is missing or odd.
fn read_output(
    mut map: Map,
    kind: &str,
    id: &str,
    ctx: &Ctx<'_>,
    ptr: &str,
) -> Result<std::result::Result<Message, Map>> {
    let output_ok = matches!(map.get("output"), Some(Value::String(_) | Value::Array(_)));
    if !output_ok || !map.get("call_id").is_some_and(Value::is_string) {
        return Ok(Err(map));
    }
    let keys = keys_of(&map);
    take(&mut map, "type");
    let call_id = take_string(&mut map, "call_id").unwrap_or_default();
    let output_ptr = format!("{ptr}/output");
    let content = read_content(take(&mut map, "output"), ctx, &output_ptr, &mut |v, p| {
        read_part(v, "input_text", ctx, p)
    })?;
    if kind != "function_call_output" {
        set_hint(&mut map, HINT_ITEM, Value::String(kind.to_string()));
    }
    let block = Block::ToolResult(ToolResult {
        tool_use_id: call_id,
        content,
        is_error: None,
        extra: leftover(keys, &["type", "call_id", "output"], map),
    });
    Ok(Ok(Message::new(id, Role::Tool, vec![block])))
}

/// The items of a message: one for a message read from an item; a message a stage built may
/// need several (its text as a `message` item, each call and result as its own item).
pub(crate) fn write_items(msg: &Message) -> Result<Vec<Value>> {
    if msg.role == Role::Event {
        return Ok(vec![write_event(msg)?]);
    }
    if let Some(whole) = verbatim_json(msg) {
        return Ok(vec![whole?]);
    }
    let at = || format!("message {}", msg.id);
    let mut extra = Some(raw_map(&msg.extra, &at)?);
    let mut items = Vec::new();
    let mut parts: Vec<&Block> = Vec::new();
    for block in &msg.content.blocks {
        let item = match block {
            Block::ToolUse(tu) => write_call(tu, &at)?,
            Block::ToolResult(tr) => write_output(tr, &at)?,
            other => {
                parts.push(other);
                continue;
            }
        };
        if !parts.is_empty() {
            items.push(write_message(msg, &parts, extra.take(), &at)?);
            parts.clear();
        }
        items.push(item);
    }
    if !parts.is_empty() || items.is_empty() {
        items.push(write_message(msg, &parts, extra.take(), &at)?);
    }
    Ok(items)
}

/// A `message` item holding `parts`; `extra` is the message's (only the first item gets it).
fn write_message(
    msg: &Message,
    parts: &[&Block],
    extra: Option<Map>,
    at: &dyn Fn() -> String,
) -> Result<Value> {
    let mut extra = extra.unwrap_or_default();
    let untyped = take_hint(&mut extra, HINT_UNTYPED).is_some();
    let role = match take_hint(&mut extra, HINT_ROLE) {
        Some(Value::String(role)) => role,
        _ => match msg.role {
            Role::Assistant => "assistant",
            Role::System => "system",
            Role::User | Role::Tool | Role::Event => "user",
        }
        .to_string(),
    };
    let default = default_part(msg.role);
    let mut obj = Map::new();
    if !untyped {
        obj.insert("type".into(), Value::String("message".into()));
    }
    obj.insert("role".into(), Value::String(role));
    // A message a stage split keeps its shape only when it is still one plain text.
    let shape = if parts.len() == msg.content.blocks.len() {
        msg.content.shape
    } else {
        ContentShape::Array
    };
    if let Some(content) = write_content(shape, parts, &mut |b| write_part(b, default, at))? {
        obj.insert("content".into(), content);
    }
    merge_fields(&mut obj, extra);
    Ok(Value::Object(obj))
}

fn write_part(block: &Block, default: &str, at: &dyn Fn() -> String) -> Result<Value> {
    match block {
        Block::Text(t) => {
            let mut extra = raw_map(&t.extra, at)?;
            let kind = match take_hint(&mut extra, HINT_PART) {
                Some(Value::String(kind)) => kind,
                _ => default.to_string(),
            };
            let mut obj = Map::new();
            obj.insert("type".into(), Value::String(kind));
            obj.insert("text".into(), Value::String(t.text.clone()));
            merge_fields(&mut obj, extra);
            Ok(Value::Object(obj))
        }
        Block::Thinking(t) => Ok(json!({"type": default, "text": t.thinking})),
        Block::Image(i) => {
            let url = match &i.source {
                ImageSource::Base64 { media_type, data } => {
                    Value::String(format!("data:{media_type};base64,{data}"))
                }
                ImageSource::Reference { json } => raw_value(json, at)?,
            };
            let mut obj = Map::new();
            obj.insert("type".into(), Value::String("input_image".into()));
            obj.insert("image_url".into(), url);
            merge_fields(&mut obj, raw_map(&i.extra, at)?);
            Ok(Value::Object(obj))
        }
        Block::Opaque(o) => raw_value(&o.json, at),
        // Not a part: a stage nested a call or result in a result; written as its text.
        Block::ToolUse(_) | Block::ToolResult(_) => {
            let text = Content::blocks(vec![block.clone()]).text();
            Ok(json!({"type": default, "text": text}))
        }
    }
}

fn write_call(tu: &ToolUse, at: &dyn Fn() -> String) -> Result<Value> {
    let mut extra = raw_map(&tu.extra, at)?;
    let kind = match take_hint(&mut extra, HINT_ITEM) {
        Some(Value::String(kind)) => kind,
        _ => "function_call".to_string(),
    };
    let mut obj = Map::new();
    obj.insert("type".into(), Value::String(kind.clone()));
    match kind.as_str() {
        "custom_tool_call" => {
            obj.insert("call_id".into(), Value::String(tu.id.clone()));
            obj.insert("name".into(), Value::String(tu.name.clone()));
            // The free-text input, read as a JSON string; kept as text when a stage left
            // something that is not JSON.
            let input = tu
                .input
                .to_value()
                .unwrap_or_else(|_| Value::String(tu.input.as_str().to_string()));
            obj.insert("input".into(), input);
        }
        "local_shell_call" => {
            obj.insert("call_id".into(), Value::String(tu.id.clone()));
            obj.insert("action".into(), raw_value(&tu.input, at)?);
        }
        _ => {
            obj.insert("name".into(), Value::String(tu.name.clone()));
            obj.insert(
                "arguments".into(),
                Value::String(tu.input.as_str().to_string()),
            );
            obj.insert("call_id".into(), Value::String(tu.id.clone()));
        }
    }
    merge_fields(&mut obj, extra);
    Ok(Value::Object(obj))
}

fn write_output(tr: &ToolResult, at: &dyn Fn() -> String) -> Result<Value> {
    let mut extra = raw_map(&tr.extra, at)?;
    let kind = match take_hint(&mut extra, HINT_ITEM) {
        Some(Value::String(kind)) => kind,
        _ => "function_call_output".to_string(),
    };
    let mut obj = Map::new();
    obj.insert("type".into(), Value::String(kind));
    obj.insert("call_id".into(), Value::String(tr.tool_use_id.clone()));
    let blocks: Vec<&Block> = tr.content.blocks.iter().collect();
    let output = write_content(tr.content.shape, &blocks, &mut |b| {
        write_part(b, "input_text", at)
    })?;
    obj.insert(
        "output".into(),
        output.unwrap_or_else(|| Value::String(String::new())),
    );
    merge_fields(&mut obj, extra);
    Ok(Value::Object(obj))
}
