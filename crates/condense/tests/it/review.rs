//! `condense diff` and `condense snapshot`: the review workflow and its exit codes.

use crate::support::{condense, condense_in, fixture, repo};
use std::path::Path;

const LOW: &str = "[[stage]]\nname = \"budget\"\nplugin = \"tool-result-budget\"\n[stage.config]\nmax_result_size_chars = 3000\npreview_bytes = 200\n";

fn pipeline(dir: &Path, body: &str) -> String {
    let p = dir.join("p.toml");
    std::fs::write(&p, body).unwrap();
    p.display().to_string()
}

#[test]
fn diff_shows_each_stage_with_a_header() {
    let dir = tempfile::tempdir().unwrap();
    let p = pipeline(dir.path(), LOW);
    let input = fixture("edge/openai-big-tool-results.json");
    let run = condense(&[
        "diff",
        input.to_str().unwrap(),
        "--pipeline",
        &p,
        "--color",
        "never",
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    insta::with_settings!({filters => vec![(r"\d+\.\d ms", "[time] ms")]}, {
        insta::assert_snapshot!("diff_level1_big_results", run.stdout);
    });
    let colored = condense(&[
        "diff",
        input.to_str().unwrap(),
        "--pipeline",
        &p,
        "--color",
        "always",
    ]);
    assert!(colored.stdout.contains("\x1b[32m+"), "additions in green");
    let bad = condense(&[
        "diff",
        input.to_str().unwrap(),
        "--pipeline",
        &p,
        "--stage",
        "nope",
    ]);
    assert!(bad
        .one_line_failure(2)
        .contains("no stage named `nope` (stages: budget)"));
}

#[test]
fn snapshot_gate_passes_fails_and_accepts() {
    let dir = tempfile::tempdir().unwrap();
    let snaps = dir.path().join("snaps");
    let input = fixture("edge/openai-big-tool-results.json");
    let args = |p: &str| {
        vec![
            "snapshot".to_string(),
            input.display().to_string(),
            "--pipeline".into(),
            p.to_string(),
            "--snapshots".into(),
            snaps.display().to_string(),
            "--color".into(),
            "never".into(),
        ]
    };
    let run_with = |p: &str, extra: &[&str]| {
        let mut a = args(p);
        a.extend(extra.iter().map(|s| s.to_string()));
        let refs: Vec<&str> = a.iter().map(String::as_str).collect();
        condense(&refs)
    };
    let p = pipeline(dir.path(), LOW);

    // First run: everything is new → exit 1, pending files written.
    let first = run_with(&p, &[]);
    assert_eq!(first.code, 1, "{}", first.stderr);
    let pending = snaps.join("edge__openai-big-tool-results.json/01-budget.snap.new");
    assert!(pending.is_file());
    // Accept: exit 0, .snap written, .snap.new gone.
    assert_eq!(run_with(&p, &["--accept"]).code, 0);
    assert!(!pending.exists());
    // Unchanged pipeline → exit 0.
    let again = run_with(&p, &[]);
    assert_eq!(again.code, 0, "{}", again.stderr);
    assert!(
        again.stderr.contains("2 unchanged, 0 changed"),
        "{}",
        again.stderr
    );
    // Change the pipeline → exit 1 with a diff of what changed.
    let p2 = pipeline(
        dir.path(),
        &LOW.replace(
            "max_result_size_chars = 3000",
            "max_result_size_chars = 1000",
        ),
    );
    let changed = run_with(&p2, &[]);
    assert_eq!(changed.code, 1, "{}", changed.stderr);
    assert!(
        changed.stdout.contains("@@"),
        "a unified diff: {}",
        changed.stdout
    );
    assert!(
        changed.stderr.lines().last().unwrap().contains("snapshot"),
        "{}",
        changed.stderr
    );
    assert!(pending.is_file());
}

#[test]
fn compare_shows_that_reordering_changes_the_outcome() {
    // Relative paths from the repository root, so the table is the same in every checkout.
    // The Claude Code session whose tool results are all the agent's own (in the other, the
    // large and repeated ones are subagents' lines, which are not context).
    let cc = "tests/fixtures/transcripts/DRMacIver__claude-reliability/transcript.jsonl";
    let (a, b) = (
        "tests/fixtures/pipelines/budget-then-snip.toml",
        "tests/fixtures/pipelines/snip-then-budget.toml",
    );
    let args = ["compare", cc, "-p", a, "-p", b];
    let run = condense_in(&args, Some(&repo()));
    assert_eq!(run.code, 0, "{}", run.stderr);
    insta::with_settings!({filters => vec![(r" +\d+\.\d +(tool|snip)", " [ms] $1")]}, {
        insta::assert_snapshot!("compare_reordered_levels", run.stdout);
    });

    let mut json_args = args.to_vec();
    json_args.push("--json");
    let v: serde_json::Value =
        serde_json::from_str(&condense_in(&json_args, Some(&repo())).stdout).unwrap();
    let after: Vec<u64> = v[0]["pipelines"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["tokens_after"].as_u64().unwrap())
        .collect();
    assert_ne!(
        after[0], after[1],
        "the order of levels 1 and 2 matters: {after:?}"
    );
    assert_eq!(
        condense_in(&["compare", cc, "-p", a], Some(&repo())).code,
        2,
        "one pipeline is a usage error"
    );
}

#[test]
fn compare_the_default_pipeline_with_a_reordered_default() {
    // Everything in one folder with relative names, so the table is the same in every checkout.
    let dir = tempfile::tempdir().unwrap();
    // OpenHands runs: many long results, some repeated (the Claude Code sessions have few that
    // both levels act on: in one, most tool results are subagents' lines, not context).
    std::fs::copy(
        fixture("transcripts/All-Hands-AI__OpenHands/output.jsonl"),
        dir.path().join("output.jsonl"),
    )
    .unwrap();
    let show = condense(&["pipeline", "show"]);
    assert_eq!(show.code, 0);
    std::fs::write(dir.path().join("default.toml"), &show.stdout).unwrap();
    // Microcompact before snip: cleared results are too short to deduplicate afterwards.
    let stages: Vec<&str> = show.stdout.split("\n[[stage]]").collect();
    let pos = |name: &str| {
        stages
            .iter()
            .position(|s| s.contains(&format!("name = \"{name}\"")))
            .unwrap()
    };
    let mut reordered = stages.clone();
    reordered.swap(pos("snip"), pos("microcompact"));
    std::fs::write(
        dir.path().join("reordered.toml"),
        reordered.join("\n[[stage]]"),
    )
    .unwrap();
    let args = [
        "compare",
        "output.jsonl",
        "-p",
        "default.toml",
        "-p",
        "reordered.toml",
        "--now",
        "2025-09-03T06:00:00Z",
    ];
    let run = condense_in(&args, Some(dir.path()));
    assert_eq!(run.code, 0, "{}", run.stderr);
    insta::with_settings!({filters => vec![(r" +\d+\.\d +(tool|snip)", " [ms] $1")]}, {
        insta::assert_snapshot!("compare_default_vs_reordered", run.stdout);
    });
    let mut json = args.to_vec();
    json.push("--json");
    let v: serde_json::Value =
        serde_json::from_str(&condense_in(&json, Some(dir.path())).stdout).unwrap();
    let after: Vec<u64> = v[0]["pipelines"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["tokens_after"].as_u64().unwrap())
        .collect();
    assert_ne!(
        after[0], after[1],
        "reordering snip and microcompact changes the outcome"
    );
}
