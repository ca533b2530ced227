//! The condense store: where everything a stage removes from a conversation is kept.
//!
//! A store is a directory (default `.condense/` beside the input) holding one SQLite database,
//! `store.db` (with its `-wal` and `-shm` files while it is open, and after, while the log is
//! small: see below), with:
//! - content-addressed blobs (key: 32 hex digits of the xxh3-128 of the bytes), written once;
//! - each stage's persistent state for one session;
//! - small named records, by namespace (the expansion index uses them);
//! - token counts of the blocks a session's runs have counted, by tokenizer and block hash, so
//!   a new process recounts only new blocks ([`Store::token_counts`]); packed, one row per run
//!   that counted something (`token_chunks`).
//!
//! **Why SQLite.** The first layout wrote one file per entry (temp file, fsync, rename, fsync
//! of the folder): a first run on a 1M-token conversation spent most of its time in the kernel
//! creating inodes. SQLite keeps them in one file, and a run's writes go in one transaction
//! ([`Store::batch`]). redb was the other candidate, but it locks its file for one process at
//! a time, and several `condense` runs may share a store.
//!
//! **Memory.** Until its commit a batch keeps its large values (16 KiB on: archive segments,
//! persisted tool results) in an unnamed temporary file, not in memory, and the commit copies
//! them into their rows a chunk at a time (`spill`); a record can be streamed in as it is
//! serialized ([`Store::record_writer`]). So a run's peak memory does not grow with what it
//! archives.
//!
//! **Size.** Records from 1 KiB on are stored LZ4-compressed (`codec`): they are most of a
//! store, and text. Blobs are stored as they are. A store written by a newer condense (a
//! higher schema version) is refused with [`StoreError::Newer`] rather than misread.
//!
//! **Crash safety.** WAL journal with `synchronous = NORMAL`: a transaction is atomic whatever
//! moment the process is killed (SIGKILL included), so the next run sees the store as it was
//! before the killed run's transaction or after it, never half of it. A commit is not synced to
//! disk by itself (the log is synced at checkpoints): a power loss or OS crash can lose the
//! last runs' commits, while their outputs, written with fsync, survive; expanding those
//! outputs then fails with a clear error, and the database itself is never corrupt.
//!
//! **Closing.** The last connection leaves a log of up to 1 MiB for the next one instead of
//! copying it into the database (a copy and two fsyncs, about 4 ms of a resumed turn); the one that
//! finds it larger does the copy. A killed process leaves its log the same way, so nothing
//! about crash safety changes; a power loss can lose the commits of the runs since the last
//! copy (about nine resumed turns of a 1M-token session), as above.
//!
//! **Concurrency.** Each [`Store`] has its own connection; readers never wait, writers wait for
//! each other (busy timeout 60 s) and only for the length of one commit.
//!
//! **Older stores.** A directory of the first layout (`blobs/xx/<hex>`,
//! `state/<session>/<stage>`, `records/<namespace>/<name>`) is migrated into the database the
//! first time it is opened, then its folders are removed.
//!
//! Names that come from transcripts (session ids, tool_use ids) go through
//! [`sanitize_component`], one-to-one, as they did when they were file names, so callers read
//! back the same names as before and two sessions never share a key.
//!
//! ```
//! let dir = tempfile::tempdir().unwrap();
//! let store = condense_store::Store::open(dir.path()).unwrap();
//! let key = store.put(b"a very long tool result").unwrap();
//! assert_eq!(store.get(&key).unwrap().as_deref(), Some(&b"a very long tool result"[..]));
//! store.state_put("session-1", "snip", "{\"seen\":3}").unwrap();
//! assert_eq!(store.state_get("session-1", "snip").unwrap().as_deref(), Some("{\"seen\":3}"));
//! // A run's writes, in one transaction: none of them is visible to others before `commit`.
//! let batch = store.batch();
//! store.record_put("expand-session-1", "r1", b"...").unwrap();
//! batch.commit().unwrap();
//! ```

pub mod checkpoint;
mod codec;
#[cfg(test)]
mod codec_tests;
mod db;
mod legacy;
#[cfg(test)]
mod remove_tests;
mod sanitize;
mod spill;
#[cfg(test)]
mod spill_tests;
mod stored;
mod stream;
#[cfg(test)]
mod tests;
mod token_chunks;

