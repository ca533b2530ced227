//! The writer's texts kept in the store from one `compress` turn to the next.
//!
//! A turn's output is mostly the previous turn's: the messages the stages changed in earlier
//! turns (a tool result snip cut, a collapse summary) are written again, changed the same way.
//! The writer serializes each one (at 1M tokens, 183 messages and 7.7 M instructions, an eighth
//! of a turn) unless its [`WriteMemo`] holds the text already, which a long-lived proxy's does
//! and a new process's does not. This module keeps the memo's texts in the store.
//!
//! How, so that a turn writes only what is new (a record rewritten whole at every turn cost
//! more in the store's log than it saved, see docs/benchmarks.md):
//! - The texts are kept in **chunks**, records of the session's `write-texts-<session>`
//!   namespace named by the hash of their bytes: a turn writes one chunk of the texts it
//!   serialized, and none when it serialized nothing.
//! - An **index** (`write-texts/<session>`) names the chunks and, for each text the last write
//!   used, its key and chunk: a few kilobytes, rewritten when the set of texts changes.
//! - When the chunks read hold more than twice the live texts (or number more than
//!   [`MAX_CHUNKS`]), the live texts are written as one chunk and the others are removed.
//!
//! Nothing depends on these records: a missing or damaged index or chunk (each chunk is checked
//! against the hash it is named by) means those texts are serialized again. A text is used only
//! under its key (the message's fingerprint and a hash of the text it was read from) and in the
//! format and style it was written in ([`WriteMemo::with_texts`]), where it is the text the
//! writer would make.

use crate::Failure;
use condense_formats::WriteMemo;
use condense_model::packed::{put_len, put_str, put_u128, Reader};
use condense_store::{content_hash, hash_key, Store};
use std::collections::{HashMap, HashSet};

/// Store namespace of the indexes, one record per session.
const INDEX: &str = "write-texts";

/// The namespace of `session`'s chunks.
fn chunks_namespace(session: &str) -> String {
    format!("{INDEX}-{session}")
}

/// Bumped when the records' layout changes: an index of another version is no index. 2: the
/// fields in `condense_model::packed`'s layout (lengths LEB128), not fixed-width.
const VERSION: u8 = 2;

/// More chunks than this are written again as one.
const MAX_CHUNKS: usize = 8;

/// A session's index as stored.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct Index {
    /// The memo's context ([`WriteMemo::context`]) the texts were written in.
    context: u128,
    /// Each chunk's name (the hash of its bytes) and size.
    chunks: Vec<(u128, usize)>,
    /// Each text's key and the index of its chunk in `chunks`.
    keys: Vec<(u128, usize)>,
}

/// What [`load`] found, for [`save`].
#[derive(Debug, Default)]
pub(crate) struct Loaded {
    index: Option<Index>,
}

/// The memo a write starts from: the texts `store` kept for `session`
/// ([`crate::known::session_of`]). Without one (several conversations), a memo that keeps
/// nothing, as before.
pub(crate) fn load(store: &Store, session: Option<&str>) -> (WriteMemo, Loaded) {
    let Some(session) = session else {
        return (WriteMemo::off(), Loaded::default());
    };
    let Some(index) = store
        .record_get(INDEX, session)
        .ok()
        .flatten()
        .and_then(|bytes| Index::decode(&bytes))
    else {
        return (WriteMemo::new(), Loaded::default());
    };
    let names: Vec<String> = index
        .chunks
        .iter()
        .map(|(name, _)| hash_key(*name))
        .collect();
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    let chunks = store
        .records_get(&chunks_namespace(session), &names)
        .unwrap_or_default();
    let wanted: HashMap<u128, usize> = index.keys.iter().copied().collect();
    let mut texts = Vec::with_capacity(index.keys.len());
    for (at, (bytes, (name, _))) in chunks.iter().zip(&index.chunks).enumerate() {
        // A chunk that is missing, or is not the bytes it is named by, is not used.
        let Some(bytes) = bytes.as_deref().filter(|b| content_hash(b) == *name) else {
            continue;
        };
        let entries = decode_chunk(bytes).unwrap_or_default();
        texts.extend(
            entries
                .into_iter()
                .filter(|(key, _)| wanted.get(key) == Some(&at)),
        );
    }
    let memo = WriteMemo::with_texts(index.context, texts);
    (memo, Loaded { index: Some(index) })
}

