//! The store records a [`KnownList`] is kept in: per key, one record of the lists
//! ([`super::RECORDS`]) and the blocks of their entries ([`BLOCKS`]).
//!
//! A list's entries (where each message is, its fingerprint: 24 bytes a message) are most of
//! what is kept, and a turn adds a few messages to a list of thousands. So every full block of
//! [`BLOCK`] entries is a record of its own, named by its hash, and the list's record holds the
//! block names and the last, partial block: a turn writes the list's record and, every
//! [`BLOCK`] messages, one block, not the whole list again (at a million tokens that was 60 KB
//! a turn, growing with the session). A block no list of the record names any more is
//! removed with the write that stops naming it.

use super::{record_name, KnownList};
use serde_json::Value;
use std::collections::HashSet;
use twox_hash::XxHash3_128;

/// Bumped when the encoding changes: an older record is then ignored (the list is read whole
/// once, and kept in this encoding). 3: the hashes of a list's shorter prefixes. 4: no list of
/// the messages to read anyway (the resume point holds the ones its output kept).
const VERSION: u8 = 4;

/// Where a caller keeps the lists' blocks (a store namespace), each under the name a list's
/// record gives it.
pub const BLOCKS: &str = "known-blocks";

/// Entries in a full block (12 KB).
pub(crate) const BLOCK: usize = 512;

/// Bytes of one entry: a span (two u32) and a fingerprint (u128).
const ENTRY: usize = 24;

/// Lists kept per record: two sessions that start alike (the same first prompt) do not push
/// each other out at every turn.
const KEPT: usize = 2;

/// What to write once a list is known ([`crate::Document::known_record`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KnownWrite {
    /// The record's name in [`super::RECORDS`].
    pub name: String,
    /// The record's bytes.
    pub record: Vec<u8>,
    /// The blocks the record names that the record kept so far did not (name in [`BLOCKS`],
    /// bytes): the others are stored already.
    pub blocks: Vec<(String, Vec<u8>)>,
    /// The blocks the record kept so far named and this one does not: to remove.
    pub stale: Vec<String>,
}

/// The record to keep under `key` once `list` is known, given `get` (a record's bytes by
/// namespace and name, `None` when there is none): `list` first, then the lists kept so far but
/// an earlier list of the same conversation (its messages start `list`'s), [`KEPT`] at most.
pub(crate) fn updated(
    key: u64,
    list: KnownList,
    get: impl Fn(&str, &str) -> Option<Vec<u8>>,
) -> KnownWrite {
    let name = record_name(key);
    let kept = get(super::RECORDS, &name).unwrap_or_default();
    let parsed = parse(&kept).unwrap_or_default();
    let old_blocks: HashSet<String> = parsed
        .iter()
        .flat_map(|p| p.blocks.iter().map(|h| block_name(key, *h)))
        .collect();
    // Stored already: the blocks read back whole. Named but missing or damaged ones are
    // written again when still named, and removed otherwise.
    let mut stored = HashSet::new();
    let others = lists_of(key, parsed, |n| get(BLOCKS, n), &mut stored)
        .into_iter()
        .filter(|k| !(k.messages <= list.messages && list.prints.starts_with(&k.prints)))
        .collect::<Vec<_>>();
    let mut lists = vec![list];
    lists.extend(others);
    lists.truncate(KEPT);
    let (record, blocks) = encode_all(key, &lists);
    let named: HashSet<&str> = blocks.iter().map(|(n, _)| n.as_str()).collect();
    let mut stale: Vec<String> = old_blocks
        .iter()
        .filter(|n| !named.contains(n.as_str()))
        .cloned()
        .collect();
    stale.sort();
    let mut seen = HashSet::new();
    let blocks = blocks
        .into_iter()
        .filter(|(n, _)| !stored.contains(n) && seen.insert(n.clone()))
        .collect();
    KnownWrite {
        name,
        record,
        blocks,
        stale,
    }
}

/// The name of the block of `key`'s lists whose bytes hash to `hash`.
fn block_name(key: u64, hash: u128) -> String {
    format!("{key:016x}-{hash:032x}")
}

fn put_entry(out: &mut Vec<u8>, (start, end): (u32, u32), print: u128) {
    out.extend_from_slice(&start.to_le_bytes());
    out.extend_from_slice(&end.to_le_bytes());
    out.extend_from_slice(&print.to_le_bytes());
}

fn put_len(out: &mut Vec<u8>, n: usize) {
    out.extend_from_slice(&u32::try_from(n).unwrap_or(u32::MAX).to_le_bytes());
}

/// `lists` (kept under `key`) as one record (little-endian, counts as u32) and the blocks it
/// names, in order (a block two lists share appears twice).
pub fn encode_all(key: u64, lists: &[KnownList]) -> (Vec<u8>, Vec<(String, Vec<u8>)>) {
    let mut out = vec![VERSION];
    let mut blocks = Vec::new();
    put_len(&mut out, lists.len());
    for list in lists {
        let n = list.messages.min(list.spans.len()).min(list.prints.len());
        put_len(&mut out, n);
        out.extend_from_slice(&list.bytes.to_le_bytes());
        put_len(&mut out, list.shorter.len());
        for &(m, hash) in &list.shorter {
            put_len(&mut out, m);
            out.extend_from_slice(&hash.to_le_bytes());
        }
        let stubs = serde_json::to_vec(&list.stubs).unwrap_or_default(); // tidy: a `Value` always serializes
        put_len(&mut out, stubs.len());
        out.extend_from_slice(&stubs);
        let entries = || list.spans[..n].iter().zip(&list.prints[..n]);
        let full = n / BLOCK * BLOCK;
        for start in (0..full).step_by(BLOCK) {
            let mut block = Vec::with_capacity(BLOCK * ENTRY);
            for (&span, &print) in entries().skip(start).take(BLOCK) {
                put_entry(&mut block, span, print);
            }
            let hash = XxHash3_128::oneshot(&block);
            out.extend_from_slice(&hash.to_le_bytes());
            blocks.push((block_name(key, hash), block));
        }
        for (&span, &print) in entries().skip(full) {
            put_entry(&mut out, span, print);
        }
    }
    (out, blocks)
}