pub use db::{DB_FILE, DB_SIDE_FILES};
pub use legacy::remove_orphan_temps;
pub use sanitize::sanitize_component;
pub use stored::Stored;
pub use stream::RecordWriter;

use db::{CommitError, Pending};
use rusqlite::Connection;
use std::collections::{BTreeMap, HashMap};
use std::fs;
use std::io::{self, Write};
use std::marker::PhantomData;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::{self, ThreadId};
use twox_hash::XxHash3_128;

/// A store failure: one line naming the path and what went wrong.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("store {path}: {source}")]
    Io { path: PathBuf, source: io::Error },
    #[error("store {path}: {source}")]
    Db {
        path: PathBuf,
        source: rusqlite::Error,
    },
    #[error(
        "store {path}: written by a newer version of condense (store schema {version}; this one \
         reads up to {}): use that version, or another --store",
        db::SCHEMA_VERSION
    )]
    Newer { path: PathBuf, version: i64 },
    #[error("store: invalid blob key `{0}` (expected 32 hex digits)")]
    InvalidKey(String),
    #[error("store {path}: state of session `{session}`, stage `{stage}` is not UTF-8")]
    NotUtf8 {
        path: PathBuf,
        session: String,
        stage: String,
    },
    /// A value could not be serialized to be stored, or to be hashed into a key: writing or
    /// keying empty bytes instead would corrupt the store without a word.
    #[error("store: cannot encode {what}: {source}")]
    Encode {
        what: &'static str,
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

fn io_err(path: &Path) -> impl FnOnce(io::Error) -> StoreError + '_ {
    move |source| StoreError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// A store: a handle on its database. Clones share one connection.
#[derive(Clone)]
pub struct Store {
    inner: Arc<Inner>,
}

struct Inner {
    root: PathBuf,
    db_path: PathBuf,
    conn: Mutex<Conn>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        // The last handle goes: the connection closes right after this.
        let conn = self.conn.get_mut().unwrap_or_else(|p| p.into_inner());
        db::keep_small_log(&conn.db, &self.db_path);
    }
}

struct Conn {
    db: Connection,
    /// The open batches, by the thread that opened them (a thread without one commits each
    /// write at once). By thread, because one handle may serve concurrent runs (`condense
    /// serve`), each with its own transaction.
    open: HashMap<ThreadId, Open>,
}

impl Conn {
    /// The writes the current thread's batch holds back, if it has one open.
    fn held(&self) -> Option<&Pending> {
        self.open.get(&thread::current().id()).map(|o| &o.pending)
    }
}

/// One thread's open batch.
struct Open {
    pending: Pending,
    /// How many [`Batch`]es the thread has open: only the outermost commits.
    depth: usize,
    /// Which batch this is (unique in the process): a [`RecordWriter`] checks its pieces all go
    /// into the batch it started in.
    id: u64,
}

impl Open {
    fn new() -> Open {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        Open {
            pending: Pending::default(),
            depth: 0,
            id: NEXT.fetch_add(1, Ordering::Relaxed),
        }
    }
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("root", &self.inner.root)
            .finish_non_exhaustive()
    }
}

/// The key of `bytes` in any store: 32 lowercase hex digits of their xxh3-128
/// ([`content_hash`], [`hash_key`]).
pub fn blob_key(bytes: &[u8]) -> String {
    hash_key(content_hash(bytes))
}

/// The hash a store names content by: xxh3-128. A caller that keeps hashes as numbers (a
/// record naming other records) names them with [`hash_key`].
pub fn content_hash(bytes: &[u8]) -> u128 {
    XxHash3_128::oneshot(bytes)
}

/// A [`content_hash`] spelled as a key: 32 lowercase hex digits.
pub fn hash_key(hash: u128) -> String {
    format!("{hash:032x}")
}

fn check_key(key: &str) -> Result<String, StoreError> {
    let valid = key.len() == 32 && key.bytes().all(|b| b.is_ascii_hexdigit());
    if !valid {
        return Err(StoreError::InvalidKey(key.chars().take(80).collect()));
    }
    Ok(key.to_ascii_lowercase())
}

