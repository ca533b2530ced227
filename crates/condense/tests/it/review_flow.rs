//! Reviewing a pipeline change (issue 16): insta-format snapshots that the real cargo-insta
//! accepts and rejects, `--review` driven by piped answers, `--accept NAME`, the retention
//! line naming lost artifact probes, and the Markdown and JSON reports.
//!
//! Every run works in a temporary folder holding copies of tests/fixtures/review/, with
//! relative paths, so outputs are the same in every checkout.

use crate::support::{bin, condense_in, fixture, Run};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// What the tighter pipeline loses, as the review words it.
const LOST: &str = "artifact 4/4 -> 1/4 (lost: src/a.rs, src/b.rs, src/c.rs)";

/// A folder with the session, a second copy of it, and both pipelines.
fn workspace() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for f in ["session.json", "keep.toml", "tight.toml"] {
        std::fs::copy(fixture(&format!("review/{f}")), dir.path().join(f)).unwrap();
    }
    std::fs::create_dir(dir.path().join("more")).unwrap();
    std::fs::copy(
        fixture("review/session.json"),
        dir.path().join("more/other.json"),
    )
    .unwrap();
    dir
}

fn snapshot(dir: &Path, inputs: &[&str], pipeline: &str, extra: &[&str]) -> Run {
    let mut args = vec!["snapshot"];
    args.extend(inputs);
    args.extend(["-p", pipeline, "--snapshots", "snaps", "--color", "never"]);
    args.extend(extra);
    condense_in(&args, Some(dir))
}

/// `condense snapshot ... --review` with `answers` piped to standard input.
fn review(dir: &Path, inputs: &[&str], pipeline: &str, answers: &str) -> Run {
    let mut cmd = Command::new(bin());
    cmd.arg("snapshot")
        .args(inputs)
        .args(["-p", pipeline, "--snapshots", "snaps", "--color", "never"])
        .arg("--review")
        .current_dir(dir)
        .env_remove("CONDENSE_PLUGIN_PATH")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(answers.as_bytes()).unwrap();
    }
    let out = child.wait_with_output().unwrap();
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

