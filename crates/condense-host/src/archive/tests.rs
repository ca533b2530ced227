//! The archive round trip on hand-made conversations: identical messages, lost records,
//! placeholders without entries, original texts, how a conversation was read.

use super::*;
use condense_model::{Block, Content, Role, TextBlock, ToolResult};

fn text(id: &str, role: Role, t: &str) -> Message {
    Message::new(
        id,
        role,
        vec![Block::Text(TextBlock {
            text: t.to_string(),
            extra: Default::default(),
        })],
    )
}

fn result(id: &str, tool: &str, t: &str) -> Message {
    Message::new(
        id,
        Role::User,
        vec![Block::ToolResult(ToolResult::new(
            tool,
            Content::blocks(vec![Block::Text(TextBlock {
                text: t.to_string(),
                extra: Default::default(),
            })]),
        ))],
    )
}

fn conv(messages: Vec<Message>) -> Conversation {
    Conversation {
        messages,
        ..Default::default()
    }
}

fn store() -> (tempfile::TempDir, Store) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path().join("store")).unwrap();
    (dir, store)
}

const CLEARED: &str = "[Old tool result content cleared]";

/// A duplicated line (same id, same content) whose two copies are cleared to the same
/// placeholder: both come back. Before issue 12 the second entry was taken for a rerun's copy of
/// the first and dropped, and expand left a placeholder behind.
#[test]
fn identical_messages_each_come_back() {
    let (_dir, store) = store();
    let before = conv(vec![
        text("uuid-0", Role::User, "go"),
        result("uuid-1", "t1", "the same long output"),
        result("uuid-1", "t1", "the same long output"),
        text("uuid-3", Role::Assistant, "done"),
    ]);
    let mut after = before.clone();
    after.messages[1] = result("uuid-1", "t1", CLEARED);
    after.messages[2] = result("uuid-1", "t1", CLEARED);
    archive_stage(&store, "s", &before, &after, ArchiveOptions::default()).unwrap();
    // A rerun of the same stage writes the same segment: still counted once.
    archive_stage(&store, "s", &before, &after, ArchiveOptions::default()).unwrap();
    let mut back = after.clone();
    let expansion = expand(&store, "s", &mut back).unwrap();
    assert_eq!(back, before);
    assert_eq!(expansion.applied, 2);
    assert!(expansion.unresolved.is_empty());
}

/// A duplicated JSONL line repeats its id: removing one copy must archive that copy.
#[test]
fn a_removed_copy_of_a_duplicated_line_comes_back() {
    let (_dir, store) = store();
    let line = text("uuid-1", Role::User, "same line twice");
    let before = conv(vec![
        line.clone(),
        line.clone(),
        text("uuid-2", Role::Assistant, "ok"),
    ]);
    let after = conv(vec![line.clone(), text("uuid-2", Role::Assistant, "ok")]);
    archive_stage(&store, "s", &before, &after, ArchiveOptions::default()).unwrap();
    let mut back = after.clone();
    expand(&store, "s", &mut back).unwrap();
    assert_eq!(back, before);
}

#[test]
fn a_lost_record_is_reported_not_ignored() {
    let (_dir, store) = store();
    let before = conv(vec![
        text("#0", Role::User, "go"),
        result("#1", "t1", "output one"),
        result("#2", "t2", "output two"),
    ]);
    let mut after = before.clone();
    after.messages[2] = result("#2", "t2", "[snipped]");
    archive_stage(&store, "s", &before, &after, ArchiveOptions::default()).unwrap();
    // A second stage's segment survives, the first's is deleted.
    let mut after2 = after.clone();
    after2.messages[1] = result("#1", "t1", "[short]");
    archive_stage(&store, "s", &after, &after2, ArchiveOptions::default()).unwrap();
    let names: Vec<String> = store
        .records("expand-s")
        .unwrap()
        .into_iter()
        .map(|(name, _)| name)
        .collect();
    assert_eq!(names.len(), 2);
    let first = expand::load_segments(&store, "expand-s").unwrap();
    let which = first
        .iter()
        .position(|s| s.messages.iter().any(|m| m == &before.messages[2]))
        .unwrap();
    store.record_remove("expand-s", &names[which]).unwrap();

    let mut back = after2.clone();
    let expansion = expand(&store, "s", &mut back).unwrap();
    assert_eq!(
        back.messages[1], before.messages[1],
        "what is there is restored"
    );
    assert_eq!(
        expansion.unresolved,
        [Unresolved {
            position: 2,
            id: "#2".into(),
            kind: UnresolvedKind::MissingRecord,
        }]
    );
}