/// Keeps the texts `memo`'s write used for `session`'s next turn (inside the run's transaction):
/// a chunk of those it serialized, and the index, when either changed.
pub(crate) fn save(
    store: &Store,
    session: Option<&str>,
    memo: &WriteMemo,
    loaded: &Loaded,
) -> Result<(), Failure> {
    let (Some(session), Some(context)) = (session, memo.context()) else {
        return Ok(());
    };
    let fresh: HashSet<u128> = memo.serialized().iter().copied().collect();
    let Some(plan) = plan(
        memo.texts().collect(),
        &fresh,
        context,
        loaded.index.as_ref(),
    ) else {
        return Ok(());
    };
    let put = |namespace: &str, name: &str, bytes: &[u8]| {
        store
            .record_put(namespace, name, bytes)
            .map_err(|e| Failure::run(e.to_string()))
    };
    let namespace = chunks_namespace(session);
    if let Some((name, chunk)) = &plan.chunk {
        put(&namespace, &hash_key(*name), chunk)?;
    }
    for name in &plan.removed {
        store
            .record_remove(&namespace, &hash_key(*name))
            .map_err(|e| Failure::run(e.to_string()))?;
    }
    put(INDEX, session, &plan.index.encode())
}

/// What [`save`] writes: the new chunk (if any), the new index, and the chunks it no longer
/// names.
#[derive(Debug)]
struct Plan {
    /// The new chunk's name and bytes.
    chunk: Option<(u128, Vec<u8>)>,
    index: Index,
    removed: Vec<u128>,
}

/// What to write after a write in `context` that used the texts `live` (by key) and serialized
/// those of `fresh` itself, the stored index being `old`. `None`: that index names exactly the
/// texts the write used.
fn plan(
    mut live: Vec<(u128, &[String])>,
    fresh: &HashSet<u128>,
    context: u128,
    old: Option<&Index>,
) -> Option<Plan> {
    let old_at: HashMap<u128, usize> = old
        .filter(|o| o.context == context)
        .map(|o| o.keys.iter().copied().collect())
        .unwrap_or_default();
    live.sort_unstable_by_key(|(key, _)| *key);
    // A text the write took from the memo is in the chunk it was loaded from; any other (one
    // the index does not place) is written again.
    let in_old = |key: &u128| !fresh.contains(key) && old_at.contains_key(key);
    let unchanged = old.is_some_and(|o| o.context == context)
        && live.len() == old_at.len()
        && live.iter().all(|(key, _)| in_old(key));
    if unchanged {
        return None;
    }
    let old_chunks: &[(u128, usize)] = old.map_or(&[], |o| o.chunks.as_slice());
    let mut kept_chunks: Vec<usize> = live
        .iter()
        .filter(|(key, _)| in_old(key))
        .filter_map(|(key, _)| old_at.get(key).copied())
        .collect();
    kept_chunks.sort_unstable();
    kept_chunks.dedup();
    let new_texts: Vec<&(u128, &[String])> = live.iter().filter(|(key, _)| !in_old(key)).collect();
    let live_bytes: usize = live.iter().map(|(_, t)| texts_len(t)).sum();
    let new_bytes: usize = new_texts.iter().map(|(_, t)| texts_len(t)).sum();
    let kept_bytes: usize = kept_chunks
        .iter()
        .filter_map(|&c| old_chunks.get(c).map(|(_, len)| *len))
        .sum();
    let compact = kept_chunks.len() + usize::from(!new_texts.is_empty()) > MAX_CHUNKS
        || kept_bytes + new_bytes > 2 * live_bytes + 64 * 1024;
    let (kept_chunks, written): (Vec<usize>, Vec<&(u128, &[String])>) = if compact {
        (Vec::new(), live.iter().collect())
    } else {
        (kept_chunks, new_texts)
    };
    let chunk = (!written.is_empty()).then(|| {
        let bytes = encode_chunk(&written);
        (content_hash(&bytes), bytes)
    });
    // The new index: the kept chunks renumbered in order, then the new chunk.
    let mut chunks: Vec<(u128, usize)> = Vec::new();
    let mut renumbered: HashMap<usize, usize> = HashMap::new();
    for &c in &kept_chunks {
        if let Some(&entry) = old_chunks.get(c) {
            renumbered.insert(c, chunks.len());
            chunks.push(entry);
        }
    }
    let new_at = chunks.len();
    if let Some((name, bytes)) = &chunk {
        chunks.push((*name, bytes.len()));
    }
    let keys = live
        .iter()
        .map(|(key, _)| {
            let at = match old_at.get(key).and_then(|c| renumbered.get(c)) {
                Some(&at) if in_old(key) => at,
                _ => new_at,
            };
            (*key, at)
        })
        .collect();
    let named: HashSet<u128> = chunks.iter().map(|(name, _)| *name).collect();
    let removed = old_chunks
        .iter()
        .map(|(name, _)| *name)
        .filter(|name| !named.contains(name))
        .collect();
    Some(Plan {
        chunk,
        index: Index {
            context,
            chunks,
            keys,
        },
        removed,
    })
}

