//! A Claude Code session as Claude Code sends it: `stats` counts the main thread, shows the
//! sub-agents apart, and names the gap to the usage the session reported; fixed tokens for the
//! system prompt and tools the file lacks move the budget and the thresholds.

use crate::support::{condense, fixture};
use serde_json::Value;
use std::path::Path;

const CC: &str =
    "transcripts/d-kimuson__claude-code-viewer/fe5e1c67-53e7-4862-81ae-d0e013e3270b.jsonl";

fn stats_json(args: &[&str]) -> Value {
    let path = fixture(CC);
    let mut all = vec!["stats", path.to_str().unwrap(), "--json"];
    all.extend_from_slice(args);
    let run = condense(&all);
    assert_eq!(run.code, 0, "{}", run.stderr);
    serde_json::from_str(&run.stdout).unwrap()
}

#[test]
fn stats_counts_the_main_thread_and_names_the_gap_to_the_reported_usage() {
    let v = stats_json(&[]);
    assert_eq!(v["messages"], 32, "the main thread");
    assert_eq!(v["tool_calls"], 11);
    let tokens = v["total_tokens"].as_u64().unwrap();
    assert!((4_500..6_000).contains(&tokens), "{tokens}");
    // The 405 sub-agent lines are shown apart, not counted: they were most of the old count.
    assert_eq!(v["not_context"]["sidechain"]["messages"], 405);
    assert!(v["not_context"]["sidechain"]["tokens"].as_u64().unwrap() > 70_000);
    assert_eq!(v["not_context"]["off_thread"]["messages"], 0);

    let u = &v["reported_usage"];
    assert_eq!(
        (
            &u["input_tokens"],
            &u["cache_read_tokens"],
            &u["cache_write_tokens"],
            &u["output_tokens"]
        ),
        (&6.into(), &20_542.into(), &1_004.into(), &10.into())
    );
    assert_eq!(u["prompt_tokens"], 21_552);
    // condense's count of that prompt is the conversation before the last response.
    let counted = u["counted"].as_u64().unwrap();
    assert!(counted < tokens, "{counted} < {tokens}");
    assert_eq!(u["gap"].as_u64().unwrap(), 21_552 - counted);
    assert!(u["gap_is"]
        .as_str()
        .unwrap()
        .starts_with("the system prompt and tool definitions the file does not hold"));
    // Nothing of the fixed part is in the file: not measured, not shown as 0.
    assert_eq!(v["fixed"]["missing_from_file"], true);
    assert_eq!(v["budget"]["fixed"], 0);
    assert_eq!(v["warnings"], serde_json::json!([]));
}

#[test]
fn stats_with_fixed_tokens_counts_them_and_closes_the_gap() {
    let gap = stats_json(&[])["reported_usage"]["gap"].as_u64().unwrap();
    let v = stats_json(&["--fixed-tokens", &gap.to_string()]);
    assert_eq!(v["fixed"]["configured"], gap);
    assert_eq!(v["budget"]["fixed"], gap);
    let used = v["budget"]["used"].as_u64().unwrap();
    assert_eq!(used, gap + v["total_tokens"].as_u64().unwrap());
    assert_eq!(v["reported_usage"]["gap"], 0);

    let path = fixture(CC);
    let run = condense(&["stats", path.to_str().unwrap(), "--fixed-tokens", "16000"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stdout
            .contains("fixed (system + tools)         16,000  set with fixed tokens"),
        "{}",
        run.stdout
    );
    let run = condense(&["stats", path.to_str().unwrap()]);
    assert!(
        run.stdout.contains(
            "fixed (system + tools)        unknown  not in the file: --fixed-tokens N counts them"
        ),
        "{}",
        run.stdout
    );
}

/// A pipeline of context-collapse alone at a small window, with `fixed_tokens` in `[model]`.
fn collapse_pipeline(dir: &Path, fixed_tokens: usize) -> String {
    let path = dir.join(format!("collapse-{fixed_tokens}.toml"));
    let text = format!(
        "[model]\ncontext_window = 12000\nmax_output_tokens = 2000\nautocompact_buffer = 1000\noutput_reserve = 2000\n\
         fixed_tokens = {fixed_tokens}\n\n[[stage]]\nplugin = \"context-collapse\"\n"
    );
    std::fs::write(&path, text).unwrap();
    path.to_str().unwrap().to_string()
}

fn compress_report(dir: &Path, pipeline: &str, extra: &[&str]) -> Value {
    let path = fixture(CC);
    let store = dir.join("store");
    let out = dir.join("out.jsonl");
    let mut args = vec![
        "compress",
        path.to_str().unwrap(),
        "--pipeline",
        pipeline,
        "--report",
        "json",
        "--fresh",
        "--store",
        store.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    let run = condense(&args);
    assert_eq!(run.code, 0, "{}", run.stderr);
    serde_json::from_str(&run.stderr).unwrap()
}

#[test]
fn fixed_tokens_make_collapse_fire_when_the_real_request_would() {
    let dir = tempfile::tempdir().unwrap();
    // ~5,100 tokens in a 12,000 window (target 90% of 10,000): nothing to collapse ...
    let without = compress_report(dir.path(), &collapse_pipeline(dir.path(), 0), &[]);
    assert_eq!(without["stages"][0]["tokens_saved"], 0, "{without}");
    // ... but with the 6,000 tokens of system prompt and tools the request also carries, it is
    // over the target and collapse commits.
    let with = compress_report(dir.path(), &collapse_pipeline(dir.path(), 6_000), &[]);
    let saved = with["stages"][0]["tokens_saved"].as_u64().unwrap();
    assert!(saved > 0, "{with}");
    assert_eq!(with["runs"][0]["budget_after"]["fixed"], 6_000);
    // The collapsed spans held the subagents' lines: expand brings every line back, byte for
    // byte.
    let (out, store, back) = (
        dir.path().join("out.jsonl"),
        dir.path().join("store"),
        dir.path().join("back.jsonl"),
    );
    let written = std::fs::read(&out).unwrap();
    assert!(written.len() < std::fs::read(fixture(CC)).unwrap().len() / 2);
    let run = condense(&[
        "expand",
        out.to_str().unwrap(),
        "--store",
        store.to_str().unwrap(),
        "--out",
        back.to_str().unwrap(),
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(std::fs::read(&back).unwrap() == std::fs::read(fixture(CC)).unwrap());
    // The flag does the same as the pipeline key.
    let flagged = compress_report(
        dir.path(),
        &collapse_pipeline(dir.path(), 0),
        &["--fixed-tokens", "6000"],
    );
    assert_eq!(flagged["stages"][0]["tokens_saved"], saved);
}

#[test]
fn stats_shows_what_the_reader_carried_untouched() {
    // A session still being written: its last line is cut short.
    let dir = tempfile::tempdir().unwrap();
    let bytes = std::fs::read(fixture(CC)).unwrap();
    let partial = dir.path().join("partial.jsonl");
    std::fs::write(&partial, &bytes[..bytes.len() - 200]).unwrap();
    let path = partial.to_str().unwrap();
    let run = condense(&["stats", path, "--json"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let v: Value = serde_json::from_str(&run.stdout).unwrap();
    let warnings = v["warnings"].as_array().unwrap();
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(warnings[0].as_str().unwrap().starts_with("line 438"));
    // The usage is then the last complete main-thread assistant line's.
    assert!(v["reported_usage"]["source"]
        .as_str()
        .unwrap()
        .starts_with("line 436:"));
    let run = condense(&["stats", path]);
    assert!(
        run.stdout.contains("\nWarnings:\n  line 438"),
        "{}",
        run.stdout
    );
}
