//! What recent pieces cost, remembered per thread: the pieces of real text repeat (the same
//! words, indents and punctuation), and a piece found here costs one probe of a small table that
//! stays in the core's cache instead of the random reads of the large vocabulary tables
//! ([`crate::fast`]: about 4 MB for o200k, so each lookup there misses the caches).
//!
//! Direct-mapped by the piece's vocabulary hash; an entry holds the piece's bytes, so a hit is
//! exact, never a hash match alone. Pieces longer than [`MAX_LEN`] (rare) are not kept.

use std::cell::RefCell;

/// Entries of a memo: 4096 of 32 bytes, 128 KB per counting thread.
const SLOTS: usize = 4096;

/// The longest piece kept, in bytes (what fits an entry of 32 bytes).
pub(crate) const MAX_LEN: usize = 19;

#[derive(Clone, Copy)]
struct Entry {
    hash: u64,
    count: u32,
    /// 0: empty (pieces of 0 or 1 byte are never kept).
    len: u8,
    bytes: [u8; MAX_LEN],
}

const EMPTY: Entry = Entry {
    hash: 0,
    count: 0,
    len: 0,
    bytes: [0; MAX_LEN],
};

/// One thread's memo, for one vocabulary.
pub(crate) struct Memo {
    /// The vocabulary it holds counts of (the address of its table).
    owner: usize,
    entries: Vec<Entry>,
}

impl Memo {
    fn new(owner: usize) -> Memo {
        Memo {
            owner,
            entries: vec![EMPTY; SLOTS],
        }
    }

    /// The count of `piece` (2 to [`MAX_LEN`] bytes) whose vocabulary hash is `hash`: remembered,
    /// or `count()` (then remembered in place of what its slot held).
    #[inline]
    pub(crate) fn get_or(
        &mut self,
        piece: &[u8],
        hash: u64,
        count: impl FnOnce() -> usize,
    ) -> usize {
        let Some(slot) = self.entries.get_mut(hash as usize & (SLOTS - 1)) else {
            return count();
        };
        if slot.hash == hash
            && usize::from(slot.len) == piece.len()
            && crate::fast::same(&slot.bytes[..piece.len()], piece)
        {
            return slot.count as usize;
        }
        let n = count();
        if let (Ok(stored), Ok(len)) = (u32::try_from(n), u8::try_from(piece.len())) {
            let mut bytes = [0; MAX_LEN];
            if let Some(head) = bytes.get_mut(..piece.len()) {
                head.copy_from_slice(piece);
                *slot = Entry {
                    hash,
                    count: stored,
                    len,
                    bytes,
                };
            }
        }
        n
    }
}

thread_local! {
    static MEMO: RefCell<Option<Memo>> = const { RefCell::new(None) };
}

/// Runs `f` with this thread's memo for the vocabulary `owner` (emptied when it served
/// another one last).
pub(crate) fn with<R>(owner: usize, f: impl FnOnce(&mut Memo) -> R) -> R {
    MEMO.with(|cell| match cell.try_borrow_mut() {
        Ok(mut memo) => {
            let memo = match &mut *memo {
                Some(m) if m.owner == owner => m,
                other => other.insert(Memo::new(owner)),
            };
            f(memo)
        }
        // Counting never re-enters itself on a thread; should it, a memo of its own.
        Err(_) => f(&mut Memo::new(owner)),
    })
}
