//! The writer's texts kept between turns: what a turn writes (only what it serialized,
//! compacted when chunks hold mostly dead texts), records read back whole or not at all, and a
//! real write through a store taking its texts from there.

use super::*;

fn text(s: &str) -> Vec<String> {
    vec![s.to_string()]
}

/// The texts (by key) an index names, read from the chunks `written` holds by name.
fn named_texts(index: &Index, written: &HashMap<u128, Vec<u8>>) -> Vec<(u128, Vec<String>)> {
    let mut out = Vec::new();
    for (key, at) in &index.keys {
        let (name, len) = index.chunks[*at];
        let bytes = &written[&name];
        assert_eq!(bytes.len(), len);
        let entries = decode_chunk(bytes).unwrap();
        let (_, strings) = entries.into_iter().find(|(k, _)| k == key).unwrap();
        out.push((*key, strings));
    }
    out.sort();
    out
}

/// One turn: the texts `live` were used, those of `fresh` serialized; applies the plan to
/// `written` (chunks by name) and gives the new index.
fn turn(
    live: &[(u128, Vec<String>)],
    fresh: &[u128],
    context: u128,
    old: Option<&Index>,
    written: &mut HashMap<u128, Vec<u8>>,
) -> Option<Index> {
    let live_refs: Vec<(u128, &[String])> = live.iter().map(|(k, t)| (*k, t.as_slice())).collect();
    let fresh: HashSet<u128> = fresh.iter().copied().collect();
    let plan = plan(live_refs, &fresh, context, old)?;
    if let Some((name, bytes)) = plan.chunk {
        assert_eq!(name, content_hash(&bytes));
        written.insert(name, bytes);
    }
    for name in &plan.removed {
        assert!(
            written.remove(name).is_some(),
            "removed a chunk never written"
        );
    }
    let index = Index::decode(&plan.index.encode()).unwrap();
    assert_eq!(index, plan.index);
    let mut expected = live.to_vec();
    expected.sort();
    assert_eq!(named_texts(&index, written), expected);
    // Every chunk left is named by the index: none is kept for nothing.
    let named: HashSet<u128> = index.chunks.iter().map(|(n, _)| *n).collect();
    assert_eq!(written.keys().copied().collect::<HashSet<_>>(), named);
    Some(index)
}

#[test]
fn a_turn_writes_only_the_texts_it_serialized_and_nothing_when_it_serialized_none() {
    let mut written = HashMap::new();
    let first: Vec<(u128, Vec<String>)> = (1..=5).map(|k| (k, text(&"x".repeat(40_000)))).collect();
    let index = turn(&first, &[1, 2, 3, 4, 5], 7, None, &mut written).unwrap();
    assert_eq!(index.chunks.len(), 1);
    // The same texts again, taken from the memo: nothing to write.
    assert!(turn(&first, &[], 7, Some(&index), &mut written).is_none());
    // One text new: a chunk of it alone, the first chunk kept.
    let mut second = first.clone();
    second.push((6, text("new")));
    let index = turn(&second, &[6], 7, Some(&index), &mut written).unwrap();
    assert_eq!(index.chunks.len(), 2);
    // Its key, one string, that string's length and its 3 bytes.
    assert_eq!(index.chunks[1].1, 16 + 1 + 1 + 3);
    // A text no longer used leaves the index; its chunk stays while it holds live texts.
    let third: Vec<_> = second.iter().filter(|(k, _)| *k != 6).cloned().collect();
    let index = turn(&third, &[], 7, Some(&index), &mut written).unwrap();
    assert_eq!(
        index.chunks.len(),
        1,
        "the chunk of text 6 alone is removed"
    );
    assert_eq!(index.keys.len(), 5);
}

#[test]
fn chunks_that_hold_mostly_dead_texts_or_are_many_are_written_again_as_one() {
    let mut written = HashMap::new();
    let big = |k: u128| (k, text(&format!("{k}").repeat(50_000)));
    let mut live: Vec<_> = (1..=4).map(big).collect();
    let mut index = turn(&live, &[1, 2, 3, 4], 1, None, &mut written).unwrap();
    // Three of the four big texts die: the chunk read would be four times the live texts.
    live.truncate(1);
    live.push((9, text("small")));
    index = turn(&live, &[9], 1, Some(&index), &mut written).unwrap();
    assert_eq!(index.chunks.len(), 1, "compacted into one chunk");
    // Many turns of one small new text each: never more than MAX_CHUNKS chunks.
    for k in 100..120 {
        live.push((k, text("t")));
        index = turn(&live, &[k], 1, Some(&index), &mut written).unwrap();
        assert!(
            index.chunks.len() <= MAX_CHUNKS,
            "{} chunks",
            index.chunks.len()
        );
    }
}

