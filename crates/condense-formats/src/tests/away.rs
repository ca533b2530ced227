//! A document's text sent back to its file while the stages run ([`Document::send_text_away`]):
//! the texts it gives meanwhile, the write after, and a file that changed in between.

use super::support::fixture_files;
use crate::{read_owned, Document, FormatError, ReadOptions};
use std::io::Write;
use std::path::Path;

/// `bytes` written to a file in `dir`, read from it, and the text sent back to it.
fn away(dir: &Path, name: &str, bytes: &[u8]) -> (Document, std::path::PathBuf) {
    let path = dir.join(name);
    std::fs::write(&path, bytes).unwrap();
    let mut doc = read_owned(bytes.to_vec(), name, &ReadOptions::default()).unwrap();
    let file = std::fs::File::open(&path).unwrap();
    assert!(doc.send_text_away(file, name), "{name}");
    (doc, path)
}

/// Every message's original text, as the archive asks for them (by place).
fn texts(doc: &Document) -> Vec<Option<String>> {
    let mut all = Vec::new();
    for (i, conv) in doc.conversations().iter().enumerate() {
        for (at, m) in conv.messages.iter().enumerate() {
            all.push(doc.original_text_at(i, m, at).map(|t| t.into_owned()));
        }
    }
    all
}

/// Every fixture, of every format: while away, each message's text is the one the document
/// gave with its text at hand; brought back, the document writes the input back, and again
/// after a change to a message. A Claude Code session read whole keeps its text: its events
/// hold their lines as pieces of it, so there is no copy to let go.
#[test]
fn every_fixture_gives_the_same_texts_and_writes_the_same_after_coming_back() {
    let dir = tempfile::tempdir().unwrap();
    let (mut from_file, mut kept_whole) = (0, 0);
    for path in fixture_files() {
        let bytes = std::fs::read(&path).unwrap();
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        let kept = read_owned(bytes.clone(), &name, &ReadOptions::default()).unwrap();
        // A Claude Code session whose text the document keeps whole (no byte order mark, a
        // complete last line): its events' lines are pieces of it.
        let whole_session = kept.format() == crate::Format::ClaudeCode
            && bytes.ends_with(b"\n")
            && !bytes.starts_with(crate::container::BOM.as_bytes());
        if whole_session {
            let mut doc = kept;
            assert!(std::sync::Arc::strong_count(&doc.source.text) > 1, "{name}");
            let file = std::fs::File::open(&path).unwrap();
            assert!(!doc.send_text_away(file, &name), "{name}");
            assert!(doc.write().unwrap() == bytes, "{name}");
            kept_whole += 1;
            continue;
        }
        let (mut doc, _) = away(dir.path(), &name, &bytes);
        assert_eq!(texts(&doc), texts(&kept), "{name}");
        from_file += texts(&doc).iter().flatten().count();
        // Nothing that needs the whole text works while it is away.
        assert!(
            matches!(doc.write(), Err(FormatError::Write { .. })),
            "{name}"
        );
        assert!(!doc.is_input(&bytes), "{name}");
        doc.bring_text_back().unwrap();
        let out = doc.write().unwrap();
        assert!(out == bytes && doc.is_input(&out), "{name}");
        // A changed message: the same output as the document that kept its text.
        let mut kept = kept;
        for d in [&mut doc, &mut kept] {
            let conv = &mut d.conversations_mut()[0];
            if conv.messages.len() > 1 {
                conv.messages.remove(1);
            }
        }
        assert!(doc.write().unwrap() == kept.write().unwrap(), "{name}");
    }
    assert!(from_file > 1000, "{from_file}");
    assert!(
        kept_whole >= 3,
        "{kept_whole} Claude Code sessions kept their text"
    );
}

