//! Checkpoints off the committing thread, for a process that commits turn after turn
//! (`condense serve`).
//!
//! SQLite copies its write-ahead log into the database (a checkpoint: the copy and two
//! fsyncs) inside the commit that takes the log past 1,000 pages. In `condense serve` that
//! commit is a request's, on its way to the upstream: at 16 KiB pages a growing session hit one
//! every ~80 requests, and that request took 14-15 ms where the others took 3-4. With this, the
//! store's connection reports the log's length after each commit instead (its WAL hook, which
//! replaces SQLite's automatic checkpoint), and past [`DUE_PAGES`] a thread of its own, on a
//! connection of its own, runs a passive checkpoint: it copies what no reader still needs and
//! never waits for a writer, so requests go on committing meanwhile. A checkpoint is safe at
//! any moment: a process killed during one leaves the log, which the next open reads back.

use rusqlite::Connection;
use std::path::Path;
use std::sync::mpsc::sync_channel;

/// The log length (pages) past which a checkpoint is run: SQLite's own default.
pub const DUE_PAGES: i32 = 1000;

/// Hands `conn`'s checkpoints (the connection to the database at `db_path`) to a thread of
/// their own with a connection of its own; the thread ends when `conn` closes.
pub(crate) fn in_background(conn: &mut Connection, db_path: &Path) -> rusqlite::Result<()> {
    let checkpointer = crate::db::open(db_path)?;
    // One signal waiting is enough: a checkpoint covers every commit before it, and one sent
    // while a checkpoint runs starts the next.
    let (due, wait) = sync_channel::<()>(1);
    std::thread::Builder::new()
        .name("condense-checkpoint".into())
        .spawn(move || {
            while wait.recv().is_ok() {
                // A failed checkpoint leaves the log for the next one (or the next open).
                let _ = checkpointer.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(()));
            }
        })
        .map_err(|e| rusqlite::Error::ToSqlConversionFailure(Box::new(e)))?;
    conn.wal_hook(Some(
        move |_: &mut rusqlite::hooks::Wal, pages: std::ffi::c_int| {
            if pages >= DUE_PAGES {
                let _ = due.try_send(());
            }
            Ok(())
        },
    ))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use crate::Store;
    use std::time::{Duration, Instant};

    /// The log's checkpoint sequence (its header's bytes 12-16): it goes up each time the log
    /// starts over, which it does at the first commit after a checkpoint copied all of it.
    fn log_sequence(dir: &std::path::Path) -> Option<u32> {
        let log = std::fs::read(dir.join("store.db-wal")).ok()?;
        Some(u32::from_be_bytes(log.get(12..16)?.try_into().ok()?))
    }

    #[test]
    fn a_long_log_is_copied_by_the_checkpoint_thread_not_by_a_commit() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        store.checkpoint_in_background().unwrap();
        let value = vec![7u8; 20_000];
        let mut n = 0;
        // Past 1,000 pages of log: every commit adds two (the value's overflow and its leaf).
        while n < 700 {
            store.record_put("ns", &format!("r{n}"), &value).unwrap();
            n += 1;
        }
        let first = log_sequence(dir.path()).unwrap();
        // The thread copies the log; the next commit after that starts it over.
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            store.record_put("ns", &format!("r{n}"), &value).unwrap();
            n += 1;
            if log_sequence(dir.path()) != Some(first) {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "the log was never copied ({n} commits)"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        assert_eq!(
            store.record_get("ns", "r3").unwrap().as_deref(),
            Some(&value[..])
        );
        drop(store);
        let store = Store::open(dir.path()).unwrap();
        assert_eq!(
            store
                .record_get("ns", &format!("r{}", n - 1))
                .unwrap()
                .as_deref(),
            Some(&value[..])
        );
    }
}