/// The lists of a record [`encode_all`] wrote under `key`, their blocks read with `block` (by
/// name). A damaged or older record is no knowledge, and a list whose blocks are missing or do
/// not match their names is left out: either way the list is read whole.
pub fn decode_all(
    key: u64,
    bytes: &[u8],
    block: impl Fn(&str) -> Option<Vec<u8>>,
) -> Vec<KnownList> {
    let parsed = parse(bytes).unwrap_or_default();
    lists_of(key, parsed, block, &mut HashSet::new())
}

/// The lists of a record as [`parse`] read it, their blocks read with `block`, noting in
/// `whole` the name of every block read back whole.
fn lists_of(
    key: u64,
    parsed: Vec<Parsed<'_>>,
    block: impl Fn(&str) -> Option<Vec<u8>>,
    whole: &mut HashSet<String>,
) -> Vec<KnownList> {
    parsed
        .into_iter()
        .filter_map(|p| {
            let mut spans = Vec::with_capacity(p.messages);
            let mut prints = Vec::with_capacity(p.messages);
            for hash in &p.blocks {
                let name = block_name(key, *hash);
                let bytes = block(&name)?;
                if bytes.len() != BLOCK * ENTRY || XxHash3_128::oneshot(&bytes) != *hash {
                    return None;
                }
                whole.insert(name);
                read_entries(&bytes, &mut spans, &mut prints)?;
            }
            read_entries(p.tail, &mut spans, &mut prints)?;
            Some(KnownList {
                messages: p.messages,
                bytes: p.bytes,
                shorter: p.shorter,
                spans,
                prints,
                stubs: p.stubs,
            })
        })
        .collect()
}

fn read_entries(
    mut bytes: &[u8],
    spans: &mut Vec<(u32, u32)>,
    prints: &mut Vec<u128>,
) -> Option<()> {
    while !bytes.is_empty() {
        let (entry, rest) = bytes.split_at_checked(ENTRY)?;
        let u32_at = |at: usize| Some(u32::from_le_bytes(entry.get(at..at + 4)?.try_into().ok()?));
        spans.push((u32_at(0)?, u32_at(4)?));
        prints.push(u128::from_le_bytes(entry.get(8..ENTRY)?.try_into().ok()?));
        bytes = rest;
    }
    Some(())
}

/// A list as its record holds it: the entries of its full blocks by the blocks' hashes, the
/// rest in `tail`.
struct Parsed<'b> {
    messages: usize,
    bytes: u128,
    shorter: Vec<(usize, u128)>,
    stubs: Vec<Value>,
    blocks: Vec<u128>,
    tail: &'b [u8],
}

/// A cursor over a record's bytes.
struct Reader<'b>(&'b [u8]);

impl<'b> Reader<'b> {
    fn take(&mut self, n: usize) -> Option<&'b [u8]> {
        let (head, rest) = self.0.split_at_checked(n)?;
        self.0 = rest;
        Some(head)
    }

    fn len(&mut self) -> Option<usize> {
        usize::try_from(u32::from_le_bytes(self.take(4)?.try_into().ok()?)).ok()
    }

    fn u128(&mut self) -> Option<u128> {
        Some(u128::from_le_bytes(self.take(16)?.try_into().ok()?))
    }
}

fn parse(bytes: &[u8]) -> Option<Vec<Parsed<'_>>> {
    let (&version, rest) = bytes.split_first()?;
    if version != VERSION {
        return None;
    }
    let mut r = Reader(rest);
    let count = r.len()?;
    let mut lists = Vec::new();
    for _ in 0..count {
        let messages = r.len()?;
        let hash = r.u128()?;
        let shorter_count = r.len()?;
        // Sizes are checked against what is left before anything is allocated for them.
        if r.0.len() < shorter_count.checked_mul(20)? {
            return None;
        }
        let shorter = (0..shorter_count)
            .map(|_| Some((r.len()?, r.u128()?)))
            .collect::<Option<Vec<_>>>()?;
        let stubs_len = r.len()?;
        let stubs = serde_json::from_slice(r.take(stubs_len)?).ok()?;
        let full = messages / BLOCK;
        if r.0.len() < full.checked_mul(16)? {
            return None;
        }
        let blocks = (0..full).map(|_| r.u128()).collect::<Option<Vec<_>>>()?;
        let tail = r.take((messages % BLOCK) * ENTRY)?;
        lists.push(Parsed {
            messages,
            bytes: hash,
            shorter,
            stubs,
            blocks,
            tail,
        });
    }
    r.0.is_empty().then_some(lists)
}
