//! What the host keeps for summaries and stage state (issue 10): summaries are written from the
//! originals, within a run and across runs; stage state is kept per window and pipeline
//! settings, says when it is used, and `--fresh` ignores it.

use crate::support::{condense, fixture};
use std::path::Path;

/// The Claude Code session with one failed Write (`File has not been read yet...`).
const SESSION: &str = "transcripts/DRMacIver__claude-reliability/transcript.jsonl";
const ERROR_LINE: &str = "File has not been read yet. Read it first before writing to it.";

fn write(dir: &Path, name: &str, body: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, body).unwrap();
    path.display().to_string()
}

/// Every condense summary message's text in a Claude Code JSONL file.
fn summaries(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter_map(|v| v["message"]["content"].as_str().map(str::to_string))
        .filter(|t| t.starts_with("[condense: conversation compacted"))
        .collect()
}

fn compress(args: &[&str]) -> crate::support::Run {
    let run = condense(args);
    assert_eq!(run.code, 0, "{}", run.stderr);
    run
}

/// Masks every tool result but the last: the error's result becomes a placeholder.
const MASK: &str = r#"
[[stage]]
name = "mask"
plugin = "observation-mask"
[stage.config]
keep_last = 1
per_tool = false
"#;

const AUTOCOMPACT: &str = r#"
[[stage]]
name = "autocompact"
plugin = "autocompact"
"#;

#[test]
fn a_summary_is_written_from_the_originals_not_from_placeholders() {
    let dir = tempfile::tempdir().unwrap();
    let input = fixture(SESSION).display().to_string();
    let store = dir.path().join("store").display().to_string();
    let both = write(dir.path(), "both.toml", &format!("{MASK}{AUTOCOMPACT}"));
    let out = dir.path().join("out.jsonl");
    // Masked by the first stage, then summarized by the second in the same run.
    compress(&[
        "compress",
        &input,
        "-p",
        &both,
        "--prompt-too-long",
        "--store",
        &store,
        "--out",
        out.to_str().unwrap(),
    ]);
    let summary = summaries(&out).pop().expect("a summary");
    assert!(summary.contains(ERROR_LINE), "{summary}");
    assert!(!summary.contains("[Observation masked"), "{summary}");
}

#[test]
fn a_summary_reads_the_originals_of_an_earlier_runs_placeholders() {
    let dir = tempfile::tempdir().unwrap();
    let input = fixture(SESSION).display().to_string();
    let store = dir.path().join("store").display().to_string();
    let mask = write(dir.path(), "mask.toml", MASK);
    let auto = write(dir.path(), "auto.toml", AUTOCOMPACT);
    let masked = dir.path().join("masked.jsonl");
    let out = dir.path().join("out.jsonl");
    compress(&[
        "compress",
        &input,
        "-p",
        &mask,
        "--store",
        &store,
        "--out",
        masked.to_str().unwrap(),
    ]);
    // (Claude Code keeps a copy of each result in the line's `toolUseResult`, which the model
    // never sees: only the message content counts.)
    let contents: String = std::fs::read_to_string(&masked)
        .unwrap()
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .map(|v| v["message"]["content"].to_string())
        .collect();
    assert!(contents.contains("[Observation masked"));
    assert!(
        !contents.contains(ERROR_LINE),
        "the first run masked the error"
    );
    // The agent kept the masked conversation; the next run summarizes it.
    compress(&[
        "compress",
        masked.to_str().unwrap(),
        "-p",
        &auto,
        "--prompt-too-long",
        "--store",
        &store,
        "--out",
        out.to_str().unwrap(),
    ]);
    let summary = summaries(&out).pop().expect("a summary");
    assert!(summary.contains(ERROR_LINE), "{summary}");
}

/// The context-collapse row of a text report, with its notes.
fn collapse_rows(stderr: &str) -> String {
    stderr
        .lines()
        .skip_while(|l| !l.trim_start().starts_with("context-collapse"))
        .take_while(|l| !l.trim_start().starts_with("autocompact"))
        .collect::<Vec<_>>()
        .join("\n")
}

fn tokens_after(stderr: &str) -> String {
    stderr
        .lines()
        .find(|l| l.trim_start().starts_with("total"))
        .unwrap_or_default()
        .to_string()
}

#[test]
fn state_is_kept_per_window_and_says_when_it_is_used() {
    let dir = tempfile::tempdir().unwrap();
    let input = fixture(
        "transcripts/d-kimuson__claude-code-viewer/fe5e1c67-53e7-4862-81ae-d0e013e3270b.jsonl",
    )
    .display()
    .to_string();
    let store = dir.path().join("store").display().to_string();
    let fresh_store = dir.path().join("fresh").display().to_string();
    let now = "2025-09-03T01:05:00Z";
    let out = dir.path().join("out.jsonl").display().to_string();
    let plain = |store: &str, extra: &[&str]| -> crate::support::Run {
        let mut args = vec![
            "compress", &input, "--store", store, "--now", now, "--out", &out,
        ];
        args.extend_from_slice(extra);
        compress(&args)
    };
    // What a plain run gives on a store of its own.
    let reference = plain(&fresh_store, &[]);
    // A tight-window run, counting the system prompt and tools the session does not hold (the
    // gap `condense stats` shows), commits collapses...
    let tight = plain(
        &store,
        &[
            "--fit",
            "--context-window",
            "30000",
            "--max-output-tokens",
            "8000",
            "--fixed-tokens",
            "16484",
        ],
    );
    assert!(
        collapse_rows(&tight.stderr).contains("committed"),
        "{}",
        tight.stderr
    );
    // ... which a plain run (another window) does not inherit, and says so.
    let after = plain(&store, &[]);
    assert_eq!(tokens_after(&after.stderr), tokens_after(&reference.stderr));
    assert!(
        collapse_rows(&after.stderr).contains(
            "state saved for other settings (window 30,000, max output 8,000) is not used"
        ),
        "{}",
        after.stderr
    );
    // The same tight window again re-applies its collapses and says they come from an earlier
    // run.
    let again = plain(
        &store,
        &[
            "--fit",
            "--context-window",
            "30000",
            "--max-output-tokens",
            "8000",
            "--fixed-tokens",
            "16484",
        ],
    );
    let rows = collapse_rows(&again.stderr);
    assert!(
        rows.contains("uses the state an earlier run saved for this session (window 30,000, max output 8,000; --fresh ignores it)"),
        "{rows}"
    );
    assert!(rows.contains("re-applied 1 collapse"), "{rows}");
    assert_eq!(tokens_after(&again.stderr), tokens_after(&tight.stderr));
    // --fresh ignores it and says so; the result is what a first run gives.
    let fresh = plain(
        &store,
        &[
            "--fit",
            "--context-window",
            "30000",
            "--max-output-tokens",
            "8000",
            "--fixed-tokens",
            "16484",
            "--fresh",
        ],
    );
    let rows = collapse_rows(&fresh.stderr);
    assert!(
        rows.contains("--fresh: the state saved by earlier runs is ignored and replaced"),
        "{rows}"
    );
    assert!(!rows.contains("re-applied"), "{rows}");
    assert_eq!(tokens_after(&fresh.stderr), tokens_after(&tight.stderr));
}
