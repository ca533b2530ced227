//! `condense stats DIR` and `condense compress DIR`: every session in a folder, one after
//! another, then a table with a row per file and a total.
//!
//! The sessions are those [`collect_inputs`] finds. A file that cannot be read, parsed or
//! compressed is named on stderr in one line and skipped; the others still run, and the
//! command then exits 1 ([`Skipped::outcome`]).
//!
//! ```text
//! $ condense compress ~/.codex/sessions --out small/
//! condense: skipped /home/me/.codex/sessions/2025/05/01/broken.jsonl:1: invalid JSON: ...
//! condense: 3 files in /home/me/.codex/sessions, outputs under small/
//!   file                                  format          before      after   saved  status
//!   2025/05/01/rollout-a.jsonl            codex           41,203     12,877   68.7%  written
//!   ...
//! ```

use crate::cli::{CompressArgs, ReportFormat, StatsArgs};
use crate::commands::{build_report, compress_input, stats_of, store_dir_for};
use crate::input::{collect_inputs, condensed_name, files, read_at, read_at_knowing, Skipped};
use crate::stats::{self, Stats};
use crate::Failure;
use condense_budget::BudgetConfig;
use condense_host::{LoadedPipeline, Pipeline};
use condense_text::thousands;
use condense_tokens::TokenCounter;
use serde::Serialize;
use std::fmt::Write;
use std::path::{Path, PathBuf};

/// The session files of the folder `dir`, or a usage error when it holds none.
pub(crate) fn sessions_in(
    dir: &Path,
    leave_out: Option<&Path>,
    skipped: &mut Skipped,
) -> Result<Vec<PathBuf>, Failure> {
    let found = collect_inputs(&[dir.to_path_buf()], leave_out, skipped)?;
    if found.is_empty() && skipped.is_empty() {
        return Err(Failure::usage(format!(
            "{}: no session files (.json, .jsonl, .traj) in this folder",
            dir.display()
        )));
    }
    Ok(found)
}

/// `path` relative to the folder the command was given (as given when it is not under it).
fn relative<'p>(path: &'p Path, dir: &Path) -> &'p Path {
    path.strip_prefix(dir).unwrap_or(path)
}

fn percent(saved: usize, before: usize) -> String {
    if before == 0 {
        "-".to_string()
    } else {
        format!("{:.1}%", saved as f64 * 100.0 / before as f64)
    }
}

/// `stats DIR --json`.
#[derive(Serialize)]
struct FolderStats<'a> {
    folder: String,
    files: &'a [Stats],
    total: StatsTotal,
    skipped: &'a Skipped,
}

#[derive(Default, Serialize)]
struct StatsTotal {
    files: usize,
    conversations: usize,
    messages: usize,
    tool_calls: usize,
    total_tokens: usize,
}

/// `condense stats DIR`: each file's table as it is read, then one row per file and a total
/// (or all of it as one JSON object with `--json`).
pub fn stats(
    args: &StatsArgs,
    counter: &TokenCounter,
    budget: &BudgetConfig,
) -> Result<(), Failure> {
    let dir = &args.input.file;
    let mut skipped = Skipped::default();
    let paths = sessions_in(dir, None, &mut skipped)?;
    let mut all: Vec<Stats> = Vec::new();
    for path in &paths {
        let Some(input) = skipped.read(path, |p| read_at(p, &args.input)) else {
            continue;
        };
        let s = stats_of(&input, counter, budget, args);
        if !args.json {
            println!("{}", stats::render(&s));
        }
        all.push(s);
    }
    let total = all.iter().fold(StatsTotal::default(), |mut t, s| {
        t.files += 1;
        t.conversations += s.conversations;
        t.messages += s.messages;
        t.tool_calls += s.tool_calls;
        t.total_tokens += s.total_tokens;
        t
    });
    if args.json {
        let out = FolderStats {
            folder: dir.display().to_string(),
            files: &all,
            total,
            skipped: &skipped,
        };
        crate::output::print_json(&out)?;
    } else {
        print!("{}", render_stats_total(dir, &all, &total, &skipped));
    }
    skipped.outcome(all.len())
}

