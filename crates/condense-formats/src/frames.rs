//! Known frames: a request body's system prompt and tool definitions, read once per text.
//!
//! An agent sends the same frame with every turn: Claude Code and the SDKs' agents send a
//! system prompt of 10-30 KB and tool definitions of 20-70 KB, turn after turn, while only the
//! message list grows. Reading them parsed that JSON into a tree, turned it into the model
//! (each tool definition compacted into its verbatim [`condense_model::RawJson`]) and dropped
//! the tree again: 1.5 M instructions of a proxied turn's 7.9 M with a 30 KB system prompt and
//! 20 tools. A [`FrameMemo`] keeps what the reader made of such a member under the hash of its
//! bytes; a read given the memo ([`crate::read_shared_knowing`]) takes the member from it when
//! its bytes hash the same, and parses only what it has not seen.
//!
//! The memo is the caller's (`condense serve` keeps one for all its sessions: many sessions
//! send the same frame). Only a body at the root whose message list is read for its format's
//! reader without a JSON tree takes members from it (`crate::parallel`): an Anthropic body
//! read quick, an OpenAI Chat body whose history a known list covers (its tools only: its
//! system prompt is a message), or a Responses body whose history a known list covers (its
//! `instructions` and tools); anything else reads the text whole, as before.
//! A member is the same bytes as one read before, so it reads as the same value: the write
//! still finds the frame unchanged and copies its bytes as read.
//!
//! ```
//! use condense_formats::frames::FrameMemo;
//!
//! let memo = FrameMemo::default();
//! assert_eq!(memo.len(), 0);
//! ```

use crate::error::Ctx;
use crate::Format;
use condense_model::recent::Recent;
use condense_model::{Content, ContentShape, Conversation, ToolDef};
use serde_json::Value;
use std::ops::Range;
use std::sync::atomic::{AtomicUsize, Ordering};
use twox_hash::XxHash3_128;

/// Members shorter than this are parsed: their hash and lookup would cost about as much.
const MEMO_FROM: usize = 1024;

/// How many members a memo keeps, the least recently used going first: a proxy's sessions
/// mostly share a few frames, each a system prompt and a tool list.
const CAPACITY: usize = 32;

/// What a read made of one member of a body's frame.
#[derive(Debug, Clone)]
pub(crate) enum Member {
    /// `system`, as the Anthropic reader reads it.
    System(Content),
    /// A Responses body's `instructions` (a string: the reader takes no other).
    Instructions(String),
    /// `tools` (an array), each definition as the reader reads it.
    Tools(Vec<ToolDef>),
}

impl Member {
    /// The member's key in the body.
    pub(crate) fn key(&self) -> &'static str {
        match self {
            Member::System(_) => "system",
            Member::Instructions(_) => "instructions",
            Member::Tools(_) => "tools",
        }
    }

    /// What the parsed body holds in the member's place: a value of the same JSON type with
    /// nothing in it (the reader takes the member itself, [`crate::body::read_body`]).
    pub(crate) fn stub(&self) -> Value {
        match self {
            Member::System(content) if content.shape == ContentShape::String => {
                Value::String(String::new())
            }
            Member::Instructions(_) => Value::String(String::new()),
            Member::System(_) | Member::Tools(_) => Value::Array(Vec::new()),
        }
    }
}

/// Puts the members of `frame` (taken from a memo) into `conv`, each as its reader reads it,
/// and takes their stubs out of the body's `map`.
pub(crate) fn take_into(frame: Vec<Member>, map: &mut crate::json::Map, conv: &mut Conversation) {
    for member in frame {
        crate::json::take(map, member.key());
        match member {
            Member::System(content) => conv.system = Some(content),
            Member::Instructions(text) => conv.system = Some(Content::string(text)),
            Member::Tools(tools) => conv.tools = tools,
        }
    }
}

