//! Robust reading: sessions still being written, CRLF files, roles nobody maps.

use super::support::{fixture, writes_back};
use crate::{read, Format, ReadOptions};
use condense_model::{Block, Content, Role};
use condense_tokens::TokenCounter;
use serde_json::Value;

fn auto() -> ReadOptions {
    ReadOptions::default()
}

/// The file with its last line cut in the middle, as a session still being written leaves it.
fn cut_last_line(bytes: &[u8]) -> Vec<u8> {
    let body = bytes.strip_suffix(b"\n").unwrap_or(bytes);
    let start = body.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
    let keep = start + (body.len() - start) / 2;
    bytes[..keep].to_vec()
}

fn crlf(bytes: &[u8]) -> Vec<u8> {
    String::from_utf8(bytes.to_vec())
        .unwrap()
        .replace('\n', "\r\n")
        .into_bytes()
}

#[test]
fn a_session_still_being_written_is_read_without_its_last_line() {
    let sessions: [(&str, Vec<u8>, Format); 3] = [
        (
            "claude.jsonl",
            fixture!("transcripts/DRMacIver__claude-reliability/transcript.jsonl"),
            Format::ClaudeCode,
        ),
        (
            "rollout.jsonl",
            fixture!("transcripts/codemie-ai__codemie-code/rollout-2026-05-11T13-28-45-019e1695-0522-7c83-8b39-0dd379793f80.jsonl"),
            Format::Codex,
        ),
        (
            "output.jsonl",
            fixture!("transcripts/All-Hands-AI__OpenHands/output.jsonl"),
            Format::OpenHands,
        ),
    ];
    for (name, whole, format) in sessions {
        let partial = cut_last_line(&whole);
        let lines = whole.iter().filter(|b| **b == b'\n').count();
        let doc = read(&partial, name, &auto()).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(doc.format(), format, "{name}");
        assert_eq!(
            doc.warnings()[0],
            format!(
                "line {lines} is incomplete (a session still being written?): it is carried \
                 through untouched and not read"
            ),
            "{name}"
        );
        assert!(writes_back(&doc, &partial), "{name}");
        // What was read is the file without that line.
        let complete = &whole[..whole[..whole.len() - 1]
            .iter()
            .rposition(|b| *b == b'\n')
            .unwrap()
            + 1];
        let before = read(complete, name, &auto()).unwrap();
        let ids = |d: &crate::Document| -> Vec<usize> {
            d.conversations().iter().map(|c| c.messages.len()).collect()
        };
        assert_eq!(ids(&doc), ids(&before), "{name}");
        // Read again with the format given (as `compress` checks its output): the same.
        let opts = ReadOptions {
            format: Some(format),
            select: None,
        };
        assert!(writes_back(&read(&partial, name, &opts).unwrap(), &partial));
    }
}

#[test]
fn a_line_cut_inside_a_character_is_still_the_tail() {
    let mut bytes = b"{\"type\":\"user\",\"sessionId\":\"s\",\"uuid\":\"u\",\"message\":{\"role\":\"user\",\"content\":\"hi\"}}\n{\"type\":\"assistant\",\"message\":{\"content\":\"caf".to_vec();
    bytes.push(0xc3); // the first byte of `é`
    let doc = read(&bytes, "s.jsonl", &auto()).unwrap();
    assert_eq!(doc.conversations()[0].messages.len(), 1);
    assert!(writes_back(&doc, &bytes));
    // A bad byte anywhere else is still an error.
    let mut bad = bytes.clone();
    bad.insert(10, 0xff);
    let e = read(&bad, "s.jsonl", &auto()).unwrap_err().to_string();
    assert_eq!(e, "s.jsonl:1: not UTF-8 text: invalid byte at offset 10");
    // So is a cut character in a file whose last line is complete.
    let mut cut = b"{\"messages\":[]}\n".to_vec();
    cut.push(0xc3);
    assert!(read(&cut, "x.json", &auto()).is_err());
}

