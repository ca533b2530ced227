//! How large records are kept in the database: compressed with LZ4, a block per [`CHUNK`] of
//! the value, so a record streamed in ([`crate::RecordWriter`]) and the same record put whole
//! are stored as the same bytes (an unchanged record is then not rewritten).
//!
//! Records are most of what a store keeps (the expansion archive's segments: the messages
//! stages changed or removed, as JSON), and they are text: a first run on a 1M-token session
//! wrote 8 MB of records for a 3.2 MB input. LZ4 packs such bytes 3.5x-6x at over 1 GB/s, so a
//! run writes (to its spill file, the log, then the database) a fraction of what it did, and
//! the store on disk is that much smaller. Blobs are not compressed: see `ADD_CODEC` in `db`.
//!
//! A record's `codec` column says how to read it: [`RAW`] (every record of a store made before
//! this, and small or incompressible ones) or [`LZ4_BLOCKS`]. The blocks follow one another, each an
//! 8-byte header (the block's length in the value, then its stored length, little-endian
//! `u32`s) and its bytes; a block that LZ4 would not make smaller is kept as it is, marked by
//! the top bit of its stored length.

use crate::spill::CHUNK;
use std::io;

/// A value stored as it is.
pub const RAW: i64 = 0;
/// A value stored as LZ4 blocks (see the module docs).
pub const LZ4_BLOCKS: i64 = 1;

/// Values from this size on are compressed: below it, a block header and LZ4's own overhead
/// leave little to gain (state, index and read-as records are smaller).
pub const COMPRESS_FROM: usize = 1024;

/// The top bit of a block's stored length: its bytes are the value's own.
const STORED_RAW: u32 = 1 << 31;

const HEADER: usize = 8;

/// `raw` as it is stored, and its codec: [`LZ4_BLOCKS`] from [`COMPRESS_FROM`] bytes on, except
/// that a value of one block (under [`CHUNK`]) that would not shrink stays [`RAW`]. A value of
/// a [`CHUNK`] or more is always blocks, whatever they hold (a block that does not shrink costs
/// its 8-byte header): that is how [`crate::RecordWriter`] stores what it streams, which cannot
/// know the whole value in advance, so both store the same bytes for the same value.
pub fn encode_if_smaller(raw: &[u8]) -> (Vec<u8>, i64) {
    if raw.len() >= COMPRESS_FROM {
        let blocks = encode(raw);
        if raw.len() >= CHUNK || blocks.len() < raw.len() {
            return (blocks, LZ4_BLOCKS);
        }
    }
    (raw.to_vec(), RAW)
}

/// `raw` as [`LZ4_BLOCKS`]: one block per [`CHUNK`] of it.
pub fn encode(raw: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(raw.len() / 3 + HEADER);
    for piece in raw.chunks(CHUNK) {
        encode_block(piece, &mut out);
    }
    out
}

/// Appends one block holding `piece` (at most [`CHUNK`] bytes) to `out`.
pub fn encode_block(piece: &[u8], out: &mut Vec<u8>) {
    let start = out.len();
    // CHUNK is far below 2^31, so every length fits in the 31 bits a header gives it.
    let len = piece.len() as u32;
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(&[0; 4]);
    // Compressed into a buffer of its own, which lz4_flex leaves unfilled until it writes:
    // compressing into `out` meant zeroing the largest size a block can take first (a tenth
    // of a first run's compression).
    let compressed = lz4_flex::block::compress(piece);
    let stored = if compressed.len() < piece.len() {
        out.extend_from_slice(&compressed);
        compressed.len() as u32
    } else {
        // Not smaller: the piece as it is.
        out.extend_from_slice(piece);
        len | STORED_RAW
    };
    out[start + 4..start + HEADER].copy_from_slice(&stored.to_le_bytes());
}

/// The value `stored` holds, stored with `codec`.
pub fn decode(stored: Vec<u8>, codec: i64) -> io::Result<Vec<u8>> {
    match codec {
        RAW => Ok(stored),
        LZ4_BLOCKS => decode_blocks(&stored),
        other => Err(io::Error::other(format!(
            "a value stored with codec {other}, which this version of condense does not know \
             (written by a newer one?)"
        ))),
    }
}

