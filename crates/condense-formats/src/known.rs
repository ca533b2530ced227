//! Leaving unread the messages an earlier read already saw, byte for byte.
//!
//! An agent that compresses once per turn hands condense its whole history every time: the
//! previous input plus the new turn. Parsing that history again is most of a turn's read, yet
//! the resumed run (`condense-host`'s `resume`) drops most of it: it starts from the previous
//! output, which refers to a few of the input's messages and stands for the rest. So after a
//! read of a message list that `crate::quick` read whole, the caller can keep a [`KnownList`]
//! of it: how many messages, where each one is, a hash of their exact text, each one's
//! fingerprint and the stubs the format detection read. [`crate::Document::known_record`]
//! makes the record to keep, and [`lookup`] turns the caller's records back into what a read
//! asks.
//!
//! The next read ([`crate::read_owned_knowing`]) asks for the lists known under the hash of its
//! first element's text ([`first_key`]). When one of them covers a prefix of the new list whose
//! text is exactly the same (same length, same xxh3-128), the messages of that prefix are the
//! same messages (a read is a function of the text), so the scan steps over that text and
//! leaves them unread: the resumed run's start stands for them, and its resume point holds
//! the ones its output kept as they were (a long-lived pipeline's memory, or the packs a point
//! saved without memory keeps). A list also keeps the hashes of its first messages short of
//! its [`SHORTER`] newest ones ([`KnownList::shorter`]): a client that moved its prompt-cache
//! marks sends those changed, and the read still matches the messages before them, when the
//! new list goes on past them. Each message left unread becomes a placeholder (`placeholder`) that keeps its
//! position, its positional id and its fingerprint, and the [`crate::Document`] says which ones
//! they are
//! ([`crate::Document::unread`]). Its texts are still there: the writer copies any of them that
//! an output holds, and [`crate::Document::read_unread`] reads them all when a run needs the
//! whole conversation after all.
//!
//! A list read quick takes part (an Anthropic request body's `messages`, or a bare list), and
//! so does an OpenAI Chat or Responses list read with its format said (`reads_elements`): a
//! Chat body's `messages` or a Responses body's `input` at the root
//! (`crate::body::list_member`), or the
//! root list. Its elements are parsed for that format's reader rather than read quick (each
//! element is one message), the known prefix left unread as a quick list's, and its lists are
//! kept under keys of their own (`list_key`), so that a read of another kind never takes
//! one. So does a Claude Code session's file, its lines the list, with what the thread walk
//! knew of each line ([`LineMemo`], `crate::claude_code::known`). The first [`ALWAYS_READ`]
//! messages are always read (a session's id may come from them).

use condense_model::{Content, Format, Message, RawJson, Role};
use serde_json::Value;
use std::ops::Range;
use twox_hash::{XxHash3_128, XxHash3_64};

mod record;

pub use crate::claude_code::known::LineMemo;
pub(crate) use record::updated;
#[cfg(test)]
pub(crate) use record::LINES_BLOCK;
pub use record::{decode_all, encode_all, KnownWrite, BLOCKS};

/// The first messages of a list are always read: a session's id comes from them, and they cost
/// little.
pub const ALWAYS_READ: usize = 8;

/// How many of a list's newest messages may have changed since for a read to still match the
/// ones before them ([`KnownList::shorter`]): a client that marks its last two user messages
/// for its prompt cache (SWE-agent) moves both marks every turn, and the older of the two is
/// the third newest message (a tool result, the call, its result).
pub const SHORTER: usize = 4;

/// A list also keeps the hash of its first messages at every multiple of this many
/// ([`KnownList::shorter`]): a client that edits an older message in place (OpenHands masks
/// observations older than its window, SWE-agent elides old outputs) sends the list changed
/// there, and the read still matches every message up to the last multiple before it. The
/// cuts sit at the same places turn after turn, so a new list takes their hashes from the list
/// it matched rather than hashing its history again.
pub const STRIDE: usize = 64;

/// The lengths a list of `n` messages keeps the hash of its first messages at, short of the
/// whole (ascending; each more than [`ALWAYS_READ`]): every multiple of [`STRIDE`], and the
/// [`SHORTER`] lengths just short of `n`.
fn cut_lengths(n: usize) -> Vec<usize> {
    let strides = (STRIDE..n).step_by(STRIDE);
    let newest = n.saturating_sub(SHORTER)..n;
    let mut lengths: Vec<usize> = strides.chain(newest).filter(|&m| m > ALWAYS_READ).collect();
    lengths.sort_unstable();
    lengths.dedup();
    lengths
}

