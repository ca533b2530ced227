//! Claude Code session JSONL: one JSON object per line.
//!
//! Lines of `type` `user` or `assistant` that carry a `message` object are chat lines. Those of
//! the context Claude Code would send (`thread`: the main thread from the last message back
//! through `parentUuid`, since the last compaction) become messages: the id is the line's `uuid`,
//! the timestamp its `timestamp`, the content comes from `message.content` (Anthropic blocks), the
//! message's other keys go to `extra`, and the line itself, with `message` left as a `null`
//! placeholder that keeps its position, is the `envelope`.
//!
//! Every other line is a [`Role::Event`] whose envelope is the whole line, written back as it
//! was. The chat lines that are not context (a sub-agent's `isSidechain` lines, an abandoned
//! branch, what a compaction replaced) keep their parsed `message.content` on the event too, so
//! retention and `stats` can still read their tool calls and results; it counts 0 tokens.
//!
//! The usage the session reported for its last model call (the last main-thread assistant line's
//! `message.usage`) is read as a [`ReportedUsage`].
//!
//! Public: what other crates need to know of Claude Code's lines and requests ([`LineFlags`],
//! [`line_flags`], [`is_sidechain_work`], [`line_template`], [`session_from_user_id`]), so that
//! knowledge stays in this crate:
//!
//! ```
//! use condense_formats::claude_code::is_sidechain_work;
//! use condense_model::{Block, Message, RawJson, Role};
//!
//! let mut line = Message::new("x1", Role::Event, vec![Block::text("a sub-agent's prompt")]);
//! line.envelope = RawJson::from_string_unchecked(r#"{"isSidechain":true}"#.into());
//! assert!(is_sidechain_work(&line));
//! ```

mod fields;
pub(crate) mod known;
pub(crate) mod line;
mod read_back;
pub(crate) mod thread;

pub(crate) use read_back::read_back;

pub(crate) use line::{parse_line, Line};

pub use fields::{is_sidechain_work, line_flags, line_template, session_from_user_id, LineFlags};

use crate::anthropic;
use crate::body::{conversation_name, write_event};
use crate::error::Ctx;
use crate::json::{hollow, into_object, raw_map, str_at, Map, Result};
use crate::source::{Fp, Piece, Texts};
use crate::{FormatError, ReportedUsage};
use condense_model::{Content, ContentShape, Conversation, Message, RawJson, Role};
use serde_json::Value;
use std::sync::Arc;
use thread::Facts;

/// How many leading lines detection looks at.
const SNIFF_LINES: usize = 5;

/// The `model` of the assistant lines Claude Code writes itself (an API error, an interrupted
/// request): their usage is all zeros, not a model call's.
const SYNTHETIC_MODEL: &str = "<synthetic>";

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

/// Whether the first lines of `text` say it is a Claude Code session, as [`looks_like`] would
/// say of all of it, and not a Codex rollout (`crate::codex::looks_like`, which is asked
/// first): the first [`SNIFF_LINES`] non-empty lines parse, their head is not a rollout's, and
/// [`looks_like`] holds of them (so it holds of the whole file). `false` leaves the decision
/// to a read of every line. Lets a session be read with [`parse_line`] from the start.
pub(crate) fn sniff(text: &str) -> bool {
    let mut head = Vec::with_capacity(SNIFF_LINES);
    for (number, _, _, line) in crate::lines::non_empty(text).take(SNIFF_LINES) {
        match serde_json::from_str::<Value>(line) {
            Ok(value) => head.push((number, value)),
            Err(_) => return false,
        }
    }
    // Fewer lines than the head: the file may end in a line cut short, which a read of every
    // line sets aside; that read decides.
    head.len() == SNIFF_LINES && !crate::codex::head_looks_like(&head) && looks_like(&head)
}

/// What a read of a session knew of each line: what the thread walk read of it, and whether it
/// was context. A document keeps it, so that its output reads back without the lines written
/// as they were read being parsed again ([`read_back()`]).
#[derive(Debug, Clone, Default)]
pub(crate) struct ReadLines {
    /// Shared with the list kept for a later read ([`known::LineMemo`]).
    facts: Arc<Vec<Facts>>,
    context: Vec<bool>,
    /// The index of the line whose usage is the session's reported usage, when one is.
    usage_line: Option<usize>,
    /// The 1-based numbers of the first and the last line.
    numbers: (usize, usize),
}