/// A run's writes held back and committed together by [`Batch::commit`]: one transaction, so
/// a run killed before it leaves the store as it was, and one write lock instead of one per
/// entry. A batch belongs to the thread that opened it: that thread's writes through the
/// [`Store`] (or a clone) go into it, and its reads see them; other threads see them once
/// committed. Dropped without a commit (an error on the way), the writes are discarded.
/// Batches nest: only the outermost commits.
#[must_use = "a batch's writes are discarded unless it is committed"]
pub struct Batch<'a> {
    store: &'a Store,
    done: bool,
    /// Committed or dropped on the thread that opened it (not `Send`).
    _thread: PhantomData<*const ()>,
}

impl Batch<'_> {
    /// Commits the batch's writes (when it is the outermost open batch of its thread).
    pub fn commit(mut self) -> Result<(), StoreError> {
        self.done = true;
        let id = thread::current().id();
        let mut conn = self.store.lock();
        let Some(open) = conn.open.get_mut(&id) else {
            return Ok(());
        };
        open.depth = open.depth.saturating_sub(1);
        if open.depth > 0 {
            return Ok(());
        }
        let Some(open) = conn.open.remove(&id) else {
            return Ok(());
        };
        db::commit(&mut conn.db, &open.pending).map_err(|e| self.store.commit_err(e))
    }
}

impl Drop for Batch<'_> {
    fn drop(&mut self) {
        if !self.done {
            // The whole of the thread's batch goes: an outer batch cannot commit half a run.
            self.store.lock().open.remove(&thread::current().id());
        }
    }
}

impl Store {
    /// Opens (creating it if needed) the store at `root`, migrating the first layout's files
    /// into the database when there are any.
    pub fn open(root: impl Into<PathBuf>) -> Result<Store, StoreError> {
        let root = root.into();
        fs::create_dir_all(&root).map_err(io_err(&root))?;
        let db_path = root.join(DB_FILE);
        let db_err = |source| StoreError::Db {
            path: db_path.clone(),
            source,
        };
        let mut db = db::open(&db_path).map_err(db_err)?;
        let version = db::user_version(&db).map_err(db_err)?;
        if version > db::SCHEMA_VERSION {
            return Err(StoreError::Newer {
                path: db_path,
                version,
            });
        }
        if legacy::present(&root) {
            legacy::migrate(&root, &mut db)?;
        }
        Ok(Store {
            inner: Arc::new(Inner {
                root,
                db_path,
                conn: Mutex::new(Conn {
                    db,
                    open: HashMap::new(),
                }),
            }),
        })
    }

    /// Takes this store's checkpoints off the threads that commit, for a process that commits
    /// turn after turn (`condense serve`; see [`checkpoint`]): past [`checkpoint::DUE_PAGES`]
    /// of log, a thread of its own copies the log into the database while requests go on.
    pub fn checkpoint_in_background(&self) -> Result<(), StoreError> {
        let mut conn = self.lock();
        checkpoint::in_background(&mut conn.db, &self.inner.db_path).map_err(|e| self.db_err(e))
    }

    /// The store's directory.
    pub fn root(&self) -> &Path {
        &self.inner.root
    }

    fn lock(&self) -> MutexGuard<'_, Conn> {
        // A panic while the lock was held cannot leave the connection half-changed (SQLite
        // rolls back an unfinished transaction), so a poisoned lock is still usable.
        self.inner
            .conn
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn db_err(&self, source: rusqlite::Error) -> StoreError {
        StoreError::Db {
            path: self.inner.db_path.clone(),
            source,
        }
    }

    /// A failure of the batch's spill file (see `spill`), named by the store's directory.
    fn spill_err(&self, source: io::Error) -> StoreError {
        StoreError::Io {
            path: self.inner.root.clone(),
            source,
        }
    }

    fn commit_err(&self, e: CommitError) -> StoreError {
        match e {
            CommitError::Db(e) => self.db_err(e),
            CommitError::Spill(e) => self.spill_err(e),
        }
    }

