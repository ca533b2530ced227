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
//!
//! A Claude Code session's list also keeps what the read knew of each line
//! ([`super::LineMemo`]: about 150 bytes a line), in blocks of [`LINES_BLOCK`] lines named the
//! same way, with the lines' numbers and the reported usage in the list's record.

use super::{record_name, KnownList};
use serde_json::Value;
use std::collections::HashSet;
use twox_hash::XxHash3_128;

/// Bumped when the encoding changes: an older record is then ignored (the list is read whole
/// once, and kept in this encoding). 3: the hashes of a list's shorter prefixes. 4: no list of
/// the messages to read anyway (the resume point holds the ones its output kept). 5: a Claude
/// Code session's lines. 6: their strings as `condense_model::packed` writes them.
const VERSION: u8 = 6;

/// Where a caller keeps the lists' blocks (a store namespace), each under the name a list's
/// record gives it.
pub const BLOCKS: &str = "known-blocks";

/// Entries in a full block (12 KB).
pub(crate) const BLOCK: usize = 512;

/// Bytes of one entry: a span (two u32) and a fingerprint (u128).
const ENTRY: usize = 24;

/// A session's lines in a full block of their facts: a turn rewrites fewer than this many in
/// the list's record (a line's facts are about six times an entry).
pub(crate) const LINES_BLOCK: usize = 64;

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
        .flat_map(|p| {
            let lines = p.lines.iter().flat_map(|l| &l.blocks);
            p.blocks.iter().chain(lines).map(|h| block_name(key, *h))
        })
        .collect();
    // Stored already: the blocks read back whole. Named but missing or damaged ones are
    // written again when still named, and removed otherwise.
    let mut stored = HashSet::new();
    // An earlier list of the same conversation is dropped: a session's lines in it are only
    // checked, not decoded (the new list has them).
    let earlier = |k: &KnownList| k.messages <= list.messages && list.prints.starts_with(&k.prints);
    let others = lists_of(key, parsed, |n| get(BLOCKS, n), &mut stored, &|k| {
        !earlier(k)
    })
    .into_iter()
    .filter(|k| !earlier(k))
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
        match list
            .lines
            .as_ref()
            .filter(|l| l.facts.len() == n && l.context.len() == n)
        {
            Some(memo) => put_lines(&mut out, memo, key, &mut blocks),
            None => out.push(0),
        }
    }
    (out, blocks)
}

/// A session's [`super::LineMemo`] after its list's entries: a flag, the first and last line
/// numbers, the reported usage (a flag, its line, four counts, its source), then the hashes of
/// the full blocks of [`LINES_BLOCK`] lines (each block into `blocks`) and the rest of the
/// lines, with their length.
fn put_lines(
    out: &mut Vec<u8>,
    memo: &super::LineMemo,
    key: u64,
    blocks: &mut Vec<(String, Vec<u8>)>,
) {
    use crate::claude_code::known::encode_lines;
    out.push(1);
    put_len(out, memo.numbers.0);
    put_len(out, memo.numbers.1);
    match &memo.usage {
        Some((line, usage)) => {
            out.push(1);
            put_len(out, *line);
            for n in [
                usage.input_tokens,
                usage.cache_read_tokens,
                usage.cache_write_tokens,
                usage.output_tokens,
            ] {
                out.extend_from_slice(&n.to_le_bytes());
            }
            put_len(out, usage.source.len());
            out.extend_from_slice(usage.source.as_bytes());
        }
        None => out.push(0),
    }
    let full = memo.facts.len() / LINES_BLOCK * LINES_BLOCK;
    for start in (0..full).step_by(LINES_BLOCK) {
        let end = start + LINES_BLOCK;
        let block = encode_lines(&memo.facts[start..end], &memo.context[start..end]);
        let hash = XxHash3_128::oneshot(&block);
        out.extend_from_slice(&hash.to_le_bytes());
        blocks.push((block_name(key, hash), block));
    }
    let rest = encode_lines(&memo.facts[full..], &memo.context[full..]);
    put_len(out, rest.len());
    out.extend_from_slice(&rest);
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
    lists_of(key, parsed, block, &mut HashSet::new(), &|_| true)
}

