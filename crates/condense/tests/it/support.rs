//! Shared helpers: run the binary, find fixtures and test plugins.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub fn bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_condense"))
}

pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

pub fn fixture(rel: &str) -> PathBuf {
    repo().join("tests/fixtures").join(rel)
}

/// The folder `cargo xtask plugins` puts test-only plugins in.
pub fn test_plugin(name: &str) -> PathBuf {
    let target = bin()
        .parent()
        .and_then(Path::parent)
        .map(Path::to_path_buf)
        .unwrap_or_default();
    let file = condense_host::discover::library_file_name(name);
    let path = target.join("test-plugins").join(file);
    assert!(
        path.is_file(),
        "{} missing: run `cargo xtask plugins` (the README's test command does)",
        path.display()
    );
    path
}

/// Every shared transcript copied into the repo.
pub fn transcripts() -> Vec<PathBuf> {
    let mut out = Vec::new();
    let dir = fixture("transcripts");
    for entry in std::fs::read_dir(&dir).expect("tests/fixtures/transcripts") {
        let sub = entry.unwrap().path();
        if !sub.is_dir() {
            continue;
        }
        for f in std::fs::read_dir(&sub).unwrap() {
            let p = f.unwrap().path();
            let name = p.file_name().unwrap().to_string_lossy().to_string();
            if !name.starts_with("UPSTREAM") {
                out.push(p);
            }
        }
    }
    out.sort();
    assert!(
        out.len() >= 7,
        "expected the shared transcripts in {}",
        dir.display()
    );
    out
}

pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

pub fn condense(args: &[&str]) -> Run {
    condense_in(args, None)
}

pub fn condense_in(args: &[&str], dir: Option<&Path>) -> Run {
    let mut cmd = Command::new(bin());
    cmd.args(args).env_remove("CONDENSE_PLUGIN_PATH");
    if let Some(d) = dir {
        cmd.current_dir(d);
    }
    let out: Output = cmd.output().expect("run condense");
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

impl Run {
    /// Asserts the run failed with `code` and said exactly one line on stderr.
    pub fn one_line_failure(&self, code: i32) -> &str {
        assert_eq!(self.code, code, "stderr: {}", self.stderr);
        let lines: Vec<&str> = self.stderr.lines().collect();
        assert_eq!(lines.len(), 1, "expected one line, got: {}", self.stderr);
        assert!(
            !self.stderr.contains("panicked at") && !self.stderr.contains("RUST_BACKTRACE"),
            "{}",
            self.stderr
        );
        lines[0]
    }
}

/// JSON equality for JSON and JSONL files (key order free).
pub fn json_values(bytes: &[u8]) -> Vec<serde_json::Value> {
    if let Ok(v) = serde_json::from_slice::<serde_json::Value>(bytes) {
        return vec![v];
    }
    String::from_utf8_lossy(bytes)
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).expect("JSONL line"))
        .collect()
}