#[test]
fn other_bad_lines_are_still_errors_with_line_and_column() {
    let whole = fixture!("transcripts/DRMacIver__claude-reliability/transcript.jsonl");
    let text = String::from_utf8(whole).unwrap();
    let mut lines: Vec<&str> = text.lines().collect();
    let second = &lines[1][..lines[1].len() / 2];
    lines[1] = second;
    let broken = lines.join("\n");
    let e = read(broken.as_bytes(), "t.jsonl", &auto())
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with("t.jsonl:2: invalid JSON: EOF while parsing"),
        "{e}"
    );
    assert!(e.contains(" at column "), "{e}");
}

#[test]
fn crlf_files_come_back_with_crlf() {
    let files: [(&str, Vec<u8>); 5] = [
        ("claude.jsonl", fixture!("transcripts/DRMacIver__claude-reliability/transcript.jsonl")),
        ("rollout.jsonl", fixture!("transcripts/codemie-ai__codemie-code/rollout-2026-05-11T13-28-45-019e1695-0522-7c83-8b39-0dd379793f80.jsonl")),
        ("pydicom.traj", fixture!("transcripts/SWE-agent__SWE-agent/pydicom__pydicom-1458.traj")),
        ("request.json", fixture!("edge/responses_request.json")),
        ("output.jsonl", fixture!("transcripts/All-Hands-AI__OpenHands/output.jsonl")),
    ];
    for (name, bytes) in files {
        let bytes = crlf(&bytes);
        let mut doc = read(&bytes, name, &auto()).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(writes_back(&doc, &bytes), "{name}");
        // An edit is written with CRLF too.
        let msg = doc.conversations_mut()[0]
            .messages
            .iter_mut()
            .find(|m| m.role == Role::User)
            .unwrap();
        msg.content = Content::string("line one\nline two");
        let out = doc.write().unwrap();
        let bare = out
            .windows(2)
            .filter(|w| w[1] == b'\n' && w[0] != b'\r')
            .count();
        assert_eq!(bare, 0, "{name}: a line ends without CR");
        // A CRLF file with a partial last line keeps both.
        let partial = [bytes.as_slice(), b"{\"type\":\"us"].concat();
        if name.ends_with(".jsonl") {
            assert!(
                writes_back(&read(&partial, name, &auto()).unwrap(), &partial),
                "{name}"
            );
        }
    }
}

#[test]
fn roles_nobody_maps_are_counted_and_kept() {
    let counter = TokenCounter::default();
    let list = br#"[{"role":"user","content":"start"},{"role":"assistant","content":[{"type":"text","text":"ok"}]},{"role":"human","content":"a question the export kept under its own role"},{"role":"gpt","content":"an answer the model did see","weight":1}]"#;
    for format in [Format::Anthropic, Format::OpenAi] {
        let opts = ReadOptions {
            format: Some(format),
            select: None,
        };
        let mut doc = read(list, "x.json", &opts).unwrap();
        assert!(writes_back(&doc, list), "{format}");
        assert_eq!(
            doc.warnings(),
            ["2 messages or items condense does not understand are kept verbatim and counted as \
              their JSON: role `gpt` (1), role `human` (1)"],
            "{format}"
        );
        let conv = &doc.conversations()[0];
        let human = counter.count_message(&conv.messages[2]);
        assert!(human > counter.count_text("a question the export kept under its own role"));
        // A stage that rewrites one gets its role back on the way out.
        doc.conversations_mut()[0].messages[3].content =
            Content::blocks(vec![Block::text("short")]);
        let v: Value = serde_json::from_slice(&doc.write().unwrap()).unwrap();
        assert_eq!(v[3]["role"], "gpt", "{format}");
        assert_eq!(v[3]["content"][0]["text"], "short", "{format}");
        assert_eq!(v[2]["role"], "human", "{format}");
    }
}
