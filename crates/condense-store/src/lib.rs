//! The condense store: where everything a stage removes from a conversation is kept.
//!
//! A store is a directory (default `.condense/` beside the input) holding:
//! - `blobs/xx/<32 hex>`: content-addressed blobs (xxh3-128 of the bytes), written once;
//! - `state/<session>/<stage>`: each stage's persistent state for one session;
//! - `records/<namespace>/<name>`: small named records (the expansion index uses them).
//!
//! Every write is atomic (temp file in the same directory, fsync, rename, fsync of the
//! directory), so a crash never leaves a half-written blob or state. A temp file is named
//! `.tmp-<pid>-<random>`; one that a killed run left behind (its process is gone, or it is over
//! an hour old) is removed the next time the store is opened ([`remove_orphan_temps`]). Names
//! that come from transcripts (session ids, tool_use ids) go through [`sanitize_component`],
//! one-to-one, so nothing can be written outside the store directory, whatever a transcript
//! says, and two sessions never share a folder.
//!
//! ```
//! let dir = tempfile::tempdir().unwrap();
//! let store = condense_store::Store::open(dir.path()).unwrap();
//! let key = store.put(b"a very long tool result").unwrap();
//! assert_eq!(store.get(&key).unwrap().as_deref(), Some(&b"a very long tool result"[..]));
//! store.state_put("session-1", "snip", "{\"seen\":3}").unwrap();
//! assert_eq!(store.state_get("session-1", "snip").unwrap().as_deref(), Some("{\"seen\":3}"));
//! ```

mod sanitize;

pub use sanitize::sanitize_component;

use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use xxhash_rust::xxh3::xxh3_128;

/// A store failure: one line naming the path and what went wrong.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("store {path}: {source}")]
    Io { path: PathBuf, source: io::Error },
    #[error("store: invalid blob key `{0}` (expected 32 hex digits)")]
    InvalidKey(String),
    #[error("store {path}: state is not UTF-8")]
    NotUtf8 { path: PathBuf },
}

fn io_err(path: &Path) -> impl FnOnce(io::Error) -> StoreError + '_ {
    move |source| StoreError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// A store directory.
#[derive(Debug, Clone)]
pub struct Store {
    root: PathBuf,
}

/// The key of `bytes` in any store: 32 lowercase hex digits of their xxh3-128.
pub fn blob_key(bytes: &[u8]) -> String {
    format!("{:032x}", xxh3_128(bytes))
}

impl Store {
    /// Opens (creating it if needed) the store at `root`, removing the temp files of writes
    /// that a killed run left behind ([`remove_orphan_temps`]).
    pub fn open(root: impl Into<PathBuf>) -> Result<Store, StoreError> {
        let root = root.into();
        fs::create_dir_all(&root).map_err(io_err(&root))?;
        // Best effort: an orphan that cannot be removed only costs disk space, never a run.
        let _ = remove_orphan_temps(&root, STORE_DEPTH);
        Ok(Store { root })
    }

    fn blob_path(&self, key: &str) -> Result<PathBuf, StoreError> {
        let valid = key.len() == 32 && key.bytes().all(|b| b.is_ascii_hexdigit());
        if !valid {
            return Err(StoreError::InvalidKey(key.chars().take(80).collect()));
        }
        let key = key.to_ascii_lowercase();
        Ok(self.root.join("blobs").join(&key[..2]).join(&key))
    }

    /// Stores `bytes`, returning their key. Storing the same bytes twice writes once.
    pub fn put(&self, bytes: &[u8]) -> Result<String, StoreError> {
        let key = blob_key(bytes);
        let path = self.blob_path(&key)?;
        if !path.exists() {
            write_atomic(&path, bytes)?;
        }
        Ok(key)
    }

    /// The bytes stored under `key`, if any.
    pub fn get(&self, key: &str) -> Result<Option<Vec<u8>>, StoreError> {
        read_optional(&self.blob_path(key)?)
    }

    fn state_path(&self, session: &str, stage: &str) -> PathBuf {
        self.root
            .join("state")
            .join(sanitize_component(session))
            .join(sanitize_component(stage))
    }

    /// A stage's state for a session.
    pub fn state_get(&self, session: &str, stage: &str) -> Result<Option<String>, StoreError> {
        let path = self.state_path(session, stage);
        read_optional(&path)?
            .map(|bytes| String::from_utf8(bytes).map_err(|_| StoreError::NotUtf8 { path }))
            .transpose()
    }

    /// The names of the states kept for a session, as they are on disk (sanitized), sorted.
    pub fn state_names(&self, session: &str) -> Result<Vec<String>, StoreError> {
        let mut names = list_dir(&self.root.join("state").join(sanitize_component(session)))?;
        names.sort();
        Ok(names)
    }

