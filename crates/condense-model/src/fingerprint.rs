//! Fingerprints: the xxh3-128 of a value's [`Hash`] stream, or of what is written to it.
//!
//! condense keys a lot by fingerprint: the writer tells unchanged messages by theirs, a resume
//! point matches the next input's messages by theirs, the archive keys a message by the hash of
//! its JSON. `#[derive(Hash)]` feeds a message to the hasher in dozens of small writes (a
//! discriminant, a length, a short id), and xxh3's streaming `write` costs more per call than
//! the hashing of a short piece: on a 200k-token request most of the time went there.
//! [`Fingerprinter`] gathers small writes in a buffer and hands xxh3 whole chunks, or hashes
//! them in one call when they all fit (most messages). Streaming xxh3 is the same function
//! whatever the chunking, so a fingerprint is the one the plain streaming hasher gives: points
//! and keys written before stay valid.
//!
//! ```
//! use condense_model::fingerprint::{fingerprint, Fingerprinter};
//! use condense_model::{Block, Message, Role};
//! use std::hash::Hash;
//!
//! let m = Message::new("m1", Role::User, vec![Block::text("Fix the failing test")]);
//! let mut f = Fingerprinter::new();
//! m.hash(&mut f);
//! assert_eq!(fingerprint(&m), f.digest128());
//!
//! // Bytes written through `io::Write` (a value serialized straight into the hasher).
//! let mut w = Fingerprinter::new();
//! std::io::Write::write_all(&mut w, b"{\"a\":1}").unwrap();
//! assert_eq!(w.digest128(), twox_hash::XxHash3_128::oneshot(b"{\"a\":1}"));
//! ```

use std::hash::{Hash, Hasher};
use twox_hash::xxhash3_128::{RawHasher, SecretBuffer, DEFAULT_SECRET_LENGTH};
use twox_hash::XxHash3_128;

/// twox-hash's streaming xxh3-128 with the default secret borrowed, not allocated: a
/// fingerprint is made for every message, and most never stream (see [`Fingerprinter::digest128`]).
type Streaming = RawHasher<&'static [u8; DEFAULT_SECRET_LENGTH]>;

/// Writes up to this long are gathered; longer ones go to xxh3 straight (after what is
/// gathered), where streaming costs nothing extra.
const GATHER: usize = 512;

/// An xxh3-128 streaming hasher that gathers small writes (see the [module docs](self)).
pub struct Fingerprinter {
    xxh3: Streaming,
    /// Whether anything went to `xxh3` yet (until then everything written is in `buf`).
    streamed: bool,
    buf: [u8; GATHER],
    len: usize,
}

impl Default for Fingerprinter {
    fn default() -> Self {
        Self::new()
    }
}

impl Fingerprinter {
    pub fn new() -> Self {
        Fingerprinter {
            xxh3: RawHasher::new(SecretBuffer::default()),
            streamed: false,
            buf: [0; GATHER],
            len: 0,
        }
    }

    #[inline]
    fn push(&mut self, bytes: &[u8]) {
        if self.len + bytes.len() <= GATHER {
            self.buf[self.len..self.len + bytes.len()].copy_from_slice(bytes);
            self.len += bytes.len();
        } else {
            self.spill(bytes);
        }
    }

    /// What does not fit: the gathered bytes first, then `bytes` (gathered when short).
    #[cold]
    fn spill(&mut self, bytes: &[u8]) {
        self.xxh3.write(&self.buf[..self.len]);
        self.streamed = true;
        self.len = 0;
        if bytes.len() < GATHER {
            self.buf[..bytes.len()].copy_from_slice(bytes);
            self.len = bytes.len();
        } else {
            self.xxh3.write(bytes);
        }
    }

    /// The 128-bit hash of everything written: one-shot when it all fit in the buffer (most
    /// messages), the same value as streaming it.
    pub fn digest128(&self) -> u128 {
        if !self.streamed {
            return XxHash3_128::oneshot(&self.buf[..self.len]);
        }
        if self.len == 0 {
            return self.xxh3.finish_128();
        }
        let mut rest = self.xxh3.clone();
        rest.write(&self.buf[..self.len]);
        rest.finish_128()
    }
}

