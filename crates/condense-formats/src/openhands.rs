//! OpenHands event lists (the `history` of an evaluation output line, or a trajectory export).
//!
//! Mapping (everything not listed is a [`Role::Event`] kept whole):
//! - a `message` action from the user → a user text message (`args.content`);
//! - an agent action with `tool_call_metadata` (run, read, edit, think, finish, ...) → an
//!   assistant message with one [`ToolUse`]: id and name from the metadata, input = `args`;
//! - an agent `message` or `system` action → an assistant or system text message;
//! - an observation with `tool_call_metadata` → a [`Role::Tool`] message with one [`ToolResult`]
//!   whose content is the observation's `content`.
//!
//! The event, with the mapped value replaced by a `null` placeholder that keeps its position, is
//! the message's `envelope`. The event's `message` field usually repeats a text message's text;
//! when it does, it is a placeholder too (a hint in `extra` says so) and is written from the
//! model, so compressing the text shrinks both.
//!
//! Public: [`failed_exit`], whether an observation's event records a failed command, for the
//! crates that judge tool results without knowing the event's fields:
//!
//! ```
//! use condense_formats::openhands::failed_exit;
//! use condense_model::RawJson;
//!
//! let event = |code: i64| RawJson::from_value(&serde_json::json!(
//!     {"observation": "run", "extras": {"metadata": {"exit_code": code}}}
//! ));
//! assert!(failed_exit(&event(127)));
//! assert!(!failed_exit(&event(0)));
//! assert!(!failed_exit(&RawJson::default()));
//! // Only the metadata's code counts, and only a number.
//! let elsewhere = serde_json::json!({"exit_code": 1, "extras": {"metadata": {"exit_code": 0}}});
//! assert!(!failed_exit(&RawJson::from_value(&elsewhere)));
//! let text = serde_json::json!({"extras": {"metadata": {"exit_code": "1"}}});
//! assert!(!failed_exit(&RawJson::from_value(&text)));
//! let float = serde_json::json!({"extras": {"metadata": {"exit_code": 2.0}}});
//! assert!(failed_exit(&RawJson::from_value(&float)));
//! ```

use crate::body::{conversation_name, write_event};
use crate::claude_code::put_timestamp;
use crate::error::Ctx;
use crate::json::{
    hollow, into_object, into_string_or_empty, raw_map, raw_value, set_hint, str_at, take_hint,
    Map, Result,
};
use crate::FormatError;
use condense_model::{
    Block, Content, ContentShape, Conversation, Message, RawJson, Role, ToolResult, ToolUse,
};
use serde_json::{json, Value};

/// Hint: the event's `message` field repeated the text and is written from it.
const HINT_MESSAGE_IS_TEXT: &str = "message_is_text";

/// Whether a value is an OpenHands event: an object with a string `action` or `observation`.
pub(crate) fn is_event(value: &Value) -> bool {
    str_at(value, "action").is_some() || str_at(value, "observation").is_some()
}

/// Reads an event list into a conversation.
pub(crate) fn read_list(items: Vec<Value>, ctx: &Ctx<'_>, ptr: &str) -> Result<Conversation> {
    let messages = items
        .into_iter()
        .enumerate()
        .map(|(i, item)| read_event(item, i, ctx, &format!("{ptr}/{i}")))
        .collect::<Result<Vec<_>>>()?;
    Ok(Conversation {
        messages,
        ..Conversation::default()
    })
}

/// What an event maps to.
enum Kind {
    Text(Role),
    ToolUse { id: String, name: String },
    ToolResult { tool_use_id: String },
    Event,
}

fn classify(event: &Map) -> Kind {
    let get = |key: &str| event.get(key).and_then(Value::as_str);
    let args = event.get("args");
    let args_text = args.and_then(|a| str_at(a, "content")).is_some();
    let metadata = event.get("tool_call_metadata").and_then(|m| {
        Some((
            str_at(m, "tool_call_id")?.to_string(),
            str_at(m, "function_name")?.to_string(),
        ))
    });
    if let Some(action) = get("action") {
        let source = get("source").unwrap_or_default();
        match (source, action, metadata) {
            ("user", "message", _) if args_text => Kind::Text(Role::User),
            ("agent", _, Some((id, name))) if args.is_some_and(Value::is_object) => {
                Kind::ToolUse { id, name }
            }
            ("agent", "message", _) if args_text => Kind::Text(Role::Assistant),
            ("agent", "system", _) if args_text => Kind::Text(Role::System),
            _ => Kind::Event,
        }
    } else {
        match metadata {
            Some((tool_use_id, _)) if event.get("content").is_some_and(Value::is_string) => {
                Kind::ToolResult { tool_use_id }
            }
            _ => Kind::Event,
        }
    }
}