    /// Replaces a stage's state for a session (no write when it is unchanged).
    pub fn state_put(&self, session: &str, stage: &str, state: &str) -> Result<(), StoreError> {
        write_if_changed(&self.state_path(session, stage), state.as_bytes())
    }

    fn record_path(&self, namespace: &str, name: &str) -> PathBuf {
        self.root
            .join("records")
            .join(sanitize_component(namespace))
            .join(sanitize_component(name))
    }

    /// Writes a named record (replacing any previous one; no write when it is unchanged).
    pub fn record_put(&self, namespace: &str, name: &str, bytes: &[u8]) -> Result<(), StoreError> {
        write_if_changed(&self.record_path(namespace, name), bytes)
    }

    /// One named record, if it exists.
    pub fn record_get(&self, namespace: &str, name: &str) -> Result<Option<Vec<u8>>, StoreError> {
        read_optional(&self.record_path(namespace, name))
    }

    /// Every record of a namespace, as (name, bytes), sorted by name.
    pub fn records(&self, namespace: &str) -> Result<Records, StoreError> {
        read_records(
            &self
                .root
                .join("records")
                .join(sanitize_component(namespace)),
        )
    }

    /// The records of every namespace whose name on disk starts with `prefix`, namespace by
    /// namespace (sorted). Names on disk are sanitized already and are read as they are:
    /// sanitizing is not idempotent for long names.
    pub fn records_by_prefix(&self, prefix: &str) -> Result<Vec<Records>, StoreError> {
        let dir = self.root.join("records");
        let mut names: Vec<String> = list_dir(&dir)?
            .into_iter()
            .filter(|n| n.starts_with(prefix))
            .collect();
        names.sort();
        names.iter().map(|n| read_records(&dir.join(n))).collect()
    }
}

/// How deep files lie below a store's root: `blobs/xx/key`, `state/session/stage`,
/// `records/namespace/name`.
const STORE_DEPTH: usize = 3;

/// The prefix of every temp file [`write_atomic`] makes; the writer's process id follows.
const TEMP_PREFIX: &str = ".tmp-";

/// A temp file older than this is an orphan even if a process with its pid is running (the pid
/// was reused): no write takes that long.
const ORPHAN_AGE: std::time::Duration = std::time::Duration::from_secs(3600);

/// Removes, in `dir` and its folders down to `depth` levels, the temp files of
/// [`write_atomic`] that no running write owns: named `.tmp-<pid>-<random>` with a pid that is
/// not a running process (checked through `/proc` where there is one) or older than an hour.
/// A write in progress in another process is left alone. Returns how many were removed.
pub fn remove_orphan_temps(dir: &Path, depth: usize) -> Result<usize, StoreError> {
    let entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(0),
        Err(e) => return Err(io_err(dir)(e)),
    };
    let mut removed = 0;
    for entry in entries.flatten() {
        let path = entry.path();
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        if kind.is_dir() {
            if depth > 0 {
                removed += remove_orphan_temps(&path, depth - 1)?;
            }
        } else if kind.is_file()
            && is_orphan_temp(&entry.file_name().to_string_lossy(), &path)
            && fs::remove_file(&path).is_ok()
        {
            removed += 1;
        }
    }
    Ok(removed)
}

/// Whether `name` (at `path`) is a temp file of a write that will never finish.
fn is_orphan_temp(name: &str, path: &Path) -> bool {
    let Some(pid) = name
        .strip_prefix(TEMP_PREFIX)
        .and_then(|rest| rest.split_once('-'))
        .and_then(|(pid, _)| pid.parse::<u32>().ok())
    else {
        return false;
    };
    let old = fs::metadata(path)
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.elapsed().ok())
        .is_some_and(|age| age > ORPHAN_AGE);
    old || (pid != std::process::id() && process_gone(pid))
}

/// Whether no process `pid` runs. Only known where `/proc` lists processes (Linux); elsewhere
/// orphans go by age alone.
fn process_gone(pid: u32) -> bool {
    let proc = Path::new("/proc");
    proc.join("self").exists() && !proc.join(pid.to_string()).exists()
}

/// The records of one namespace: (name, bytes), sorted by name.
pub type Records = Vec<(String, Vec<u8>)>;

/// The folders a store's root holds, and nothing else: blobs, stage state, named records.
pub const STORE_FOLDERS: [&str; 3] = ["blobs", "state", "records"];

