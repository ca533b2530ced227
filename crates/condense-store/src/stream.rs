//! Writing a large record as a stream ([`RecordWriter`]): its bytes go into the batch's spill
//! file as they are produced, a compressed block per [`CHUNK`] ([`crate::codec`]), so neither
//! the serialized value nor a copy of it is ever whole in memory. The expansion archive writes
//! its segments this way; each is named by the hash of its own bytes, which the writer
//! computes on the way ([`RecordWriter::key`]).

use crate::codec;
use crate::spill::{Held, CHUNK};
use crate::{sanitize_component, Store, StoreError};
use std::io::{self, Write};
use std::thread;
use twox_hash::XxHash3_128;

/// A record being written: [`Write`] its bytes, then [`finish`](RecordWriter::finish) it under
/// a name. Inside a [`crate::Batch`] the bytes go to the batch's spill file a chunk at a time;
/// outside one they are gathered in memory and committed by `finish`. Dropped unfinished, the
/// record is not written (its chunks stay in the spill file, which goes with the batch).
pub struct RecordWriter<'a> {
    store: &'a Store,
    /// The bytes not yet appended to the spill file.
    buf: Vec<u8>,
    /// How much of `buf` the hasher has seen.
    hashed: usize,
    hasher: XxHash3_128,
    /// The extents appended so far (compressed blocks), and their total length.
    extents: Vec<(u64, u64)>,
    spilled: u64,
    /// The bytes written that went into those blocks.
    spilled_raw: u64,
    /// Where a chunk is compressed before it is appended (reused).
    encoded: Vec<u8>,
    /// The batch the writer was opened in (`None`: none, everything stays in `buf`).
    batch: Option<u64>,
}

/// The room a writer's buffer starts with: an archive segment (about 64 KiB of originals and as
/// much of their texts) fits without growing. Grown by doubling from nothing, the buffer was
/// copied at every step: 6 M instructions of a first run at 1M tokens.
const FIRST_BUFFER: usize = 160 * 1024;

impl Store {
    /// A [`RecordWriter`] for a record of this store.
    pub fn record_writer(&self) -> RecordWriter<'_> {
        let batch = self
            .lock()
            .open
            .get(&thread::current().id())
            .map(|open| open.id);
        RecordWriter {
            store: self,
            buf: Vec::with_capacity(FIRST_BUFFER),
            hashed: 0,
            hasher: XxHash3_128::new(),
            extents: Vec::new(),
            spilled: 0,
            spilled_raw: 0,
            encoded: Vec::new(),
            batch,
        }
    }
}

impl RecordWriter<'_> {
    /// The key of the bytes written so far, as [`crate::blob_key`] gives it for the same bytes.
    pub fn key(&mut self) -> String {
        self.hash_buf();
        crate::hash_key(self.hasher.finish_128())
    }

    /// How many bytes have been written.
    pub fn len(&self) -> u64 {
        self.spilled_raw + self.buf.len() as u64
    }

    /// Whether nothing has been written.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn hash_buf(&mut self) {
        self.hasher.write(&self.buf[self.hashed..]);
        self.hashed = self.buf.len();
    }

    /// Stores the bytes written as the record `name` of `namespace` (replacing any previous
    /// one), in the batch the writer was opened in.
    pub fn finish(mut self, namespace: &str, name: &str) -> Result<(), StoreError> {
        if self.extents.is_empty() {
            // Small, or no batch: the ordinary write.
            return self.store.record_put(namespace, name, &self.buf);
        }
        self.spill_buf(true).map_err(|e| self.store.spill_err(e))?;
        let id = (sanitize_component(namespace), sanitize_component(name));
        let held = Held::Spilled {
            extents: std::mem::take(&mut self.extents),
            len: self.spilled,
            // Streamed records are at least a CHUNK: compressed, as `Pending::hold` does it.
            codec: codec::LZ4_BLOCKS,
        };
        let mut conn = self.store.lock();
        let open = self
            .open_batch(&mut conn)
            .map_err(|e| self.store.spill_err(e))?;
        open.pending.records.insert(id, held);
        Ok(())
    }

    /// The batch the writer was opened in, if it is still the current thread's open batch.
    fn open_batch<'c>(&self, conn: &'c mut crate::Conn) -> io::Result<&'c mut crate::Open> {
        conn.open
            .get_mut(&thread::current().id())
            .filter(|open| Some(open.id) == self.batch)
            .ok_or_else(|| {
                io::Error::other("the batch a record was being written into ended before it")
            })
    }

    /// Appends the whole [`CHUNK`]s of `buf` (and, at the `end`, the rest) to the batch's spill
    /// file as the record's next extent, a compressed block per chunk: cut where
    /// [`codec::encode`] cuts the whole value, so both store the same bytes.
    fn spill_buf(&mut self, end: bool) -> io::Result<()> {
        let take = if end {
            self.buf.len()
        } else {
            self.buf.len() / CHUNK * CHUNK
        };
        if take == 0 {
            return Ok(());
        }
        self.hash_buf();
        self.encoded.clear();
        for piece in self.buf[..take].chunks(CHUNK) {
            codec::encode_block(piece, &mut self.encoded);
        }
        let root = self.store.root().to_path_buf();
        let mut conn = self.store.lock();
        let open = self.open_batch(&mut conn)?;
        let extent = open.pending.spill_in(&root)?.append(&self.encoded)?;
        self.extents.push(extent);
        self.spilled += extent.1;
        self.spilled_raw += take as u64;
        self.buf.drain(..take);
        self.hashed = self.buf.len();
        Ok(())
    }
}

impl Write for RecordWriter<'_> {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        self.buf.extend_from_slice(bytes);
        if self.batch.is_some() && self.buf.len() >= CHUNK {
            self.spill_buf(false)?;
        }
        Ok(bytes.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}