fn read_event(value: Value, index: usize, ctx: &Ctx<'_>, ptr: &str) -> Result<Message> {
    let mut event = into_object(value, ctx, ptr, "an OpenHands event object")?;
    if str_at_map(&event, "action").is_none() && str_at_map(&event, "observation").is_none() {
        return Err(ctx.unexpected(
            ptr,
            "an OpenHands event (an object with a string `action` or `observation`)",
            &Value::Object(event),
        ));
    }
    let id = match event.get("id") {
        Some(Value::Number(n)) => format!("oh-{n}"),
        _ => condense_model::synthetic_id(index),
    };
    let timestamp = event
        .get("timestamp")
        .and_then(Value::as_str)
        .map(str::to_string);
    let mut extra = Map::new();
    let (role, content) = match classify(&event) {
        Kind::Text(role) => {
            let text = match event.get_mut("args") {
                Some(Value::Object(args)) => hollow(args, "content"),
                _ => Value::Null,
            };
            let text = into_string_or_empty(text);
            if event.get("message").and_then(Value::as_str) == Some(text.as_str()) {
                hollow(&mut event, "message");
                set_hint(&mut extra, HINT_MESSAGE_IS_TEXT, Value::Bool(true));
            }
            (role, Content::string(text))
        }
        Kind::ToolUse { id, name } => {
            let args = hollow(&mut event, "args");
            let block = Block::ToolUse(ToolUse {
                id,
                name,
                input: RawJson::from_value(&args),
                extra: RawJson::default(),
            });
            (Role::Assistant, Content::blocks(vec![block]))
        }
        Kind::ToolResult { tool_use_id } => {
            let text = hollow(&mut event, "content");
            let block = Block::ToolResult(ToolResult {
                tool_use_id,
                content: Content::string(into_string_or_empty(text)),
                is_error: None,
                extra: RawJson::default(),
            });
            (Role::Tool, Content::blocks(vec![block]))
        }
        Kind::Event => (Role::Event, Content::empty(ContentShape::Absent)),
    };
    Ok(Message {
        id,
        role,
        timestamp,
        content,
        extra: RawJson::from_map(extra),
        envelope: RawJson::from_map(event),
    })
}

fn str_at_map<'m>(map: &'m Map, key: &str) -> Option<&'m str> {
    map.get(key).and_then(Value::as_str)
}

/// Writes a conversation back as an event list.
pub(crate) fn write_list(conv: &Conversation, label: &str) -> Result<Value> {
    if conv.system.is_some() || !conv.tools.is_empty() || !conv.extra.is_empty() {
        return Err(FormatError::Write {
            at: conversation_name(label),
            reason: "an OpenHands event list cannot hold a system prompt, tools or top-level \
                     fields"
                .into(),
        });
    }
    conv.messages
        .iter()
        .map(write_message)
        .collect::<Result<Vec<_>>>()
        .map(Value::Array)
}