/// About the bytes `texts` take in a chunk (their key, count and lengths included).
fn texts_len(texts: &[String]) -> usize {
    texts.iter().map(|t| t.len() + 2).sum::<usize>() + 18
}

impl Index {
    fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(32 + 24 * self.chunks.len() + 20 * self.keys.len());
        out.push(VERSION);
        put_u128(&mut out, self.context);
        put_len(&mut out, self.chunks.len());
        for (name, len) in &self.chunks {
            put_u128(&mut out, *name);
            put_len(&mut out, *len);
        }
        put_len(&mut out, self.keys.len());
        for (key, at) in &self.keys {
            put_u128(&mut out, *key);
            put_len(&mut out, *at);
        }
        out
    }

    /// `None` for bytes that are not an index of this version, whole.
    fn decode(bytes: &[u8]) -> Option<Index> {
        let mut r = Reader::new(bytes.strip_prefix(&[VERSION])?);
        let context = r.u128()?;
        let chunks = (0..r.length()?)
            .map(|_| Some((r.u128()?, r.length()?)))
            .collect::<Option<Vec<_>>>()?;
        let keys = (0..r.length()?)
            .map(|_| Some((r.u128()?, r.length()?)))
            .collect::<Option<Vec<_>>>()?;
        r.is_done().then_some(Index {
            context,
            chunks,
            keys,
        })
    }
}

/// A chunk: each text's key, how many strings it is, then the strings.
fn encode_chunk(texts: &[&(u128, &[String])]) -> Vec<u8> {
    let mut out = Vec::new();
    for (key, strings) in texts {
        put_u128(&mut out, *key);
        put_len(&mut out, strings.len());
        for s in strings.iter() {
            put_str(&mut out, s);
        }
    }
    out
}

/// `None` for bytes that are not a chunk, whole.
fn decode_chunk(bytes: &[u8]) -> Option<Vec<(u128, Vec<String>)>> {
    let mut r = Reader::new(bytes);
    let mut entries = Vec::new();
    while !r.is_done() {
        let key = r.u128()?;
        let strings = (0..r.length()?)
            .map(|_| r.string())
            .collect::<Option<Vec<_>>>()?;
        entries.push((key, strings));
    }
    Some(entries)
}

#[cfg(test)]
mod tests;
