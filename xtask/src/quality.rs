//! `cargo xtask eval [--check]`: docs/quality.md from `condense eval --json` on the shipped
//! transcripts. Deterministic: no timings, no dates, relative paths, so rerunning without
//! changes gives the same bytes.

use anyhow::{bail, Context, Result};
use serde_json::Value;
use std::fmt::Write;
use std::path::Path;
use std::process::Command;

/// What `cargo xtask eval` evaluates, relative to the repository root.
const INPUTS: &[&str] = &[
    "tests/fixtures/transcripts",
    "examples/claude-code-session.jsonl",
];

/// How many lost probes of one kind the page lists per pipeline.
const SHOW_LOST: usize = 8;

/// Runs `bin eval --json` on the inputs from `root` and writes (or, `check`, compares)
/// docs/quality.md.
pub fn quality_docs(root: &Path, bin: &Path, plugins: &Path, check: bool) -> Result<()> {
    let out = Command::new(bin)
        .arg("eval")
        .arg("--json")
        .args(INPUTS)
        .current_dir(root)
        .env("CONDENSE_PLUGIN_PATH", plugins)
        .output()
        .context("running condense eval")?;
    if !out.status.success() {
        bail!(
            "condense eval failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    let report: Value =
        serde_json::from_slice(&out.stdout).context("reading condense eval --json")?;
    let page = render(&report);
    let path = root.join("docs/quality.md");
    if check {
        let current = std::fs::read_to_string(&path).unwrap_or_default();
        if current != page {
            bail!("docs/quality.md is out of date: run `cargo xtask eval`");
        }
        eprintln!("xtask: docs/quality.md is current");
    } else {
        std::fs::write(&path, page)?;
        eprintln!("xtask: wrote {}", path.display());
    }
    Ok(())
}

fn num(v: &Value) -> String {
    condense_text::thousands(v.as_u64().unwrap_or(0) as usize)
}

fn pct(v: &Value) -> String {
    format!("{:.1}%", v.as_f64().unwrap_or(0.0) * 100.0)
}

fn hits(v: &Value) -> String {
    format!(
        "{}/{}",
        v["hits"].as_u64().unwrap_or(0),
        v["total"].as_u64().unwrap_or(0)
    )
}

/// Inline code that survives backticks and pipes in the text.
fn code(s: &str) -> String {
    let s = s.replace('|', "\\|").replace('\n', " ");
    if s.contains('`') {
        format!("`` {s} ``")
    } else {
        format!("`{s}`")
    }
}

fn scores_row(o: &mut String, first: &str, t: &Value) {
    let s = &t["scores"];
    let unfit = match t["unfit"].as_u64().unwrap_or(0) {
        0 => String::new(),
        n => format!(" ({n} does not fit)"),
    };
    let _ = writeln!(
        o,
        "| {first} | {}{unfit} | {} | {} | {} | {} | {} |",
        num(&t["tokens_after"]),
        pct(&t["cut"]),
        hits(&s["artifact"]),
        hits(&s["errors"]),
        hits(&s["request"]),
        hits(&s["integrity"]),
    );
}

fn lost_lines(o: &mut String, pipeline: &str, lost: &[(&str, Vec<String>)]) {
    for (kind, items) in lost {
        let kind = if items.len() == 1 {
            kind.strip_suffix('s').unwrap_or(kind)
        } else {
            kind
        };
        if items.is_empty() {
            continue;
        }
        let shown: Vec<String> = items.iter().take(SHOW_LOST).map(|i| code(i)).collect();
        let more = if items.len() > SHOW_LOST {
            format!(" (+{} more)", items.len() - SHOW_LOST)
        } else {
            String::new()
        };
        let _ = writeln!(
            o,
            "- `{pipeline}` lost {} {kind}: {}{more}",
            items.len(),
            shown.join(", ")
        );
    }
}

fn strings(v: &Value) -> Vec<String> {
    match v {
        Value::Array(a) => a
            .iter()
            .filter_map(|x| x.as_str().map(str::to_string))
            .collect(),
        Value::String(s) => vec![s.clone()],
        _ => Vec::new(),
    }
}

fn render(r: &Value) -> String {
    let empty = Vec::new();
    let mut o = String::new();
    o.push_str(INTRO);
    o.push_str("\n## Per input\n");
    for file in r["inputs"].as_array().unwrap_or(&empty) {
        let name = file["file"].as_str().unwrap_or("");
        let format = file["format"].as_str().unwrap_or("");
        let convs = file["conversations"].as_array().unwrap_or(&empty);
        let _ = write!(o, "\n### `{name}`\n\n");
        if let Some(why) = file["skipped"].as_str() {
            let _ = writeln!(
                o,
                "{format}, {} conversation{}: skipped, {why}.",
                convs.len(),
                if convs.len() == 1 { "" } else { "s" }
            );
            continue;
        }
        o.push_str("| conversation | format | tokens before | window | fit limit |\n");
        o.push_str("|---|---|---:|---:|---:|\n");
        for c in convs {
            let label = c["label"].as_str().filter(|l| !l.is_empty()).unwrap_or("-");
            match c["skipped"].as_str() {
                Some(why) => {
                    let _ = writeln!(
                        o,
                        "| {label} | {format} | {} | skipped: {why} | |",
                        num(&c["tokens_before"])
                    );
                }
                None => {
                    let _ = writeln!(
                        o,
                        "| {label} | {format} | {} | {} | {} |",
                        num(&c["tokens_before"]),
                        num(&c["window"]["context_window"]),
                        num(&c["window"]["limit"])
                    );
                }
            }
        }
        o.push('\n');
        o.push_str(TABLE_HEAD);
        let totals = file["totals"].as_array().unwrap_or(&empty);
        for t in totals {
            scores_row(&mut o, &code(t["pipeline"].as_str().unwrap_or("")), t);
        }
        let mut any = false;
        for (i, t) in totals.iter().enumerate() {
            let pipeline = t["pipeline"].as_str().unwrap_or("");
            let mut lost: Vec<(&str, Vec<String>)> = vec![
                ("artifacts", Vec::new()),
                ("errors", Vec::new()),
                ("requests", Vec::new()),
                ("integrity checks", Vec::new()),
            ];
            for c in convs {
                let l = &c["results"][i]["lost"];
                for (slot, key) in
                    lost.iter_mut()
                        .zip(["artifacts", "errors", "request", "integrity"])
                {
                    slot.1.extend(strings(&l[key]));
                }
            }
            if lost.iter().any(|(_, v)| !v.is_empty()) {
                if !any {
                    o.push_str("\nLost probes:\n\n");
                    any = true;
                }
                lost_lines(&mut o, pipeline, &lost);
            }
        }
    }
    o.push_str("\n## Totals\n\n");
    let inputs = r["inputs"].as_array().unwrap_or(&empty);
    let all: Vec<&Value> = inputs
        .iter()
        .flat_map(|f| f["conversations"].as_array().unwrap_or(&empty))
        .collect();
    let evaluated = all.iter().filter(|c| c["skipped"].is_null()).count();
    let _ = writeln!(
        o,
        "{evaluated} conversations evaluated in {} files; {} skipped as not long enough to need \
         compressing (under {} tokens).\n",
        inputs.len(),
        all.len() - evaluated,
        num(&r["settings"]["min_tokens"])
    );
    o.push_str(TABLE_HEAD);
    for t in r["totals"].as_array().unwrap_or(&empty) {
        scores_row(&mut o, &code(t["pipeline"].as_str().unwrap_or("")), t);
    }
    o.push_str(PROBES);
    o
}

const TABLE_HEAD: &str = "| pipeline | tokens after | cut | artifact | errors | request | \
integrity |\n|---|---:|---:|---:|---:|---:|---:|\n";

const INTRO: &str = "# Retention quality

What survives compression: `condense eval` runs the default pipeline and three baselines on
every shipped transcript at a window so tight that each conversation must lose 85% of its
tokens, then checks the output for facts taken from the ORIGINAL conversation — the paths the
agent wrote, the errors it hit, the user's last request — and for integrity. The probes are
computed by `crates/condense-eval`, code independent of the stages (which keep these facts with
`crates/condense-retain`): a stage cannot pass by sharing a bug with its judge.

Regenerate this page with `cargo xtask eval` (`cargo xtask eval --check` fails when it is out
of date). Run the same on your own transcripts and pipelines with `condense eval FILE... -p
PIPELINE` (`condense eval --help`).

How the runs are set up:

- **The window.** Each conversation gets its own: the fit limit (what the conversation may use:
  the window less the output reserve) is `ceil(0.15 × tokens before)`, the output reserve and
  the model's maximum output are an eighth of the window. Every pipeline and baseline of a
  conversation runs at the same window, with the recovery chain (`compress --fit`): levels are
  forced until the conversation fits.
- **The time.** Stages see 2100-01-01T00:00:00Z: the prompt cache is cold, as when a user
  resumes an old session — the realistic, harder case.
- **The baselines.** `truncate-oldest` drops the oldest messages until the conversation fits
  (the first user message stays); `mask+truncate` first masks all but the last five results of
  each tool (observation-mask), then truncates; `autocompact` is level 5 alone (one summary).
- **Conversations under 10,000 tokens** are not long enough to need compressing and are
  skipped (all 200 tau-bench conversations are).
";

const PROBES: &str = "
## How the probes are built

All texts are the decoded model strings, never raw JSON bytes. A probe is *kept* when the
compressed conversation's text — the system prompt, every message's text blocks, tool call
names and input JSON, tool result texts, in order (event lines excluded) — contains it as an
exact substring.

- **Artifact probes: the paths the agent wrote.** A path is written when a tool call created,
  overwrote, edited, appended to, moved or copied to, or deleted it, as the call spelled it
  (a leading `./` removed). Recognised: file tools (`Write`, `write_file`, `create_file`,
  `Edit`, `MultiEdit`, `NotebookEdit`, `edit_file`, `str_replace`, `insert`, `replace`, with the
  path in `file_path`, `path`, `notebook_path`, `filepath` or `filename`); editor tools with a
  `command` (`str_replace_editor`, `str_replace_based_edit_tool`, `text_editor`, `file_editor`,
  `edit_tool`, OpenHands `edit`: `create`, `str_replace`, `insert`, `undo_edit`, `edit`,
  `write`); `apply_patch` / `patch` (`*** Add File:`, `*** Update File:`, `*** Delete File:`,
  `*** Move to:`, also inside a shell command); shell tools (`bash`, `execute_bash`, `shell`,
  `exec_command`, ...: `> f`, `>> f`, `&> f`, `tee`, `sed -i`, here-documents, `mv` (both
  paths), `cp` (the destination), `rm`, `touch`, `mkdir`). Words with globs, `$`, backquotes or
  braces are skipped; `/dev/...` is never a path. A file tool call whose result is an error
  wrote nothing; a failed shell command may have.
- **Error probes: the errors the agent hit.** A tool result is an error when it says
  `is_error: true`, when its text shows a non-zero exit status (`<returncode>N</returncode>`,
  `exit code N`, a first line `Exit code: N`, `Process exited with code N`) or its OpenHands
  event has a non-zero `exit_code`, or when it holds a Python traceback. Its probe is its
  first meaningful line: with the `<returncode>N</returncode>` element and the wrapper tags
  (`<output>`, `<tool_use_error>`, `<error>` and their closing tags) removed, the exception line
  that ends a traceback; else the first line that is not a warning (`warning`, `npm warn`,
  `warn ` at its start) and has an error word (`error`, `Error`, `FAIL`, `fatal`, `panicked`,
  `Exception`, `No such file`, `not found`, `cannot`, `denied`, `invalid`, `failed`,
  `malformed`, `unknown`, `refused`, ...); else the first line that is not a warning; else the
  first line; all of it after the header Codex writes before a command's output (`Chunk ID:`,
  `Wall time:`, `Process exited with code N`, `Original token count:`, `Output:`). Trimmed and
  cut to 200 characters. A result whose text is only an exit status has no line and no probe. Distinct lines are distinct probes.
- **The request probe: the user's last request.** The last user message with text that is not
  a sidechain or meta line (Claude Code), not a condense message, and whose request text is
  not empty, an interruption, a local-command caveat, a continuation preamble or Codex's
  session prefix (`# AGENTS.md instructions for ...`, `<environment_context>`,
  `<user_instructions>`). Its request
  text: the text blocks joined, `<system-reminder>` spans removed, a slash command written as
  `/name args`, trimmed. Compared with `\\r\\n` read as `\\n`.
- **Integrity: four checks.** Every tool result still answers an earlier tool call (no orphan
  the original did not have); tool_use ids and message ids stay unique; the output, written in
  its format and read back, is the conversation the pipeline produced (ids a format derives
  from positions, and the wrapper lines it gives created messages, aside).

## What the probes cannot see

- **Substring presence is not understanding.** A path kept inside a list of 200 paths, or an
  error line kept without what caused it, counts as kept. A short probe (a path like `src`, an
  error line like `Error`) is kept by almost anything that mentions it.
- **The first meaningful line is not always the error.** It is the first line that looks like
  one: a log that prints `error: ...` about something harmless before the real failure stands
  for that failure, and different failures that print the same first error line count as one
  probe. A failure with no output but its exit status is not probed at all.
- **Paths written in other ways are not probed**: by scripts (`python fix.py`, `npm install`),
  by `git` (`git mv`, `git checkout -- f`), `ln`, `unzip`, `tar`, editors run in a shell, or tools
  with other names or argument keys. Paths built from variables or globs are skipped.
- **Errors that are not flagged are not probed**: an error printed by a command that exits 0,
  a failing test run whose harness reports no exit code, a tool that reports failure only in
  prose. Warnings are probed only when nothing else in the result looks like an error.
- **Only the last request is probed.** Earlier requests, the task's constraints and the
  user's corrections are not. Agents that send tool output back as user text (SWE-agent's
  `.traj` observations) make that output the last request.
- **Decisions, plans and next steps are not probed**: only the optional LLM judge (`condense
  eval --judge anthropic|openai --judge-model M`) asks about them (artifact, recall,
  continuation and decision questions, graded 0-5 against the original). The judge is
  non-deterministic and costs eight API calls per output, so this page does not use it.
- **One window, one time.** Each conversation runs once, at 15% of its size with a cold cache;
  a pipeline may rank differently at other windows or with a hot cache.
- **The transcripts are few**: a handful of sessions from public projects, in five agent
  formats. They are evidence, not a benchmark.
";