/// Whether the root member `key`, whose value is at `span`, may come from a memo: a system
/// prompt or tool list long enough to gain, in a body whose list is read quick (Anthropic) or
/// for `elements`' reader ([`crate::parallel::Lookup::elements`]). An OpenAI Chat body has no
/// system member of its own (its system prompt is the list's first message): only its tools.
/// A Responses body's system prompt is its `instructions`.
pub(crate) fn is_member(key: &str, span: &Range<usize>, elements: Option<Format>) -> bool {
    let known = matches!(
        (key, elements),
        ("tools", _) | ("system", None) | ("instructions", Some(Format::Responses))
    );
    known && span.len() >= MEMO_FROM
}

/// The member `key` whose value's text is `text`: taken from `memo` when it holds one read
/// from the same bytes; else `Err` with its parsed value (`None` when it does not parse), what
/// the reader makes of it kept in `memo` for the next read.
pub(crate) fn take_or_keep(
    memo: &FrameMemo,
    key: &str,
    text: &str,
) -> Result<Member, Option<Value>> {
    let hash = XxHash3_128::oneshot(text.as_bytes());
    match memo.get(hash).filter(|m| m.key() == key) {
        Some(member) => Ok(member),
        None => Err(parse_and_keep(memo, (hash, key), text)),
    }
}

/// The member `key` whose value's text is `text`, parsed (a read that cannot take it: no
/// quick list beside it), what the reader makes of it kept in `memo` for a read that can,
/// unless it is kept already. `None` when it does not parse.
pub(crate) fn parse_keeping(memo: &FrameMemo, key: &str, text: &str) -> Option<Value> {
    let hash = XxHash3_128::oneshot(text.as_bytes());
    if memo.holds(hash) {
        return serde_json::from_str(text).ok();
    }
    parse_and_keep(memo, (hash, key), text)
}

/// `text` parsed, and what the reader makes of the member `key` kept in `memo` under `hash`.
fn parse_and_keep(memo: &FrameMemo, (hash, key): (u128, &str), text: &str) -> Option<Value> {
    let value: Option<Value> = serde_json::from_str(text).ok();
    // What the body's reader makes of it (a member it refuses is not kept: that read
    // reports it).
    let member = match (key, &value) {
        ("system", Some(v)) => crate::body::read_system(v.clone(), &Ctx::new(""), "/system")
            .ok()
            .map(Member::System),
        ("instructions", Some(Value::String(text))) => Some(Member::Instructions(text.clone())),
        ("tools", Some(Value::Array(tools))) => Some(Member::Tools(crate::body::read_tools(tools))),
        _ => None,
    };
    if let Some(member) = member {
        memo.keep(hash, member);
    }
    value
}

/// Frame members read before, by the hash of their bytes: see the [module docs](self).
#[derive(Debug)]
pub struct FrameMemo {
    entries: Recent<u128, Member>,
    /// How many members reads took from the memo.
    taken: AtomicUsize,
}

impl Default for FrameMemo {
    fn default() -> Self {
        FrameMemo {
            entries: Recent::new(CAPACITY),
            taken: AtomicUsize::new(0),
        }
    }
}

impl FrameMemo {
    /// The member whose bytes hash to `key`, if one was kept (a copy: the conversation owns
    /// its frame).
    pub(crate) fn get(&self, key: u128) -> Option<Member> {
        let member = self.entries.get(&key)?;
        self.taken.fetch_add(1, Ordering::Relaxed);
        Some(member)
    }

    /// Whether a member whose bytes hash to `key` is kept.
    fn holds(&self, key: u128) -> bool {
        self.entries.contains(&key)
    }

    /// Keeps `member`, read from bytes that hash to `key`.
    pub(crate) fn keep(&self, key: u128, member: Member) {
        self.entries.keep(key, member);
    }

    /// How many members are kept.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether none is.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// How many members reads took from the memo so far.
    pub fn taken(&self) -> usize {
        self.taken.load(Ordering::Relaxed)
    }
}
