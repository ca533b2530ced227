//! Where the proxy keeps what outlives a request: the store (archives and per-session stage
//! state) and each session's lock and totals, behind one trait so that a shared backend
//! (several replicas behind a load balancer) can replace the local one.

use condense_store::Store;
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

/// One body sent upstream (or one request that failed), recorded into its session's totals:
/// a request's first send, then each prompt-too-long retry.
#[derive(Debug, Clone, Default)]
pub struct Turn {
    /// The client's body, in tokens.
    pub tokens_before: usize,
    /// The body sent, in tokens.
    pub tokens_after: usize,
    /// The body sent differs from the client's, and no earlier send of the request did.
    pub compressed: bool,
    /// A retry of the request recorded last in its session (not a new request).
    pub retry: bool,
    /// Compression failed and the original went upstream (`on_error = "pass"`), or 502.
    pub failed: bool,
    /// A hash per element of what was sent (system and tools first, then each message): the
    /// next turn's prefix is compared with it (prompt-cache stability).
    pub prefix: Vec<u64>,
}

/// A session's totals, as `GET /condense/status` shows them.
#[derive(Debug, Clone, Default, Serialize, PartialEq, Eq)]
pub struct Totals {
    /// Client requests.
    pub requests: u64,
    /// Bodies sent again after a prompt-too-long answer.
    pub retries: u64,
    pub compressed: u64,
    pub failed: u64,
    /// Every body sent upstream, retries included: the client's size, and as sent.
    pub tokens_before: u64,
    pub tokens_after: u64,
    pub tokens_saved: u64,
    /// Turns whose sent prefix equals what the session's previous turn sent.
    pub cache_stable: u64,
    /// Turns that had a previous turn to compare with.
    pub cache_compared: u64,
    /// Over those turns: the elements (system and tools, then messages) the previous turn sent,
    /// and how many of them start the next turn unchanged. A turn that is not stable still
    /// reuses the provider's cache up to its first changed element, so `cache_kept /
    /// cache_previous` says how much of what was sent stays cacheable, where `cache_stable`
    /// says only how often all of it does.
    pub cache_previous: u64,
    pub cache_kept: u64,
}

impl Totals {
    fn add(&mut self, other: &Totals) {
        self.requests += other.requests;
        self.retries += other.retries;
        self.compressed += other.compressed;
        self.failed += other.failed;
        self.tokens_before += other.tokens_before;
        self.tokens_after += other.tokens_after;
        self.tokens_saved += other.tokens_saved;
        self.cache_stable += other.cache_stable;
        self.cache_compared += other.cache_compared;
        self.cache_previous += other.cache_previous;
        self.cache_kept += other.cache_kept;
    }
}

/// `GET /condense/status`.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Status {
    /// Requests of the compressed routes whose body is in (their place in line taken) and
    /// whose answer has not started: being compressed, or waiting for their session's earlier
    /// requests (this process's).
    pub in_flight: u64,
    pub totals: Totals,
    pub sessions: BTreeMap<String, Totals>,
}

/// The proxy's state across requests. A shared backend implements the same four calls: the
/// store on shared storage, the session lock as a distributed lock (or sticky routing), the
/// totals and last prefix in a shared table.
pub trait SessionBackend: Send + Sync {
    /// The store holding every session's archive and stage state.
    fn store(&self) -> &Store;
    /// The lock that orders a session's compressions: two requests of one session never race
    /// on its stage state; sessions never wait for each other.
    fn lock(&self, session: &str) -> Arc<tokio::sync::Mutex<()>>;
    /// Adds a turn to its session's totals; what its prefix kept of what the previous turn
    /// sent ([`compare_prefixes`]; `None` for a session's first turn, and for a retry).
    fn record(&self, session: &str, turn: Turn) -> Option<PrefixKept>;
    /// Every session's totals.
    fn status(&self) -> Status;
}

/// What a turn kept of the previous turn's prefix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PrefixKept {
    /// Elements the previous turn sent.
    pub previous: usize,
    /// How many of them start this turn unchanged (up to the first that differs).
    pub kept: usize,
}

impl PrefixKept {
    /// All of the previous turn's prefix starts this one: a provider's cache of it is reused.
    pub fn stable(self) -> bool {
        self.kept == self.previous
    }
}

/// How much of `previous` (one hash per element sent) starts `next` unchanged.
pub fn compare_prefixes(previous: &[u64], next: &[u64]) -> PrefixKept {
    let kept = previous
        .iter()
        .zip(next)
        .take_while(|(a, b)| a == b)
        .count();
    PrefixKept {
        previous: previous.len(),
        kept,
    }
}

#[derive(Default)]
struct Entry {
    lock: Arc<tokio::sync::Mutex<()>>,
    totals: Totals,
    last_prefix: Option<Vec<u64>>,
}

