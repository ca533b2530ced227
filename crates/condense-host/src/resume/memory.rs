//! The resume points a long-lived pipeline (`condense serve`) keeps in memory between runs.

use super::{split_output, Loaded};
use condense_model::recent::Recent;
use condense_model::Conversation;
use condense_store::Store;
use std::path::PathBuf;

/// How many sessions' points a [`PointMemory`] keeps (the least recently used goes first):
/// each holds an output's messages, at most about a window's worth of text.
const REMEMBERED_SESSIONS: usize = 64;

/// The resume points of the sessions a long-lived pipeline (`condense serve`) ran last, kept
/// so that a session's next turn does not read its point back from the store (at 200k tokens,
/// the largest single cost of a turn's start), with the messages its output stored and the
/// input messages it kept as they were ([`super::InputsKept`]): the next request's reader may
/// leave those unread as well.
///
/// Memory never decides what a run starts from: a kept point is used only while the store
/// holds exactly the bytes it was saved as (their xxh3-128). Another process's run on the
/// session, or this run's transaction failing after the save, leaves other bytes, and the
/// point is read from the store as without memory.
#[derive(Debug)]
pub(crate) struct PointMemory {
    /// By store and session: the hash of the point's bytes, and the point.
    points: Recent<(PathBuf, String), (u128, Loaded)>,
    /// How many runs started from a point kept here (for tests).
    #[cfg(test)]
    pub(crate) hits: std::sync::atomic::AtomicUsize,
}

impl Default for PointMemory {
    fn default() -> Self {
        PointMemory {
            points: Recent::new(REMEMBERED_SESSIONS),
            #[cfg(test)]
            hits: Default::default(),
        }
    }
}

impl PointMemory {
    /// The point kept for `session` of `store` if the store's point is still its bytes
    /// (`bytes`: their hash). Taken out: the run saves the next one.
    pub(super) fn take(&self, store: &Store, session: &str, bytes: u128) -> Option<Loaded> {
        let key = (store.root().to_path_buf(), session.to_string());
        let (kept, point) = self.points.take(&key)?;
        let point = (kept == bytes).then_some(point)?;
        #[cfg(test)]
        self.hits.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Some(point)
    }

    pub(super) fn keep(&self, store: &Store, session: &str, bytes: u128, point: Loaded) {
        let key = (store.root().to_path_buf(), session.to_string());
        self.points.keep(key, (bytes, point));
    }

    /// Moves the output of the run that saved `session`'s point into it (the input messages
    /// it kept, the messages it stored), when the point waits for it. Without it (the caller
    /// did not hand it over, or what it handed does not add up to the point's layout), the
    /// next run reads those from the store and the input, as without memory.
    pub(crate) fn fill(&self, store: &Store, session: &str, output: Conversation) {
        let key = (store.root().to_path_buf(), session.to_string());
        let Some((bytes, mut point)) = self.points.take(&key) else {
            return;
        };
        if let Some(prints) = point.awaiting.take() {
            if let Some((kept, stored)) = split_output(&point.point.layout, prints, output) {
                point.kept = kept;
                point.stored = Some(stored);
            }
        }
        self.points.keep(key, (bytes, point));
    }
}
