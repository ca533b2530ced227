//! Expansion: replaying a session's archive backwards over a compressed conversation, and
//! telling what could not be replayed.
//!
//! What counts as a marker that expand failed to restore (exit 1 in `condense expand`), after
//! every applicable entry has been applied:
//! - a message whose hash is an output of a recorded segment that cannot be loaded: its index
//!   record (`outputs-<session>/<name>`) is there, the segment (`expand-<session>/<name>`) is
//!   not. Keys that a loaded segment also holds (an identical rerun wrote the same entries) do
//!   not count: those entries were applied;
//! - a message holding a placeholder that condense's stages write ([`PLACEHOLDERS`]: cleared,
//!   persisted, masked or duplicate results, removed images, summaries) that no entry replaced:
//!   with an empty or unrelated store, this is how a compressed file is told apart.
//!
//! A message the agent appended after compression is neither: its hash is no recorded output
//! and it holds no placeholder, so an extended conversation still expands cleanly. What the
//! rule cannot see: with an empty store AND indexes lost, a message removed without a trace
//! (truncate-oldest) leaves nothing to find.

use super::{
    hash_of, header_hash, header_of, message_hash, originals_of, Entry, Index, Segment,
    INDEX_PREFIX, NAMESPACE_PREFIX,
};
use condense_model::{Block, Content, Conversation, Message};
use condense_store::{Store, StoreError};
use std::collections::{HashMap, HashSet};

/// Why expansion failed.
#[derive(Debug, thiserror::Error)]
pub enum ExpandError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("store record {0} is damaged; the store does not match this condense")]
    Damaged(String),
}

/// What expanding one conversation did.
#[derive(Debug, Default)]
pub struct Expansion {
    /// Archive entries applied (0: nothing in the store matched).
    pub applied: usize,
    /// The original bytes of restored messages, for those the archive holds them (see
    /// [`super::ArchiveOptions::texts`]): each message as it now is in the conversation, and
    /// the text the input held for it. The writer puts these bytes back instead of
    /// re-serializing the message.
    pub texts: Vec<(Message, String)>,
    /// Markers left in the conversation that the store could not resolve, in order.
    pub unresolved: Vec<Unresolved>,
}

/// A message expand could not restore.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unresolved {
    /// Its position in the expanded conversation.
    pub position: usize,
    pub id: String,
    pub kind: UnresolvedKind,
}

/// Why a message counts as unrestored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UnresolvedKind {
    /// A recorded run produced it, and the record holding its original is missing.
    MissingRecord,
    /// It holds a placeholder condense writes (the placeholder's start) and no entry for it.
    Placeholder(&'static str),
}

/// The starts of the texts condense's stages leave in place of what they removed (microcompact,
/// tool-result-budget, context-collapse, autocompact, snip, observation-mask).
pub const PLACEHOLDERS: [&str; 5] = [
    "[Old tool result content cleared",
    condense_model::CONDENSE_MARKER,
    condense_model::duplicate::DUPLICATE_PREFIX,
    "[image removed: ",
    "[Observation masked: ",
];

/// The placeholder a text starts with, if any.
fn placeholder_of(text: &str) -> Option<&'static str> {
    PLACEHOLDERS.into_iter().find(|p| text.starts_with(p))
}

fn content_placeholder(content: &Content) -> Option<&'static str> {
    content.blocks.iter().find_map(|b| match b {
        Block::Text(t) => placeholder_of(&t.text),
        Block::ToolResult(r) => content_placeholder(&r.content),
        _ => None,
    })
}

/// Every segment of a namespace (the archive's tests pick one to lose).
#[cfg(test)]
pub(super) fn load_segments(store: &Store, namespace: &str) -> Result<Vec<Segment>, ExpandError> {
    parse_segments(store.records(namespace)?)
        .map(|named| named.into_iter().map(|(_, s)| s).collect())
}

fn parse_segments(records: condense_store::Records) -> Result<Vec<(String, Segment)>, ExpandError> {
    records
        .into_iter()
        .map(|(name, bytes)| {
            super::packed::read(&bytes)
                .map(|s| (name.clone(), s))
                .ok_or(ExpandError::Damaged(name))
        })
        .collect()
}

/// The output keys of indexed segments that are missing, less the keys loaded segments hold.
fn missing_keys(indexes: condense_store::Records, loaded: &[(String, Segment)]) -> HashSet<String> {
    let names: HashSet<&str> = loaded.iter().map(|(n, _)| n.as_str()).collect();
    let held: HashSet<&str> = loaded
        .iter()
        .flat_map(|(_, s)| s.entries.keys().map(String::as_str))
        .collect();
    let mut missing = HashSet::new();
    for (name, bytes) in indexes {
        if names.contains(name.as_str()) {
            continue;
        }
        // A damaged index tells nothing; the placeholders still do.
        if let Ok(index) = serde_json::from_slice::<Index>(&bytes) {
            missing.extend(
                index
                    .keys
                    .into_iter()
                    .filter(|k| !held.contains(k.as_str())),
            );
        }
    }
    missing
}

