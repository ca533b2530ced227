//! The expansion archive: how `condense expand` gets every removed byte back.
//!
//! The host, not the plugins, keeps this promise: after each stage it compares the stage's
//! input and output message by message and archives whatever changed or disappeared, so even a
//! third-party stage cannot lose data. Entries are keyed by a hash of the *output* message (its
//! id is left out when the format has none, i.e. ids starting with `#`), so expansion also works
//! on a compressed conversation the agent has since extended.
//!
//! Entry kinds, for an output message `m`:
//! - `replace`: `m` is a changed version of the archived original;
//! - `replace_new`: `m` is new (a summary) and stands for the archived run of originals;
//! - `insert_before` / `insert_after`: a run of originals was removed next to `m`;
//! - `remove`: `m` is new and stands for nothing (expand drops it).
//!
//! One stage run writes a segment record (entries plus the original messages inline, and the
//! original bytes of those the caller could give, see [`ArchiveOptions::texts`]; packed, not
//! JSON, `packed`), named by its content hash, so an identical rerun writes nothing new; a
//! large one is written as several segments of about 64 KiB, each output key whole in one of
//! them (`chunks`), so a later run that needs a few originals reads a few small segments.
//! The run's writes are one transaction ([`condense_store::Store::batch`]). A segment is serialized straight into the store, its
//! originals borrowed and their bytes asked for one at a time, so it is never whole in memory.
//! Beside each goes a small index record (`outputs-<session>/<same name>`): the format the
//! conversation was read with and every output hash the segment has entries for.
//! The index is what lets `expand` read a file with the format it was compressed from (not a
//! guess), and know a marker it cannot restore when the segment itself is lost
//! ([`expand()`](expand::expand) and [`Expansion::unresolved`]).
//!
//! Identical messages (two equal JSONL lines, two results cleared to the same placeholder in a
//! format without ids) produce identical entries under one key. Within a segment they are all
//! kept and applied in order, one per occurrence; only an identical entry of *another* segment
//! (a rerun) counts once.
//!
//! Each run also writes a run record (`runs`): its segments and the run it started from, so
//! expansion applies the one history that made the file, not another run's entries keyed by
//! the same unchanged messages.
//!
//! Expansion loads the session's segments, applies entries round by round (a message changed
//! by two stages unwinds in two rounds) and uses each entry at most once, so it always
//! terminates.

mod chunks;
mod expand;
mod packed;
mod pairing;
mod read_index;
mod runs;

pub use expand::{
    expand, ExpandError, Expander, Expansion, Unresolved, UnresolvedKind, PLACEHOLDERS,
};
pub(crate) use pairing::Pairing;
pub use read_index::ReadIndex;
pub use runs::ArchivedRun;
pub(crate) use runs::{record_run, KeyMemo};

use condense_model::fingerprint::Fingerprinter;
use condense_model::{Conversation, Message};
use condense_store::{Store, StoreError};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap};

#[cfg(test)]
mod tests;

const NAMESPACE_PREFIX: &str = "expand-";
/// Namespace prefix of the segments' index records (never starts like [`NAMESPACE_PREFIX`]).
const INDEX_PREFIX: &str = "outputs-";
/// Namespace prefix of the run records ([`runs`]).
const RUNS_PREFIX: &str = "runs-";
/// Namespace of the per-session record of how the conversation was read.
const READ_AS_NAMESPACE: &str = "read-as";
const HEADER_KEY: &str = "header";

/// How a conversation was read when it was compressed: the format's name (`anthropic`,
/// `claude-code`, ...) and the `--select` pointer, if any. `expand` reads the compressed file
/// the same way instead of detecting the format again.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct ReadAs {
    pub format: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub select: Option<String>,
}

/// The original bytes of a message, when the caller has them (the exact text the input held
/// for a message no stage had changed yet); `None` otherwise. With the message comes its place
/// in the conversation the stage was given: of value-equal messages read from different texts
/// (a line written again with another spelling), the text read at that place is the one
/// (`condense_formats::Document::original_text_at`).
pub type OriginalTexts<'a> = dyn Fn(&Message, usize) -> Option<Original> + 'a;

