//! Maps and sets keyed by values that are hashes already (fingerprints, xxh3 digests).
//!
//! The standard maps hash every key with SipHash, a keyed hash built to resist chosen keys. A
//! fingerprint is a uniform 128-bit digest: hashing it again is pure cost, and condense looks
//! them up by the thousand per turn (the writer's texts, the resume point's records, the token
//! cache). [`Prehashed`] uses the key's own bits.
//!
//! ```
//! use condense_model::prehashed::PrehashedMap;
//! use condense_model::fingerprint::fingerprint;
//!
//! let mut texts: PrehashedMap<u128, &str> = PrehashedMap::default();
//! texts.insert(fingerprint("hello"), "hello");
//! assert_eq!(texts.get(&fingerprint("hello")), Some(&"hello"));
//! ```

use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasherDefault, Hasher};

/// A [`HashMap`] whose keys are hashes already.
pub type PrehashedMap<K, V> = HashMap<K, V, BuildHasherDefault<Prehashed>>;

/// A [`HashSet`] of hashes.
pub type PrehashedSet<K> = HashSet<K, BuildHasherDefault<Prehashed>>;

/// The hasher of [`PrehashedMap`]: a `u64` or `u128` key's bits as they are (a `u128` folded
/// to 64). Anything else written is folded in byte by byte, for completeness; keys should be
/// uniform hashes.
#[derive(Default, Clone, Copy)]
pub struct Prehashed(u64);

impl Hasher for Prehashed {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(b);
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 ^= n;
    }

    fn write_u128(&mut self, n: u128) {
        // Both halves: a fingerprint's low half alone would do, but a key built from two
        // 64-bit parts keeps both.
        self.0 ^= (n as u64) ^ ((n >> 64) as u64).rotate_left(32);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::hash::{BuildHasher, Hash};

    #[test]
    fn keys_are_their_own_hash() {
        let build = BuildHasherDefault::<Prehashed>::default();
        assert_eq!(build.hash_one(0xdead_beef_u64), 0xdead_beef);
        let k: u128 = (7 << 64) | 9;
        assert_eq!(build.hash_one(k), 9 ^ 7u64.rotate_left(32));
        // A reference hashes as what it refers to.
        let by_ref: &u128 = &k;
        assert_eq!(build.hash_one(by_ref), build.hash_one(k));
        let mut set: PrehashedSet<u128> = PrehashedSet::default();
        assert!(set.insert(k) && !set.insert(k) && set.contains(&k));
        let mut h = Prehashed::default();
        "ab".hash(&mut h);
        assert_ne!(h.finish(), 0);
    }
}
