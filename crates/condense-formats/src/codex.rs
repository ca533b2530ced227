//! Codex CLI rollout JSONL (`~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl`): one
//! `{"timestamp", "type", "payload"}` object per line.
//!
//! The conversation is what Codex would send:
//! - `response_item` lines are the context, each one message ([`crate::items`]); the message's
//!   envelope is the line with `payload` left as a `null` placeholder;
//! - the first line, a `session_meta`, is the file's header, kept outside the conversation (no
//!   stage can drop it); its `base_instructions.text` (older rollouts: `instructions`) is the
//!   system prompt, written back into the same place;
//! - other `session_meta`, `turn_context` and `event_msg` lines are events, carried verbatim and
//!   not counted: `event_msg` lines repeat what response items hold (`agent_message`,
//!   `exec_command_end`, ...). A `user_message` event whose text no `response_item` user message
//!   holds (some rollouts keep the user's words only there) is the user message instead, so the
//!   requests are not lost;
//! - a `compacted` line replaces the history before it, as Codex does when it resumes: with a
//!   `replacement_history` that list is the context (each item a message, the line itself an
//!   event holding a placeholder for them), and every line before it is an event; without one,
//!   the line's `message` (the summary) is a user message, and before it only the user and
//!   developer messages stay context (Codex rebuilds its initial context and carries the user's
//!   messages; it trims them to about 20,000 tokens, condense keeps them all);
//! - the last `token_count` event's `info.last_token_usage` is the usage the session reported.
//!
//! Response items that are not context keep their mapped content on their event (0 tokens), so
//! retention still sees what happened before a compaction.

use crate::body::{conversation_name, write_event};
use crate::claude_code::put_timestamp;
use crate::error::Ctx;
use crate::items::{is_invisible, read_item, write_items};
use crate::json::{has_hint, hollow, into_object, raw_map, set_hint, str_at, Map, Result};
use crate::source::{Piece, Texts};
use crate::{FormatError, ReportedUsage};
use condense_model::{Content, ContentShape, Conversation, Message, RawJson, Role};
use serde_json::Value;
use std::collections::HashSet;

/// The line types Codex writes.
const LINE_TYPES: [&str; 5] = [
    "session_meta",
    "response_item",
    "event_msg",
    "turn_context",
    "compacted",
];
/// How many leading lines detection looks at.
const SNIFF_LINES: usize = 5;
/// Hint on a message: an item of the `replacement_history` of the compacted line before it.
const HINT_REPLACEMENT: &str = "replacement";

/// A rollout read: the conversation, its header and the usage the session last reported.
pub(crate) struct Rollout {
    pub conversation: Conversation,
    pub header: Option<Header>,
    pub usage: Option<ReportedUsage>,
    /// By line read: how many messages it became (0 for the header).
    pub counts: Vec<usize>,
}

/// The first line, a `session_meta`, with its instructions (the system prompt) taken out.
#[derive(Debug, Clone)]
pub(crate) struct Header {
    line: Map,
    /// Where the instructions were: `base_instructions` (its `text`) or `instructions`; `None`
    /// when the line had none.
    instructions_at: Option<&'static str>,
}

/// Whether parsed JSONL lines are a rollout: the first lines all have a string `type` and an
/// object `payload` (a later Codex may add line types), and some line is a `session_meta` or a
/// `response_item`.
pub(crate) fn looks_like(lines: &[(usize, Value)]) -> bool {
    head_looks_like(lines)
        && lines.iter().any(|(_, v)| {
            matches!(str_at(v, "type"), Some("session_meta" | "response_item"))
                && v.get("payload").is_some_and(Value::is_object)
        })
}

/// The part of [`looks_like`] its first lines decide: each of the first [`SNIFF_LINES`] is an
/// object with a string `type` and an object `payload`.
pub(crate) fn head_looks_like(lines: &[(usize, Value)]) -> bool {
    let head = &lines[..lines.len().min(SNIFF_LINES)];
    !head.is_empty()
        && head.iter().all(|(_, v)| {
            str_at(v, "type").is_some() && v.get("payload").is_some_and(Value::is_object)
        })
}

