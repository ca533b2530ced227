//! The SQLite side of the store: opening the database file with the settings that make it
//! crash-safe and shareable between processes, its schema, and writing a batch of changes in
//! one transaction.

use crate::codec;
use crate::spill::{Held, Spill, CHUNK, MEMORY_HELD_MAX, SPILL_FROM, SPILL_SMALL_FROM};
use crate::token_chunks;
use rusqlite::blob::ZeroBlob;
use rusqlite::{params, Connection, OptionalExtension, TransactionBehavior, MAIN_DB};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io;
use std::path::Path;
use std::time::Duration;

/// The database file's name inside the store directory (SQLite adds `-wal` and `-shm` beside
/// it while connections are open).
pub const DB_FILE: &str = "store.db";

/// The files SQLite keeps beside [`DB_FILE`]: the write-ahead log, its shared-memory index, and
/// the rollback journal (only while the journal mode is being switched to WAL).
pub const DB_SIDE_FILES: [&str; 3] = ["store.db-wal", "store.db-shm", "store.db-journal"];

/// How long a write waits for another process's transaction before it fails. Runs hold the
/// write lock only for their final commit (milliseconds), so this is only ever reached when
/// something is badly stuck.
const BUSY_TIMEOUT: Duration = Duration::from_secs(60);

/// The schema version this code writes (`PRAGMA user_version`): 2 added the `codec` column
/// of records ([`crate::codec`]); 3 packs token counts into chunks ([`crate::token_chunks`]).
pub const SCHEMA_VERSION: i64 = 3;

/// From version 1: records may be compressed; the records already there are stored as they
/// are. Blobs are never compressed: they are the exact bytes `condense expand` writes back,
/// and an older condense reading a compressed blob would write its compressed bytes without a
/// word, where a compressed record (JSON to it) fails to read, loudly.
const ADD_CODEC: &str = "ALTER TABLE records ADD COLUMN codec INTEGER NOT NULL DEFAULT 0;";