/// Reads the lines (1-based line number, line) of a session into one conversation, with the
/// usage the session reported for its last model call and what the read knew of each line.
/// `texts`: each line's text, as read; `shared`: the whole text they are pieces of, when the
/// caller shares it (an event's envelope, its line as it was, is then a piece of it, not a
/// copy: most of a long session's lines are events).
pub(crate) fn read(
    lines: Vec<(usize, Line)>,
    (texts, shared): (&[&str], Option<&Arc<String>>),
    ctx: &Ctx<'_>,
) -> Result<(Conversation, Option<ReportedUsage>, ReadLines)> {
    // Each line's facts and, for a compact one, its message, on every core for a long session.
    let items: Vec<(usize, Line, &str)> = lines
        .into_iter()
        .enumerate()
        .map(|(index, (line, read))| (line, read, texts.get(index).copied().unwrap_or_default()))
        .collect();
    let prepared = crate::parallel::read_all(items, ctx, |(line, read, text), _, ctx| {
        Ok(prepare(line, read, text, &ctx.at_line(line)))
    })?;
    let (facts, reads): (Vec<Facts>, Vec<Prepared<'_>>) = prepared.into_iter().unzip();
    let context = thread::context_lines(&facts.iter().collect::<Vec<_>>());
    // The last context line that reports a usage: looked at from the end, so that only the
    // last few lines' usage is read (reading every assistant line's was 2% of a long
    // session's read).
    let (usage_line, usage) = reads
        .iter()
        .zip(&context)
        .zip(&facts)
        .enumerate()
        .rev()
        .filter(|(_, ((_, &in_context), _))| in_context)
        .find_map(|(i, ((read, _), facts))| Some((i, read.usage(facts.kind.as_deref())?)))
        .unzip();
    // The last line's number is the largest: an unread line carries the last known line's
    // ([`known`]), and the lines after it their own.
    let numbers = (
        reads.first().map_or(0, |r| r.line),
        reads.iter().map(|r| r.line).max().unwrap_or(0),
    );
    // Each line is read on its own once the thread is known (the first error and the warnings
    // as a read in order gives them).
    let items: Vec<(Prepared<'_>, bool, bool)> = reads
        .into_iter()
        .zip(context.iter().copied())
        .zip(&facts)
        .map(|((read, in_context), facts)| (read, in_context, facts.is_chat()))
        .collect();
    let messages =
        crate::parallel::read_all(items, ctx, |(read, in_context, chat), index, ctx| {
            read.into_message((index, in_context, chat), shared, ctx)
        })?;
    let conversation = Conversation {
        messages,
        ..Conversation::default()
    };
    let lines = ReadLines {
        facts: Arc::new(facts),
        context,
        usage_line,
        numbers,
    };
    Ok((conversation, usage, lines))
}

/// A line between its facts and its message ([`read`]).
struct Prepared<'t> {
    line: usize,
    text: &'t str,
    read: Read,
}

impl Prepared<'_> {
    /// The usage the line reports, when it is an assistant line (`kind`, its facts') that
    /// reports one (see [`usage_in`]).
    fn usage(&self, kind: Option<&str>) -> Option<ReportedUsage> {
        let message = match &self.read {
            Read::Light(light) => light.message_keys(),
            Read::Tree(value) => value.get("message").and_then(Value::as_object),
            Read::Unread { usage, .. } => return usage.clone(),
        }?;
        usage_in(self.line, kind, message)
    }

    /// The line's message, the line being the `index`th of the session, context or not, a chat
    /// line or not (`ctx`: the session's).
    fn into_message(
        self,
        (index, in_context, chat): (usize, bool, bool),
        shared: Option<&Arc<String>>,
        ctx: &Ctx<'_>,
    ) -> Result<Message> {
        match self.read {
            Read::Light(light) => Ok(light.into_message((self.text, shared), index, in_context)),
            Read::Tree(value) => read_line(
                value,
                self.text,
                (index, in_context, chat),
                &ctx.at_line(self.line),
            ),
            Read::Unread { id, .. } => {
                let id = id.unwrap_or_else(|| condense_model::synthetic_id(index));
                Ok(crate::known::placeholder_with_id(index, id))
            }
        }
    }
}

/// How a line's message is made.
enum Read {
    Light(line::Light),
    Tree(Value),
    /// A line left unread ([`known`]): a placeholder with the line's id (its `uuid`), and the
    /// usage it reported when it is the line whose usage the earlier read gave.
    Unread {
        id: Option<String>,
        usage: Option<ReportedUsage>,
    },
}

/// A line's facts, and what its message is made of: a compact line read light when it can be
/// ([`line::read_compact`]), else its tree.
fn prepare<'t>(line: usize, read: Line, text: &'t str, ctx: &Ctx<'_>) -> (Facts, Prepared<'t>) {
    let (facts, read) = match read {
        Line::Compact(members) => match line::read_compact(&members, text, ctx) {
            Some((facts, light)) => (facts, Read::Light(light)),
            // The text parsed once already (it is canonical); were it not to, the read of
            // `null` fails on the line, as a line that is not an object does.
            None => of_tree(serde_json::from_str(text).unwrap_or(Value::Null)),
        },
        Line::Tree(value) => of_tree(value),
        Line::Unread(known) => {
            let known::KnownLine { facts, usage } = *known;
            let id = facts.uuid.clone();
            (facts, Read::Unread { id, usage })
        }
    };
    (facts, Prepared { line, text, read })
}

