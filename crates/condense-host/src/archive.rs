//! The expansion archive: how `condense expand` gets every removed byte back.
//!
//! The host, not the plugins, keeps this promise: after each stage it compares the stage's
//! input and output message by message and archives whatever changed or disappeared, so even a
//! third-party stage cannot lose data. Entries are keyed by a hash of the *output* message (its
//! id is left out when the format has none, i.e. ids starting with `#`), so expansion also works
//! on a compressed conversation the agent has since extended.
//!
//! Entry kinds, for an output message `m`:
//! - `replace`: `m` is a changed version of the archived original;
//! - `replace_new`: `m` is new (a summary) and stands for the archived run of originals;
//! - `insert_before` / `insert_after`: a run of originals was removed next to `m`;
//! - `remove`: `m` is new and stands for nothing (expand drops it).
//!
//! One stage run writes ONE segment record (entries plus the original messages inline), named
//! by its content hash: a single atomic write however much changed, and an identical rerun
//! writes nothing new. Expansion loads the session's segments, applies entries round by round
//! (a message changed by two stages unwinds in two rounds) and uses each entry at most once,
//! so it always terminates.

use condense_model::{Conversation, Message};
use condense_store::{Store, StoreError};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap, HashSet};
use xxhash_rust::xxh3::xxh3_128;

const NAMESPACE_PREFIX: &str = "expand-";
const HEADER_KEY: &str = "header";

/// Originals are referred to by their index in the segment's `messages`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
enum Entry {
    Replace { original: usize },
    ReplaceNew { originals: Vec<usize> },
    InsertBefore { originals: Vec<usize> },
    InsertAfter { originals: Vec<usize> },
    Remove,
    Header,
}

/// What one stage run archived.
#[derive(Debug, Default, Serialize, Deserialize)]
struct Segment {
    /// Output hash -> entries for that output message.
    entries: BTreeMap<String, Vec<Entry>>,
    messages: Vec<Message>,
    header: Option<Header>,
}

/// The parts of a conversation outside its messages.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Header {
    system: Option<condense_model::Content>,
    tools: Vec<condense_model::ToolDef>,
    extra: condense_model::RawJson,
}

/// Whether the two conversations have the same header (compared in place: no copy).
fn same_header(a: &Conversation, b: &Conversation) -> bool {
    a.system == b.system && a.tools == b.tools && a.extra == b.extra
}

fn header_of(c: &Conversation) -> Header {
    Header {
        system: c.system.clone(),
        tools: c.tools.clone(),
        extra: c.extra.clone(),
    }
}

/// Hash of a message as the output format shows it (synthetic `#n` ids left out).
fn message_hash(m: &Message) -> String {
    let mut bytes = Vec::new();
    if !m.id.starts_with('#') {
        bytes.extend_from_slice(m.id.as_bytes());
    }
    bytes.push(0);
    // Serializing the model cannot fail: it holds only strings, options and enums.
    let body = serde_json::to_vec(&(&m.role, &m.timestamp, &m.content, &m.extra, &m.envelope))
        .unwrap_or_default();
    bytes.extend_from_slice(&body);
    format!("{:032x}", xxh3_128(&bytes))
}

fn header_hash(h: &Header) -> String {
    format!(
        "{HEADER_KEY}-{:032x}",
        xxh3_128(&serde_json::to_vec(h).unwrap_or_default())
    )
}

impl Segment {
    fn keep(&mut self, m: &Message) -> usize {
        self.messages.push(m.clone());
        self.messages.len() - 1
    }

    /// A header entry restoring `before`'s header, keyed by `after`'s, when they differ.
    fn add_header(&mut self, before: &Conversation, after: &Conversation) {
        if !same_header(before, after) {
            self.add(header_hash(&header_of(after)), Entry::Header);
            self.header = Some(header_of(before));
        }
    }

    fn add(&mut self, key: String, entry: Entry) {
        self.entries.entry(key).or_default().push(entry);
    }
}

