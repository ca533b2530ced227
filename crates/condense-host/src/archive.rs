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
//! Expansion applies entries round by round (a message changed by two stages unwinds in two
//! rounds) and uses each entry at most once, so it always terminates.

use condense_model::{Conversation, Message};
use condense_store::{Store, StoreError};
use serde::{Deserialize, Serialize};
use std::collections::{HashMap, HashSet};
use xxhash_rust::xxh3::xxh3_128;

const NAMESPACE_PREFIX: &str = "expand-";
const HEADER_KEY: &str = "header";

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
enum Entry {
    Replace { original: String },
    ReplaceNew { originals: Vec<String> },
    InsertBefore { originals: Vec<String> },
    InsertAfter { originals: Vec<String> },
    Remove,
    Header { original: String },
}

/// The parts of a conversation outside its messages.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Header {
    system: Option<condense_model::Content>,
    tools: Vec<condense_model::ToolDef>,
    extra: condense_model::RawJson,
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
        "{:032x}",
        xxh3_128(&serde_json::to_vec(h).unwrap_or_default())
    )
}

/// Archives what a stage changed between `before` and `after` for `session`.
pub fn archive_stage(
    store: &Store,
    session: &str,
    before: &Conversation,
    after: &Conversation,
) -> Result<usize, StoreError> {
    let ns = format!("{NAMESPACE_PREFIX}{session}");
    let mut pending: Vec<(String, Entry)> = Vec::new();
    let put_msg = |m: &Message| -> Result<String, StoreError> {
        store.put(&serde_json::to_vec(m).unwrap_or_default())
    };

    let (hb, ha) = (header_of(before), header_of(after));
    if hb != ha {
        let original = store.put(&serde_json::to_vec(&hb).unwrap_or_default())?;
        pending.push((
            format!("{HEADER_KEY}-{}", header_hash(&ha)),
            Entry::Header { original },
        ));
    }

    let before_by_id: HashMap<&str, &Message> =
        before.messages.iter().map(|m| (m.id.as_str(), m)).collect();
    let after_ids: HashSet<&str> = after.messages.iter().map(|m| m.id.as_str()).collect();
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
                pending.push((
                    message_hash(m),
                    Entry::Replace {
                        original: put_msg(orig)?,
                    },
                ));
            }
        }
    }

    // Runs of removed messages, each anchored to the output message that follows it.
    let mut anchored_new: HashSet<usize> = HashSet::new();
    let mut run: Vec<String> = Vec::new();
    let mut last_kept: Option<usize> = None;
    let flush = |run: &mut Vec<String>,
                 last_kept: Option<usize>,
                 pending: &mut Vec<(String, Entry)>,
                 anchored_new: &mut HashSet<usize>| {
        if run.is_empty() {
            return;
        }
        let originals = std::mem::take(run);
        let next = last_kept.map_or(0, |i| i + 1);
        if let Some(anchor) = after.messages.get(next) {
            if before_by_id.contains_key(anchor.id.as_str()) {
                pending.push((message_hash(anchor), Entry::InsertBefore { originals }));
            } else {
                anchored_new.insert(next);
                pending.push((message_hash(anchor), Entry::ReplaceNew { originals }));
            }
        } else if let Some(last) = after.messages.last() {
            pending.push((message_hash(last), Entry::InsertAfter { originals }));
        }
    };
    for m in &before.messages {
        if after_ids.contains(m.id.as_str()) {
            flush(&mut run, last_kept, &mut pending, &mut anchored_new);
            last_kept = after_pos.get(m.id.as_str()).copied();
        } else {
            run.push(put_msg(m)?);
        }
    }
    flush(&mut run, last_kept, &mut pending, &mut anchored_new);

    // New messages that stand for nothing.
    for (i, m) in after.messages.iter().enumerate() {
        if !before_by_id.contains_key(m.id.as_str()) && !anchored_new.contains(&i) {
            pending.push((message_hash(m), Entry::Remove));
        }
    }

    let count = pending.len();
    for (key, entry) in pending {
        let mut entries: Vec<Entry> = store
            .record_get(&ns, &key)?
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or_default();
        if !entries.contains(&entry) {
            entries.push(entry);
            store.record_put(&ns, &key, &serde_json::to_vec(&entries).unwrap_or_default())?;
        }
    }
    Ok(count)
}