fn render_stats_total(dir: &Path, all: &[Stats], total: &StatsTotal, skipped: &Skipped) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "{}: {}{}",
        dir.display(),
        files(all.len()),
        skipped.suffix()
    );
    let width = all
        .iter()
        .map(|s| {
            relative(Path::new(&s.source), dir)
                .display()
                .to_string()
                .len()
        })
        .max()
        .unwrap_or(4)
        .max(5);
    let _ = writeln!(
        o,
        "  {:<width$}  {:<12} {:>6} {:>9} {:>10} {:>12}",
        "file", "format", "convs", "messages", "tool calls", "tokens"
    );
    for s in all {
        let _ = writeln!(
            o,
            "  {:<width$}  {:<12} {:>6} {:>9} {:>10} {:>12}",
            relative(Path::new(&s.source), dir).display(),
            s.format,
            thousands(s.conversations),
            thousands(s.messages),
            thousands(s.tool_calls),
            thousands(s.total_tokens)
        );
    }
    let _ = writeln!(
        o,
        "  {:<width$}  {:<12} {:>6} {:>9} {:>10} {:>12}",
        "total",
        "",
        thousands(total.conversations),
        thousands(total.messages),
        thousands(total.tool_calls),
        thousands(total.total_tokens)
    );
    o
}

/// One row of the `compress DIR` summary.
#[derive(Serialize)]
struct Compressed {
    file: String,
    /// Where the output was written (none when the file was skipped).
    #[serde(skip_serializing_if = "Option::is_none")]
    output: Option<String>,
    format: &'static str,
    tokens_before: usize,
    tokens_after: usize,
    /// `written`, `fit by <stage>`, `does not fit` or `skipped`.
    status: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
    /// The per-stage report, as `compress FILE --report json` prints it.
    #[serde(skip_serializing_if = "Option::is_none")]
    report: Option<serde_json::Value>,
}

/// Where `compress DIR` writes the output of `path`: mirrored under `--out DIR` with the same
/// name, else beside it as [`condensed_name`].
fn output_path(path: &Path, dir: &Path, out: Option<&Path>) -> PathBuf {
    match out {
        Some(out) => out.join(relative(path, dir)),
        None => {
            let name = path
                .file_name()
                .map_or("session".into(), |n| n.to_string_lossy().into_owned());
            path.with_file_name(condensed_name(&name))
        }
    }
}

/// The flags `compress DIR` cannot honour, refused before anything runs.
fn check_compress_args(args: &CompressArgs) -> Result<(), Failure> {
    let dir = args.input.file.display();
    match args.out.as_deref() {
        Some(out) if out.as_os_str() == "-" => {
            return Err(Failure::usage(format!(
                "compress {dir}: a folder gives one output per session, written beside each \
                 input or under --out DIR, not to standard output"
            )))
        }
        Some(out) if out.exists() && !out.is_dir() => {
            return Err(Failure::usage(format!(
                "compress {dir}: --out {} is a file; give a folder for the outputs",
                out.display()
            )))
        }
        _ => {}
    }
    if args.session.is_some() {
        return Err(Failure::usage(format!(
            "compress {dir}: --session names one session, and a folder holds many \
             (each file's session id is derived from it)"
        )));
    }
    Ok(())
}

/// `condense compress DIR`: each session compressed with its own store (`.condense/` beside
/// it, or `--store`), written beside it (`a.jsonl` → `a.condensed.jsonl`) or under `--out DIR`
/// (mirroring the relative paths), then a summary table on stderr (JSON with `--report json`).
pub fn compress(
    args: &CompressArgs,
    pipeline: Pipeline,
    now_ms: Option<i64>,
) -> Result<(), Failure> {
    check_compress_args(args)?;
    let dir = &args.input.file;
    let out_dir = args.out.as_deref();
    let mut skipped = Skipped::default();
    let paths = sessions_in(dir, out_dir, &mut skipped)?;
    let loaded = LoadedPipeline::load(pipeline)?;
    let mut rows: Vec<Compressed> = Vec::new();
    for path in &paths {
        let row = match compress_file(path, dir, out_dir, &loaded, now_ms, args) {
            Ok(row) => row,
            // A configuration error would fail every file the same way: stop now.
            Err(f) if f.code == 2 => return Err(f),
            Err(f) => {
                let error = f.message.clone();
                skipped.add(path, f);
                Compressed {
                    file: path.display().to_string(),
                    output: None,
                    format: "",
                    tokens_before: 0,
                    tokens_after: 0,
                    status: "skipped".into(),
                    error: Some(error),
                    report: None,
                }
            }
        };
        rows.push(row);
    }
    match args.report {
        ReportFormat::Json => eprintln!("{}", crate::output::json_text(&rows)?),
        ReportFormat::Text => eprint!("{}", render_compressed(dir, out_dir, &rows, &skipped)),
    }
    let unfit = rows.iter().filter(|r| r.status == "does not fit").count();
    if unfit > 0 {
        return Err(Failure::run(format!(
            "{} {} not fit the window after forcing every level{}; the best results were written",
            files(unfit),
            if unfit == 1 { "does" } else { "do" },
            skipped.suffix()
        )));
    }
    skipped.outcome(rows.iter().filter(|r| r.output.is_some()).count())
}