/// A message's original bytes, as [`OriginalTexts`] gives them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Original {
    /// The exact text the input held for the message.
    pub text: String,
}

impl Original {
    /// The exact text the input held for a message (what
    /// `condense_formats::Document::original_text` gives).
    pub fn of(text: impl Into<String>) -> Original {
        Original { text: text.into() }
    }
}

/// What the caller tells the archive besides the two conversations.
#[derive(Clone, Copy, Default)]
pub struct ArchiveOptions<'a> {
    /// The format the conversation was read with, recorded in the segment's index.
    pub format: Option<&'a str>,
    /// Asked for every original message archived; what it gives is stored with the message
    /// and handed back by expand ([`Expansion::texts`]), so unchanged bytes come back exact.
    pub texts: Option<&'a OriginalTexts<'a>>,
}

impl std::fmt::Debug for ArchiveOptions<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ArchiveOptions")
            .field("format", &self.format)
            .field("texts", &self.texts.is_some())
            .finish()
    }
}

/// Originals are referred to by their index in the segment's `messages`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
enum Entry {
    Replace { original: usize },
    ReplaceNew { originals: Vec<usize> },
    InsertBefore { originals: Vec<usize> },
    InsertAfter { originals: Vec<usize> },
    Remove,
    Header,
}

/// What one stage run archived, as [`expand()`] reads it back ([`Draft`] writes it).
#[derive(Debug, Default, Deserialize)]
struct Segment {
    /// Output hash -> entries for that output message.
    entries: BTreeMap<String, Vec<Entry>>,
    messages: Vec<Message>,
    header: Option<Header>,
    /// (index in `messages`, the original bytes of that message), when the caller had them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    texts: Vec<(usize, OriginalText)>,
}

/// An original's bytes as a segment holds them. A packed segment ([`packed`]) holds them as
/// they are; one written as JSON before held them as the JSON object or array they are,
/// embedded, or as any other text a JSON string (every text, in the first such segments): the
/// two forms cannot be confused, since an embedded text is never a string.
#[derive(Debug, Clone, PartialEq)]
struct OriginalText(String);

impl<'de> Deserialize<'de> for OriginalText {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let raw = Box::<serde_json::value::RawValue>::deserialize(deserializer)?;
        if raw.get().starts_with('"') {
            let text: String = serde_json::from_str(raw.get()).map_err(serde::de::Error::custom)?;
            return Ok(OriginalText(text));
        }
        Ok(OriginalText(String::from(Box::<str>::from(raw))))
    }
}

/// The index record of one segment: how the conversation was read, and the output hashes the
/// segment has entries for (so they are known even when the segment is lost).
#[derive(Debug, Default, Serialize, Deserialize)]
struct Index {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    format: Option<String>,
    keys: Vec<String>,
}

/// The parts of a conversation outside its messages.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Header {
    system: Option<condense_model::Content>,
    tools: Vec<condense_model::ToolDef>,
    extra: condense_model::RawJson,
}

/// Whether the two conversations have the same header (compared in place: no copy).
fn same_header(a: &Conversation, b: &Conversation) -> bool {
    a.system == b.system && a.tools == b.tools && a.extra == b.extra
}

fn header_of(c: &Conversation) -> Header {
    Header {
        system: c.system.clone(),
        tools: c.tools.clone(),
        extra: c.extra.clone(),
    }
}

/// `value` serialized for a record or a key. An error, never empty bytes: keys hashed from
/// nothing would collide and expand would put back the wrong originals.
pub(crate) fn encode<T: Serialize + ?Sized>(
    what: &'static str,
    value: &T,
) -> Result<Vec<u8>, StoreError> {
    serde_json::to_vec(value).map_err(|e| encode_error(what, e))
}

fn encode_error(what: &'static str, e: serde_json::Error) -> StoreError {
    StoreError::Encode {
        what,
        source: Box::new(e),
    }
}

