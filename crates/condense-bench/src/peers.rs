//! Peers side by side (`cargo xtask bench --peers`, issue 13 item 6): Python tiktoken's count
//! of every message against condense's count and `condense stats`, and LangChain's
//! `trim_messages` to 32k against a `truncate-oldest` pipeline, on the same files, in-process
//! (the work alone, timed inside each program) and as whole processes.
//!
//! The Python side is `xtask/peers/*.py`, run with the interpreter of the `peers` virtualenv
//! that `cargo xtask bench --peers` makes.

use crate::gen::{anthropic_file, median_ms, repo};
use crate::process::{self, condense, Finished};
use crate::scaling;
use crate::speed::Row;
use anyhow::{anyhow, Context, Result};
use condense_model::Conversation;
use condense_tokens::{TokenCounter, TokenizerKind};
use std::path::Path;

/// The budget both trimmers keep to.
const TRIM_TOKENS: usize = 32_000;

fn s(p: &Path) -> &str {
    p.to_str().unwrap_or_default()
}

/// One JSON line a peer script printed.
fn json_line(out: &str, script: &str) -> Result<serde_json::Value> {
    serde_json::from_str(out.trim()).with_context(|| format!("{script} printed {out:?}"))
}

fn field(v: &serde_json::Value, key: &str) -> Result<f64> {
    v[key]
        .as_f64()
        .ok_or_else(|| anyhow!("peer output has no number `{key}`: {v}"))
}

/// The shipped sessions the peers count: the example Claude Code session (the same file as the
/// `d-kimuson__claude-code-viewer` fixture), another Claude Code transcript and a Codex CLI
/// rollout of the test fixtures.
const SHIPPED: &[(&str, &str)] = &[
    (
        "shipped Claude Code session",
        "examples/claude-code-session.jsonl",
    ),
    (
        "Claude Code transcript (DRMacIver/claude-reliability fixture)",
        "tests/fixtures/transcripts/DRMacIver__claude-reliability/transcript.jsonl",
    ),
    (
        "Codex CLI rollout (codemie-ai/codemie-code fixture)",
        "tests/fixtures/transcripts/codemie-ai__codemie-code/rollout-2026-05-11T11-26-55-019e1625-789d-76c0-80ab-3724b5ddb799.jsonl",
    ),
];

/// A shipped session as a request body (the peers read request bodies).
fn shipped_session(dir: &Path, file: &str) -> Result<(Conversation, std::path::PathBuf)> {
    let path = repo().join(file);
    let bytes = std::fs::read(&path).with_context(|| path.display().to_string())?;
    let doc = condense_formats::read(&bytes, file, &Default::default())?;
    let conv = doc
        .conversations()
        .first()
        .cloned()
        .ok_or_else(|| anyhow!("{}: no conversation", path.display()))?;
    let name = Path::new(file)
        .file_name()
        .map_or_else(|| "session".into(), |n| n.to_string_lossy().into_owned());
    let out = dir.join(format!("{name}.request.json"));
    std::fs::write(&out, anthropic_file(&conv)?)?;
    Ok((conv, out))
}

