//! Maps and sets keyed by ids: message ids, tool_use ids, tool names.
//!
//! Every stage and the host's guards look up the ids of the whole conversation at every run
//! (which call a result answers, which ids repeat), a few thousand short strings a turn. The
//! standard maps hash them with SipHash; [`IdMap`] and [`IdSet`] use foldhash, several times
//! faster on short keys and still seeded per process, so crafted ids cannot pick collisions
//! ahead of time. Iteration order is unspecified, as with the standard maps.
//!
//! ```
//! use condense_model::ids::{IdMap, IdSet};
//!
//! let mut calls: IdMap<&str, usize> = IdMap::default();
//! calls.insert("toolu_01", 3);
//! let answered: IdSet<&str> = ["toolu_01"].into_iter().collect();
//! assert_eq!(calls.get("toolu_01"), Some(&3));
//! assert!(answered.contains("toolu_01"));
//! ```

use std::collections::{HashMap, HashSet};

/// The hasher of [`IdMap`] and [`IdSet`].
pub type IdHasher = foldhash::fast::RandomState;

/// A [`HashMap`] keyed by ids.
pub type IdMap<K, V> = HashMap<K, V, IdHasher>;

/// A [`HashSet`] of ids.
pub type IdSet<K> = HashSet<K, IdHasher>;

/// An empty [`IdMap`] with room for `capacity` entries.
pub fn id_map<K, V>(capacity: usize) -> IdMap<K, V> {
    IdMap::with_capacity_and_hasher(capacity, IdHasher::default())
}

/// An empty [`IdSet`] with room for `capacity` entries.
pub fn id_set<K>(capacity: usize) -> IdSet<K> {
    IdSet::with_capacity_and_hasher(capacity, IdHasher::default())
}
