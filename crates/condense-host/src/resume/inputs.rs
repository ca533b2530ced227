//! Resuming a turn whose client edited its own history.
//!
//! Many agents keep their own context small by editing what they send: OpenHands'
//! `observation_masking` condenser turns observations older than its window into `<MASKED>`,
//! SWE-agent's `last_n_observations` elides all but the newest observations, LangChain's
//! `ClearToolUsesEdit` clears old tool results. Each turn, one more old message changes. A
//! point that only compared its input's prefix by one hash lost the resume at every such turn:
//! the stages ran over the whole input again.
//!
//! So a point also keeps, per input message, the fingerprint it compares the message by
//! ([`super::marks::compared`]: marks left out) and the message's tokens ([`Entry`]). When the
//! next input's prefix hash differs but its frame (system prompt, tools) does not, the start
//! compares the messages one by one ([`edited`]): the ones that differ are taken from the
//! input as a message whose marks moved is ([`super::marks::places`]), and the whole input's
//! count is the point's less their old tokens plus their new ones. A message the output
//! stands for nowhere alone (folded into a summary, dropped) still means a run over the whole
//! input.
//!
//! The list is long (a million-token session has 2,370 messages), and an ordinary turn only
//! adds to it: it is kept in blocks of [`BLOCK`] entries, each a record named by the hash of
//! its bytes in the session's block namespace ([`super::blocks`]), and the point holds the
//! blocks' names and the entries past the last full block. A turn writes a block when one
//! fills; the blocks are read only when the prefix hash differs.

use super::blocks;
use super::marks::{self, Print};
use super::{InputHash, Point};
use condense_model::{duplicate, Message};
use condense_store::Store;
use serde::{Deserialize, Serialize};
use std::borrow::Cow;
use std::collections::HashSet;

/// Entries in a full block (1,280 bytes): a block is written every 64 messages, and the
/// point carries at most 63 entries (about 2.9 KB of its JSON).
pub(super) const BLOCK: usize = 64;

/// An entry's bytes in a block: the fingerprint (16, little-endian), the tokens (4).
const ENTRY: usize = 20;

/// One input message as a point keeps it: the fingerprint it is compared by, and its tokens.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct Entry(pub(super) Print, pub(super) u32);

/// What the next point keeps of its input's messages ([`super::InputHash::tokens`]): the
/// names of stored blocks holding the first entries, and the tokens of every message after
/// them (their fingerprints are the input's, compared).
#[derive(Debug, Clone)]
pub(super) struct Tokens {
    pub(super) blocks: Vec<String>,
    pub(super) after: Vec<u32>,
}

impl Tokens {
    /// A whole input's: every message's tokens, no block.
    pub(super) fn whole(tokens: &[usize]) -> Tokens {
        Tokens {
            blocks: Vec::new(),
            after: tokens.iter().map(|&n| clamp(n)).collect(),
        }
    }

    /// How many messages it covers.
    pub(super) fn len(&self) -> usize {
        self.blocks.len() * BLOCK + self.after.len()
    }
}

