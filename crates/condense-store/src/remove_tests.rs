//! A record removed inside a batch goes with the batch's commit: gone for the batch's own
//! reads at once, there for everyone else until the commit, and back when the batch is
//! dropped or the record is put again.

use super::*;

#[test]
fn a_removal_inside_a_batch_is_committed_with_it() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    store.record_put("ns", "a", b"one").unwrap();
    store.record_put("ns", "b", b"two").unwrap();
    let other = Store::open(dir.path()).unwrap();

    let batch = store.batch();
    store.record_remove("ns", "a").unwrap();
    assert_eq!(store.record_get("ns", "a").unwrap(), None);
    let names: Vec<String> = store
        .records("ns")
        .unwrap()
        .into_iter()
        .map(|(n, _)| n)
        .collect();
    assert_eq!(names, ["b"]);
    assert_eq!(
        other.record_get("ns", "a").unwrap().as_deref(),
        Some(&b"one"[..])
    );
    batch.commit().unwrap();
    assert_eq!(other.record_get("ns", "a").unwrap(), None);

    // Dropped without its commit: nothing removed. Put again after its removal: kept.
    let batch = store.batch();
    store.record_remove("ns", "b").unwrap();
    drop(batch);
    assert_eq!(
        store.record_get("ns", "b").unwrap().as_deref(),
        Some(&b"two"[..])
    );
    let batch = store.batch();
    store.record_remove("ns", "b").unwrap();
    store.record_put("ns", "b", b"three").unwrap();
    batch.commit().unwrap();
    assert_eq!(
        other.record_get("ns", "b").unwrap().as_deref(),
        Some(&b"three"[..])
    );
}
