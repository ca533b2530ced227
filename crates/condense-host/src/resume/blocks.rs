//! The long lists of a resume point (the names of its output's stored messages, its output's
//! archive keys: 32 hex digits each) kept in blocks of [`BLOCK`], each a record of the
//! session's `resume-blocks-` namespace named by the hash of its bytes (16 a name); the point
//! holds the blocks' names and the names past the last full block. A turn adds a few messages
//! to an output of hundreds: it writes the point and, every [`BLOCK`] names, one block, where
//! the whole list was written again (at a million tokens 27 KB of the point's 35, a turn,
//! growing with the session). A block the new point no longer names is removed with it.

use condense_store::{Store, StoreError};
use std::borrow::{Borrow, Cow};
use std::collections::HashSet;
use twox_hash::XxHash3_128;

/// Names in a full block (4 KB).
const BLOCK: usize = 256;

/// A block: its name and bytes.
pub(super) type Block = (String, Vec<u8>);

/// The store namespace of `session`'s blocks (also those of a point's input list,
/// [`super::inputs`]).
pub(super) fn namespace(session: &str) -> String {
    format!("resume-blocks-{session}")
}

/// `h` as 32 lowercase hex digits, as `format!("{h:032x}")` writes it: a turn at 1M tokens
/// turns about 800 names back from their blocks, where the formatter cost 0.8 M instructions.
pub(super) fn hex(h: u128) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = vec![0; 32];
    for (i, digit) in out.iter_mut().enumerate() {
        *digit = DIGITS[((h >> ((31 - i) * 4)) & 0xf) as usize];
    }
    // Filled byte by byte: pushing chars cost a UTF-8 encoding each (0.6 M a turn).
    String::from_utf8(out).unwrap_or_default()
}

/// A name as 16 bytes, when it is 32 hex digits (either case), read as two halves of 64 bits:
/// a turn of a long Claude Code session reads 17,500 names (its output's names and keys) into
/// blocks: 5.0 M instructions with `u128::from_str_radix`, 3.4 M this way.
pub(super) fn parse(name: &str) -> Option<u128> {
    let half = |digits: &[u8]| {
        digits.iter().try_fold(0u64, |n, &b| {
            let digit = match b {
                b'0'..=b'9' => b - b'0',
                b'a'..=b'f' => b - b'a' + 10,
                b'A'..=b'F' => b - b'A' + 10,
                _ => return None,
            };
            Some(n << 4 | u64::from(digit))
        })
    };
    let bytes = name.as_bytes();
    if bytes.len() != 32 {
        return None;
    }
    let (high, low) = bytes.split_at(16);
    Some(u128::from(half(high)?) << 64 | u128::from(half(low)?))
}

/// `names` as full blocks (name, bytes) and the names past them; every name kept in the
/// point when one is not 32 hex digits.
pub(super) fn split<'s, 'c>(names: &'s [Cow<'c, str>]) -> (Vec<Block>, &'s [Cow<'c, str>]) {
    let full = names.len() / BLOCK * BLOCK;
    let mut blocks = Vec::with_capacity(full / BLOCK);
    for chunk in names[..full].chunks(BLOCK) {
        let mut bytes = Vec::with_capacity(BLOCK * 16);
        for name in chunk {
            let Some(n) = parse(name) else {
                return (Vec::new(), names);
            };
            bytes.extend_from_slice(&n.to_le_bytes());
        }
        blocks.push(named(bytes));
    }
    (blocks, &names[full..])
}

/// A block of `bytes`, named by their hash.
pub(super) fn named(bytes: Vec<u8>) -> Block {
    (hex(XxHash3_128::oneshot(&bytes)), bytes)
}

/// The bytes of the blocks `names` (in `session`'s namespace), each checked to be `len` bytes
/// that hash to its name. `None` when one is missing or is not what its name says.
pub(super) fn read(
    store: &Store,
    session: &str,
    names: &[Cow<'_, str>],
    len: usize,
) -> Option<Vec<Vec<u8>>> {
    if names.is_empty() {
        return Some(Vec::new());
    }
    let wanted: Vec<&str> = names.iter().map(|b| b.as_ref()).collect();
    let read = store.records_get(&namespace(session), &wanted).ok()?;
    wanted
        .iter()
        .zip(read)
        .map(|(name, bytes)| {
            bytes.filter(|b| b.len() == len && parse(name) == Some(XxHash3_128::oneshot(b)))
        })
        .collect()
}

/// The names of `blocks`, as a point names them.
pub(super) fn names(blocks: &[Block]) -> Vec<Cow<'_, str>> {
    blocks
        .iter()
        .map(|(name, _)| Cow::Borrowed(name.as_str()))
        .collect()
}

/// The names of `blocks` (read from `session`'s namespace) followed by `tail`. `None` when a
/// block is missing or is not what its name says: the point is then no point.
pub(super) fn join(
    store: &Store,
    session: &str,
    blocks: &[Cow<'_, str>],
    tail: Vec<Cow<'static, str>>,
) -> Option<Vec<Cow<'static, str>>> {
    if blocks.is_empty() {
        return Some(tail);
    }
    let mut out = Vec::with_capacity(blocks.len() * BLOCK + tail.len());
    for bytes in read(store, session, blocks, BLOCK * 16)? {
        for n in bytes.chunks_exact(16) {
            out.push(Cow::Owned(hex(u128::from_le_bytes(n.try_into().ok()?))));
        }
    }
    out.extend(tail);
    Some(out)
}