    /// Starts a [`Batch`]: this thread's writes until its commit go in one transaction.
    pub fn batch(&self) -> Batch<'_> {
        self.lock()
            .open
            .entry(thread::current().id())
            .or_insert_with(Open::new)
            .depth += 1;
        Batch {
            store: self,
            done: false,
            _thread: PhantomData,
        }
    }

    /// Adds a write to this thread's open batch, or commits it at once when there is none.
    /// `change` is given the directory for the batch's spill file (none outside a batch).
    fn write(
        &self,
        change: impl FnOnce(&mut Pending, Option<&Path>) -> io::Result<()>,
    ) -> Result<(), StoreError> {
        let mut conn = self.lock();
        if let Some(open) = conn.open.get_mut(&thread::current().id()) {
            return change(&mut open.pending, Some(&self.inner.root))
                .map_err(|e| self.spill_err(e));
        }
        let mut pending = Pending::default();
        change(&mut pending, None).map_err(|e| self.spill_err(e))?;
        db::commit(&mut conn.db, &pending).map_err(|e| self.commit_err(e))
    }

    /// Stores `bytes`, returning their key. Storing the same bytes twice writes once.
    pub fn put(&self, bytes: &[u8]) -> Result<String, StoreError> {
        let key = blob_key(bytes);
        {
            // Reruns put the same blobs again: a key lookup spares copying the bytes into the
            // batch and binding them to an insert that would be ignored.
            let conn = self.lock();
            let held = conn.held().is_some_and(|p| p.blobs.contains_key(&key));
            if held || db::has_blob(&conn.db, &key).map_err(|e| self.db_err(e))? {
                return Ok(key);
            }
        }
        self.write(|p, dir| {
            if !p.blobs.contains_key(&key) {
                let held = p.hold(dir, bytes.to_vec(), codec::RAW)?;
                p.blobs.insert(key.clone(), held);
            }
            Ok(())
        })?;
        Ok(key)
    }

    /// The bytes stored under `key`, if any.
    pub fn get(&self, key: &str) -> Result<Option<Vec<u8>>, StoreError> {
        let key = check_key(key)?;
        let conn = self.lock();
        if let Some((p, held)) = conn.held().and_then(|p| Some((p, p.blobs.get(&key)?))) {
            return p.read(held).map(Some).map_err(|e| self.spill_err(e));
        }
        db::get_blob(&conn.db, &key).map_err(|e| self.db_err(e))
    }

    /// A stage's state for a session.
    pub fn state_get(&self, session: &str, stage: &str) -> Result<Option<String>, StoreError> {
        let id = (sanitize_component(session), sanitize_component(stage));
        let conn = self.lock();
        let bytes = match conn.held().and_then(|p| p.state.get(&id)) {
            Some(bytes) => Some(bytes.clone()),
            None => db::get_state(&conn.db, &id.0, &id.1).map_err(|e| self.db_err(e))?,
        };
        bytes
            .map(|b| {
                String::from_utf8(b).map_err(|_| StoreError::NotUtf8 {
                    path: self.inner.db_path.clone(),
                    session: id.0.clone(),
                    stage: id.1.clone(),
                })
            })
            .transpose()
    }

    /// The names of the states kept for a session, as stored (sanitized), sorted.
    pub fn state_names(&self, session: &str) -> Result<Vec<String>, StoreError> {
        let session = sanitize_component(session);
        let conn = self.lock();
        let mut names = db::state_names(&conn.db, &session).map_err(|e| self.db_err(e))?;
        if let Some(p) = conn.held() {
            names.extend(
                p.state
                    .keys()
                    .filter(|(s, _)| *s == session)
                    .map(|(_, stage)| stage.clone()),
            );
        }
        names.sort();
        names.dedup();
        Ok(names)
    }

    /// Replaces a stage's state for a session (no write when it is unchanged).
    pub fn state_put(&self, session: &str, stage: &str, state: &str) -> Result<(), StoreError> {
        let id = (sanitize_component(session), sanitize_component(stage));
        self.write(|p, _| {
            p.state.insert(id, state.as_bytes().to_vec());
            Ok(())
        })
    }

    /// Writes a named record (replacing any previous one; no write when it is unchanged).
    pub fn record_put(&self, namespace: &str, name: &str, bytes: &[u8]) -> Result<(), StoreError> {
        let id = (sanitize_component(namespace), sanitize_component(name));
        // Compressed before the lock is taken: other runs on this store (`serve`'s sessions)
        // go on meanwhile.
        let (bytes, codec) = codec::encode_if_smaller(bytes);
        self.write(|p, dir| {
            let held = p.hold(dir, bytes, codec)?;
            p.removed.remove(&id);
            p.records.insert(id, held);
            Ok(())
        })
    }

    /// Removes a named record (nothing when there is none): with this thread's open batch, at
    /// its commit (a run that drops the blocks its new record no longer names removes them in
    /// the transaction that writes the record), else at once.
    pub fn record_remove(&self, namespace: &str, name: &str) -> Result<(), StoreError> {
        let id = (sanitize_component(namespace), sanitize_component(name));
        let mut conn = self.lock();
        if let Some(open) = conn.open.get_mut(&thread::current().id()) {
            open.pending.records.remove(&id);
            open.pending.removed.insert(id);
            return Ok(());
        }
        db::remove_record(&conn.db, &id.0, &id.1).map_err(|e| self.db_err(e))
    }

    /// One named record, if it exists.
    pub fn record_get(&self, namespace: &str, name: &str) -> Result<Option<Vec<u8>>, StoreError> {
        let id = (sanitize_component(namespace), sanitize_component(name));
        self.record_in(&self.lock(), &id)
    }

    /// The record `id` (sanitized namespace and name): what this thread's open batch holds
    /// back, else what the database has.
    fn record_in(&self, conn: &Conn, id: &(String, String)) -> Result<Option<Vec<u8>>, StoreError> {
        if let Some(p) = conn.held() {
            if let Some(held) = p.records.get(id) {
                return p.read(held).map(Some).map_err(|e| self.spill_err(e));
            }
            if p.removed.contains(id) {
                return Ok(None);
            }
        }
        db::get_record(&conn.db, &id.0, &id.1).map_err(|e| self.db_err(e))
    }

    /// Every record of a namespace, as (name, bytes), sorted by name.
    pub fn records(&self, namespace: &str) -> Result<Records, StoreError> {
        let namespace = sanitize_component(namespace);
        let mut grouped = self.records_where(&namespace, true)?;
        Ok(grouped.pop().unwrap_or_default())
    }

    /// Every record of a namespace as committed: without the writes a batch holds back (the
    /// run in progress's own), as (name, bytes), sorted by name.
    pub fn committed_records(&self, namespace: &str) -> Result<Records, StoreError> {
        let namespace = sanitize_component(namespace);
        let conn = self.lock();
        let rows = db::records(&conn.db, &namespace, true).map_err(|e| self.db_err(e))?;
        let mut records: Records = rows
            .into_iter()
            .map(|(_, name, bytes)| (name, bytes))
            .collect();
        records.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(records)
    }

    /// The records of every namespace whose stored (sanitized) name starts with `prefix`,
    /// namespace by namespace (sorted). Stored names are sanitized already and are compared as
    /// they are: sanitizing is not idempotent for long names.
    pub fn records_by_prefix(&self, prefix: &str) -> Result<Vec<Records>, StoreError> {
        self.records_where(prefix, false)
    }

    /// The stored (sanitized) names of the namespaces that start with `prefix`, sorted.
    pub fn namespaces(&self, prefix: &str) -> Result<Vec<String>, StoreError> {
        let conn = self.lock();
        let mut names = db::namespaces(&conn.db, prefix).map_err(|e| self.db_err(e))?;
        if let Some(p) = conn.held() {
            names.extend(
                p.records
                    .keys()
                    .filter(|(namespace, _)| namespace.starts_with(prefix))
                    .map(|(namespace, _)| namespace.clone()),
            );
        }
        names.sort();
        names.dedup();
        Ok(names)
    }

    /// The records of the namespaces `prefix` names (or starts, unless `exact`), committed and
    /// held back alike, grouped by namespace, each sorted by name.
    fn records_where(&self, prefix: &str, exact: bool) -> Result<Vec<Records>, StoreError> {
        let conn = self.lock();
        let rows = db::records(&conn.db, prefix, exact).map_err(|e| self.db_err(e))?;
        let mut grouped: BTreeMap<String, BTreeMap<String, Vec<u8>>> = BTreeMap::new();
        for (namespace, name, bytes) in rows {
            grouped.entry(namespace).or_default().insert(name, bytes);
        }
        if let Some(p) = conn.held() {
            for (namespace, name) in &p.removed {
                if let Some(names) = grouped.get_mut(namespace) {
                    names.remove(name);
                }
            }
            grouped.retain(|_, names| !names.is_empty());
            let held = p.records.iter().filter(|((namespace, _), _)| {
                if exact {
                    namespace == prefix
                } else {
                    namespace.starts_with(prefix)
                }
            });
            for ((namespace, name), value) in held {
                let bytes = p.read(value).map_err(|e| self.spill_err(e))?;
                grouped
                    .entry(namespace.clone())
                    .or_default()
                    .insert(name.clone(), bytes);
            }
        }
        Ok(grouped
            .into_values()
            .map(|names| names.into_iter().collect())
            .collect())
    }

    /// The token counts stored for `session` with `tokenizer`, as (block hash, tokens): what
    /// its earlier runs counted, to seed a new process's cache, in the order stored (a hash
    /// counted again comes again after its earlier count, which it replaces).
    pub fn token_counts(
        &self,
        session: &str,
        tokenizer: &str,
    ) -> Result<Vec<(u64, u32)>, StoreError> {
        let session = sanitize_component(session);
        let conn = self.lock();
        let mut counts =
            token_chunks::load(&conn.db, &session, tokenizer).map_err(|e| self.db_err(e))?;
        if let Some(held) = conn
            .held()
            .and_then(|p| p.tokens.get(&(session, tokenizer.to_string())))
        {
            counts.extend_from_slice(held);
        }
        Ok(counts)
    }

    /// Adds token counts for `session` with `tokenizer` (block hash, tokens), as
    /// `TokenCounter::take_fresh` gives them.
    pub fn token_counts_put(
        &self,
        session: &str,
        tokenizer: &str,
        counts: Vec<(u64, u32)>,
    ) -> Result<(), StoreError> {
        if counts.is_empty() {
            return Ok(());
        }
        let id = (sanitize_component(session), tokenizer.to_string());
        self.write(|p, _| {
            p.tokens.entry(id).or_default().extend(counts);
            Ok(())
        })
    }
}

