//! Leaving unread what an earlier read knew ([`crate::known`]): a read of a list that starts
//! with exactly the text of a known one reads only the messages it must, and the document it
//! gives writes, fingerprints and reads back as the document of a full read.

use crate::known::{KnownList, ALWAYS_READ};

mod claude_lines;
mod elements;
mod record;
use crate::{read, read_owned_knowing, Document, Format, FormatError, ReadOptions};

/// Message `i` of a long Anthropic session (every one read quick).
pub(super) fn message(i: usize) -> String {
    let filler = "line of output \\\"quoted\\\"\\n".repeat(10);
    match i % 3 {
        0 => format!(r#"{{"role": "user", "content": "step {i}"}}"#),
        1 => format!(
            r#"{{"role": "assistant", "content": [{{"type": "tool_use", "id": "t{i}", "name": "Bash", "input": {{"n": {i}}}}}]}}"#
        ),
        _ => format!(
            r#"{{"role": "user", "content": [{{"type": "tool_result", "tool_use_id": "t{}", "content": "{filler}"}}]}}"#,
            i - 1
        ),
    }
}

/// A request body of `n` messages (over 64 KB, read on every core, from 400 on), `head` before
/// its messages.
fn body(n: usize, head: &str) -> String {
    let items: Vec<String> = (0..n).map(message).collect();
    format!(
        "{{{head}\"messages\": [\n  {}\n], \"max_tokens\": 5}}",
        items.join(",\n  ")
    )
}

fn read_plain(text: &str) -> Document {
    read(text.as_bytes(), "in.json", &ReadOptions::default()).unwrap()
}

/// What a read asks, answered from `known` alone: the lists under the key asked.
fn lookup_in(known: &[(u64, KnownList)]) -> impl Fn(u64) -> Vec<KnownList> + '_ {
    move |key| {
        known
            .iter()
            .filter(|(k, _)| *k == key)
            .map(|(_, l)| l.clone())
            .collect()
    }
}

/// `bytes` read with `opts` knowing only `known`.
fn try_read_knowing_as(
    bytes: Vec<u8>,
    opts: &ReadOptions,
    known: &[(u64, KnownList)],
) -> Result<Document, FormatError> {
    read_owned_knowing(bytes, "in.json", opts, &lookup_in(known))
}

/// `bytes` read knowing only `known` (the format detected).
fn try_read_knowing(bytes: Vec<u8>, known: &[(u64, KnownList)]) -> Result<Document, FormatError> {
    try_read_knowing_as(bytes, &ReadOptions::default(), known)
}

fn read_knowing(text: &str, known: &[(u64, KnownList)]) -> Document {
    try_read_knowing(text.as_bytes().to_vec(), known).unwrap()
}

/// `doc`, read knowing a list, against `full`, a read of the whole text: what was read is the
/// full read's (the ids of all), and so are the fingerprints and the frame.
fn assert_read_as_whole(doc: &Document, full: &Document, mask: &[bool]) {
    let (conv, whole) = (&doc.conversations()[0], &full.conversations()[0]);
    for (i, (m, f)) in conv.messages.iter().zip(&whole.messages).enumerate() {
        assert_eq!(m.id, f.id);
        if !mask[i] {
            assert_eq!(m, f, "message {i}");
        }
    }
    assert_eq!(doc.message_fingerprints(0), full.message_fingerprints(0));
    assert_eq!(conv.system, whole.system);
    assert_eq!(conv.tools, whole.tools);
    assert_eq!(conv.extra, whole.extra);
}

fn unread_count(doc: &Document) -> usize {
    doc.unread(0)
        .map_or(0, |m| m.iter().filter(|&&u| u).count())
}

