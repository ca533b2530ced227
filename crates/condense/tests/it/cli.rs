//! The command line: stats output, errors, help.

use crate::support::{condense, fixture};

const CC: &str =
    "transcripts/d-kimuson__claude-code-viewer/fe5e1c67-53e7-4862-81ae-d0e013e3270b.jsonl";

#[test]
fn stats_table_on_the_claude_code_session() {
    let path = fixture(CC);
    let run = condense(&["stats", path.to_str().unwrap()]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let shown = run.stdout.replace(path.to_str().unwrap(), "<file>");
    insta::assert_snapshot!("stats_claude_code_table", shown);
}

#[test]
fn stats_json_has_totals_and_finds_the_twelve_duplicates() {
    let path = fixture(CC);
    let run = condense(&["stats", path.to_str().unwrap(), "--json"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let v: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    assert!(v["total_tokens"].as_u64().unwrap() > 50_000);
    assert_eq!(v["duplicate_tool_results"], 12);
    assert_eq!(v["tool_calls"], 167);
    assert_eq!(v["budget"]["autocompact_threshold"], 167_000);
}

#[test]
fn stats_reads_stdin_and_takes_the_window() {
    let mut cmd = std::process::Command::new(crate::support::bin());
    cmd.args([
        "stats",
        "-",
        "--json",
        "--context-window",
        "32000",
        "--max-output-tokens",
        "8000",
    ]);
    cmd.stdin(std::fs::File::open(fixture(CC)).unwrap());
    let out = cmd.output().unwrap();
    assert!(out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["budget"]["context_window"], 32_000);
    assert_eq!(v["budget"]["effective_window"], 24_000);
    assert_eq!(v["budget"]["level"], "critical");
}

#[test]
fn bad_input_is_one_line_naming_the_file_and_place() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.jsonl");
    std::fs::write(&bad, "{\"type\":\"user\",\"message\":{\"role\":\"user\",\"content\":\"hi\"},\"sessionId\":\"s\"}\n{not json\n").unwrap();
    let run = condense(&["stats", bad.to_str().unwrap()]);
    let line = run.one_line_failure(1);
    assert!(line.contains("bad.jsonl") && line.contains(":2"), "{line}");

    let run = condense(&["stats", dir.path().join("missing.json").to_str().unwrap()]);
    assert!(run
        .one_line_failure(1)
        .contains("missing.json: cannot read"));
}

#[test]
fn usage_errors_exit_2_and_help_exits_0() {
    assert_eq!(condense(&["compress", "--report", "yaml", "x"]).code, 2);
    assert_eq!(condense(&["stats", "x", "--tokenizer", "gpt2"]).code, 2);
    let help = condense(&["--help"]);
    assert_eq!(help.code, 0);
    assert!(help.stdout.contains("compress") && help.stdout.contains("expand"));
}