#[test]
fn another_context_writes_every_text_again() {
    let mut written = HashMap::new();
    let live = vec![(1, text("a")), (2, text("b"))];
    let index = turn(&live, &[1, 2], 1, None, &mut written).unwrap();
    // The memo dropped its texts for the new style: all serialized again.
    let index = turn(&live, &[1, 2], 2, Some(&index), &mut written).unwrap();
    assert_eq!(index.context, 2);
    assert_eq!(index.chunks.len(), 1);
    // A text taken from the memo but that the index does not place is written again.
    let more = vec![(1, text("a")), (2, text("b")), (3, text("c"))];
    let index = turn(&more, &[], 2, Some(&index), &mut written).unwrap();
    assert_eq!(index.keys.len(), 3);
}

#[test]
fn damaged_records_read_as_none() {
    let index = Index {
        context: 3,
        chunks: vec![(5, 10)],
        keys: vec![(8, 0)],
    };
    let bytes = index.encode();
    assert_eq!(Index::decode(&bytes), Some(index));
    for cut in 0..bytes.len() {
        assert_eq!(Index::decode(&bytes[..cut]), None, "cut at {cut}");
    }
    let mut longer = bytes.clone();
    longer.push(0);
    assert_eq!(Index::decode(&longer), None);
    let mut other_version = bytes;
    other_version[0] = VERSION + 1;
    assert_eq!(Index::decode(&other_version), None);

    let strings = [String::from("é\n"), String::new()];
    let chunk = encode_chunk(&[&(4, &strings[..])]);
    assert_eq!(decode_chunk(&chunk), Some(vec![(4, strings.to_vec())]));
    for cut in 1..chunk.len() {
        assert_eq!(decode_chunk(&chunk[..cut]), None, "cut at {cut}");
    }
}

/// A request body whose last message a stage changed: written, its texts kept in a store, and
/// written again by a new process's memo loaded from that store.
#[test]
fn a_write_takes_the_kept_texts_and_writes_the_same_bytes_and_a_damaged_chunk_is_not_used() {
    use condense_formats::{read, ReadOptions};
    let body = br#"{
  "model": "m",
  "messages": [
    {"role": "user", "content": "read it"},
    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "line 1\nline \"2\"\n"}]}
  ]
}"#;
    let doc = || {
        let mut doc = read(body, "body.json", &ReadOptions::default()).unwrap();
        doc.conversations_mut()[0].messages[1].content =
            condense_model::Content::string("[cleared: 2 lines]");
        doc
    };
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let session = Some("s");

    let (mut memo, loaded) = load(&store, session);
    let first = doc().write_remembering(&mut memo).unwrap();
    assert_eq!(
        memo.serialized().len(),
        1,
        "the changed message was serialized"
    );
    save(&store, session, &memo, &loaded).unwrap();
    // Texts are used only in the context (format and style) they were written in.
    let context = memo.context().unwrap();
    let texts = || {
        memo.texts()
            .map(|(k, t)| (k, t.to_vec()))
            .collect::<Vec<_>>()
    };
    for (other, serialized) in [(context, 0), (context ^ 1, 1)] {
        let mut again = WriteMemo::with_texts(other, texts());
        assert_eq!(doc().write_remembering(&mut again).unwrap(), first);
        assert_eq!(again.serialized().len(), serialized, "context {other:x}");
    }

    // A new process: the text comes from the store, the bytes are the same.
    let (mut memo, loaded) = load(&store, session);
    assert_eq!(doc().write_remembering(&mut memo).unwrap(), first);
    assert!(
        memo.serialized().is_empty(),
        "serialized again: not taken from the store"
    );
    save(&store, session, &memo, &loaded).unwrap();

    // A chunk whose bytes are not those it is named by is not used: serialized again.
    let namespace = chunks_namespace("s");
    for (name, mut bytes) in store.records(&namespace).unwrap() {
        let last = bytes.len() - 2;
        bytes[last] ^= 1;
        store.record_put(&namespace, &name, &bytes).unwrap();
    }
    let (mut memo, _) = load(&store, session);
    assert_eq!(doc().write_remembering(&mut memo).unwrap(), first);
    assert_eq!(memo.serialized().len(), 1);

    // Another session has no texts; a document of several conversations keeps none.
    let (mut memo, _) = load(&store, Some("other"));
    doc().write_remembering(&mut memo).unwrap();
    assert_eq!(memo.serialized().len(), 1);
    let (memo, _) = load(&store, None);
    assert_eq!(memo.len(), 0);
}
