//! `expand` at the edges (issue 12): identical lines, the format recorded at compress time, a
//! store that cannot restore everything, orphan temp files of killed writes.

use crate::support::{condense_in, fixture};
use std::path::Path;

/// Late enough that microcompact clears the old results of the shared sessions.
const LATE: &str = "2030-01-01T00:00:00Z";

/// The DRMacIver session, copied into `dir` as `name`, line `dup` (1-based) written twice when
/// given.
fn session_in(dir: &Path, name: &str, dup: Option<usize>) {
    let text = std::fs::read_to_string(fixture(
        "transcripts/DRMacIver__claude-reliability/transcript.jsonl",
    ))
    .unwrap();
    let mut out = String::new();
    for (i, line) in text.split_inclusive('\n').enumerate() {
        out.push_str(line);
        if Some(i + 1) == dup {
            out.push_str(line);
        }
    }
    std::fs::write(dir.join(name), out).unwrap();
}

fn compress(dir: &Path, input: &str, output: &str, extra: &[&str]) {
    let mut args = vec!["compress", input, "--now", LATE, "--out", output];
    args.extend_from_slice(extra);
    let run = condense_in(&args, Some(dir));
    assert_eq!(run.code, 0, "{}", run.stderr);
}

#[test]
fn a_duplicated_line_expands_exactly() {
    let dir = tempfile::tempdir().unwrap();
    // Line 17 is a tool result microcompact clears (the issue's `sed 17p`).
    session_in(dir.path(), "dup.jsonl", Some(17));
    compress(dir.path(), "dup.jsonl", "small.jsonl", &[]);
    let small = std::fs::read_to_string(dir.path().join("small.jsonl")).unwrap();
    assert!(small.contains("[Old tool result content cleared]"));
    let run = condense_in(
        &["expand", "small.jsonl", "--out", "back.jsonl"],
        Some(dir.path()),
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        std::fs::read(dir.path().join("back.jsonl")).unwrap()
            == std::fs::read(dir.path().join("dup.jsonl")).unwrap(),
        "not the original"
    );
}