/// The xxh3-128 of `prefix` followed by `value`'s JSON, as [`encode`] writes it.
fn hash_of<T: Serialize + ?Sized>(
    what: &'static str,
    prefix: &[u8],
    value: &T,
) -> Result<u128, StoreError> {
    // Serialized straight into the hasher: a key is hashed from a value's serialization
    // without building it (the same key as hashing the whole bytes at once).
    let mut hasher = Fingerprinter::new();
    std::hash::Hasher::write(&mut hasher, prefix);
    serde_json::to_writer(&mut hasher, value).map_err(|e| encode_error(what, e))?;
    Ok(hasher.digest128())
}

/// Hash of a message as the output format shows it (synthetic `#n` ids left out): its id, a
/// zero byte, then the JSON of the rest, `(role, timestamp, content, extra, envelope)` as
/// serde_json writes that tuple.
///
/// The two raw JSON fields are JSON strings of JSON, escaped as serde_json escapes them but
/// sixteen bytes at a time ([`condense_model::escape::write_quoted`]): a Claude Code line's
/// envelope is most of its bytes, and serde_json's byte-by-byte escape of it was two thirds of
/// a key (a quarter of a first run on a long session, whose every output message gets one).
pub(crate) fn message_hash(m: &Message) -> Result<String, StoreError> {
    use std::hash::Hasher;
    let failed = |e| encode_error("a message for its archive key", e);
    let id = if m.id.starts_with('#') { "" } else { &m.id };
    let mut h = Fingerprinter::new();
    h.write(id.as_bytes());
    h.write(b"\0[");
    serde_json::to_writer(&mut h, &m.role).map_err(failed)?;
    h.write(b",");
    serde_json::to_writer(&mut h, &m.timestamp).map_err(failed)?;
    h.write(b",");
    serde_json::to_writer(&mut h, &m.content).map_err(failed)?;
    for raw in [&m.extra, &m.envelope] {
        h.write(b",");
        condense_model::escape::write_quoted(&mut h, raw.as_str())
            .map_err(|e| failed(serde_json::Error::io(e)))?;
    }
    h.write(b"]");
    Ok(format!("{:032x}", h.digest128()))
}

fn header_hash(h: &Header) -> Result<String, StoreError> {
    let hash = hash_of("a conversation header for its archive key", b"", h)?;
    Ok(format!("{HEADER_KEY}-{hash:032x}"))
}

/// A segment being built: its originals borrowed from the conversation the stage was given,
/// their original bytes asked for (one message at a time) only while it is written, straight
/// into the store ([`write_segments`], [`Draft::write_packed`]). Written as [`Segment`] reads.
#[derive(Default)]
struct Draft<'m, 't> {
    /// Output hash -> entries for that output message.
    entries: BTreeMap<String, Vec<Entry>>,
    /// The originals, each with its place in the conversation the stage was given.
    messages: Vec<(&'m Message, usize)>,
    header: Option<Header>,
    texts: Option<&'t OriginalTexts<'t>>,
}

impl<'m> Draft<'m, '_> {
    fn keep(&mut self, m: &'m Message, at: usize) -> usize {
        self.messages.push((m, at));
        self.messages.len() - 1
    }

    /// A header entry restoring `before`'s header, keyed by `after`'s, when they differ.
    fn add_header(
        &mut self,
        before: &Conversation,
        after: &Conversation,
    ) -> Result<(), StoreError> {
        if !same_header(before, after) {
            self.add(header_hash(&header_of(after))?, Entry::Header);
            self.header = Some(header_of(before));
        }
        Ok(())
    }

