//! Issue 13's "Done when", from one run: first runs against one cold count, the per-turn cost
//! of a new `condense compress` process, start-up, scaling per stage, peak memory, and (with
//! `--peers`) Python tiktoken and LangChain side by side. Ends with one table of the ratios.

use crate::gen::{self, anthropic_file, generated_conversation, median_ms, turn};
use crate::process::{self, condense, Finished};
use crate::scaling;
use anyhow::{Context, Result};
use condense_model::Conversation;
use condense_tokens::{TokenCounter, TokenizerKind};
use std::path::{Path, PathBuf};

/// `--now` for whole processes: the same clock as [`scaling::LATE_MS`].
const NOW: &str = "2030-01-01T00:00:00Z";
/// Turns appended one after another past the first appended turn.
const SUCCESSIVE_TURNS: usize = 10;

/// One row of the closing table.
pub(crate) struct Row {
    pub what: String,
    pub measured: String,
    pub target: String,
    pub met: Option<bool>,
}

/// Where the inputs of the whole-process figures are written.
struct Files {
    dir: tempfile::TempDir,
}

impl Files {
    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }
    fn write(&self, name: &str, conv: &Conversation) -> Result<(PathBuf, u64)> {
        let bytes = anthropic_file(conv)?;
        let path = self.path(name);
        std::fs::write(&path, &bytes).with_context(|| path.display().to_string())?;
        Ok((path, bytes.len() as u64))
    }
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap_or_default()
}

/// `condense compress INPUT --store STORE --out OUT` at the bench's fixed time.
fn compress(input: &Path, store: &Path, out: &Path) -> Result<std::process::Command> {
    condense(&[
        "compress",
        s(input),
        "--store",
        s(store),
        "--out",
        s(out),
        "--now",
        NOW,
    ])
}

/// A first `condense compress` of `input` on a fresh store (removed before each run).
fn cold_compress(runs: usize, input: &Path, store: &Path, out: &Path) -> Result<Finished> {
    process::median(
        runs,
        |_| {
            if store.exists() {
                std::fs::remove_dir_all(store)?;
            }
            Ok(())
        },
        |_| compress(input, store, out),
    )
}

/// The commonest input, a Claude Code session (JSONL), compressed once per turn: its first
/// run on a fresh store, and a run on the whole session after one on all but its last lines.
struct JsonlTurn {
    bytes: usize,
    appended: usize,
    first: Finished,
    turn: Finished,
}

/// How many times over the long Claude Code session holds the shipped one's lines, and how
/// many lines of one copy more its appended turn is.
const TILED_COPIES: usize = 20;
const TILED_TURN: usize = 12;

impl JsonlTurn {
    /// Its row of the figures, the session described as `what`.
    fn row(&self, what: &str) -> String {
        format!(
            "| {what}: first run on a fresh store / one appended turn ({} lines), whole process | {:.1} ms / {:.1} ms | the turn {:.1}% of the first run |",
            self.appended,
            self.first.ms,
            self.turn.ms,
            self.turn.ms / self.first.ms * 100.0
        )
    }
}

/// The shipped Claude Code session (`examples/claude-code-session.jsonl`).
fn shipped_session() -> Result<String> {
    std::fs::read_to_string(gen::repo().join("examples/claude-code-session.jsonl"))
        .context("reading examples/claude-code-session.jsonl")
}

/// The long Claude Code session ([`gen::tiled_claude_code`]): before its appended turn, and
/// whole.
pub(crate) fn tiled_session() -> Result<(String, String)> {
    gen::tiled_claude_code(&shipped_session()?, TILED_COPIES, TILED_TURN)
}

/// The shipped Claude Code session, its last tenth appended as a turn; and a long session made
/// of it ([`gen::tiled_claude_code`]: 15.5 MB, compressed at every run, where the shipped one
/// is under the window).
fn claude_code_turns(files: &Files, runs: usize) -> Result<[JsonlTurn; 2]> {
    let session = shipped_session()?;
    let lines: Vec<&str> = session.split_inclusive('\n').collect();
    // The last tenth of the lines: a few turns of the session's own.
    let appended = lines.len() / 10;
    let before = lines[..lines.len() - appended].concat();
    let shipped = jsonl_turn(files, "cc", (&before, &session), appended, runs)?;
    let (before, whole) = tiled_session()?;
    let tiled = jsonl_turn(files, "cc-tiled", (&before, &whole), TILED_TURN, runs)?;
    Ok([shipped, tiled])
}

