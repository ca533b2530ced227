//! A Claude Code line read from its text, without a JSON tree of the whole line.
//!
//! Claude Code writes each line compact, as serde_json spells JSON, so the line is its own
//! compact form ([`RawJson::canonical_members`]): its members' spans are found in one pass that
//! builds nothing. What the thread walk needs ([`Facts`]: `type`, `uuid`, `parentUuid`, the
//! flags) is taken from those spans, and only the `message` member is parsed, into the model.
//! The rest of the line, most of all `toolUseResult` (a second copy of a tool's output, about a quarter of a
//! session's bytes), is never parsed: it stays in the envelope, which is the line's own text.
//!
//! A line that is not its own compact form, or in which anything is not as the reader expects
//! (a `type` that is not a string, a message the Anthropic reader refuses, a message on a line
//! of another type), is parsed whole and read as before ([`Line::Tree`]): the light read gives
//! the very messages, facts and errors the tree read gives, or is not taken.

use super::thread::{BlockFacts, Facts, Parent};
use crate::anthropic;
use crate::error::Ctx;
use crate::json::Map;
use condense_model::{Content, ContentShape, Message, RawJson, Role};
use serde_json::Value;
use std::ops::Range;
use std::sync::Arc;

/// A line as the JSONL pass leaves it ([`parse_line`]).
pub(crate) enum Line {
    /// Its own compact form: the spans of its members (key, value), nothing parsed.
    Compact(Vec<(Range<usize>, Range<usize>)>),
    /// Any other line, parsed.
    Tree(Value),
    /// A line an earlier read knew and this one leaves unread ([`super::known`]): what that
    /// read knew of it.
    Unread(Box<super::known::KnownLine>),
}

/// Reads one line for [`crate::lines::parse_with`]: its members' spans when it is its own
/// compact form, else its tree (with serde_json's error for a line that is not JSON).
pub(crate) fn parse_line(text: &str) -> serde_json::Result<Line> {
    match RawJson::canonical_members(text) {
        Some(members) => Ok(Line::Compact(members)),
        None => serde_json::from_str(text).map(Line::Tree),
    }
}

/// A compact line read without its tree: what the message of it is made of.
pub(crate) struct Light {
    uuid: Option<String>,
    timestamp: Option<String>,
    /// The span of the `message` member's value.
    message_span: Option<Range<usize>>,
    /// A chat line's message: its role, content and other keys.
    chat: Option<(Role, Content, Map)>,
}

impl Light {
    /// A chat message's keys besides its role and content (`model`, `usage`, ...).
    pub(crate) fn message_keys(&self) -> Option<&Map> {
        self.chat.as_ref().map(|(_, _, keys)| keys)
    }

    /// The line's message, as [`super::read_line`] makes it of the line's tree: in the context,
    /// the chat message with the line (its `message` a `null` placeholder) as its envelope;
    /// else an event whose envelope is the whole line (with a chat line's content), a piece of
    /// `shared` (the text `text` is a piece of) when there is one.
    pub(crate) fn into_message(
        self,
        (text, shared): (&str, Option<&Arc<String>>),
        index: usize,
        in_context: bool,
    ) -> Message {
        let id = self
            .uuid
            .unwrap_or_else(|| condense_model::synthetic_id(index));
        match (self.chat, self.message_span) {
            (Some((role, content, extra)), Some(span)) if in_context => Message {
                id,
                role,
                timestamp: self.timestamp,
                content,
                extra: RawJson::from_map(extra),
                envelope: RawJson::from_string_unchecked(hollowed(text, span)),
            },
            (chat, _) => Message {
                id,
                role: Role::Event,
                timestamp: self.timestamp,
                content: chat.map_or(Content::empty(ContentShape::Absent), |(_, content, _)| {
                    content
                }),
                extra: RawJson::default(),
                envelope: match shared {
                    Some(shared) => RawJson::shared_slice(shared, text),
                    None => RawJson::from_string_unchecked(text.to_string()),
                },
            },
        }
    }
}

/// What a compact line is made of: its facts and the light read. `None`: read the line's tree
/// instead (module docs). `ctx`: the line's.
pub(crate) fn read_compact(
    members: &[(Range<usize>, Range<usize>)],
    text: &str,
    ctx: &Ctx<'_>,
) -> Option<(Facts, Light)> {
    let found = LineKeys::of(members, text);
    let value = |span: &Option<Range<usize>>| span.clone().map(|v| &text[v]);
    let kind = string(value(&found.kind)?)?;
    let message_span = found.message;
    if message_span.is_some() && !matches!(kind.as_str(), "user" | "assistant") {
        return None; // a message on a line of another type: rare, read whole
    }
    let preserved = match value(&found.compact_metadata) {
        Some(meta) => {
            let meta: Value = serde_json::from_str(meta).ok()?;
            let segment = meta.get("preservedSegment");
            let field = |k: &str| segment.and_then(|s| s.get(k)).and_then(Value::as_str);
            field("headUuid")
                .zip(field("anchorUuid"))
                .map(|(h, a)| (h.to_string(), a.to_string()))
        }
        None => None,
    };
    let mut facts = Facts {
        uuid: value(&found.uuid).and_then(string),
        parent: match value(&found.parent_uuid) {
            Some("null") => Parent::Root,
            Some(v) => string(v).map_or(Parent::Unsaid, Parent::Named),
            None => Parent::Unsaid,
        },
        sidechain: value(&found.sidechain) == Some("true"),
        subtype: value(&found.subtype).and_then(string),
        compact_summary: value(&found.compact_summary) == Some("true"),
        preserved,
        kind: Some(kind),
        ..Facts::default()
    };
    let mut light = Light {
        uuid: facts.uuid.clone(),
        timestamp: value(&found.timestamp).and_then(string),
        message_span: None,
        chat: None,
    };
    if let Some(span) = message_span.filter(|s| text[s.clone()].starts_with('{')) {
        let read = read_message(&text[span.clone()], ctx)?;
        light.message_span = Some(span);
        facts.chat_role = read.chat.is_some();
        facts.message_id = read.id;
        facts.blocks = read.blocks;
        light.chat = read.chat;
    }
    Some((facts, light))
}