/// `n` tokens as an entry holds them (a message of more than 4 billion tokens holds the most).
pub(super) fn clamp(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// `entries` as full blocks (name, bytes) and the entries past them.
pub(super) fn split(entries: &[Entry]) -> (Vec<blocks::Block>, &[Entry]) {
    let full = entries.len() / BLOCK * BLOCK;
    let blocks = entries[..full]
        .chunks(BLOCK)
        .map(|chunk| {
            let mut bytes = Vec::with_capacity(BLOCK * ENTRY);
            for Entry(print, tokens) in chunk {
                bytes.extend_from_slice(&print.0.to_le_bytes());
                bytes.extend_from_slice(&tokens.to_le_bytes());
            }
            blocks::named(bytes)
        })
        .collect();
    (blocks, &entries[full..])
}

/// The entries of `names`' blocks followed by `tail`. `None` when a block is missing or is
/// not what its name says.
pub(super) fn join(
    store: &Store,
    session: &str,
    names: &[Cow<'_, str>],
    tail: &[Entry],
) -> Option<Vec<Entry>> {
    let mut out = Vec::with_capacity(names.len() * BLOCK + tail.len());
    for bytes in blocks::read(store, session, names, BLOCK * ENTRY)? {
        for entry in bytes.chunks_exact(ENTRY) {
            let (print, tokens) = entry.split_at(16);
            out.push(Entry(
                Print(u128::from_le_bytes(print.try_into().ok()?)),
                u32::from_le_bytes(tokens.try_into().ok()?),
            ));
        }
    }
    out.extend_from_slice(tail);
    Some(out)
}

/// The messages of a point's input (`before`, one entry each) that this input (`compared`,
/// each message's fingerprint as a point compares it) has changed, by index; `None` when none
/// did (the prefix hash differed for another reason) or `compared` is shorter.
pub(super) fn edited(before: &[Entry], compared: &[u128]) -> Option<Vec<usize>> {
    let now = compared.get(..before.len())?;
    let edited: Vec<usize> = before
        .iter()
        .zip(now)
        .enumerate()
        .filter(|(_, (entry, &print))| entry.0 .0 != print)
        .map(|(i, _)| i)
        .collect();
    (!edited.is_empty()).then_some(edited)
}

/// The messages of `point`'s input that `hash`'s input edited in place ([`edited`]),
/// with the point's entries of its input list; `None` when its list is not whole (an older
/// point's, or a block missing) or no message differs.
pub(super) fn edits_of(
    store: &Store,
    session: &str,
    point: &Point<'_>,
    hash: &InputHash,
) -> Option<(Vec<usize>, Vec<Entry>)> {
    if !point.lists_inputs() {
        return None;
    }
    let entries = join(store, session, &point.input_blocks, &point.input_list)?;
    let edited = edited(&entries, &marks::compared(&hash.each, &hash.marks, 0))?;
    Some((edited, entries))
}

/// The input messages (by origin) of the output messages a stage turned into a duplicate
/// marker ([`condense_model::duplicate`]) pointing at a tool result of an `edited` message of
/// `input`: snip kept that copy in their place, and it is not what it was (a masked
/// observation), so the stages make them again from the input, as a run over the whole input
/// would not have found them duplicates. `stored`: the output's stored messages, at the
/// `layout`'s -1 places in order. `None` when such a message stands for no input message alone
/// (it cannot be made again: the run goes over the whole input).
pub(super) fn pointing_at_edited(
    input: &[Message],
    edited: &[usize],
    (stored, layout, origins): (&[(u128, Message)], &[i64], &[i64]),
) -> Option<Vec<usize>> {
    let ids: HashSet<&str> = edited
        .iter()
        .filter_map(|&i| input.get(i))
        .flat_map(|m| m.tool_results().map(|r| r.tool_use_id.as_str()))
        .collect();
    let mut leaning = Vec::new();
    if ids.is_empty() {
        return Some(leaning);
    }
    let stored_at = layout.iter().enumerate().filter(|(_, &from)| from == -1);
    for ((at, _), (_, m)) in stored_at.zip(stored) {
        let points = m.tool_results().any(|r| {
            duplicate::pointed_to(&r.content.text()).is_some_and(|(_, id)| ids.contains(id))
        });
        if points {
            let origin = origins.get(at).and_then(|&o| usize::try_from(o).ok())?;
            leaning.push(origin);
        }
    }
    Some(leaning)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use twox_hash::XxHash3_128;

    fn entries(n: usize, salt: u128) -> Vec<Entry> {
        (0..n)
            .map(|i| {
                Entry(
                    Print(XxHash3_128::oneshot(&(i as u128 ^ salt).to_le_bytes())),
                    i as u32,
                )
            })
            .collect()
    }

    #[test]
    fn entries_come_back_from_their_blocks_and_a_damaged_block_is_no_list() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let list = entries(BLOCK * 2 + 5, 0);
        let (full, tail) = split(&list);
        assert_eq!((full.len(), tail.len()), (2, 5));
        for (name, bytes) in &full {
            store
                .record_put(&blocks::namespace("s"), name, bytes)
                .unwrap();
        }
        let names: Vec<Cow<'_, str>> = full.iter().map(|(n, _)| Cow::Borrowed(&n[..])).collect();
        assert_eq!(join(&store, "s", &names, tail).unwrap(), list);
        // A block of the same list is the same block: a grown list keeps its full blocks.
        let (grown, _) = split(&entries(BLOCK * 3, 0));
        assert_eq!(grown[..2], full[..]);
        store
            .record_put(&blocks::namespace("s"), &full[0].0, &[0; BLOCK * ENTRY])
            .unwrap();
        assert!(join(&store, "s", &names, tail).is_none());
        store
            .record_remove(&blocks::namespace("s"), &full[0].0)
            .unwrap();
        assert!(join(&store, "s", &names, tail).is_none());
    }

    #[test]
    fn the_edited_messages_are_those_whose_print_changed() {
        let before = entries(6, 0);
        let mut now: Vec<u128> = before.iter().map(|e| e.0 .0).collect();
        // Nothing changed, or fewer messages: no edit to resume through.
        assert_eq!(edited(&before, &now), None);
        assert_eq!(edited(&before, &now[..5]), None);
        now[1] ^= 1;
        now[4] ^= 1;
        now.push(7);
        assert_eq!(edited(&before, &now), Some(vec![1, 4]));
    }
}