/// An Anthropic request whose image marks it as Anthropic: once autocompact has summarized the
/// turns and snip has taken the image out, the compressed file holds only text and detection
/// says OpenAI. Expand must read it as Anthropic, as it was compressed, or it writes the
/// originals back as OpenAI (`image_url`).
#[test]
fn expand_reads_the_file_the_way_it_was_compressed() {
    let dir = tempfile::tempdir().unwrap();
    let png = "iVBORw0KGgoAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA";
    let mut messages = vec![serde_json::json!({"role": "user", "content": [
        {"type": "text", "text": "look at this"},
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": png}}
    ]})];
    for i in 0..30 {
        let words: Vec<String> = (0..1500).map(|j| format!("word{j}")).collect();
        messages.push(serde_json::json!({"role": "assistant", "content": format!("answer {i}: {}", words.join(" "))}));
        messages.push(serde_json::json!({"role": "user", "content": format!("question {i}")}));
    }
    let request =
        serde_json::json!({"model": "claude-sonnet-4-5", "max_tokens": 1000, "messages": messages});
    let original = serde_json::to_vec(&request).unwrap();
    std::fs::write(dir.path().join("req.json"), &original).unwrap();
    compress(
        dir.path(),
        "req.json",
        "small.json",
        &["--fit", "--context-window", "60000"],
    );
    let stats = condense_in(&["stats", "small.json"], Some(dir.path()));
    assert!(
        stats.stdout.contains("openai"),
        "the compressed file is detected as OpenAI: {}",
        stats.stdout
    );
    let run = condense_in(
        &["expand", "small.json", "--out", "back.json"],
        Some(dir.path()),
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    let back = std::fs::read(dir.path().join("back.json")).unwrap();
    assert_eq!(back, original, "expand is byte-exact");
    // --format is obeyed for reading, but what the archive restores is the original bytes,
    // which no reading turns into OpenAI blocks.
    let forced = condense_in(
        &[
            "expand",
            "small.json",
            "--format",
            "openai",
            "--out",
            "forced.json",
        ],
        Some(dir.path()),
    );
    assert_eq!(forced.code, 0, "{}", forced.stderr);
    let forced = std::fs::read(dir.path().join("forced.json")).unwrap();
    assert_eq!(forced, original);
}

/// Compresses the DRMacIver session with the default pipeline into `dir/.condense`.
fn compressed_session(dir: &Path) {
    session_in(dir, "s.jsonl", None);
    compress(dir, "s.jsonl", "small.jsonl", &[]);
}

#[test]
fn a_lost_record_fails_expand_and_names_what_is_missing() {
    let dir = tempfile::tempdir().unwrap();
    compressed_session(dir.path());
    // Delete the biggest segment: most of the cleared results (the others sit in the segments
    // the same stage run wrote beside it, 64 KiB each).
    let store = condense_store::Store::open(dir.path().join(".condense")).unwrap();
    let mut segments: Vec<(usize, String, String)> = Vec::new();
    for namespace in store.namespaces("expand-").unwrap() {
        for (name, bytes) in store.records(&namespace).unwrap() {
            segments.push((bytes.len(), namespace.clone(), name));
        }
    }
    segments.sort();
    let (_, namespace, name) = segments.last().unwrap();
    store.record_remove(namespace, name).unwrap();
    drop(store);

    let run = condense_in(
        &["expand", "small.jsonl", "--out", "back.jsonl"],
        Some(dir.path()),
    );
    let line = run.one_line_failure(1).to_string();
    assert!(!dir.path().join("back.jsonl").exists(), "nothing written");
    insta::assert_snapshot!("expand_lost_record", line);

    let partial = condense_in(
        &["expand", "small.jsonl", "--partial", "--out", "back.jsonl"],
        Some(dir.path()),
    );
    assert_eq!(partial.code, 0, "{}", partial.stderr);
    assert!(partial.stderr.contains("warning:"), "{}", partial.stderr);
    assert!(dir.path().join("back.jsonl").exists());
}

#[test]
fn an_empty_or_wrong_store_fails_expand() {
    let dir = tempfile::tempdir().unwrap();
    compressed_session(dir.path());
    std::fs::create_dir(dir.path().join("empty")).unwrap();
    let run = condense_in(
        &["expand", "small.jsonl", "--store", "empty"],
        Some(dir.path()),
    );
    let line = run.one_line_failure(1).to_string();
    assert!(run.stdout.is_empty(), "nothing written");
    insta::assert_snapshot!("expand_empty_store", line);

    // Another session's store.
    let other = tempfile::tempdir().unwrap();
    std::fs::copy(
        fixture(
            "transcripts/d-kimuson__claude-code-viewer/fe5e1c67-53e7-4862-81ae-d0e013e3270b.jsonl",
        ),
        other.path().join("o.jsonl"),
    )
    .unwrap();
    compress(other.path(), "o.jsonl", "small.jsonl", &[]);
    let store = other.path().join(".condense");
    let run = condense_in(
        &["expand", "small.jsonl", "--store", store.to_str().unwrap()],
        Some(dir.path()),
    );
    assert!(run.one_line_failure(1).contains("34 messages not restored"));
}

#[test]
fn an_extended_compressed_session_expands_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    compressed_session(dir.path());
    // The agent goes on from the compressed file: a new line at the end.
    let mut small = std::fs::read_to_string(dir.path().join("small.jsonl")).unwrap();
    let last = small.lines().last().unwrap().to_string();
    let mut line: serde_json::Value = serde_json::from_str(&last).unwrap();
    line["uuid"] = "appended-after-compression".into();
    line["parentUuid"] = last_uuid(&last).into();
    small.push_str(&serde_json::to_string(&line).unwrap());
    small.push('\n');
    std::fs::write(dir.path().join("small.jsonl"), small).unwrap();
    let run = condense_in(&["expand", "small.jsonl"], Some(dir.path()));
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(!run.stdout.contains("[Old tool result content cleared]"));
}

fn last_uuid(line: &str) -> String {
    let v: serde_json::Value = serde_json::from_str(line).unwrap();
    v["uuid"].as_str().unwrap().to_string()
}

/// A SIGKILLed write leaves `.tmp-<pid>-<random>` behind; the next run removes it.
#[test]
fn the_next_run_removes_temp_files_of_killed_writes() {
    if !Path::new("/proc/self").exists() {
        return; // Orphans go by age alone where /proc cannot tell a dead process.
    }
    let dir = tempfile::tempdir().unwrap();
    compressed_session(dir.path());
    // Where the first store layout kept state (issue 13 moved it into store.db; such folders
    // are migrated, temp files and all, on the next open).
    let session = dir.path().join(".condense/state/some-session");
    std::fs::create_dir_all(&session).unwrap();
    let orphan = session.join(".tmp-4294967295-Zq8xYw");
    std::fs::write(&orphan, b"half a state").unwrap();
    let blobs = dir.path().join(".condense/blobs/00");
    std::fs::create_dir_all(&blobs).unwrap();
    let orphan_blob = blobs.join(".tmp-4294967295-Ab12Cd");
    std::fs::write(&orphan_blob, b"half a blob").unwrap();
    compress(dir.path(), "s.jsonl", "again.jsonl", &[]);
    assert!(!orphan.exists());
    assert!(!orphan_blob.exists());
}
