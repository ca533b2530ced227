//! Run records: which segments made a conversation, so `expand` unwinds one history.
//!
//! Entries are keyed by the output messages they unwind, and a message left unchanged is shared
//! by every run of a session. Two runs that made different outputs from overlapping inputs (a
//! `truncate-oldest` run on the session at 60 messages, then one over all 100, both over the
//! whole input; or a run resumed from an earlier output next to one over the whole input) each
//! archived an insertion next to a message both kept: applied together, the removed messages
//! come back twice. So every run also writes a small record (`runs-<session>/<hash>`): the
//! segments it wrote, the run it started from (a resumed run's previous run, the run whose
//! output a re-read file differs from), and a hash of its output's message keys.
//!
//! `expand` takes the record whose output the conversation starts with (the longest: the
//! agent may have appended turns) and applies first the segments of that run and its
//! ancestors only. Only if markers are left (an output of another run the agent kept and
//! extended, then compressed again without resuming) does it go on with every segment of the
//! session, as it did before records existed; with no matching record (a store written before
//! them) it uses every segment from the start.

use super::{encode, message_hash, RUNS_PREFIX};
use condense_model::fingerprint::Fingerprinter;
use condense_model::prehashed::PrehashedMap;
use condense_model::{Conversation, Message};
use condense_store::{Store, StoreError};
use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use std::collections::{HashMap, HashSet};
use std::hash::Hasher;
use std::sync::Mutex;

/// One run's record.
#[derive(Debug, Serialize, Deserialize)]
struct RunRecord {
    /// The run whose output this run's input started from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    parent: Option<String>,
    /// The segments this run wrote (their record names), in order.
    segments: Vec<String>,
    /// How many messages the output had.
    outputs: usize,
    /// The hash of their archive keys ([`prefix_hashes`]).
    prefix: String,
}

/// The hash of the first `n` keys, for each `n` in `at` (sorted), as `(n, hash)`: the same
/// bytes [`record_run`] hashes, each key followed by a line feed.
fn prefix_hashes(keys: &[String], at: &[usize]) -> Vec<(usize, String)> {
    let mut h = Fingerprinter::new();
    let mut out = Vec::with_capacity(at.len());
    let mut wanted = at.iter().copied().peekable();
    for (i, key) in keys.iter().enumerate() {
        while wanted.peek() == Some(&i) {
            out.push((i, format!("{:032x}", h.digest128())));
            wanted.next();
        }
        h.write(key.as_bytes());
        h.write(b"\n");
    }
    for n in wanted.filter(|&n| n == keys.len()) {
        out.push((n, format!("{:032x}", h.digest128())));
    }
    out
}

/// The archive keys of messages seen before, by fingerprint, for a pipeline that runs turn
/// after turn (`condense serve`): a turn's output is mostly the previous turn's, and a key costs
/// a JSON serialization of its message where a fingerprint is one pass of xxh3 over it.
#[derive(Debug, Default)]
pub(crate) struct KeyMemo(Mutex<PrehashedMap<u128, String>>);

/// Keys a [`KeyMemo`] holds before it starts over (about 5 MB).
const KEY_MEMO_LIMIT: usize = 65_536;

impl KeyMemo {
    /// A memo that knows these (fingerprint, key) pairs: the keys of the output a run resumes
    /// from, kept with its point ([`crate::resume`]), so that a `condense compress` per turn
    /// hashes only the messages that are new or changed, as `serve` does from memory.
    pub(crate) fn seeded(pairs: impl IntoIterator<Item = (u128, String)>) -> KeyMemo {
        KeyMemo(Mutex::new(pairs.into_iter().collect()))
    }

    /// The key of each message, hashing only those not seen before (outside the lock: other
    /// sessions' runs go on meanwhile). `given`: each message's fingerprint, when made
    /// already (used only when there is one per message).
    fn keys(&self, messages: &[Message], given: &[u128]) -> Result<Vec<String>, StoreError> {
        let prints = condense_model::fingerprint::each(messages, given);
        // A panic while the map was held cannot leave it half-changed (one insert or lookup).
        let memo = || self.0.lock().unwrap_or_else(|p| p.into_inner());
        let mut keys: Vec<Option<String>> = {
            let memo = memo();
            prints.iter().map(|fp| memo.get(fp).cloned()).collect()
        };
        let missing: Vec<usize> = (0..keys.len()).filter(|&i| keys[i].is_none()).collect();
        let made = hash_all(missing.iter().map(|&i| &messages[i]).collect())?;
        let mut fresh = Vec::with_capacity(made.len());
        for (i, k) in missing.into_iter().zip(made) {
            fresh.push((prints[i], k.clone()));
            keys[i] = Some(k);
        }
        let mut memo = memo();
        if memo.len() + fresh.len() > KEY_MEMO_LIMIT {
            memo.clear();
        }
        memo.extend(fresh);
        Ok(keys.into_iter().flatten().collect())
    }
}

