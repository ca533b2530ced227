//! Segments as the archive writes them: packed bytes, every string length-prefixed and nothing
//! escaped ([`condense_model::packed`]).
//!
//! A segment holds the originals a stage changed or removed, and a first run at a million
//! tokens archives most of its input, some of it twice (the result snip cut, then the message
//! collapse folded). Written as JSON, every original was serialized with its strings escaped,
//! then the original bytes embedded beside it: writing the segments was a fifth of a first
//! run's instructions, two thirds of that serializing. Packed, an original is its lengths and
//! a copy of its bytes, and a segment is smaller before the store compresses it.
//!
//! The layout: [`MAGIC`] (a JSON segment starts with `{`, so the two cannot be confused), then
//! - the entries: their number, then per output key the key, its number of entries and each
//!   entry (a tag byte, then the indices of its originals);
//! - the originals: their number, then each as a length and [`packed::pack_message`]'s bytes;
//! - the header: a byte 0, or 1 then the header as JSON (it changes rarely);
//! - the original bytes: per original that has them a byte 1, its index and the text; then a
//!   byte 0.
//!
//! Segments written as JSON before still read ([`read`]).

use super::{Draft, Entry, Header, OriginalText, Segment};
use condense_model::packed::{self, put_len, put_str, Reader};
use std::io::Write;

/// The first bytes of a packed segment.
pub(super) const MAGIC: &[u8] = b"\0condense-segment\x01";

/// A segment's bytes read back, packed or (written before) JSON; `None` when they are neither
/// whole.
pub(super) fn read(bytes: &[u8]) -> Option<Segment> {
    match bytes.strip_prefix(MAGIC) {
        Some(packed) => unpack(packed),
        None => serde_json::from_slice(bytes).ok(),
    }
}

impl Draft<'_, '_> {
    /// Writes the draft as a packed segment (see the [module docs](self)), each original's
    /// bytes asked for as they are written.
    pub(super) fn write_packed(&self, out: &mut impl Write) -> std::io::Result<()> {
        // One buffer for the small pieces and each original in turn, written out as it fills.
        let mut buf = Vec::with_capacity(4096);
        buf.extend_from_slice(MAGIC);
        put_len(&mut buf, self.entries.len());
        for (key, entries) in &self.entries {
            put_str(&mut buf, key);
            put_len(&mut buf, entries.len());
            for entry in entries {
                put_entry(&mut buf, entry);
            }
        }
        put_len(&mut buf, self.messages.len());
        let mut message = Vec::new();
        for (m, _) in &self.messages {
            message.clear();
            packed::pack_message_into(&mut message, m);
            put_len(&mut buf, message.len());
            out.write_all(&buf)?;
            buf.clear();
            out.write_all(&message)?;
            if message.capacity() > KEEP_BUFFER {
                // A long original's copy is not kept for the next (the writer holds it now).
                message = Vec::new();
            }
        }
        match &self.header {
            Some(header) => {
                buf.push(1);
                put_str(&mut buf, &serde_json::to_string(header)?);
            }
            None => buf.push(0),
        }
        let texts = self.texts.into_iter().flat_map(|texts| {
            let pairs = self.messages.iter().enumerate();
            pairs.filter_map(move |(i, (m, at))| texts(m, *at).map(|original| (i, original)))
        });
        for (i, original) in texts {
            buf.push(1);
            put_len(&mut buf, i);
            put_len(&mut buf, original.text.len());
            out.write_all(&buf)?;
            buf.clear();
            out.write_all(original.text.as_bytes())?;
        }
        buf.push(0);
        out.write_all(&buf)
    }
}

/// The most a packed original's buffer keeps between originals.
const KEEP_BUFFER: usize = 64 * 1024;

/// The tag of each kind of entry.
const REPLACE: u8 = 0;
const REPLACE_NEW: u8 = 1;
const INSERT_BEFORE: u8 = 2;
const INSERT_AFTER: u8 = 3;
const REMOVE: u8 = 4;
const HEADER: u8 = 5;

fn put_entry(out: &mut Vec<u8>, entry: &Entry) {
    let (tag, originals) = match entry {
        Entry::Replace { original } => {
            out.push(REPLACE);
            put_len(out, *original);
            return;
        }
        Entry::ReplaceNew { originals } => (REPLACE_NEW, originals),
        Entry::InsertBefore { originals } => (INSERT_BEFORE, originals),
        Entry::InsertAfter { originals } => (INSERT_AFTER, originals),
        Entry::Remove => return out.push(REMOVE),
        Entry::Header => return out.push(HEADER),
    };
    out.push(tag);
    put_len(out, originals.len());
    for &i in originals {
        put_len(out, i);
    }
}

fn entry(r: &mut Reader<'_>) -> Option<Entry> {
    let tag = r.byte()?;
    let mut originals = || -> Option<Vec<usize>> {
        let n = r.length()?;
        // Each index takes at least a byte: a damaged count cannot reserve more than is there.
        let mut out = Vec::with_capacity(n.min(1024));
        for _ in 0..n {
            out.push(r.length()?);
        }
        Some(out)
    };
    Some(match tag {
        REPLACE => Entry::Replace {
            original: r.length()?,
        },
        REPLACE_NEW => Entry::ReplaceNew {
            originals: originals()?,
        },
        INSERT_BEFORE => Entry::InsertBefore {
            originals: originals()?,
        },
        INSERT_AFTER => Entry::InsertAfter {
            originals: originals()?,
        },
        REMOVE => Entry::Remove,
        HEADER => Entry::Header,
        _ => return None,
    })
}

/// The segment packed in `bytes` (after [`MAGIC`]); `None` unless they read whole.
fn unpack(bytes: &[u8]) -> Option<Segment> {
    let mut r = Reader::new(bytes);
    let mut segment = Segment::default();
    for _ in 0..r.length()? {
        let key = r.string()?;
        let n = r.length()?;
        let mut entries = Vec::with_capacity(n.min(1024));
        for _ in 0..n {
            entries.push(entry(&mut r)?);
        }
        segment.entries.insert(key, entries);
    }
    let n = r.length()?;
    segment.messages.reserve(n.min(1024));
    for _ in 0..n {
        let len = r.length()?;
        segment.messages.push(packed::unpack_message(r.take(len)?)?);
    }
    segment.header = match r.byte()? {
        0 => None,
        1 => Some(serde_json::from_str::<Header>(r.str()?).ok()?),
        _ => return None,
    };
    loop {
        match r.byte()? {
            0 => break,
            1 => {
                let i = r.length()?;
                segment.texts.push((i, OriginalText(r.string()?)));
            }
            _ => return None,
        }
    }
    r.is_done().then_some(segment)
}
