//! The engine of the default tokenizers (`o200k_base`, `cl100k_base`): nothing to build at
//! start-up.
//!
//! bpe-openai deserializes a 32 MB automaton and compiles a Unicode regex on first use: about
//! 48 ms of every process that counts anything, more than counting a 200k-token session. Here
//! the vocabulary is a static hash table laid out by build.rs (token bytes, offsets and rank
//! slots, read in place from the binary: only the pages a text touches are ever loaded), the
//! pre-tokenizer is written out by hand ([`crate::pretokenize`]), and each piece is encoded by
//! tiktoken's own byte-pair merge (repeatedly merge the adjacent pair whose concatenation has the
//! lowest rank, the leftmost on ties), so the counts are tiktoken's by construction; tests
//! compare them with bpe-openai and tiktoken-rs on every shipped transcript. Most pieces are one
//! token and cost one lookup; pieces of up to 64 bytes merge by tiktoken's scan, up to 512
//! through a heap (O(n log n)), and longer ones (a run of thousands of spaces: rare) go to
//! bpe-openai's linear encoder, whose tables are then built once, on that first need.

use crate::memo;
use crate::pretokenize::{pieces, Pattern};
use crate::vocab_hash::{self, hash};
use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// One vocabulary's static tables (see build.rs for the layout).
#[derive(Debug)]
pub(crate) struct Vocab {
    /// Every token's bytes, concatenated in rank order.
    bytes: &'static [u8],
    /// u32 LE: where token `rank` starts in `bytes`; one more entry than tokens.
    offsets: &'static [u8],
    /// u32 LE open-addressing slots (a power of two, at most half full): rank + 1, or 0.
    table: &'static [u8],
    /// The pre-tokenizer pattern of this encoding.
    pub(crate) pattern: Pattern,
    /// bpe-openai's tokenizer of the same encoding, for pieces over [`LONG_PIECE_MIN`].
    long: fn() -> &'static bpe_openai::Tokenizer,
}

pub(crate) static O200K: Vocab = Vocab {
    bytes: include_bytes!(concat!(env!("OUT_DIR"), "/o200k_base.bytes")),
    offsets: include_bytes!(concat!(env!("OUT_DIR"), "/o200k_base.offsets")),
    table: include_bytes!(concat!(env!("OUT_DIR"), "/o200k_base.table")),
    pattern: Pattern::O200k,
    long: bpe_openai::o200k_base,
};

pub(crate) static CL100K: Vocab = Vocab {
    bytes: include_bytes!(concat!(env!("OUT_DIR"), "/cl100k_base.bytes")),
    offsets: include_bytes!(concat!(env!("OUT_DIR"), "/cl100k_base.offsets")),
    table: include_bytes!(concat!(env!("OUT_DIR"), "/cl100k_base.table")),
    pattern: Pattern::Cl100k,
    long: bpe_openai::cl100k_base,
};

/// Pieces up to this many bytes merge with tiktoken's quadratic scan (a few bytes: cheaper
/// than a heap); longer ones through the heap.
const SCAN_MERGE_MAX: usize = 64;

/// Pieces longer than this (a run of thousands of spaces, a long line of one character) go to
/// bpe-openai's linear backtracking encoder: the heap merge costs about 1 µs a byte (1 s for a
/// million spaces against bpe-openai's 15 ms). That builds bpe-openai's tables (about 48 ms and
/// 32 MB, once per process), which ordinary text, whose pieces are a few bytes, never needs.
const LONG_PIECE_MIN: usize = 512;

/// Rank of no pair.
const NONE: u32 = u32::MAX;

