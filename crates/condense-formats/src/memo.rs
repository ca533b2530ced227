//! The serialized texts of changed messages, kept from one write of a document to the next
//! write of the same session's next document.
//!
//! A proxy (`condense serve`) writes a session's request after request: each is the previous
//! one plus a turn, and most of the messages a stage changed (a tool result snip cut, a
//! collapse summary) are the same messages, changed the same way, in every request. Writing
//! them serialized each one again: at 200k tokens, about 7 M instructions a request, nearly all
//! of the writer. A [`WriteMemo`] handed from one [`Document::write_remembering`] to the next
//! keeps each changed message's serialized text by the message's fingerprint, so a request
//! serializes only the messages new to it.
//!
//! ```
//! use condense_formats::{read, ReadOptions, WriteMemo};
//!
//! let body = br#"{"model":"m","messages":[{"role":"user","content":"hi"}]}"#;
//! let mut doc = read(body, "body.json", &ReadOptions::default())?;
//! doc.conversations_mut()[0].messages[0].content = condense_model::Content::string("hello");
//! let mut memo = WriteMemo::new();
//! let first = doc.write_remembering(&mut memo)?;
//! assert_eq!(memo.len(), 1);
//! // The same write again takes the message's text from the memo: the same bytes.
//! assert_eq!(doc.write_remembering(&mut memo)?, first);
//! assert_eq!(first, doc.write()?);
//! # Ok::<(), condense_formats::FormatError>(())
//! ```
//!
//! What a text depends on is in its key or in the memo's context: the message's fingerprint
//! (what the writer already takes to mean "the same message", see [`crate::source`]), a hash
//! of the text the message was read from (its numbers are spelled alike), the format and the
//! input's style. A text is kept at no indent and with `\n` line ends, and indented where it is
//! spliced, so one text serves any place in the array. A memo keeps only what the last write
//! used or made: its size is that of one output's changed messages.
//!
//! A process that writes once per turn (`condense compress`) keeps its memo between processes
//! with [`WriteMemo::to_bytes`] and [`WriteMemo::from_bytes`]: the texts, the keys known to
//! read back and the context they were written in, in one record.
//!
//! [`Document::write_remembering`]: crate::Document::write_remembering

use crate::json::Style;
use condense_model::packed::{put_len, put_str, Reader};
use condense_model::prehashed::{PrehashedMap, PrehashedSet};
use condense_model::Format;

/// See the [module docs](self).
#[derive(Debug, Default)]
pub struct WriteMemo {
    /// Off: nothing is looked up or kept (a plain [`crate::Document::write`]).
    off: bool,
    /// The format and style the texts were written in ([`context_key`]); another one empties
    /// the memo.
    context: Option<u128>,
    /// The texts the previous write used or made.
    kept: PrehashedMap<u128, Vec<String>>,
    /// The texts this write used or made (the next write's `kept`).
    made: PrehashedMap<u128, Vec<String>>,
    /// What the last write copied as read, for [`crate::Document::read_back`].
    echo: Option<crate::read_back::Echo>,
    /// Texts that read back as the message they were written from (by
    /// [`crate::read_back::text_key`]): a later write leaves them out of what is read back.
    /// Only those the last read back used or checked are kept.
    verified: PrehashedSet<u128>,
    /// How many messages' texts were taken from the memo (for tests).
    #[cfg(test)]
    pub(crate) hits: usize,
}

impl WriteMemo {
    /// An empty memo.
    pub fn new() -> WriteMemo {
        WriteMemo::default()
    }

    /// A memo that keeps no texts: for a single write whose output is then read back
    /// ([`crate::Document::read_back`]).
    pub fn off() -> WriteMemo {
        WriteMemo {
            off: true,
            ..WriteMemo::default()
        }
    }

    /// How many messages' texts it keeps.
    pub fn len(&self) -> usize {
        self.kept.len() + self.made.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub(crate) fn is_off(&self) -> bool {
        self.off
    }

    /// Starts a write in `format` and `style`: texts written in another are dropped.
    pub(crate) fn begin(&mut self, format: Format, style: &Style) {
        if self.off {
            return;
        }
        let context = context_key(format, style);
        if self.context != Some(context) {
            self.kept.clear();
            self.made.clear();
            self.context = Some(context);
        }
    }

    /// The texts kept under `key`, kept for the next write as well.
    pub(crate) fn get(&mut self, key: u128) -> Option<&[String]> {
        if !self.made.contains_key(&key) {
            let texts = self.kept.remove(&key)?;
            self.made.insert(key, texts);
        }
        #[cfg(test)]
        {
            self.hits += 1;
        }
        self.made.get(&key).map(Vec::as_slice)
    }

    /// Keeps `texts` under `key` (never called on a memo that is off: see `Texts::piece_memo`).
    pub(crate) fn put(&mut self, key: u128, texts: Vec<String>) {
        self.made.insert(key, texts);
    }

    /// Ends a write: what it did not use is dropped.
    pub(crate) fn end(&mut self) {
        self.kept = std::mem::take(&mut self.made);
    }

    /// The texts known to read back as the message they were written from (see
    /// [`crate::read_back`]), to keep for the next write of the same session: a process that
    /// writes once per turn (`condense compress`) stores them and hands them back with
    /// [`WriteMemo::trust`].
    pub fn verified(&self) -> impl Iterator<Item = u128> + '_ {
        self.verified.iter().copied()
    }

