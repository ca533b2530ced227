//! Tests of a batch's large values: held in its spill file rather than in memory, read back
//! before the commit, committed a chunk at a time, and streamed in by [`RecordWriter`].

use super::*;
use crate::spill::{Held, SPILL_FROM};
use crate::tests::{bytes, wal_len};
use std::io::Write as _;

/// Whether this thread's open batch holds the record in its spill file, in how many extents.
fn spilled_extents(store: &Store, namespace: &str, name: &str) -> Option<usize> {
    let conn = store.lock();
    let held = conn.held()?.records.get(&(namespace.into(), name.into()))?;
    match held {
        Held::Spilled { extents, .. } => Some(extents.len()),
        Held::Mem { .. } => None,
    }
}

fn store_entries(root: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(root)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn large_values_wait_in_the_spill_file_and_commit_whole() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let other = Store::open(dir.path()).unwrap();
    let big = bytes(3 * crate::spill::CHUNK + 17, 1);
    let small = bytes(SPILL_FROM - 1, 2);
    let batch = store.batch();
    let key = store.put(&big).unwrap();
    store.record_put("ns", "big", &big).unwrap();
    store.record_put("ns", "small", &small).unwrap();
    assert_eq!(spilled_extents(&store, "ns", "big"), Some(1));
    assert_eq!(
        spilled_extents(&store, "ns", "small"),
        None,
        "small: memory"
    );
    // The batch reads its own values back; nobody else sees them yet.
    assert_eq!(store.get(&key).unwrap().as_deref(), Some(&big[..]));
    assert_eq!(
        store.record_get("ns", "big").unwrap().as_deref(),
        Some(&big[..])
    );
    let listed = store.records("ns").unwrap();
    assert_eq!(
        listed,
        [("big".into(), big.clone()), ("small".into(), small.clone())]
    );
    assert_eq!(other.get(&key).unwrap(), None);
    assert_eq!(other.record_get("ns", "big").unwrap(), None);
    batch.commit().unwrap();
    assert_eq!(other.get(&key).unwrap().as_deref(), Some(&big[..]));
    assert_eq!(
        other.record_get("ns", "big").unwrap().as_deref(),
        Some(&big[..])
    );
    assert_eq!(
        other.record_get("ns", "small").unwrap().as_deref(),
        Some(&small[..])
    );
    // The spill file had no name: the store's folder holds the database only.
    assert!(store_entries(dir.path())
        .iter()
        .all(|n| n.starts_with(DB_FILE)));
}

#[test]
fn a_spilled_record_replaces_a_different_one_and_leaves_an_equal_one_alone() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let first = bytes(100_000, 3);
    let batch = store.batch();
    store.record_put("ns", "r", &first).unwrap();
    store.put(&first).unwrap();
    batch.commit().unwrap();
    // The same bytes again (an identical rerun): no page written.
    let before = wal_len(dir.path());
    let batch = store.batch();
    store.record_put("ns", "r", &first).unwrap();
    batch.commit().unwrap();
    assert_eq!(
        wal_len(dir.path()),
        before,
        "an equal record is not rewritten"
    );
    // Other bytes of the same length, then of another length: replaced.
    for second in [bytes(100_000, 4), bytes(70_000, 5)] {
        let batch = store.batch();
        store.record_put("ns", "r", &second).unwrap();
        batch.commit().unwrap();
        let read = Store::open(dir.path())
            .unwrap()
            .record_get("ns", "r")
            .unwrap();
        assert_eq!(read.as_deref(), Some(&second[..]));
    }
}

#[test]
fn a_streamed_record_is_keyed_by_its_bytes_in_or_out_of_a_batch() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let value = bytes(5 * crate::spill::CHUNK / 2, 6);
    let interleaved = bytes(50_000, 7);
    let batch = store.batch();
    let mut w = store.record_writer();
    for (i, piece) in value.chunks(1000).enumerate() {
        w.write_all(piece).unwrap();
        if i == 300 {
            // Another write of the thread between two chunks of the record.
            store.record_put("ns", "between", &interleaved).unwrap();
        }
    }
    assert_eq!(w.len(), value.len() as u64);
    let key = w.key();
    assert_eq!(key, blob_key(&value));
    w.finish("ns", &key).unwrap();
    assert_eq!(spilled_extents(&store, "ns", &key), Some(3));
    assert_eq!(
        store.record_get("ns", &key).unwrap().as_deref(),
        Some(&value[..])
    );
    batch.commit().unwrap();
    let again = Store::open(dir.path()).unwrap();
    assert_eq!(
        again.record_get("ns", &key).unwrap().as_deref(),
        Some(&value[..])
    );
    assert_eq!(
        again.record_get("ns", "between").unwrap().as_deref(),
        Some(&interleaved[..])
    );
    // Outside a batch: gathered in memory and committed by `finish`.
    let mut w = store.record_writer();
    w.write_all(b"small record").unwrap();
    assert_eq!(w.key(), blob_key(b"small record"));
    w.finish("ns", "small").unwrap();
    assert_eq!(
        again.record_get("ns", "small").unwrap().as_deref(),
        Some(&b"small record"[..])
    );
}

