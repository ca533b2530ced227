//! The first store layout (one file per entry), kept readable by migrating it: `blobs/xx/<32
//! hex>`, `state/<session>/<stage>`, `records/<namespace>/<name>`, each name already sanitized
//! on disk. [`migrate`] copies every entry into the database in one transaction, then removes
//! the folders. A run killed in between leaves both; the next open imports again, keeping what
//! the database already holds (it is never older than the files), then removes them.
//!
//! Also here: the temp files of the old layout's atomic writes ([`remove_orphan_temps`]), which
//! `--out` still uses through [`crate::write_atomic`].

use crate::{io_err, StoreError};
use rusqlite::{params, Connection, TransactionBehavior};
use std::fs;
use std::io;
use std::path::Path;

/// The folders of the first layout.
pub const LEGACY_FOLDERS: [&str; 3] = ["blobs", "state", "records"];

/// Whether `root` holds any folder of the first layout.
pub fn present(root: &Path) -> bool {
    LEGACY_FOLDERS.iter().any(|f| root.join(f).is_dir())
}

/// Imports the first layout's files under `root` into `conn`, then removes them. Returns how
/// many entries were imported (those the database held already count too).
pub fn migrate(root: &Path, conn: &mut Connection) -> Result<usize, StoreError> {
    let db = |source| StoreError::Db {
        path: root.to_path_buf(),
        source,
    };
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(db)?;
    let mut imported = 0;
    {
        let mut blob = tx
            .prepare("INSERT OR IGNORE INTO blobs (key, bytes) VALUES (?1, ?2)")
            .map_err(db)?;
        for (_, key, path) in entries(&root.join("blobs"))? {
            let key = key.to_ascii_lowercase();
            let valid = key.len() == 32 && key.bytes().all(|b| b.is_ascii_hexdigit());
            if valid {
                let bytes = fs::read(&path).map_err(io_err(&path))?;
                blob.execute(params![key, bytes]).map_err(db)?;
                imported += 1;
            }
        }
        let mut state = tx
            .prepare("INSERT OR IGNORE INTO state (session, stage, value) VALUES (?1, ?2, ?3)")
            .map_err(db)?;
        for (session, stage, path) in entries(&root.join("state"))? {
            let bytes = fs::read(&path).map_err(io_err(&path))?;
            state.execute(params![session, stage, bytes]).map_err(db)?;
            imported += 1;
        }
        let mut record = tx
            .prepare("INSERT OR IGNORE INTO records (namespace, name, bytes) VALUES (?1, ?2, ?3)")
            .map_err(db)?;
        for (namespace, name, path) in entries(&root.join("records"))? {
            let bytes = fs::read(&path).map_err(io_err(&path))?;
            record
                .execute(params![namespace, name, bytes])
                .map_err(db)?;
            imported += 1;
        }
    }
    tx.commit().map_err(db)?;
    // Only now that the database holds everything. Best effort: another process migrating the
    // same store at the same moment may remove them first, and what is left is imported again
    // (and ignored) next time.
    for folder in LEGACY_FOLDERS {
        let _ = fs::remove_dir_all(root.join(folder));
    }
    Ok(imported)
}

/// The files two levels below `dir` (`dir/<a>/<b>`), as (a, b, path); hidden names (temp files
/// of writes in progress) left out.
fn entries(dir: &Path) -> Result<Vec<(String, String, std::path::PathBuf)>, StoreError> {
    let mut out = Vec::new();
    for a in list_dir(dir)? {
        let sub = dir.join(&a);
        if !sub.is_dir() {
            continue;
        }
        for b in list_dir(&sub)? {
            let path = sub.join(&b);
            if path.is_file() {
                out.push((a.clone(), b, path));
            }
        }
    }
    Ok(out)
}

/// The entry names of `dir` (none when it does not exist), hidden ones left out.
pub fn list_dir(dir: &Path) -> Result<Vec<String>, StoreError> {
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

/// The prefix of every temp file [`crate::write_atomic`] makes; the writer's process id follows.
pub const TEMP_PREFIX: &str = ".tmp-";

/// A temp file older than this is an orphan even if a process with its pid is running (the pid
/// was reused): no write takes that long.
const ORPHAN_AGE: std::time::Duration = std::time::Duration::from_secs(3600);

/// Removes, in `dir` and its folders down to `depth` levels, the temp files of
/// [`crate::write_atomic`] that no running write owns: named `.tmp-<pid>-<random>` with a pid
/// that is not a running process (checked through `/proc` where there is one) or older than an
/// hour. A write in progress in another process is left alone. Returns how many were removed.
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