/// Reads, compresses and writes one session of the folder.
fn compress_file(
    path: &Path,
    dir: &Path,
    out_dir: Option<&Path>,
    loaded: &LoadedPipeline,
    now_ms: Option<i64>,
    args: &CompressArgs,
) -> Result<Compressed, Failure> {
    let store_dir = store_dir_for(args, &loaded.pipeline, Some(path));
    let run_store = crate::known::RunStore::at(&store_dir, args);
    let mut input = run_store.read(|known| read_at_knowing(path, &args.input, known))?;
    let store = run_store.open()?;
    let output = output_path(path, dir, out_dir);
    let mut done = compress_input(&mut input, loaded, (&store, Some(&output)), now_ms, args)?;
    done.write_out()?;
    let format = input.doc.format().as_str();
    let report = build_report(&input.source(), format, &store_dir, &done.runs);
    let status = match (done.unfit.is_empty(), done.fit_by.first()) {
        (false, _) => "does not fit".to_string(),
        (true, Some(by)) => format!("fit by {by}"),
        (true, None) => "written".to_string(),
    };
    Ok(Compressed {
        file: path.display().to_string(),
        output: Some(output.display().to_string()),
        format,
        tokens_before: report.tokens_before,
        tokens_after: report.tokens_after,
        status,
        error: None,
        report: Some(serde_json::to_value(&report).map_err(|e| Failure::run(e.to_string()))?),
    })
}

fn render_compressed(
    dir: &Path,
    out_dir: Option<&Path>,
    rows: &[Compressed],
    skipped: &Skipped,
) -> String {
    let mut o = String::new();
    let written = rows.iter().filter(|r| r.output.is_some()).count();
    let _ = writeln!(
        o,
        "condense: {} in {}, {}{}",
        files(written),
        dir.display(),
        match out_dir {
            Some(out) => format!("outputs under {}", out.display()),
            None => "each output beside its input as NAME.condensed.EXT".to_string(),
        },
        skipped.suffix()
    );
    let name = |r: &Compressed| relative(Path::new(&r.file), dir).display().to_string();
    let width = rows.iter().map(|r| name(r).len()).max().unwrap_or(4).max(4);
    let _ = writeln!(
        o,
        "  {:<width$}  {:<12} {:>11} {:>11} {:>7}  status",
        "file", "format", "before", "after", "saved"
    );
    let (mut before, mut after) = (0, 0);
    for r in rows {
        if r.output.is_none() {
            // Skipped: nothing was counted (why is on the line naming it, above).
            let _ = writeln!(
                o,
                "  {:<width$}  {:<12} {:>31}  {}",
                name(r),
                "",
                "",
                r.status
            );
            continue;
        }
        before += r.tokens_before;
        after += r.tokens_after;
        let saved = r.tokens_before.saturating_sub(r.tokens_after);
        let _ = writeln!(
            o,
            "  {:<width$}  {:<12} {:>11} {:>11} {:>7}  {}",
            name(r),
            r.format,
            thousands(r.tokens_before),
            thousands(r.tokens_after),
            percent(saved, r.tokens_before),
            r.status
        );
    }
    let _ = writeln!(
        o,
        "  {:<width$}  {:<12} {:>11} {:>11} {:>7}",
        "total",
        "",
        thousands(before),
        thousands(after),
        percent(before.saturating_sub(after), before)
    );
    o
}