/// Whether one JSON value is a rollout line that holds a session or context (a one-line file).
pub(crate) fn is_line(value: &Value) -> bool {
    is_rollout_line(value)
        && matches!(
            str_at(value, "type"),
            Some("session_meta" | "response_item" | "compacted")
        )
}

fn is_rollout_line(value: &Value) -> bool {
    str_at(value, "type").is_some_and(|t| LINE_TYPES.contains(&t))
        && value.get("payload").is_some_and(Value::is_object)
}

/// Where a line stands relative to the last `compacted` line.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Place {
    Before,
    Cut,
    After,
}

/// What the whole file says that each line's reading needs.
struct Plan {
    cut: Option<usize>,
    /// The last compacted line has a `replacement_history`: nothing before it is context.
    replaced: bool,
    /// The texts of the `response_item` user messages (a `user_message` event repeating one is
    /// an event).
    said: HashSet<String>,
}

/// Reads the parsed lines (1-based line number, value) of a rollout.
pub(crate) fn read(lines: Vec<(usize, Value)>, ctx: &Ctx<'_>) -> Result<Rollout> {
    let plan = plan(&lines);
    let usage = last_usage(&lines);
    let mut conv = Conversation::default();
    let mut header = None;
    let mut counts = Vec::with_capacity(lines.len());
    for (index, (line, value)) in lines.into_iter().enumerate() {
        let before = conv.messages.len();
        if index == 0 && str_at(&value, "type") == Some("session_meta") {
            counts.push(0);
            let mut line = into_object(value, &ctx.at_line(line), "", "a JSON object")?;
            let instructions = take_instructions(&mut line);
            let instructions_at = instructions.map(|(at, text)| {
                conv.system = Some(Content::string(text));
                at
            });
            header = Some(Header {
                line,
                instructions_at,
            });
            continue;
        }
        let place = match plan.cut {
            Some(cut) if index < cut => Place::Before,
            Some(cut) if index == cut => Place::Cut,
            _ => Place::After,
        };
        read_line(value, index, place, &plan, &mut conv, &ctx.at_line(line))?;
        counts.push(conv.messages.len() - before);
    }
    Ok(Rollout {
        conversation: conv,
        header,
        usage,
        counts,
    })
}

fn plan(lines: &[(usize, Value)]) -> Plan {
    let cut = lines.iter().rposition(|(_, v)| {
        str_at(v, "type") == Some("compacted") && v.get("payload").is_some_and(Value::is_object)
    });
    let replaced = cut.is_some_and(|i| {
        lines[i]
            .1
            .pointer("/payload/replacement_history")
            .is_some_and(Value::is_array)
    });
    let mut said = HashSet::new();
    for (_, v) in lines {
        let Some(payload) = v.get("payload") else {
            continue;
        };
        if str_at(v, "type") != Some("response_item") || str_at(payload, "role") != Some("user") {
            continue;
        }
        let texts = payload.get("content").and_then(Value::as_array);
        for text in texts
            .into_iter()
            .flatten()
            .filter_map(|p| str_at(p, "text"))
        {
            said.insert(text.to_string());
        }
    }
    Plan {
        cut,
        replaced,
        said,
    }
}

/// The last `token_count` event's `info.last_token_usage`.
fn last_usage(lines: &[(usize, Value)]) -> Option<ReportedUsage> {
    lines.iter().rev().find_map(|(line, v)| {
        if str_at(v, "type") != Some("event_msg") {
            return None;
        }
        let payload = v.get("payload")?;
        if str_at(payload, "type") != Some("token_count") {
            return None;
        }
        let usage = payload.pointer("/info/last_token_usage")?.as_object()?;
        let tokens = |key: &str| usage.get(key).and_then(Value::as_u64).unwrap_or(0);
        let cached = tokens("cached_input_tokens");
        Some(ReportedUsage {
            input_tokens: tokens("input_tokens").saturating_sub(cached),
            cache_read_tokens: cached,
            cache_write_tokens: 0,
            output_tokens: tokens("output_tokens"),
            source: format!(
                "line {line}: the last token_count event's info.last_token_usage (input = \
                 input_tokens - cached_input_tokens, cache reads = cached_input_tokens, output = \
                 output_tokens, which includes reasoning)"
            ),
        })
    })
}