/// A JSONL session's first run on a fresh store (`whole`), and a run on it after one on
/// `before` (all but its last `appended` lines), named `name` in the files.
fn jsonl_turn(
    files: &Files,
    name: &str,
    (before, whole): (&str, &str),
    appended: usize,
    runs: usize,
) -> Result<JsonlTurn> {
    let path = |what: &str| files.path(&format!("{name}-{what}"));
    let (before_file, whole_file) = (path("before.jsonl"), path("whole.jsonl"));
    std::fs::write(&before_file, before)?;
    std::fs::write(&whole_file, whole)?;
    let (store, out) = (path("store"), path("out.jsonl"));
    let first = cold_compress(runs, &whole_file, &store, &out)?;
    let turn = process::median(
        runs,
        |_| {
            if store.exists() {
                std::fs::remove_dir_all(&store)?;
            }
            process::run(&mut compress(&before_file, &store, &out)?).map(|_| ())
        },
        |_| compress(&whole_file, &store, &out),
    )?;
    Ok(JsonlTurn {
        bytes: whole.len(),
        appended,
        first,
        turn,
    })
}

/// How many runs of each size [`memory`] takes the medians of.
const MEMORY_RUNS: usize = 5;

/// Peak memory of whole `condense compress` runs (default pipeline, fresh store) on the tiny
/// input and on 1x, 2x, 4x (medians of [`MEMORY_RUNS`]), measured before this process grows:
/// the inputs are written by a child (`condense-bench inputs DIR`), so this process never
/// holds them.
pub(crate) struct Memory {
    /// This process's own high-water mark when it spawned them (a floor of every figure).
    parent: u64,
    runs: Vec<(&'static str, u64, Finished)>,
}

pub(crate) fn memory() -> Result<Memory> {
    let dir = tempfile::tempdir()?;
    let exe = std::env::current_exe()?;
    process::run(
        std::process::Command::new(exe)
            .arg("inputs")
            .arg(dir.path()),
    )?;
    let (store, out) = (dir.path().join("store"), dir.path().join("out.json"));
    let parent = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|st| {
            st.lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        })
        .map_or(0, |kb| kb * 1024);
    let sizes = [
        ("tiny (the fixed part)", "tiny.json"),
        ("1x", "x1.json"),
        ("2x", "x2.json"),
        ("4x", "x4.json"),
    ];
    // Each size MEMORY_RUNS times, in rounds (a slow or fat spell of the host falls on every
    // size alike), and the median time and the median peak of each: one run's peak moves by
    // about a megabyte with what of the binary the page cache holds (the kernel maps a faulting
    // page's cached neighbours too), a third of the fixed part's share of the 1x figure.
    let mut all: Vec<Vec<Finished>> = vec![Vec::new(); sizes.len()];
    for _ in 0..MEMORY_RUNS {
        for ((_, name), runs) in sizes.iter().zip(&mut all) {
            runs.push(cold_compress(1, &dir.path().join(name), &store, &out)?);
        }
    }
    let mut runs = Vec::new();
    for ((label, name), mut finished) in sizes.into_iter().zip(all) {
        let bytes = std::fs::metadata(dir.path().join(name))?.len();
        let middle = finished.len() / 2;
        finished.sort_by(|a, b| a.ms.total_cmp(&b.ms));
        let ms = finished[middle].ms;
        finished.sort_by_key(|f| f.max_rss);
        let max_rss = finished[middle].max_rss;
        runs.push((label, bytes, Finished { ms, max_rss }));
    }
    Ok(Memory { parent, runs })
}