#[test]
fn a_list_that_starts_with_a_known_one_reads_only_what_it_must() {
    let earlier = read_plain(&body(400, ""));
    let (key, list) = earlier.known_list().expect("read quick");
    assert_eq!(list.messages, 400);
    // The next turn: three messages more, another model field before the messages.
    let text = body(403, "\"model\": \"other\", ");
    let doc = read_knowing(&text, &[(key, list)]);
    let full = read_plain(&text);
    let mask = doc.unread(0).expect("some left unread");
    let expected: Vec<bool> = (0..403).map(|i| (ALWAYS_READ..400).contains(&i)).collect();
    assert_eq!(mask, expected.as_slice());
    assert_read_as_whole(&doc, &full, mask);
    // The list this turn keeps for the next is the full read's: its hash goes on from the
    // text the known list matched on, over the new messages only.
    assert!(doc.known_hashed.is_some() && full.known_hashed.is_none());
    let ((key, next), (full_key, full_next)) =
        (doc.known_list().unwrap(), full.known_list().unwrap());
    assert_eq!(key, full_key);
    assert_eq!(next.bytes, full_next.bytes);
    assert!(next.spans == full_next.spans && next.prints == full_next.prints);
    // Reading the rest gives the full read's conversation.
    assert_eq!(doc.read_unread(0).unwrap(), full.conversations()[0]);
}

/// A list read turn after turn, each read knowing the list the one before kept, keeps as many
/// stubs as a read of the whole list has: the known messages' stubs are not added again.
#[test]
fn the_stubs_a_list_keeps_do_not_grow_from_turn_to_turn() {
    let stubs = |doc: &Document| doc.known_list().unwrap().1.stubs.len();
    let mut known = vec![read_plain(&body(400, "")).known_list().unwrap()];
    let whole = stubs(&read_plain(&body(430, "")));
    for n in (403..=430).step_by(3) {
        let doc = read_knowing(&body(n, ""), &known);
        assert!(doc.unread(0).is_some(), "{n}: some left unread");
        assert!(
            stubs(&doc) <= whole,
            "{n}: {} stubs, a whole read {whole}",
            stubs(&doc)
        );
        known = vec![doc.known_list().unwrap()];
    }
}

/// A short list (under 64 KB and 256 messages: read on the calling thread) read knowing an
/// earlier read's list leaves unread what a long one does; a read that knows of no list yet
/// is quick, so it leaves a list for the next.
#[test]
fn a_short_list_that_starts_with_a_known_one_reads_only_what_it_must() {
    let text = body(30, "");
    assert!(text.len() < crate::container::PARALLEL_FROM);
    let earlier = read_knowing(&text, &[]);
    assert_eq!(earlier.conversations(), read_plain(&text).conversations());
    let (key, list) = earlier.known_list().expect("read quick");
    let next = body(33, "");
    let doc = read_knowing(&next, &[(key, list)]);
    let full = read_plain(&next);
    let mask = doc.unread(0).expect("some left unread");
    let expected: Vec<bool> = (0..33).map(|i| (ALWAYS_READ..30).contains(&i)).collect();
    assert_eq!(mask, expected.as_slice());
    assert_eq!(doc.message_fingerprints(0), full.message_fingerprints(0));
    assert_eq!(doc.write().unwrap(), next.as_bytes());
    assert_eq!(doc.read_unread(0).unwrap(), full.conversations()[0]);
}

#[test]
fn a_document_with_unread_messages_writes_as_a_full_read_does() {
    let earlier = read_plain(&body(400, ""));
    let known = [earlier.known_list().unwrap()];
    let text = body(402, "");
    let (mut doc, mut full) = (read_knowing(&text, &known), read_plain(&text));
    assert!(unread_count(&doc) > 0);
    // Unchanged: the input, byte for byte.
    assert_eq!(doc.write().unwrap(), text.as_bytes());
    // An output keeping a few read messages and a changed one, as a resumed run's: the same
    // bytes as the full read's document gives.
    let keep = |doc: &mut Document, from: &Document| {
        let messages = &from.conversations()[0].messages;
        let mut changed = messages[401].clone();
        changed.id = "#401".into();
        changed.content = condense_model::Content::string("cleared".to_string());
        doc.conversations_mut()[0].messages = vec![
            messages[0].clone(),
            messages[3].clone(),
            messages[400].clone(),
            changed,
        ];
    };
    let reference = read_plain(&text);
    keep(&mut doc, &reference);
    keep(&mut full, &reference);
    assert_eq!(doc.write().unwrap(), full.write().unwrap());
}

