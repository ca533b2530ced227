//! Benchmarks, run with `cargo xtask bench` (release build, plugins built first).
//!
//! Every figure is the median of several runs; ratios are computed from figures measured in the
//! same run, since the machine is noisy. Results go to stdout as a Markdown table for
//! docs/benchmarks.md.

use anyhow::{Context, Result};
use condense_abi::{Host, Plugin};
use condense_formats::{read, ReadOptions};
use condense_host::{session_id, LoadedPipeline, Pipeline, RunOptions};
use condense_model::{Block, Content, Conversation, Message, Role, ToolResult, ToolUse};
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
                    Block::ToolUse(ToolUse {
                        id: id.clone(),
                        name: ["Read", "Bash", "Grep"][i % 3].to_string(),
                        input: condense_model::RawJson::from_value(
                            &serde_json::json!({"file_path": format!("src/module_{i}.rs")}),
                        ),
                        extra: Default::default(),
                    }),
                ],
            ),
            Message::new(
                format!("#{}", 3 * i + 2),
                Role::User,
                vec![Block::ToolResult(ToolResult {
                    tool_use_id: id,
                    content: Content::string(text),
                    is_error: None,
                    extra: Default::default(),
                })],
            ),
        ];
        for m in msgs {
            total += counter.count_message(&m);
            conv.messages.push(m);
        }
        i += 1;
    }
    conv
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
    let warm = median_ms(runs, || {
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

    // 4. The plugin boundary: a no-op stage loaded from its shared library.
    let noop_path = repo().join("target/test-plugins").join(format!(
        "{}test_faulty{}",
        std::env::consts::DLL_PREFIX,
        std::env::consts::DLL_SUFFIX
    ));
    let plugin = Plugin::load(&noop_path).map_err(|e| anyhow::anyhow!("{e}"))?;
    let noop = plugin
        .instantiate("mode = \"noop\"")
        .map_err(|e| anyhow::anyhow!(e))?;
    let host = NullHost(&counter);
    let mut pool: Vec<Conversation> = (0..runs).map(|_| big.clone()).collect();
    let boundary = median_ms(runs, || {
        if let Some(c) = pool.pop() {
            let _ = noop.apply(c, &host);
        }
    });
    println!("| no-op plugin stage on the 1M-token conversation (boundary both ways) | {boundary:.2} ms | {:.2}% of a cold count (target < 1%) |", boundary / cold * 100.0);

    // 5. Level 1 through the whole host on tau-bench (store in a temp dir).
    let dir = tempfile::tempdir()?;
    let pipeline = Pipeline::parse(
        "[[stage]]\nplugin = \"tool-result-budget\"\n[stage.config]\nmax_result_size_chars = 2000\n",
        "bench",
        None,
    )?;
    let loaded = LoadedPipeline::load(pipeline).map_err(|e| anyhow::anyhow!("{e}"))?;
    let store = condense_store::Store::open(dir.path())?;
    let convs: Vec<Conversation> = doc.conversations().to_vec();
    let level1 = median_ms(runs.min(5), || {
        for c in &convs {
            let _ = loaded.run(
                c.clone(),
                &store,
                &session_id(c),
                &RunOptions {
                    now_ms: Some(0),
                    format: "openai".into(),
                    record_outputs: false,
                    ..Default::default()
                },
            );
        }
    });
    println!("| level 1 (max 2,000 chars) over tau-bench's 200 conversations, host + store | {level1:.1} ms | {:.0} MB/s |", mb / level1 * 1000.0);
    Ok(())
}
