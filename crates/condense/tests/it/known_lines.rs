//! A Claude Code session file compressed once per turn as Claude Code grows it: from the
//! second turn on, the lines the previous input held are not parsed again
//! (`condense_formats::claude_code::known`), and every output is byte for byte the one a run
//! that parsed every line gives, and expands to its input.

use crate::known_lists::{assert_as_full_parse, compress, forget_lists};
use crate::support::{assert_expands_to, fixture};
use std::path::PathBuf;

const SESSIONS: [&str; 2] = [
    "transcripts/d-kimuson__claude-code-viewer/fe5e1c67-53e7-4862-81ae-d0e013e3270b.jsonl",
    "transcripts/DRMacIver__claude-reliability/transcript.jsonl",
];

/// The first `n` lines of `text`, each with its line end.
fn first_lines(text: &str, n: usize) -> String {
    text.split_inclusive('\n').take(n).collect()
}

#[test]
fn each_turn_parses_only_the_new_lines_and_writes_what_a_full_parse_does() {
    for rel in SESSIONS {
        let text = std::fs::read_to_string(fixture(rel)).unwrap();
        let n = text.split_inclusive('\n').count();
        let dir = tempfile::tempdir().unwrap();
        let path = |name: &str| -> PathBuf { dir.path().join(name) };
        let (knowing, parsing) = (path("knowing.store"), path("parsing.store"));
        let input = path("session.jsonl");
        for (turn, count) in [n * 3 / 5, n * 4 / 5, n - 1, n].into_iter().enumerate() {
            let grown = first_lines(&text, count);
            std::fs::write(&input, &grown).unwrap();
            let knowing_run = compress(&input, &knowing, &path("k.jsonl"), &[]);
            forget_lists(&parsing);
            let parsing_run = compress(&input, &parsing, &path("p.jsonl"), &[]);
            assert_as_full_parse(turn, &knowing_run, &parsing_run);
            assert_expands_to(
                path("k.jsonl").to_str().unwrap(),
                knowing.to_str().unwrap(),
                path("back.jsonl").to_str().unwrap(),
                grown.as_bytes(),
            );
        }
    }
}

#[test]
fn a_turn_under_other_settings_reads_every_line_after_all() {
    let rel = SESSIONS[0];
    let text = std::fs::read_to_string(fixture(rel)).unwrap();
    let n = text.split_inclusive('\n').count();
    let dir = tempfile::tempdir().unwrap();
    let path = |name: &str| -> PathBuf { dir.path().join(name) };
    let (knowing, parsing) = (path("knowing.store"), path("parsing.store"));
    let input = path("session.jsonl");
    std::fs::write(&input, first_lines(&text, n - 30)).unwrap();
    compress(&input, &knowing, &path("k.jsonl"), &[]);
    compress(&input, &parsing, &path("p.jsonl"), &[]);
    forget_lists(&parsing);
    // Another window: the previous output is no start, so the lines left unread are read
    // before the stages run over the whole session.
    std::fs::write(&input, &text).unwrap();
    let other = ["--context-window", "48000"];
    let (out, report) = compress(&input, &knowing, &path("k.jsonl"), &other);
    let (reference, _) = compress(&input, &parsing, &path("p.jsonl"), &other);
    assert!(report["runs"][0]["resumed"].is_null(), "{report}");
    assert!(out == reference, "not the full parse's output");
    assert_expands_to(
        path("k.jsonl").to_str().unwrap(),
        knowing.to_str().unwrap(),
        path("back.jsonl").to_str().unwrap(),
        text.as_bytes(),
    );
}
