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
fn stats_json_has_the_totals_of_the_context_and_finds_duplicates() {
    let stats = |rel: &str| -> serde_json::Value {
        let path = fixture(rel);
        let run = condense(&["stats", path.to_str().unwrap(), "--json"]);
        assert_eq!(run.code, 0, "{}", run.stderr);
        serde_json::from_str(&run.stdout).unwrap()
    };
    // The main thread: the subagents' lines (and their 12 repeated results) are not context.
    let v = stats(CC);
    assert_eq!(v["total_tokens"], 5_103);
    assert_eq!(v["tool_calls"], 11);
    assert_eq!(v["duplicate_tool_results"], 0);
    assert_eq!(v["budget"]["autocompact_threshold"], 167_000);
    let v = stats("transcripts/DRMacIver__claude-reliability/transcript.jsonl");
    assert_eq!(v["tool_calls"], 54);
    assert_eq!(v["duplicate_tool_results"], 1);
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
        "--fixed-tokens",
        "20000",
    ]);
    cmd.stdin(std::fs::File::open(fixture(CC)).unwrap());
    let out = cmd.output().unwrap();
    assert!(out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["budget"]["context_window"], 32_000);
    assert_eq!(v["budget"]["effective_window"], 24_000);
    // 20,000 fixed tokens + 5,103 of messages: 78% of the window, and over it with the reserve.
    assert_eq!(v["budget"]["fixed"], 20_000);
    assert_eq!(v["budget"]["level"], "elevated");
    // One output reserve: the 8,000 the model may write, also what the effective window keeps.
    assert_eq!(v["budget"]["output_reserve"], 8_000);
    assert_eq!(v["budget"]["available"], 32_000 - 25_103 - 8_000);
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
