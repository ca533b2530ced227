//! Benchmarks, run with `cargo xtask bench` (release build, plugins built first).
//!
//! Every figure is the median of several runs; ratios are computed from figures measured in the
//! same run, since the machine is noisy. Results go to stdout as a Markdown table for
//! docs/benchmarks.md.

use anyhow::{Context, Result};
use condense_abi::{Host, Plugin};
use condense_formats::{read, ReadOptions};
use condense_host::{session_key, LoadedPipeline, Pipeline, RunOptions};
use condense_model::{Block, Content, Conversation, Message, Role};
use condense_tokens::{TokenCounter, TokenizerKind};
use std::path::{Path, PathBuf};
use std::time::Instant;

fn median_ms(runs: usize, mut f: impl FnMut()) -> f64 {
    let mut times: Vec<f64> = (0..runs)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed().as_secs_f64() * 1000.0
        })
        .collect();
    times.sort_by(f64::total_cmp);
    times[times.len() / 2]
}

/// The no-op-capable test plugin `cargo xtask plugins` builds.
fn test_plugin_path() -> PathBuf {
    let target =
        std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| repo().join("target"), PathBuf::from);
    target
        .join("test-plugins")
        .join(condense_host::discover::library_file_name("test-faulty"))
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A synthetic agent session of about `target_tokens` tokens: user asks, assistant calls tools,
/// tool results of varied sizes (code, logs, JSON), some repeated.
fn generated_conversation(target_tokens: usize, counter: &TokenCounter) -> Conversation {
    let mut conv = Conversation::default();
    let mut i = 0usize;
    let mut total = 0usize;
    while total < target_tokens {
        let code: String = (0..(20 + i % 180))
            .map(|k| format!("    let value_{k} = compute(input_{k}, {});\n", k * i % 97))
            .collect();
        let text = match i % 4 {
            0 => format!("fn handler_{i}() {{\n{code}}}\n"),
            1 => (0..(30 + i % 120)).map(|k| format!("2025-01-0{} INFO request {k} served in {}ms\n", i % 9 + 1, k * 3 % 250)).collect(),
            2 => serde_json::json!({"items": (0..(10 + i % 60)).map(|k| serde_json::json!({"id": k, "name": format!("item-{k}"), "ok": k % 3 == 0})).collect::<Vec<_>>()}).to_string(),
            _ => format!("fn handler_{}() {{\n{code}}}\n", i - 1),
        };
        let id = format!("call_{i}");
        let msgs = [
            Message::new(
                format!("#{}", 3 * i),
                Role::User,
                vec![Block::text(format!(
                    "Step {i}: look at module {i} and fix what fails."
                ))],
            ),
            Message::new(
                format!("#{}", 3 * i + 1),
                Role::Assistant,
                vec![
                    Block::text(format!("Reading module {i}.")),
                    Block::tool_use(
                        id.clone(),
                        ["Read", "Bash", "Grep"][i % 3],
                        condense_model::RawJson::from_value(
                            &serde_json::json!({"file_path": format!("src/module_{i}.rs")}),
                        ),
                    ),
                ],
            ),
            Message::new(
                format!("#{}", 3 * i + 2),
                Role::User,
                vec![Block::tool_result(id, Content::string(text))],
            ),
        ];
        for (k, mut m) in msgs.into_iter().enumerate() {
            // One message a minute from 2025-01-01, so time-based stages have a clock to read.
            m.timestamp = Some(rfc3339(1_735_689_600 + 60 * (3 * i + k) as i64));
            total += counter.count_message(&m);
            conv.messages.push(m);
        }
        i += 1;
    }
    conv
}

/// Unix seconds as RFC 3339 UTC (civil-from-days, Howard Hinnant's algorithm).
fn rfc3339(secs: i64) -> String {
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

fn concatenated_text(conv: &Conversation) -> String {
    let mut s = String::new();
    for m in &conv.messages {
        for b in &m.content.blocks {
            match b {
                Block::Text(t) => s.push_str(&t.text),
                Block::ToolUse(t) => {
                    s.push_str(&t.name);
                    s.push_str(t.input.as_str());
                }
                Block::ToolResult(t) => s.push_str(&t.content.text()),
                _ => {}
            }
        }
    }
    s
}

struct NullHost<'a>(&'a TokenCounter);
impl Host for NullHost<'_> {
    fn count_tokens(&self, text: &str) -> usize {
        self.0.count_text(text)
    }
    fn now_ms(&self) -> i64 {
        0
    }
    fn store_put(&self, bytes: &[u8]) -> Result<String, String> {
        Ok(condense_store::blob_key(bytes))
    }
    fn store_get(&self, _: &str) -> Result<Option<Vec<u8>>, String> {
        Ok(None)
    }
    fn state_get(&self) -> Result<Option<String>, String> {
        Ok(None)
    }
    fn state_put(&self, _: &str) -> Result<(), String> {
        Ok(())
    }
    fn tokens_freed_before(&self) -> usize {
        0
    }
    fn context_window(&self) -> usize {
        200_000
    }
    fn max_output_tokens(&self) -> usize {
        32_000
    }
    fn output_reserve(&self) -> usize {
        8_192
    }
    fn has_flag(&self, _: &str) -> bool {
        false
    }
    fn session_id(&self) -> String {
        "bench".into()
    }
    fn source_format(&self) -> String {
        "anthropic".into()
    }
    fn conversation_tokens(&self) -> usize {
        0
    }
    fn summarize(&self, _: condense_abi::SummaryRequest) -> Result<String, String> {
        Err("no summarizer in this benchmark".into())
    }
}