    /// `before` (at `at` in the stage's input), changed in place into `after`.
    fn replace(
        &mut self,
        (before, at): (&'m Message, usize),
        after: &Message,
    ) -> Result<(), StoreError> {
        let original = self.keep(before, at);
        self.add(message_hash(after)?, Entry::Replace { original });
        Ok(())
    }

    fn add(&mut self, key: String, entry: Entry) {
        self.entries.entry(key).or_default().push(entry);
    }
}

/// Archives what a stage changed between `before` and `after` for `session`. Returns the
/// number of entries written (0: nothing changed, nothing written).
pub fn archive_stage(
    store: &Store,
    session: &str,
    before: &Conversation,
    after: &Conversation,
    opts: ArchiveOptions<'_>,
) -> Result<usize, StoreError> {
    let pairing = Pairing::of(before, after);
    archive_stage_named(store, session, before, after, &pairing, opts).map(|a| a.entries)
}

/// What archiving one stage's change wrote.
#[derive(Debug, Default)]
pub(crate) struct Archived {
    /// The number of entries (0: nothing changed, nothing written).
    pub(crate) entries: usize,
    /// The segments' names, for the run's record.
    pub(crate) segments: Vec<String>,
    /// The output messages (by index) that runs of removed messages were anchored to: each
    /// stands for more than the input message it may be (see [`crate::resume`]'s origins).
    pub(crate) anchors: Vec<usize>,
}

impl Archived {
    fn written((entries, segments): (usize, Vec<String>), anchors: Vec<usize>) -> Archived {
        Archived {
            entries,
            segments,
            anchors,
        }
    }
}

/// [`archive_stage_named`] for a stage that replaced messages in place
/// ([`condense_abi::Change::Replaced`]): `replaced` gives each changed message's place, as it
/// was and as it is, in conversation order. The same entries as archiving the two whole
/// conversations, without either being copied.
pub(crate) fn archive_replaced<'m>(
    store: &Store,
    session: &str,
    replaced: impl IntoIterator<Item = (usize, &'m Message, &'m Message)>,
    opts: ArchiveOptions<'_>,
) -> Result<Archived, StoreError> {
    let mut seg = Draft {
        texts: opts.texts,
        ..Draft::default()
    };
    for (at, before, after) in replaced {
        seg.replace((before, at), after)?;
    }
    // Every entry is keyed by a changed message: none by one left as it was.
    write_segments(store, session, seg, opts.format).map(|w| Archived::written(w, Vec::new()))
}

/// [`archive_stage`], also giving the names of the segments written (for the run's record) and
/// the messages insertions are keyed by; `pairing` is [`Pairing::of`] the two conversations.
pub(crate) fn archive_stage_named(
    store: &Store,
    session: &str,
    before: &Conversation,
    after: &Conversation,
    pairing: &Pairing,
    opts: ArchiveOptions<'_>,
) -> Result<Archived, StoreError> {
    let mut seg = Draft {
        texts: opts.texts,
        ..Draft::default()
    };
    seg.add_header(before, after)?;

    // Changed messages.
    for (b, a) in pairing.changed_in_place() {
        seg.replace((&before.messages[b], b), &after.messages[a])?;
    }

    // Runs of removed messages, each anchored to the output message that follows it.
    let mut anchored_new: std::collections::HashSet<usize> = Default::default();
    let mut anchors: Vec<usize> = Vec::new();
    let mut run: Vec<usize> = Vec::new();
    let mut last_kept: Option<usize> = None;
    let mut flush = |seg: &mut Draft<'_, '_>,
                     run: &mut Vec<usize>,
                     last_kept: Option<usize>,
                     anchored: &mut std::collections::HashSet<usize>|
     -> Result<(), StoreError> {
        if run.is_empty() {
            return Ok(());
        }
        let originals = std::mem::take(run);
        let next = last_kept.map_or(0, |i| i + 1);
        // After a message the stage changed (a running summary rewritten in place) the run
        // is anchored to that message, not to the unchanged one that follows: an unchanged
        // message is shared with every other run of the session (one over the whole input
        // next to one resumed from an earlier output), a changed one only with runs that made
        // it, so expand never applies this run's insertion where another run's output stands.
        if let Some(i) = last_kept.filter(|&i| pairing.changed[i]) {
            anchors.push(i);
            seg.add(
                message_hash(&after.messages[i])?,
                Entry::InsertAfter { originals },
            );
        } else if let Some(anchor) = after.messages.get(next) {
            anchors.push(next);
            if pairing.before_of[next].is_some() {
                seg.add(message_hash(anchor)?, Entry::InsertBefore { originals });
            } else {
                anchored.insert(next);
                seg.add(message_hash(anchor)?, Entry::ReplaceNew { originals });
            }
        } else if let Some(last) = after.messages.last() {
            anchors.push(after.messages.len() - 1);
            seg.add(message_hash(last)?, Entry::InsertAfter { originals });
        }
        Ok(())
    };
    for (b, (m, kept_at)) in before.messages.iter().zip(&pairing.after_of).enumerate() {
        match kept_at {
            Some(pos) => {
                flush(&mut seg, &mut run, last_kept, &mut anchored_new)?;
                last_kept = Some(*pos);
            }
            None => {
                let i = seg.keep(m, b);
                run.push(i);
            }
        }
    }
    flush(&mut seg, &mut run, last_kept, &mut anchored_new)?;

    // New messages that stand for nothing.
    for (i, m) in after.messages.iter().enumerate() {
        if pairing.before_of[i].is_none() && !anchored_new.contains(&i) {
            seg.add(message_hash(m)?, Entry::Remove);
        }
    }

    write_segments(store, session, seg, opts.format).map(|w| Archived::written(w, anchors))
}