/// Rebuilds the original of `conv` from the archive of `session` (see [`Expander::expand`]).
pub fn expand(
    store: &Store,
    session: &str,
    conv: &mut Conversation,
) -> Result<Expansion, ExpandError> {
    Expander::new(store).expand(session, conv)
}

/// Expands the conversations of one file, loading the whole store's archive (for the fallback
/// search) at most once, however many conversations need it (tau-bench holds 200).
pub struct Expander<'s> {
    store: &'s Store,
    /// Every segment of every session, and the output keys of every lost segment.
    all: Option<WholeStore>,
}

impl<'s> Expander<'s> {
    pub fn new(store: &'s Store) -> Expander<'s> {
        Expander { store, all: None }
    }

    /// Rebuilds the original of `conv` from the archive of `session`. When nothing of that
    /// session matches (a stage replaced what the session id is derived from), every session's
    /// archive is searched: entries are keyed by the output messages themselves. Then tells
    /// what is left that the store could not restore (see the module docs).
    pub fn expand(
        &mut self,
        session: &str,
        conv: &mut Conversation,
    ) -> Result<Expansion, ExpandError> {
        let store = self.store;
        let own = parse_segments(store.records(&format!("{NAMESPACE_PREFIX}{session}"))?)?;
        let all_own: Vec<&Segment> = own.iter().map(|(_, s)| s).collect();
        // The history that made `conv` first (see `runs`); every segment when no run record
        // matches, or when that history leaves markers.
        let mut expansion = match super::runs::lineage(store, session, conv)? {
            Some(names) => {
                // In the history's order, newest first (see `runs::lineage`).
                let by_name: HashMap<&str, &Segment> =
                    own.iter().map(|(n, s)| (n.as_str(), s)).collect();
                let history: Vec<&Segment> = names
                    .iter()
                    .filter_map(|n| by_name.get(n.as_str()).copied())
                    .collect();
                let mut first = expand_with(&history, conv)?;
                let missing =
                    missing_keys(store.records(&format!("{INDEX_PREFIX}{session}"))?, &own);
                if history.len() < all_own.len() && !unresolved(conv, &missing).is_empty() {
                    let rest = expand_with(&all_own, conv)?;
                    first.applied += rest.applied;
                    first.texts.extend(rest.texts);
                    keep_present_texts(conv, &mut first.texts)?;
                }
                first
            }
            None => expand_with(&all_own, conv)?,
        };
        let own_missing;
        let missing = if expansion.applied > 0 {
            own_missing = missing_keys(store.records(&format!("{INDEX_PREFIX}{session}"))?, &own);
            &own_missing
        } else {
            // Nothing applied, so `conv` is as the file has it: search the whole store.
            let (all, missing) = match &mut self.all {
                Some(loaded) => loaded,
                empty => empty.insert(load_all(store)?),
            };
            let all: Vec<&Segment> = all.iter().map(|(_, s)| s).collect();
            expansion = expand_with(&all, conv)?;
            &*missing
        };
        expansion.unresolved = unresolved(conv, missing);
        Ok(expansion)
    }
}

/// Every segment of a store (named), and the output keys of its lost segments.
type WholeStore = (Vec<(String, Segment)>, HashSet<String>);

/// Every segment of the store, and the keys of its lost segments.
fn load_all(store: &Store) -> Result<WholeStore, ExpandError> {
    let mut all = Vec::new();
    for records in store.records_by_prefix(NAMESPACE_PREFIX)? {
        all.extend(parse_segments(records)?);
    }
    let mut indexes = Vec::new();
    for records in store.records_by_prefix(INDEX_PREFIX)? {
        indexes.extend(records);
    }
    let missing = missing_keys(indexes, &all);
    Ok((all, missing))
}

/// The messages of `conv` that are markers the store could not resolve.
fn unresolved(conv: &Conversation, missing: &HashSet<String>) -> Vec<Unresolved> {
    conv.messages
        .iter()
        .enumerate()
        .filter_map(|(position, m)| {
            // Hashing every message costs a serialization each: only when a record is lost. A
            // message that cannot be hashed is no recorded output (archiving it fails).
            let kind = if !missing.is_empty() && message_hash(m).is_ok_and(|k| missing.contains(&k))
            {
                UnresolvedKind::MissingRecord
            } else {
                UnresolvedKind::Placeholder(content_placeholder(&m.content)?)
            };
            Some(Unresolved {
                position,
                id: m.id.clone(),
                kind,
            })
        })
        .collect()
}

/// One entry, with the segment it came from (to resolve originals).
struct Loaded<'a> {
    entry: &'a Entry,
    segment: &'a Segment,
    /// The segment's position in the list (entries of one run go together, see below).
    from: usize,
    /// Whether that segment also replaces the message this entry is keyed by.
    segment_replaces: bool,
}