/// [`prepare`] of a parsed line.
fn of_tree(value: Value) -> (Facts, Read) {
    (Facts::of_value(&value), Read::Tree(value))
}

/// The usage of an assistant line (`kind`) that reports one (not a synthetic line), from its
/// message's keys (`model`, `usage`).
fn usage_in(line: usize, kind: Option<&str>, message: &Map) -> Option<ReportedUsage> {
    if kind != Some("assistant")
        || message.get("model").and_then(Value::as_str) == Some(SYNTHETIC_MODEL)
    {
        return None;
    }
    let usage = message.get("usage").filter(|u| u.is_object())?;
    let tokens = |key: &str| usage.get(key).and_then(Value::as_u64).unwrap_or(0);
    Some(ReportedUsage {
        input_tokens: tokens("input_tokens"),
        cache_read_tokens: tokens("cache_read_input_tokens"),
        cache_write_tokens: tokens("cache_creation_input_tokens"),
        output_tokens: tokens("output_tokens"),
        source: format!("line {line}: the last main-thread assistant message's usage"),
    })
}

/// One line: a message when it is context, an event otherwise (a chat line that is not context
/// keeps its content on the event). `text`: the line as read; when it is already its compact
/// form (as Claude Code writes lines), the envelope is copied from it rather than written back
/// from the parsed line, which was about half of reading a session.
fn read_line(
    value: Value,
    text: &str,
    (index, in_context, chat): (usize, bool, bool),
    ctx: &Ctx<'_>,
) -> Result<Message> {
    let mut line = into_object(value, ctx, "", "a Claude Code line (a JSON object)")?;
    match line.get("type") {
        Some(Value::String(_)) => {}
        Some(other) => return Err(ctx.unexpected("/type", "a string line type", other)),
        None => return Err(ctx.missing("", "a Claude Code line with a string `type`")),
    }
    let id = match line.get("uuid") {
        Some(Value::String(uuid)) => uuid.clone(),
        _ => condense_model::synthetic_id(index),
    };
    let timestamp = line
        .get("timestamp")
        .and_then(Value::as_str)
        .map(str::to_string);
    if !in_context {
        // The line stays whole in the envelope, written back as it was; its message is then
        // taken out of the parsed line, not copied.
        let envelope =
            RawJson::from_canonical_text(text).unwrap_or_else(|| RawJson::from_map_ref(&line));
        let content = if chat {
            let message = line.shift_remove("message").unwrap_or_default();
            let mut message = into_object(message, ctx, "/message", "a message object")?;
            anthropic::read_role_and_content(&mut message, ctx, "/message")?.1
        } else {
            Content::empty(ContentShape::Absent)
        };
        return Ok(Message {
            id,
            role: Role::Event,
            timestamp,
            content,
            extra: RawJson::default(),
            envelope,
        });
    }
    // The placeholder keeps the key's position in the line.
    let message = hollow(&mut line, "message");
    let envelope =
        hollowed_text(text).map_or_else(|| RawJson::from_map(line), RawJson::from_string_unchecked);
    let mut message = into_object(message, ctx, "/message", "a message object")?;
    let (role, content) = anthropic::read_role_and_content(&mut message, ctx, "/message")?;
    Ok(Message {
        id,
        role,
        timestamp,
        content,
        extra: RawJson::from_map(message),
        envelope,
    })
}

/// A line's text with its `message` value replaced by `null`: the compact form of the line
/// [`hollow`] leaves, when the line is its own compact form (`None` otherwise).
fn hollowed_text(text: &str) -> Option<String> {
    let members = RawJson::canonical_members(text)?;
    let message = line::member(&members, text, "message")?;
    Some(line::hollowed(text, message))
}

/// The session's lines, one per message: original text for what is as read (looked up by its
/// fingerprint, `prints`: one per message, made by the caller, which knows most of them
/// already; hashing every message here again was 3% of a long session's turn), values for the
/// rest.
pub(crate) fn write<'s>(
    conv: &Conversation,
    prints: &[Fp],
    texts: &mut Texts<'s>,
) -> Result<Vec<Piece<'s>>> {
    if conv.system.is_some() || !conv.tools.is_empty() || !conv.extra.is_empty() {
        return Err(FormatError::Write {
            at: conversation_name(""),
            reason: "a Claude Code session cannot hold a system prompt, tools or top-level fields"
                .into(),
        });
    }
    let mut lines = Vec::with_capacity(conv.messages.len());
    for (i, msg) in conv.messages.iter().enumerate() {
        let fp = prints
            .get(i)
            .copied()
            .unwrap_or_else(|| crate::source::fingerprint(msg));
        lines.extend(texts.piece_fp(msg, fp, || Ok(vec![write_line(msg)?]))?);
    }
    Ok(lines)
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