pub(crate) fn run(runs: usize, python: Option<&Path>, memory: Memory) -> Result<()> {
    let kind = TokenizerKind::O200k;
    let counter = TokenCounter::new(kind);
    println!("\n## Issue 13: speed users feel (medians of {runs} runs unless said)\n");
    let x1 = generated_conversation(1_000_000, &counter);
    let x2 = generated_conversation(2_000_000, &counter);
    let x4 = generated_conversation(4_000_000, &counter);
    let mut rows = Vec::new();

    // In-process: the default pipeline's first run against one cold count of the same input.
    let cold = median_ms(runs, || {
        let _ = TokenCounter::new(kind).count_conversation(&x1);
    });
    let default = scaling::load(condense_host::pipeline::DEFAULT_PIPELINE)?;
    let first = scaling::first_run_ms(&default, &x1, runs)?;
    println!("| figure | median | ratio |\n|---|---|---|");
    println!("| 1M-token conversation: one cold count, in-process | {cold:.1} ms | |");
    println!(
        "| default pipeline, first run on a fresh store, in-process | {first:.1} ms | {:.2}x one cold count |",
        first / cold
    );
    rows.push(Row {
        what: "default pipeline, first run on a fresh store, 1M tokens / one cold count".into(),
        measured: format!("{:.2}x", first / cold),
        target: "<= 1.5x".into(),
        met: Some(first / cold <= 1.5),
    });

    // Whole processes, the real binary, on the same conversation written as a request body.
    let files = Files {
        dir: tempfile::tempdir()?,
    };
    let (f1, b1) = files.write("x1.json", &x1)?;
    let mut tiny = Conversation::default();
    tiny.messages.extend(turn(0));
    let (ft, bt) = files.write("tiny.json", &tiny)?;
    let mut grown = gen::grown_turn_by_turn(&x1, SUCCESSIVE_TURNS + 1).into_iter();
    let plus = grown.next().context("no appended turn")?;
    let (fp, _) = files.write("x1-plus-one-turn.json", &plus)?;
    let mut successive = Vec::new();
    for (k, grown) in grown.enumerate() {
        successive.push(
            files
                .write(&format!("x1-plus-{}-turns.json", k + 2), &grown)?
                .0,
        );
    }
    let (store, out) = (files.path("store"), files.path("out.json"));
    let whole = runs.min(5);
    let cold_proc = cold_compress(whole, &f1, &store, &out)?;
    let stats_1x = process::median(runs, |_| Ok(()), |_| condense(&["stats", s(&f1)]))?;
    let compressed_once = |_: usize| -> Result<()> {
        if store.exists() {
            std::fs::remove_dir_all(&store)?;
        }
        process::run(&mut compress(&f1, &store, &out)?).map(|_| ())
    };
    let append = process::median(whole, compressed_once, |_| compress(&fp, &store, &out))?;
    // The same run over the whole input (`--no-resume`): what the resume point saves.
    let append_whole = process::median(whole, compressed_once, |_| {
        let mut cmd = compress(&fp, &store, &out)?;
        cmd.arg("--no-resume");
        Ok(cmd)
    })?;
    // Turn after turn: the first appended turn (above) and the ones after it, each a new
    // process on the store the previous one left. A context-collapse commit on most of them
    // (the projection sits at its commit target) reads back the originals it summarizes.
    compressed_once(0)?;
    process::run(&mut compress(&fp, &store, &out)?)?;
    let mut turns: Vec<f64> = Vec::with_capacity(successive.len());
    for f in &successive {
        turns.push(process::run(&mut compress(f, &store, &out)?)?.ms);
    }
    turns.sort_by(f64::total_cmp);
    let turn_after_turn = turns[turns.len() / 2];
    let stats_small = process::median(runs.max(21), |_| Ok(()), |_| condense(&["stats", s(&ft)]))?;
    // A turn's floor: the small input compressed again on the store its first run left (its
    // own; the 1M-token session's store is left as it was). What every turn pays whatever its
    // size: the process, the plugins, the store, the output's write and sync.
    let (tiny_store, tiny_out) = (files.path("tiny-store"), files.path("tiny-out.json"));
    process::run(&mut compress(&ft, &tiny_store, &tiny_out)?)?;
    let floor = process::median(
        runs.max(21),
        |_| Ok(()),
        |_| compress(&ft, &tiny_store, &tiny_out),
    )?;
    let [jsonl, tiled] = claude_code_turns(&files, whole)?;
    println!(
        "| `condense stats`, 1M-token request body ({:.1} MB), whole process | {:.1} ms | |",
        b1 as f64 / 1e6,
        stats_1x.ms
    );
    println!(
        "| `condense compress`, default pipeline, fresh store, whole process (the cold run) | {:.1} ms | {:.2}x `stats` |",
        cold_proc.ms,
        cold_proc.ms / stats_1x.ms
    );
    println!(
        "| one turn appended, a new `condense compress` on the same store, whole process | {:.1} ms | {:.1}% of the cold run |",
        append.ms,
        append.ms / cold_proc.ms * 100.0
    );
    println!(
        "| the same with `--no-resume` (the stages over the whole input) | {:.1} ms | {:.1}% of the cold run |",
        append_whole.ms,
        append_whole.ms / cold_proc.ms * 100.0
    );
    println!(
        "| the {SUCCESSIVE_TURNS} turns after the appended one, each a new process on the store the one before left (median) | {turn_after_turn:.1} ms | {:.1}% of the cold run |",
        turn_after_turn / cold_proc.ms * 100.0
    );
    println!(
        "| `condense stats` on a small file ({bt} bytes), default tokenizer, whole process | {:.2} ms | |",
        stats_small.ms
    );
    println!(
        "| a turn's floor: `condense compress` of the same small file again, on the store its first run left | {:.1} ms | {:.1}% of the cold run |",
        floor.ms,
        floor.ms / cold_proc.ms * 100.0
    );
    println!(
        "{}",
        jsonl.row(&format!(
            "Claude Code session (the shipped example, {:.0} KB of JSONL)",
            jsonl.bytes as f64 / 1e3
        ))
    );
    println!(
        "{}",
        tiled.row(&format!(
            "Claude Code session, the shipped one's lines {TILED_COPIES} times over ({:.1} MB of JSONL, compressed at every run)",
            tiled.bytes as f64 / 1e6
        ))
    );
    rows.push(Row {
        what: "one turn appended: new `condense compress` process / the cold run".into(),
        measured: format!("{:.1}%", append.ms / cold_proc.ms * 100.0),
        target: "<= 10%".into(),
        met: Some(append.ms <= cold_proc.ms * 0.10),
    });
    rows.push(Row {
        what: "`condense stats` on a small file, default tokenizer".into(),
        measured: format!("{:.2} ms", stats_small.ms),
        target: "< 10 ms".into(),
        met: Some(stats_small.ms < 10.0),
    });

    // Peak memory of whole `condense compress` processes against the input's size.
    println!(
        "\n| `condense compress`, default pipeline, first run (spawned from a parent of {:.0} MB; medians of {MEMORY_RUNS} runs) | input | time | peak RSS | (RSS - fixed) / input |\n|---|---|---|---|---|",
        memory.parent as f64 / 1e6
    );
    let fixed = memory.runs.first().map_or(0, |r| r.2.max_rss);
    let mut worst_mem = 0.0f64;
    for (i, (label, bytes, f)) in memory.runs.iter().enumerate() {
        let per = f.max_rss.saturating_sub(fixed) as f64 / *bytes as f64;
        let shown = if i == 0 {
            String::new()
        } else {
            worst_mem = worst_mem.max(per);
            format!("{per:.2}x")
        };
        println!(
            "| {label} | {:.2} MB | {:.1} ms | {:.1} MB | {shown} |",
            *bytes as f64 / 1e6,
            f.ms,
            f.max_rss as f64 / 1e6
        );
    }
    // What each byte more of input adds, apart from what a run that compresses pays once: the
    // tiny input compresses nothing, so its run maps less of the stages' code and the
    // tokenizer's tables, and runs fewer threads (2 against 4). Shown, not judged.
    if let (Some((_, b1, one)), Some((_, b4, four))) = (memory.runs.get(1), memory.runs.last()) {
        let slope = four.max_rss.saturating_sub(one.max_rss) as f64 / b4.saturating_sub(*b1) as f64;
        let meets_zero = one.max_rss as f64 - slope * *b1 as f64;
        println!(
            "\nPeak RSS added per input byte, 1x to 4x: {slope:.2}x (that line meets zero input at {:.1} MB; the tiny input's run, which compresses nothing, peaks at {:.1} MB)",
            meets_zero / 1e6,
            fixed as f64 / 1e6
        );
    }
    rows.push(Row {
        what: format!(
            "peak memory up to 4x: (RSS - fixed {:.0} MB) / input size, worst",
            fixed as f64 / 1e6
        ),
        measured: format!("{worst_mem:.2}x"),
        target: "<= 3x".into(),
        met: Some(worst_mem <= 3.0),
    });
    let doublings: Vec<f64> = memory.runs[1..]
        .windows(2)
        .map(|w| w[1].2.ms / w[0].2.ms)
        .collect();
    println!(
        "\nWhole process (`condense compress`, default pipeline, first run) per doubling: {}",
        doublings
            .iter()
            .map(|r| format!("{r:.2}x"))
            .collect::<Vec<_>>()
            .join(", ")
    );

    // Scaling, in-process, every stage.
    let sizes = [(1, x1.clone()), (2, x2), (4, x4)];
    let (worst, stage) = scaling::table(&sizes, runs.min(5))?;
    rows.push(Row {
        what: format!("each stage per doubling, up to 4x: worst ({stage})"),
        measured: format!("{worst:.2}x"),
        target: "about 2x".into(),
        met: Some(worst <= 2.3),
    });

    match python {
        Some(py) => rows.extend(crate::peers::run(
            py,
            runs,
            files.dir.path(),
            &x1,
            &f1,
            &stats_1x,
        )?),
        None => rows.push(Row::peers_missing()),
    }

    print_done_when(13, &rows);
    Ok(())
}

/// The closing table of an issue's figures, `rows` judged against its "Done when".
pub(crate) fn print_done_when(issue: u32, rows: &[Row]) {
    println!("\n### Done when (issue {issue}), this run\n");
    println!("| figure | measured | target | met |\n|---|---|---|---|");
    for r in rows {
        let met = match r.met {
            Some(true) => "yes",
            Some(false) => "**no**",
            None => "-",
        };
        println!("| {} | {} | {} | {met} |", r.what, r.measured, r.target);
    }
}

impl Row {
    fn peers_missing() -> Row {
        Row {
            what: "Python tiktoken and LangChain side by side".into(),
            measured: "not run: `cargo xtask bench --peers`".into(),
            target: "".into(),
            met: None,
        }
    }
}