fn replacing(entry: &Entry) -> bool {
    matches!(
        entry,
        Entry::Replace { .. } | Entry::ReplaceNew { .. } | Entry::Remove
    )
}

fn expand_with(segments: &[&Segment], conv: &mut Conversation) -> Result<Expansion, StoreError> {
    // Output hash -> every entry for it, across segments. Within a segment identical entries
    // are all kept (one per identical message); another segment's identical entry (a rerun)
    // counts once: the n-th identical entry of a key is the same entry in every segment.
    let mut index: HashMap<&str, Vec<Loaded<'_>>> = HashMap::new();
    let mut seen: HashSet<(&str, u128, usize)> = HashSet::new();
    for (from, &segment) in segments.iter().enumerate() {
        let mut occurrences: HashMap<(&str, u128), usize> = HashMap::new();
        for (key, entries) in &segment.entries {
            let segment_replaces = entries.iter().any(replacing);
            for entry in entries {
                let originals: Vec<&Message> = originals_of(entry)
                    .iter()
                    .filter_map(|&i| segment.messages.get(i))
                    .collect();
                let kind = format!("{:?}", std::mem::discriminant(entry));
                // Hashed as serialized, not serialized whole first: an entry of a collapse
                // holds most of the conversation.
                let fingerprint = hash_of("an archive entry's originals", b"", &(kind, originals))?;
                let n = occurrences.entry((key.as_str(), fingerprint)).or_insert(0);
                *n += 1;
                if seen.insert((key.as_str(), fingerprint, *n)) {
                    index.entry(key.as_str()).or_default().push(Loaded {
                        entry,
                        segment,
                        from,
                        segment_replaces,
                    });
                }
            }
        }
    }
    let mut texts: Vec<(Message, String)> = Vec::new();
    let mut resolve = |l: &Loaded<'_>| -> Vec<Message> {
        originals_of(l.entry)
            .iter()
            .filter_map(|&i| {
                let m = l.segment.messages.get(i)?;
                if let Some((_, text)) = l.segment.texts.iter().find(|(at, _)| *at == i) {
                    texts.push((m.clone(), text.0.clone()));
                }
                Some(m.clone())
            })
            .collect()
    };

    let mut used: HashSet<(String, usize)> = HashSet::new();
    let mut applied = 0;
    loop {
        let mut changed = false;
        let hkey = header_hash(&header_of(conv))?;
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
            let key = message_hash(&m)?;
            let Some(entries) = index.get(key.as_str()) else {
                out.push(m);
                continue;
            };
            let (mut before, mut after, mut replacement) = (Vec::new(), Vec::new(), None);
            // One replacement per occurrence: the first unused one. Two runs can make the same
            // message from different inputs (a run resumed from an earlier output, then one
            // over the whole input): each run's entries unwind it on their own, so the
            // insertions a run archived next to a message go with that run's replacement of
            // it, never with another run's.
            let chosen = entries
                .iter()
                .enumerate()
                .find(|(i, l)| replacing(l.entry) && !used.contains(&(key.clone(), *i)));
            let chosen_from = chosen.map(|(_, l)| l.from);
            if let Some((i, l)) = chosen {
                used.insert((key.clone(), i));
                replacement = Some(resolve(l));
                applied += 1;
                changed = true;
            }
            for (i, l) in entries.iter().enumerate() {
                let with_this_run = !l.segment_replaces || Some(l.from) == chosen_from;
                if replacing(l.entry) || matches!(l.entry, Entry::Header) || !with_this_run {
                    continue;
                }
                if !used.insert((key.clone(), i)) {
                    continue;
                }
                match l.entry {
                    Entry::InsertBefore { .. } => before.extend(resolve(l)),
                    Entry::InsertAfter { .. } => after.extend(resolve(l)),
                    _ => {}
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
            break;
        }
    }
    keep_present_texts(conv, &mut texts)?;
    Ok(Expansion {
        applied,
        texts,
        unresolved: Vec::new(),
    })
}

/// Only the texts of messages that are still there (not unwound again by an earlier stage's
/// entry) are the input's bytes.
fn keep_present_texts(
    conv: &Conversation,
    texts: &mut Vec<(Message, String)>,
) -> Result<(), StoreError> {
    if !texts.is_empty() {
        let present = conv
            .messages
            .iter()
            .map(message_hash)
            .collect::<Result<HashSet<String>, _>>()?;
        texts.retain(|(m, _)| message_hash(m).is_ok_and(|k| present.contains(&k)));
    }
    Ok(())
}
