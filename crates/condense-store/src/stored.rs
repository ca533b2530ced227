//! Reading many records at once ([`crate::Store::records_get`]), and each one as the database
//! keeps it, for a caller that decodes it on its own threads
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

use crate::{codec, db, io_err, sanitize_component, Conn, Store, StoreError};
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

impl Store {
    /// The record `id` as stored, not decoded yet ([`Stored::decode`]).
    fn record_stored_in(
        &self,
        conn: &Conn,
        id: &(String, String),
    ) -> Result<Option<Stored>, StoreError> {
        if let Some(p) = conn.held() {
            if let Some(held) = p.records.get(id) {
                let (bytes, codec) = p.read_stored(held).map_err(|e| self.spill_err(e))?;
                return Ok(Some(Stored::new(bytes, codec)));
            }
            if p.removed.contains(id) {
                return Ok(None);
            }
        }
        let got = db::get_record_stored(&conn.db, &id.0, &id.1).map_err(|e| self.db_err(e))?;
        Ok(got.map(|(bytes, codec)| Stored::new(bytes, codec)))
    }

    /// [`Store::records_get`], each record as stored: the caller decodes each one where it
    /// uses it ([`Stored::decode`]), on whatever thread, so that a few hundred records are
    /// not all decoded into memory at once (a Claude Code session's turn reads its whole
    /// history in packs: 15 MB decoded for a 15 MB session, a third of the turn's page
    /// faults).
    pub fn records_get_stored(
        &self,
        namespace: &str,
        names: &[&str],
    ) -> Result<Vec<Option<Stored>>, StoreError> {
        let namespace = sanitize_component(namespace);
        let conn = self.lock();
        // A read transaction when none is open (none is, outside `db`'s own writes): dropped,
        // it ends; the reads are the same without it.
        let tx = conn
            .db
            .is_autocommit()
            .then(|| conn.db.unchecked_transaction().ok())
            .flatten();
        let got = names
            .iter()
            .map(|name| {
                self.record_stored_in(&conn, &(namespace.clone(), sanitize_component(name)))
            })
            .collect();
        drop(tx);
        got
    }

    /// The records of `namespace` named `names`, in their order ([`Store::record_get`] of each):
    /// one lock and one read transaction for all of them, where one each cost two file locks
    /// and a transaction's setup (a resumed turn reads a few hundred).
    pub fn records_get(
        &self,
        namespace: &str,
        names: &[&str],
    ) -> Result<Vec<Option<Vec<u8>>>, StoreError> {
        let decode = |stored: Stored| stored.decode().map_err(io_err(&self.inner.db_path));
        self.records_get_stored(namespace, names)?
            .into_iter()
            .map(|stored| stored.map(decode).transpose())
            .collect()
    }
}
