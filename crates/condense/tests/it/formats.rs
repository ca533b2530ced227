//! The formats of issue 11 end to end: Codex rollouts, Responses API requests, Cline histories.
//! `stats` for each, what every stage does to each (one snapshot per stage per format), and the
//! files that must come back byte for byte: CRLF copies and a session still being written.

use crate::support::{condense, condense_in, fixture, repo};
use std::path::{Path, PathBuf};

const ROLLOUT: &str = "tests/fixtures/transcripts/codemie-ai__codemie-code/rollout-2026-05-11T11-26-55-019e1625-789d-76c0-80ab-3724b5ddb799.jsonl";
const SMALL_ROLLOUT: &str = "tests/fixtures/transcripts/codemie-ai__codemie-code/rollout-2026-05-11T13-28-45-019e1695-0522-7c83-8b39-0dd379793f80.jsonl";
const REQUEST: &str = "tests/fixtures/edge/responses_request.json";
const CLINE: &str = "tests/fixtures/edge/cline_api_conversation_history.json";

/// Late enough that every timestamped session's prompt cache is cold.
const LATE: &str = "2030-01-01T00:00:00Z";

const STAGES: [&str; 5] = [
    "tool-result-budget",
    "snip",
    "microcompact",
    "context-collapse",
    "autocompact",
];

/// All five levels, the window and limits small enough for the file at hand (`window`, output
/// and reserve, autocompact buffer, result limits).
fn pipeline(window: usize, output: usize, buffer: usize, result_chars: usize) -> String {
    format!(
        "[model]\ncontext_window = {window}\nmax_output_tokens = {output}\noutput_reserve = \
         {output}\nautocompact_buffer = {buffer}\nsummary_output_cap = {output}\n\n[[stage]]\n\
         plugin = \"tool-result-budget\"\n[stage.config]\nmax_result_size_chars = \
         {result_chars}\npreview_bytes = 300\n\n[[stage]]\nplugin = \"snip\"\n[stage.config]\n\
         max_tool_result_bytes = {}\n\n[[stage]]\nplugin = \"microcompact\"\n\n[[stage]]\nplugin \
         = \"context-collapse\"\n\n[[stage]]\nplugin = \"autocompact\"\n",
        result_chars * 2 / 3
    )
}

/// Each format's file and a pipeline under which the heavy levels have something to do.
fn cases() -> [(&'static str, &'static str, String); 3] {
    [
        (
            "codex",
            SMALL_ROLLOUT,
            pipeline(40_000, 8_000, 13_000, 2_000),
        ),
        ("responses", REQUEST, pipeline(24_000, 2_000, 4_000, 2_000)),
        ("cline", CLINE, pipeline(2_600, 300, 600, 1_200)),
    ]
}

fn write(dir: &Path, name: &str, body: &str) -> String {
    let p = dir.join(name);
    std::fs::write(&p, body).unwrap();
    p.display().to_string()
}

#[test]
fn stats_of_each_format() {
    for (name, file) in [("codex", ROLLOUT), ("responses", REQUEST), ("cline", CLINE)] {
        let run = condense_in(&["stats", file], Some(&repo()));
        assert_eq!(run.code, 0, "{name}: {}", run.stderr);
        insta::assert_snapshot!(format!("stats_{name}"), run.stdout);
    }
}

#[test]
fn what_each_stage_does_to_each_format() {
    let dir = tempfile::tempdir().unwrap();
    for (name, file, body) in cases() {
        let p = write(dir.path(), &format!("{name}.toml"), &body);
        for (i, stage) in STAGES.iter().enumerate() {
            let run = condense_in(
                &[
                    "diff",
                    file,
                    "--pipeline",
                    &p,
                    "--stage",
                    stage,
                    "--now",
                    LATE,
                    "--color",
                    "never",
                ],
                Some(&repo()),
            );
            assert_eq!(run.code, 0, "{name} {stage}: {}", run.stderr);
            insta::with_settings!({filters => vec![(r"\d+\.\d ms", "[time] ms")]}, {
                insta::assert_snapshot!(format!("diff_{name}_{:02}_{stage}", i + 1), run.stdout);
            });
        }
    }
}

