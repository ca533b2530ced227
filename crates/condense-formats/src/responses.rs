//! OpenAI Responses API request bodies: `{"model", "instructions", "input", "tools", ...}`.
//!
//! `input` is a list of items ([`crate::items`], the mapping Codex rollouts share) or a string
//! (one user message, written back as a string while it stays one plain text). `instructions`
//! is the system prompt, `tools` the tool definitions; every other key is the conversation's
//! `extra`, written back in its original place. A body continuing a stored response
//! (`previous_response_id`) is read with a warning: the turns before it are on the server.
//!
//! ```
//! use condense_formats::{read, Format, ReadOptions};
//!
//! let body = concat!(
//!     r#"{"model":"gpt-5","instructions":"Be brief.","input":["#,
//!     r#"{"type":"message","role":"user","content":[{"type":"input_text","text":"ls"}]},"#,
//!     r#"{"type":"function_call","name":"shell","arguments":"{\"cmd\":\"ls\"}","call_id":"c1"},"#,
//!     r#"{"type":"function_call_output","call_id":"c1","output":"a.rs"}]}"#
//! )
//! .as_bytes();
//! let doc = read(body, "req.json", &ReadOptions::default()).unwrap();
//! assert_eq!(doc.format(), Format::Responses);
//! let conv = &doc.conversations()[0];
//! assert_eq!(conv.system.as_ref().unwrap().text(), "Be brief.");
//! assert_eq!(conv.messages[1].tool_uses().next().unwrap().id, "c1");
//! assert_eq!(doc.write().unwrap(), body.to_vec());
//! ```

use crate::body::{conversation_name, finish_body, tool_def};
use crate::error::Ctx;
use crate::frames::Member;
use crate::items::{looks_like_item, read_item, write_items};
use crate::json::{set_hint, str_at, take, take_hint, Map, Result};
use crate::FormatError;
use condense_model::{Block, Content, ContentShape, Conversation, Message, RawJson};
use serde_json::Value;

/// Hint on the one message of a string `input`.
const HINT_INPUT_STRING: &str = "input_string";

/// Keys only a Responses request has (a string `input` alone is also an embeddings request).
const RESPONSES_KEYS: [&str; 12] = [
    "instructions",
    "tools",
    "reasoning",
    "text",
    "previous_response_id",
    "max_output_tokens",
    "store",
    "include",
    "tool_choice",
    "truncation",
    "conversation",
    "prompt",
];

/// Whether an object is a Responses request body: no `messages`, and an `input` that is a list
/// of items (objects with a `type` or a `role`), or a string with a key only Responses requests
/// have (or a model that is not an embedding or moderation model).
pub(crate) fn is_request(value: &Value) -> bool {
    let Some(map) = value.as_object() else {
        return false;
    };
    if map.contains_key("messages") {
        return false;
    }
    match map.get("input") {
        Some(Value::Array(items)) => items.iter().all(is_typed_or_role),
        Some(Value::String(_)) => {
            let model = str_at(value, "model").unwrap_or_default();
            RESPONSES_KEYS.iter().any(|k| map.contains_key(*k))
                || (!model.is_empty()
                    && !model.contains("embedding")
                    && !model.contains("moderation"))
        }
        _ => false,
    }
}

/// Whether a list holds input items rather than chat messages: every element is an object
/// with a `type` or a `role`, and some element is an item condense knows by its `type` (a list
/// of bare `{role, content}` messages is chat; an item type nobody knows yet is allowed beside
/// known ones).
pub(crate) fn is_item_list(items: &[Value]) -> bool {
    items.iter().all(is_typed_or_role)
        && items
            .iter()
            .any(|v| str_at(v, "type").is_some() && looks_like_item(v))
}

/// An object with a string `type` or `role`: what every input item has (embeddings inputs are
/// strings or numbers).
fn is_typed_or_role(value: &Value) -> bool {
    str_at(value, "type").is_some() || str_at(value, "role").is_some()
}

