//! A record's value as the database keeps it, for a caller that decodes it on its own threads
//! ([`crate::Store::records_get_stored`]): a long Claude Code session's turn reads its whole
//! history in packs of messages, and decoding them all at once, under the store's lock, held
//! all of it in memory at the same time.
//!
//! ```
//! let dir = tempfile::tempdir().unwrap();
//! let store = condense_store::Store::open(dir.path()).unwrap();
//! store.record_put("notes", "n1", &b"a value ".repeat(400)).unwrap();
//! let [stored] = store.records_get_stored("notes", &["n1"]).unwrap().try_into().unwrap();
//! assert_eq!(stored.unwrap().decode().unwrap(), b"a value ".repeat(400));
//! ```

use crate::codec;
use std::io;

/// A record as read from the database, not decoded yet.
#[derive(Debug)]
pub struct Stored {
    bytes: Vec<u8>,
    codec: i64,
}

impl Stored {
    pub(crate) fn new(bytes: Vec<u8>, codec: i64) -> Stored {
        Stored { bytes, codec }
    }

    /// The record's value; an error when its bytes are damaged.
    pub fn decode(self) -> io::Result<Vec<u8>> {
        codec::decode(self.bytes, self.codec)
    }
}
