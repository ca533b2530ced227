//! A Claude Code session file compressed once per turn as Claude Code grows it: from the
//! second turn on, the lines the previous input held are not parsed again
//! (`condense_formats::claude_code::known`), and every output is byte for byte the one a run
//! that parsed every line gives, and expands to its input.

use crate::known_lists::{assert_as_full_parse, compress, forget_lists};
use crate::support::{assert_expands_to, fixture};
use serde_json::Value;
use std::path::PathBuf;

const SESSIONS: [&str; 2] = [
    "transcripts/d-kimuson__claude-code-viewer/fe5e1c67-53e7-4862-81ae-d0e013e3270b.jsonl",
    "transcripts/DRMacIver__claude-reliability/transcript.jsonl",
];

/// The first `n` lines of `text`, each with its line end.
fn first_lines(text: &str, n: usize) -> String {
    text.split_inclusive('\n').take(n).collect()
}

/// A session file compressed turn after turn on two stores: one that keeps what it knows of
/// the lines (`knowing`), one that forgets it before every run (`parsing`).
struct Turns {
    dir: tempfile::TempDir,
}

impl Turns {
    fn new() -> Turns {
        Turns {
            dir: tempfile::tempdir().unwrap(),
        }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// `session` compressed with `extra` on both stores: the knowing run, then the parsing one.
    fn run(&self, session: &str, extra: &[&str]) -> [(Vec<u8>, Value); 2] {
        let input = self.path("session.jsonl");
        std::fs::write(&input, session).unwrap();
        let knowing = compress(
            &input,
            &self.path("knowing.store"),
            &self.path("k.jsonl"),
            extra,
        );
        forget_lists(&self.path("parsing.store"));
        let parsing = compress(
            &input,
            &self.path("parsing.store"),
            &self.path("p.jsonl"),
            extra,
        );
        [knowing, parsing]
    }

    /// The knowing run's last output expands to `session`.
    fn assert_expands_to(&self, session: &str) {
        assert_expands_to(
            self.path("k.jsonl").to_str().unwrap(),
            self.path("knowing.store").to_str().unwrap(),
            self.path("back.jsonl").to_str().unwrap(),
            session.as_bytes(),
        );
    }
}

#[test]
fn each_turn_parses_only_the_new_lines_and_writes_what_a_full_parse_does() {
    for rel in SESSIONS {
        let text = std::fs::read_to_string(fixture(rel)).unwrap();
        let n = text.split_inclusive('\n').count();
        let turns = Turns::new();
        for (turn, count) in [n * 3 / 5, n * 4 / 5, n - 1, n].into_iter().enumerate() {
            let grown = first_lines(&text, count);
            let [knowing, parsing] = turns.run(&grown, &[]);
            assert_as_full_parse(turn, &knowing, &parsing);
            turns.assert_expands_to(&grown);
        }
    }
}

#[test]
fn a_turn_under_other_settings_reads_every_line_after_all() {
    let text = std::fs::read_to_string(fixture(SESSIONS[0])).unwrap();
    let n = text.split_inclusive('\n').count();
    let turns = Turns::new();
    turns.run(&first_lines(&text, n - 30), &[]);
    // Another window: the previous output is no start, so the lines left unread are read
    // before the stages run over the whole session.
    let [(out, report), (reference, _)] = turns.run(&text, &["--context-window", "48000"]);
    assert!(report["runs"][0]["resumed"].is_null(), "{report}");
    assert!(out == reference, "not the full parse's output");
    turns.assert_expands_to(&text);
}
