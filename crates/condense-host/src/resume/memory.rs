//! The resume points a long-lived pipeline (`condense serve`) keeps in memory between runs.

use super::Loaded;
use condense_store::Store;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Mutex;

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
#[derive(Debug, Default)]
pub(crate) struct PointMemory {
    inner: Mutex<Kept>,
    /// How many runs started from a point kept here (for tests).
    #[cfg(test)]
    pub(crate) hits: std::sync::atomic::AtomicUsize,
}

#[derive(Debug, Default)]
struct Kept {
    points: HashMap<(PathBuf, String), Remembered>,
    /// Counts uses, to find the least recently used point.
    clock: u64,
}

#[derive(Debug)]
struct Remembered {
    bytes: u128,
    point: Loaded,
    used: u64,
}

impl PointMemory {
    fn lock(&self) -> std::sync::MutexGuard<'_, Kept> {
        // A panic while held cannot leave the map half-changed (one insert, remove or scan).
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The point kept for `session` of `store` if the store's point is still its bytes
    /// (`bytes`: their hash). Taken out: the run saves the next one.
    pub(super) fn take(&self, store: &Store, session: &str, bytes: u128) -> Option<Loaded> {
        let key = (store.root().to_path_buf(), session.to_string());
        let mut kept = self.lock();
        let remembered = kept.points.remove(&key)?;
        let point = (remembered.bytes == bytes).then_some(remembered.point)?;
        #[cfg(test)]
        self.hits.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Some(point)
    }

    pub(super) fn keep(&self, store: &Store, session: &str, bytes: u128, point: Loaded) {
        let key = (store.root().to_path_buf(), session.to_string());
        let mut kept = self.lock();
        kept.clock += 1;
        let used = kept.clock;
        kept.points.insert(key, Remembered { bytes, point, used });
        if kept.points.len() > REMEMBERED_SESSIONS {
            let oldest = kept
                .points
                .iter()
                .min_by_key(|(_, r)| r.used)
                .map(|(k, _)| k.clone());
            if let Some(oldest) = oldest {
                kept.points.remove(&oldest);
            }
        }
    }
}