/// A byte order mark before the text and an incomplete last line after it: the texts are
/// read at the right place, and the file may grow (a session still being written).
#[test]
fn a_marked_session_still_being_written_comes_back() {
    let session = "\u{feff}{\"type\":\"user\",\"uuid\":\"u1\",\"message\":{\"role\":\"user\",\"content\":\"hi\"}}\n{\"type\":\"assistant\",\"uuid\":\"a1\",\"parentUuid\":\"u1\",\"message\":{\"role\":\"assistant\",\"content\":[{\"type\":\"text\",\"text\":\"ok\"}]}}\n{\"type\":\"us";
    let dir = tempfile::tempdir().unwrap();
    let (mut doc, path) = away(dir.path(), "s.jsonl", session.as_bytes());
    let lines: Vec<&str> = session.trim_start_matches('\u{feff}').lines().collect();
    assert_eq!(
        texts(&doc),
        vec![Some(lines[0].to_string()), Some(lines[1].to_string())]
    );
    // The agent writes on: the rest of the line and one more.
    let mut file = std::fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .unwrap();
    file.write_all(b"er\",\"uuid\":\"u2\"}\n{}\n").unwrap();
    doc.bring_text_back().unwrap();
    assert!(doc.write().unwrap() == session.as_bytes());
}

/// The file written over in place, or cut short: the text does not come back (one line naming
/// the file), the document stays as it was, and no text read on the way is a wrong one.
#[test]
fn a_file_changed_in_place_or_cut_short_is_an_error_naming_it() {
    let body = r#"[{"role":"user","content":"one"},{"role":"assistant","content":"two"}]"#;
    let dir = tempfile::tempdir().unwrap();

    let (mut doc, path) = away(dir.path(), "changed.json", body.as_bytes());
    std::fs::write(&path, body.replace("one", "uno")).unwrap();
    let err = doc.bring_text_back().unwrap_err();
    assert_eq!(
        err.to_string(),
        "changed.json: the file changed while condense held it (its bytes are not the ones read)"
    );
    assert!(doc.write().is_err(), "still away");

    let (mut doc, path) = away(dir.path(), "cut.json", body.as_bytes());
    std::fs::write(&path, &body[..20]).unwrap();
    let second = &doc.conversations()[0].messages[1];
    assert_eq!(doc.original_text_at(0, second, 1), None);
    let err = doc.bring_text_back().unwrap_err().to_string();
    assert_eq!(
        err,
        "cut.json: the file changed while condense held it (it is shorter than it was)"
    );
}

/// A read that failed on the way is reported when the text is brought back, even when the
/// file is whole again by then: an archive missing a text must not go unnoticed.
#[test]
fn a_read_that_failed_on_the_way_is_reported_at_the_end() {
    let body = r#"[{"role":"user","content":"one"},{"role":"assistant","content":"two"}]"#;
    let dir = tempfile::tempdir().unwrap();
    let (mut doc, path) = away(dir.path(), "b.json", body.as_bytes());
    std::fs::write(&path, "").unwrap();
    let first = doc.conversations()[0].messages[0].clone();
    assert_eq!(doc.original_text_at(0, &first, 0), None);
    // Written over with a different file: the document keeps its own handle on the first.
    std::fs::write(&path, body).unwrap();
    assert!(doc
        .bring_text_back()
        .unwrap_err()
        .to_string()
        .contains("shorter"));
}

/// The messages a stage may ask for again ([`Document::read_unread`]) are read from the
/// file while the text is away; a shared text (a proxy's body) is never let go.
#[test]
fn read_unread_reads_the_file_and_a_shared_text_stays() {
    let body = r#"[{"role":"user","content":"one"},{"role":"assistant","content":"two"}]"#;
    let dir = tempfile::tempdir().unwrap();
    let (doc, _) = away(dir.path(), "b.json", body.as_bytes());
    assert_eq!(&doc.read_unread(0).unwrap(), &doc.conversations()[0]);

    let shared = std::sync::Arc::new(body.to_string());
    let nothing = |_: u64| Vec::new();
    let mut doc = crate::read_shared_knowing(
        std::sync::Arc::clone(&shared),
        "b.json",
        &ReadOptions::default(),
        (&nothing, None),
        None,
    )
    .unwrap();
    let file = std::fs::File::open(dir.path().join("b.json")).unwrap();
    assert!(!doc.send_text_away(file, "b.json"));
    assert!(doc.write().unwrap() == body.as_bytes());
}