fn read_u32(bytes: &[u8], i: usize) -> Option<u32> {
    let b = bytes.get(i * 4..i * 4 + 4)?;
    Some(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
}

/// `a == b`, for the short slices tokens are (a few bytes): compared in line, where slice
/// equality calls `memcmp` (a twentieth of a cold count went to the call).
#[inline]
pub(crate) fn same(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    if a.len() <= 16 {
        a.iter().zip(b).all(|(x, y)| x == y)
    } else {
        a == b
    }
}

impl Vocab {
    /// The rank of the token whose bytes are `bytes`, if there is one.
    #[inline]
    pub(crate) fn rank(&self, bytes: &[u8]) -> Option<u32> {
        self.rank_hashed(bytes, hash(bytes))
    }

    /// [`Self::rank`] of `bytes` whose hash ([`vocab_hash::hash`]) is `h`.
    #[inline]
    fn rank_hashed(&self, bytes: &[u8], h: u64) -> Option<u32> {
        let mask = self.table.len() / 4 - 1;
        let tag = vocab_hash::tag(h);
        let mut i = h as usize & mask;
        // Ends: the table is at most half full (build.rs), so an empty slot comes.
        loop {
            let slot = read_u32(self.table, i)?;
            if slot == 0 {
                return None;
            }
            // Only a token whose hash has the same top byte can be these bytes.
            if slot >> vocab_hash::RANK_BITS == tag {
                let rank = vocab_hash::rank_in(slot);
                if self.token(rank).is_some_and(|token| same(token, bytes)) {
                    return Some(rank);
                }
            }
            i = (i + 1) & mask;
        }
    }

    fn token(&self, rank: u32) -> Option<&'static [u8]> {
        let start = read_u32(self.offsets, rank as usize)? as usize;
        let end = read_u32(self.offsets, rank as usize + 1)? as usize;
        self.bytes.get(start..end)
    }

    fn pair_rank(&self, piece: &[u8], start: usize, end: usize) -> u32 {
        piece
            .get(start..end)
            .and_then(|b| self.rank(b))
            .unwrap_or(NONE)
    }

    /// Tokens of a text: each piece's count from this thread's memo ([`crate::memo`]) when it
    /// was counted lately.
    pub(crate) fn count(&self, text: &str) -> usize {
        memo::with(self.table.as_ptr() as usize, |memo| {
            pieces(self.pattern, text)
                .map(|p| {
                    let piece = p.as_bytes();
                    // Every single byte is a token in both vocabularies.
                    if piece.len() <= 1 || piece.len() > memo::MAX_LEN {
                        return self.count_piece(piece);
                    }
                    let h = hash(piece);
                    memo.get_or(piece, h, || self.count_hashed(piece, h))
                })
                .sum()
        })
    }

    /// Tokens of one piece of the pre-tokenizer.
    pub(crate) fn count_piece(&self, piece: &[u8]) -> usize {
        // Every single byte is a token in both vocabularies.
        if piece.len() <= 1 {
            return piece.len();
        }
        self.count_hashed(piece, hash(piece))
    }

    /// [`Self::count_piece`] of a piece of two bytes or more whose hash is `h`: one token when
    /// the piece is one, else its merge.
    fn count_hashed(&self, piece: &[u8], h: u64) -> usize {
        match self.rank_hashed(piece, h) {
            Some(_) => 1,
            None => self.merge(piece),
        }
    }

    /// Tokens of a piece of two bytes or more that is not one token.
    fn merge(&self, piece: &[u8]) -> usize {
        if piece.len() <= SCAN_MERGE_MAX {
            self.merge_scan(piece)
        } else if piece.len() <= LONG_PIECE_MIN {
            self.merge_heap(piece)
        } else {
            self.merge_long(piece)
        }
    }

    /// tiktoken's `_byte_pair_merge`, as it is: `parts[i]` is where part `i` starts and the rank
    /// of part `i` joined with part `i + 1`. Up to [`SCAN_MERGE_MAX`] bytes (every piece the
    /// counter hands it) the parts live in a fixed array on the stack: most pieces of real text
    /// that are not one token are short, and a heap allocation per piece cost about a tenth of
    /// a small conversation's cold count.
    pub(crate) fn merge_scan(&self, piece: &[u8]) -> usize {
        let n = piece.len();
        let mut stack = [(0usize, NONE); SCAN_MERGE_MAX + 1];
        let mut heap = Vec::new();
        let parts: &mut [(usize, u32)] = if n <= SCAN_MERGE_MAX {
            &mut stack[..=n]
        } else {
            heap.resize(n + 1, (0, NONE));
            &mut heap
        };
        for (i, part) in parts.iter_mut().enumerate() {
            *part = (
                i,
                if i + 2 <= n {
                    self.pair_rank(piece, i, i + 2)
                } else {
                    NONE
                },
            );
        }
        let mut len = n + 1;
        let rank_at = |parts: &[(usize, u32)], len: usize, i: usize| {
            if i + 3 < len {
                self.pair_rank(piece, parts[i].0, parts[i + 3].0)
            } else {
                NONE
            }
        };
        loop {
            let mut min = (NONE, 0);
            for (i, &(_, rank)) in parts[..len - 1].iter().enumerate() {
                if rank < min.0 {
                    min = (rank, i);
                }
            }
            if min.0 == NONE {
                break;
            }
            let i = min.1;
            if i > 0 {
                parts[i - 1].1 = rank_at(parts, len, i - 1);
            }
            parts[i].1 = rank_at(parts, len, i);
            // Remove part i + 1: shift the rest down by one.
            parts.copy_within(i + 2..len, i + 1);
            len -= 1;
        }
        len - 1
    }

    /// bpe-openai's count of one piece: the same encoding as tiktoken's merge (its crate tests
    /// that, and so do ours), in linear time. Should it panic (it asserts internal invariants),
    /// the heap merge answers.
    pub(crate) fn merge_long(&self, piece: &[u8]) -> usize {
        let long = self.long;
        std::panic::catch_unwind(|| long().bpe.count(piece))
            .unwrap_or_else(|_| self.merge_heap(piece))
    }

    /// The same merge in O(n log n): the parts are a linked list and the candidate pairs sit in
    /// a min-heap by (rank, start), which is exactly the scan's order (lowest rank, leftmost).
    /// A stale candidate (its part merged or its neighbour changed since) is skipped.
    pub(crate) fn merge_heap(&self, piece: &[u8]) -> usize {
        let n = piece.len();
        // Part i starts at byte i while alive; `next[i]` is the start of the part after it.
        let mut next: Vec<usize> = (1..=n).collect();
        let mut prev: Vec<usize> = (0..n).map(|i| i.wrapping_sub(1)).collect();
        let mut alive = vec![true; n];
        let mut heap = BinaryHeap::new();
        let pair_end = |next: &[usize], i: usize| next.get(next[i]).copied();
        for i in 0..n - 1 {
            let rank = self.pair_rank(piece, i, i + 2);
            if rank != NONE {
                heap.push(Reverse((rank, i, i + 2)));
            }
        }
        let mut parts = n;
        while let Some(Reverse((_, i, end))) = heap.pop() {
            // Valid only if part i is alive and still spans with its neighbour to `end`.
            if !alive[i] || pair_end(&next, i) != Some(end) {
                continue;
            }
            let j = next[i];
            alive[j] = false;
            next[i] = next[j];
            if next[i] < n {
                prev[next[i]] = i;
            }
            parts -= 1;
            if let Some(after) = pair_end(&next, i) {
                let r = self.pair_rank(piece, i, after);
                if r != NONE {
                    heap.push(Reverse((r, i, after)));
                }
            }
            let p = prev[i];
            if p < n {
                let end = next[i];
                let r = self.pair_rank(piece, p, end);
                if r != NONE {
                    heap.push(Reverse((r, p, end)));
                }
            }
        }
        parts
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_token_is_found_at_its_rank() {
        for (vocab, n) in [(&O200K, 199_998u32), (&CL100K, 100_256)] {
            for rank in (0..n).step_by(97).chain([0, n - 1]) {
                let bytes = vocab.token(rank).unwrap();
                assert_eq!(vocab.rank(bytes), Some(rank));
            }
            assert_eq!(vocab.token(n), None);
            assert_eq!(vocab.rank(b"not a token at all, surely"), None);
        }
    }

    #[test]
    fn counts_through_the_memo_are_the_pieces_counts() {
        // Pieces that repeat (memo hits), collide in its slots, and pass its length limit,
        // counted with one vocabulary, then the other, then the first again (the memo is
        // emptied when the vocabulary changes).
        let mut text = String::new();
        for i in 0..3000 {
            text.push_str(&format!(
                " word{i} don't Hello, ÉCOLE {i:05} naïve\n\t{}",
                "=".repeat(i % 40)
            ));
        }
        for vocab in [&O200K, &CL100K, &O200K] {
            let direct: usize = pieces(vocab.pattern, &text)
                .map(|p| vocab.count_piece(p.as_bytes()))
                .sum();
            assert_eq!(vocab.count(&text), direct);
            assert_eq!(vocab.count(&text), direct, "with the memo warm");
        }
    }

    #[test]
    fn heap_merge_is_the_scan_merge() {
        // Long runs, repeated pairs (ties between equal ranks), mixed bytes and UTF-8.
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let alphabet: &[&[u8]] = &[b"a", b"b", b"ab", b" ", b"=", b"-", "é".as_bytes(), b"0"];
        for len in [2usize, 3, 7, 16, 40, 64, 65, 200] {
            for _ in 0..40 {
                let mut piece = Vec::new();
                while piece.len() < len {
                    seed ^= seed << 13;
                    seed ^= seed >> 7;
                    seed ^= seed << 17;
                    piece.extend_from_slice(alphabet[(seed % alphabet.len() as u64) as usize]);
                }
                for vocab in [&O200K, &CL100K] {
                    assert_eq!(
                        vocab.merge_heap(&piece),
                        vocab.merge_scan(&piece),
                        "{piece:?}"
                    );
                }
            }
        }
        for piece in [
            &b"a".repeat(1000)[..],
            &b"=".repeat(333),
            &b"ab".repeat(300),
        ] {
            assert_eq!(O200K.merge_heap(piece), O200K.merge_scan(piece));
            assert_eq!(O200K.merge_long(piece), O200K.merge_scan(piece));
            assert_eq!(CL100K.merge_long(piece), CL100K.merge_heap(piece));
        }
    }
}
