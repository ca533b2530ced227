//! Lossless guarantees end to end: no-stage round trips, expand(compress(x)) == x, idempotence.

use crate::support::{condense, json_values, test_plugin, transcripts};
use std::path::Path;

/// Levels 1-3 with limits low enough to act on every real transcript.
const LOW_LIMIT_PIPELINE: &str = "[[stage]]\nplugin = \"tool-result-budget\"\n[stage.config]\nmax_result_size_chars = 2000\npreview_bytes = 500\n\n[[stage]]\nplugin = \"snip\"\n[stage.config]\nmax_tool_result_bytes = 1500\n\n[[stage]]\nplugin = \"microcompact\"\n";

/// Late enough that every timestamped session's prompt cache is cold (microcompact fires).
const LATE: &str = "2030-01-01T00:00:00Z";

/// Every shared transcript, and the hand-made sessions of the formats no shared transcript has
/// (a Responses API request, a Cline history).
fn covered() -> Vec<std::path::PathBuf> {
    let mut all = transcripts();
    all.push(crate::support::fixture("edge/responses_request.json"));
    all.push(crate::support::fixture(
        "edge/cline_api_conversation_history.json",
    ));
    all
}

fn write_pipeline(dir: &Path, body: &str) -> String {
    let p = dir.join("p.toml");
    std::fs::write(&p, body).unwrap();
    p.display().to_string()
}

/// Compresses every shared transcript with `pipeline`, asserting each comes out byte-identical;
/// returns each compress report.
fn assert_every_transcript_unchanged(pipeline: &str) -> Vec<serde_json::Value> {
    let dir = tempfile::tempdir().unwrap();
    let p = write_pipeline(dir.path(), pipeline);
    let mut reports = Vec::new();
    for t in covered() {
        let run = condense(&[
            "compress",
            t.to_str().unwrap(),
            "--pipeline",
            &p,
            "--store",
            dir.path().join("s").to_str().unwrap(),
            "--report",
            "json",
        ]);
        assert_eq!(run.code, 0, "{}: {}", t.display(), run.stderr);
        // Not assert_eq!: a failure would print megabytes.
        assert!(
            run.stdout.as_bytes() == std::fs::read(&t).unwrap(),
            "{}: not lossless",
            t.display()
        );
        reports.push(serde_json::from_str(&run.stderr).unwrap());
    }
    reports
}

#[test]
fn empty_pipeline_round_trips_every_transcript() {
    assert_every_transcript_unchanged("");
}

