//! The retained record of a real Claude Code session (`examples/claude-code-session.jsonl`:
//! an orchestrator that builds a TODO app through sub-agents).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use condense_formats::{read, ReadOptions};
use condense_retain::{FileStatus, Retained};
use serde_json::Value;
use std::collections::HashSet;
use std::path::PathBuf;

fn session_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples/claude-code-session.jsonl")
}

fn retained() -> Retained {
    let bytes = std::fs::read(session_path()).unwrap();
    let doc = read(&bytes, "claude-code-session.jsonl", &ReadOptions::default()).unwrap();
    Retained::from_messages(&doc.conversations()[0].messages)
}

/// A deterministic stand-in for a tokenizer: a token per 4 bytes.
fn count(s: &str) -> usize {
    s.len().div_ceil(4)
}

/// `(path, failed)` of every `Write`/`Edit`/`MultiEdit` call, straight from the JSONL.
fn file_tool_calls() -> Vec<(String, bool)> {
    let text = std::fs::read_to_string(session_path()).unwrap();
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let blocks = || {
        lines
            .iter()
            .filter_map(|l| l.pointer("/message/content")?.as_array())
            .flatten()
    };
    let failed: HashSet<&str> = blocks()
        .filter(|b| b["type"] == "tool_result" && b["is_error"] == true)
        .filter_map(|b| b["tool_use_id"].as_str())
        .collect();
    blocks()
        .filter(|b| b["type"] == "tool_use")
        .filter(|b| matches!(b["name"].as_str(), Some("Write" | "Edit" | "MultiEdit")))
        .map(|b| {
            let path = b["input"]["file_path"].as_str().unwrap().to_string();
            (path, failed.contains(b["id"].as_str().unwrap()))
        })
        .collect()
}

#[test]
fn every_written_path_of_the_session_is_kept() {
    let r = retained();
    let calls = file_tool_calls();
    assert!(calls.len() > 40);
    let rendered = r.render(1_000_000, &count);
    for budget in [1, 300, 1_000_000] {
        let out = r.render(budget, &count);
        for (path, failed) in &calls {
            if !failed {
                assert!(
                    out.text.contains(&format!("`{path}`")),
                    "{path} at {budget}"
                );
                let status = r.artifacts.get(path).map(|a| a.status);
                assert!(
                    status.is_some_and(FileStatus::written),
                    "{path}: {status:?}"
                );
            }
        }
        assert!(out
            .text
            .contains("Thanks! Please update CLAUDE.md for current changes"));
    }
    // Parsing the rendering back gives the same written paths, errors and requests.
    let back = Retained::parse(&rendered.text);
    let written = |r: &Retained| -> Vec<(String, FileStatus)> {
        let mut v: Vec<_> = r
            .artifacts
            .written()
            .map(|a| (a.path.clone(), a.status))
            .collect();
        v.sort_by(|a, b| a.0.cmp(&b.0));
        v
    };
    assert_eq!(written(&back), written(&r));
    assert_eq!(back.requests, r.requests);
    let lines = |r: &Retained| {
        r.errors
            .entries
            .iter()
            .map(|e| e.line.clone())
            .collect::<Vec<_>>()
    };
    assert_eq!(lines(&back), lines(&r));
}

#[test]
fn snapshot_of_the_trail_and_ledger() {
    let r = retained();
    let full = r.render(1_000_000, &count);
    assert!(!full.over_budget);
    insta::assert_snapshot!("full", full.text);
    // The mandatory part (every written path, the last request) and 120 tokens more.
    let floor = r.render(0, &count);
    assert!(floor.over_budget);
    let budget = floor.tokens + 120;
    let tight = r.render(budget, &count);
    assert!(tight.tokens <= budget);
    insta::assert_snapshot!(
        "tight",
        format!(
            "{}\n--\ntokens {}, {:?}",
            tight.text,
            tight.tokens,
            Omitted::of(&tight)
        )
    );
}

#[derive(Debug)]
#[allow(dead_code)]
struct Omitted {
    compact_files: bool,
    requests: usize,
    shortened: usize,
    reads: usize,
    resolved_errors: usize,
    unresolved_errors: usize,
}

impl Omitted {
    fn of(r: &condense_retain::Rendered) -> Omitted {
        Omitted {
            compact_files: r.compact_files,
            requests: r.requests_omitted,
            shortened: r.requests_shortened,
            reads: r.reads_omitted,
            resolved_errors: r.resolved_errors_omitted,
            unresolved_errors: r.unresolved_errors_omitted,
        }
    }
}