/// Where a caller keeps the records (a store namespace), each under [`record_name`].
pub const RECORDS: &str = "known-lists";

/// The name of the record of the lists known under `key` ([`first_key`]).
pub fn record_name(key: u64) -> String {
    format!("{key:016x}")
}

/// The lists known under a key, read with `get` (a record's bytes by namespace, [`RECORDS`]
/// or [`BLOCKS`], and name; `None` when there is none): what [`crate::read_owned_knowing`]
/// asks.
pub fn lookup(get: impl Fn(&str, &str) -> Option<Vec<u8>>) -> impl Fn(u64) -> Vec<KnownList> {
    move |key| {
        get(RECORDS, &record_name(key)).map_or_else(Vec::new, |b| {
            record::decode_all(key, &b, |name| get(BLOCKS, name))
        })
    }
}

/// What a read asks for the message lists known under a first element's key ([`first_key`]).
pub type Lists<'a> = &'a dyn Fn(u64) -> Vec<KnownList>;

/// What an earlier read of a message list knew of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KnownList {
    /// How many messages the list had.
    pub messages: usize,
    /// xxh3-128 of the list's text from its first message's first byte to its last message's
    /// last byte.
    pub bytes: u128,
    /// The same hash of the text of its first messages, for the [`SHORTER`] lengths short of
    /// the whole and every multiple of [`STRIDE`] (ascending; each more than
    /// [`ALWAYS_READ`]): (messages, hash). A client that moved its prompt-cache mark sends the
    /// newest messages changed, one that edited an older message sends it changed, and the
    /// list still matches up to them.
    pub shorter: Vec<(usize, u128)>,
    /// Where each message's text is, from the first one's first byte (start, end): a read
    /// that finds the same text takes them instead of scanning it.
    pub spans: Vec<(u32, u32)>,
    /// Each message's [`fingerprint`](condense_model::fingerprint::fingerprint), in order.
    pub prints: Vec<u128>,
    /// The format detection's stubs of the list (`crate::quick`), as JSON.
    pub stubs: Vec<Value>,
    /// A Claude Code session's lines: what the read knew of each one
    /// (`crate::claude_code::known`). `None` for a message list of a JSON text.
    pub lines: Option<LineMemo>,
}

/// The key lists are known under: xxh3-64 of the first element's text.
pub fn first_key(first: &str) -> u64 {
    key_of(first.as_bytes())
}

/// [`first_key`] of an element's bytes (a body read for its session is not checked as UTF-8).
pub(crate) fn key_of(first: &[u8]) -> u64 {
    XxHash3_64::oneshot(first)
}

/// What the keys of an OpenAI Chat list are turned by: its known lists are kept apart from
/// the quick lists', so that a read of the other kind never takes one (the same first element
/// would otherwise name both).
const CHAT_KEYS: u64 = 0x6f70_656e_6169_6368;

/// What the keys of an OpenAI Responses item list are turned by, as [`CHAT_KEYS`].
const RESPONSES_KEYS: u64 = 0x7265_7370_6f6e_7365;

/// What the keys of a Claude Code session's lines are turned by, as [`CHAT_KEYS`].
const CLAUDE_KEYS: u64 = 0x636c_6175_6465_636f;

/// The key a list whose first element is `first` is known under, in a read of `format`
/// ([`first_key`], turned for an OpenAI Chat or Responses list and a Claude Code session's
/// lines: [`CHAT_KEYS`], [`RESPONSES_KEYS`], [`CLAUDE_KEYS`]).
pub(crate) fn list_key(format: Format, first: &[u8]) -> u64 {
    match format {
        Format::OpenAi => key_of(first) ^ CHAT_KEYS,
        Format::Responses => key_of(first) ^ RESPONSES_KEYS,
        Format::ClaudeCode => key_of(first) ^ CLAUDE_KEYS,
        _ => key_of(first),
    }
}

/// The formats whose message list a read with known lists parses for the format's own reader
/// (said, not detected): an OpenAI Chat body's `messages` or a Responses body's `input`, each
/// element read into one message. An Anthropic list is read quick instead ([`crate::quick`]).
pub(crate) fn reads_elements(format: Format) -> bool {
    matches!(format, Format::OpenAi | Format::Responses)
}