/// A run's record as written (`record_run`): its name, and the archive key of each message
/// of the output it names, which a record of the same output as it reads back shares wherever
/// a message reads back unchanged ([`super::archive_written`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ArchivedRun {
    pub(super) name: String,
    pub(super) keys: Vec<String>,
}

impl ArchivedRun {
    /// The record's name, to pass on as a later run's parent.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The archive key of each output message, in order.
    pub(crate) fn keys(&self) -> &[String] {
        &self.keys
    }
}

/// Records a run of `session` that wrote `segments` and made `output` (with its messages'
/// fingerprints, when made: else empty) from the output of `parent` (or from the input).
/// `memo`: the keys a long-lived pipeline remembers ([`KeyMemo`]).
pub(crate) fn record_run(
    store: &Store,
    session: &str,
    parent: Option<&str>,
    segments: Vec<String>,
    (output, prints): (&Conversation, &[u128]),
    memo: Option<&KeyMemo>,
) -> Result<ArchivedRun, StoreError> {
    let keys = match memo {
        Some(memo) => memo.keys(&output.messages, prints)?,
        None => hash_all(output.messages.iter().collect())?,
    };
    record_run_keyed(store, session, parent, segments, keys)
}

/// Below this many messages their keys are made on the calling thread: a turn's few new ones.
const HASH_IN_PARALLEL_FROM: usize = 32;

/// The archive key of each of `messages`, in order, on all cores when they are many (a first
/// run keys its whole output: 8,750 messages for a 15 MB Claude Code session, a quarter of its
/// instructions on one core).
fn hash_all(messages: Vec<&Message>) -> Result<Vec<String>, StoreError> {
    if messages.len() < HASH_IN_PARALLEL_FROM {
        return messages.into_iter().map(message_hash).collect();
    }
    messages.into_par_iter().map(message_hash).collect()
}

/// [`record_run`] with the output's keys already known.
pub(super) fn record_run_keyed(
    store: &Store,
    session: &str,
    parent: Option<&str>,
    segments: Vec<String>,
    keys: Vec<String>,
) -> Result<ArchivedRun, StoreError> {
    let mut h = Fingerprinter::new();
    for key in &keys {
        h.write(key.as_bytes());
        h.write(b"\n");
    }
    let prefix = format!("{:032x}", h.digest128());
    let record = RunRecord {
        parent: parent.map(str::to_string),
        segments,
        outputs: keys.len(),
        prefix,
    };
    let bytes = encode("a run record", &record)?;
    let name = format!("{:032x}", twox_hash::XxHash3_128::oneshot(&bytes));
    store.record_put(&format!("{RUNS_PREFIX}{session}"), &name, &bytes)?;
    Ok(ArchivedRun { name, keys })
}

/// The names of the segments of the history that made `conv` (see the [module docs](self)),
/// newest first: the run that made it, its last stage's segment first, then its parent's and
/// so on. `None` when no run record matches it.
///
/// The order decides which of two runs' entries unwinds a message both made: a run that took
/// an earlier message from its input again (the client edited it, or moved its cache marks)
/// may make the very message the run before it made from that message's old form, and the
/// output's message is the newer run's.
pub(super) fn lineage(
    store: &Store,
    session: &str,
    conv: &Conversation,
) -> Result<Option<Vec<String>>, StoreError> {
    let runs: HashMap<String, RunRecord> = store
        .records(&format!("{RUNS_PREFIX}{session}"))?
        .into_iter()
        // A damaged record tells nothing: expansion then falls back to every segment.
        .filter_map(|(name, bytes)| Some((name, serde_json::from_slice(&bytes).ok()?)))
        .collect();
    if runs.is_empty() {
        return Ok(None);
    }
    let keys = conv
        .messages
        .iter()
        .map(message_hash)
        .collect::<Result<Vec<_>, _>>()?;
    let mut at: Vec<usize> = runs
        .values()
        .map(|r| r.outputs)
        .filter(|&n| n <= keys.len())
        .collect();
    at.sort_unstable();
    at.dedup();
    let hashes: HashMap<usize, String> = prefix_hashes(&keys, &at).into_iter().collect();
    // The longest output the conversation starts with; equal ones by name, for a stable pick.
    let Some((name, _)) = runs
        .iter()
        .filter(|(_, r)| hashes.get(&r.outputs) == Some(&r.prefix))
        .max_by(|(a, ra), (b, rb)| ra.outputs.cmp(&rb.outputs).then(b.cmp(a)))
    else {
        return Ok(None);
    };
    let mut segments = Vec::new();
    let mut named = HashSet::new();
    let mut seen = HashSet::new();
    let mut next = Some(name.clone());
    while let Some(name) = next.take() {
        // A parent named twice would be a cycle: each record is walked once.
        if !seen.insert(name.clone()) {
            break;
        }
        let Some(run) = runs.get(&name) else { break };
        for segment in run.segments.iter().rev() {
            if named.insert(segment.clone()) {
                segments.push(segment.clone());
            }
        }
        next = run.parent.clone();
    }
    Ok(Some(segments))
}
