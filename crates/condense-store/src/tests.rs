//! The store's unit tests: the API as the first layout had it, batches, crashes mid-transaction
//! (a child process aborted with a transaction open), migration of the first layout, and
//! concurrent writers.

use super::*;

#[test]
fn blobs_round_trip_and_dedupe() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let k1 = store.put(b"hello").unwrap();
    let k2 = store.put(b"hello").unwrap();
    assert_eq!(k1, k2);
    assert_eq!(store.get(&k1).unwrap().unwrap(), b"hello");
    assert_eq!(store.get(&k1.to_uppercase()).unwrap().unwrap(), b"hello");
    assert_eq!(store.get(&blob_key(b"other")).unwrap(), None);
    // Another handle (another connection) reads it too.
    let again = Store::open(dir.path()).unwrap();
    assert_eq!(again.get(&k1).unwrap().unwrap(), b"hello");
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
        assert_eq!(
            store.record_get(hostile, hostile).unwrap().as_deref(),
            Some(&b"y"[..])
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

/// The size of the store's write-ahead log: it grows with every page a commit changes.
pub(crate) fn wal_len(root: &Path) -> u64 {
    fs::metadata(root.join("store.db-wal")).map_or(0, |m| m.len())
}

/// The last connection to close leaves a small log for the next one (no checkpoint, which is
/// two fsyncs); a larger one is copied into the database and removed, as SQLite does.
#[test]
fn a_small_log_is_left_at_close_and_a_large_one_checkpointed() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let small = store.put(b"a small blob").unwrap();
    drop(store);
    let left = wal_len(dir.path());
    assert!(left > 0 && left <= db::KEEP_LOG_UP_TO, "{left}");
    let store = Store::open(dir.path()).unwrap();
    assert_eq!(
        store.get(&small).unwrap().as_deref(),
        Some(&b"a small blob"[..]),
        "read from the log left"
    );
    let large = bytes(2 * db::KEEP_LOG_UP_TO as usize, 7);
    let key = store.put(&large).unwrap();
    let other = store.clone();
    drop(store);
    assert!(
        wal_len(dir.path()) > db::KEEP_LOG_UP_TO,
        "a clone keeps it open"
    );
    drop(other);
    assert_eq!(wal_len(dir.path()), 0, "checkpointed and removed");
    let store = Store::open(dir.path()).unwrap();
    assert_eq!(store.get(&key).unwrap().as_deref(), Some(&large[..]));
    assert_eq!(
        store.get(&small).unwrap().as_deref(),
        Some(&b"a small blob"[..])
    );
}

#[test]
fn unchanged_state_and_records_are_not_rewritten() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    store.state_put("s", "st", "same").unwrap();
    store.record_put("ns", "r", b"same").unwrap();
    let before = wal_len(dir.path());
    assert!(before > 0);
    store.state_put("s", "st", "same").unwrap();
    store.record_put("ns", "r", b"same").unwrap();
    store.put(b"blob").unwrap();
    let with_blob = wal_len(dir.path());
    store.put(b"blob").unwrap();
    assert_eq!(wal_len(dir.path()), with_blob, "a blob already there");
    store.state_put("s", "st", "diff").unwrap();
    assert!(
        wal_len(dir.path()) > with_blob,
        "a changed state is written"
    );
    assert_eq!(store.state_get("s", "st").unwrap().as_deref(), Some("diff"));
}