/// The members of a compact line that [`read_compact`] reads: the span of each one's value,
/// found in one pass over the line's members (looking each key up among them was 2% of a long
/// session's read). A canonical line has each key once.
#[derive(Default)]
struct LineKeys {
    kind: Option<Range<usize>>,
    message: Option<Range<usize>>,
    compact_metadata: Option<Range<usize>>,
    uuid: Option<Range<usize>>,
    parent_uuid: Option<Range<usize>>,
    sidechain: Option<Range<usize>>,
    subtype: Option<Range<usize>>,
    compact_summary: Option<Range<usize>>,
    timestamp: Option<Range<usize>>,
}

impl LineKeys {
    fn of(members: &[(Range<usize>, Range<usize>)], text: &str) -> LineKeys {
        let mut found = LineKeys::default();
        for (key, value) in members {
            let slot = match key_name(text, key) {
                Some("type") => &mut found.kind,
                Some("message") => &mut found.message,
                Some("compactMetadata") => &mut found.compact_metadata,
                Some("uuid") => &mut found.uuid,
                Some("parentUuid") => &mut found.parent_uuid,
                Some("isSidechain") => &mut found.sidechain,
                Some("subtype") => &mut found.subtype,
                Some("isCompactSummary") => &mut found.compact_summary,
                Some("timestamp") => &mut found.timestamp,
                _ => continue,
            };
            slot.get_or_insert_with(|| value.clone());
        }
        found
    }
}

/// The span of the value of member `key` among a compact line's `members` ([`key_name`]).
pub(crate) fn member(
    members: &[(Range<usize>, Range<usize>)],
    text: &str,
    key: &str,
) -> Option<Range<usize>> {
    members
        .iter()
        .find(|(k, _)| key_name(text, k) == Some(key))
        .map(|(_, v)| v.clone())
}

/// The text between the quotes of a canonical key at `span`: a canonical key has no escapes
/// where a wanted one has none, so comparing it compares the keys.
fn key_name<'t>(text: &'t str, span: &Range<usize>) -> Option<&'t str> {
    text.get(span.start + 1..span.end - 1)
}

/// `text` with the value at `span` written `null`: a chat line's envelope, its message's place
/// kept.
pub(crate) fn hollowed(text: &str, span: Range<usize>) -> String {
    let mut out = String::with_capacity(text.len() - span.len() + 4);
    out.push_str(&text[..span.start]);
    out.push_str("null");
    out.push_str(&text[span.end..]);
    out
}

/// A message object read from its text ([`read_message`]).
#[derive(Debug)]
pub(crate) struct ReadMessage {
    /// A chat message's role (`user` or `assistant`), content and other keys.
    chat: Option<(Role, Content, Map)>,
    /// Its `id`, when a string.
    id: Option<String>,
    /// Its content's blocks as the text has them, when the content is an array.
    blocks: Option<Vec<BlockFacts>>,
}

/// A message object's text, read as the Anthropic reader reads a chat line's message (only
/// when its role is `user` or `assistant`; the id and blocks either way). `None`: the reader
/// refuses it, so the line is read whole and the error given there. `message` is its own
/// compact form (a member of a line [`RawJson::canonical_members`] accepted).
///
/// A chat message is read straight from its text ([`crate::anthropic::direct`]) unless that declines it;
/// not by [`crate::quick`], which takes only `{"role", "content"}` objects with blocks in the
/// API's key order: Claude Code writes tool results `tool_use_id` first, so nearly every message
/// was read twice (a session's appended turn 51.7 M instructions with it, 48.4 M without).
pub(crate) fn read_message(message: &str, ctx: &Ctx<'_>) -> Option<ReadMessage> {
    if let Some(direct) = crate::anthropic::direct::read_canonical(message) {
        return Some(ReadMessage {
            id: string_id(&direct.rest),
            chat: Some((direct.role, direct.content, direct.rest)),
            blocks: direct.blocks,
        });
    }
    read_message_map(message, ctx)
}

/// [`read_message`] the map way: the object parsed into a map, the Anthropic reader taking
/// the role, the content and its blocks out of it.
pub(crate) fn read_message_map(message: &str, ctx: &Ctx<'_>) -> Option<ReadMessage> {
    let mut map: Map = serde_json::from_str(message).ok()?;
    let id = string_id(&map);
    let blocks = map
        .get("content")
        .and_then(Value::as_array)
        .map(|blocks| blocks.iter().map(BlockFacts::of_value).collect());
    let chat = map
        .get("role")
        .and_then(Value::as_str)
        .is_some_and(|r| matches!(r, "user" | "assistant"));
    let chat = if chat {
        let (role, content) = anthropic::read_role_and_content(&mut map, ctx, "/message").ok()?;
        Some((role, content, map))
    } else {
        None
    };
    Some(ReadMessage { chat, id, blocks })
}

/// A message object's `id`, when it is a string (kept among the keys the reader does not map).
fn string_id(message: &Map) -> Option<String> {
    message
        .get("id")
        .and_then(Value::as_str)
        .map(str::to_string)
}

/// A canonical JSON value's string, when it is one.
fn string(value: &str) -> Option<String> {
    let inner = value.strip_prefix('"')?.strip_suffix('"')?;
    if inner.contains('\\') {
        serde_json::from_str(value).ok()
    } else {
        Some(inner.to_string())
    }
}
