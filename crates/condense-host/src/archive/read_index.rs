//! Which way a compressed file was read ([`ReadIndex`]): the store's read-as records and the
//! output hashes its segments were indexed with, so `expand` reads a file the way it was
//! compressed rather than guessing its format.

use super::{message_hash, Index, ReadAs, INDEX_PREFIX, READ_AS_NAMESPACE};
use condense_model::Conversation;
use condense_store::{Store, StoreError};
use std::collections::HashMap;

/// What a store knows about how its conversations were read: each session's [`ReadAs`] record
/// and, per format, every output hash its segments were indexed with. `expand` uses it to read
/// a compressed file the way it was compressed: the way whose conversations' sessions are
/// recorded with it, else whose messages the archive knows best.
#[derive(Debug, Default)]
pub struct ReadIndex {
    /// Session name as on disk (sanitized) -> how it was read.
    read_as: HashMap<String, ReadAs>,
    /// Format -> the output hashes of the segments indexed with it.
    keys: HashMap<String, std::collections::HashSet<String>>,
}

impl ReadIndex {
    /// Loads every read-as and index record of the store (damaged ones are left out: they only
    /// help choose).
    pub fn load(store: &Store) -> Result<ReadIndex, StoreError> {
        let mut index = ReadIndex::default();
        for (name, bytes) in store.records(READ_AS_NAMESPACE)? {
            if let Ok(read_as) = serde_json::from_slice(&bytes) {
                index.read_as.insert(name, read_as);
            }
        }
        for records in store.records_by_prefix(INDEX_PREFIX)? {
            for (_, bytes) in records {
                if let Ok(Index {
                    format: Some(format),
                    keys,
                }) = serde_json::from_slice(&bytes)
                {
                    index.keys.entry(format).or_default().extend(keys);
                }
            }
        }
        Ok(index)
    }

    /// Every way a conversation of this store was read: the recorded [`ReadAs`] records, and
    /// each indexed format without a pointer. Sorted, without duplicates.
    pub fn candidates(&self) -> Vec<ReadAs> {
        let mut out: Vec<ReadAs> = self.read_as.values().cloned().collect();
        out.extend(self.keys.keys().map(|format| ReadAs {
            format: format.clone(),
            select: None,
        }));
        out.sort();
        out.dedup();
        out
    }

    /// How `session` was read, if recorded.
    pub fn recorded(&self, session: &str) -> Option<&ReadAs> {
        self.read_as
            .get(&condense_store::sanitize_component(session))
    }

    /// How many messages of `conv` are outputs the archive recorded for `format`.
    pub fn hits(&self, format: &str, conv: &Conversation) -> usize {
        self.keys.get(format).map_or(0, |keys| {
            conv.messages
                .iter()
                // A message that cannot be hashed was never archived (archiving it fails).
                .filter(|m| message_hash(m).is_ok_and(|k| keys.contains(&k)))
                .count()
        })
    }
}