#[test]
fn placeholders_without_entries_are_reported_and_appended_messages_are_not() {
    let (_dir, store) = store();
    let mut compressed = conv(vec![
        text("#0", Role::User, "go"),
        result("#1", "t1", CLEARED),
        text(
            "#2",
            Role::Assistant,
            "[condense: summary of 3 earlier messages]",
        ),
    ]);
    // An empty store: nothing applies, both placeholders are left.
    let expansion = expand(&store, "s", &mut compressed.clone()).unwrap();
    assert_eq!(expansion.applied, 0);
    let found: Vec<(usize, UnresolvedKind)> = expansion
        .unresolved
        .into_iter()
        .map(|u| (u.position, u.kind))
        .collect();
    assert_eq!(
        found,
        [
            (1, UnresolvedKind::Placeholder(PLACEHOLDERS[0])),
            (2, UnresolvedKind::Placeholder(PLACEHOLDERS[1])),
        ]
    );

    // Archived, then extended by the agent: clean.
    let original = conv(vec![
        text("#0", Role::User, "go"),
        result("#1", "t1", "the output"),
    ]);
    compressed.messages.truncate(2);
    archive_stage(
        &store,
        "s",
        &original,
        &compressed,
        ArchiveOptions::default(),
    )
    .unwrap();
    compressed.messages.push(text(
        "#2",
        Role::Assistant,
        "a new turn, mentions [Old tool result",
    ));
    let expansion = expand(&store, "s", &mut compressed).unwrap();
    assert!(
        expansion.unresolved.is_empty(),
        "{:?}",
        expansion.unresolved
    );
    assert_eq!(compressed.messages[1], original.messages[1]);
}

#[test]
fn original_texts_come_back_with_the_messages_they_belong_to() {
    let (_dir, store) = store();
    let before = conv(vec![
        text("#0", Role::User, "go"),
        result("#1", "t1", "the output"),
        text("#2", Role::Assistant, "removed"),
        text("#3", Role::User, "kept"),
    ]);
    let mut after = before.clone();
    after.messages[1] = result("#1", "t1", CLEARED);
    after.messages.remove(2);
    let texts = |m: &Message, _: usize| {
        Some(Original {
            text: format!("{{ \"id\" : \"{}\" }}", m.id),
        })
    };
    let opts = ArchiveOptions {
        format: Some("anthropic"),
        texts: Some(&texts),
    };
    archive_stage(&store, "s", &before, &after, opts).unwrap();
    let mut back = after.clone();
    let mut expansion = expand(&store, "s", &mut back).unwrap();
    assert_eq!(back, before);
    expansion.texts.sort_by(|a, b| a.0.id.cmp(&b.0.id));
    let got: Vec<(&str, &str)> = expansion
        .texts
        .iter()
        .map(|(m, t)| (m.id.as_str(), t.as_str()))
        .collect();
    assert_eq!(
        got,
        [("#1", "{ \"id\" : \"#1\" }"), ("#2", "{ \"id\" : \"#2\" }")]
    );
}

#[test]
fn the_store_tells_how_a_conversation_was_read() {
    let (_dir, store) = store();
    let before = conv(vec![
        text("#0", Role::User, "go"),
        result("#1", "t1", "out"),
    ]);
    let mut after = before.clone();
    after.messages[1] = result("#1", "t1", CLEARED);
    let opts = ArchiveOptions {
        format: Some("anthropic"),
        texts: None,
    };
    archive_stage(&store, "sess", &before, &after, opts).unwrap();
    let read_as = ReadAs {
        format: "anthropic".into(),
        select: Some("/body".into()),
    };
    record_read_as(&store, "sess", &read_as).unwrap();

    let index = ReadIndex::load(&store).unwrap();
    assert_eq!(index.recorded("sess"), Some(&read_as));
    assert_eq!(index.recorded("other"), None);
    assert_eq!(index.hits("anthropic", &after), 1);
    assert_eq!(index.hits("openai", &after), 0);
    let formats: Vec<(String, Option<String>)> = index
        .candidates()
        .into_iter()
        .map(|r| (r.format, r.select))
        .collect();
    assert_eq!(
        formats,
        [
            ("anthropic".to_string(), None),
            ("anthropic".to_string(), Some("/body".to_string()))
        ]
    );
}

