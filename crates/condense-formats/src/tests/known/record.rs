//! The records a known list is kept in ([`crate::known::encode_all`], the blocks of its
//! entries): they read back as the list, a damaged one is no knowledge, and a turn that adds a
//! few messages writes the list's record and no block until one fills.

use super::body;
use crate::known::{self, KnownList, KnownWrite, BLOCKS, RECORDS};
use crate::{read_owned, ReadOptions};
use std::collections::HashMap;

/// The key and list a read of a body of `n` messages knows.
fn list_of(n: usize) -> (u64, KnownList) {
    let doc = read_owned(body(n, "").into_bytes(), "a.json", &ReadOptions::default()).unwrap();
    doc.known_list().unwrap()
}

/// A store's records, by namespace and name.
#[derive(Default)]
pub(super) struct Records(HashMap<(String, String), Vec<u8>>);

impl Records {
    pub(super) fn get(&self) -> impl Fn(&str, &str) -> Option<Vec<u8>> + '_ {
        |ns, name| self.0.get(&(ns.to_string(), name.to_string())).cloned()
    }

    pub(super) fn apply(&mut self, w: &KnownWrite) {
        for (name, bytes) in &w.blocks {
            self.0.insert((BLOCKS.into(), name.clone()), bytes.clone());
        }
        self.0
            .insert((RECORDS.into(), w.name.clone()), w.record.clone());
        for name in &w.stale {
            assert!(
                self.0.remove(&(BLOCKS.into(), name.clone())).is_some(),
                "{name}"
            );
        }
    }

    fn blocks(&self) -> usize {
        self.0.keys().filter(|(ns, _)| ns == BLOCKS).count()
    }

    pub(super) fn known(&self, key: u64) -> Vec<KnownList> {
        known::lookup(self.get())(key)
    }

    /// The names of the blocks that are not a list's entries (a session's lines).
    pub(super) fn line_blocks(&self) -> Vec<String> {
        let mut names: Vec<String> = (self.0.iter())
            .filter(|((ns, _), bytes)| ns == BLOCKS && bytes.len() != 512 * 24)
            .map(|((_, name), _)| name.clone())
            .collect();
        names.sort();
        names
    }

    /// Flips a byte of the block `name`.
    pub(super) fn damage(&mut self, name: &str) {
        let bytes = self.0.get_mut(&(BLOCKS.into(), name.into())).unwrap();
        bytes[3] ^= 1;
    }
}

#[test]
fn lists_round_trip_through_their_record_and_blocks_and_damage_is_no_knowledge() {
    let (key, a) = list_of(1_200);
    assert_eq!(a.messages, 1_200);
    let mut b = a.clone();
    b.messages = 0;
    b.spans.clear();
    b.prints.clear();
    let (record, blocks) = known::encode_all(key, &[a.clone(), b.clone()]);
    assert_eq!(
        blocks.len(),
        2,
        "two full blocks of 512, the rest in the record"
    );
    let stored: HashMap<String, Vec<u8>> = blocks.into_iter().collect();
    let block = |name: &str| stored.get(name).cloned();
    assert_eq!(
        known::decode_all(key, &record, block),
        vec![a.clone(), b.clone()]
    );
    for cut in 0..record.len() {
        assert!(
            known::decode_all(key, &record[..cut], block).is_empty(),
            "cut at {cut}"
        );
    }
    let mut longer = record.clone();
    longer.push(0);
    assert!(known::decode_all(key, &longer, block).is_empty());
    let mut older = record.clone();
    older[0] = 1;
    assert!(known::decode_all(key, &older, block).is_empty());
    // A count far past the bytes allocates nothing.
    assert!(known::decode_all(key, &[2, 1, 0, 0, 0, 255, 255, 255, 255], block).is_empty());
    // A block missing, or not what its name says: that list alone is not known.
    let (first, _) = stored.iter().next().unwrap();
    let missing = |name: &str| (name != first).then(|| stored.get(name).cloned()).flatten();
    assert_eq!(known::decode_all(key, &record, missing), vec![b.clone()]);
    let damaged = |name: &str| {
        let mut bytes = stored.get(name).cloned()?;
        bytes[30] ^= 1;
        Some(bytes)
    };
    assert_eq!(known::decode_all(key, &record, damaged), vec![b]);
}

#[test]
fn a_growing_list_writes_its_record_and_a_block_only_when_one_fills() {
    let mut records = Records::default();
    let (key, first) = list_of(1_020);
    let w = known::updated(key, first.clone(), records.get());
    assert_eq!((w.blocks.len(), w.stale.len()), (1, 0));
    records.apply(&w);
    assert_eq!(records.known(key), vec![first]);

    // A few messages more: the full block is the same, so only the record is written.
    let (_, grown) = list_of(1_023);
    let w = known::updated(key, grown.clone(), records.get());
    assert!(w.blocks.is_empty() && w.stale.is_empty());
    // The record holds the 511 entries past the block, not all 1,023.
    assert!(
        w.record.len() < 1_023 * 24 - 300 * 24,
        "{} bytes",
        w.record.len()
    );
    records.apply(&w);
    assert_eq!(
        records.known(key),
        vec![grown.clone()],
        "the earlier list made way"
    );

    // Past 1,024: one block more.
    let (_, past) = list_of(1_030);
    let w = known::updated(key, past.clone(), records.get());
    assert_eq!((w.blocks.len(), w.stale.len()), (1, 0));
    records.apply(&w);
    assert_eq!(records.blocks(), 2);
    assert_eq!(records.known(key), vec![past.clone()]);

    // Another conversation under the same key (same first message, another history) is kept
    // beside it; a third pushes the oldest out, and its blocks with it.
    let mut other = past.clone();
    other.prints[600] ^= 1;
    other.bytes ^= 1;
    let w = known::updated(key, other.clone(), records.get());
    assert_eq!(
        (w.blocks.len(), w.stale.len()),
        (1, 0),
        "its second block differs"
    );
    records.apply(&w);
    assert_eq!(records.known(key), vec![other.clone(), past]);
    let mut third = other.clone();
    third.prints[10] ^= 1;
    third.bytes ^= 2;
    let w = known::updated(key, third.clone(), records.get());
    // Its first block is new, its second is the other's; the oldest's second goes.
    assert_eq!((w.blocks.len(), w.stale.len()), (1, 1));
    records.apply(&w);
    assert_eq!(records.known(key), vec![third, other]);
    assert_eq!(records.blocks(), 3);
}

#[test]
fn a_named_block_gone_missing_is_written_again() {
    let mut records = Records::default();
    let (key, list) = list_of(1_100);
    records.apply(&known::updated(key, list.clone(), records.get()));
    records.0.retain(|(ns, _), _| ns != BLOCKS);
    assert!(records.known(key).is_empty());
    let w = known::updated(key, list.clone(), records.get());
    assert_eq!((w.blocks.len(), w.stale.len()), (2, 0));
    records.apply(&w);
    assert_eq!(records.known(key), vec![list]);
}