/// Whether `dir` has a store's layout: at least one of [`STORE_FOLDERS`], and no other entry
/// (hidden ones aside). Whatever it is called, such a folder holds condense's own data, not
/// conversations, so commands that walk folders of sessions skip it.
pub fn looks_like_store(dir: &Path) -> bool {
    let Ok(names) = list_dir(dir) else {
        return false;
    };
    !names.is_empty()
        && names
            .iter()
            .all(|n| STORE_FOLDERS.contains(&n.as_str()) && dir.join(n).is_dir())
}

/// The entry names of `dir` (none when it does not exist), temp files of writes in progress
/// (a leading dot) left out.
fn list_dir(dir: &Path) -> Result<Vec<String>, StoreError> {
    let entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(io_err(dir)(e)),
    };
    let mut out = Vec::new();
    for entry in entries {
        let name = entry.map_err(io_err(dir))?.file_name();
        let name = name.to_string_lossy();
        if !name.starts_with('.') {
            out.push(name.into_owned());
        }
    }
    Ok(out)
}

/// Every file of a namespace directory, as (name, bytes), sorted by name.
fn read_records(dir: &Path) -> Result<Records, StoreError> {
    let mut out = Vec::new();
    for name in list_dir(dir)? {
        let path = dir.join(&name);
        let bytes = fs::read(&path).map_err(io_err(&path))?;
        out.push((name, bytes));
    }
    out.sort();
    Ok(out)
}

