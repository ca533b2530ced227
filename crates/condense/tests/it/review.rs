//! `condense diff` and `condense snapshot`: the review workflow and its exit codes.

use crate::support::{condense, fixture};
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
        again.stderr.contains("1 unchanged, 0 changed"),
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