/// Archives what a stage changed between `before` and `after` for `session`. Returns the
/// number of entries written (0: nothing changed, nothing written).
pub fn archive_stage(
    store: &Store,
    session: &str,
    before: &Conversation,
    after: &Conversation,
) -> Result<usize, StoreError> {
    let mut seg = Segment::default();
    seg.add_header(before, after);

    let before_by_id: HashMap<&str, &Message> =
        before.messages.iter().map(|m| (m.id.as_str(), m)).collect();
    let after_pos: HashMap<&str, usize> = after
        .messages
        .iter()
        .enumerate()
        .map(|(i, m)| (m.id.as_str(), i))
        .collect();

    // Changed messages.
    for m in &after.messages {
        if let Some(orig) = before_by_id.get(m.id.as_str()) {
            if *orig != m {
                let original = seg.keep(orig);
                seg.add(message_hash(m), Entry::Replace { original });
            }
        }
    }

    // Runs of removed messages, each anchored to the output message that follows it.
    let mut anchored_new: HashSet<usize> = HashSet::new();
    let mut run: Vec<usize> = Vec::new();
    let mut last_kept: Option<usize> = None;
    let flush = |seg: &mut Segment,
                 run: &mut Vec<usize>,
                 last_kept: Option<usize>,
                 anchored: &mut HashSet<usize>| {
        if run.is_empty() {
            return;
        }
        let originals = std::mem::take(run);
        let next = last_kept.map_or(0, |i| i + 1);
        if let Some(anchor) = after.messages.get(next) {
            if before_by_id.contains_key(anchor.id.as_str()) {
                seg.add(message_hash(anchor), Entry::InsertBefore { originals });
            } else {
                anchored.insert(next);
                seg.add(message_hash(anchor), Entry::ReplaceNew { originals });
            }
        } else if let Some(last) = after.messages.last() {
            seg.add(message_hash(last), Entry::InsertAfter { originals });
        }
    };
    for m in &before.messages {
        match after_pos.get(m.id.as_str()) {
            Some(&pos) => {
                flush(&mut seg, &mut run, last_kept, &mut anchored_new);
                last_kept = Some(pos);
            }
            None => {
                let i = seg.keep(m);
                run.push(i);
            }
        }
    }
    flush(&mut seg, &mut run, last_kept, &mut anchored_new);

    // New messages that stand for nothing.
    for (i, m) in after.messages.iter().enumerate() {
        if !before_by_id.contains_key(m.id.as_str()) && !anchored_new.contains(&i) {
            seg.add(message_hash(m), Entry::Remove);
        }
    }

    write_segment(store, session, &seg)
}

/// Why expansion failed.
#[derive(Debug, thiserror::Error)]
pub enum ExpandError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("store record {0} is damaged; the store does not match this condense")]
    Damaged(String),
}

/// One entry, with the segment it came from (to resolve originals).
struct Loaded<'a> {
    entry: &'a Entry,
    segment: &'a Segment,
}

/// Archives how the written output reads back: a stage-made message (a summary) may come back
/// from the file with another id or a filled-in wrapper line. Keyed by the re-read form, each
/// such message expands to the one the pipeline produced, so `expand` works from the file.
pub fn archive_written(
    store: &Store,
    session: &str,
    produced: &Conversation,
    reread: &Conversation,
) -> Result<usize, StoreError> {
    if produced.messages.len() != reread.messages.len() {
        return archive_stage(store, session, produced, reread);
    }
    let mut seg = Segment::default();
    seg.add_header(produced, reread);
    // Positional: synthetic `#n` ids renumber when a stage removed messages, but the hash
    // leaves them out, so only messages that really read back differently get an entry.
    for (p, r) in produced.messages.iter().zip(&reread.messages) {
        // Nearly every message reads back as produced: equal messages hash equal.
        if p == r {
            continue;
        }
        let key = message_hash(r);
        if message_hash(p) != key {
            let original = seg.keep(p);
            seg.add(key, Entry::Replace { original });
        }
    }
    write_segment(store, session, &seg)
}

/// Writes a segment (nothing when it is empty); returns its number of entries.
fn write_segment(store: &Store, session: &str, seg: &Segment) -> Result<usize, StoreError> {
    let count = seg.entries.values().map(Vec::len).sum();
    if count > 0 {
        let bytes = serde_json::to_vec(seg).unwrap_or_default();
        let name = format!("{:032x}", xxh3_128(&bytes));
        store.record_put(&format!("{NAMESPACE_PREFIX}{session}"), &name, &bytes)?;
    }
    Ok(count)
}

fn load_segments(store: &Store, namespace: &str) -> Result<Vec<Segment>, ExpandError> {
    parse_segments(store.records(namespace)?)
}

fn parse_segments(records: condense_store::Records) -> Result<Vec<Segment>, ExpandError> {
    records
        .into_iter()
        .map(|(name, bytes)| serde_json::from_slice(&bytes).map_err(|_| ExpandError::Damaged(name)))
        .collect()
}

/// Rebuilds the original of `conv` from the archive of `session`. When nothing of that session
/// matches (a stage replaced what the session id is derived from), every session's archive is
/// searched: entries are keyed by the output messages themselves. Returns the number of entries
/// applied (0: nothing in the store matched).
pub fn expand(store: &Store, session: &str, conv: &mut Conversation) -> Result<usize, ExpandError> {
    let own = load_segments(store, &format!("{NAMESPACE_PREFIX}{session}"))?;
    let applied = expand_with(&own, conv);
    if applied > 0 {
        return Ok(applied);
    }
    let mut all = Vec::new();
    for records in store.records_by_prefix(NAMESPACE_PREFIX)? {
        all.extend(parse_segments(records)?);
    }
    Ok(expand_with(&all, conv))
}

