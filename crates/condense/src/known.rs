//! What `compress` keeps of each input's message list so that the next turn's read leaves the
//! unchanged history unread ([`condense_formats::known`]).
//!
//! An agent compressing once per turn hands condense the previous input plus the new turn. The
//! run resumes from the previous output (`condense_host`'s resume point), which stands for the
//! input's history and keeps, packed, the input messages it holds as they were, so parsing the
//! history again is wasted: at a million tokens it was the largest part of a turn. After each
//! run the store keeps, under the hash of the list's first message
//! (`records/known-lists/<key>`), the list's length, a hash of its exact text, where each
//! message is and each one's fingerprint (the entries of every 512 messages in a block of
//! their own, `records/known-blocks/<key>-<hash>`: a turn rewrites the last few hundred, not
//! the whole list). The next read of a list that starts with exactly that text steps over it
//! without scanning and reads only the first few messages and the new ones.
//!
//! Nothing depends on this record being right: a run that cannot drop the unread messages
//! (another pipeline, a point that does not match) reads them first (`ReadFrom::unread`), and
//! a damaged record is no record.
//!
//! It also keeps, per session (`records/read-back/<session>`), the keys of the texts the last
//! output was written with that read back as their messages ([`condense_formats::WriteMemo::verified`]):
//! the next turn writes most of them again and need not read them back.

use crate::cli::CompressArgs;
use crate::input::{Input, Known};
use crate::Failure;
use condense_formats::WriteMemo;
use condense_host::RunResult;
use condense_store::{Store, DB_FILE};
use std::path::Path;

/// The store a `compress` run uses, and what it knows to read the input with.
pub(crate) struct RunStore<'d> {
    dir: &'d Path,
    /// The store, when it exists already and the run resumes: what it knows is used.
    existing: Option<Store>,
}

impl<'d> RunStore<'d> {
    /// The store at `dir` for a run with `args`. Any failure to open it is left for
    /// [`RunStore::open`] to report.
    pub(crate) fn at(dir: &'d Path, args: &CompressArgs) -> RunStore<'d> {
        let resumes = !args.no_resume && !args.fresh;
        let existing = (resumes && dir.join(DB_FILE).is_file())
            .then(|| Store::open(dir).ok())
            .flatten();
        RunStore { dir, existing }
    }

    /// `read` handed what the store knows of message lists, when it is used.
    pub(crate) fn read<T>(&self, read: impl FnOnce(Option<Known<'_>>) -> T) -> T {
        match &self.existing {
            Some(store) => read(Some(&condense_serve::compress::known_lists(store))),
            None => read(None),
        }
    }

    /// The store, opened (created if needed) now when it was not before: after the input
    /// read and the plugins loaded, so a run that fails before creates no store.
    pub(crate) fn open(self) -> Result<Store, Failure> {
        match self.existing {
            Some(store) => Ok(store),
            None => Store::open(self.dir).map_err(|e| Failure::run(e.to_string())),
        }
    }
}

/// Keeps what the next read of `input`'s list may leave unread, after its one run `runs`
/// (inside the run's transaction). Nothing for a document of several conversations, a list
/// not read quick (but a Claude Code session's lines), or a run that kept no resume point.
pub(crate) fn remember(
    store: &Store,
    input: &Input,
    runs: &[RunResult],
    args: &CompressArgs,
) -> Result<(), Failure> {
    let ([run], false) = (runs, args.no_resume) else {
        return Ok(());
    };
    // A run that keeps a resume point fingerprints its output for it.
    if run.output_fingerprints.is_empty() {
        return Ok(());
    }
    condense_serve::compress::remember_list(&input.doc, store).map_err(Failure::run)
}

/// Store namespace of the texts known to read back as their messages, by session.
const READ_BACK: &str = "read-back";

/// The session whose records a write of the output of `runs` keeps (the texts known to read
/// back, the writer's texts: [`crate::write_texts`]): the one run's, when the document holds
/// one conversation, the only case kept.
pub(crate) fn session_of(runs: &[RunResult]) -> Option<&str> {
    match runs {
        [run] => Some(&run.session),
        _ => None,
    }
}

/// Hands `memo` the keys of the texts `store` knows to read back as their messages for
/// `session` ([`session_of`]), and gives the record as stored. A damaged record is none.
pub(crate) fn trust_read_back(
    store: &Store,
    session: Option<&str>,
    memo: &mut WriteMemo,
) -> Vec<u8> {
    let stored = session
        .and_then(|s| store.record_get(READ_BACK, s).ok().flatten())
        .unwrap_or_default();
    let keys = stored.chunks_exact(16).filter_map(|k| k.try_into().ok());
    memo.trust(keys.map(u128::from_le_bytes));
    stored
}

/// Keeps what the write's read back found (inside the run's transaction) when it is not the
/// record `stored` already ([`trust_read_back`]).
pub(crate) fn keep_read_back(
    store: &Store,
    session: Option<&str>,
    (stored, memo): (&[u8], &WriteMemo),
) -> Result<(), Failure> {
    let Some(session) = session else {
        return Ok(());
    };
    let mut keys: Vec<u128> = memo.verified().collect();
    keys.sort_unstable();
    let bytes: Vec<u8> = keys.iter().flat_map(|k| k.to_le_bytes()).collect();
    if bytes == stored {
        return Ok(());
    }
    store
        .record_put(READ_BACK, session, &bytes)
        .map_err(|e| Failure::run(e.to_string()))
}