/// Archives how the written output reads back: a stage-made message (a summary) may come back
/// from the file with another id or a filled-in wrapper line. Keyed by the re-read form, each
/// such message expands to the one the pipeline produced, so `expand` works from the file.
/// `run` is the run's record ([`crate::RunResult::archive_run`]): when something is archived,
/// a record of this step goes on from it, with the re-read output (whose messages that read
/// back unchanged take their keys from `run`, not hashed again). `same`: per message of
/// `reread`, known to read back as `produced`'s message at that place (synthetic `#n` ids
/// aside), so left out of it, not compared (`condense_formats::ReadBack`); empty when none is.
pub fn archive_written(
    store: &Store,
    session: &str,
    produced: &Conversation,
    (reread, same): (&Conversation, &[bool]),
    run: Option<&ArchivedRun>,
) -> Result<usize, StoreError> {
    let Reread {
        count,
        segments,
        keys,
    } = archive_reread(store, session, produced, (reread, same), run)?;
    if !segments.is_empty() {
        let parent = run.map(ArchivedRun::name);
        match keys {
            Some(keys) => runs::record_run_keyed(store, session, parent, segments, keys)?,
            None => record_run(store, session, parent, segments, (reread, &[]), None)?,
        };
    }
    Ok(count)
}

/// What [`archive_reread`] wrote: its entries and segments, and the re-read output's keys when
/// they came out of the comparison.
struct Reread {
    count: usize,
    segments: Vec<String>,
    keys: Option<Vec<String>>,
}

/// Archives what reads back differently.
fn archive_reread(
    store: &Store,
    session: &str,
    produced: &Conversation,
    (reread, same): (&Conversation, &[bool]),
    run: Option<&ArchivedRun>,
) -> Result<Reread, StoreError> {
    // The format the run was read with (recorded by the run just before), for the index.
    let read_as = recorded_read_as(store, session)?;
    let format = read_as.as_ref().map(|r| r.format.as_str());
    if produced.messages.len() != reread.messages.len() {
        let opts = ArchiveOptions {
            format,
            texts: None,
        };
        let pairing = Pairing::of(produced, reread);
        let archived = archive_stage_named(store, session, produced, reread, &pairing, opts)?;
        return Ok(Reread {
            count: archived.entries,
            segments: archived.segments,
            keys: None,
        });
    }
    // The produced output's keys, when `run` recorded exactly this output.
    let produced_keys = run
        .map(ArchivedRun::keys)
        .filter(|k| k.len() == produced.messages.len());
    let mut keys = Vec::with_capacity(reread.messages.len());
    let mut seg = Draft::default();
    seg.add_header(produced, reread)?;
    // Positional: synthetic `#n` ids renumber when a stage removed messages, but the hash
    // leaves them out, so only messages that really read back differently get an entry.
    for (i, (p, r)) in produced.messages.iter().zip(&reread.messages).enumerate() {
        // Nearly every message reads back as produced: equal messages hash equal, and so do
        // messages that differ only in their synthetic ids (the hash leaves those out; a run
        // resumed from an earlier output keeps the ids its messages were first read with).
        if same.get(i) == Some(&true) || p == r || same_but_synthetic_id(p, r) {
            match produced_keys {
                Some(produced) => keys.push(produced[i].clone()),
                None => keys.push(message_hash(p)?),
            }
            continue;
        }
        let key = message_hash(r)?;
        if message_hash(p)? != key {
            // A produced message has no text of its own (no texts are asked for here).
            let original = seg.keep(p, i);
            seg.add(key.clone(), Entry::Replace { original });
        }
        keys.push(key);
    }
    let (count, segments) = write_segments(store, session, seg, format)?;
    Ok(Reread {
        count,
        segments,
        keys: Some(keys),
    })
}

