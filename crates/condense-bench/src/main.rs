//! Benchmarks, run with `cargo xtask bench` (release build, plugins built first).
//!
//! Every figure is the median of several runs; ratios are computed from figures measured in the
//! same run, since the machine is noisy. Results go to stdout as a Markdown table for
//! docs/benchmarks.md.

use anyhow::{Context, Result};
use condense_abi::testing::MemoryHost;
use condense_abi::Plugin;
use condense_formats::{read, ReadOptions};
use condense_host::{session_key, LoadedPipeline, Pipeline, RunOptions};
use condense_model::Conversation;
use condense_tokens::{TokenCounter, TokenizerKind};
use std::path::PathBuf;

mod gen;
mod http;
mod peers;
mod process;
mod profile;
mod proxy;
mod scaling;
mod speed;

use gen::{concatenated_text, generated_conversation, median_ms, repo, test_plugin_path};

/// The test host counting with `kind` (the boundary benchmarks need only counting).
fn bench_host(kind: TokenizerKind) -> MemoryHost {
    let counter = TokenCounter::new(kind);
    MemoryHost::default()
        .with_session("bench")
        .with_counter(move |text| counter.count_text(text))
}

/// The command line: `[RUNS] [--python PATH]`, or a mode first (`issue13`, `scaling`, the
/// `profile-*` modes of `profile.rs`).
struct Options {
    /// Runs per figure (the median is taken).
    runs: usize,
    /// The `peers` virtualenv's interpreter (`cargo xtask bench --peers` passes it).
    python: Option<PathBuf>,
}

impl Options {
    fn parse() -> Options {
        let args: Vec<String> = std::env::args().skip(1).collect();
        Options {
            runs: args.iter().find_map(|a| a.parse().ok()).unwrap_or(7),
            python: args
                .iter()
                .position(|a| a == "--python")
                .and_then(|i| args.get(i + 1))
                .map(PathBuf::from),
        }
    }
}

fn main() -> Result<()> {
    let opts = Options::parse();
    // Peak memory first, while this process is still small: a child's peak (ru_maxrss) starts
    // from its parent's high-water mark (the spawn shares the parent's memory until exec).
    let memory = || speed::memory();
    let mode = std::env::args().nth(1);
    if mode.as_deref() != Some("inputs") {
        gen::check_plugins()?;
    }
    match mode.as_deref() {
        // Only issue 13's figures (the last part of a full run).
        Some("issue13") => return speed::run(opts.runs, opts.python.as_deref(), memory()?),
        // The `profile-*` modes (module `profile`): one piece of work in a loop, for a profiler.
        Some(mode) if mode.starts_with("profile-") => return profile::run(mode),
        // Only the `condense serve` figures (issue 14).
        Some("proxy") => return proxy::run(opts.runs),
        // Only the scaling table: every stage at 1x, 2x, 4x (CONDENSE_BENCH_ONLY=a,b narrows).
        Some("scaling") => {
            let counter = TokenCounter::new(TokenizerKind::O200k);
            let sizes: Vec<(usize, Conversation)> = [1, 2, 4]
                .map(|k| (k, generated_conversation(k * 1_000_000, &counter)))
                .into();
            scaling::table(&sizes, opts.runs.min(5))?;
            return Ok(());
        }
        // The generated sessions at 1x, 2x, 4x as request bodies in DIR, and the long Claude
        // Code session, to profile the binary on them (`perf record target/release/condense
        // compress DIR/x4.json ...`).
        Some("inputs") => {
            let dir = PathBuf::from(std::env::args().nth(2).unwrap_or_else(|| ".".into()));
            let counter = TokenCounter::new(TokenizerKind::O200k);
            for k in [1, 2, 4] {
                let conv = generated_conversation(k * 1_000_000, &counter);
                std::fs::write(dir.join(format!("x{k}.json")), gen::anthropic_file(&conv)?)?;
                if k == 1 {
                    // The session a turn further each time, as the bench's appended turns.
                    for (n, grown) in gen::grown_turn_by_turn(&conv, 12).iter().enumerate() {
                        let name = format!("x1-plus-{}.json", n + 1);
                        std::fs::write(dir.join(name), gen::anthropic_file(grown)?)?;
                    }
                }
            }
            let mut tiny = Conversation::default();
            tiny.messages.extend(gen::turn(0));
            std::fs::write(dir.join("tiny.json"), gen::anthropic_file(&tiny)?)?;
            // The long Claude Code session of `issue13`, before and after its appended turn.
            let (before, whole) = speed::tiled_session()?;
            std::fs::write(dir.join("cc-tiled-before.jsonl"), before)?;
            std::fs::write(dir.join("cc-tiled.jsonl"), whole)?;
            return Ok(());
        }
        _ => {}
    }
    // The sections of a full run, in order; a new section is a module and a line here.
    let memory = memory()?;
    figures(opts.runs)?;
    speed::run(opts.runs, opts.python.as_deref(), memory)?;
    proxy::run(opts.runs)?;
    Ok(())
}