/// Why expansion failed.
#[derive(Debug, thiserror::Error)]
pub enum ExpandError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("store blob {0} is missing or damaged; the store does not match this conversation")]
    Blob(String),
}

/// Rebuilds the original of `conv` from the archive of `session`. Returns the number of entries
/// applied (0: nothing in the store matched).
pub fn expand(store: &Store, session: &str, conv: &mut Conversation) -> Result<usize, ExpandError> {
    let ns = format!("{NAMESPACE_PREFIX}{session}");
    let mut used: HashSet<(String, usize)> = HashSet::new();
    let mut applied = 0;
    let load_msg = |key: &str| -> Result<Message, ExpandError> {
        let bytes = store
            .get(key)?
            .ok_or_else(|| ExpandError::Blob(key.to_string()))?;
        serde_json::from_slice(&bytes).map_err(|_| ExpandError::Blob(key.to_string()))
    };
    let load_msgs = |keys: &[String]| -> Result<Vec<Message>, ExpandError> {
        keys.iter().map(|k| load_msg(k)).collect()
    };

    loop {
        let mut changed = false;
        // Header.
        let hkey = format!("{HEADER_KEY}-{}", header_hash(&header_of(conv)));
        if let Some(entries) = read_entries(store, &ns, &hkey)? {
            for (i, e) in entries.iter().enumerate() {
                if let Entry::Header { original } = e {
                    if used.insert((hkey.clone(), i)) {
                        let bytes = store
                            .get(original)?
                            .ok_or_else(|| ExpandError::Blob(original.clone()))?;
                        let h: Header = serde_json::from_slice(&bytes)
                            .map_err(|_| ExpandError::Blob(original.clone()))?;
                        conv.system = h.system;
                        conv.tools = h.tools;
                        conv.extra = h.extra;
                        changed = true;
                        applied += 1;
                        break;
                    }
                }
            }
        }
        // Messages.
        let mut out: Vec<Message> = Vec::with_capacity(conv.messages.len());
        for m in std::mem::take(&mut conv.messages) {
            let key = message_hash(&m);
            let Some(entries) = read_entries(store, &ns, &key)? else {
                out.push(m);
                continue;
            };
            let mut before: Vec<Message> = Vec::new();
            let mut after: Vec<Message> = Vec::new();
            let mut replacement: Option<Vec<Message>> = None;
            for (i, e) in entries.iter().enumerate() {
                let is_replacing = matches!(
                    e,
                    Entry::Replace { .. } | Entry::ReplaceNew { .. } | Entry::Remove
                );
                if is_replacing && replacement.is_some() {
                    continue;
                }
                if matches!(e, Entry::Header { .. }) || !used.insert((key.clone(), i)) {
                    continue;
                }
                match e {
                    Entry::Replace { original } => replacement = Some(vec![load_msg(original)?]),
                    Entry::ReplaceNew { originals } => replacement = Some(load_msgs(originals)?),
                    Entry::Remove => replacement = Some(Vec::new()),
                    Entry::InsertBefore { originals } => before.extend(load_msgs(originals)?),
                    Entry::InsertAfter { originals } => after.extend(load_msgs(originals)?),
                    Entry::Header { .. } => {}
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
            return Ok(applied);
        }
    }
}

fn read_entries(store: &Store, ns: &str, key: &str) -> Result<Option<Vec<Entry>>, StoreError> {
    Ok(store
        .record_get(ns, key)?
        .and_then(|b| serde_json::from_slice(&b).ok()))
}
