//! Claude Code session JSONL: one JSON object per line.
//!
//! Lines of `type` `user` or `assistant` that carry a `message` object become messages: the id is
//! the line's `uuid`, the timestamp its `timestamp`, the content comes from `message.content`
//! (Anthropic blocks), the message's other keys go to `extra`, and the line itself, with `message`
//! left as a `null` placeholder that keeps its position, is the `envelope`. Every other line is a
//! [`Role::Event`] whose envelope is the whole line.

use crate::anthropic;
use crate::body::{conversation_name, write_event};
use crate::error::Ctx;
use crate::json::{hollow, into_object, raw_map, str_at, Map, Result, Style};
use crate::FormatError;
use condense_model::{Content, ContentShape, Conversation, Message, RawJson, Role};
use serde_json::Value;

/// How many leading lines detection looks at.
const SNIFF_LINES: usize = 5;

/// Whether parsed JSONL lines look like a Claude Code session: the first lines are objects with a
/// string `type`, and some line carries a `message` or a `sessionId` (a session may start with
/// several `summary` lines that have neither).
pub(crate) fn looks_like(lines: &[(usize, Value)]) -> bool {
    let head = &lines[..lines.len().min(SNIFF_LINES)];
    !head.is_empty()
        && head.iter().all(|(_, v)| str_at(v, "type").is_some())
        && lines
            .iter()
            .any(|(_, v)| v.get("message").is_some() || v.get("sessionId").is_some())
}

/// Whether one JSON value is a single Claude Code line (a one-line session file).
pub(crate) fn is_line(value: &Value) -> bool {
    str_at(value, "type").is_some()
        && (value.get("message").is_some_and(Value::is_object) || value.get("sessionId").is_some())
}

/// Reads the parsed lines (1-based line number, value) of a session into one conversation.
pub(crate) fn read(lines: Vec<(usize, Value)>, ctx: &Ctx<'_>) -> Result<Conversation> {
    let mut messages = Vec::with_capacity(lines.len());
    for (index, (line, value)) in lines.into_iter().enumerate() {
        messages.push(read_line(value, index, &ctx.at_line(line))?);
    }
    Ok(Conversation {
        messages,
        ..Conversation::default()
    })
}

fn read_line(value: Value, index: usize, ctx: &Ctx<'_>) -> Result<Message> {
    let mut line = into_object(value, ctx, "", "a Claude Code line (a JSON object)")?;
    let kind = match line.get("type") {
        Some(Value::String(s)) => s.clone(),
        Some(other) => return Err(ctx.unexpected("/type", "a string line type", other)),
        None => return Err(ctx.missing("", "a Claude Code line with a string `type`")),
    };
    let id = match line.get("uuid") {
        Some(Value::String(uuid)) => uuid.clone(),
        _ => format!("#{index}"),
    };
    let timestamp = line
        .get("timestamp")
        .and_then(Value::as_str)
        .map(str::to_string);
    let chat = matches!(kind.as_str(), "user" | "assistant")
        && line
            .get("message")
            .and_then(|m| str_at(m, "role"))
            .is_some_and(|role| matches!(role, "user" | "assistant"));
    if !chat {
        return Ok(Message {
            id,
            role: Role::Event,
            timestamp,
            content: Content {
                shape: ContentShape::Absent,
                blocks: Vec::new(),
            },
            extra: RawJson::default(),
            envelope: RawJson::from_map(line),
        });
    }
    // The placeholder keeps the key's position in the line.
    let message = hollow(&mut line, "message");
    let mut message = into_object(message, ctx, "/message", "a message object")?;
    let (role, content) = anthropic::read_role_and_content(&mut message, ctx, "/message")?;
    Ok(Message {
        id,
        role,
        timestamp,
        content,
        extra: RawJson::from_map(message),
        envelope: RawJson::from_map(line),
    })
}

/// Writes the session back, one compact line per message.
pub(crate) fn write(conv: &Conversation, style: &Style) -> Result<Vec<u8>> {
    if conv.system.is_some() || !conv.tools.is_empty() || !conv.extra.is_empty() {
        return Err(FormatError::Write {
            at: conversation_name(""),
            reason: "a Claude Code session cannot hold a system prompt, tools or top-level fields"
                .into(),
        });
    }
    let mut out = Vec::new();
    for (i, msg) in conv.messages.iter().enumerate() {
        if i > 0 {
            out.push(b'\n');
        }
        style.write(&write_line(msg)?, &mut out)?;
    }
    if style.trailing_newline && !conv.messages.is_empty() {
        out.push(b'\n');
    }
    Ok(out)
}

fn write_line(msg: &Message) -> Result<Value> {
    if msg.role == Role::Event {
        return write_event(msg);
    }
    let message = Value::Object(anthropic::write_message_object(msg)?);
    if msg.envelope.is_empty() {
        // A message a stage created: a plausible minimal line.
        let mut line = Map::new();
        let kind = if msg.role == Role::Assistant {
            "assistant"
        } else {
            "user"
        };
        line.insert("type".into(), Value::String(kind.into()));
        line.insert("uuid".into(), Value::String(msg.id.clone()));
        if let Some(ts) = &msg.timestamp {
            line.insert("timestamp".into(), Value::String(ts.clone()));
        }
        line.insert("message".into(), message);
        return Ok(Value::Object(line));
    }
    let mut line = raw_map(&msg.envelope, &|| format!("message {}", msg.id))?;
    put_id_and_timestamp(&mut line, "uuid", msg);
    line.insert("message".into(), message);
    Ok(Value::Object(line))
}

/// Puts the message id back where the line had a string id (in place: the key keeps its
/// position), and the timestamp with [`put_timestamp`].
fn put_id_and_timestamp(line: &mut Map, id_key: &str, msg: &Message) {
    if let Some(Value::String(id)) = line.get_mut(id_key) {
        id.clone_from(&msg.id);
    }
    put_timestamp(line, msg);
}

/// Puts the message timestamp back into a line or event, in place. A line that had no string
/// timestamp keeps what it had unless a stage set one; a timestamp a stage removed is removed.
pub(crate) fn put_timestamp(line: &mut Map, msg: &Message) {
    match (line.get("timestamp"), &msg.timestamp) {
        (Some(Value::String(_)) | None, Some(ts)) => {
            line.insert("timestamp".into(), Value::String(ts.clone()));
        }
        (Some(Value::String(_)), None) => {
            line.shift_remove("timestamp");
        }
        _ => {}
    }
}