#[test]
fn a_value_that_does_not_serialize_is_an_error_not_empty_bytes() {
    // JSON object keys must be strings: this map cannot be serialized. Hashing or storing
    // empty bytes instead would give every such value the same archive key.
    let map: std::collections::BTreeMap<(u8, u8), u8> = [((1, 2), 3)].into_iter().collect();
    let err = encode("an archive segment", &map).unwrap_err();
    assert!(matches!(
        err,
        StoreError::Encode {
            what: "an archive segment",
            ..
        }
    ));
    let line = err.to_string();
    assert!(
        line.starts_with("store: cannot encode an archive segment: ") && !line.contains('\n'),
        "{line}"
    );
    // What does serialize gives its bytes, the same as serde_json's.
    assert_eq!(encode("x", &[1, 2]).unwrap(), b"[1,2]");
}

/// Stores written before keep their keys: a message's key is the xxh3-128 of its id (none for
/// a synthetic `#n` id), a zero byte and the JSON of the rest, however it is computed.
#[test]
fn archive_keys_are_the_hash_of_the_bytes_they_always_were() {
    let old_key = |m: &Message| {
        let mut bytes = Vec::new();
        if !m.id.starts_with('#') {
            bytes.extend_from_slice(m.id.as_bytes());
        }
        bytes.push(0);
        let body = (&m.role, &m.timestamp, &m.content, &m.extra, &m.envelope);
        bytes.extend_from_slice(&serde_json::to_vec(&body).unwrap());
        format!("{:032x}", twox_hash::XxHash3_128::oneshot(&bytes))
    };
    // A Claude Code line's raw fields: JSON in JSON, past the hasher's gather buffer, and (raw
    // text is taken as it is) every byte a string escapes, as itself.
    let mut line = text("uuid-8", Role::Assistant, "done");
    line.timestamp = Some("2026-12-08T01:00:00.000Z".into());
    line.extra = condense_model::RawJson::from_string_unchecked(
        r#"{"id":"msg_1","usage":{"input_tokens":3},"note":"tab\there \\ \u0001 é"}"#.into(),
    );
    let every_escape: String = (0u8..0x20)
        .map(char::from)
        .chain("\"\\/é😀".chars())
        .collect();
    line.envelope = condense_model::RawJson::from_string_unchecked(format!(
        r#"{{"parentUuid":"uuid-7","message":null,"cwd":"/w","tail":{}}}{}"#,
        serde_json::to_string(&every_escape.repeat(40)).unwrap(),
        every_escape.repeat(3)
    ));
    for m in [
        text("uuid-7", Role::User, "a \"quoted\" request"),
        result("#3", "t1", &"long output\n".repeat(500)),
        line,
    ] {
        assert_eq!(message_hash(&m).unwrap(), old_key(&m));
    }
    let header = Header {
        system: Some(Content::string("be brief")),
        tools: Vec::new(),
        extra: Default::default(),
    };
    let bytes = serde_json::to_vec(&header).unwrap();
    assert_eq!(
        header_hash(&header).unwrap(),
        format!("header-{:032x}", twox_hash::XxHash3_128::oneshot(&bytes))
    );
}

