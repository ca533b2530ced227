//! The hash of the static vocabulary tables: shared by build.rs, which lays the tables out, and
//! by [`crate::fast`], which looks tokens up in them. Both must agree bit for bit.

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
