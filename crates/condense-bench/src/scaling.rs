//! Scaling (issue 13, item 5): every shipped stage alone, and the default pipeline, on the
//! generated session at 1x, 2x and 4x its size, first runs on a fresh store, in-process
//! through the whole host (plugin loaded, guard, archive, store). The ratios per doubling say
//! whether a stage grows with its input (about 2x) or faster.

use anyhow::{anyhow, Result};
use condense_host::{session_key, LoadedPipeline, Pipeline, RunOptions};
use condense_model::Conversation;
use std::time::Instant;

/// 2030-01-01: long after the generated session, so time-based stages fire.
pub(crate) const LATE_MS: i64 = 1_893_456_000_000;

/// Every plugin the project ships (not the test plugins).
pub(crate) const SHIPPED: &[&str] = &[
    "tool-result-budget",
    "snip",
    "microcompact",
    "observation-mask",
    "redact-secrets",
    "truncate-oldest",
    "context-collapse",
    "autocompact",
];

/// What is measured: each shipped stage alone (its default configuration), then the default
/// pipeline.
pub(crate) fn pipelines() -> Vec<(String, String)> {
    let mut all: Vec<(String, String)> = SHIPPED
        .iter()
        .map(|p| (p.to_string(), format!("[[stage]]\nplugin = \"{p}\"\n")))
        .collect();
    all.push((
        "default pipeline".into(),
        condense_host::pipeline::DEFAULT_PIPELINE.to_string(),
    ));
    all
}

/// The loaded pipeline of `toml`, with plugins from `target/plugins` (the release build
/// `cargo xtask bench` makes) whatever is installed.
pub(crate) fn load(toml: &str) -> Result<LoadedPipeline> {
    std::env::set_var("CONDENSE_PLUGIN_PATH", crate::gen::plugin_dir());
    LoadedPipeline::load(Pipeline::parse(toml, "bench", None)?).map_err(|e| anyhow!("{e}"))
}

/// The median time (ms) of `runs` first runs of `loaded` on `conv` ([`first_run_once`]).
pub(crate) fn first_run_ms(
    loaded: &LoadedPipeline,
    conv: &Conversation,
    runs: usize,
) -> Result<f64> {
    let mut times = (0..runs.max(1))
        .map(|_| first_run_once(loaded, conv))
        .collect::<Result<Vec<f64>>>()?;
    Ok(median(&mut times))
}

fn median(times: &mut [f64]) -> f64 {
    times.sort_by(f64::total_cmp);
    times[times.len() / 2]
}

/// The time (ms) of one first run of `loaded` on `conv`, on a fresh store that is closed
/// before the clock stops (as a `condense compress` process does), with the pipeline's token
/// counts forgotten, as a new process starts; the copy of the input handed to the run is made
/// before the clock starts.
fn first_run_once(loaded: &LoadedPipeline, conv: &Conversation) -> Result<f64> {
    let opts = RunOptions {
        now_ms: Some(LATE_MS),
        format: "anthropic".into(),
        ..Default::default()
    };
    let session = session_key(conv, "", None);
    let dir = tempfile::tempdir()?;
    let store = condense_store::Store::open(dir.path())?;
    let input = conv.clone();
    // The pipeline's counter keeps every count across runs: without this, every run after the
    // first of `loaded` counted nothing cold, and a first run is a cold count and more.
    loaded.counter.clear_cache();
    let t = Instant::now();
    loaded
        .run(input, &store, &session, &opts)
        .map_err(|e| anyhow!("{e}"))?;
    // Closing is part of the run: it checkpoints what the run's commit left in the log when
    // that is over 1 MiB (a smaller log is left for the next process), as a process's exit
    // does.
    drop(store);
    Ok(t.elapsed().as_secs_f64() * 1000.0)
}

/// Prints the scaling table: each pipeline at every size of `sizes` (1x, 2x, 4x), with the
/// time ratio per doubling. Returns the worst ratio per doubling and its pipeline.
///
/// The sizes take turns, one run of each per round (`runs` rounds): a slow spell of the host
/// (the bench shares its two cores) then falls on every size alike instead of on one.
pub(crate) fn table(sizes: &[(usize, Conversation)], runs: usize) -> Result<(f64, String)> {
    println!("\n| stage, first run on a fresh store | 1x | 2x | 4x | 2x/1x | 4x/2x |");
    println!("|---|---|---|---|---|---|");
    let mut worst = (0.0f64, String::new());
    let only = std::env::var("CONDENSE_BENCH_ONLY").ok();
    for (name, toml) in pipelines() {
        if only
            .as_deref()
            .is_some_and(|o| !o.split(',').any(|p| p == name))
        {
            continue;
        }
        let loaded = load(&toml)?;
        let mut per_size: Vec<Vec<f64>> = vec![Vec::new(); sizes.len()];
        for _ in 0..runs.max(1) {
            for ((_, c), times) in sizes.iter().zip(&mut per_size) {
                times.push(first_run_once(&loaded, c)?);
            }
        }
        let times: Vec<f64> = per_size.iter_mut().map(|t| median(t)).collect();
        let ratios: Vec<f64> = times.windows(2).map(|w| w[1] / w[0]).collect();
        for r in &ratios {
            if *r > worst.0 {
                worst = (*r, name.clone());
            }
        }
        let cells: Vec<String> = times.iter().map(|t| format!("{t:.1} ms")).collect();
        let rs: Vec<String> = ratios.iter().map(|r| format!("{r:.2}x")).collect();
        println!("| {name} | {} | {} |", cells.join(" | "), rs.join(" | "));
    }
    Ok(worst)
}