/// Writes the blocks of `new` but those in `kept` (named by the point the run started from,
/// read back whole, so stored already), and removes those of `old` (the names the session's
/// stored point gave) no longer in `new` nor in `staying` (blocks the new point names that
/// are stored already: its input list's, carried over unread, and its packs, written as they
/// are made).
pub(super) fn keep(
    store: &Store,
    session: &str,
    (new, staying): (&[impl Borrow<Block>], &[String]),
    (kept, old): (&HashSet<String>, &HashSet<String>),
) -> Result<(), StoreError> {
    let namespace = namespace(session);
    let new = new.iter().map(Borrow::borrow);
    let mut named: HashSet<&str> = new.clone().map(|(n, _): &Block| n.as_str()).collect();
    named.extend(staying.iter().map(String::as_str));
    for (name, bytes) in new {
        if !kept.contains(name) {
            store.record_put(&namespace, name, bytes)?;
        }
    }
    for name in old {
        if !named.contains(name.as_str()) {
            store.record_remove(&namespace, name)?;
        }
    }
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn names(n: usize, salt: u128) -> Vec<Cow<'static, str>> {
        (0..n as u128)
            .map(|i| Cow::Owned(hex(XxHash3_128::oneshot(&(i ^ salt).to_le_bytes()))))
            .collect()
    }

    #[test]
    fn hex_is_the_formatters_and_parse_reads_it_back() {
        for h in [
            0,
            1,
            0xabc,
            u128::MAX,
            XxHash3_128::oneshot(b"x"),
            1 << 127,
            1 << 64,
        ] {
            assert_eq!(hex(h), format!("{h:032x}"));
            assert_eq!(parse(&hex(h)), Some(h));
            assert_eq!(parse(&format!("{h:032X}")), Some(h));
        }
        let name = hex(XxHash3_128::oneshot(b"y"));
        for odd in [
            String::new(),
            name[1..].to_string(),
            format!("{name}0"),
            format!("+{}", &name[1..]),
            format!("{}g", &name[1..]),
            format!("{}é", &name[2..]),
            format!("{} ", &name[..31]),
        ] {
            assert_eq!(parse(&odd), None, "{odd:?}");
        }
    }

    #[test]
    fn names_come_back_from_their_blocks_and_a_damaged_block_is_no_list() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let list = names(BLOCK * 2 + 7, 0);
        let (blocks, tail) = split(&list);
        assert_eq!((blocks.len(), tail.len()), (2, 7));
        keep(
            &store,
            "s",
            (&blocks, &[]),
            (&HashSet::new(), &HashSet::new()),
        )
        .unwrap();
        let block_names: Vec<Cow<'_, str>> = blocks
            .iter()
            .map(|(n, _)| Cow::Borrowed(n.as_str()))
            .collect();
        let back = join(&store, "s", &block_names, tail.to_vec()).unwrap();
        assert_eq!(back, list);
        // Not hex, or not 32 digits: the whole list stays in the point.
        let mut odd = list.clone();
        odd[3] = Cow::Borrowed("not-a-hash");
        assert_eq!(split(&odd).1.len(), odd.len());
        // A block gone or changed: no list.
        store
            .record_put(&namespace("s"), &blocks[1].0, &[0; BLOCK * 16])
            .unwrap();
        assert!(join(&store, "s", &block_names, tail.to_vec()).is_none());
        store.record_remove(&namespace("s"), &blocks[1].0).unwrap();
        assert!(join(&store, "s", &block_names, tail.to_vec()).is_none());
    }

    #[test]
    fn a_grown_list_writes_only_its_new_block_and_drops_the_ones_gone() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let count = || store.records(&namespace("s")).unwrap().len();
        let first = names(BLOCK + 3, 0);
        let (a, _) = split(&first);
        keep(&store, "s", (&a, &[]), (&HashSet::new(), &HashSet::new())).unwrap();
        let stored: HashSet<String> = a.iter().map(|(n, _)| n.clone()).collect();
        let grown = names(BLOCK * 2 + 1, 0);
        let (b, _) = split(&grown);
        assert_eq!(b[0], a[0], "the full block is the same");
        keep(&store, "s", (&b, &[]), (&stored, &stored)).unwrap();
        assert_eq!(count(), 2);
        // Another list altogether: the old blocks go.
        let other = names(BLOCK, 99);
        let (c, _) = split(&other);
        let stored: HashSet<String> = b.iter().map(|(n, _)| n.clone()).collect();
        keep(&store, "s", (&c, &[]), (&stored, &stored)).unwrap();
        assert_eq!(count(), 1);
        let names: Vec<Cow<'_, str>> = vec![Cow::Borrowed(c[0].0.as_str())];
        assert_eq!(join(&store, "s", &names, Vec::new()).unwrap(), other);
    }
}
