//! The hash and slot layout of the static vocabulary tables: shared by build.rs, which lays the
//! tables out, and by [`crate::fast`], which looks tokens up in them. Both must agree bit for
//! bit.

/// Multiplier of the mix (the 64-bit golden ratio).
const K: u64 = 0x9E37_79B9_7F4A_7C15;

/// A fast hash of a token's bytes: tokens are short (a few bytes, 128 at most), so this reads
/// eight bytes at a time and mixes with one multiply per word.
pub fn hash(bytes: &[u8]) -> u64 {
    let mut h = (bytes.len() as u64).wrapping_mul(K);
    let mut words = bytes.chunks_exact(8);
    for w in &mut words {
        let w = u64::from_le_bytes([w[0], w[1], w[2], w[3], w[4], w[5], w[6], w[7]]);
        h = (h ^ w).wrapping_mul(K).rotate_left(31);
    }
    let rest = words.remainder();
    if !rest.is_empty() {
        let mut buf = [0u8; 8];
        buf[..rest.len()].copy_from_slice(rest);
        h = (h ^ u64::from_le_bytes(buf))
            .wrapping_mul(K)
            .rotate_left(31);
    }
    h ^= h >> 32;
    h = h.wrapping_mul(K);
    h ^ (h >> 29)
}

/// A table slot holds `rank + 1` in its low [`RANK_BITS`] bits (0: empty) and the top byte of
/// the token's hash above them, so a lookup skips almost every other token on its probe path
/// without reading that token's bytes (most lookups of the merge are of pairs that are no token).
pub const RANK_BITS: u32 = 24;

/// The slot of the token of `rank` whose bytes hash to `hash`.
// Only build.rs writes slots; the crate reads them with `tag` and `rank_in` (and its tests).
#[allow(dead_code)]
pub fn slot(rank: u32, hash: u64) -> u32 {
    debug_assert!(rank + 1 < 1 << RANK_BITS);
    (tag(hash) << RANK_BITS) | (rank + 1)
}

/// The tag of a hash: its top byte.
// build.rs only writes slots (through `slot`); the crate reads tags.
#[allow(dead_code)]
#[inline]
pub fn tag(hash: u64) -> u32 {
    (hash >> 56) as u32
}

/// The rank a non-empty slot holds.
#[allow(dead_code)] // read by the crate, not by build.rs
#[inline]
pub fn rank_in(slot: u32) -> u32 {
    (slot & ((1 << RANK_BITS) - 1)).saturating_sub(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slot_gives_back_its_rank_and_tag() {
        for (rank, bytes) in [
            (0u32, &b"a"[..]),
            (199_997, b" the"),
            ((1 << RANK_BITS) - 2, b"x"),
        ] {
            let h = hash(bytes);
            let s = slot(rank, h);
            assert_ne!(s, 0);
            assert_eq!((rank_in(s), s >> RANK_BITS), (rank, tag(h)));
        }
    }
}
