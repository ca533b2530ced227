//! Where a batch keeps the large values it holds back until its commit.
//!
//! A run's writes are committed in one transaction at its end ([`crate::Batch`]), so until then
//! they are held by the process. Held in memory, the archive of a 1M-token conversation (every
//! original a stage removed, with its bytes) weighed several times the input at the peak of the
//! run. Values from [`SPILL_FROM`] bytes on are therefore appended to an unnamed temporary file
//! in the store's directory instead, and read back (a chunk at a time) by the commit; so are
//! smaller ones once the batch holds [`MEMORY_HELD_MAX`] bytes in memory. The file
//! has no name (it is unlinked as soon as it is created), so a run killed at any moment leaves
//! nothing behind, and the store's crash safety is the transaction's, as before.

use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::Path;

/// Values from this size on go to the spill file; smaller ones (state, index records, read-as
/// records, small blobs) stay in memory, where reading them back costs nothing.
pub const SPILL_FROM: usize = 16 * 1024;

/// Once a batch holds this many bytes in memory, smaller values from [`SPILL_SMALL_FROM`] bytes
/// on are spilled too. Those are the originals of what a run removed, a few kilobytes each: at
/// 4M tokens snip's held 5.8 MB at the run's peak, beside the input and its copies.
pub const MEMORY_HELD_MAX: usize = 256 * 1024;

/// Values under this size always stay in memory: spilling them would cost a write and a read
/// each for next to nothing.
pub const SPILL_SMALL_FROM: usize = 512;

/// How much of a value is read, compared or copied at a time when it is not in memory.
pub const CHUNK: usize = 256 * 1024;

/// A value a batch holds, as it will be stored (its bytes encoded with `codec`, see
/// [`crate::codec`]): in memory, or as extents (offset, length) of its spill file, in order. A
/// value streamed in pieces ([`crate::RecordWriter`]) may have several extents when other
/// writes of its thread came in between.
#[derive(Debug)]
pub enum Held {
    Mem {
        bytes: Vec<u8>,
        codec: i64,
    },
    Spilled {
        extents: Vec<(u64, u64)>,
        len: u64,
        codec: i64,
    },
}

impl Held {
    /// The stored length in bytes.
    pub fn len(&self) -> u64 {
        match self {
            Held::Mem { bytes, .. } => bytes.len() as u64,
            Held::Spilled { len, .. } => *len,
        }
    }

    /// How the held bytes are encoded ([`crate::codec`]).
    pub fn codec(&self) -> i64 {
        match self {
            Held::Mem { codec, .. } | Held::Spilled { codec, .. } => *codec,
        }
    }
}

/// A batch's spill file: append-only, read back by extent.
#[derive(Debug)]
pub struct Spill {
    file: File,
    end: u64,
}

impl Spill {
    /// An unnamed temporary file in `dir` (the store's directory: the same disk as the store,
    /// and not a memory-backed `/tmp`).
    pub fn create(dir: &Path) -> io::Result<Spill> {
        Ok(Spill {
            file: tempfile::tempfile_in(dir)?,
            end: 0,
        })
    }

    /// Appends `bytes`, returning their extent.
    pub fn append(&mut self, bytes: &[u8]) -> io::Result<(u64, u64)> {
        let start = self.end;
        self.file.seek(SeekFrom::Start(start))?;
        self.file.write_all(bytes)?;
        self.end += bytes.len() as u64;
        Ok((start, bytes.len() as u64))
    }

    /// Calls `f` with the value's bytes, a chunk of at most [`CHUNK`] bytes at a time, in order.
    pub fn chunks<E: From<io::Error>>(
        &self,
        held: &Held,
        mut f: impl FnMut(&[u8]) -> Result<(), E>,
    ) -> Result<(), E> {
        let extents = match held {
            Held::Mem { bytes, .. } => {
                return bytes.chunks(CHUNK).try_for_each(f);
            }
            Held::Spilled { extents, .. } => extents,
        };
        // As large as the largest piece read (small spilled values are many).
        let most = extents.iter().map(|&(_, len)| len).max().unwrap_or(0);
        let mut buf = vec![0; usize::try_from(most).map_or(CHUNK, |m| m.min(CHUNK))];
        // Reads go through `&File` (its own position; callers hold the store's lock).
        let mut file = &self.file;
        for &(start, len) in extents {
            file.seek(SeekFrom::Start(start))?;
            let mut left = len;
            while left > 0 {
                let n = usize::try_from(left).map_or(CHUNK, |l| l.min(CHUNK));
                file.read_exact(&mut buf[..n])?;
                f(&buf[..n])?;
                left -= n as u64;
            }
        }
        Ok(())
    }

    /// The value's stored bytes, whole.
    pub fn read(&self, held: &Held) -> io::Result<Vec<u8>> {
        let mut out = Vec::with_capacity(usize::try_from(held.len()).unwrap_or(0));
        self.chunks(held, |c| {
            out.extend_from_slice(c);
            Ok::<_, io::Error>(())
        })?;
        Ok(out)
    }
}