/// Compresses `input` with `pipeline` and expands the result; returns (compressed, restored).
fn compress_and_expand(dir: &Path, input: &Path, pipeline: &str, tag: &str) -> (Vec<u8>, Vec<u8>) {
    let out = dir.join(format!("out-{tag}"));
    let back = dir.join(format!("back-{tag}"));
    let store = dir.join(format!("store-{tag}"));
    let run = condense(&[
        "compress",
        input.to_str().unwrap(),
        "--pipeline",
        pipeline,
        "--store",
        store.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "--now",
        LATE,
    ]);
    assert_eq!(run.code, 0, "{tag}: {}", run.stderr);
    let run = condense(&[
        "expand",
        out.to_str().unwrap(),
        "--store",
        store.to_str().unwrap(),
        "--out",
        back.to_str().unwrap(),
    ]);
    assert_eq!(run.code, 0, "{tag}: {}", run.stderr);
    (std::fs::read(out).unwrap(), std::fs::read(back).unwrap())
}

/// A copy of a fixture, changed by `f`, in `dir`.
fn copy(dir: &Path, rel: &str, f: impl Fn(&[u8]) -> Vec<u8>) -> PathBuf {
    let name = Path::new(rel).file_name().unwrap();
    let path = dir.join(name);
    std::fs::write(&path, f(&std::fs::read(repo().join(rel)).unwrap())).unwrap();
    path
}

fn crlf(bytes: &[u8]) -> Vec<u8> {
    String::from_utf8(bytes.to_vec())
        .unwrap()
        .replace('\n', "\r\n")
        .into_bytes()
}

#[test]
fn crlf_files_come_back_with_crlf_after_compress_and_expand() {
    let dir = tempfile::tempdir().unwrap();
    let empty = write(dir.path(), "empty.toml", "");
    for (name, file, body) in cases() {
        let input = copy(dir.path(), file, crlf);
        let original = std::fs::read(&input).unwrap();
        // No stage: byte for byte.
        let run = condense(&[
            "compress",
            input.to_str().unwrap(),
            "--pipeline",
            &empty,
            "--store",
            dir.path().join("s").to_str().unwrap(),
        ]);
        assert_eq!(run.code, 0, "{name}: {}", run.stderr);
        assert!(
            run.stdout.as_bytes() == original,
            "{name}: not byte-identical"
        );
        // Every level, then expand: byte for byte, and the compressed file is CRLF too.
        let p = write(dir.path(), &format!("{name}.toml"), &body);
        let (small, back) = compress_and_expand(dir.path(), &input, &p, name);
        assert!(
            small.len() < original.len(),
            "{name}: the levels saved nothing"
        );
        let bare = small
            .windows(2)
            .filter(|w| w[1] == b'\n' && w[0] != b'\r')
            .count();
        assert_eq!(bare, 0, "{name}: the compressed file has LF line ends");
        assert!(back == original, "{name}: expand(compress(x)) != x");
    }
}

#[test]
fn a_session_still_being_written_is_compressed_and_restored_whole() {
    let dir = tempfile::tempdir().unwrap();
    // The rollout with half of a next line, as Codex leaves it mid-write.
    let partial = copy(dir.path(), SMALL_ROLLOUT, |b| {
        [b, br#"{"timestamp":"2026-05-11T10:40:01.000Z","type":"response_item","payload":{"type":"function_call","name":"exec_comm"#.as_slice()].concat()
    });
    let original = std::fs::read(&partial).unwrap();
    let stats = condense(&["stats", partial.to_str().unwrap()]);
    assert_eq!(stats.code, 0, "{}", stats.stderr);
    let p = write(dir.path(), "p.toml", &cases()[0].2);
    let (small, back) = compress_and_expand(dir.path(), &partial, &p, "partial");
    assert!(
        small.ends_with(br#""name":"exec_comm"#),
        "the partial line is carried"
    );
    assert!(back == original, "expand(compress(x)) != x");
}

#[test]
fn format_flags_take_the_new_formats() {
    for (format, file) in [("codex", ROLLOUT), ("responses", REQUEST), ("cline", CLINE)] {
        let run = condense_in(
            &["stats", file, "--format", format, "--json"],
            Some(&repo()),
        );
        assert_eq!(run.code, 0, "{format}: {}", run.stderr);
        let v: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
        assert_eq!(v["format"], format, "{}", run.stdout);
    }
    // A near miss asked for by name: one line naming the file and what it is not.
    let file = fixture("edge/openai_compact.json");
    let run = condense(&["stats", file.to_str().unwrap(), "--format", "codex"]);
    let line = run.one_line_failure(1);
    assert!(
        line.contains("openai_compact.json:1: expected a Codex rollout line"),
        "{line}"
    );
    // An unknown name: clap's usage error lists the formats.
    let run = condense(&["stats", file.to_str().unwrap(), "--format", "gemini"]);
    assert_eq!(run.code, 2);
    assert!(
        run.stderr.contains("openhands, codex, responses, cline]"),
        "{}",
        run.stderr
    );
}