#[test]
fn a_list_whose_known_prefix_changed_by_one_byte_is_read_whole() {
    let earlier = read_plain(&body(400, ""));
    let known = [earlier.known_list().unwrap()];
    let text = body(403, "").replacen("step 30\"", "step 31\"", 1);
    let doc = read_knowing(&text, &known);
    assert_eq!(doc.unread(0), None);
    assert_eq!(doc.conversations(), read_plain(&text).conversations());
    // A list under another key is not one it covers either; a shorter one only up to its
    // messages another one follows (its last one is read).
    let shorter = read_knowing(&body(399, ""), &known);
    assert_eq!(
        shorter.unread(0).map(|u| (u.len(), u[397], u[398])),
        Some((399, true, false))
    );
    assert_eq!(
        shorter.read_unread(0).unwrap(),
        read_plain(&body(399, "")).conversations()[0]
    );
    // A list cut short before the known one's end: known up to the last multiple of
    // `STRIDE` (every `STRIDE` messages the known list keeps a hash of those before).
    let cut = read_knowing(&body(396, ""), &known);
    let last_unread = cut.unread(0).and_then(|u| u.iter().rposition(|&u| u));
    assert_eq!(last_unread, Some(383));
    assert_eq!(
        cut.read_unread(0).unwrap(),
        read_plain(&body(396, "")).conversations()[0]
    );
    let other_key = [(known[0].0 ^ 1, known[0].1.clone())];
    assert_eq!(read_knowing(&body(403, ""), &other_key).unread(0), None);
}

