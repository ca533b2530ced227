//! Compressed records through the store: what is written is smaller and reads back exactly
//! (blobs are kept as they are), a streamed record is stored as the same bytes as the same
//! record put whole, and stores of the previous schema are read and upgraded in place.

use super::*;
use crate::tests::wal_len;
use rusqlite::params;
use std::io::Write as _;

/// A compressible value: JSON-ish lines, as archive segments are.
fn segment(n: usize) -> Vec<u8> {
    let mut s = String::new();
    let mut i = 0;
    while s.len() < n {
        s.push_str(&format!("{{\"role\": \"user\", \"text\": \"Step {i}: look at module {i} and fix what fails.\"}},\n"));
        i += 1;
    }
    s.truncate(n);
    s.into_bytes()
}

/// (stored length, codec) of a record, read from the database itself.
fn stored(root: &Path, namespace: &str, name: &str) -> (usize, i64) {
    let db = Connection::open(root.join(DB_FILE)).unwrap();
    db.query_row(
        "SELECT length(bytes), codec FROM records WHERE namespace = ?1 AND name = ?2",
        [namespace, name],
        |r| Ok((r.get::<_, i64>(0)? as usize, r.get(1)?)),
    )
    .unwrap()
}

#[test]
fn large_values_are_stored_compressed_and_read_back_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let big = segment(3 * crate::spill::CHUNK + 11);
    let small = b"{\"read_as\":\"anthropic\"}".to_vec();
    let batch = store.batch();
    let key = store.put(&big).unwrap();
    store.record_put("ns", "big", &big).unwrap();
    store.record_put("ns", "small", &small).unwrap();
    // Read back inside the batch (held encoded), then committed.
    assert_eq!(
        store.record_get("ns", "big").unwrap().as_deref(),
        Some(&big[..])
    );
    batch.commit().unwrap();
    let other = Store::open(dir.path()).unwrap();
    assert_eq!(other.get(&key).unwrap().as_deref(), Some(&big[..]));
    // The blob is its own bytes in the database: an older condense reads it right.
    let db = Connection::open(dir.path().join(DB_FILE)).unwrap();
    let blob: Vec<u8> = db
        .query_row("SELECT bytes FROM blobs WHERE key = ?1", [&key], |r| {
            r.get(0)
        })
        .unwrap();
    assert_eq!(blob, big);
    assert_eq!(
        other.records("ns").unwrap(),
        [("big".into(), big.clone()), ("small".into(), small.clone())]
    );
    let (len, codec) = stored(dir.path(), "ns", "big");
    assert_eq!(codec, codec::LZ4_BLOCKS);
    assert!(len * 5 < big.len(), "{len} of {}", big.len());
    assert_eq!(stored(dir.path(), "ns", "small"), (small.len(), codec::RAW));
}

#[test]
fn a_streamed_record_is_stored_as_the_same_record_put_whole() {
    for value in [
        segment(2 * crate::spill::CHUNK + 500),
        crate::tests::bytes(crate::spill::CHUNK + 500, 0),
    ] {
        streamed_then_put_whole(&value);
    }
}

fn streamed_then_put_whole(value: &[u8]) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let batch = store.batch();
    let mut w = store.record_writer();
    // In pieces that do not fall on chunk boundaries.
    for piece in value.chunks(7_000) {
        w.write_all(piece).unwrap();
    }
    assert_eq!(w.len(), value.len() as u64);
    w.finish("ns", "streamed").unwrap();
    batch.commit().unwrap();
    assert_eq!(
        store.record_get("ns", "streamed").unwrap().as_deref(),
        Some(value)
    );
    // The same bytes put whole: the stored value is identical, so nothing is rewritten.
    let before = wal_len(dir.path());
    store.record_put("ns", "streamed", value).unwrap();
    assert_eq!(wal_len(dir.path()), before);
}

/// The page size of the store's database.
fn page_size(root: &Path) -> i64 {
    Connection::open(root.join(DB_FILE))
        .unwrap()
        .query_row("PRAGMA page_size", [], |r| r.get(0))
        .unwrap()
}

#[test]
fn a_new_store_has_large_pages() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let big = segment(100_000);
    store.record_put("ns", "big", &big).unwrap();
    drop(store);
    assert_eq!(page_size(dir.path()), db::PAGE_SIZE);
    let store = Store::open(dir.path()).unwrap();
    assert_eq!(
        store.record_get("ns", "big").unwrap().as_deref(),
        Some(&big[..])
    );
}