#[test]
fn a_store_is_recognised_by_its_layout() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("anything");
    let store = Store::open(&root).unwrap();
    assert!(looks_like_store(&root), "its database, from the first open");
    store.put(b"blob").unwrap();
    store.state_put("s", "stage", "{}").unwrap();
    store.record_put("ns", "r", b"x").unwrap();
    assert!(looks_like_store(&root), "with its -wal and -shm files");
    fs::write(root.join(".tmp-write"), b"").unwrap();
    assert!(looks_like_store(&root), "hidden entries aside");
    // A folder with anything else in it is not a store, nor is a file named like one.
    fs::write(root.join("session.jsonl"), b"{}").unwrap();
    assert!(!looks_like_store(&root));
    let other = dir.path().join("other");
    fs::create_dir_all(&other).unwrap();
    fs::write(other.join("state"), b"").unwrap();
    assert!(!looks_like_store(&other));
    let dir_named_db = dir.path().join("dir-named-db");
    fs::create_dir_all(dir_named_db.join(DB_FILE)).unwrap();
    assert!(!looks_like_store(&dir_named_db));
    assert!(!looks_like_store(&dir.path().join("missing")));
    // The first layout is a store too.
    let old = dir.path().join("old");
    fs::create_dir_all(old.join("blobs")).unwrap();
    fs::create_dir_all(old.join("records")).unwrap();
    assert!(looks_like_store(&old));
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
    store.record_remove("ns", "a").unwrap();
    store.record_remove("ns", "missing").unwrap();
    assert_eq!(
        store.records("ns").unwrap(),
        [("b".to_string(), b"2".to_vec())]
    );
}

/// Several records read at once are what one read each gives, in the order asked: stored,
/// held by an open batch (not committed yet), compressed, missing, under an unsafe name.
#[test]
fn records_read_together_are_records_read_one_by_one() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let large = "a record that compresses ".repeat(200);
    store.record_put("ns/x", "stored", b"1").unwrap();
    store.record_put("ns/x", "large", large.as_bytes()).unwrap();
    store.record_put("ns/x", "../odd name", b"2").unwrap();
    store.record_put("ns/x", "gone", b"4").unwrap();
    let batch = store.batch();
    store.record_put("ns/x", "held", b"3").unwrap();
    store.record_remove("ns/x", "gone").unwrap();
    let names = [
        "held",
        "missing",
        "large",
        "stored",
        "../odd name",
        "stored",
        "gone",
    ];
    let together = store.records_get("ns/x", &names).unwrap();
    let one_by_one: Vec<_> = names
        .iter()
        .map(|n| store.record_get("ns/x", n).unwrap())
        .collect();
    assert_eq!(together, one_by_one);
    assert_eq!(together[0].as_deref(), Some(&b"3"[..]));
    assert_eq!(together[1], None);
    assert_eq!(together[2].as_deref(), Some(large.as_bytes()));
    assert_eq!(together[6], None, "removed by the open batch");
    batch.commit().unwrap();
    assert_eq!(store.records_get("ns/x", &names).unwrap(), one_by_one);
    assert!(store.records_get("ns/x", &[]).unwrap().is_empty());
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
    store
        .record_put("archivf", "r", b"after the prefix")
        .unwrap();
    let mut found: Vec<Vec<u8>> = store
        .records_by_prefix("archive-")
        .unwrap()
        .into_iter()
        .flatten()
        .map(|(_, bytes)| bytes)
        .collect();
    found.sort();
    assert_eq!(found, [b"long".to_vec(), b"unsafe".to_vec()]);
    let namespaces = store.namespaces("archive-").unwrap();
    assert_eq!(namespaces.len(), 2);
    for namespace in namespaces {
        assert!(namespace.starts_with("archive-"), "{namespace}");
    }
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
fn temp_files_of_killed_writes_are_removed() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    write_atomic(&out.join("o.json"), b"x").unwrap();
    // A pid that cannot be running (above any pid_max), as a SIGKILLed write leaves it.
    let dead = out.join(".tmp-4294967295-AbCdEf");
    fs::write(&dead, b"half").unwrap();
    // A write in progress (this process) and files that are not ours stay.
    let live = out.join(format!(".tmp-{}-LiVe01", std::process::id()));
    fs::write(&live, b"writing").unwrap();
    let foreign = out.join(".tmpAbCdEf");
    fs::write(&foreign, b"not ours").unwrap();
    let removed = remove_orphan_temps(dir.path(), 1).unwrap();
    if Path::new("/proc/self").exists() {
        assert_eq!(removed, 1);
        assert!(!dead.exists(), "orphan of a dead process removed");
    }
    assert!(live.exists(), "a live write is left alone");
    assert!(foreign.exists(), "only our own temp names are touched");
    assert_eq!(fs::read(out.join("o.json")).unwrap(), b"x");
}