/// A client that marks its newest messages for its prompt cache moves the marks every turn:
/// the next list's newest known messages changed. The messages before them are left unread,
/// and the document reads, fingerprints and writes as a full read's. Marks moved off the two
/// newest user messages are covered ([`crate::known::SHORTER`]); off older ones, the list is
/// read whole.
#[test]
fn a_list_whose_newest_messages_lost_their_marks_leaves_the_ones_before_unread() {
    // Tool results are the messages `i % 3 == 2`: 395, 398, 401, 404.
    let marked = |n: usize, at: &[usize]| {
        let items: Vec<String> = (0..n)
            .map(|i| {
                let m = message(i);
                if at.contains(&i) {
                    m.replacen("}]}", r#", "cache_control": {"type": "ephemeral"}}]}"#, 1)
                } else {
                    m
                }
            })
            .collect();
        format!(
            "{{\"messages\": [\n  {}\n], \"max_tokens\": 5}}",
            items.join(",\n  ")
        )
    };
    // 402 messages, then 405: the last marked, then the last two.
    for (before, after, unread_to) in [
        (&[401][..], &[404][..], 401),
        (&[398, 401], &[401, 404], 398),
    ] {
        let earlier = marked(402, before);
        assert_eq!(earlier.matches("cache_control").count(), before.len());
        let known = [read_plain(&earlier).known_list().unwrap()];
        let text = marked(405, after);
        let doc = read_knowing(&text, &known);
        let unread = doc.unread(0).unwrap();
        let last_unread = unread.iter().rposition(|&u| u).unwrap();
        assert_eq!(
            last_unread + 1,
            unread_to,
            "marks {before:?} then {after:?}"
        );
        let plain = read_plain(&text);
        assert_eq!(doc.read_unread(0).unwrap(), plain.conversations()[0]);
        assert_eq!(doc.message_fingerprints(0), plain.message_fingerprints(0));
        assert_eq!(doc.write().unwrap(), text.as_bytes());
        // What the read keeps for the next turn is what a full read keeps: the hashes of the
        // list and of its shorter prefixes, some taken from the list it matched.
        let (kept, full) = (doc.known_list().unwrap(), plain.known_list().unwrap());
        assert_eq!(kept.0, full.0);
        assert_eq!(
            (kept.1.bytes, &kept.1.shorter),
            (full.1.bytes, &full.1.shorter)
        );
        let newest: Vec<usize> = kept.1.shorter.iter().rev().take(4).map(|c| c.0).collect();
        assert_eq!(newest, [404, 403, 402, 401]);
    }
    // The next turn unchanged but for one more message: the list it matched whole is one of
    // its shorter prefixes.
    let earlier = read_plain(&marked(404, &[404 - 3]));
    let known = [earlier.known_list().unwrap()];
    let text = marked(405, &[404 - 3]);
    let doc = read_knowing(&text, &known);
    assert!(doc.unread(0).is_some());
    let (kept, full) = (
        doc.known_list().unwrap(),
        read_plain(&text).known_list().unwrap(),
    );
    assert_eq!(
        (kept.1.bytes, &kept.1.shorter),
        (full.1.bytes, &full.1.shorter)
    );
    // A mark moved off an older message: known up to the last multiple of `STRIDE` before it.
    let known = [read_plain(&marked(402, &[395])).known_list().unwrap()];
    let doc = read_knowing(&marked(405, &[]), &known);
    let last_unread = doc.unread(0).and_then(|u| u.iter().rposition(|&u| u));
    assert_eq!(last_unread, Some(383));
}

/// A client that edits an older message in place (OpenHands masks observations older than its
/// window) sends the list changed there: the messages before the last multiple of
/// [`crate::known::STRIDE`] before it are left unread, the rest read, and the document reads,
/// fingerprints and writes as a full read's. What it keeps for the next turn is a full read's,
/// the hashes before the edit taken from the list it matched.
#[test]
fn a_list_edited_in_place_leaves_the_messages_before_the_edit_unread() {
    let earlier = body(400, "");
    let known = [read_plain(&earlier).known_list().unwrap()];
    // Message 300 (a request) edited, and three more messages.
    let text = body(403, "").replacen("step 300\"", "<MASKED>\"", 1);
    assert_ne!(text, body(403, ""));
    let doc = read_knowing(&text, &known);
    let unread = doc.unread(0).unwrap();
    let last_unread = unread.iter().rposition(|&u| u).unwrap();
    assert_eq!(last_unread, 255);
    assert!(unread[256..].iter().all(|&u| !u));
    let plain = read_plain(&text);
    assert_eq!(doc.read_unread(0).unwrap(), plain.conversations()[0]);
    assert_eq!(doc.message_fingerprints(0), plain.message_fingerprints(0));
    assert_eq!(doc.write().unwrap(), text.as_bytes());
    let (kept, full) = (doc.known_list().unwrap(), plain.known_list().unwrap());
    assert_eq!(kept, full);
    // Edited before the first multiple: read whole.
    let early = body(403, "").replacen("step 30\"", "<MASKED>\"", 1);
    assert_eq!(read_knowing(&early, &known).unread(0), None);
}

#[test]
fn a_list_that_is_no_longer_quick_or_anthropic_is_read_whole() {
    let earlier = read_plain(&body(400, ""));
    let known = [earlier.known_list().unwrap()];
    // A new message the quick reader does not read (a key it does not know).
    let mut text = body(401, "");
    let at = text.rfind("\n]").unwrap();
    text.insert_str(at, r#",  {"role": "user", "content": "x", "name": "n"}"#);
    let doc = read_knowing(&text, &known);
    assert_eq!(doc.unread(0), None);
    assert_eq!(doc.conversations(), read_plain(&text).conversations());
    assert_eq!(doc.write().unwrap(), text.as_bytes());
}

#[test]
fn a_bare_list_is_known_as_a_body_is() {
    let list = |n: usize| {
        let items: Vec<String> = (0..n).map(message).collect();
        format!("[{}]", items.join(", "))
    };
    let earlier = read_plain(&list(500));
    let known = [earlier.known_list().unwrap()];
    let text = list(510);
    let doc = read_knowing(&text, &known);
    assert_eq!(unread_count(&doc), 500 - ALWAYS_READ);
    assert_eq!(
        doc.read_unread(0).unwrap(),
        read_plain(&text).conversations()[0]
    );
    assert_eq!(doc.write().unwrap(), text.as_bytes());
}

#[test]
fn a_record_whose_spans_do_not_fit_its_text_is_no_match() {
    let earlier = read_plain(&body(400, ""));
    let (key, list) = earlier.known_list().unwrap();
    let text = body(403, "");
    // The text's hash is right, but two messages' boundaries moved into the second one.
    let mut shifted = list.clone();
    shifted.spans[20].1 += 3;
    shifted.spans[21].0 += 3;
    let doc = read_knowing(&text, &[(key, shifted)]);
    assert_eq!(doc.unread(0), None);
    assert_eq!(doc.conversations(), read_plain(&text).conversations());
    assert!(unread_count(&read_knowing(&text, &[(key, list)])) > 0);
}

#[test]
fn only_a_quick_read_of_one_conversation_is_known() {
    // Read through `--select`: never quick, so nothing a later read could leave unread.
    let opts = ReadOptions {
        select: Some(String::new()),
        ..ReadOptions::default()
    };
    let doc = read(body(500, "").as_bytes(), "a.json", &opts).unwrap();
    assert!(doc.known_list().is_none());
    // A small body is parsed whole, without the scan (it costs little): nothing is kept.
    let small = read_plain(&body(20, ""));
    assert!(small.known_list().is_none());
}

/// Whatever byte of the known text changes, a read knowing it gives what a full read gives:
/// the same conversations and bytes written back, or the same error.
#[test]
fn any_changed_byte_reads_as_a_full_read_does() {
    let earlier = read_plain(&body(400, ""));
    let known = [earlier.known_list().unwrap()];
    let text = body(404, "");
    let replacements = [b' ', b'"', b'\\', b',', b'}', b'x', b'7', b'\n'];
    // A fixed pseudo-random walk over the text (no seed to forget).
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    // Every other change falls after the known prefix (the last known message is "step
    // 399"): in the new messages and the body's end, where the prefix is still left unread.
    let tail = text.find("step 399\"}").unwrap() + "step 399\"}".len();
    let mut left_unread = 0;
    for round in 0..120 {
        state = state
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        let r = (state >> 33) as usize;
        let at = match round % 2 {
            0 => r % text.len(),
            _ => tail + r % (text.len() - tail),
        };
        let mut bytes = text.clone().into_bytes();
        bytes[at] = replacements[round % replacements.len()];
        let knowing = try_read_knowing(bytes.clone(), &known);
        let full = read(&bytes, "in.json", &ReadOptions::default());
        match (knowing, full) {
            (Ok(k), Ok(f)) => {
                let whole = match k.unread(0) {
                    Some(_) => {
                        left_unread += 1;
                        k.read_unread(0).unwrap()
                    }
                    None => k.conversations()[0].clone(),
                };
                assert_eq!(whole, f.conversations()[0], "byte {at}");
                assert_eq!(k.format(), f.format(), "byte {at}");
                assert_eq!(k.write().unwrap(), f.write().unwrap(), "byte {at}");
            }
            (Err(k), Err(f)) => assert_eq!(k.to_string(), f.to_string(), "byte {at}"),
            (k, f) => panic!("byte {at}: {:?} / {:?}", k.err(), f.err()),
        }
    }
    // Many changes there break the JSON or the quick shape (a full read, or the same error).
    assert!(left_unread > 10, "{left_unread}");
}

#[test]
fn a_placeholder_names_its_index_in_its_id_and_its_hint() {
    for i in [0, 9, 10, 1_770, 123_456] {
        let p = crate::known::placeholder(i);
        assert_eq!(p.id, format!("#{i}"));
        assert_eq!(p.extra.as_str(), format!("{{\"condense:unread\":{i}}}"));
        assert_eq!(crate::known::placeholder_index(&p), Some(i));
    }
}

#[test]
fn a_list_cut_steps_over_the_known_prefix_and_cuts_the_same() {
    use crate::cut::ListCut;
    use std::cell::{Cell, RefCell};
    let earlier = read_plain(&body(400, ""));
    let (key, list) = earlier.known_list().unwrap();
    let text = body(403, "\"model\": \"m\", ");
    let known = RefCell::new(vec![list.clone()]);
    let asked = Cell::new(0);
    let lookup = |k: u64| {
        asked.set(asked.get() + 1);
        if k == key {
            known.borrow().clone()
        } else {
            Vec::new()
        }
    };
    let knowing = ListCut::of_knowing(text.as_bytes(), Format::Anthropic, Some(&lookup)).unwrap();
    assert_eq!(asked.get(), 1, "asked once, by the first message's key");
    let scanned = ListCut::of(text.as_bytes(), "messages").unwrap();
    assert_eq!((knowing.len(), scanned.len()), (403, 403));
    for keep in [0, 1, 2, 399, 400, 401, 403] {
        assert_eq!(knowing.first(keep), scanned.first(keep), "{keep}");
    }
    let read_taking = |matched| {
        crate::read_shared_knowing(
            std::sync::Arc::new(text.clone()),
            "in.json",
            &ReadOptions::default(),
            (&lookup, matched),
            None,
        )
        .unwrap()
    };
    // The read of the same text takes the look's match: it leaves unread what a read that
    // matches again does.
    let taking = read_taking(knowing.into_matched());
    assert_eq!(
        asked.get(),
        2,
        "the read asks whether a longer list is known since"
    );
    let asking = read_knowing(&text, &[(key, list.clone())]);
    assert_eq!(taking.unread(0), asking.unread(0));
    assert_eq!(unread_count(&taking), 400 - ALWAYS_READ);
    assert_eq!(
        taking.message_fingerprints(0),
        read_plain(&text).message_fingerprints(0)
    );
    assert_eq!(taking.write().unwrap(), asking.write().unwrap());
    // A longer list known by the time of the read (the session's previous request kept it
    // after the look) is taken instead.
    let look = ListCut::of_knowing(text.as_bytes(), Format::Anthropic, Some(&lookup)).unwrap();
    let whole = read_plain(&text);
    let (_, longer) = whole.known_list().unwrap();
    known.borrow_mut().push(longer);
    let fresher = read_taking(look.into_matched());
    assert_eq!(unread_count(&fresher), 403 - ALWAYS_READ);
    assert_eq!(fresher.write().unwrap(), asking.write().unwrap());
    // A match of another text is not taken: the read matches as usual.
    known.borrow_mut().pop();
    let shorter = body(402, "");
    let stale = ListCut::of_knowing(text.as_bytes(), Format::Anthropic, Some(&lookup))
        .and_then(ListCut::into_matched);
    let other = crate::read_shared_knowing(
        std::sync::Arc::new(shorter.clone()),
        "in.json",
        &ReadOptions::default(),
        (&lookup, stale),
        None,
    )
    .unwrap();
    assert_eq!(unread_count(&other), 400 - ALWAYS_READ);
    assert_eq!(
        other.write().unwrap(),
        read_plain(&shorter).write().unwrap()
    );
    // Another text under the same key is scanned.
    let other = body(403, "").replace("step 399", "step 0399");
    let cut = ListCut::of_knowing(other.as_bytes(), Format::Anthropic, Some(&lookup)).unwrap();
    assert_eq!(cut.len(), 403);
    assert_eq!(
        cut.first(1),
        ListCut::of(other.as_bytes(), "messages").unwrap().first(1)
    );
}
