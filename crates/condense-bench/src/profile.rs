//! The `profile-*` modes: one piece of work in a loop, for a profiler (`perf record
//! target/release/condense-bench profile-first snip`) or for paired runs of two builds. They
//! run before anything else of the bench (the memory runs of a full run take seconds).
//!
//! - `profile-rerun PLUGIN[,PLUGIN...]`: that pipeline (default configs) rerun on the 1M-token
//!   conversation with the same store, 100 times;
//! - `profile-first PLUGIN[,...]`: the same, each run on a fresh store with the token counts
//!   forgotten (as a new process starts), 10 times;
//! - `profile-warm`: the warm count of the 1M-token conversation, 2,000 times;
//! - `profile-boundary [noop|read|echo]`: only that test-faulty stage, 300 times;
//! - `profile-count [FILE]`: cold counts of FILE (by default the shipped Claude Code session),
//!   3,000 times;
//! - `profile-proxy [plain|claude-code|sdk|openai-chat|responses|masking] [FROM_TOKENS] [TURNS] [PAUSE_MS]`: a
//!   growing session's turns through `condense serve`, which `CONDENSE_BENCH_WRAP` may run
//!   under a profiler (`proxy::profile`).

use crate::gen::{generated_conversation, median_ms, repo, test_plugin_path};
use anyhow::{bail, Context, Result};
use condense_abi::Plugin;
use condense_formats::{read, ReadOptions};
use condense_host::{session_key, LoadedPipeline, Pipeline, RunOptions};
use condense_tokens::{TokenCounter, TokenizerKind};
use std::path::PathBuf;

/// Runs the profile mode `mode` (see the module docs).
pub(crate) fn run(mode: &str) -> Result<()> {
    let arg = std::env::args().nth(2);
    match mode {
        "profile-rerun" => pipeline(arg.as_deref(), false),
        "profile-first" => pipeline(arg.as_deref(), true),
        "profile-warm" => warm(),
        "profile-boundary" => boundary(arg.as_deref().unwrap_or("noop")),
        "profile-proxy" => {
            let args: Vec<String> = std::env::args().skip(2).collect();
            crate::proxy::profile(&args)
        }
        "profile-count" => count(arg.map_or_else(
            || repo().join("examples/claude-code-session.jsonl"),
            PathBuf::from,
        )),
        other => bail!(
            "unknown mode `{other}` (profile-rerun, profile-first, profile-warm, \
             profile-boundary, profile-count, profile-proxy)"
        ),
    }
}

/// A pipeline of `plugins` (comma-separated, default `autocompact`) over the 1M-token
/// conversation: first runs on fresh stores (`fresh`), or reruns on one store.
fn pipeline(plugins: Option<&str>, fresh: bool) -> Result<()> {
    let plugins = plugins.unwrap_or("autocompact");
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
        if fresh {
            // A first run counts cold, as a new process does.
            loaded.counter.clear_cache();
        }
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
    Ok(())
}

/// The warm count of the 1M-token conversation.
fn warm() -> Result<()> {
    let counter = TokenCounter::new(TokenizerKind::O200k);
    let big = generated_conversation(1_000_000, &counter);
    let _ = counter.count_conversation(&big);
    let t = median_ms(2000, || {
        let _ = counter.count_conversation(&big);
    });
    println!("warm count: {t:.3} ms");
    Ok(())
}

/// One test-faulty stage (`noop`, `read` or `echo`) over the 1M-token conversation.
fn boundary(mode: &str) -> Result<()> {
    let counter = TokenCounter::new(TokenizerKind::O200k);
    let big = generated_conversation(1_000_000, &counter);
    let plugin = Plugin::load(&test_plugin_path()).map_err(|e| anyhow::anyhow!("{e}"))?;
    let stage = plugin
        .instantiate(&format!("mode = \"{mode}\""))
        .map_err(|e| anyhow::anyhow!(e))?;
    let host = crate::bench_host(TokenizerKind::O200k);
    let t = median_ms(300, || {
        let _ = stage.apply(&condense_abi::StageInput::new(&big), &host.run, &host);
    });
    println!("{mode} stage: {t:.3} ms");
    Ok(())
}

/// Cold counts of the conversations in `path`.
fn count(path: PathBuf) -> Result<()> {
    let bytes = std::fs::read(&path).with_context(|| path.display().to_string())?;
    let doc = read(&bytes, "input", &ReadOptions::default())?;
    let t = median_ms(3000, || {
        let counter = TokenCounter::new(TokenizerKind::O200k);
        let _ = counter.count_conversations(doc.conversations());
    });
    println!("cold count: {t:.4} ms");
    Ok(())
}
