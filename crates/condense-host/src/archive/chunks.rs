//! What one stage run archives, split into segments of bounded size.
//!
//! A later run reads originals back one message at a time: a context-collapse commit asks
//! for the originals of the span it summarizes ([`super::Rewrites`]). A segment is read whole
//! (decompressed and parsed), so with one segment per stage run, a session's first run, whose
//! snip segment holds the originals of most of its tool results (4.8 MB on a 1M-token session),
//! made every later commit read all of it for a dozen messages: 12 ms of a 54 ms turn.
//!
//! So a draft larger than [`SEGMENT_BYTES`] is written as several segments. Each output key
//! goes whole into one segment with the originals its entries name, so what `expand` applies
//! per key, and how it tells a rerun's identical entries apart, is the same as with one
//! segment. Keys go in the order of their first original, which follows the conversation, so
//! a span's originals sit in one or two segments. A draft within the limit is written as
//! before, byte for byte (same segment, same name).

use super::{originals_of, Draft, Entry};
use condense_model::Message;
use std::collections::HashMap;

/// About this many bytes of originals per segment (more when one key's originals alone are
/// more: they are never split).
pub(super) const SEGMENT_BYTES: usize = 64 * 1024;

/// A message's share of a segment, roughly: its payload and unknown fields (the JSON adds a
/// little; its original bytes, when stored too, about as much again).
fn approx_bytes(m: &Message) -> usize {
    m.content.text_len() + m.extra.len() + m.envelope.len() + m.id.len() + 64
}

/// `entry` with each original index `i` replaced by `at(i)`.
fn reindex(entry: Entry, mut at: impl FnMut(usize) -> usize) -> Entry {
    let mut all = |v: Vec<usize>| v.into_iter().map(&mut at).collect();
    match entry {
        Entry::Replace { original } => Entry::Replace {
            original: at(original),
        },
        Entry::ReplaceNew { originals } => Entry::ReplaceNew {
            originals: all(originals),
        },
        Entry::InsertBefore { originals } => Entry::InsertBefore {
            originals: all(originals),
        },
        Entry::InsertAfter { originals } => Entry::InsertAfter {
            originals: all(originals),
        },
        Entry::Remove => Entry::Remove,
        Entry::Header => Entry::Header,
    }
}

impl<'m, 't> Draft<'m, 't> {
    /// This draft as segments of about `limit` bytes of originals each (see the
    /// [module docs](self)); itself when it is within the limit.
    pub(super) fn split(mut self, limit: usize) -> Vec<Draft<'m, 't>> {
        let message_bytes = |i: usize| self.messages.get(i).map_or(0, |(m, _)| approx_bytes(m));
        let total: usize = (0..self.messages.len()).map(message_bytes).sum();
        if total <= limit {
            return vec![self];
        }
        let entries = std::mem::take(&mut self.entries);
        // Each key with the first original it names (keys naming none go first), then by key:
        // a deterministic order that follows the conversation.
        let mut keys: Vec<(usize, String, Vec<Entry>)> = entries
            .into_iter()
            .map(|(key, es)| {
                let first = es.iter().flat_map(originals_of).min().copied().unwrap_or(0);
                (first, key, es)
            })
            .collect();
        keys.sort_by(|a, b| (a.0, &a.1).cmp(&(b.0, &b.1)));

        let fresh = |texts| Draft {
            texts,
            ..Draft::default()
        };
        let mut out = Vec::new();
        let mut current = fresh(self.texts);
        let mut moved: HashMap<usize, usize> = HashMap::new();
        let mut bytes = 0;
        for (_, key, es) in keys {
            // What this key adds to the segment being filled: its originals not already in it.
            let needed: usize = es
                .iter()
                .flat_map(originals_of)
                .filter(|i| !moved.contains_key(i))
                .map(|&i| message_bytes(i))
                .sum();
            if bytes > 0 && bytes + needed > limit {
                out.push(std::mem::replace(&mut current, fresh(self.texts)));
                moved.clear();
                bytes = 0;
            }
            let mut es: Vec<Entry> = es
                .into_iter()
                .map(|e| {
                    reindex(e, |i| {
                        *moved.entry(i).or_insert_with(|| {
                            bytes += message_bytes(i);
                            // An entry names only indices `Draft::keep` returned.
                            current.messages.push(self.messages[i]);
                            current.messages.len() - 1
                        })
                    })
                })
                .collect();
            if es.iter().any(|e| matches!(e, Entry::Header)) {
                current.header = self.header.take();
            }
            current.entries.entry(key).or_default().append(&mut es);
        }
        if !current.entries.is_empty() {
            out.push(current);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use condense_model::{Block, Role};

    fn message(i: usize, len: usize) -> Message {
        Message::new(
            format!("m{i}"),
            Role::User,
            vec![Block::text("x".repeat(len))],
        )
    }

    /// A draft within the limit stays one segment; a larger one splits by key, each key with
    /// the originals its entries name, in the conversation's order.
    #[test]
    fn splits_by_key_in_conversation_order() {
        let messages: Vec<Message> = (0..10).map(|i| message(i, 1000)).collect();
        let mut draft = Draft::default();
        for (i, m) in messages.iter().enumerate() {
            let at = draft.keep(m, i);
            // Keys in reverse of the conversation: the split must reorder them.
            draft.add(format!("k{}", 9 - i), Entry::Replace { original: at });
        }
        let at = draft.keep(&messages[0], 0);
        draft.add(
            "k9".into(),
            Entry::InsertAfter {
                originals: vec![at],
            },
        );
        draft.add("removed".into(), Entry::Remove);

        let whole = Draft {
            entries: draft.entries.clone(),
            messages: draft.messages.clone(),
            ..Draft::default()
        };
        assert_eq!(whole.split(100_000).len(), 1);

        let parts = draft.split(2500);
        assert!(parts.len() >= 4, "{} segments", parts.len());
        let mut seen = Vec::new();
        for part in &parts {
            for (key, entries) in &part.entries {
                seen.push(key.clone());
                for e in entries {
                    for &i in originals_of(e) {
                        let (m, _) = part.messages[i];
                        if key != "removed" {
                            // k9 names message 0 twice (replace and insert after).
                            let n: usize = key[1..].parse().unwrap();
                            assert_eq!(m.id, format!("m{}", 9 - n), "{key}");
                        }
                    }
                }
            }
        }
        seen.sort();
        let mut want: Vec<String> = (0..10).map(|i| format!("k{i}")).collect();
        want.push("removed".into());
        want.sort();
        assert_eq!(seen, want, "every key exactly once");
        // The first segment holds the start of the conversation.
        assert!(parts[0].messages.iter().any(|(m, _)| m.id == "m0"));
    }
}