fn read_line(
    value: Value,
    index: usize,
    place: Place,
    plan: &Plan,
    conv: &mut Conversation,
    ctx: &Ctx<'_>,
) -> Result<()> {
    let mut line = into_object(value, ctx, "", "a Codex rollout line (a JSON object)")?;
    let kind = match line.get("type") {
        Some(Value::String(s)) => s.clone(),
        Some(other) => return Err(ctx.unexpected("/type", "a string line type", other)),
        None => return Err(ctx.missing("", "a Codex rollout line with a string `type`")),
    };
    let id = condense_model::synthetic_id(index);
    let timestamp = line
        .get("timestamp")
        .and_then(Value::as_str)
        .map(str::to_string);
    let message = match kind.as_str() {
        "response_item" => {
            let Some(payload) = line.get("payload").filter(|p| p.is_object()) else {
                let found = line.get("payload").cloned().unwrap_or_default();
                return Err(ctx.unexpected("/payload", "a response item object", &found));
            };
            let context = match place {
                Place::Before => !plan.replaced && is_instruction_or_request(payload),
                _ => true,
            };
            if !context || is_invisible(payload) {
                // Not context: the content is kept for retention (a copy: the line is written
                // whole).
                let copy = payload.clone();
                let content = read_item(copy, id.clone(), &ctx.quiet(), "/payload")?.content;
                event(id, timestamp, line, content)
            } else {
                let payload = hollow(&mut line, "payload");
                let mut msg = read_item(payload, id, ctx, "/payload")?;
                msg.timestamp = timestamp;
                msg.envelope = RawJson::from_map(line);
                msg
            }
        }
        "event_msg" => {
            let context = place != Place::Before || !plan.replaced;
            let request = line
                .get("payload")
                .is_some_and(|p| is_unrepeated_request(p, plan));
            if context && request {
                user_message(id, timestamp, line)
            } else {
                event(id, timestamp, line, Content::default())
            }
        }
        "compacted" if place == Place::Cut => {
            return read_compacted(line, index, id, timestamp, plan, conv, ctx)
        }
        "compacted" | "turn_context" | "session_meta" => {
            event(id, timestamp, line, Content::default())
        }
        other => {
            ctx.note_uncounted(format!("line type `{other}`"));
            event(id, timestamp, line, Content::default())
        }
    };
    conv.messages.push(message);
    Ok(())
}

/// Whether an event is a `user_message` whose text no response item holds.
fn is_unrepeated_request(payload: &Value, plan: &Plan) -> bool {
    str_at(payload, "type") == Some("user_message")
        && str_at(payload, "message").is_some_and(|text| !plan.said.contains(text))
}

/// A user message whose text is the `payload.message` of its line (a `user_message` event, a
/// compaction's summary), left as a placeholder in the envelope.
fn user_message(id: String, timestamp: Option<String>, mut line: Map) -> Message {
    let text = match line.get_mut("payload") {
        Some(Value::Object(payload)) => hollow(payload, "message"),
        _ => Value::Null,
    };
    let mut msg = Message::new(id, Role::User, Vec::new());
    msg.content = Content::string(text.as_str().unwrap_or_default());
    msg.timestamp = timestamp;
    msg.envelope = RawJson::from_map(line);
    msg
}

/// What Codex carries past a compaction without a replacement history: developer, system and
/// user messages (its rebuilt initial context and the user's own messages).
fn is_instruction_or_request(item: &Value) -> bool {
    let message = matches!(str_at(item, "type"), Some("message") | None);
    message && matches!(str_at(item, "role"), Some("user" | "developer" | "system"))
}