/// Names are stored sanitized ([`crate::sanitize_component`]), as the file layout did, so what
/// callers read back is the same names the old layout gave them. Blobs and records are only
/// ever inserted or replaced whole; a store is read far more than it is written.
const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS blobs (
    key TEXT PRIMARY KEY NOT NULL,
    bytes BLOB NOT NULL
);
CREATE TABLE IF NOT EXISTS state (
    session TEXT NOT NULL,
    stage TEXT NOT NULL,
    value BLOB NOT NULL,
    PRIMARY KEY (session, stage)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS records (
    namespace TEXT NOT NULL,
    name TEXT NOT NULL,
    bytes BLOB NOT NULL,
    codec INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (namespace, name)
);
";

/// Opens (creating it when missing) the database at `path`: WAL journal, `synchronous =
/// NORMAL`, a busy timeout, and the schema.
///
/// WAL + NORMAL: a commit is atomic whatever moment the process is killed (the log is only
/// replayed up to its last complete commit), readers never wait for writers, and a commit costs
/// no fsync (the log is synced at checkpoints). A power loss or OS crash can lose the last
/// commits, never corrupt the database.
pub fn open(path: &Path) -> rusqlite::Result<Connection> {
    let conn = Connection::open(path)?;
    conn.busy_timeout(BUSY_TIMEOUT)?;
    // Taken only by a database not written yet; one that exists keeps its pages.
    conn.pragma_update(None, "page_size", PAGE_SIZE)?;
    // Switching to WAL needs a moment alone with the file; it is recorded in the file, so
    // only the very first open (or one racing it) does it.
    let mode: String = conn.query_row("PRAGMA journal_mode", [], |r| r.get(0))?;
    if !mode.eq_ignore_ascii_case("wal") {
        retry_busy(|| conn.query_row("PRAGMA journal_mode = WAL", [], |r| r.get::<_, String>(0)))?;
    }
    conn.pragma_update(None, "synchronous", "NORMAL")?;
    if user_version(&conn)? < SCHEMA_VERSION {
        retry_busy(|| {
            conn.execute_batch("BEGIN IMMEDIATE")?;
            migrate(&conn)
                .and_then(|()| conn.execute_batch("COMMIT"))
                .inspect_err(|_| {
                    let _ = conn.execute_batch("ROLLBACK");
                })
        })?;
    }
    Ok(conn)
}

/// The page size of a new database (SQLite's default is 4 KiB). A store holds values of
/// kilobytes to a few hundred (archive segments, resume records, stage states): with 16 KiB
/// pages a value spans a quarter of the overflow pages, each a write, a read and a log frame
/// of its own. A first run at 1M tokens 0.956x the time (16 alternating pairs), an appended
/// turn the same (1.007x, 30); 64 KiB pages made the turn 1.04x slower (a small change
/// rewrites a whole page in the log).
pub const PAGE_SIZE: i64 = 16 * 1024;

/// A write-ahead log up to this size is left for the next connection rather than checkpointed
/// when the last connection closes ([`keep_small_log`]).
pub const KEEP_LOG_UP_TO: u64 = 1 << 20;

/// Called just before `conn` closes. SQLite's last connection to close copies the log into the
/// database and deletes it: two fsyncs and a copy, about 5 ms of the 35 ms a resumed turn on a
/// 1M-token session takes, for a log of 112 KB. A log up to [`KEEP_LOG_UP_TO`] is left instead:
/// the next connection reads it back (its index is rebuilt from the frames), which for that
/// size costs well under a millisecond, and the process that finds it larger checkpoints as
/// before, so the log never grows past about that size plus one run's writes. Leaving the log
/// is what a killed process does anyway: crash safety is unchanged.
pub fn keep_small_log(conn: &Connection, db_path: &Path) {
    let mut log = db_path.as_os_str().to_owned();
    log.push("-wal");
    let small = std::fs::metadata(&log).is_ok_and(|m| m.len() <= KEEP_LOG_UP_TO);
    if small {
        // Best effort: if SQLite refuses, it checkpoints on close as it always did.
        let _ = conn.set_db_config(
            rusqlite::config::DbConfig::SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE,
            true,
        );
    }
}

/// The schema version of the database (0: new).
pub fn user_version(conn: &Connection) -> rusqlite::Result<i64> {
    conn.query_row("PRAGMA user_version", [], |r| r.get(0))
}

/// Brings the schema to [`SCHEMA_VERSION`], inside the caller's write transaction: the version
/// is read again there, as another process may have migrated the file meanwhile. A newer
/// version is left alone ([`crate::Store::open`] refuses it).
fn migrate(conn: &Connection) -> rusqlite::Result<()> {
    let version = user_version(conn)?;
    if version >= SCHEMA_VERSION {
        return Ok(());
    }
    if version == 0 {
        conn.execute_batch(SCHEMA)?;
    } else if version < 2 {
        conn.execute_batch(ADD_CODEC)?;
    }
    // Creates the packed table, and packs the rows of the table before it, if any.
    token_chunks::migrate_rows(conn)?;
    conn.execute_batch(&format!("PRAGMA user_version = {SCHEMA_VERSION}"))
}

/// Runs `f` again while SQLite answers "busy" without waiting in its busy handler (it does not
/// for a journal-mode switch racing another process's first open), for up to the busy timeout.
fn retry_busy<T>(mut f: impl FnMut() -> rusqlite::Result<T>) -> rusqlite::Result<T> {
    let start = std::time::Instant::now();
    loop {
        match f() {
            Err(rusqlite::Error::SqliteFailure(e, _))
                if e.code == rusqlite::ErrorCode::DatabaseBusy
                    && start.elapsed() < BUSY_TIMEOUT =>
            {
                std::thread::sleep(Duration::from_millis(5));
            }
            other => return other,
        }
    }
}

/// Writes not yet committed: everything a batch (or one call outside a batch) changes.
#[derive(Debug, Default)]
pub struct Pending {
    pub blobs: HashMap<String, Held>,
    /// (sanitized session, sanitized stage) -> state.
    pub state: BTreeMap<(String, String), Vec<u8>>,
    /// (sanitized namespace, sanitized name) -> bytes.
    pub records: BTreeMap<(String, String), Held>,
    /// Records removed, deleted at the commit (a later put of one puts it back).
    pub removed: BTreeSet<(String, String)>,
    /// (sanitized session, tokenizer) -> (block hash, tokens).
    pub tokens: BTreeMap<(String, String), Vec<(u64, u32)>>,
    /// Where the large values of a batch are (created with the first one).
    pub spill: Option<Spill>,
    /// The bytes of the values held in memory so far (see [`MEMORY_HELD_MAX`]).
    pub in_memory: usize,
}

impl Pending {
    pub fn is_empty(&self) -> bool {
        self.blobs.is_empty()
            && self.state.is_empty()
            && self.records.is_empty()
            && self.removed.is_empty()
            && self.tokens.is_empty()
    }

    /// A value as stored (`stored`, encoded with `codec`: [`codec`]; blobs are not compressed)
    /// as this batch holds it: appended to its spill file (created in `dir`) when that is large
    /// and there is a `dir` (a batch: the writes of one call outside a batch are committed at
    /// once, from memory). Encoded by the caller, before the store's lock is taken.
    pub fn hold(&mut self, dir: Option<&Path>, stored: Vec<u8>, codec: i64) -> io::Result<Held> {
        let spill = stored.len() >= SPILL_FROM
            || (stored.len() >= SPILL_SMALL_FROM
                && self.in_memory + stored.len() > MEMORY_HELD_MAX);
        let Some(dir) = dir.filter(|_| spill) else {
            self.in_memory += stored.len();
            return Ok(Held::Mem {
                bytes: stored,
                codec,
            });
        };
        let extent = self.spill_in(dir)?.append(&stored)?;
        Ok(Held::Spilled {
            extents: vec![extent],
            len: extent.1,
            codec,
        })
    }

    /// This batch's spill file, created in `dir` when it has none yet.
    pub fn spill_in(&mut self, dir: &Path) -> io::Result<&mut Spill> {
        match &mut self.spill {
            Some(spill) => Ok(spill),
            none => Ok(none.insert(Spill::create(dir)?)),
        }
    }

    /// The bytes of a value this batch holds (decoded).
    pub fn read(&self, held: &Held) -> io::Result<Vec<u8>> {
        let (stored, codec) = self.read_stored(held)?;
        codec::decode(stored, codec)
    }

    /// A held value's bytes as stored, and their codec ([`codec::decode`] reads them).
    pub fn read_stored(&self, held: &Held) -> io::Result<(Vec<u8>, i64)> {
        let stored = match held {
            Held::Mem { bytes, .. } => bytes.clone(),
            Held::Spilled { .. } => self.spill()?.read(held)?,
        };
        Ok((stored, held.codec()))
    }

    fn spill(&self) -> io::Result<&Spill> {
        // Held::Spilled is only ever made by appending to this batch's spill file.
        self.spill
            .as_ref()
            .ok_or_else(|| io::Error::other("a held value's spill file is missing"))
    }
}

/// A commit failure: the database's, or reading back the batch's spill file.
#[derive(Debug)]
pub enum CommitError {
    Db(rusqlite::Error),
    Spill(io::Error),
}

impl From<rusqlite::Error> for CommitError {
    fn from(e: rusqlite::Error) -> Self {
        CommitError::Db(e)
    }
}

impl From<io::Error> for CommitError {
    fn from(e: io::Error) -> Self {
        CommitError::Spill(e)
    }
}

/// Commits `pending` in one transaction, taking the write lock at its start (so it waits for
/// other writers through the busy timeout rather than failing half-way). Unchanged state and
/// records are not rewritten: the upsert's WHERE leaves their pages clean. A spilled value is
/// copied from the spill file into its row a chunk at a time (incremental blob I/O), so the
/// commit never holds a whole large value in memory.
pub fn commit(conn: &mut Connection, pending: &Pending) -> Result<(), CommitError> {
    if pending.is_empty() {
        return Ok(());
    }
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    {
        let mut put =
            tx.prepare_cached("INSERT OR IGNORE INTO blobs (key, bytes) VALUES (?1, ?2)")?;
        // Blobs are held as they are (`Pending::hold` with `compress` false).
        for (key, held) in &pending.blobs {
            match held {
                Held::Mem { bytes, .. } => {
                    put.execute(params![key, bytes])?;
                }
                // A small value spilled once the batch held enough in memory: read whole.
                Held::Spilled { len, .. } if *len < SPILL_FROM as u64 => {
                    put.execute(params![key, pending.spill()?.read(held)?])?;
                }
                Held::Spilled { len, .. } => {
                    if put.execute(params![key, ZeroBlob(*len)])? == 1 {
                        let row = tx.last_insert_rowid();
                        copy_in(&tx, "blobs", "bytes", row, pending, held)?;
                    }
                }
            }
        }
        let mut put = tx.prepare_cached(
            "INSERT INTO state (session, stage, value) VALUES (?1, ?2, ?3)
             ON CONFLICT (session, stage) DO UPDATE SET value = excluded.value
             WHERE value IS NOT excluded.value",
        )?;
        for ((session, stage), value) in &pending.state {
            put.execute(params![session, stage, value])?;
        }
        let mut put = tx.prepare_cached(
            "INSERT INTO records (namespace, name, bytes, codec) VALUES (?1, ?2, ?3, ?4)
             ON CONFLICT (namespace, name) DO UPDATE
             SET bytes = excluded.bytes, codec = excluded.codec
             WHERE bytes IS NOT excluded.bytes OR codec IS NOT excluded.codec",
        )?;
        for ((namespace, name), held) in &pending.records {
            match held {
                Held::Mem { bytes, codec } => {
                    put.execute(params![namespace, name, bytes, codec])?;
                }
                Held::Spilled { .. } => put_spilled_record(&tx, namespace, name, pending, held)?,
            }
        }
        for (namespace, name) in &pending.removed {
            remove_record(&tx, namespace, name)?;
        }
        for ((session, tokenizer), entries) in &pending.tokens {
            token_chunks::append(&tx, session, tokenizer, entries)?;
        }
    }
    tx.commit()?;
    Ok(())
}

/// A spilled record, as the in-memory upsert does it: inserted, or replacing a different
/// value, and left alone (no page written) when the stored value is the same bytes.
fn put_spilled_record(
    tx: &Connection,
    namespace: &str,
    name: &str,
    pending: &Pending,
    held: &Held,
) -> Result<(), CommitError> {
    let (len, codec) = (held.len(), held.codec());
    let existing: Option<(i64, i64, i64)> = tx
        .prepare_cached(
            "SELECT rowid, length(bytes), codec FROM records WHERE namespace = ?1 AND name = ?2",
        )?
        .query_row([namespace, name], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .optional()?;
    let row = match existing {
        Some((row, stored, stored_codec))
            if u64::try_from(stored) == Ok(len)
                && stored_codec == codec
                && same_bytes(tx, row, pending, held)? =>
        {
            return Ok(())
        }
        Some((row, _, _)) => {
            tx.prepare_cached("UPDATE records SET bytes = ?1, codec = ?2 WHERE rowid = ?3")?
                .execute(params![ZeroBlob(len), codec, row])?;
            row
        }
        None => {
            tx.prepare_cached(
                "INSERT INTO records (namespace, name, bytes, codec) VALUES (?1, ?2, ?3, ?4)",
            )?
            .execute(params![namespace, name, ZeroBlob(len), codec])?;
            tx.last_insert_rowid()
        }
    };
    copy_in(tx, "records", "bytes", row, pending, held)
}

/// Writes a held value into the zero-filled blob of its row, a chunk at a time.
fn copy_in(
    tx: &Connection,
    table: &str,
    column: &str,
    row: i64,
    pending: &Pending,
    held: &Held,
) -> Result<(), CommitError> {
    let mut blob = tx.blob_open(MAIN_DB, table, column, row, false)?;
    let mut at = 0;
    pending.spill()?.chunks(held, |chunk| {
        blob.write_at(chunk, at)?;
        at += chunk.len();
        Ok::<_, CommitError>(())
    })?;
    blob.close()?;
    Ok(())
}

/// Whether the stored record at `row` (of the held value's length) holds the same bytes.
fn same_bytes(
    tx: &Connection,
    row: i64,
    pending: &Pending,
    held: &Held,
) -> Result<bool, CommitError> {
    let blob = tx.blob_open(MAIN_DB, "records", "bytes", row, true)?;
    let mut stored = vec![0; CHUNK];
    let mut at = 0;
    let mut same = true;
    pending.spill()?.chunks(held, |chunk| {
        if same {
            let stored = &mut stored[..chunk.len()];
            blob.read_at_exact(stored, at)?;
            same = stored == chunk;
            at += chunk.len();
        }
        Ok::<_, CommitError>(())
    })?;
    Ok(same)
}

pub fn has_blob(conn: &Connection, key: &str) -> rusqlite::Result<bool> {
    conn.prepare_cached("SELECT 1 FROM blobs WHERE key = ?1")?
        .exists([key])
}

/// The value of a row's `bytes` column (at `at`) and `codec` column (the next), decoded.
fn decoded(r: &rusqlite::Row<'_>, at: usize) -> rusqlite::Result<Vec<u8>> {
    codec::decode(r.get(at)?, r.get(at + 1)?).map_err(not_decoded(at))
}

/// A value's bytes that do not decode, as the error of reading its column `at`.
fn not_decoded(at: usize) -> impl FnOnce(io::Error) -> rusqlite::Error {
    move |e| rusqlite::Error::FromSqlConversionFailure(at, rusqlite::types::Type::Blob, Box::new(e))
}

pub fn get_blob(conn: &Connection, key: &str) -> rusqlite::Result<Option<Vec<u8>>> {
    conn.prepare_cached("SELECT bytes FROM blobs WHERE key = ?1")?
        .query_row([key], |r| r.get(0))
        .optional()
}

pub fn get_state(
    conn: &Connection,
    session: &str,
    stage: &str,
) -> rusqlite::Result<Option<Vec<u8>>> {
    conn.prepare_cached("SELECT value FROM state WHERE session = ?1 AND stage = ?2")?
        .query_row([session, stage], |r| r.get(0))
        .optional()
}

pub fn state_names(conn: &Connection, session: &str) -> rusqlite::Result<Vec<String>> {
    conn.prepare_cached("SELECT stage FROM state WHERE session = ?1")?
        .query_map([session], |r| r.get(0))?
        .collect()
}

/// A record's bytes as stored, and their codec ([`codec::decode`] reads them).
pub fn get_record_stored(
    conn: &Connection,
    namespace: &str,
    name: &str,
) -> rusqlite::Result<Option<(Vec<u8>, i64)>> {
    conn.prepare_cached("SELECT bytes, codec FROM records WHERE namespace = ?1 AND name = ?2")?
        .query_row([namespace, name], |r| Ok((r.get(0)?, r.get(1)?)))
        .optional()
}

pub fn get_record(
    conn: &Connection,
    namespace: &str,
    name: &str,
) -> rusqlite::Result<Option<Vec<u8>>> {
    get_record_stored(conn, namespace, name)?
        .map(|(stored, codec)| codec::decode(stored, codec).map_err(not_decoded(0)))
        .transpose()
}

pub fn remove_record(conn: &Connection, namespace: &str, name: &str) -> rusqlite::Result<()> {
    conn.prepare_cached("DELETE FROM records WHERE namespace = ?1 AND name = ?2")?
        .execute([namespace, name])
        .map(|_| ())
}

/// Every record whose namespace starts with `prefix` (an exact namespace when `exact`), as
/// (namespace, name, bytes), in key order.
pub fn records(
    conn: &Connection,
    prefix: &str,
    exact: bool,
) -> rusqlite::Result<Vec<(String, String, Vec<u8>)>> {
    let mut out = Vec::new();
    if exact {
        let mut stmt = conn.prepare_cached(
            "SELECT namespace, name, bytes, codec FROM records WHERE namespace = ?1",
        )?;
        for row in stmt.query_map([prefix], |r| Ok((r.get(0)?, r.get(1)?, decoded(r, 2)?)))? {
            out.push(row?);
        }
        return Ok(out);
    }
    // Keys sort by their UTF-8 bytes, so the namespaces that start with `prefix` are the ones
    // from `prefix` on, up to the first that does not.
    let mut stmt = conn.prepare_cached(
        "SELECT namespace, name, bytes, codec FROM records WHERE namespace >= ?1 ORDER BY namespace",
    )?;
    let mut rows = stmt.query([prefix])?;
    while let Some(r) = rows.next()? {
        let namespace: String = r.get(0)?;
        if !namespace.starts_with(prefix) {
            break;
        }
        out.push((namespace, r.get(1)?, decoded(r, 2)?));
    }
    Ok(out)
}

/// The namespaces that start with `prefix` (see [`records`] for the range).
pub fn namespaces(conn: &Connection, prefix: &str) -> rusqlite::Result<Vec<String>> {
    let mut stmt = conn.prepare_cached(
        "SELECT DISTINCT namespace FROM records WHERE namespace >= ?1 ORDER BY namespace",
    )?;
    let mut rows = stmt.query([prefix])?;
    let mut out = Vec::new();
    while let Some(r) = rows.next()? {
        let namespace: String = r.get(0)?;
        if !namespace.starts_with(prefix) {
            break;
        }
        out.push(namespace);
    }
    Ok(out)
}