fn expand_with(segments: &[Segment], conv: &mut Conversation) -> usize {
    // Output hash -> every entry for it, across segments; identical entries once.
    let mut index: HashMap<&str, Vec<Loaded<'_>>> = HashMap::new();
    let mut seen: HashSet<(&str, u128)> = HashSet::new();
    for segment in segments {
        for (key, entries) in &segment.entries {
            for entry in entries {
                // Identical entries from reruns (same kind, same originals) count once.
                let originals: Vec<&Message> = originals_of(entry)
                    .iter()
                    .filter_map(|&i| segment.messages.get(i))
                    .collect();
                let kind = format!("{:?}", std::mem::discriminant(entry));
                let fingerprint =
                    xxh3_128(&serde_json::to_vec(&(kind, originals)).unwrap_or_default());
                if seen.insert((key.as_str(), fingerprint)) {
                    index
                        .entry(key.as_str())
                        .or_default()
                        .push(Loaded { entry, segment });
                }
            }
        }
    }
    let resolve = |l: &Loaded<'_>| -> Vec<Message> {
        originals_of(l.entry)
            .iter()
            .filter_map(|&i| l.segment.messages.get(i).cloned())
            .collect()
    };

    let mut used: HashSet<(String, usize)> = HashSet::new();
    let mut applied = 0;
    loop {
        let mut changed = false;
        let hkey = header_hash(&header_of(conv));
        if let Some(entries) = index.get(hkey.as_str()) {
            for (i, l) in entries.iter().enumerate() {
                if let (Entry::Header, Some(h)) = (l.entry, &l.segment.header) {
                    if used.insert((hkey.clone(), i)) {
                        conv.system = h.system.clone();
                        conv.tools = h.tools.clone();
                        conv.extra = h.extra.clone();
                        changed = true;
                        applied += 1;
                        break;
                    }
                }
            }
        }
        let mut out: Vec<Message> = Vec::with_capacity(conv.messages.len());
        for m in std::mem::take(&mut conv.messages) {
            let key = message_hash(&m);
            let Some(entries) = index.get(key.as_str()) else {
                out.push(m);
                continue;
            };
            let (mut before, mut after, mut replacement) = (Vec::new(), Vec::new(), None);
            for (i, l) in entries.iter().enumerate() {
                let replacing = matches!(
                    l.entry,
                    Entry::Replace { .. } | Entry::ReplaceNew { .. } | Entry::Remove
                );
                if (replacing && replacement.is_some()) || matches!(l.entry, Entry::Header) {
                    continue;
                }
                if !used.insert((key.clone(), i)) {
                    continue;
                }
                match l.entry {
                    Entry::Replace { .. } | Entry::ReplaceNew { .. } | Entry::Remove => {
                        replacement = Some(resolve(l));
                    }
                    Entry::InsertBefore { .. } => before.extend(resolve(l)),
                    Entry::InsertAfter { .. } => after.extend(resolve(l)),
                    Entry::Header => {}
                }
                applied += 1;
                changed = true;
            }
            out.extend(before);
            match replacement {
                Some(r) => out.extend(r),
                None => out.push(m),
            }
            out.extend(after);
        }
        conv.messages = out;
        if !changed {
            return applied;
        }
    }
}

fn originals_of(entry: &Entry) -> &[usize] {
    match entry {
        Entry::Replace { original } => std::slice::from_ref(original),
        Entry::ReplaceNew { originals }
        | Entry::InsertBefore { originals }
        | Entry::InsertAfter { originals } => originals,
        Entry::Remove | Entry::Header => &[],
    }
}

/// The originals of messages that stages rewrote in place in earlier runs (`replace` entries
/// only): what the host's summarizer reads instead of a placeholder left in the input, so a
/// summary is written from what the agent really saw. Summaries of spans (`replace_new`) are
/// not unfolded: the summarizer is given an earlier summary as such.
#[derive(Debug, Default)]
pub struct Rewrites {
    /// Output hash -> the message it replaced (the first such entry wins).
    by_hash: HashMap<String, Message>,
}

impl Rewrites {
    /// Loads the `replace` entries of `session`'s archive.
    pub fn load(store: &Store, session: &str) -> Result<Rewrites, ExpandError> {
        let mut by_hash = HashMap::new();
        for segment in load_segments(store, &format!("{NAMESPACE_PREFIX}{session}"))? {
            let mut messages: Vec<Option<Message>> =
                segment.messages.into_iter().map(Some).collect();
            for (key, entries) in segment.entries {
                for entry in entries {
                    if let Entry::Replace { original } = entry {
                        if let Some(m) = messages.get_mut(original).and_then(Option::take) {
                            by_hash.entry(key.clone()).or_insert(m);
                        }
                    }
                }
            }
        }
        Ok(Rewrites { by_hash })
    }

    /// Whether nothing was rewritten in place.
    pub fn is_empty(&self) -> bool {
        self.by_hash.is_empty()
    }

    /// The original of `m`, unwinding every rewrite (a result truncated by one stage and cleared
    /// by the next unwinds twice); `None` when `m` was never rewritten.
    pub fn original(&self, m: &Message) -> Option<Message> {
        let mut current = self.by_hash.get(&message_hash(m))?;
        // Each step uses another entry: bounded by their number even if entries form a cycle.
        for _ in 0..self.by_hash.len() {
            match self.by_hash.get(&message_hash(current)) {
                Some(earlier) if earlier != current => current = earlier,
                _ => break,
            }
        }
        Some(current.clone())
    }
}