pub(crate) fn write_message(msg: &Message) -> Result<Value> {
    if msg.role == Role::Event {
        return write_event(msg);
    }
    let at = || format!("message {}", msg.id);
    let unwritable = |reason: &str| FormatError::Write {
        at: at(),
        reason: reason.to_string(),
    };
    let tool_uses: Vec<&ToolUse> = msg.tool_uses().collect();
    if tool_uses.len() > 1 || (tool_uses.len() == 1 && msg.content.blocks.len() > 1) {
        return Err(unwritable(
            "an OpenHands action holds exactly one tool call and nothing else",
        ));
    }
    let mut event = if msg.envelope.is_empty() {
        new_event(msg)
    } else {
        raw_map(&msg.envelope, &at)?
    };
    if let (Some(Value::Number(_)), Some(n)) = (event.get("id"), numeric_id(&msg.id)) {
        event.insert("id".into(), Value::Number(n.into()));
    }
    put_timestamp(&mut event, msg);
    if event.contains_key("observation") {
        let result = msg.tool_results().next();
        let text = match result {
            Some(tr) => tr.content.text(),
            None => msg.content.text(),
        };
        event.insert("content".into(), Value::String(text));
        if let (Some(tr), Some(Value::Object(meta))) = (result, event.get_mut("tool_call_metadata"))
        {
            set_string(meta, "tool_call_id", &tr.tool_use_id);
        }
    } else if let Some(tu) = tool_uses.first() {
        event.insert("args".into(), raw_value(&tu.input, &at)?);
        if let Some(Value::Object(meta)) = event.get_mut("tool_call_metadata") {
            set_string(meta, "tool_call_id", &tu.id);
            set_string(meta, "function_name", &tu.name);
        }
    } else {
        let text = msg.content.text();
        if take_hint(&mut raw_map(&msg.extra, &at)?, HINT_MESSAGE_IS_TEXT).is_some() {
            event.insert("message".into(), Value::String(text.clone()));
        }
        match event.get_mut("args") {
            Some(Value::Object(args)) => {
                args.insert("content".into(), Value::String(text));
            }
            _ => {
                return Err(unwritable(
                    "the action has no `args` object to hold its text",
                ))
            }
        }
    }
    Ok(Value::Object(event))
}

/// Sets a string field where the object already has one.
fn set_string(map: &mut Map, key: &str, value: &str) {
    if let Some(Value::String(s)) = map.get_mut(key) {
        value.clone_into(s);
    }
}

fn numeric_id(id: &str) -> Option<u64> {
    id.strip_prefix("oh-")?.parse().ok()
}

/// A plausible event for a message a stage created.
fn new_event(msg: &Message) -> Map {
    let text = msg.content.text();
    let value = match (msg.role, msg.tool_uses().next(), msg.tool_results().next()) {
        (Role::Tool, _, result) => json!({
            "source": "agent",
            "observation": "run",
            "tool_call_metadata": {
                "tool_call_id": result.map(|r| r.tool_use_id.clone()).unwrap_or_default(),
            },
            "content": "",
        }),
        (_, Some(tu), _) => json!({
            "source": "agent",
            "action": tu.name,
            "tool_call_metadata": {"function_name": tu.name, "tool_call_id": tu.id},
            "args": {},
        }),
        (Role::System, _, _) => json!({
            "source": "agent", "message": text, "action": "system", "args": {"content": ""},
        }),
        (role, _, _) => json!({
            "source": if role == Role::User { "user" } else { "agent" },
            "message": text,
            "action": "message",
            "args": {"content": "", "image_urls": null, "wait_for_response": false},
        }),
    };
    let mut event = Map::new();
    if let Some(n) = numeric_id(&msg.id) {
        event.insert("id".into(), Value::Number(n.into()));
    }
    if let Value::Object(fields) = value {
        event.extend(fields);
    }
    event
}

/// Whether a message's envelope (an OpenHands observation event) records a failed command:
/// its `extras.metadata.exit_code` is a non-zero number. The event is parsed only when some
/// `"exit_code"` key in its text holds a non-zero number (OpenHands events are large, and
/// nearly every one says `"exit_code": 0`).
pub fn failed_exit(envelope: &RawJson) -> bool {
    let mut rest = envelope.as_str();
    let mut nonzero = false;
    while let Some(at) = rest.find("\"exit_code\"") {
        rest = &rest[at + "\"exit_code\"".len()..];
        let value = rest
            .trim_start()
            .strip_prefix(':')
            .unwrap_or("")
            .trim_start();
        let end = value
            .find(|c: char| !(c.is_ascii_digit() || matches!(c, '-' | '+' | '.' | 'e' | 'E')))
            .unwrap_or(value.len());
        if value[..end].parse::<f64>().is_ok_and(|x| x != 0.0) {
            nonzero = true;
            break;
        }
    }
    if !nonzero {
        return false;
    }
    let Ok(value) = envelope.to_value() else {
        return false;
    };
    match value.pointer("/extras/metadata/exit_code") {
        Some(Value::Number(n)) => n.as_f64().is_some_and(|x| x != 0.0),
        _ => false,
    }
}