/// The records of one namespace: (name, bytes), sorted by name.
pub type Records = Vec<(String, Vec<u8>)>;

/// The folders of the first store layout (see the crate's overview): a directory holding them
/// is a store too, migrated when it is opened.
pub const STORE_FOLDERS: [&str; 3] = legacy::LEGACY_FOLDERS;

/// Whether `dir` is a store: it holds the store's database (or a first-layout folder), and
/// nothing else (hidden entries aside). Whatever it is called, such a folder holds condense's
/// own data, not conversations, so commands that walk folders of sessions skip it.
pub fn looks_like_store(dir: &Path) -> bool {
    let Ok(names) = legacy::list_dir(dir) else {
        return false;
    };
    !names.is_empty()
        && names.iter().all(|n| {
            let path = dir.join(n);
            (STORE_FOLDERS.contains(&n.as_str()) && path.is_dir())
                || ((n == DB_FILE || DB_SIDE_FILES.contains(&n.as_str())) && path.is_file())
        })
}

/// Writes `bytes` to `path` atomically: temp file (uniquely named `.tmp-<pid>-<random>`) in
/// the same directory, fsync, rename, fsync of the directory, so a reader never sees a
/// half-written file. The directory is created when missing. [`remove_orphan_temps`] removes
/// what a killed write leaves.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), StoreError> {
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    fs::create_dir_all(dir).map_err(io_err(dir))?;
    // `.tmp-<pid>-<random>`: the pid tells a later run whether the write can still finish.
    let mut tmp = tempfile::Builder::new()
        .prefix(&format!("{}{}-", legacy::TEMP_PREFIX, std::process::id()))
        .tempfile_in(dir)
        .map_err(io_err(dir))?;
    tmp.write_all(bytes).map_err(io_err(path))?;
    tmp.as_file().sync_all().map_err(io_err(path))?;
    tmp.persist(path).map_err(|e| io_err(path)(e.error))?;
    // Make the rename itself durable. Opening a directory for fsync is not possible on every
    // platform; where it fails the data is still written, only less durably.
    if let Ok(d) = fs::File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(())
}
