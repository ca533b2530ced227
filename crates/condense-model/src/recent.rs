//! What a long-lived process (`condense serve`) keeps between requests, by key: at most a
//! given number of values, the least recently used going first. The host keeps its sessions'
//! resume points in one, `serve` its write memos and looks, `condense-formats` the frame members
//! (system prompts, tool lists) it read before.
//!
//! ```
//! use condense_model::recent::Recent;
//!
//! let kept: Recent<String, u32> = Recent::new(2);
//! kept.keep("a".into(), 1);
//! kept.keep("b".into(), 2);
//! kept.keep("c".into(), 3); // "a" goes
//! assert_eq!(kept.take("a"), None);
//! assert!(kept.contains("b"));
//! assert_eq!(kept.get("b"), Some(2)); // a copy: "b" stays, used last
//! assert_eq!(kept.take("c"), Some(3)); // taken out while in use
//! assert_eq!(kept.len(), 1);
//! ```

use std::borrow::Borrow;
use std::collections::HashMap;
use std::hash::Hash;
use std::sync::Mutex;

/// Values by key, at most `capacity` of them (see the [module docs](self)). A value is taken
/// out while it is used (a session's requests run in order) and kept again after.
#[derive(Debug)]
pub struct Recent<K, V> {
    inner: Mutex<Entries<K, V>>,
    capacity: usize,
}

#[derive(Debug)]
struct Entries<K, V> {
    by_key: HashMap<K, (u64, V)>,
    /// Counts uses, to find the least recently used value.
    clock: u64,
}

impl<K: Eq + Hash + Clone, V> Recent<K, V> {
    pub fn new(capacity: usize) -> Recent<K, V> {
        Recent {
            inner: Mutex::new(Entries {
                by_key: HashMap::new(),
                clock: 0,
            }),
            capacity,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Entries<K, V>> {
        // A panic while held cannot leave the map half-changed (one insert, remove or scan).
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The value kept for `key` (a borrowed form of the key will do), taken out.
    pub fn take<Q>(&self, key: &Q) -> Option<V>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        self.lock().by_key.remove(key).map(|(_, v)| v)
    }

    /// A copy of the value kept for `key`, which stays kept, as used now (for a value many
    /// users share, not taken out while in use).
    pub fn get<Q>(&self, key: &Q) -> Option<V>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
        V: Clone,
    {
        let mut entries = self.lock();
        entries.clock += 1;
        let now = entries.clock;
        let (used, value) = entries.by_key.get_mut(key)?;
        *used = now;
        Some(value.clone())
    }

    /// Whether a value is kept for `key` (not a use: it does not count as used).
    pub fn contains<Q>(&self, key: &Q) -> bool
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        self.lock().by_key.contains_key(key)
    }

    /// Keeps `value` for `key`; past the capacity, the least recently used value goes.
    pub fn keep(&self, key: K, value: V) {
        let mut entries = self.lock();
        entries.clock += 1;
        let used = entries.clock;
        entries.by_key.insert(key, (used, value));
        if entries.by_key.len() > self.capacity {
            let oldest = entries
                .by_key
                .iter()
                .min_by_key(|(_, (used, _))| *used)
                .map(|(k, _)| k.clone());
            if let Some(oldest) = oldest {
                entries.by_key.remove(&oldest);
            }
        }
    }

    /// How many values are kept.
    pub fn len(&self) -> usize {
        self.lock().by_key.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