pub(crate) fn run(
    python: &Path,
    runs: usize,
    dir: &Path,
    x1: &Conversation,
    x1_file: &Path,
    stats_x1: &Finished,
) -> Result<Vec<Row>> {
    let kind = TokenizerKind::O200k;
    let mut inputs = Vec::new();
    for (label, file) in SHIPPED {
        let (conv, path) = shipped_session(dir, file)?;
        inputs.push((*label, conv, path, None));
    }
    inputs.push((
        "1M-token conversation",
        x1.clone(),
        x1_file.to_path_buf(),
        Some(*stats_x1),
    ));
    let whole = runs.min(5);
    let mut rows = Vec::new();
    println!(
        "\n### Peers: Python tiktoken and langchain-core (the `peers` virtualenv), same files\n"
    );
    println!("| figure | condense | Python | Python / condense |\n|---|---|---|---|");
    let (mut worst_in, mut worst_whole) = (f64::MAX, f64::MAX);
    for (label, conv, file, stats) in &inputs {
        let (conv, file) = (conv, file.as_path());
        let mut tokens = 0;
        let ours = median_ms(runs, || {
            tokens = TokenCounter::new(kind).count_conversation(conv).total;
        });
        let repeat = runs.to_string();
        let (_, out) = process::run_out(process::python(python, "count.py").args([
            s(file),
            "--repeat",
            &repeat,
        ]))?;
        let v = json_line(&out, "count.py")?;
        let theirs = field(&v, "count_ms")?;
        println!(
            "| {label}: count every message, in-process ({tokens} tokens; tiktoken {}) | {ours:.1} ms | {theirs:.1} ms | {:.2}x |",
            field(&v, "tokens")?,
            theirs / ours
        );
        worst_in = worst_in.min(theirs / ours);
        let stats = match stats {
            Some(f) => *f,
            None => process::median(runs, |_| Ok(()), |_| condense(&["stats", s(file)]))?,
        };
        let py = process::median(
            whole,
            |_| Ok(()),
            |_| Ok(process::python(python, "count.py").tap_arg(s(file))),
        )?;
        println!(
            "| {label}: `condense stats` vs a Python script counting with tiktoken, whole process | {:.1} ms | {:.1} ms | {:.2}x |",
            stats.ms,
            py.ms,
            py.ms / stats.ms
        );
        worst_whole = worst_whole.min(py.ms / stats.ms);

        // Trimming to 32k: LangChain's trim_messages against a truncate-oldest pipeline.
        let toml = format!(
            "[[stage]]\nplugin = \"truncate-oldest\"\n[stage.config]\nmax_tokens = {TRIM_TOKENS}\n"
        );
        let loaded = scaling::load(&toml)?;
        let ours = scaling::first_run_ms(&loaded, conv, runs)?;
        let out_file = dir.join("trimmed.json");
        let budget = TRIM_TOKENS.to_string();
        let (_, out) = process::run_out(process::python(python, "trim.py").args([
            s(file),
            s(&out_file),
            &budget,
            "--repeat",
            &repeat,
        ]))?;
        let v = json_line(&out, "trim.py")?;
        let theirs = field(&v, "trim_ms")?;
        println!(
            "| {label}: trim to {TRIM_TOKENS} tokens, in-process (condense: the whole host on a fresh store; LangChain keeps {} messages) | {ours:.1} ms | {theirs:.1} ms | {:.2}x |",
            field(&v, "kept")?,
            theirs / ours
        );
        let pipeline = dir.join("truncate.toml");
        std::fs::write(&pipeline, &toml)?;
        let store = dir.join("trim-store");
        let ours = process::median(
            whole,
            |_| {
                if store.exists() {
                    std::fs::remove_dir_all(&store)?;
                }
                Ok(())
            },
            |_| {
                condense(&[
                    "compress",
                    s(file),
                    "--pipeline",
                    s(&pipeline),
                    "--store",
                    s(&store),
                    "--out",
                    s(&out_file),
                ])
            },
        )?;
        let theirs = process::median(
            whole,
            |_| Ok(()),
            |_| {
                let mut c = process::python(python, "trim.py");
                c.args([s(file), s(&out_file), &budget]);
                Ok(c)
            },
        )?;
        println!(
            "| {label}: trim to {TRIM_TOKENS} tokens, whole process (read, trim, write) | {:.1} ms | {:.1} ms | {:.2}x |",
            ours.ms,
            theirs.ms,
            theirs.ms / ours.ms
        );
    }
    rows.push(Row {
        what: "counting, in-process: Python tiktoken / condense, worst session".into(),
        measured: format!("{worst_in:.2}x"),
        target: ">= 2x".into(),
        met: Some(worst_in >= 2.0),
    });
    rows.push(Row {
        what: "whole process: Python tiktoken script / `condense stats`, worst session".into(),
        measured: format!("{worst_whole:.2}x"),
        target: ">= 20x".into(),
        met: Some(worst_whole >= 20.0),
    });
    Ok(rows)
}

/// `Command::arg` by value, for closures that build a command.
trait TapArg {
    fn tap_arg(self, arg: &str) -> Self;
}

impl TapArg for std::process::Command {
    fn tap_arg(mut self, arg: &str) -> Self {
        self.arg(arg);
        self
    }
}