fn read(path: PathBuf) -> String {
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The reference snapshots for the session with every probe kept.
fn accept_keep(dir: &Path, inputs: &[&str]) {
    let run = snapshot(dir, inputs, "keep.toml", &["--accept"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
}

#[test]
fn cargo_insta_accepts_and_rejects_condense_snapshots() {
    let insta = std::env::var_os("CONDENSE_CARGO_INSTA").unwrap_or_else(|| {
        panic!(
            "CONDENSE_CARGO_INSTA is not set: run the tests with `cargo xtask test`, which \
             installs cargo-insta into target/tools/ and sets it"
        )
    });
    let cargo_insta = |verb: &str, dir: &Path| {
        let out = Command::new(&insta)
            .args([verb, "--manifest-path", "snaps/Cargo.toml"])
            .current_dir(dir)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "cargo insta {verb}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let w = workspace();
    let dir = w.path();
    accept_keep(dir, &["session.json"]);
    let snap = |name: &str| dir.join(format!("snaps/session.json/{name}"));
    let reference = read(snap("01-truncate.snap"));

    // The pipeline changes: the snapshots differ, pending files beside the references.
    let changed = snapshot(dir, &["session.json"], "tight.toml", &[]);
    assert_eq!(changed.code, 1, "{}", changed.stderr);
    assert!(snap("01-truncate.snap.new").is_file());
    let pending = read(snap("01-truncate.snap.new"));

    // cargo insta reject: the pending files go, the references stay, and condense still sees
    // the change.
    let out = cargo_insta("reject", dir);
    assert!(out.contains("rejected"), "{out}");
    assert!(!snap("01-truncate.snap.new").exists());
    assert_eq!(read(snap("01-truncate.snap")), reference);
    let again = snapshot(dir, &["session.json"], "tight.toml", &[]);
    assert_eq!(again.code, 1, "{}", again.stderr);
    assert!(
        again.stderr.contains("0 unchanged, 2 changed"),
        "{}",
        again.stderr
    );

    // cargo insta accept: the pending files become the references, byte for byte what
    // condense wrote, and the next run matches.
    let out = cargo_insta("accept", dir);
    assert!(out.contains("accepted"), "{out}");
    assert!(!snap("01-truncate.snap.new").exists());
    assert_eq!(read(snap("01-truncate.snap")), pending);
    let after = snapshot(dir, &["session.json"], "tight.toml", &[]);
    assert_eq!(after.code, 0, "{}", after.stderr);
    assert!(
        after.stderr.contains("2 unchanged, 0 changed, 0 new"),
        "{}",
        after.stderr
    );
    // The retention the review compares with is the accepted one: the tight pipeline's.
    assert!(read(snap("00-retention.snap")).contains("\"artifact\": \"1/4\""));
}

#[test]
fn review_asks_about_each_changed_snapshot_and_names_the_lost_paths() {
    let w = workspace();
    let dir = w.path();
    accept_keep(dir, &["session.json"]);
    // Accept the retention, a wrong answer, reject the stage.
    let run = review(dir, &["session.json"], "tight.toml", "a\nx\nr\n");
    assert_eq!(run.code, 1, "{}", run.stderr);
    insta::assert_snapshot!("review_piped_answers", run.stdout);
    assert!(run
        .stdout
        .contains(&format!("retention: tokens -2,856; {LOST}")));
    insta::assert_snapshot!("review_piped_answers_stderr", run.stderr);
    let snaps = dir.join("snaps/session.json");
    assert!(read(snaps.join("00-retention.snap")).contains("\"artifact\": \"1/4\""));
    assert!(!snaps.join("00-retention.snap.new").exists());
    assert!(read(snaps.join("01-truncate.snap")).contains("nothing dropped"));
    assert!(!snaps.join("01-truncate.snap.new").exists());

    // The rejected stage is asked about again (the retention, accepted, is not). Answers that
    // run out skip it, as `s` does: it stays pending.
    let run = review(dir, &["session.json"], "tight.toml", "");
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(
        run.stdout.contains("[1/1] session.json/01-truncate")
            && run
                .stdout
                .contains("no more answers: the remaining snapshots are skipped"),
        "{}",
        run.stdout
    );
    assert!(snaps.join("01-truncate.snap.new").is_file());
    let run = review(dir, &["session.json"], "tight.toml", "s\n");
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(snaps.join("01-truncate.snap.new").is_file());
    // Accept it: the next review has nothing left to ask.
    let run = review(dir, &["session.json"], "tight.toml", "a\n");
    assert_eq!(run.code, 0, "{}", run.stderr);
    let run = review(dir, &["session.json"], "tight.toml", "");
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(
        run.stdout,
        "condense snapshot --review: nothing to review\n"
    );
}

#[test]
fn accept_by_name_accepts_only_the_named_snapshots() {
    let w = workspace();
    let dir = w.path();
    let inputs = ["session.json", "more/other.json"];
    accept_keep(dir, &inputs);
    let run = snapshot(
        dir,
        &inputs,
        "tight.toml",
        &["--accept", "session.json/01-truncate", "more__other.json"],
    );
    assert_eq!(run.code, 1, "{}", run.stderr);
    insta::assert_snapshot!("accept_by_name", run.stdout);
    insta::assert_snapshot!("accept_by_name_stderr", run.stderr);
    let snaps = dir.join("snaps");
    // Accepted: one stage of the first transcript, everything of the second.
    for done in [
        "session.json/01-truncate",
        "more__other.json/00-retention",
        "more__other.json/01-truncate",
    ] {
        assert!(!snaps.join(format!("{done}.snap.new")).exists(), "{done}");
    }
    assert!(snaps.join("session.json/00-retention.snap.new").is_file());
    // A path to the pending file, as a shell completes it, names it too.
    let run = snapshot(
        dir,
        &inputs,
        "tight.toml",
        &["--accept", "snaps/session.json/00-retention.snap.new"],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    // A name that names nothing: a usage error, nothing written.
    let bad = snapshot(dir, &inputs, "keep.toml", &["--accept", "nope"]);
    let line = bad.one_line_failure(2);
    assert!(
        line.contains("--accept: no snapshot named `nope` (changed: ")
            && line.contains("session.json/01-truncate"),
        "{line}"
    );
    assert!(!snaps.join("session.json/01-truncate.snap.new").exists());
}

#[test]
fn markdown_and_json_reports() {
    let w = workspace();
    let dir = w.path();
    let inputs = ["session.json", "more/other.json"];
    accept_keep(dir, &inputs);
    let md = snapshot(dir, &inputs, "tight.toml", &["--markdown"]);
    assert_eq!(md.code, 1, "{}", md.stderr);
    insta::assert_snapshot!("snapshot_markdown", md.stdout);
    let json = snapshot(dir, &inputs, "tight.toml", &["--json"]);
    assert_eq!(json.code, 1, "{}", json.stderr);
    insta::assert_snapshot!("snapshot_json", json.stdout);
    let v: serde_json::Value = serde_json::from_str(&json.stdout).unwrap();
    assert_eq!(v["transcripts"][0]["loses_probes"], true);
    assert_eq!(v["pending"], 4);

    let cmp = condense_in(
        &[
            "compare",
            "session.json",
            "-p",
            "keep.toml",
            "-p",
            "tight.toml",
            "--markdown",
        ],
        Some(dir),
    );
    assert_eq!(cmp.code, 0, "{}", cmp.stderr);
    insta::assert_snapshot!("compare_markdown", cmp.stdout);

    let diff = condense_in(
        &["diff", "session.json", "-p", "tight.toml", "--json"],
        Some(dir),
    );
    assert_eq!(diff.code, 0, "{}", diff.stderr);
    let v: serde_json::Value = serde_json::from_str(&diff.stdout).unwrap();
    let stage = &v["stages"][0];
    assert_eq!(stage["stage"], "truncate");
    assert_eq!(stage["probes"][0], LOST);
    assert!(stage["diff"]
        .as_str()
        .unwrap()
        .contains("-    | Writing src/a.rs."));
    assert_eq!(v["retention"]["lost"]["artifact"][2], "src/c.rs");
    // The text diff says the same under the stage's header, before any diff line.
    let text = condense_in(
        &[
            "diff",
            "session.json",
            "-p",
            "tight.toml",
            "--color",
            "never",
        ],
        Some(dir),
    );
    let lines: Vec<&str> = text.stdout.lines().collect();
    assert!(
        lines[0].starts_with("━━ stage 1 `truncate`"),
        "{}",
        text.stdout
    );
    assert_eq!(lines[1], format!("probes: {LOST}"));
    insta::with_settings!({filters => vec![(r#""millis": [0-9.]+"#, r#""millis": "[ms]""#)]}, {
        insta::assert_snapshot!("diff_json", diff.stdout);
    });
}