/// Reads a request body. Returns the conversation and the body's key order. `quick`: the
/// messages of its `input`, already read from the known list's elements
/// ([`crate::parallel::QuickList::read_elements`]; `input` then holds an empty stub), and the
/// members of its frame taken from the memo ([`crate::frames`]).
pub(crate) fn read_body(
    mut map: Map,
    ctx: &Ctx<'_>,
    ptr: &str,
    (quick, frame): (Option<Vec<Message>>, Vec<Member>),
) -> Result<(Conversation, Vec<String>)> {
    let order: Vec<String> = map.keys().cloned().collect();
    let messages = match (take(&mut map, "input"), quick) {
        (Some(Value::Array(_)), Some(messages)) => messages,
        (Some(Value::Array(items)), None) => read_items(items, ctx, &format!("{ptr}/input"))?,
        (Some(Value::String(text)), _) => {
            let mut hint = Map::new();
            set_hint(&mut hint, HINT_INPUT_STRING, Value::Bool(true));
            let mut msg = Message::new("#0", condense_model::Role::User, vec![Block::text(text)]);
            msg.content.shape = ContentShape::String;
            msg.extra = RawJson::from_map(hint);
            vec![msg]
        }
        (Some(other), _) => {
            return Err(ctx.unexpected(
                &format!("{ptr}/input"),
                "an array of input items or a string",
                &other,
            ))
        }
        (None, _) => return Err(ctx.missing(ptr, "a Responses request body with an `input`")),
    };
    let mut conv = Conversation {
        messages,
        ..Conversation::default()
    };
    crate::frames::take_into(frame, &mut map, &mut conv);
    if let Some(Value::String(_)) = map.get("instructions") {
        if let Some(Value::String(text)) = take(&mut map, "instructions") {
            conv.system = Some(Content::string(text));
        }
    }
    if let Some(Value::Array(_)) = map.get("tools") {
        if let Some(Value::Array(tools)) = take(&mut map, "tools") {
            conv.tools = tools.iter().map(tool_def).collect();
        }
    }
    if let Some(previous) = map.get("previous_response_id").and_then(Value::as_str) {
        ctx.warn(format!(
            "the request continues the stored response `{previous}` (previous_response_id): the \
             turns before it are on the server, not in the file, and are not counted"
        ));
    }
    conv.extra = RawJson::from_map(map);
    Ok((conv, order))
}

/// Reads a bare list of input items (`quick`: its messages, already read from the known
/// list's elements; `items` then is an empty stub).
pub(crate) fn read_list(
    items: Vec<Value>,
    ctx: &Ctx<'_>,
    ptr: &str,
    quick: Option<Vec<Message>>,
) -> Result<Conversation> {
    crate::body::list_conversation(quick, || read_items(items, ctx, ptr))
}

/// Reads the input item at `index` of its list (`ptr`: its pointer) into its message.
pub(crate) fn read_element(item: Value, index: usize, ctx: &Ctx<'_>, ptr: &str) -> Result<Message> {
    read_item(item, condense_model::synthetic_id(index), ctx, ptr)
}

fn read_items(items: Vec<Value>, ctx: &Ctx<'_>, ptr: &str) -> Result<Vec<Message>> {
    items
        .into_iter()
        .enumerate()
        .map(|(i, item)| read_element(item, i, ctx, &crate::json::child_at(ptr, i)))
        .collect()
}

/// Writes a request body, keys in their original order.
pub(crate) fn write_body(conv: &Conversation, order: &[String], label: &str) -> Result<Value> {
    let at = || conversation_name(label);
    let mut map = Map::new();
    map.insert("input".into(), write_input(conv)?);
    if let Some(system) = &conv.system {
        map.insert("instructions".into(), Value::String(system.text()));
    }
    finish_body(conv, order, map, &at)
}

/// Writes a bare item list; it has nowhere to put instructions, tools or other keys.
pub(crate) fn write_list(conv: &Conversation, label: &str) -> Result<Value> {
    if conv.system.is_some() || !conv.tools.is_empty() || !conv.extra.is_empty() {
        return Err(FormatError::Write {
            at: conversation_name(label),
            reason: "the conversation is a bare item list: it cannot hold instructions, tools or \
                     top-level fields"
                .into(),
        });
    }
    write_input(conv)
}

/// The `input`: a string when it was one and still is one plain text, else the items.
fn write_input(conv: &Conversation) -> Result<Value> {
    if let [msg] = conv.messages.as_slice() {
        let mut extra = msg.extra.to_map().unwrap_or_default();
        let was_string = take_hint(&mut extra, HINT_INPUT_STRING).is_some();
        if let (true, true, [Block::Text(t)]) =
            (was_string, extra.is_empty(), msg.content.blocks.as_slice())
        {
            if t.extra.is_empty() && msg.content.shape == ContentShape::String {
                return Ok(Value::String(t.text.clone()));
            }
        }
    }
    let mut items = Vec::with_capacity(conv.messages.len());
    for msg in &conv.messages {
        items.extend(write_items(msg)?);
    }
    Ok(Value::Array(items))
}