/// The lists of a record as [`parse`] read it, their blocks read with `block`, noting in
/// `whole` the name of every block read back whole. A session's lines are decoded only for a
/// list `decode` wants (asked before they are); another's are only checked.
fn lists_of(
    key: u64,
    parsed: Vec<Parsed<'_>>,
    block: impl Fn(&str) -> Option<Vec<u8>>,
    whole: &mut HashSet<String>,
    decode: &dyn Fn(&KnownList) -> bool,
) -> Vec<KnownList> {
    parsed
        .into_iter()
        .filter_map(|p| {
            let mut spans = Vec::with_capacity(p.messages);
            let mut prints = Vec::with_capacity(p.messages);
            for hash in &p.blocks {
                let bytes = whole_block(key, *hash, &block, whole)?;
                if bytes.len() != BLOCK * ENTRY {
                    return None;
                }
                read_entries(&bytes, &mut spans, &mut prints)?;
            }
            read_entries(p.tail, &mut spans, &mut prints)?;
            let mut list = KnownList {
                messages: p.messages,
                bytes: p.bytes,
                shorter: p.shorter,
                spans,
                prints,
                stubs: p.stubs,
                lines: None,
            };
            if let Some(lines) = p.lines {
                if decode(&list) {
                    list.lines = Some(lines.memo(key, p.messages, &block, whole)?);
                } else {
                    lines.check(key, &block, whole)?;
                }
            }
            Some(list)
        })
        .collect()
}

/// The bytes of `key`'s block of hash `hash`, read with `block`, noted in `whole`: `None`
/// when it is missing or its bytes do not hash to its name.
fn whole_block(
    key: u64,
    hash: u128,
    block: impl Fn(&str) -> Option<Vec<u8>>,
    whole: &mut HashSet<String>,
) -> Option<Vec<u8>> {
    let name = block_name(key, hash);
    let bytes = block(&name)?;
    if XxHash3_128::oneshot(&bytes) != hash {
        return None;
    }
    whole.insert(name);
    Some(bytes)
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
    lines: Option<ParsedLines<'b>>,
}

/// A session's lines as a list's record holds them ([`put_lines`]).
struct ParsedLines<'b> {
    numbers: (usize, usize),
    usage: Option<(usize, crate::ReportedUsage)>,
    blocks: Vec<u128>,
    tail: &'b [u8],
}

impl ParsedLines<'_> {
    /// Whether every full block is stored as named (noted in `whole`), without decoding it.
    fn check(
        &self,
        key: u64,
        block: impl Fn(&str) -> Option<Vec<u8>>,
        whole: &mut HashSet<String>,
    ) -> Option<()> {
        for hash in &self.blocks {
            whole_block(key, *hash, &block, whole)?;
        }
        Some(())
    }

    /// The memo of a list of `messages` lines, its blocks read with `block` (noted in `whole`
    /// when read back whole); `None` when one is missing, damaged, or the lines are not
    /// `messages`.
    fn memo(
        self,
        key: u64,
        messages: usize,
        block: impl Fn(&str) -> Option<Vec<u8>>,
        whole: &mut HashSet<String>,
    ) -> Option<super::LineMemo> {
        use crate::claude_code::known::decode_lines;
        let (mut facts, mut context) = (Vec::with_capacity(messages), Vec::new());
        for hash in &self.blocks {
            let bytes = whole_block(key, *hash, &block, whole)?;
            let before = facts.len();
            decode_lines(&bytes, (&mut facts, &mut context))?;
            if facts.len() - before != LINES_BLOCK {
                return None;
            }
        }
        decode_lines(self.tail, (&mut facts, &mut context))?;
        (facts.len() == messages).then_some(super::LineMemo {
            facts: std::sync::Arc::new(facts),
            context,
            numbers: self.numbers,
            usage: self.usage,
        })
    }
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

/// What [`put_lines`] wrote after its flag, for a list of `messages` lines.
fn parse_lines<'b>(r: &mut Reader<'b>, messages: usize) -> Option<ParsedLines<'b>> {
    let numbers = (r.len()?, r.len()?);
    let usage = match r.take(1)? {
        [0] => None,
        [1] => {
            let line = r.len()?;
            let mut n = || Some(u64::from_le_bytes(r.take(8)?.try_into().ok()?));
            let (input_tokens, cache_read_tokens) = (n()?, n()?);
            let (cache_write_tokens, output_tokens) = (n()?, n()?);
            let source_len = r.len()?;
            let source = std::str::from_utf8(r.take(source_len)?).ok()?.to_string();
            let usage = crate::ReportedUsage {
                input_tokens,
                cache_read_tokens,
                cache_write_tokens,
                output_tokens,
                source,
            };
            Some((line, usage))
        }
        _ => return None,
    };
    let full = messages / LINES_BLOCK;
    if r.0.len() < full.checked_mul(16)? {
        return None;
    }
    let blocks = (0..full).map(|_| r.u128()).collect::<Option<Vec<_>>>()?;
    let tail_len = r.len()?;
    let tail = r.take(tail_len)?;
    Some(ParsedLines {
        numbers,
        usage,
        blocks,
        tail,
    })
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
        let lines = match r.take(1)? {
            [0] => None,
            [1] => Some(parse_lines(&mut r, messages)?),
            _ => return None,
        };
        lists.push(Parsed {
            messages,
            bytes: hash,
            shorter,
            stubs,
            blocks,
            tail,
            lines,
        });
    }
    r.0.is_empty().then_some(lists)
}
