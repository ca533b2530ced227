//! The README's examples run as written: every `condense ...` line of its ```sh blocks is run
//! by `sh -c`, in order, in a temporary folder that holds the files the examples name, with
//! `condense` on the PATH and HOME pointing into the folder. A README example that does not
//! run fails this test.
//!
//! The files the examples name, and what stands in for them (copies of shipped fixtures):
//!
//! | README name                 | stands in                                                    |
//! |-----------------------------|--------------------------------------------------------------|
//! | `session.jsonl`             | the Claude Code session of d-kimuson/claude-code-viewer      |
//! | `request.json`              | tests/fixtures/edge/anthropic_body.json                      |
//! | `transcripts/`              | that session and DRMacIver/claude-reliability's (eval needs one of 10k+ tokens) |
//! | `~/.claude/projects/my-app/`| `$HOME/.claude/projects/my-app/` holding the session          |
//! | `my.toml`, `a.toml`, `b.toml` | the embedded default pipeline (`condense pipeline show`)   |
//!
//! Everything else an example reads (`small.jsonl`, `.condense`) an earlier example writes.
//! Exit status 0 is expected, except where [`EXPECTED_STATUS`] documents another.

use crate::support::{bin, fixture};

/// Examples whose documented status is not 0, by their first words.
const EXPECTED_STATUS: [(&str, i32); 1] = [
    // The first run of a snapshot gate has only new snapshots: exit 1 and `.snap.new` files
    // until `--accept` takes them (README: "CI gate, --accept").
    ("condense snapshot ", 1),
];

/// Every `condense ...` line of the README's ```sh blocks, without its trailing comment.
fn examples(readme: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut in_sh = false;
    for line in readme.lines() {
        let t = line.trim();
        if t.starts_with("```") {
            in_sh = !in_sh && t == "```sh";
            continue;
        }
        if in_sh && t.starts_with("condense ") {
            let command = t.split(" # ").next().unwrap_or(t).trim();
            out.push(command.to_string());
        }
    }
    out
}

#[test]
fn the_readme_examples_are_found() {
    let readme = "intro\n```sh\ncargo xtask demo\ncondense stats a.jsonl   # where\n```\n\
                  ```toml\ncondense = 1\n```\n```sh\ncondense pipeline show > my.toml\n```\n";
    assert_eq!(
        examples(readme),
        ["condense stats a.jsonl", "condense pipeline show > my.toml"]
    );
}

#[test]
fn every_readme_example_runs_as_written() {
    let readme = std::fs::read_to_string(crate::support::repo().join("README.md")).unwrap();
    let examples = examples(&readme);
    assert!(examples.len() >= 15, "{examples:?}");

    let dir = tempfile::tempdir().unwrap();
    let home = dir.path();
    let cc = fixture(
        "transcripts/d-kimuson__claude-code-viewer/fe5e1c67-53e7-4862-81ae-d0e013e3270b.jsonl",
    );
    let big = fixture("transcripts/DRMacIver__claude-reliability/transcript.jsonl");
    std::fs::copy(&cc, home.join("session.jsonl")).unwrap();
    std::fs::copy(
        fixture("edge/anthropic_body.json"),
        home.join("request.json"),
    )
    .unwrap();
    std::fs::create_dir_all(home.join("transcripts")).unwrap();
    std::fs::copy(&cc, home.join("transcripts/viewer.jsonl")).unwrap();
    std::fs::copy(&big, home.join("transcripts/reliability.jsonl")).unwrap();
    let project = home.join(".claude/projects/my-app");
    std::fs::create_dir_all(&project).unwrap();
    std::fs::copy(&cc, project.join("a.jsonl")).unwrap();
    let default = std::process::Command::new(bin())
        .args(["pipeline", "show"])
        .output()
        .unwrap();
    assert!(default.status.success());
    for name in ["my.toml", "a.toml", "b.toml"] {
        std::fs::write(home.join(name), &default.stdout).unwrap();
    }

    let bin_dir = bin().parent().unwrap().to_path_buf();
    let path = format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut failures = Vec::new();
    for example in &examples {
        let out = std::process::Command::new("sh")
            .arg("-c")
            .arg(example)
            .current_dir(home)
            .env("HOME", home)
            .env("PATH", &path)
            .env_remove("CONDENSE_PLUGIN_PATH")
            .env("NO_COLOR", "1")
            .output()
            .unwrap();
        let expected = EXPECTED_STATUS
            .iter()
            .find(|(start, _)| example.starts_with(start))
            .map_or(0, |(_, code)| *code);
        let code = out.status.code().unwrap_or(-1);
        if code != expected {
            failures.push(format!(
                "`{example}`: exit {code}, expected {expected}: {}",
                String::from_utf8_lossy(&out.stderr)
                    .lines()
                    .last()
                    .unwrap_or("")
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "README examples that do not run:\n{}",
        failures.join("\n")
    );
    // What the examples wrote is there.
    assert!(home.join("restored.jsonl").is_file() && home.join("my-stage").is_dir());
    assert!(project.join("a.condensed.jsonl").is_file());
}