/// The hash of the text a read matched a known list on ([`match_prefix`]), from the list's
/// first byte to `end`, kept going: the list the read's input has (that text and the new
/// turn's messages) is hashed on from there ([`prefix_of`]), not from its first byte again
/// (3.2 MB at a million tokens).
#[derive(Clone)]
pub(crate) struct Hashed {
    start: usize,
    end: usize,
    state: XxHash3_128,
    /// The hashes of the matched list's first messages it kept, by their number (its shorter
    /// prefixes and itself, [`KnownList::shorter`]): a new list's own shorter prefixes that
    /// end before `end` are among them, where hashing from the first byte again is 3.2 MB.
    prefixes: Vec<(usize, u128)>,
}

impl Hashed {
    /// The hash `state` of the text at `range`, whose first messages' hashes are `prefixes`
    /// (by their number).
    pub(crate) fn new(
        range: Range<usize>,
        state: XxHash3_128,
        prefixes: Vec<(usize, u128)>,
    ) -> Hashed {
        Hashed {
            start: range.start,
            end: range.end,
            state,
            prefixes,
        }
    }
}

impl std::fmt::Debug for Hashed {
    /// The range only: the state is the hash's internals.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Hashed({}..{})", self.start, self.end)
    }
}

/// A known list a look at a text matched ([`crate::cut::ListCut::of_knowing`]), for the read
/// of the same text ([`crate::read_shared_knowing`]) to take instead of asking for the lists and
/// hashing their text again.
pub struct Matched {
    /// The text's length, the first element's span and its key: what the read checks the
    /// match against before it takes it.
    text_len: usize,
    first: Range<usize>,
    key: u64,
    list: KnownList,
    spans: Vec<Range<usize>>,
    hashed: Hashed,
    /// The hash of every list the look was given ([`KnownList::bytes`]): a longer list known
    /// by the time the body is read (the session's previous request kept it meanwhile) is one
    /// it has not tried.
    seen: Vec<u128>,
}

impl std::fmt::Debug for Matched {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Matched")
            .field("first", &self.first)
            .field("messages", &self.list.messages)
            .finish()
    }
}

impl Matched {
    /// The longest of `lists` the array whose first element (of key `key`) is at `first` in
    /// `text` starts with ([`match_prefix`]).
    pub(crate) fn find(
        text: &[u8],
        first: &Range<usize>,
        key: u64,
        lists: Vec<KnownList>,
    ) -> Option<Matched> {
        let seen = lists.iter().map(|l| l.bytes).collect();
        let (list, spans, hashed) = match_prefix(text, first, lists)?;
        Some(Matched {
            text_len: text.len(),
            first: first.clone(),
            key,
            list,
            spans,
            hashed,
            seen,
        })
    }

    /// This match, taken for the same text read again when `lists` (asked now) hold no longer
    /// list it has not tried; else the longest of those that matches, or this one.
    pub(crate) fn again(
        self,
        text: &[u8],
        first: &Range<usize>,
        key: u64,
        lists: Vec<KnownList>,
    ) -> Option<Matched> {
        if !self.fits(text, first, key) {
            return Matched::find(text, first, key, lists);
        }
        let fresh: Vec<KnownList> = lists
            .into_iter()
            .filter(|l| l.messages > self.list.messages && !self.seen.contains(&l.bytes))
            .collect();
        if fresh.is_empty() {
            return Some(self);
        }
        Matched::find(text, first, key, fresh).or(Some(self))
    }

    /// Whether the match was made on a text of `text`'s length whose array starts with the
    /// element at `first` of key `key` (a match of another text is not taken).
    fn fits(&self, text: &[u8], first: &Range<usize>, key: u64) -> bool {
        self.text_len == text.len() && self.first == *first && self.key == key
    }

    /// The spans of the list's elements in the text.
    pub(crate) fn spans(&self) -> &[Range<usize>] {
        &self.spans
    }

    pub(crate) fn into_parts(self) -> (KnownList, Vec<Range<usize>>, Hashed) {
        (self.list, self.spans, self.hashed)
    }
}