#[test]
fn a_streamed_record_outliving_its_batch_is_refused_not_misplaced() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let batch = store.batch();
    let mut w = store.record_writer();
    w.write_all(&bytes(2 * crate::spill::CHUNK, 8)).unwrap();
    drop(batch);
    // A new batch of the same thread must not take extents of the dropped one's file.
    let batch = store.batch();
    assert!(w.finish("ns", "r").is_err());
    batch.commit().unwrap();
    assert_eq!(store.record_get("ns", "r").unwrap(), None);
}

#[test]
fn a_dropped_batch_with_spilled_values_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let big = bytes(200_000, 9);
    {
        let _batch = store.batch();
        store.put(&big).unwrap();
        let mut w = store.record_writer();
        w.write_all(&big).unwrap();
        w.finish("ns", "r").unwrap();
    }
    assert_eq!(store.get(&blob_key(&big)).unwrap(), None);
    assert_eq!(store.record_get("ns", "r").unwrap(), None);
    assert!(store_entries(dir.path())
        .iter()
        .all(|n| n.starts_with(DB_FILE)));
}

/// Whether this thread's open batch holds blob `key` in its spill file.
fn blob_spilled(store: &Store, key: &str) -> Option<bool> {
    let conn = store.lock();
    match conn.held()?.blobs.get(key)? {
        Held::Spilled { .. } => Some(true),
        Held::Mem { .. } => Some(false),
    }
}

#[test]
fn small_values_spill_once_the_batch_holds_enough_in_memory() {
    use crate::spill::{MEMORY_HELD_MAX, SPILL_SMALL_FROM};
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let other = Store::open(dir.path()).unwrap();
    let batch = store.batch();
    // 4 KB originals, as a run's removed tool results are, past the memory bound; and tiny
    // ones, which always stay in memory.
    let values: Vec<Vec<u8>> = (0..(2 * MEMORY_HELD_MAX / 4096))
        .map(|i| {
            bytes(4096, i as u8)
                .into_iter()
                .chain(i.to_le_bytes())
                .collect()
        })
        .collect();
    let tiny: Vec<Vec<u8>> = (0..50u32)
        .map(|i| {
            bytes(SPILL_SMALL_FROM - 8, 7)
                .into_iter()
                .chain(i.to_le_bytes())
                .collect()
        })
        .collect();
    let keys: Vec<String> = values.iter().map(|v| store.put(v).unwrap()).collect();
    let tiny_keys: Vec<String> = tiny.iter().map(|v| store.put(v).unwrap()).collect();
    let spilled: Vec<bool> = keys
        .iter()
        .map(|k| blob_spilled(&store, k).unwrap())
        .collect();
    let in_memory = spilled.iter().filter(|s| !**s).count();
    assert!(!spilled[0], "the first values stay in memory");
    assert!(
        in_memory * 4100 <= MEMORY_HELD_MAX && spilled.iter().skip(in_memory).all(|s| *s),
        "{in_memory} of {} in memory",
        keys.len()
    );
    assert!(tiny_keys
        .iter()
        .all(|k| blob_spilled(&store, k) == Some(false)));
    // Read back before the commit, by the batch only; then by everyone.
    for (k, v) in keys.iter().zip(&values).step_by(37) {
        assert_eq!(store.get(k).unwrap().as_deref(), Some(&v[..]));
        assert_eq!(other.get(k).unwrap(), None);
    }
    batch.commit().unwrap();
    for (k, v) in keys.iter().zip(&values).chain(tiny_keys.iter().zip(&tiny)) {
        assert_eq!(other.get(k).unwrap().as_deref(), Some(&v[..]), "{k}");
    }
}