#[test]
fn a_batch_is_seen_by_its_store_and_by_others_only_once_committed() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let other = Store::open(dir.path()).unwrap();
    store.record_put("expand-a", "old", b"0").unwrap();
    let batch = store.batch();
    let key = store.put(b"blob").unwrap();
    store.state_put("a", "stage", "1").unwrap();
    store.record_put("expand-a", "new", b"1").unwrap();
    store
        .token_counts_put("a", "o200k_base", vec![(7, 3)])
        .unwrap();
    // Nested: the inner commit leaves it to the outer one.
    store.batch().commit().unwrap();
    // The run itself reads what it wrote...
    assert_eq!(store.get(&key).unwrap().as_deref(), Some(&b"blob"[..]));
    assert_eq!(store.state_names("a").unwrap(), ["stage"]);
    assert_eq!(store.records("expand-a").unwrap().len(), 2);
    assert_eq!(store.records_by_prefix("expand-").unwrap()[0].len(), 2);
    assert_eq!(store.token_counts("a", "o200k_base").unwrap(), [(7, 3)]);
    // ...others do not, until the commit.
    assert_eq!(other.get(&key).unwrap(), None);
    assert_eq!(other.state_get("a", "stage").unwrap(), None);
    assert_eq!(other.records("expand-a").unwrap().len(), 1);
    batch.commit().unwrap();
    assert_eq!(other.get(&key).unwrap().as_deref(), Some(&b"blob"[..]));
    assert_eq!(other.state_get("a", "stage").unwrap().as_deref(), Some("1"));
    assert_eq!(other.records("expand-a").unwrap().len(), 2);
}

#[test]
fn a_dropped_batch_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    store.state_put("s", "stage", "before").unwrap();
    {
        let _batch = store.batch();
        store.state_put("s", "stage", "after").unwrap();
        store.put(b"blob").unwrap();
        // An error on the way: the batch is dropped without a commit.
    }
    assert_eq!(
        store.state_get("s", "stage").unwrap().as_deref(),
        Some("before")
    );
    assert_eq!(store.get(&blob_key(b"blob")).unwrap(), None);
    // And the store writes at once again.
    store.state_put("s", "stage", "later").unwrap();
    let other = Store::open(dir.path()).unwrap();
    assert_eq!(
        other.state_get("s", "stage").unwrap().as_deref(),
        Some("later")
    );
}

#[test]
fn token_counts_are_kept_by_session_and_tokenizer() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    // Hashes use all 64 bits.
    let counts = vec![(u64::MAX, 12), (1 << 63, 1), (5, 0)];
    store
        .token_counts_put("s", "o200k_base", counts.clone())
        .unwrap();
    store
        .token_counts_put("s", "cl100k_base", vec![(5, 9)])
        .unwrap();
    store
        .token_counts_put("other", "o200k_base", vec![(6, 2)])
        .unwrap();
    let other = Store::open(dir.path()).unwrap();
    let mut got = other.token_counts("s", "o200k_base").unwrap();
    got.sort();
    let mut want = counts;
    want.sort();
    assert_eq!(got, want);
    assert_eq!(other.token_counts("s", "cl100k_base").unwrap(), [(5, 9)]);
    assert!(other
        .token_counts("nobody", "o200k_base")
        .unwrap()
        .is_empty());
    // A count stored again (a recount) comes after the old one, which it replaces in the
    // caller's map.
    store
        .token_counts_put("s", "cl100k_base", vec![(5, 10)])
        .unwrap();
    assert_eq!(
        other.token_counts("s", "cl100k_base").unwrap(),
        [(5, 9), (5, 10)]
    );
}

/// Set in the child process of [`a_crash_mid_transaction_leaves_the_old_state`].
const CRASH_CHILD: &str = "CONDENSE_STORE_CRASH_CHILD";