#[test]
fn a_store_of_the_previous_schema_is_read_and_upgraded() {
    let dir = tempfile::tempdir().unwrap();
    let big = segment(50_000);
    {
        // Version 1: no codec column, every value stored as it is.
        let db = Connection::open(dir.path().join(DB_FILE)).unwrap();
        db.execute_batch(
            "PRAGMA journal_mode = WAL;
             CREATE TABLE blobs (key TEXT PRIMARY KEY NOT NULL, bytes BLOB NOT NULL);
             CREATE TABLE state (session TEXT NOT NULL, stage TEXT NOT NULL, value BLOB NOT NULL,
                 PRIMARY KEY (session, stage)) WITHOUT ROWID;
             CREATE TABLE records (namespace TEXT NOT NULL, name TEXT NOT NULL,
                 bytes BLOB NOT NULL, PRIMARY KEY (namespace, name));
             CREATE TABLE tokens (session TEXT NOT NULL, tokenizer TEXT NOT NULL,
                 hash INTEGER NOT NULL, tokens INTEGER NOT NULL,
                 PRIMARY KEY (session, tokenizer, hash)) WITHOUT ROWID;
             PRAGMA user_version = 1;",
        )
        .unwrap();
        db.execute(
            "INSERT INTO records (namespace, name, bytes) VALUES ('ns', 'old', ?1)",
            params![big],
        )
        .unwrap();
        db.execute(
            "INSERT INTO blobs (key, bytes) VALUES (?1, ?2)",
            params![blob_key(&big), big],
        )
        .unwrap();
        db.execute_batch(
            "INSERT INTO tokens VALUES ('s', 'o200k_base', -2, 40), ('s', 'o200k_base', 9, 3);",
        )
        .unwrap();
    }
    let store = Store::open(dir.path()).unwrap();
    assert_eq!(
        page_size(dir.path()),
        4096,
        "an existing database keeps its pages"
    );
    // Token counts, one row per block before version 3, read back packed.
    let mut counts = store.token_counts("s", "o200k_base").unwrap();
    counts.sort();
    assert_eq!(counts, [(9, 3), (u64::MAX - 1, 40)]);
    assert_eq!(
        store.record_get("ns", "old").unwrap().as_deref(),
        Some(&big[..])
    );
    assert_eq!(
        store.get(&blob_key(&big)).unwrap().as_deref(),
        Some(&big[..])
    );
    assert_eq!(stored(dir.path(), "ns", "old"), (big.len(), codec::RAW));
    // Written again (the same bytes), it is stored compressed from now on.
    store.record_put("ns", "old", &big).unwrap();
    assert_eq!(stored(dir.path(), "ns", "old").1, codec::LZ4_BLOCKS);
    assert_eq!(
        store.record_get("ns", "old").unwrap().as_deref(),
        Some(&big[..])
    );
    drop(store);
    // A store of a newer schema than this code knows is refused, in one line.
    Connection::open(dir.path().join(DB_FILE))
        .unwrap()
        .execute_batch("PRAGMA user_version = 99")
        .unwrap();
    let e = Store::open(dir.path()).unwrap_err().to_string();
    assert!(
        e.contains("newer version of condense") && e.contains("99"),
        "{e}"
    );
    assert!(!e.contains('\n'), "{e}");
}

/// Values of one block and of several round-trip; damaged or cut blocks are errors, never a
/// panic or a wrong value of the right length read as right.
#[test]
fn encoded_values_decode_exactly_and_damaged_ones_are_errors() {
    let one = segment(crate::spill::CHUNK / 2);
    let several = segment(2 * crate::spill::CHUNK + 77);
    for value in [one, several] {
        let encoded = codec::encode(&value);
        assert!(encoded.len() < value.len());
        assert_eq!(
            codec::decode(encoded.clone(), codec::LZ4_BLOCKS).unwrap(),
            value
        );
        for cut in [1, 7, encoded.len() / 2, encoded.len() - 1] {
            assert!(codec::decode(encoded[..cut].to_vec(), codec::LZ4_BLOCKS).is_err());
        }
        // A block's stored length one longer than it is: the next header is misread or
        // missing. Its length one shorter than it decompresses to: an error too.
        let mut longer = encoded.clone();
        longer[4] = longer[4].wrapping_add(1);
        assert!(codec::decode(longer, codec::LZ4_BLOCKS).is_err());
        let mut shorter_output = encoded.clone();
        shorter_output[0] = shorter_output[0].wrapping_sub(1);
        assert!(codec::decode(shorter_output, codec::LZ4_BLOCKS).is_err());
        // Any flipped byte of a block's body: an error or some bytes, never a panic.
        for at in (8..encoded.len()).step_by(97) {
            let mut flipped = encoded.clone();
            flipped[at] ^= 0x5a;
            let _ = codec::decode(flipped, codec::LZ4_BLOCKS);
        }
    }
}
