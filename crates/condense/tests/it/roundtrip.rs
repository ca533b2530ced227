//! Lossless guarantees end to end: no-stage round trips, expand(compress(x)) == x, idempotence.

use crate::support::{condense, json_values, transcripts};
use std::path::Path;

const LOW_LIMIT_PIPELINE: &str = "[[stage]]\nplugin = \"tool-result-budget\"\n[stage.config]\nmax_result_size_chars = 2000\npreview_bytes = 500\n";

fn write_pipeline(dir: &Path, body: &str) -> String {
    let p = dir.join("p.toml");
    std::fs::write(&p, body).unwrap();
    p.display().to_string()
}

#[test]
fn empty_pipeline_round_trips_every_transcript() {
    let dir = tempfile::tempdir().unwrap();
    let p = write_pipeline(dir.path(), "");
    for t in transcripts() {
        let run = condense(&[
            "compress",
            t.to_str().unwrap(),
            "--pipeline",
            &p,
            "--store",
            dir.path().join("s").to_str().unwrap(),
        ]);
        assert_eq!(run.code, 0, "{}: {}", t.display(), run.stderr);
        let original = std::fs::read(&t).unwrap();
        assert_eq!(
            json_values(run.stdout.as_bytes()),
            json_values(&original),
            "{}",
            t.display()
        );
    }
}

#[test]
fn expand_restores_every_transcript_after_level_1() {
    let dir = tempfile::tempdir().unwrap();
    let p = write_pipeline(dir.path(), LOW_LIMIT_PIPELINE);
    let mut acted = 0;
    for t in transcripts() {
        let name = t.file_name().unwrap().to_string_lossy().to_string();
        let store = dir.path().join(format!("store-{name}"));
        let out = dir.path().join(format!("out-{name}"));
        let back = dir.path().join(format!("back-{name}"));
        let run = condense(&[
            "compress",
            t.to_str().unwrap(),
            "--pipeline",
            &p,
            "--store",
            store.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
            "--report",
            "json",
        ]);
        assert_eq!(run.code, 0, "{}: {}", t.display(), run.stderr);
        let report: serde_json::Value = serde_json::from_str(&run.stderr).unwrap();
        let original = std::fs::read(&t).unwrap();
        let compressed = std::fs::read(&out).unwrap();
        if report["tokens_saved"].as_u64().unwrap() > 0 {
            acted += 1;
            assert!(compressed.len() < original.len(), "{name}: smaller on disk");
        }
        let run = condense(&[
            "expand",
            out.to_str().unwrap(),
            "--store",
            store.to_str().unwrap(),
            "--out",
            back.to_str().unwrap(),
        ]);
        assert_eq!(run.code, 0, "{}: {}", t.display(), run.stderr);
        let restored = std::fs::read(&back).unwrap();
        assert_eq!(
            json_values(&restored),
            json_values(&original),
            "{name}: expand(compress(x)) == x"
        );
    }
    assert!(acted >= 4, "level 1 acted on only {acted} transcripts");
}

#[test]
fn compressing_twice_equals_compressing_once() {
    let dir = tempfile::tempdir().unwrap();
    let p = write_pipeline(dir.path(), LOW_LIMIT_PIPELINE);
    for t in transcripts().iter().filter(|t| {
        t.to_string_lossy().contains("claude-code-viewer")
            || t.to_string_lossy().contains("mini-swe")
    }) {
        let store = dir.path().join("store");
        let once = dir.path().join("once");
        let twice = dir.path().join("twice");
        let s = store.to_str().unwrap();
        assert_eq!(
            condense(&[
                "compress",
                t.to_str().unwrap(),
                "--pipeline",
                &p,
                "--store",
                s,
                "--out",
                once.to_str().unwrap()
            ])
            .code,
            0
        );
        assert_eq!(
            condense(&[
                "compress",
                once.to_str().unwrap(),
                "--pipeline",
                &p,
                "--store",
                s,
                "--out",
                twice.to_str().unwrap()
            ])
            .code,
            0
        );
        assert_eq!(
            std::fs::read(&once).unwrap(),
            std::fs::read(&twice).unwrap(),
            "{}",
            t.display()
        );
    }
}