/// The child: opens a transaction on the store named by [`CRASH_CHILD`], writes into it, and
/// aborts the process before the commit (no destructor runs, as with SIGKILL).
#[test]
fn crash_child() {
    let Some(root) = std::env::var_os(CRASH_CHILD) else {
        return;
    };
    let store = Store::open(PathBuf::from(root)).unwrap();
    let _batch = store.batch();
    for i in 0..2000u32 {
        store.put(&i.to_le_bytes().repeat(1024)).unwrap();
    }
    store.state_put("s", "stage", "crashed").unwrap();
    store.record_put("expand-s", "r", b"crashed").unwrap();
    // A raw transaction with every write applied to the log, not yet committed.
    let mut conn = store.lock();
    let pending = conn.open.remove(&thread::current().id()).unwrap().pending;
    let tx = conn
        .db
        .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
        .unwrap();
    for (key, held) in &pending.blobs {
        tx.execute(
            "INSERT INTO blobs (key, bytes) VALUES (?1, ?2)",
            rusqlite::params![key, pending.read(held).unwrap()],
        )
        .unwrap();
    }
    tx.execute("UPDATE state SET value = X'00'", []).unwrap();
    tx.execute("DELETE FROM records", []).unwrap();
    std::process::abort();
}

#[test]
fn a_crash_mid_transaction_leaves_the_old_state() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    store.state_put("s", "stage", "before").unwrap();
    store.record_put("expand-s", "r", b"before").unwrap();
    let status = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "tests::crash_child",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CRASH_CHILD, dir.path())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .unwrap();
    assert!(!status.success(), "the child aborted");
    assert!(wal_len(dir.path()) > 100_000, "the child wrote its log");
    drop(store);
    let store = Store::open(dir.path()).unwrap();
    assert_eq!(
        store.state_get("s", "stage").unwrap().as_deref(),
        Some("before")
    );
    assert_eq!(
        store.record_get("expand-s", "r").unwrap().as_deref(),
        Some(&b"before"[..])
    );
    assert_eq!(
        store
            .get(&blob_key(&0u32.to_le_bytes().repeat(1024)))
            .unwrap(),
        None
    );
    // And it takes writes as before.
    store.state_put("s", "stage", "after").unwrap();
    assert_eq!(
        Store::open(dir.path())
            .unwrap()
            .state_get("s", "stage")
            .unwrap()
            .as_deref(),
        Some("after")
    );
}

/// Writes a store of the first layout under `root`: one blob, one state, two records, and a
/// temp file a killed write left.
fn first_layout(root: &Path) -> String {
    let key = blob_key(b"old blob");
    let blob = root.join("blobs").join(&key[..2]);
    fs::create_dir_all(&blob).unwrap();
    fs::write(blob.join(&key), b"old blob").unwrap();
    fs::write(blob.join(".tmp-4294967295-AbCdEf"), b"half").unwrap();
    let state = root.join("state").join("sess");
    fs::create_dir_all(&state).unwrap();
    fs::write(state.join("snip--x"), b"{\"n\":1}").unwrap();
    let records = root.join("records").join("expand-sess");
    fs::create_dir_all(&records).unwrap();
    fs::write(records.join("b"), b"2").unwrap();
    fs::write(records.join("a"), b"1").unwrap();
    key
}

#[test]
fn a_first_layout_store_is_migrated_on_open() {
    let dir = tempfile::tempdir().unwrap();
    let key = first_layout(dir.path());
    assert!(looks_like_store(dir.path()));
    let store = Store::open(dir.path()).unwrap();
    assert_eq!(store.get(&key).unwrap().as_deref(), Some(&b"old blob"[..]));
    assert_eq!(
        store.state_get("sess", "snip--x").unwrap().as_deref(),
        Some("{\"n\":1}")
    );
    assert_eq!(store.state_names("sess").unwrap(), ["snip--x"]);
    assert_eq!(
        store.records("expand-sess").unwrap(),
        [
            ("a".to_string(), b"1".to_vec()),
            ("b".to_string(), b"2".to_vec())
        ]
    );
    for folder in STORE_FOLDERS {
        assert!(!dir.path().join(folder).exists(), "{folder} removed");
    }
    assert!(looks_like_store(dir.path()));
    // Opened again, it is the same.
    let again = Store::open(dir.path()).unwrap();
    assert_eq!(again.records_by_prefix("expand-").unwrap().len(), 1);
}