/// Whether two messages differ at most in their synthetic `#n` ids ([`message_hash`] leaves
/// those out), compared in place instead of hashed.
fn same_but_synthetic_id(a: &Message, b: &Message) -> bool {
    a.id.starts_with('#') && b.id.starts_with('#') && a.same_but_id(b)
}

/// Writes a draft as segments with their indexes (nothing when it is empty; several when it
/// is large, [`chunks`]); returns its number of entries and the segments' names. Each segment
/// is serialized straight into the store ([`Store::record_writer`]: within a run, into its
/// batch's spill file), never whole in memory, and named by the hash of its bytes.
fn write_segments(
    store: &Store,
    session: &str,
    seg: Draft<'_, '_>,
    format: Option<&str>,
) -> Result<(usize, Vec<String>), StoreError> {
    let count = seg.entries.values().map(Vec::len).sum();
    let mut written = Vec::new();
    if count == 0 {
        return Ok((count, written));
    }
    for part in seg.split(chunks::SEGMENT_BYTES) {
        let mut writer = store.record_writer();
        part.write_packed(&mut writer)
            .map_err(|source| StoreError::Io {
                path: store.root().to_path_buf(),
                source,
            })?;
        let name = writer.key();
        // The segment first: a run killed between the two writes leaves a segment without its
        // index (it still expands; only its loss would go unnoticed), never an index naming a
        // segment that was never written (expand would report it as lost).
        writer.finish(&format!("{NAMESPACE_PREFIX}{session}"), &name)?;
        let index = Index {
            format: format.filter(|f| !f.is_empty()).map(str::to_string),
            keys: part.entries.keys().cloned().collect(),
        };
        let index = encode("an archive index", &index)?;
        store.record_put(&format!("{INDEX_PREFIX}{session}"), &name, &index)?;
        written.push(name);
    }
    Ok((count, written))
}

/// Records how `session`'s conversation was read (replacing what an earlier run recorded).
pub fn record_read_as(store: &Store, session: &str, read_as: &ReadAs) -> Result<(), StoreError> {
    let bytes = encode("how the conversation was read", read_as)?;
    store.record_put(READ_AS_NAMESPACE, session, &bytes)
}

/// How `session`'s conversation was read when it was last compressed, if that was recorded
/// (and still reads: a damaged record counts as none).
pub fn recorded_read_as(store: &Store, session: &str) -> Result<Option<ReadAs>, StoreError> {
    Ok(store
        .record_get(READ_AS_NAMESPACE, session)?
        .and_then(|b| serde_json::from_slice(&b).ok()))
}

fn originals_of(entry: &Entry) -> &[usize] {
    match entry {
        Entry::Replace { original } => std::slice::from_ref(original),
        Entry::ReplaceNew { originals }
        | Entry::InsertBefore { originals }
        | Entry::InsertAfter { originals } => originals,
        Entry::Remove | Entry::Header => &[],
    }
}