fn main() -> Result<()> {
    let runs: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(7);
    // `condense-bench profile-rerun PLUGIN[,PLUGIN...]`: that pipeline (default configs) rerun
    // on the 1M-token conversation with the same store, in a loop, for a profiler;
    // `profile-first PLUGIN[,...]`: the same, each run on a fresh store (first runs).
    let mode = std::env::args().nth(1);
    if matches!(mode.as_deref(), Some("profile-rerun" | "profile-first")) {
        let fresh = mode.as_deref() == Some("profile-first");
        let plugins = std::env::args()
            .nth(2)
            .unwrap_or_else(|| "autocompact".into());
        let toml: String = plugins
            .split(',')
            .map(|p| format!("[[stage]]\nplugin = \"{p}\"\n\n"))
            .collect();
        let counter = TokenCounter::new(TokenizerKind::O200k);
        let big = generated_conversation(1_000_000, &counter);
        let loaded = LoadedPipeline::load(Pipeline::parse(&toml, "profile", None)?)
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        let opts = RunOptions {
            now_ms: Some(1_893_456_000_000),
            format: "anthropic".into(),
            ..Default::default()
        };
        let session = session_key(&big, "", None);
        let dir = tempfile::tempdir()?;
        let run = |at: &std::path::Path| -> Result<()> {
            let store = condense_store::Store::open(at)?;
            loaded
                .run(big.clone(), &store, &session, &opts)
                .map_err(|e| anyhow::anyhow!("{e}"))?;
            Ok(())
        };
        run(dir.path())?;
        let (n, what) = if fresh {
            (10, "first run (a fresh store each time)")
        } else {
            (100, "rerun")
        };
        let mut k = 0;
        let t = median_ms(n, || {
            k += 1;
            let at = if fresh {
                dir.path().join(format!("s{k}"))
            } else {
                dir.path().to_path_buf()
            };
            let _ = run(&at);
        });
        println!("{what} of {plugins}: {t:.3} ms (a clone of the input included)");
        return Ok(());
    }
    // `condense-bench profile-warm`: only the warm count, in a loop, for a profiler.
    if std::env::args().nth(1).as_deref() == Some("profile-warm") {
        let counter = TokenCounter::new(TokenizerKind::O200k);
        let big = generated_conversation(1_000_000, &counter);
        let _ = counter.count_conversation(&big);
        let t = median_ms(2000, || {
            let _ = counter.count_conversation(&big);
        });
        println!("warm count: {t:.3} ms");
        return Ok(());
    }
    // `condense-bench profile-boundary [MODE]`: only one test-faulty stage (noop, read or
    // echo), in a loop.
    if std::env::args().nth(1).as_deref() == Some("profile-boundary") {
        let mode = std::env::args()
            .nth(2)
            .unwrap_or_else(|| "noop".to_string());
        let counter = TokenCounter::new(TokenizerKind::O200k);
        let big = generated_conversation(1_000_000, &counter);
        let plugin = Plugin::load(&test_plugin_path()).map_err(|e| anyhow::anyhow!("{e}"))?;
        let stage = plugin
            .instantiate(&format!("mode = \"{mode}\""))
            .map_err(|e| anyhow::anyhow!(e))?;
        let host = NullHost(&counter);
        let t = median_ms(300, || {
            let _ = stage.apply(&big, &host);
        });
        println!("{mode} stage: {t:.3} ms");
        return Ok(());
    }
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
    let host = NullHost(&counter);
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
            .apply(&big, &host)
            .map_err(|e| anyhow::anyhow!("{mode}: {e}"))?;
        anyhow::ensure!(
            out.conversation.is_some() == (mode == "echo"),
            "{mode}: unexpected output"
        );
        // The no-op is microseconds: more runs keep its median stable.
        let n = if mode == "noop" { runs * 100 } else { runs };
        let t = median_ms(n, || {
            let _ = stage.apply(&big, &host);
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
