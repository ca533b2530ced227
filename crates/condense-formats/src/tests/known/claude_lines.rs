//! A Claude Code session whose lines an earlier read knew ([`crate::claude_code::known`]):
//! the next read of the file, grown by a turn, reads only its first lines and the new ones, and
//! gives the document a read of every line gives; when a new line changes the thread, or the
//! file does not start with the known bytes, it reads every line.

use super::record::Records;
use super::{lookup_in, unread_count};
use crate::known::{self, KnownList, ALWAYS_READ};
use crate::tests::support::fixture;
use crate::{read_owned, read_owned_knowing, Document, ReadOptions};
use serde_json::{json, Value};

fn read_plain(text: &str) -> Document {
    read_owned(text.as_bytes().to_vec(), "s.jsonl", &ReadOptions::default()).unwrap()
}

fn read_knowing(text: &str, known: &[(u64, KnownList)]) -> Document {
    let lookup = lookup_in(known);
    read_owned_knowing(
        text.as_bytes().to_vec(),
        "s.jsonl",
        &ReadOptions::default(),
        &lookup,
    )
    .unwrap()
}

/// The first `n` non-empty lines of `text`, each with its line end.
fn first_lines(text: &str, n: usize) -> String {
    text.split_inclusive('\n')
        .filter(|l| !l.trim().is_empty())
        .take(n)
        .collect()
}

/// `doc`, read knowing a list, against `full`, a read of every line: the same messages but
/// for the placeholders (which have the lines' ids), fingerprints, usage, warnings and lines
/// kept for the next read; written as the input, and read whole as the full read.
fn assert_read_as_whole(doc: &Document, full: &Document, text: &str) {
    let (conv, whole) = (&doc.conversations()[0], &full.conversations()[0]);
    let mask = doc.unread(0).unwrap_or_default();
    assert_eq!(conv.messages.len(), whole.messages.len());
    for (i, (m, f)) in conv.messages.iter().zip(&whole.messages).enumerate() {
        assert_eq!(m.id, f.id, "line {i}");
        if !mask.get(i).copied().unwrap_or(false) {
            assert_eq!(m, f, "line {i}");
        }
    }
    assert_eq!(doc.message_fingerprints(0), full.message_fingerprints(0));
    assert_eq!(doc.reported_usage(0), full.reported_usage(0));
    assert_eq!(doc.warnings(), full.warnings());
    assert_eq!(doc.write().unwrap(), text.as_bytes());
    assert_eq!(doc.read_unread(0).unwrap(), *whole);
    let ((key, next), (full_key, full_next)) =
        (doc.known_list().unwrap(), full.known_list().unwrap());
    assert_eq!(key, full_key);
    assert_eq!(next, full_next);
}