/// The throughput figures (issues 2-6).
fn figures(runs: usize) -> Result<()> {
    let kind = TokenizerKind::O200k;
    println!("condense benchmarks: medians of {runs} runs, release build, tokenizer {kind}\n");
    println!("| benchmark | median | throughput / ratio |\n|---|---|---|");

    // 1. The largest shared transcript: parse, count, write.
    let tau_path =
        repo().join("tests/fixtures/transcripts/sierra-research__tau-bench/gpt-4o-airline.json");
    let tau = std::fs::read(&tau_path).with_context(|| tau_path.display().to_string())?;
    let mb = tau.len() as f64 / 1e6;
    let parse = median_ms(runs, || {
        let _ = read(&tau, "tau", &ReadOptions::default());
    });
    let doc = read(&tau, "tau", &ReadOptions::default())?;
    let write = median_ms(runs, || {
        let _ = doc.write();
    });
    let mut tau_tokens = 0;
    let count_cold = median_ms(runs, || {
        let c = TokenCounter::new(kind);
        tau_tokens = doc
            .conversations()
            .iter()
            .map(|cv| c.count_conversation(cv).total)
            .sum();
    });
    println!(
        "| tau-bench {mb:.1} MB: parse | {parse:.1} ms | {:.0} MB/s |",
        mb / parse * 1000.0
    );
    println!("| tau-bench: count ({tau_tokens} tokens, cold cache) | {count_cold:.1} ms | {:.2} M tokens/s |", tau_tokens as f64 / count_cold / 1000.0);
    println!(
        "| tau-bench: write | {write:.1} ms | {:.0} MB/s |",
        mb / write * 1000.0
    );

    // 2. A generated 1M-token conversation: count cold vs concatenated text vs warm.
    let counter = TokenCounter::new(kind);
    let big = generated_conversation(1_000_000, &counter);
    let text = concatenated_text(&big);
    let tokens = counter.count_conversation(&big).total;
    let concat = median_ms(runs, || {
        let _ = kind.tokenizer().count(&text);
    });
    let cold = median_ms(runs, || {
        let c = TokenCounter::new(kind);
        let _ = c.count_conversation(&big);
    });
    let warm_counter = TokenCounter::new(kind);
    let _ = warm_counter.count_conversation(&big);
    // Warm counts are cheap: take many, so the median is not one disturbed run.
    let warm = median_ms(runs.max(201), || {
        let _ = warm_counter.count_conversation(&big);
    });
    println!("| 1M-token conversation ({tokens} tokens, {} messages): count, cold | {cold:.1} ms | {:.2} M tokens/s |", big.messages.len(), tokens as f64 / cold / 1000.0);
    println!("| same text concatenated, one tokenizer call | {concat:.1} ms | cold/concat = {:.2}x (target <= 1.2x) |", cold / concat);
    println!(
        "| count again, warm cache | {warm:.2} ms | cold/warm = {:.0}x (target >= 100x) |",
        cold / warm
    );

    // 3. Pathological inputs: linear, no panic.
    for (name, input) in [
        ("1M spaces", " ".repeat(1_000_000)),
        ("1M x 'a'", "a".repeat(1_000_000)),
        (
            "1 MB base64",
            (0..750_000u32)
                .map(|i| (b'A' + (i * 7 % 26) as u8) as char)
                .collect::<String>(),
        ),
    ] {
        let mut n = 0;
        let t = median_ms(runs.min(3), || n = kind.tokenizer().count(&input));
        println!("| pathological: {name} ({n} tokens) | {t:.1} ms | |");
    }

    // 4. The plugin boundary: test-faulty stages loaded from their shared library. `noop`
    //    decides without reading (the boundary itself), `read` copies the conversation in and
    //    changes nothing, `echo` copies it in and hands it all back (the most a stage can cost).
    let plugin = Plugin::load(&test_plugin_path()).map_err(|e| anyhow::anyhow!("{e}"))?;
    let host = bench_host(kind);
    for (mode, what) in [
        (
            "noop",
            "no-op plugin stage (the boundary: call, host services, report back)",
        ),
        (
            "read",
            "plugin stage that reads the conversation, changes nothing",
        ),
        (
            "echo",
            "plugin stage that reads the conversation and hands all of it back",
        ),
    ] {
        let stage = plugin
            .instantiate(&format!("mode = \"{mode}\""))
            .map_err(|e| anyhow::anyhow!(e))?;
        // What is timed must be what is claimed: a successful run, handing back a conversation
        // exactly when the mode says so.
        let out = stage
            .apply(&condense_abi::StageInput::new(&big), &host.run, &host)
            .map_err(|e| anyhow::anyhow!("{mode}: {e}"))?;
        anyhow::ensure!(
            matches!(out.change, condense_abi::Change::Whole(_)) == (mode == "echo"),
            "{mode}: unexpected output"
        );
        // The no-op is microseconds: more runs keep its median stable.
        let n = if mode == "noop" { runs * 100 } else { runs };
        let t = median_ms(n, || {
            let _ = stage.apply(&condense_abi::StageInput::new(&big), &host.run, &host);
        });
        let (shown, target) = if mode == "noop" {
            (format!("{:.1} µs", t * 1000.0), " (target < 1%)")
        } else {
            (format!("{t:.2} ms"), "")
        };
        println!(
            "| {what}, 1M-token conversation | {shown} | {:.3}% of a cold count{target} |",
            t / cold * 100.0
        );
    }

    // The host's output guard (run after every stage): one linear pass, no tokenizing.
    let guard = median_ms(runs, || {
        let _ = condense_host::guard::violations(&big);
    });
    println!(
        "| output guard (invariant check) on the 1M-token conversation | {guard:.2} ms | {:.2}% of a cold count |",
        guard / cold * 100.0
    );

    // 5. Pipelines through the whole host (plugins loaded, store on disk, archive, guards),
    //    compared with one cold token count of the same input.
    const LEVEL_1: &str = "[[stage]]\nplugin = \"tool-result-budget\"\n[stage.config]\nmax_result_size_chars = 2000\n";
    let levels_1_3 = format!(
        "{LEVEL_1}\n[[stage]]\nplugin = \"snip\"\n\n[[stage]]\nplugin = \"microcompact\"\n"
    );
    let tau_convs: &[Conversation] = doc.conversations();
    let tau_cold = median_ms(runs, || {
        let c = TokenCounter::new(kind);
        for cv in tau_convs {
            let _ = c.count_conversation(cv);
        }
    });
    let late = 1_893_456_000_000; // 2030-01-01: long after the generated session
    for (what, toml, convs, cold, megabytes, now) in [
        (
            "level 1, tau-bench (200 conversations)",
            LEVEL_1.to_string(),
            tau_convs,
            tau_cold,
            mb,
            0,
        ),
        (
            "levels 1-3, tau-bench (200 conversations)",
            levels_1_3.clone(),
            tau_convs,
            tau_cold,
            mb,
            0,
        ),
        (
            "levels 1-3, 1M-token conversation (cache cold: microcompact clears)",
            levels_1_3.clone(),
            std::slice::from_ref(&big),
            cold,
            text.len() as f64 / 1e6,
            late,
        ),
        (
            "levels 4-5 (extractive summarizer), 1M-token conversation, 200k window",
            "[[stage]]\nplugin = \"context-collapse\"\n\n[[stage]]\nplugin = \"autocompact\"\n"
                .to_string(),
            std::slice::from_ref(&big),
            cold,
            text.len() as f64 / 1e6,
            late,
        ),
        (
            "level 5 alone (extractive summarizer), 1M-token conversation, 200k window",
            "[[stage]]\nplugin = \"autocompact\"\n".to_string(),
            std::slice::from_ref(&big),
            cold,
            text.len() as f64 / 1e6,
            late,
        ),
    ] {
        let pipeline = Pipeline::parse(&toml, "bench", None)?;
        let loaded = LoadedPipeline::load(pipeline).map_err(|e| anyhow::anyhow!("{e}"))?;
        let opts = RunOptions {
            now_ms: Some(now),
            format: "anthropic".into(),
            ..Default::default()
        };
        // Tokens saved over every conversation; a failing run fails the bench (what is timed
        // must be what is claimed).
        let run_all = |store: &condense_store::Store| -> anyhow::Result<usize> {
            let mut saved = 0;
            for (i, c) in convs.iter().enumerate() {
                let session = session_key(c, &format!("/{i}"), None);
                let r = loaded
                    .run(c.clone(), store, &session, &opts)
                    .map_err(|e| anyhow::anyhow!("{what}: {e}"))?;
                saved += r.tokens_before - r.tokens_after;
            }
            Ok(saved)
        };
        // First runs on a fresh store pay for creating a file per stored blob; reruns of the
        // same session find their blobs and state in place.
        let mut saved = 0;
        let fresh = median_ms(runs.min(3), || {
            let Ok(dir) = tempfile::tempdir() else { return };
            let Ok(store) = condense_store::Store::open(dir.path()) else {
                return;
            };
            saved = run_all(&store).unwrap_or(0);
        });
        let dir = tempfile::tempdir()?;
        let store = condense_store::Store::open(dir.path())?;
        run_all(&store)?;
        let warm = median_ms(runs.min(5), || {
            let _ = run_all(&store);
        });
        println!(
            "| {what}: {saved} tokens saved, first run on a fresh store | {fresh:.1} ms | {:.0} MB/s; {:.1}x one cold count |",
            megabytes / fresh * 1000.0,
            fresh / cold,
        );
        println!(
            "| {what}: rerun, same store | {warm:.1} ms | {:.0} MB/s; {:.1}x one cold count ({:.1} ms beyond it) |",
            megabytes / warm * 1000.0,
            warm / cold,
            warm - cold
        );
    }
    Ok(())
}