/// The last `compacted` line: the start of the context.
fn read_compacted(
    mut line: Map,
    index: usize,
    id: String,
    timestamp: Option<String>,
    plan: &Plan,
    conv: &mut Conversation,
    ctx: &Ctx<'_>,
) -> Result<()> {
    if plan.replaced {
        let history = match line.get_mut("payload") {
            Some(Value::Object(payload)) => hollow(payload, "replacement_history"),
            _ => Value::Null,
        };
        conv.messages
            .push(event(id, timestamp, line, Content::default()));
        let Value::Array(items) = history else {
            return Ok(());
        };
        for (k, item) in items.into_iter().enumerate() {
            let ptr = format!("/payload/replacement_history/{k}");
            let mut msg = read_item(item, format!("#{index}.{k}"), ctx, &ptr)?;
            let mut extra = msg.extra.to_map().unwrap_or_default();
            set_hint(&mut extra, HINT_REPLACEMENT, Value::Bool(true));
            msg.extra = RawJson::from_map(extra);
            conv.messages.push(msg);
        }
        return Ok(());
    }
    let message = if line
        .get("payload")
        .and_then(|p| str_at(p, "message"))
        .is_some()
    {
        user_message(id, timestamp, line)
    } else {
        event(id, timestamp, line, Content::default())
    };
    conv.messages.push(message);
    Ok(())
}

/// Takes the session's instructions out of a session_meta line, leaving a `null` placeholder.
fn take_instructions(line: &mut Map) -> Option<(&'static str, String)> {
    let Some(Value::Object(payload)) = line.get_mut("payload") else {
        return None;
    };
    if let Some(Value::Object(base)) = payload.get_mut("base_instructions") {
        if base.get("text").is_some_and(Value::is_string) {
            let text = hollow(base, "text");
            return Some((
                "base_instructions",
                text.as_str().unwrap_or_default().to_string(),
            ));
        }
    }
    if payload.get("instructions").is_some_and(Value::is_string) {
        let text = hollow(payload, "instructions");
        return Some((
            "instructions",
            text.as_str().unwrap_or_default().to_string(),
        ));
    }
    None
}

/// A line kept whole.
fn event(id: String, timestamp: Option<String>, line: Map, content: Content) -> Message {
    let content = if content.blocks.is_empty() {
        Content::empty(ContentShape::Absent)
    } else {
        content
    };
    Message {
        id,
        role: Role::Event,
        timestamp,
        content,
        extra: RawJson::default(),
        envelope: RawJson::from_map(line),
    }
}

/// The rollout's lines, one per line read (a message a stage built may take several
/// `response_item` lines): original text for what is as read, values for the rest.
/// `header_text` is the header line's text when it is as read.
pub(crate) fn write<'s>(
    conv: &Conversation,
    header: Option<&Header>,
    header_text: Option<&'s str>,
    texts: &mut Texts<'s>,
) -> Result<Vec<Piece<'s>>> {
    if !conv.tools.is_empty() || !conv.extra.is_empty() {
        return Err(FormatError::Write {
            at: conversation_name(""),
            reason: "a Codex rollout cannot hold tool definitions or top-level fields".into(),
        });
    }
    let mut lines = Vec::with_capacity(conv.messages.len() + 1);
    match header_text {
        Some(text) => lines.push(Piece::Text(text)),
        None => lines.extend(header_line(header, conv.system.as_ref()).map(Piece::Value)),
    }
    let all = conv.messages.as_slice();
    let mut i = 0;
    while let Some(msg) = all.get(i) {
        let at = || format!("message {}", msg.id);
        // A compacted line and its replacement history are one line.
        let event = msg.role == Role::Event && !is_replacement(msg);
        let group = if event {
            1 + all[i + 1..]
                .iter()
                .take_while(|m| is_replacement(m))
                .count()
        } else {
            1
        };
        let text = match group {
            1 => texts.take(msg),
            n => texts.take_all(&all[i..i + n]),
        };
        if let Some(text) = text {
            lines.push(Piece::Text(text));
            i += group;
            continue;
        }
        i += 1;
        if event {
            let Value::Object(mut line) = write_event(msg)? else {
                return Err(FormatError::Write {
                    at: at(),
                    reason: "a rollout line must be a JSON object".into(),
                });
            };
            if compacted_with_placeholder(&line) {
                let mut items = Vec::new();
                while let Some(item) = all.get(i).filter(|m| is_replacement(m)) {
                    items.extend(write_items(item)?);
                    i += 1;
                }
                if let Some(Value::Object(payload)) = line.get_mut("payload") {
                    payload.insert("replacement_history".into(), Value::Array(items));
                }
            }
            lines.push(Piece::Value(Value::Object(line)));
            continue;
        }
        let mut values = Vec::new();
        write_chat(msg, &mut values, &at)?;
        lines.extend(values.into_iter().flatten().map(Piece::Value));
    }
    Ok(lines)
}

