//! The store (issue 13): a store of the first layout (one file per entry, written by the
//! binary before issue 13: tests/fixtures/stores/v1/) still expands byte for byte and is
//! migrated; 8 `condense compress` processes on one store at once, each output expanding
//! exactly; a new process reuses the token counts of the session's earlier runs.

use crate::kill::session_named;
use crate::support::{assert_expands_to, bin, condense, copy_dir, fixture};
use condense_fuzz::binary::{NOW, PIPELINE};
use std::process::{Command, Stdio};

#[test]
fn a_first_layout_store_expands_exactly_and_is_migrated() {
    let v1 = fixture("stores/v1");
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    copy_dir(&v1.join("store"), &store);
    assert!(store.join("blobs").is_dir() && store.join("state").is_dir());
    let d = |p: &str| dir.path().join(p).display().to_string();
    let out = v1.join("out.jsonl");
    let input = std::fs::read(v1.join("in.jsonl")).unwrap();
    assert_expands_to(
        out.to_str().unwrap(),
        store.to_str().unwrap(),
        &d("back.jsonl"),
        &input,
    );
    // Migrated: the database holds it all, the old folders are gone.
    assert!(store.join(condense_store::DB_FILE).is_file());
    for folder in condense_store::STORE_FOLDERS {
        assert!(!store.join(folder).exists(), "{folder} left");
    }
    // The stages' state came along: a rerun on the migrated store gives the same output the
    // first layout's run gave, and it expands exactly too.
    let run = condense(&[
        "compress",
        v1.join("in.jsonl").to_str().unwrap(),
        "--pipeline",
        v1.join("p.toml").to_str().unwrap(),
        "--store",
        store.to_str().unwrap(),
        "--out",
        &d("again.jsonl"),
        "--now",
        NOW,
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(std::fs::read(d("again.jsonl")).unwrap() == std::fs::read(&out).unwrap());
    let run = condense(&[
        "expand",
        &d("again.jsonl"),
        "--store",
        store.to_str().unwrap(),
        "--out",
        &d("back2.jsonl"),
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        std::fs::read(d("back2.jsonl")).unwrap() == input,
        "not exact"
    );
}

#[test]
fn eight_concurrent_runs_on_one_store_each_expand_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let d = |p: &str| dir.path().join(p).display().to_string();
    std::fs::write(d("p.toml"), PIPELINE).unwrap();
    let sessions: Vec<String> = (0..8).map(|i| format!("concurrent-{i}")).collect();
    for id in &sessions {
        std::fs::write(d(&format!("{id}.jsonl")), session_named(id)).unwrap();
    }
    // All eight started before any is waited for; the store does not exist yet, so they also
    // race to create it.
    let children: Vec<_> = sessions
        .iter()
        .map(|id| {
            Command::new(bin())
                .args([
                    "compress",
                    &format!("{id}.jsonl"),
                    "--pipeline",
                    "p.toml",
                    "--store",
                    "s",
                    "--out",
                    &format!("out-{id}.jsonl"),
                    "--now",
                    NOW,
                ])
                .current_dir(dir.path())
                .env_remove("CONDENSE_PLUGIN_PATH")
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for (id, child) in sessions.iter().zip(children) {
        let out = child.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "{id}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    for id in &sessions {
        assert_expands_to(
            &d(&format!("out-{id}.jsonl")),
            &d("s"),
            &d(&format!("back-{id}.jsonl")),
            &session_named(id),
        );
    }
}

/// The numbers of the report's `total` line (tokens before, after, saved).
fn totals(stderr: &str) -> String {
    stderr
        .lines()
        .find(|l| l.trim_start().starts_with("total"))
        .unwrap_or_else(|| panic!("no total line in: {stderr}"))
        .split_whitespace()
        .skip(1)
        .collect::<Vec<_>>()
        .join(" ")
}

#[test]
fn a_new_process_reuses_the_token_counts_of_earlier_runs() {
    let dir = tempfile::tempdir().unwrap();
    let d = |p: &str| dir.path().join(p).display().to_string();
    std::fs::write(d("p.toml"), PIPELINE).unwrap();
    std::fs::write(d("in.jsonl"), session_named("counted")).unwrap();
    let compress = |more: &[&str]| {
        let (input, pipeline, store, out) = (d("in.jsonl"), d("p.toml"), d("s"), d("out.jsonl"));
        let mut args = vec![
            "compress",
            &input,
            "--pipeline",
            &pipeline,
            "--store",
            &store,
            "--out",
            &out,
            "--now",
            NOW,
        ];
        args.extend(more);
        let run = condense(&args);
        assert_eq!(run.code, 0, "{}", run.stderr);
        totals(&run.stderr)
    };
    let first = compress(&[]);
    let store = condense_store::Store::open(dir.path().join("s")).unwrap();
    let counts = store.token_counts("counted", "o200k_base").unwrap();
    assert!(counts.len() > 100, "{} counts stored", counts.len());
    drop(store);
    assert_eq!(compress(&[]), first, "a rerun reports the same");
    // Every stored count made one token bigger: a new process that takes its counts from the
    // store (and counts nothing it finds there) reports a bigger conversation. Run whole: a
    // resumed run takes the tokens of the messages its point covers from the point.
    let store = condense_store::Store::open(dir.path().join("s")).unwrap();
    let bigger = counts.iter().map(|&(hash, n)| (hash, n + 1)).collect();
    store
        .token_counts_put("counted", "o200k_base", bigger)
        .unwrap();
    drop(store);
    let before = |totals: &str| -> usize {
        totals
            .split(' ')
            .next()
            .unwrap()
            .replace(',', "")
            .parse()
            .unwrap()
    };
    let tampered = compress(&["--no-resume"]);
    assert!(
        before(&tampered) > before(&first),
        "{tampered} against {first}"
    );
}

/// A `compress` that fails before its run (an input that does not read, a plugin that is not
/// there) leaves no store beside the input: it is created when the run starts.
#[test]
fn a_compress_that_fails_before_its_run_creates_no_store() {
    let dir = tempfile::tempdir().unwrap();
    let good = dir.path().join("good.json");
    std::fs::write(&good, r#"{"messages":[{"role":"user","content":"hi"}]}"#).unwrap();
    let bad = dir.path().join("bad.json");
    std::fs::write(&bad, "{\"messages\": [").unwrap();
    let pipeline = dir.path().join("missing.toml");
    std::fs::write(&pipeline, "[[stage]]\nplugin = \"no-such-stage\"\n").unwrap();
    let store = dir.path().join(".condense");
    let bad_input = condense(&["compress", bad.to_str().unwrap()]);
    assert_ne!(bad_input.code, 0);
    assert!(!store.exists(), "{}", bad_input.stderr);
    let missing = condense(&[
        "compress",
        good.to_str().unwrap(),
        "--pipeline",
        pipeline.to_str().unwrap(),
    ]);
    assert_ne!(missing.code, 0);
    assert!(!store.exists(), "{}", missing.stderr);
    // The same input with the default pipeline runs, and the store is there.
    let ok = condense(&["compress", good.to_str().unwrap(), "--out", "-"]);
    assert_eq!(ok.code, 0, "{}", ok.stderr);
    assert!(store.join(condense_store::DB_FILE).is_file());
}