/// What a read's list is kept as ([`KnownList`]): its elements' spans relative to the first
/// one's start, the hash of their text (from the first one's start to the last one's end), and
/// the hashes of its [`KnownList::shorter`] prefixes.
pub(crate) struct Prefix {
    pub(crate) spans: Vec<(u32, u32)>,
    pub(crate) bytes: u128,
    pub(crate) shorter: Vec<(usize, u128)>,
}

/// The [`Prefix`] of the elements `spans`, hashing on from `hashed` when it hashed the start of
/// their text up to no further than the shortest prefix kept; `None` for no elements.
pub(crate) fn prefix_of(
    text: &str,
    spans: &[Range<usize>],
    hashed: Option<&Hashed>,
) -> Option<Prefix> {
    let (first, last) = (spans.first()?, spans.last()?);
    let rel = |at: usize| u32::try_from(at - first.start).ok();
    let relative = spans
        .iter()
        .map(|s| Some((rel(s.start)?, rel(s.end)?)))
        .collect::<Option<Vec<_>>>()?;
    let lengths = cut_lengths(spans.len());
    let usable = hashed.filter(|h| h.start == first.start && h.end <= last.end);
    let (bytes, shorter) = usable
        .and_then(|h| hashes_from(text.as_bytes(), spans, &lengths, h))
        .or_else(|| {
            let from_start = Hashed {
                start: first.start,
                end: first.start,
                state: XxHash3_128::new(),
                prefixes: Vec::new(),
            };
            hashes_from(text.as_bytes(), spans, &lengths, &from_start)
        })?;
    Some(Prefix {
        spans: relative,
        bytes,
        shorter,
    })
}

/// The hash of the text of `spans` and of their first `m` for each of `lengths` (ascending),
/// going on from `hashed`: a prefix that ends where `hashed` ends or before it takes the
/// matched list's own hash of it; `None` when it kept none.
fn hashes_from(
    bytes: &[u8],
    spans: &[Range<usize>],
    lengths: &[usize],
    hashed: &Hashed,
) -> Option<(u128, Vec<(usize, u128)>)> {
    let (mut state, mut at) = (hashed.state.clone(), hashed.end);
    let mut shorter = Vec::with_capacity(lengths.len());
    for &m in lengths {
        let end = spans.get(m.checked_sub(1)?)?.end;
        if end <= hashed.end {
            let known = hashed.prefixes.iter().find(|&&(n, _)| n == m)?;
            shorter.push((m, known.1));
            continue;
        }
        state.write(bytes.get(at..end)?);
        at = end;
        shorter.push((m, state.finish_128()));
    }
    state.write(bytes.get(at..spans.last()?.end)?);
    Some((state.finish_128(), shorter))
}

/// The longest of `known` whose text the array whose first element is at `first` starts with
/// (hashed, not scanned), with its elements' spans in `text`: a list whole, or its first
/// messages ([`KnownList::shorter`]) when its newest ones changed since, or an older one was
/// edited. Only a list of more than [`ALWAYS_READ`] messages, each with its fingerprint, is a
/// match.
pub(crate) fn match_prefix(
    text: &[u8],
    first: &Range<usize>,
    mut known: Vec<KnownList>,
) -> Option<(KnownList, Vec<Range<usize>>, Hashed)> {
    known.sort_by_key(|k| std::cmp::Reverse(k.messages));
    known.into_iter().find_map(|list| {
        let whole = ALWAYS_READ < list.messages
            && list.prints.len() == list.messages
            && list.spans.len() == list.messages;
        let first_len = u32::try_from(first.len()).ok()?;
        if !whole || list.spans.first() != Some(&(0, first_len)) {
            return None;
        }
        let end_of = |m: usize| -> Option<usize> {
            let (_, end) = *list.spans.get(m.checked_sub(1)?)?;
            first.start.checked_add(usize::try_from(end).ok()?)
        };
        // The whole list's hash and its shorter prefixes', in one pass: the longest that
        // matches.
        let mut cuts: Vec<(usize, u128)> = list
            .shorter
            .iter()
            .copied()
            .filter(|&(m, _)| ALWAYS_READ < m && m < list.messages)
            .collect();
        cuts.push((list.messages, list.bytes));
        let (mut state, mut at) = (XxHash3_128::new(), first.start);
        let mut matched = None;
        for (m, hash) in cuts {
            let Some(end) = end_of(m).filter(|&end| at <= end) else {
                break;
            };
            let Some(piece) = text.get(at..end) else {
                break;
            };
            state.write(piece);
            at = end;
            if state.finish_128() != hash {
                // The cuts are prefixes of one another: none longer matches either.
                break;
            }
            // A list's first messages only where the array goes on past them (a client moved
            // its marks off the messages after them; one that ends there was cut short).
            if m == list.messages || goes_on(text, end) {
                matched = Some((m, hash, state.clone(), end));
            }
        }
        let (m, hash, state, end) = matched?;
        let list = list.first(m, hash);
        let at = |rel: u32| first.start + rel as usize;
        let spans: Vec<Range<usize>> = list.spans.iter().map(|&(s, e)| at(s)..at(e)).collect();
        let mut prefixes = list.shorter.clone();
        prefixes.push((list.messages, list.bytes));
        let hashed = Hashed {
            start: first.start,
            end,
            state,
            prefixes,
        };
        separated(text, &spans).then_some((list, spans, hashed))
    })
}