/// A segment goes into the run's batch as a stream (its originals and their bytes are never
/// gathered in memory), named by the hash of what was written, and reads back as a segment
/// with its fields in their order; `texts` only when some original has its bytes.
#[test]
fn a_segment_is_streamed_into_the_store_named_by_its_bytes() {
    let (_dir, store) = store();
    let long = "x".repeat(300_000);
    let before = conv(vec![
        text("#0", Role::User, "go"),
        result("#1", "t1", &long),
        text("#2", Role::Assistant, "removed"),
        text("#3", Role::User, "kept"),
    ]);
    let mut after = before.clone();
    after.messages[1] = result("#1", "t1", CLEARED);
    after.messages.remove(2);
    let texts = |m: &Message, _: usize| (m.id == "#1").then(|| Original::of(r##"{"raw":"#1"}"##));
    let batch = store.batch();
    let opts = ArchiveOptions {
        format: Some("anthropic"),
        texts: Some(&texts),
    };
    assert_eq!(
        archive_stage(&store, "s", &before, &after, opts).unwrap(),
        2
    );
    let no_texts = |_: &Message, _: usize| None;
    let opts = ArchiveOptions {
        format: Some("anthropic"),
        texts: Some(&no_texts),
    };
    archive_stage(&store, "t", &before, &after, opts).unwrap();
    batch.commit().unwrap();
    for (session, with_texts) in [("s", true), ("t", false)] {
        let records = store
            .records(&format!("{NAMESPACE_PREFIX}{session}"))
            .unwrap();
        let [(name, bytes)] = &records[..] else {
            panic!("one segment: {records:?}");
        };
        assert_eq!(*name, condense_store::blob_key(bytes));
        // Packed: the originals' strings as they are, not escaped; the original bytes last.
        assert!(bytes.starts_with(packed::MAGIC));
        assert!(bytes.windows(long.len()).any(|w| w == long.as_bytes()));
        let raw = br##"{"raw":"#1"}"##;
        assert_eq!(bytes.ends_with(&[&raw[..], &[0]].concat()), with_texts);
        let segment = packed::read(bytes).unwrap();
        assert_eq!(segment.messages, before.messages[1..3]);
        assert_eq!(segment.texts.len(), usize::from(with_texts));
        // Cut short or with a byte more, it does not read.
        assert!(packed::read(&bytes[..bytes.len() - 1]).is_none());
        assert!(packed::read(&[&bytes[..], &[0]].concat()).is_none());
    }
    let mut back = after.clone();
    let expansion = expand(&store, "s", &mut back).unwrap();
    assert_eq!(back, before);
    let texts: Vec<&str> = expansion.texts.iter().map(|(_, t)| t.as_str()).collect();
    assert_eq!(texts, ["{\"raw\":\"#1\"}"]);
}

/// A stage run that archives more than a segment holds is written as several segments; each
/// original is read back from the one segment that holds it (what a later run's summary asks
/// for), a span's originals sit in few segments, and expand puts everything back, including
/// removed runs and duplicated lines split across segments.
#[test]
fn a_large_stage_run_splits_into_segments_that_read_back_exactly() {
    let (_dir, store) = store();
    let big = |i: usize| format!("output line {i}\n").repeat(600);
    let mut messages = vec![text("u0", Role::User, "go")];
    for i in 1..=40 {
        messages.push(result(&format!("r{i}"), &format!("t{i}"), &big(i)));
    }
    // The same line twice: both copies are cleared, both must come back.
    messages.push(result("r41", "t41", &big(41)));
    messages.push(result("r41", "t41", &big(41)));
    messages.push(text("u9", Role::User, "last"));
    let before = conv(messages);
    let mut after = before.clone();
    for m in &mut after.messages[1..43] {
        let id = m.id.clone();
        *m = result(&id, "t", CLEARED);
    }
    // Messages 5..=8 are removed outright (a run of originals anchored to the next one).
    after.messages.drain(5..9);
    let written = archive_stage(&store, "s", &before, &after, ArchiveOptions::default()).unwrap();
    assert_eq!(written, 38 + 1);
    let segments = store.records(&format!("{NAMESPACE_PREFIX}s")).unwrap();
    assert!(segments.len() >= 4, "{} segments", segments.len());
    let indexes = store.records(&format!("{INDEX_PREFIX}s")).unwrap();
    assert_eq!(indexes.len(), segments.len(), "one index per segment");

    // Each rewritten message's original, read through the archive's index.
    let rewrites = Rewrites::load(&store, "s").unwrap();
    for (i, m) in after.messages.iter().enumerate().skip(1).take(4) {
        let original = rewrites.original(&store, m).expect("an original");
        assert_eq!(original, before.messages[i], "message {i}");
    }
    // Reading one original reads one segment, not the whole run's archive.
    let read = rewrites.loaded.lock().unwrap().segments.len();
    assert!(read <= 2, "{read} of {} segments read", segments.len());

    let mut back = after.clone();
    let expansion = expand(&store, "s", &mut back).unwrap();
    assert_eq!(back, before);
    assert!(expansion.unresolved.is_empty());
}

/// Archiving how the output reads back takes the keys of the messages that read back unchanged
/// from the run's own record instead of hashing them again: the record it writes is the one
/// hashing every message writes, name for name, and the re-read file still expands exactly.
#[test]
fn a_reread_record_shares_the_keys_of_what_reads_back_unchanged() {
    let produced = conv(vec![
        text("#0", Role::User, "go"),
        text(
            "collapse-#0",
            Role::User,
            "[condense: summary of 2 earlier messages]\nwork",
        ),
        result("#2", "t1", "output"),
        text("#3", Role::Assistant, "done"),
    ]);
    // The summary's id is not written by the format: it reads back with a synthetic one.
    let mut reread = produced.clone();
    reread.messages[1].id = "#1".into();
    // The same re-read with the messages known to read back as produced left out (empty), as
    // `condense_formats::ReadBack` hands it over.
    let mut left_out = reread.clone();
    let same = [true, false, true, true];
    for (m, &s) in left_out.messages.iter_mut().zip(&same) {
        if s {
            *m = Message::new(String::new(), m.role, Vec::new());
        }
    }
    // What a read of the whole output gives: what `expand` starts from.
    let full = reread.clone();
    let records = |with_keys: bool, (reread, same): (&Conversation, &[bool])| {
        let (dir, store) = store();
        let run = record_run(&store, "s", None, Vec::new(), (&produced, &[]), None).unwrap();
        assert_eq!(run.keys().len(), 4);
        let given = if with_keys {
            run.clone()
        } else {
            // The same record without its keys: every message hashed.
            ArchivedRun {
                name: run.name().to_string(),
                keys: Vec::new(),
            }
        };
        let archived =
            archive_written(&store, "s", &produced, (reread, same), Some(&given)).unwrap();
        assert_eq!(archived, 1, "only the summary reads back differently");
        let mut back = full.clone();
        expand(&store, "s", &mut back).unwrap();
        assert_eq!(back, produced);
        let names: Vec<String> = store
            .records(&format!("{RUNS_PREFIX}s"))
            .unwrap()
            .into_iter()
            .map(|(name, _)| name)
            .collect();
        drop(dir);
        names
    };
    let shared = records(true, (&reread, &[]));
    assert_eq!(shared.len(), 2, "the run and its re-read step");
    assert_eq!(shared, records(false, (&reread, &[])));
    assert_eq!(shared, records(true, (&left_out, &same)));
    assert_eq!(shared, records(false, (&left_out, &same)));
}

/// An original's bytes come back exactly whatever they are: a packed segment holds them as
/// they are, JSON or not. Segments written as JSON before still read, with a text embedded as
/// the object or array it is, or as a JSON string (every text, in the first of them), and the
/// whole of such a segment reads as it did.
#[test]
fn an_original_reads_back_as_its_bytes_packed_or_from_a_json_segment() {
    let texts = [
        r#"{"role":"user","content":"say \"hi\"\n"}"#,
        "{\n  \"a\": [1, 2.50, 1e5],\r\n  \"b\": {}\n}",
        r#"[{"type":"text","text":"é \u00e9"}]"#,
        "{}",
        "",
        "plain text",
        r#""a JSON string""#,
        " {\"a\":1}",
        "{\"a\":1}\r",
        "{\"a\":1} {\"b\":2}",
        "{\"a\":",
        "null",
        "\0 and \u{1} bytes",
    ];
    let message = text("#0", Role::User, "m");
    let before = text("#1", Role::Assistant, "before");
    for original in texts {
        let texts = |_: &Message, _: usize| {
            Some(Original {
                text: original.to_string(),
            })
        };
        let mut draft = Draft {
            messages: vec![(&message, 0), (&before, 1)],
            texts: Some(&texts),
            header: Some(Header {
                system: Some(Content::string("be brief")),
                tools: Vec::new(),
                extra: condense_model::RawJson::default(),
            }),
            ..Draft::default()
        };
        draft.add("k".into(), Entry::Replace { original: 0 });
        draft.add("k".into(), Entry::InsertAfter { originals: vec![1] });
        draft.add("h".into(), Entry::Header);
        draft.add("r".into(), Entry::Remove);
        draft.add(
            "n".into(),
            Entry::ReplaceNew {
                originals: vec![0, 1],
            },
        );
        let mut bytes = Vec::new();
        draft.write_packed(&mut bytes).unwrap();
        let segment = packed::read(&bytes).unwrap();
        assert_eq!(segment.messages, [message.clone(), before.clone()]);
        assert_eq!(segment.entries, draft.entries, "{original:?}");
        assert_eq!(segment.header, draft.header);
        let text = |i| (i, OriginalText(original.to_string()));
        assert_eq!(segment.texts, [text(0), text(1)], "{original:?}");
    }
    let json = format!(
        r#"{{"entries":{{"k":[{{"kind":"replace","original":0}}]}},"messages":[{}],"header":null,"texts":[[0,{{"a": [1, 2.50]}}]]}}"#,
        serde_json::to_string(&message).unwrap()
    );
    let segment = packed::read(json.as_bytes()).unwrap();
    assert_eq!(segment.messages, std::slice::from_ref(&message));
    assert_eq!(segment.entries["k"], [Entry::Replace { original: 0 }]);
    assert_eq!(
        segment.texts,
        [(0, OriginalText(r#"{"a": [1, 2.50]}"#.into()))]
    );
    let old = r##"{"entries":{},"messages":[],"header":null,"texts":[[0,"{\"raw\":\"#1\"}"]]}"##;
    let segment: Segment = serde_json::from_str(old).unwrap();
    assert_eq!(
        segment.texts,
        [(0, OriginalText(r##"{"raw":"#1"}"##.to_string()))]
    );
}