fn read_optional(path: &Path) -> Result<Option<Vec<u8>>, StoreError> {
    match fs::read(path) {
        Ok(bytes) => Ok(Some(bytes)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(io_err(path)(e)),
    }
}

/// [`write_atomic`], skipped when the file already holds exactly `bytes`: stages rewrite the
/// same state on every run, and a read is much cheaper than a durable write.
fn write_if_changed(path: &Path, bytes: &[u8]) -> Result<(), StoreError> {
    match fs::metadata(path) {
        Ok(meta) if meta.len() == bytes.len() as u64 => {
            if read_optional(path)?.as_deref() == Some(bytes) {
                return Ok(());
            }
            write_atomic(path, bytes)
        }
        _ => write_atomic(path, bytes),
    }
}

/// Writes `bytes` to `path` atomically: temp file (uniquely named) in the same directory,
/// fsync, rename, fsync of the directory, so a reader never sees a half-written file. The
/// directory is created when missing. The store writes everything this way; so does the
/// binary's `--out`.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), StoreError> {
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    fs::create_dir_all(dir).map_err(io_err(dir))?;
    // `.tmp-<pid>-<random>`: the pid tells a later run whether the write can still finish.
    let mut tmp = tempfile::Builder::new()
        .prefix(&format!("{TEMP_PREFIX}{}-", std::process::id()))
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blobs_round_trip_and_dedupe() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let k1 = store.put(b"hello").unwrap();
        let k2 = store.put(b"hello").unwrap();
        assert_eq!(k1, k2);
        assert_eq!(store.get(&k1).unwrap().unwrap(), b"hello");
        assert_eq!(store.get(&blob_key(b"other")).unwrap(), None);
    }

    #[test]
    fn bad_keys_are_refused_not_followed() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        assert!(matches!(
            store.get("../../etc/passwd"),
            Err(StoreError::InvalidKey(_))
        ));
        assert!(matches!(store.get("zz"), Err(StoreError::InvalidKey(_))));
    }

    #[test]
    fn hostile_session_and_stage_names_stay_inside() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("store");
        let store = Store::open(&root).unwrap();
        for hostile in [
            "../../etc/passwd",
            "/etc/passwd",
            "..",
            ".",
            "a/../../b",
            "c:\\x",
            "",
        ] {
            store.state_put(hostile, hostile, "x").unwrap();
            store.record_put(hostile, hostile, b"y").unwrap();
            assert_eq!(
                store.state_get(hostile, hostile).unwrap().as_deref(),
                Some("x")
            );
        }
        // Nothing was written beside the store.
        let siblings: Vec<_> = fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(siblings, vec![std::ffi::OsString::from("store")]);
        assert!(!dir.path().join("etc").exists());
    }

    #[test]
    fn unchanged_state_is_not_rewritten() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        store.state_put("s", "st", "same").unwrap();
        let path = dir.path().join("state/s/st");
        let before = fs::metadata(&path).unwrap().modified().unwrap();
        std::thread::sleep(std::time::Duration::from_millis(20));
        store.state_put("s", "st", "same").unwrap();
        assert_eq!(fs::metadata(&path).unwrap().modified().unwrap(), before);
        store.state_put("s", "st", "diff").unwrap();
        assert_eq!(store.state_get("s", "st").unwrap().as_deref(), Some("diff"));
    }

    #[test]
    fn a_store_is_recognised_by_its_layout() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("anything");
        let store = Store::open(&root).unwrap();
        assert!(!looks_like_store(&root), "empty: nothing to tell");
        store.put(b"blob").unwrap();
        assert!(looks_like_store(&root));
        store.state_put("s", "stage", "{}").unwrap();
        store.record_put("ns", "r", b"x").unwrap();
        fs::write(root.join(".tmp-write"), b"").unwrap();
        assert!(looks_like_store(&root), "hidden entries aside");
        // A folder with anything else in it is not a store, nor is a file named like one.
        fs::write(root.join("session.jsonl"), b"{}").unwrap();
        assert!(!looks_like_store(&root));
        let other = dir.path().join("other");
        fs::create_dir_all(&other).unwrap();
        fs::write(other.join("state"), b"").unwrap();
        assert!(!looks_like_store(&other));
        assert!(!looks_like_store(&dir.path().join("missing")));
    }

    #[test]
    fn records_are_listed_by_namespace() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        store.record_put("ns", "b", b"2").unwrap();
        store.record_put("ns", "a", b"1").unwrap();
        store.record_put("other", "c", b"3").unwrap();
        let names: Vec<String> = store
            .records("ns")
            .unwrap()
            .into_iter()
            .map(|(n, _)| n)
            .collect();
        assert_eq!(names, ["a", "b"]);
        assert!(store.records("empty").unwrap().is_empty());
    }

    #[test]
    fn records_by_prefix_finds_long_and_unsafe_namespaces() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        // Sanitized on write to a name that sanitizing again would change.
        let long = format!("archive-{}", "s".repeat(120));
        store.record_put(&long, "r", b"long").unwrap();
        store.record_put("archive-a/b", "r", b"unsafe").unwrap();
        store.record_put("other", "r", b"other").unwrap();
        let mut found: Vec<Vec<u8>> = store
            .records_by_prefix("archive-")
            .unwrap()
            .into_iter()
            .flatten()
            .map(|(_, bytes)| bytes)
            .collect();
        found.sort();
        assert_eq!(found, [b"long".to_vec(), b"unsafe".to_vec()]);
    }

    #[test]
    fn colliding_session_names_keep_their_own_state() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        store.state_put(".s", "stage", "dot").unwrap();
        store.state_put("_s", "stage", "underscore").unwrap();
        assert_eq!(
            store.state_get(".s", "stage").unwrap().as_deref(),
            Some("dot")
        );
        assert_eq!(
            store.state_get("_s", "stage").unwrap().as_deref(),
            Some("underscore")
        );
        store.record_put("ns", ".r", b"1").unwrap();
        store.record_put("ns", "_r", b"2").unwrap();
        assert_eq!(store.records("ns").unwrap().len(), 2);
    }

    #[test]
    fn temp_files_of_killed_writes_are_removed_on_open() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        store.state_put("s", "stage", "x").unwrap();
        let state = dir.path().join("state/s");
        // A pid that cannot be running (above any pid_max), as a SIGKILLed write leaves it.
        let dead = state.join(".tmp-4294967295-AbCdEf");
        fs::write(&dead, b"half").unwrap();
        let blob_dir = dir.path().join("blobs/ab");
        fs::create_dir_all(&blob_dir).unwrap();
        let dead_blob = blob_dir.join(".tmp-4294967295-xyz123");
        fs::write(&dead_blob, b"half").unwrap();
        // A write in progress (this process) and files that are not ours stay.
        let live = state.join(format!(".tmp-{}-LiVe01", std::process::id()));
        fs::write(&live, b"writing").unwrap();
        let foreign = state.join(".tmpAbCdEf");
        fs::write(&foreign, b"not ours").unwrap();
        let store = Store::open(dir.path()).unwrap();
        if Path::new("/proc/self").exists() {
            assert!(!dead.exists(), "orphan of a dead process removed");
            assert!(!dead_blob.exists(), "in every folder of the store");
        }
        assert!(live.exists(), "a live write is left alone");
        assert!(foreign.exists(), "only our own temp names are touched");
        assert_eq!(store.state_get("s", "stage").unwrap().as_deref(), Some("x"));
    }

    #[test]
    fn state_is_replaced_atomically() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        store.state_put("s", "stage", "one").unwrap();
        store.state_put("s", "stage", "two").unwrap();
        assert_eq!(
            store.state_get("s", "stage").unwrap().as_deref(),
            Some("two")
        );
        let leftovers = fs::read_dir(dir.path().join("state/s")).unwrap().count();
        assert_eq!(leftovers, 1, "no temp files left behind");
    }
}