/// Real Claude Code sessions, and the edge cases' session.
fn sessions() -> [(&'static str, Vec<u8>); 3] {
    [
        (
            "claude-code-viewer",
            fixture!(
                "transcripts/d-kimuson__claude-code-viewer/fe5e1c67-53e7-4862-81ae-d0e013e3270b.jsonl"
            ),
        ),
        (
            "claude-reliability",
            fixture!("transcripts/DRMacIver__claude-reliability/transcript.jsonl"),
        ),
        ("edge", fixture!("edge/claude_code_session.jsonl")),
    ]
}

#[test]
fn a_grown_session_reads_only_its_first_lines_and_the_new_ones() {
    for (name, bytes) in sessions() {
        let text = String::from_utf8(bytes).unwrap();
        let n = text.lines().filter(|l| !l.trim().is_empty()).count();
        for known_lines in [n - 5, n - 1, n] {
            if known_lines <= ALWAYS_READ {
                continue;
            }
            let earlier = read_plain(&first_lines(&text, known_lines));
            let (key, list) = earlier.known_list().expect("a session's lines are kept");
            assert_eq!(list.messages, known_lines);
            assert!(list.lines.is_some());
            let doc = read_knowing(&text, &[(key, list)]);
            let full = read_plain(&text);
            let mask = doc.unread(0).expect("some lines left unread");
            let expected: Vec<bool> = (0..n)
                .map(|i| (ALWAYS_READ..known_lines).contains(&i))
                .collect();
            assert_eq!(mask, expected.as_slice(), "{name}");
            assert_read_as_whole(&doc, &full, &text);
        }
    }
}

/// Lines of a session: `(uuid, parent, type, content)`, compact as Claude Code writes them.
fn session(lines: &[(&str, Option<&str>, &str, Value)]) -> String {
    lines
        .iter()
        .map(|(uuid, parent, kind, content)| {
            let mut message = json!({"role": kind, "content": content});
            if *kind == "assistant" {
                message["usage"] = json!({"input_tokens": uuid.len(), "output_tokens": 3});
                message["model"] = json!("claude-sonnet-4-5");
            }
            let line = json!({
                "parentUuid": parent, "isSidechain": false, "type": kind, "uuid": uuid,
                "sessionId": "s1", "message": message
            });
            format!("{line}\n")
        })
        .collect()
}

/// A session of `n` chat lines, each the child of the one before: user, then assistant.
fn chain(n: usize) -> Vec<(String, Option<String>, &'static str, Value)> {
    (0..n)
        .map(|i| {
            let kind = if i % 2 == 0 { "user" } else { "assistant" };
            let content = if i % 2 == 0 {
                json!(format!("ask {i}"))
            } else {
                json!([{"type": "text", "text": format!("answer {i}")}])
            };
            let parent = (i > 0).then(|| format!("u{}", i - 1));
            (format!("u{i}"), parent, kind, content)
        })
        .collect()
}

fn text_of(lines: &[(String, Option<String>, &'static str, Value)]) -> String {
    let borrowed: Vec<_> = lines
        .iter()
        .map(|(u, p, k, c)| (u.as_str(), p.as_deref(), *k, c.clone()))
        .collect();
    session(&borrowed)
}

/// The list a read of a 30-line session kept, and that session with a rewind after it: the user
/// asks again from line 12, so lines 13.. leave the context.
fn rewound() -> (Vec<(u64, KnownList)>, String) {
    let mut lines = chain(30);
    let known = vec![read_plain(&text_of(&lines)).known_list().unwrap()];
    lines.push(("r1".into(), Some("u11".into()), "user", json!("ask again")));
    (known, text_of(&lines))
}

#[test]
fn a_new_line_that_moves_known_lines_out_of_the_thread_reads_every_line() {
    let (known, grown) = rewound();
    let doc = read_knowing(&grown, &known);
    let full = read_plain(&grown);
    assert_eq!(unread_count(&doc), 0, "the thread changed: every line read");
    assert_eq!(doc.conversations(), full.conversations());
    assert_eq!(doc.write().unwrap(), grown.as_bytes());
    // The turn after it continues from the new leaf: its earlier lines are known again.
    let known = vec![doc.known_list().unwrap()];
    let mut next = grown.clone();
    next.push_str(&session(&[(
        "r2",
        Some("r1"),
        "assistant",
        json!([{"type": "text", "text": "again"}]),
    )]));
    let doc = read_knowing(&next, &known);
    assert_eq!(unread_count(&doc), 31 - ALWAYS_READ);
    assert_read_as_whole(&doc, &read_plain(&next), &next);
}

/// A rewind and a line cut short after it: the read that gives up its known lines warns of the
/// tail once, as the full read does.
#[test]
fn a_read_that_gives_up_its_known_lines_warns_once() {
    let (known, rewound) = rewound();
    let grown = format!("{rewound}{{\"parentUuid\":\"r1\",\"type\":\"as");
    let doc = read_knowing(&grown, &known);
    let full = read_plain(&grown);
    assert_eq!(unread_count(&doc), 0);
    assert_eq!(full.warnings().len(), 1);
    assert_eq!(doc.warnings(), full.warnings());
}

#[test]
fn the_reported_usage_comes_from_a_known_line_when_no_new_one_reports_one() {
    let lines = chain(20);
    let text = text_of(&lines);
    let known = vec![read_plain(&text).known_list().unwrap()];
    // A user line only: the last usage is line 20's, left unread.
    let mut grown = lines.clone();
    grown.push(("u20".into(), Some("u19".into()), "user", json!("thanks")));
    let grown = text_of(&grown);
    let doc = read_knowing(&grown, &known);
    assert_eq!(unread_count(&doc), 20 - ALWAYS_READ);
    let usage = doc.reported_usage(0).expect("line 20 reported a usage");
    assert!(usage.source.starts_with("line 20:"), "{}", usage.source);
    assert_read_as_whole(&doc, &read_plain(&grown), &grown);
}

#[test]
fn a_line_cut_short_after_known_lines_is_the_tail() {
    let lines = chain(20);
    let text = text_of(&lines);
    let known = vec![read_plain(&text).known_list().unwrap()];
    let grown = format!("{text}{{\"parentUuid\":\"u19\",\"type\":\"us");
    let doc = read_knowing(&grown, &known);
    assert_eq!(unread_count(&doc), 20 - ALWAYS_READ);
    assert_eq!(doc.warnings().len(), 1, "{:?}", doc.warnings());
    assert_read_as_whole(&doc, &read_plain(&grown), &grown);
}

#[test]
fn known_lines_are_taken_only_at_the_same_bytes_and_line_numbers() {
    let lines = chain(20);
    let text = text_of(&lines);
    let known = vec![read_plain(&text).known_list().unwrap()];
    let more = session(&[("u20", Some("u19"), "user", json!("more"))]);
    let grown = format!("{text}{more}");
    assert_eq!(
        unread_count(&read_knowing(&grown, &known)),
        20 - ALWAYS_READ
    );
    // A blank line first: the same bytes, other line numbers.
    let shifted = format!("\n{grown}");
    let doc = read_knowing(&shifted, &known);
    assert_eq!(unread_count(&doc), 0);
    assert_eq!(doc.write().unwrap(), shifted.as_bytes());
    // One byte of a known line changed.
    let changed = grown.replacen("answer 13", "answer 14", 1);
    let doc = read_knowing(&changed, &known);
    assert_eq!(unread_count(&doc), 0);
    assert_eq!(doc.conversations(), read_plain(&changed).conversations());
    // The last known line went on (it had no line end): not the known line any more.
    let cut = text.strip_suffix('\n').unwrap();
    let known_cut = vec![read_plain(cut).known_list().unwrap()];
    let went_on = format!("{}, \"more\": 1}}\n", cut.strip_suffix('}').unwrap());
    assert_eq!(unread_count(&read_knowing(&went_on, &known_cut)), 0);
    // CRLF line ends: known as well.
    let crlf = grown.replace('\n', "\r\n");
    let known_crlf = vec![read_plain(&text.replace('\n', "\r\n"))
        .known_list()
        .unwrap()];
    let doc = read_knowing(&crlf, &known_crlf);
    assert_eq!(unread_count(&doc), 20 - ALWAYS_READ);
    assert_read_as_whole(&doc, &read_plain(&crlf), &crlf);
    // A JSON list's known lists are not a session's (their keys differ).
    let (key, _) = &known[0];
    let first = text.lines().next().unwrap();
    assert_ne!(*key, known::first_key(first));
}

#[test]
fn a_session_list_round_trips_through_its_records_and_damage_is_no_knowledge() {
    let [(_, bytes), ..] = sessions();
    let text = String::from_utf8(bytes).unwrap();
    let (key, list) = read_plain(&text).known_list().unwrap();
    let lines = list.messages;
    let mut records = Records::default();
    let write = known::updated(key, list.clone(), records.get());
    let facts_blocks = lines / known::LINES_BLOCK;
    assert_eq!(write.blocks.len(), lines / 512 + facts_blocks);
    records.apply(&write);
    assert_eq!(records.known(key), vec![list.clone()]);
    // The next turn's list writes no block it shares with this one (a line without a parent
    // goes on from the last main-thread line).
    let more = r#"{"isSidechain":false,"type":"user","uuid":"z1","message":{"role":"user","content":"more"}}"#;
    let (_, next) = read_plain(&format!("{text}{more}\n")).known_list().unwrap();
    let write = known::updated(key, next.clone(), records.get());
    assert!(write.blocks.len() <= 2, "{}", write.blocks.len());
    records.apply(&write);
    assert_eq!(records.known(key), vec![next]);
    // A damaged block of lines: the list is no knowledge.
    let name = records.line_blocks().into_iter().next().unwrap();
    records.damage(&name);
    assert!(records.known(key).is_empty());
}