impl KnownList {
    /// Its first `m` messages (their text's hash `bytes`), as the list a read of them kept.
    fn first(mut self, m: usize, bytes: u128) -> KnownList {
        if m < self.messages {
            self.messages = m;
            self.bytes = bytes;
            self.spans.truncate(m);
            self.prints.truncate(m);
            self.shorter.retain(|&(n, _)| n < m);
            // A session's lines are known whole or not at all.
            self.lines = None;
        }
        self
    }
}

/// Whether the array whose element ends at `end` has another element after it: a comma
/// follows, after JSON whitespace.
fn goes_on(text: &[u8], end: usize) -> bool {
    let rest = text.get(end..).unwrap_or_default();
    rest.iter().find(|b| !crate::scan::is_ws(**b)) == Some(&b',')
}

/// Whether `spans` are non-empty values one after the other with only a comma and JSON
/// whitespace between each two: a record whose spans do not fit its text (damaged, or not
/// made by this code) is no match, even when the text's hash is right.
fn separated(text: &[u8], spans: &[Range<usize>]) -> bool {
    spans.iter().all(|s| s.start < s.end)
        && spans.windows(2).all(|w| {
            text.get(w[0].end..w[1].start).is_some_and(|between| {
                let mut rest = between.iter().filter(|b| !crate::scan::is_ws(**b));
                rest.next() == Some(&b',') && rest.next().is_none()
            })
        })
}

/// Per element of a list of `elements` starting with `list`: left unread (the messages the
/// list covers but the first [`ALWAYS_READ`]). `None` when that leaves nothing unread.
pub(crate) fn unread_mask(list: &KnownList, elements: usize) -> Option<Vec<bool>> {
    if list.messages > elements || list.messages <= ALWAYS_READ {
        return None;
    }
    let mut unread = vec![false; elements];
    unread[ALWAYS_READ..list.messages].fill(true);
    Some(unread)
}

/// The hint a placeholder carries (keys starting `condense:` are hints for the writer).
const PLACEHOLDER_HINT: &str = "{\"condense:unread\":";

/// The stand-in for the unread message at `index`: the id a read gives it ([`crate::quick`])
/// and a hint naming its index. Never handed to a stage: a run that needs it reads the list
/// whole. The writer knows it by its hint, and its fingerprint is the known one, so a document
/// written with it still in place writes the message's own text.
pub(crate) fn placeholder(index: usize) -> Message {
    placeholder_with_id(index, condense_model::synthetic_id(index))
}

/// [`placeholder`] with the id the message it stands for has (a Claude Code line's `uuid`).
pub(crate) fn placeholder_with_id(index: usize, id: String) -> Message {
    // `{"condense:unread":N}` without `format!`: a turn at 1M tokens makes 1,770 of them.
    let mut hint = String::with_capacity(PLACEHOLDER_HINT.len() + 8);
    hint.push_str(PLACEHOLDER_HINT);
    condense_model::push_decimal(&mut hint, index);
    hint.push('}');
    Message {
        id,
        role: Role::User,
        timestamp: None,
        content: Content::default(),
        extra: RawJson::from_string_unchecked(hint),
        envelope: RawJson::default(),
    }
}

/// The index of the message `m` stands in for, when it is a [`placeholder`].
pub(crate) fn placeholder_index(m: &Message) -> Option<usize> {
    let rest = m.extra.as_str().strip_prefix(PLACEHOLDER_HINT)?;
    rest.strip_suffix('}')?.parse().ok()
}