#[test]
fn stages_that_skip_read_or_echo_leave_every_transcript_byte_identical() {
    // test-faulty `noop` decides without reading (nothing crosses the boundary), `read` reads
    // and returns "unchanged", `echo` reads and hands the whole conversation back.
    let plugin = test_plugin("test-faulty");
    let stages: String = ["noop", "read", "echo"]
        .iter()
        .map(|mode| {
            format!(
                "[[stage]]\nname = \"{mode}\"\nplugin = \"{}\"\n[stage.config]\nmode = \"{mode}\"\n\n",
                plugin.display()
            )
        })
        .collect();
    for report in assert_every_transcript_unchanged(&stages) {
        let statuses: Vec<&str> = report["stages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["status"].as_str().unwrap())
            .collect();
        assert_eq!(statuses, ["ran", "ran", "ran"]);
        assert_eq!(report["tokens_saved"], 0);
    }
}

/// Compresses every shared transcript with `pipeline`, expands each result, and asserts the
/// original comes back. Returns each compress report.
fn compress_and_expand_all(pipeline: &str) -> Vec<serde_json::Value> {
    let dir = tempfile::tempdir().unwrap();
    let p = write_pipeline(dir.path(), pipeline);
    let mut reports = Vec::new();
    for t in covered() {
        let name = t.file_name().unwrap().to_string_lossy().to_string();
        let path = |what: &str| {
            dir.path()
                .join(format!("{what}-{name}"))
                .display()
                .to_string()
        };
        let (store, out, back) = (path("store"), path("out"), path("back"));
        let run = condense(&[
            "compress",
            t.to_str().unwrap(),
            "--pipeline",
            &p,
            "--store",
            &store,
            "--out",
            &out,
            "--report",
            "json",
            "--now",
            LATE,
        ]);
        assert_eq!(run.code, 0, "{name}: {}", run.stderr);
        let report: serde_json::Value = serde_json::from_str(&run.stderr).unwrap();
        let original = std::fs::read(&t).unwrap();
        if report["tokens_saved"].as_u64().unwrap() > 0 {
            assert!(
                std::fs::read(&out).unwrap().len() < original.len(),
                "{name}: smaller on disk"
            );
        }
        let run = condense(&["expand", &out, "--store", &store, "--out", &back]);
        assert_eq!(run.code, 0, "{name}: {}", run.stderr);
        // Not assert_eq!: a failure would print megabytes of JSON.
        let restored = std::fs::read(&back).unwrap();
        assert!(
            json_values(&restored) == json_values(&original),
            "{name}: expand(compress(x)) != x"
        );
        reports.push(report);
    }
    reports
}

#[test]
fn expand_restores_every_transcript_after_levels_1_to_3() {
    let reports = compress_and_expand_all(LOW_LIMIT_PIPELINE);
    let acted = reports
        .iter()
        .filter(|r| r["tokens_saved"].as_u64().unwrap() > 0)
        .count();
    // SWE-agent's pydicom trajectory has no tool calls at all (actions are plain assistant
    // text), so levels 1-3 have nothing to act on there.
    assert!(
        acted >= reports.len() - 1,
        "the pipeline acted on only {acted} transcripts"
    );
}

#[test]
fn compressing_twice_equals_compressing_once() {
    let dir = tempfile::tempdir().unwrap();
    let p = write_pipeline(dir.path(), LOW_LIMIT_PIPELINE);
    let picked: Vec<_> = transcripts()
        .into_iter()
        .filter(|t| {
            t.to_string_lossy().contains("claude-code-viewer")
                || t.to_string_lossy().contains("mini-swe")
        })
        .collect();
    assert_eq!(picked.len(), 2, "both transcripts are in tests/fixtures");
    for t in &picked {
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
                once.to_str().unwrap(),
                "--now",
                LATE,
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
                twice.to_str().unwrap(),
                "--now",
                LATE,
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

#[test]
fn default_pipeline_reports_each_level_on_the_claude_code_session() {
    let dir = tempfile::tempdir().unwrap();
    // The Claude Code session whose tool calls are all the agent's own (in the other, most
    // are subagents' lines, which are not context).
    let t = crate::support::fixture("transcripts/DRMacIver__claude-reliability/transcript.jsonl");
    let store = dir.path().join("store");
    let run = condense(&[
        "compress",
        t.to_str().unwrap(),
        "--report",
        "json",
        "--store",
        store.to_str().unwrap(),
        "--now",
        "2026-01-20T15:20:35Z",
        "--out",
        dir.path().join("out.jsonl").to_str().unwrap(),
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let report: serde_json::Value = serde_json::from_str(&run.stderr).unwrap();
    let stages = report["stages"].as_array().unwrap();
    let names: Vec<&str> = stages.iter().map(|s| s["name"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        [
            "tool-result-budget",
            "snip",
            "microcompact",
            "context-collapse",
            "autocompact"
        ]
    );
    // A 200k window: levels 4 and 5 run and find nothing to do.
    assert_eq!(stages[3]["tokens_saved"], 0);
    assert_eq!(stages[4]["tokens_saved"], 0);
    assert!(
        stages[1]["tokens_saved"].as_u64().unwrap() > 0
            && stages[2]["tokens_saved"].as_u64().unwrap() > 0
    );
    let snip_events = report["runs"][0]["stages"][1]["report"]["events"]
        .as_array()
        .unwrap();
    let dups = snip_events
        .iter()
        .filter(|e| e["kind"] == "deduplicated")
        .count();
    assert_eq!(dups, 1, "snip finds the duplicate tool result");
    let sum: u64 = stages
        .iter()
        .map(|s| s["tokens_saved"].as_u64().unwrap())
        .sum();
    assert_eq!(sum, report["tokens_saved"].as_u64().unwrap());
}

#[test]
fn fit_escalates_until_the_conversation_fits_or_says_it_cannot() {
    let dir = tempfile::tempdir().unwrap();
    let t = crate::support::fixture("transcripts/DRMacIver__claude-reliability/transcript.jsonl");
    // Two minutes after the session's last assistant message: the cache is hot, so
    // microcompact clears nothing on its own. Levels 1-3 only, so forcing is what fits it. The
    // request also carries the 25,057 tokens of system prompt and tools the file does not hold
    // (the gap `condense stats` shows to the usage the session reported).
    let hot = "2026-01-20T13:22:35Z";
    let p = write_pipeline(
        dir.path(),
        "[[stage]]\nplugin = \"tool-result-budget\"\n[[stage]]\nplugin = \"snip\"\n[[stage]]\nplugin = \"microcompact\"\n",
    );
    let compress = |window: &str, out: &str| {
        condense(&[
            "compress",
            t.to_str().unwrap(),
            "--pipeline",
            &p,
            "--context-window",
            window,
            "--fixed-tokens",
            "25057",
            // An 8,192-token reserve (a 46,000 window would otherwise reserve a quarter).
            "--max-output-tokens",
            "8192",
            "--fit",
            "--now",
            hot,
            "--report",
            "json",
            "--store",
            dir.path().join(format!("s{window}")).to_str().unwrap(),
            "--out",
            dir.path().join(out).to_str().unwrap(),
        ])
    };
    let run = compress("46000", "fit.jsonl");
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stderr.contains("fits after forcing `microcompact`"),
        "{}",
        run.stderr
    );
    let report: serde_json::Value = serde_json::from_str(
        run.stderr
            .lines()
            .skip(1)
            .collect::<Vec<_>>()
            .join("\n")
            .as_str(),
    )
    .unwrap();
    let statuses: Vec<&str> = report["runs"][0]["stages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["status"].as_str().unwrap())
        .collect();
    assert_eq!(
        statuses,
        ["ran", "ran", "ran", "forced", "forced", "forced"]
    );
    assert!(
        report["runs"][0]["budget_after"]["available"]
            .as_i64()
            .unwrap()
            >= 0
    );

    let run = compress("42000", "unfit.jsonl");
    assert_eq!(run.code, 1);
    assert!(
        run.stderr.lines().last().unwrap().contains("does not fit"),
        "{}",
        run.stderr
    );
    assert!(
        dir.path().join("unfit.jsonl").is_file(),
        "the best result is still written"
    );
}

/// All five levels in a window small enough that collapse and autocompact act.
const ALL_LEVELS_SMALL_WINDOW: &str = "[model]\ncontext_window = 32000\nmax_output_tokens = 8000\n\n[[stage]]\nplugin = \"tool-result-budget\"\n[stage.config]\nmax_result_size_chars = 4000\npreview_bytes = 1000\n\n[[stage]]\nplugin = \"snip\"\n\n[[stage]]\nplugin = \"microcompact\"\n\n[[stage]]\nplugin = \"context-collapse\"\n\n[[stage]]\nplugin = \"autocompact\"\n";

#[test]
fn expand_restores_every_transcript_after_all_five_levels() {
    let reports = compress_and_expand_all(ALL_LEVELS_SMALL_WINDOW);
    let saved_by =
        |r: &serde_json::Value, i: usize| r["stages"][i]["tokens_saved"].as_u64().unwrap();
    let heavy = reports
        .iter()
        .filter(|r| saved_by(r, 3) + saved_by(r, 4) > 0)
        .count();
    assert!(heavy >= 3, "levels 4-5 acted on only {heavy} transcripts");
}

/// A large input's text is let go while the stages run and read from its file again
/// (`send_text_away` in `commands.rs`, from 4 MB): the texts the archive keeps come from the
/// file, and the output is the one standard input gives, where the text stays. Each expands
/// to the input, byte for byte. The input is the tau-bench transcript (4.1 MB) with every `_`
/// spelled `\u005f`: a message written again would spell it `_`, so only the texts read from
/// the file give the input back.
#[test]
fn a_large_file_compresses_as_from_standard_input_and_expands_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let transcript = "transcripts/sierra-research__tau-bench/gpt-4o-airline.json";
    let text = std::fs::read_to_string(crate::support::fixture(transcript)).unwrap();
    let original = text.replace('_', "\\u005f").into_bytes();
    assert!(original.len() >= 4_000_000, "{} bytes", original.len());
    let input = dir.path().join("airline.json");
    std::fs::write(&input, &original).unwrap();
    let p = write_pipeline(dir.path(), ALL_LEVELS_SMALL_WINDOW);
    let path = |what: &str| dir.path().join(what).display().to_string();
    let (store, out, back) = (path("store"), path("out.json"), path("back.json"));
    let args = ["--pipeline", &p, "--now", LATE];
    let file_args = [
        "compress",
        input.to_str().unwrap(),
        "--store",
        &store,
        "--out",
        &out,
    ];
    let run = condense(&[&file_args[..], &args].concat());
    assert_eq!(run.code, 0, "{}", run.stderr);

    let (piped_store, piped_out) = (path("piped-store"), path("piped.json"));
    let piped_args = [
        "compress",
        "-",
        "--store",
        &piped_store,
        "--out",
        &piped_out,
    ];
    let piped = std::process::Command::new(crate::support::bin())
        .args([&piped_args[..], &args].concat())
        .env_remove("CONDENSE_PLUGIN_PATH")
        .stdin(std::fs::File::open(&input).unwrap())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&piped.stderr);
    assert!(piped.status.success(), "{stderr}");

    let compressed = std::fs::read(&out).unwrap();
    assert!(
        compressed.len() < original.len(),
        "{} bytes",
        compressed.len()
    );
    let same = compressed == std::fs::read(&piped_out).unwrap();
    assert!(same, "the file's output is not stdin's");
    crate::support::assert_expands_to(&out, &store, &back, &original);
    let piped_back = path("piped-back.json");
    crate::support::assert_expands_to(&piped_out, &piped_store, &piped_back, &original);
}