fn decode_blocks(mut stored: &[u8]) -> io::Result<Vec<u8>> {
    let corrupt = |what: &str| io::Error::other(format!("a compressed value is damaged: {what}"));
    let mut out = Vec::new();
    while !stored.is_empty() {
        let header = stored
            .get(..HEADER)
            .ok_or_else(|| corrupt("a block header is cut short"))?;
        let word = |at: usize| {
            u32::from_le_bytes([header[at], header[at + 1], header[at + 2], header[at + 3]])
        };
        let (len, stored_len) = (word(0) as usize, word(4));
        let raw = stored_len & STORED_RAW != 0;
        let n = (stored_len & !STORED_RAW) as usize;
        let body = stored
            .get(HEADER..HEADER + n)
            .ok_or_else(|| corrupt("a block is cut short"))?;
        if raw {
            if n != len {
                return Err(corrupt("a stored block's length is wrong"));
            }
            out.extend_from_slice(body);
        } else if out.is_empty() && stored.len() == HEADER + n {
            // The only block (most values): decompressed into a buffer lz4_flex leaves
            // unfilled until it writes, which is the value.
            out = lz4_flex::block::decompress(body, len).map_err(|e| corrupt(&e.to_string()))?;
            if out.len() != len {
                return Err(corrupt("a block decompressed to the wrong length"));
            }
        } else {
            let at = out.len();
            out.resize(at + len, 0);
            let got = lz4_flex::block::decompress_into(body, &mut out[at..])
                .map_err(|e| corrupt(&e.to_string()))?;
            if got != len {
                return Err(corrupt("a block decompressed to the wrong length"));
            }
        }
        stored = &stored[HEADER + n..];
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Text like what a store keeps: lines of a log and a source file, repeated with changes.
    fn text(n: usize) -> Vec<u8> {
        let mut out = String::new();
        let mut i = 0;
        while out.len() < n {
            out.push_str(&format!(
                "2025-01-07 INFO request {i} served in {}ms\n    let value_{i} = compute(input, {});\n",
                i * 3,
                i % 17
            ));
            i += 1;
        }
        out.truncate(n);
        out.into_bytes()
    }

    #[test]
    fn values_round_trip_across_blocks() {
        for n in [0, 1, COMPRESS_FROM, CHUNK - 1, CHUNK, 3 * CHUNK + 17] {
            let raw = text(n);
            let (stored, codec) = encode_if_smaller(&raw);
            assert_eq!(codec == LZ4_BLOCKS, n >= COMPRESS_FROM, "{n}");
            if codec == LZ4_BLOCKS {
                assert!(stored.len() * 3 < raw.len(), "{n}: {} bytes", stored.len());
            }
            assert_eq!(decode(stored, codec).unwrap(), raw, "{n}");
        }
    }

    #[test]
    fn incompressible_blocks_are_kept_as_they_are() {
        let mut x = 7_u64;
        let noise: Vec<u8> = (0..CHUNK + 100)
            .map(|_| {
                x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
                (x >> 33) as u8
            })
            .collect();
        // One block that would not shrink: stored raw.
        let one = &noise[..CHUNK - 1];
        assert_eq!(encode_if_smaller(one), (one.to_vec(), RAW));
        // A CHUNK or more: blocks, as a streamed record is, each kept as it is (8 bytes more).
        let (blocks, codec) = encode_if_smaller(&noise);
        assert_eq!(
            (blocks.len(), codec),
            (noise.len() + 2 * HEADER, LZ4_BLOCKS)
        );
        assert_eq!(blocks, encode(&noise));
        assert_eq!(decode(blocks, LZ4_BLOCKS).unwrap(), noise);
    }

    #[test]
    fn damaged_or_unknown_values_are_errors() {
        let stored = encode(&text(5000));
        for cut in [3, HEADER + 2, stored.len() - 1] {
            let e = decode(stored[..cut].to_vec(), LZ4_BLOCKS).unwrap_err();
            assert!(e.to_string().contains("damaged"), "{cut}: {e}");
        }
        let mut flipped = stored.clone();
        flipped[0] ^= 0x40; // the block's length no longer matches what it holds
        assert!(decode(flipped, LZ4_BLOCKS).is_err());
        let e = decode(stored, 9).unwrap_err();
        assert!(e.to_string().contains("newer"), "{e}");
    }
}