/// The originals of messages that stages rewrote in place in earlier runs (`replace` entries
/// only): what the host's summarizer reads instead of a placeholder left in the input, so a
/// summary is written from what the agent really saw. Summaries of spans (`replace_new`) are
/// not unfolded: the summarizer is given an earlier summary as such.
///
/// Only the segments indexed with a message asked about are read (a long session's archive is
/// never loaded whole for one summary), each at most once.
#[derive(Debug, Default)]
pub struct Rewrites {
    namespace: String,
    /// Output hash -> the committed segments whose index names it.
    index: HashMap<String, Vec<String>>,
    loaded: std::sync::Mutex<ReadSoFar>,
}

/// What [`Rewrites`] has read so far.
#[derive(Debug, Default)]
struct ReadSoFar {
    segments: std::collections::HashSet<String>,
    /// Output hash -> the message it replaced (the first such entry read wins).
    by_hash: HashMap<String, Message>,
}

impl Rewrites {
    /// The index of `session`'s archive as earlier runs committed it: only what they
    /// committed, since a message this run rewrote is in the run's own originals
    /// (`Originals`), and the run's held-back segments would be a second copy of it.
    pub fn load(store: &Store, session: &str) -> Result<Rewrites, ExpandError> {
        let mut index: HashMap<String, Vec<String>> = HashMap::new();
        for (name, bytes) in store.committed_records(&format!("{INDEX_PREFIX}{session}"))? {
            // A damaged index names nothing: its segment's originals are not offered.
            if let Ok(Index { keys, .. }) = serde_json::from_slice::<Index>(&bytes) {
                for key in keys {
                    index.entry(key).or_default().push(name.clone());
                }
            }
        }
        Ok(Rewrites {
            namespace: format!("{NAMESPACE_PREFIX}{session}"),
            index,
            loaded: Default::default(),
        })
    }

    /// Reads the segments indexed with `key` not read yet (a lost or damaged one is skipped).
    fn read_for(&self, store: &Store, key: &str, loaded: &mut ReadSoFar) {
        for name in self.index.get(key).into_iter().flatten() {
            if !loaded.segments.insert(name.clone()) {
                continue;
            }
            let Ok(Some(bytes)) = store.record_get(&self.namespace, name) else {
                continue;
            };
            let Some(segment) = packed::read(&bytes) else {
                continue;
            };
            let mut messages: Vec<Option<Message>> =
                segment.messages.into_iter().map(Some).collect();
            for (key, entries) in segment.entries {
                for entry in entries {
                    if let Entry::Replace { original } = entry {
                        if let Some(m) = messages.get_mut(original).and_then(Option::take) {
                            loaded.by_hash.entry(key.clone()).or_insert(m);
                        }
                    }
                }
            }
        }
    }

    /// The original of `m`, unwinding every rewrite (a result truncated by one stage and cleared
    /// by the next unwinds twice); `None` when `m` was never rewritten.
    pub fn original(&self, store: &Store, m: &Message) -> Option<Message> {
        // Nothing archived before this run (a session's first run): no key to look up, and
        // hashing the message (a JSON serialization) would be for nothing.
        if self.index.is_empty() {
            return None;
        }
        // A message that cannot be hashed was never archived (archiving it fails): no original.
        let key = message_hash(m).ok()?;
        self.index.get(&key)?;
        // A poisoned lock only means another call panicked mid-read: what it read still holds.
        let mut loaded = self.loaded.lock().unwrap_or_else(|e| e.into_inner());
        self.read_for(store, &key, &mut loaded);
        let mut current = loaded.by_hash.get(&key)?.clone();
        // Each step uses another entry: bounded by the number of indexed keys even if entries
        // form a cycle.
        for _ in 0..self.index.len() {
            let Ok(k) = message_hash(&current) else { break };
            self.read_for(store, &k, &mut loaded);
            match loaded.by_hash.get(&k) {
                Some(earlier) if *earlier != current => current = earlier.clone(),
                _ => break,
            }
        }
        Some(current)
    }
}