/// The header line with the system prompt put back; a minimal `session_meta` line for a system
/// prompt a stage gave a rollout that had none; nothing otherwise.
fn header_line(header: Option<&Header>, system: Option<&Content>) -> Option<Value> {
    let text = system.map(|s| Value::String(s.text()));
    let Some(header) = header else {
        return text.map(|text| {
            let payload = serde_json::json!({"base_instructions": {"text": text}});
            serde_json::json!({"type": "session_meta", "payload": payload})
        });
    };
    let mut line = header.line.clone();
    if let (Some(at), Some(Value::Object(payload))) =
        (header.instructions_at, line.get_mut("payload"))
    {
        // A system prompt a stage removed is written as `null`, which reads back as none.
        let text = text.unwrap_or(Value::Null);
        match (at, payload.get_mut("base_instructions")) {
            ("base_instructions", Some(Value::Object(base))) => {
                base.insert("text".into(), text);
            }
            _ => {
                payload.insert("instructions".into(), text);
            }
        }
    }
    Some(Value::Object(line))
}

fn is_replacement(msg: &Message) -> bool {
    has_hint(&msg.extra, HINT_REPLACEMENT)
}

fn compacted_with_placeholder(line: &Map) -> bool {
    line.get("type").and_then(Value::as_str) == Some("compacted")
        && line
            .get("payload")
            .and_then(|p| p.get("replacement_history"))
            .is_some_and(Value::is_null)
}

/// Writes a chat message into the line it was read from, or as new `response_item` lines (a
/// message a stage built, or an item of a replacement history whose compacted line a stage
/// dropped: it is context either way).
fn write_chat(
    msg: &Message,
    lines: &mut Vec<Option<Value>>,
    at: &dyn Fn() -> String,
) -> Result<()> {
    if msg.envelope.is_empty() || is_replacement(msg) {
        for item in write_items(msg)? {
            let mut line = Map::new();
            if let Some(ts) = &msg.timestamp {
                line.insert("timestamp".into(), Value::String(ts.clone()));
            }
            line.insert("type".into(), Value::String("response_item".into()));
            line.insert("payload".into(), item);
            lines.push(Some(Value::Object(line)));
        }
        return Ok(());
    }
    let mut line = raw_map(&msg.envelope, at)?;
    put_timestamp(&mut line, msg);
    match line.get("type").and_then(Value::as_str) {
        Some("response_item") => {
            for item in write_items(msg)? {
                let mut next = line.clone();
                next.insert("payload".into(), item);
                lines.push(Some(Value::Object(next)));
            }
        }
        Some("event_msg" | "compacted") => {
            if let Some(Value::Object(payload)) = line.get_mut("payload") {
                payload.insert("message".into(), Value::String(msg.content.text()));
            }
            lines.push(Some(Value::Object(line)));
        }
        _ => {
            return Err(FormatError::Write {
                at: at(),
                reason: "its rollout line is neither a response item, an event nor a compaction"
                    .into(),
            })
        }
    }
    Ok(())
}