/// One process: the store on the local disk, sessions in memory.
pub struct LocalBackend {
    store: Store,
    sessions: Mutex<HashMap<String, Entry>>,
}

impl LocalBackend {
    pub fn new(store: Store) -> LocalBackend {
        LocalBackend {
            store,
            sessions: Mutex::new(HashMap::new()),
        }
    }

    fn with<R>(&self, session: &str, f: impl FnOnce(&mut Entry) -> R) -> R {
        // A panic while the map was held cannot leave it inconsistent (every update is one
        // field assignment), so a poisoned lock is used as it is.
        let mut map = self.sessions.lock().unwrap_or_else(|p| p.into_inner());
        f(map.entry(session.to_string()).or_default())
    }
}

impl SessionBackend for LocalBackend {
    fn store(&self) -> &Store {
        &self.store
    }

    fn lock(&self, session: &str) -> Arc<tokio::sync::Mutex<()>> {
        self.with(session, |e| Arc::clone(&e.lock))
    }

    fn record(&self, session: &str, turn: Turn) -> Option<PrefixKept> {
        self.with(session, |e| {
            // A retry is compared with nothing: what it replaces was refused, not cached.
            let compared = e
                .last_prefix
                .as_ref()
                .filter(|_| !turn.retry)
                .map(|prev| compare_prefixes(prev, &turn.prefix));
            let t = &mut e.totals;
            if let Some(c) = compared {
                t.cache_compared += 1;
                t.cache_stable += u64::from(c.stable());
                t.cache_previous += c.previous as u64;
                t.cache_kept += c.kept as u64;
            }
            if turn.retry {
                t.retries += 1;
            } else {
                t.requests += 1;
            }
            t.compressed += u64::from(turn.compressed);
            t.failed += u64::from(turn.failed);
            t.tokens_before += turn.tokens_before as u64;
            t.tokens_after += turn.tokens_after as u64;
            t.tokens_saved += turn.tokens_before.saturating_sub(turn.tokens_after) as u64;
            if !turn.prefix.is_empty() {
                e.last_prefix = Some(turn.prefix);
            }
            compared
        })
    }

    fn status(&self) -> Status {
        let map = self.sessions.lock().unwrap_or_else(|p| p.into_inner());
        let mut status = Status::default();
        for (id, e) in map.iter() {
            status.totals.add(&e.totals);
            status.sessions.insert(id.clone(), e.totals.clone());
        }
        status
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stability_compares_with_the_previous_turn() -> Result<(), Box<dyn std::error::Error>> {
        assert_eq!(
            compare_prefixes(&[1, 2, 3], &[1, 2]),
            PrefixKept {
                previous: 3,
                kept: 2
            }
        );
        assert!(!compare_prefixes(&[1, 2, 3], &[1, 2]).stable());
        assert!(compare_prefixes(&[], &[5]).stable());
        let dir = tempfile::tempdir()?;
        let b = LocalBackend::new(Store::open(dir.path())?);
        let turn = |prefix: Vec<u64>| Turn {
            tokens_before: 10,
            tokens_after: 4,
            compressed: true,
            prefix,
            ..Turn::default()
        };
        let stable = |k: Option<PrefixKept>| k.map(PrefixKept::stable);
        assert_eq!(b.record("s", turn(vec![1, 2])), None);
        assert_eq!(stable(b.record("s", turn(vec![1, 2, 3, 4]))), Some(true));
        assert_eq!(
            stable(b.record("s", turn(vec![1, 9, 3, 4, 5]))),
            Some(false)
        );
        assert_eq!(b.record("t", turn(vec![1])), None);
        // A retry counts what it sent, is compared with nothing, and is what the next turn
        // is compared with.
        let retry = Turn {
            retry: true,
            compressed: false,
            tokens_after: 2,
            ..turn(vec![7])
        };
        assert_eq!(b.record("s", retry), None);
        assert_eq!(stable(b.record("s", turn(vec![7, 8]))), Some(true));
        let st = b.status();
        assert_eq!(st.sessions["s"].cache_stable, 2);
        assert_eq!(st.sessions["s"].cache_compared, 3);
        // Kept of the previous prefixes: 2 of 2, 1 of 4 (the second element changed), 1 of 1.
        assert_eq!(st.sessions["s"].cache_previous, 7);
        assert_eq!(st.sessions["s"].cache_kept, 4);
        assert_eq!(st.sessions["s"].requests, 4);
        assert_eq!(st.sessions["s"].retries, 1);
        assert_eq!(st.sessions["s"].compressed, 4);
        assert_eq!(st.totals.requests, 5);
        assert_eq!(st.totals.retries, 1);
        assert_eq!(st.totals.tokens_saved, 6 * 5 + 8);
        Ok(())
    }
}