    /// Takes `keys` (an earlier [`WriteMemo::verified`]) as texts that read back as their
    /// message: the next write leaves them out of what is read back.
    pub fn trust(&mut self, keys: impl IntoIterator<Item = u128>) {
        self.verified.clear();
        self.verified.extend(keys);
    }

    pub(crate) fn is_verified(&self, key: u128) -> bool {
        self.verified.contains(&key)
    }

    /// What the last write copied as read (none until a write notes it).
    pub(crate) fn echo(&self) -> Option<&crate::read_back::Echo> {
        self.echo.as_ref()
    }

    pub(crate) fn echo_mut(&mut self) -> &mut Option<crate::read_back::Echo> {
        &mut self.echo
    }
}

/// The bytes a memo is kept as between processes: [`MAGIC`], then the context, the verified
/// keys and the texts by key (each key's texts counted); keys as 16 bytes little-endian,
/// counts and strings as [`condense_model::packed`] writes them. Keys in ascending order, so
/// the same memo is the same bytes (a caller stores them only when they change).
impl WriteMemo {
    /// What the next write of the same session needs of this memo (after a write: the texts
    /// it used or made and the keys its read back verified), as bytes for
    /// [`WriteMemo::from_bytes`]. Empty for a memo that is off or has never begun a write.
    pub fn to_bytes(&self) -> Vec<u8> {
        let Some(context) = self.context.filter(|_| !self.off) else {
            return Vec::new();
        };
        let mut verified: Vec<u128> = self.verified.iter().copied().collect();
        verified.sort_unstable();
        let mut keys: Vec<u128> = self.kept.keys().chain(self.made.keys()).copied().collect();
        keys.sort_unstable();
        keys.dedup();
        let texts = |k: &u128| self.made.get(k).or_else(|| self.kept.get(k));
        let size: usize = keys
            .iter()
            .filter_map(texts)
            .flatten()
            .map(|t| t.len() + 4)
            .sum();
        let mut out =
            Vec::with_capacity(MAGIC.len() + 32 + 16 * (verified.len() + keys.len()) + size);
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&context.to_le_bytes());
        put_len(&mut out, verified.len());
        for k in &verified {
            out.extend_from_slice(&k.to_le_bytes());
        }
        put_len(&mut out, keys.len());
        for k in &keys {
            let texts = texts(k).map_or(&[][..], Vec::as_slice);
            out.extend_from_slice(&k.to_le_bytes());
            put_len(&mut out, texts.len());
            for t in texts {
                put_str(&mut out, t);
            }
        }
        out
    }

    /// A memo from [`WriteMemo::to_bytes`]: its texts serve the next write when it is in the
    /// same format and style (else they are dropped, as in one process). Bytes that do not
    /// read whole (damaged, or written by another version) give an empty memo.
    pub fn from_bytes(bytes: &[u8]) -> WriteMemo {
        read_memo(bytes).unwrap_or_default()
    }
}

/// The first bytes of a kept memo; another version's do not read.
const MAGIC: &[u8] = b"condense-write-memo-1\n";

fn read_memo(bytes: &[u8]) -> Option<WriteMemo> {
    let mut r = Reader::new(bytes.strip_prefix(MAGIC)?);
    let context = r.u128()?;
    let verified = (0..r.length()?).map(|_| r.u128()).collect::<Option<_>>()?;
    let entries = r.length()?;
    // At least 17 bytes an entry: a damaged count cannot reserve more than the record holds.
    let mut kept =
        PrehashedMap::with_capacity_and_hasher(entries.min(bytes.len() / 17), Default::default());
    for _ in 0..entries {
        let key = r.u128()?;
        let texts = (0..r.length()?)
            .map(|_| r.string())
            .collect::<Option<Vec<String>>>()?;
        kept.insert(key, texts);
    }
    r.is_done().then_some(WriteMemo {
        context: Some(context),
        kept,
        verified,
        ..WriteMemo::default()
    })
}

/// What a memo's texts depend on besides their keys: the format, the style and the writer's
/// version (a kept memo may be read by a later condense).
fn context_key(format: Format, style: &Style) -> u128 {
    condense_model::fingerprint::fingerprint(&(format, style, env!("CARGO_PKG_VERSION")))
}

/// The key of a message's texts: its fingerprint and a hash of the text it was read from.
pub(crate) fn key(fp: u128, read_as: Option<&str>) -> u128 {
    let like = read_as.map_or(0, |t| xxhash_rust::xxh3::xxh3_64(t.as_bytes()));
    let mut bytes = [0u8; 24];
    bytes[..16].copy_from_slice(&fp.to_le_bytes());
    bytes[16..].copy_from_slice(&like.to_le_bytes());
    xxhash_rust::xxh3::xxh3_128(&bytes)
}