#[test]
fn a_migration_cut_short_is_finished_without_undoing_newer_writes() {
    let dir = tempfile::tempdir().unwrap();
    first_layout(dir.path());
    // The database got the entries and a later run changed one; the folders stayed (killed
    // before they were removed).
    let mut conn = db::open(&dir.path().join(DB_FILE)).unwrap();
    legacy::migrate(dir.path(), &mut conn).unwrap();
    drop(conn);
    let store = Store::open(dir.path()).unwrap();
    store.state_put("sess", "snip--x", "newer").unwrap();
    drop(store);
    first_layout(dir.path());
    let store = Store::open(dir.path()).unwrap();
    assert_eq!(
        store.state_get("sess", "snip--x").unwrap().as_deref(),
        Some("newer")
    );
    assert!(!dir.path().join("state").exists());
}

#[test]
fn concurrent_writers_from_threads_each_land() {
    let dir = tempfile::tempdir().unwrap();
    let threads: Vec<_> = (0..8)
        .map(|t| {
            let root = dir.path().to_path_buf();
            std::thread::spawn(move || {
                for round in 0..5 {
                    // Each thread its own handle, as each process has.
                    let store = Store::open(&root).unwrap();
                    let batch = store.batch();
                    for i in 0..40 {
                        store
                            .put(format!("blob {t} {round} {i}").as_bytes())
                            .unwrap();
                    }
                    store
                        .record_put(&format!("expand-{t}"), &format!("r{round}"), b"x")
                        .unwrap();
                    store
                        .state_put(&format!("s{t}"), "stage", &round.to_string())
                        .unwrap();
                    batch.commit().unwrap();
                    // And writes outside a batch, each its own transaction.
                    store.put(format!("single {t} {round}").as_bytes()).unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let store = Store::open(dir.path()).unwrap();
    for t in 0..8 {
        for round in 0..5 {
            for i in 0..40 {
                let key = blob_key(format!("blob {t} {round} {i}").as_bytes());
                assert!(store.get(&key).unwrap().is_some(), "{t} {round} {i}");
            }
            let key = blob_key(format!("single {t} {round}").as_bytes());
            assert!(store.get(&key).unwrap().is_some());
        }
        assert_eq!(store.records(&format!("expand-{t}")).unwrap().len(), 5);
        assert_eq!(
            store
                .state_get(&format!("s{t}"), "stage")
                .unwrap()
                .as_deref(),
            Some("4")
        );
    }
}

#[test]
fn threads_sharing_one_handle_each_have_their_own_batch() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let (opened, go) = (
        std::sync::Arc::new(std::sync::Barrier::new(4)),
        std::sync::Arc::new(std::sync::Barrier::new(4)),
    );
    let threads: Vec<_> = (0..4)
        .map(|t| {
            let (store, opened, go) = (store.clone(), opened.clone(), go.clone());
            std::thread::spawn(move || {
                let batch = store.batch();
                store.record_put("ns", &format!("r{t}"), b"x").unwrap();
                opened.wait();
                // Every thread has written into its batch: none sees another's.
                assert_eq!(store.records("ns").unwrap().len(), 1, "thread {t}");
                go.wait();
                if t == 0 {
                    drop(batch); // this run fails: the others' writes must not go with it
                } else {
                    batch.commit().unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let names: Vec<String> = store
        .records("ns")
        .unwrap()
        .into_iter()
        .map(|(n, _)| n)
        .collect();
    assert_eq!(names, ["r1", "r2", "r3"]);
}

/// `n` pseudo-random bytes (a value copied in the wrong order shows, and compression does not
/// shrink them: they are held and stored at about their own size).
pub(crate) fn bytes(n: usize, seed: u8) -> Vec<u8> {
    let mut x = 0x9e37_79b9_7f4a_7c15_u64 ^ u64::from(seed);
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}