impl Hasher for Fingerprinter {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        self.push(bytes);
    }

    /// The low 64 bits of [`Fingerprinter::digest128`].
    fn finish(&self) -> u64 {
        self.digest128() as u64
    }
}

impl std::io::Write for Fingerprinter {
    #[inline]
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.push(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The xxh3-128 of `value`'s [`Hash`] stream: equal values, equal fingerprints; different
/// ones collide with negligible probability.
pub fn fingerprint<T: Hash + ?Sized>(value: &T) -> u128 {
    let mut h = Fingerprinter::new();
    value.hash(&mut h);
    h.digest128()
}

/// The [`fingerprint`] of each of `values`: `made` when it holds one per value (a caller that
/// made them already, the reader or the run), otherwise made here. Passing on fingerprints
/// spares a second pass over the values; a list of the wrong length (none made, or made of
/// other values) is never used.
pub fn each<'a, T: Hash>(values: &[T], made: &'a [u128]) -> std::borrow::Cow<'a, [u128]> {
    if made.len() == values.len() {
        std::borrow::Cow::Borrowed(made)
    } else {
        std::borrow::Cow::Owned(values.iter().map(fingerprint).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Block, Message, Role};

    #[test]
    fn each_uses_what_was_made_only_when_it_is_one_per_value() {
        let values = ["a", "b"];
        let made: Vec<u128> = values.iter().map(fingerprint).collect();
        assert!(matches!(
            each(&values, &made),
            std::borrow::Cow::Borrowed(_)
        ));
        assert_eq!(each(&values, &[]).as_ref(), made.as_slice());
        assert_eq!(each(&values, &made[..1]).as_ref(), made.as_slice());
    }

    /// Writes of every length around the gather size, in odd chunkings, hash as one stream.
    #[test]
    fn any_chunking_hashes_as_the_whole_stream() {
        let data: Vec<u8> = (0..5000u32).map(|i| (i * 7 + i / 13) as u8).collect();
        for chunk in [1, 3, 64, 511, 512, 513, 1500, 5000] {
            let mut f = Fingerprinter::new();
            for piece in data.chunks(chunk) {
                Hasher::write(&mut f, piece);
            }
            assert_eq!(
                f.digest128(),
                twox_hash::XxHash3_128::oneshot(&data),
                "chunk {chunk}"
            );
        }
        assert_eq!(
            Fingerprinter::new().digest128(),
            twox_hash::XxHash3_128::oneshot(b"")
        );
    }

    /// A message with short fields and one long result: the fingerprint is the plain streaming
    /// hasher's, and the one xxhash-rust's xxh3 gave before condense moved to twox-hash (the
    /// value below), so resume points and keys written before still match.
    #[test]
    fn same_as_the_streaming_hasher_and_as_before() {
        struct Plain(XxHash3_128);
        impl Hasher for Plain {
            fn write(&mut self, bytes: &[u8]) {
                self.0.write(bytes);
            }
            fn finish(&self) -> u64 {
                self.0.finish_128() as u64
            }
        }
        let long = "line of a long tool result\n".repeat(300);
        let m = Message::new(
            "toolu_1",
            Role::User,
            vec![
                Block::text("short"),
                Block::tool_result("toolu_1", crate::Content::string(long.clone())),
                Block::text(""),
            ],
        );
        let mut streamed = Plain(XxHash3_128::new());
        m.hash(&mut streamed);
        assert_eq!(fingerprint(&m), streamed.0.finish_128());
        assert_eq!(fingerprint(&m), 0x86b4_2421_390b_7d32_892f_ba29_80a0_b38a);
        let other = Message::new("toolu_1", Role::User, vec![Block::text("shorts")]);
        assert_ne!(fingerprint(&m), fingerprint(&other));
    }
}
