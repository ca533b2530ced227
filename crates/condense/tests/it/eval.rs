//! `condense eval`: the JSON shape, the window rule, skipping, failures, the judge against a
//! local server, and the issue's acceptance test.

use crate::support::{
    condense, condense_env, condense_in, fixture, repo, test_plugin, transcripts, LocalServer,
    Received,
};
use serde_json::{json, Value};
use std::path::Path;

/// A Claude Code session of ~16k tokens: long enough to be evaluated, quick to run.
const SMALL: &str = "transcripts/DRMacIver__claude-reliability/transcript.jsonl";
const KEY: &str = "sk-judge-SECRET-0123456789";

fn eval_json(args: &[&str]) -> Value {
    let mut all = vec!["eval", "--json"];
    all.extend_from_slice(args);
    let run = condense(&all);
    assert_eq!(run.code, 0, "{}", run.stderr);
    serde_json::from_str(&run.stdout).unwrap_or_else(|e| panic!("{e}: {}", run.stdout))
}

fn hits(v: &Value) -> (u64, u64) {
    (v["hits"].as_u64().unwrap(), v["total"].as_u64().unwrap())
}

#[test]
fn json_shape_and_the_window_that_forces_the_cut() {
    let small = fixture(SMALL);
    let v = eval_json(&[small.to_str().unwrap()]);
    assert_eq!(v["settings"]["cut"], 0.85);
    assert_eq!(v["settings"]["min_tokens"], 10_000);
    assert_eq!(
        v["settings"]["now_ms"], 4_102_444_800_000_i64,
        "2100-01-01: a cold cache"
    );
    let labels = ["default", "truncate-oldest", "mask+truncate", "autocompact"];
    assert_eq!(v["settings"]["pipelines"], json!(labels));

    let file = &v["inputs"][0];
    assert_eq!(file["format"], "claude-code");
    let conv = &file["conversations"][0];
    let before = conv["tokens_before"].as_u64().unwrap();
    assert!(before > 10_000, "{before}");
    let w = &conv["window"];
    let (window, reserve, limit) = (
        w["context_window"].as_u64().unwrap(),
        w["output_reserve"].as_u64().unwrap(),
        w["limit"].as_u64().unwrap(),
    );
    assert_eq!(limit, (before as f64 * 0.15).ceil() as u64, "{w}");
    assert_eq!(window - reserve, limit);
    assert!(
        reserve.abs_diff(window / 8) <= 1,
        "an eighth for the output: {w}"
    );
    assert!(conv["probes"]["artifacts"].as_u64().unwrap() > 10);
    assert_eq!(conv["probes"]["request"], true);

    let results = conv["results"].as_array().unwrap();
    let got: Vec<&str> = results
        .iter()
        .map(|r| r["pipeline"].as_str().unwrap())
        .collect();
    assert_eq!(got, labels);
    for r in results {
        let kind = if r["pipeline"] == "default" {
            "pipeline"
        } else {
            "baseline"
        };
        assert_eq!(r["kind"], kind);
        for k in ["artifact", "errors", "request", "integrity"] {
            let (h, t) = hits(&r["scores"][k]);
            assert!(h <= t, "{k}: {r}");
        }
        assert_eq!(
            hits(&r["scores"]["integrity"]).1,
            4,
            "four integrity checks"
        );
        let lost = &r["lost"];
        assert_eq!(
            lost["artifacts"].as_array().unwrap().len() as u64,
            {
                let (h, t) = hits(&r["scores"]["artifact"]);
                t - h
            },
            "every lost artifact is named: {r}"
        );
        assert!(lost["errors"].is_array() && lost["integrity"].is_array());
        // Fitting means losing at least 85% of the tokens.
        let after = r["tokens_after"].as_u64().unwrap();
        if r["fits"] == true {
            assert!(after <= limit, "{r}");
            assert!(
                r["cut"].as_f64().unwrap() >= 0.85 - 1.0 / before as f64,
                "{r}"
            );
        }
    }
    // The file's totals and the overall totals add the same conversations.
    assert_eq!(file["totals"], v["totals"]);
    assert_eq!(v["totals"][0]["conversations"], 1);
}

#[test]
fn a_fixed_window_applies_to_every_conversation() {
    let small = fixture(SMALL);
    let v = eval_json(&[
        small.to_str().unwrap(),
        "--context-window",
        "20000",
        "--baseline",
        "none",
    ]);
    let conv = &v["inputs"][0]["conversations"][0];
    assert_eq!(
        conv["window"],
        json!({"context_window": 20000, "output_reserve": 2500, "limit": 17500})
    );
    assert_eq!(conv["results"].as_array().unwrap().len(), 1);
}

#[test]
fn conversations_too_short_to_need_compressing_are_skipped() {
    let tau = fixture("transcripts/sierra-research__tau-bench/gpt-4o-airline.json");
    let v = eval_json(&[tau.to_str().unwrap(), "--baseline", "none"]);
    let file = &v["inputs"][0];
    let why = file["skipped"].as_str().unwrap();
    assert!(
        why.contains("not long enough to need compressing")
            && why.contains("all 200 conversations"),
        "{why}"
    );
    let convs = file["conversations"].as_array().unwrap();
    assert_eq!(convs.len(), 200);
    assert!(convs
        .iter()
        .all(|c| c["skipped"].is_string() && c["results"] == json!([])));

    // The table says so too, and a lower --min-tokens evaluates a small file.
    let edge = fixture("edge/anthropic_body.json");
    let run = condense(&["eval", edge.to_str().unwrap(), "--baseline", "none"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stdout
            .contains("skipped, not long enough to need compressing"),
        "{}",
        run.stdout
    );
    let v = eval_json(&[
        edge.to_str().unwrap(),
        "--baseline",
        "none",
        "--min-tokens",
        "1000",
    ]);
    assert!(v["inputs"][0]["conversations"][0]["window"].is_object());
}

#[test]
fn bad_flags_exit_2_with_one_line() {
    let small = fixture(SMALL);
    let s = small.to_str().unwrap();
    let cases: &[(&[&str], &str)] = &[
        (
            &["--cut", "1.5"],
            "--cut: expected a fraction between 0 and 1",
        ),
        (&["--cut", "most"], "--cut: expected a fraction"),
        (
            &["--min-tokens", "lots"],
            "--min-tokens: expected a whole number",
        ),
        (&["--context-window", "0"], "--context-window:"),
        (&["--baseline", "truncate"], "unknown baseline `truncate`"),
        (
            &["--baseline", "none", "--baseline", "autocompact"],
            "--baseline none cannot be combined",
        ),
        (
            &["--judge", "gemini", "--judge-model", "m"],
            "--judge: expected anthropic or openai",
        ),
        (&["--judge-model", "m"], "need --judge"),
        (&["--judge", "anthropic"], "--judge-model is required"),
        (
            &["--now", "yesterday"],
            "--now: expected Unix milliseconds or RFC 3339",
        ),
        (
            &["-p", "/no/such/pipeline.toml"],
            "cannot read pipeline file",
        ),
    ];
    for (extra, expected) in cases {
        let mut args = vec!["eval", s];
        args.extend_from_slice(extra);
        let run = condense(&args);
        let line = run.one_line_failure(2);
        assert!(line.contains(expected), "{extra:?}: {line}");
    }
    let run = condense(&["eval", "/no/such/transcript.jsonl"]);
    assert!(run.one_line_failure(2).contains("no such file or folder"));
    assert_eq!(condense(&["eval", s, "--bogus"]).code, 2);
    assert_eq!(condense(&["eval"]).code, 2);
}

#[test]
fn a_failing_stage_is_one_line_naming_pipeline_file_and_what() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("faulty.toml");
    std::fs::write(
        &p,
        format!(
            "[[stage]]\nname = \"faulty\"\nplugin = \"{}\"\n\n[stage.config]\nmode = \"error\"\n",
            test_plugin("test-faulty").display()
        ),
    )
    .unwrap();
    let edge = fixture("edge/anthropic_body.json");
    let run = condense(&[
        "eval",
        edge.to_str().unwrap(),
        "-p",
        p.to_str().unwrap(),
        "--baseline",
        "none",
        "--min-tokens",
        "0",
    ]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(run.stdout.is_empty(), "no partial table: {}", run.stdout);
    let last = run.stderr.lines().last().unwrap();
    assert!(
        last.starts_with("condense: error: pipeline `faulty.toml` on ")
            && last.contains("anthropic_body.json")
            && last.ends_with("stage `faulty` failed: test-faulty was told to fail"),
        "{}",
        run.stderr
    );
    // A pipeline whose plugin is missing fails before anything runs, naming it (exit 2).
    std::fs::write(&p, "[[stage]]\nplugin = \"no-such-plugin\"\n").unwrap();
    let run = condense(&["eval", edge.to_str().unwrap(), "-p", p.to_str().unwrap()]);
    let line = run.one_line_failure(2);
    assert!(
        line.contains("pipeline `faulty.toml`: stage `no-such-plugin`"),
        "{line}"
    );
}

#[test]
fn help_teaches_the_probes_and_the_window() {
    let run = condense(&["eval", "--help"]);
    assert_eq!(run.code, 0);
    for needle in [
        "artifact",
        "first meaningful line",
        "integrity",
        "fit limit",
        "--min-tokens",
        "2100-01-01",
        "Examples:",
        "--judge",
    ] {
        assert!(run.stdout.contains(needle), "{needle}: {}", run.stdout);
    }
}

#[test]
fn table_on_a_small_fixture() {
    // Example plugins only (truncate-oldest, observation-mask): the table does not move when
    // the levels change. Relative names, so it is the same in every checkout.
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(
        fixture("edge/anthropic_body.json"),
        dir.path().join("body.json"),
    )
    .unwrap();
    std::fs::write(
        dir.path().join("truncate.toml"),
        "[[stage]]\nplugin = \"truncate-oldest\"\n",
    )
    .unwrap();
    let run = condense_in(
        &[
            "eval",
            "body.json",
            "-p",
            "truncate.toml",
            "--baseline",
            "mask+truncate",
            "--min-tokens",
            "1000",
        ],
        Some(dir.path()),
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    insta::assert_snapshot!("eval_table_small_fixture", run.stdout);
}

/// Every transcript's conversations long enough to be evaluated, with the default pipeline
/// and the three baselines.
fn eval_transcripts() -> Vec<(String, Value)> {
    let files = transcripts();
    let mut args = vec!["eval".to_string(), "--json".to_string()];
    args.extend(files.iter().map(|f| f.display().to_string()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let run = condense(&args);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let v: Value = serde_json::from_str(&run.stdout).unwrap();
    let mut out = Vec::new();
    for file in v["inputs"].as_array().unwrap() {
        let name = Path::new(file["file"].as_str().unwrap())
            .file_name()
            .unwrap()
            .to_string_lossy()
            .to_string();
        for c in file["conversations"].as_array().unwrap() {
            if c["skipped"].is_null() {
                let label = c["label"].as_str().unwrap();
                let at = if label.is_empty() {
                    String::new()
                } else {
                    format!(" ({label})")
                };
                out.push((format!("{name}{at}"), c.clone()));
            }
        }
    }
    out
}

#[test]
fn probes_are_found_in_every_agent_format() {
    let convs = eval_transcripts();
    let probe = |name: &str, kind: &str| -> u64 {
        convs
            .iter()
            .filter(|(n, _)| n.starts_with(name))
            .map(|(_, c)| match &c["probes"][kind] {
                Value::Bool(b) => u64::from(*b),
                n => n.as_u64().unwrap(),
            })
            .sum()
    };
    // Claude Code: Write/Edit and Bash writes; is_error results. (The other shipped session is
    // its main thread now, 5,103 tokens: too short to be evaluated.)
    assert!(probe("transcript.jsonl", "artifacts") >= 15);
    assert!(probe("transcript.jsonl", "errors") >= 1);
    assert!(!convs.iter().any(|(n, _)| n.starts_with("fe5e1c67")));
    // mini-swe-agent: bash heredocs and redirections; <returncode> and tracebacks.
    assert!(probe("sqlfluff", "artifacts") >= 30);
    assert!(probe("sqlfluff", "errors") >= 10);
    // OpenHands: str_replace_editor edits; exit codes in the event envelope.
    assert!(probe("output.jsonl", "artifacts") >= 3);
    assert!(probe("output.jsonl", "errors") >= 5);
    assert_eq!(probe("output.jsonl", "request"), 3);
    // Short conversations (tau-bench, one SWE-agent trajectory) are not evaluated.
    assert!(!convs.iter().any(|(n, _)| n.starts_with("gpt-4o-airline")));
}

/// The issue's acceptance test. On every shipped transcript long enough to need compressing,
/// the default pipeline keeps every artifact probe, at least 90% of the error probes, the last
/// request, every integrity check, and on every probe kind scores at least as well as every
/// baseline. Expected to fail until the retention work in the stages lands; the message lists
/// every shortfall with the probes lost.
#[test]
fn default_pipeline_retains_what_the_agent_needs() {
    let ratio = |v: &Value| {
        let (h, t) = hits(v);
        if t == 0 {
            1.0
        } else {
            h as f64 / t as f64
        }
    };
    let all = |v: &Value| {
        let (h, t) = hits(v);
        h == t
    };
    let mut failures = Vec::new();
    let convs = eval_transcripts();
    assert!(convs.len() >= 5, "{} conversations evaluated", convs.len());
    for (name, c) in &convs {
        let results = c["results"].as_array().unwrap();
        let default = results.iter().find(|r| r["pipeline"] == "default").unwrap();
        let s = &default["scores"];
        let lost = &default["lost"];
        let mut fail = |what: String| failures.push(format!("{name}: {what}"));
        if !all(&s["artifact"]) {
            fail(format!(
                "artifacts {} kept, lost {}",
                show(&s["artifact"]),
                lost["artifacts"]
            ));
        }
        if ratio(&s["errors"]) < 0.9 {
            fail(format!(
                "errors {} kept (< 90%), lost {}",
                show(&s["errors"]),
                lost["errors"]
            ));
        }
        if !all(&s["request"]) {
            fail(format!("the last request lost: {}", lost["request"]));
        }
        if !all(&s["integrity"]) {
            fail(format!(
                "integrity {}: {}",
                show(&s["integrity"]),
                lost["integrity"]
            ));
        }
        for b in results.iter().filter(|r| r["kind"] == "baseline") {
            for kind in ["artifact", "errors", "request", "integrity"] {
                if ratio(&s[kind]) < ratio(&b["scores"][kind]) {
                    fail(format!(
                        "{kind}: default {} < {} {}",
                        show(&s[kind]),
                        b["pipeline"].as_str().unwrap(),
                        show(&b["scores"][kind])
                    ));
                }
            }
        }
    }
    assert!(
        failures.is_empty(),
        "the default pipeline loses what the agent needs:\n{}",
        failures.join("\n")
    );
}

fn show(v: &Value) -> String {
    let (h, t) = hits(v);
    format!("{h}/{t}")
}

/// A judge server answering like the real API: answers for questions, JSON for grading.
fn judge_server(api: &'static str, grade: &'static str) -> LocalServer {
    LocalServer::start(move |r: &Received| {
        let body = r.json();
        let system = match api {
            "anthropic" => body["system"].as_str().unwrap_or("").to_string(),
            _ => body["messages"][0]["content"]
                .as_str()
                .unwrap_or("")
                .to_string(),
        };
        let text = if system.starts_with("You grade") {
            grade.to_string()
        } else {
            "We wrote src/lib.rs.".to_string()
        };
        let reply = match api {
            "anthropic" => json!({
                "id": "msg_1", "type": "message", "role": "assistant", "model": "judge-model",
                "content": [{"type": "text", "text": text}],
                "stop_reason": "end_turn",
                "usage": {"input_tokens": 10, "output_tokens": 5}
            }),
            _ => json!({
                "id": "chatcmpl-1", "object": "chat.completion", "model": "judge-model",
                "choices": [{"index": 0, "finish_reason": "stop",
                             "message": {"role": "assistant", "content": text}}],
                "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
            }),
        };
        (200, reply.to_string())
    })
}

fn judged_run(api: &str, url: &str) -> crate::support::Run {
    let edge = fixture("edge/anthropic_body.json");
    condense_env(
        &[
            "eval",
            edge.to_str().unwrap(),
            "--json",
            "--baseline",
            "none",
            "--min-tokens",
            "0",
            "--judge",
            api,
            "--judge-model",
            "judge-model",
            "--judge-base-url",
            url,
            "--judge-api-key-env",
            "CONDENSE_TEST_JUDGE_KEY",
        ],
        &[("CONDENSE_TEST_JUDGE_KEY", KEY)],
        Some(&repo()),
    )
}

fn check_judge(api: &'static str) -> Vec<Received> {
    let server = judge_server(
        api,
        "```json\n{\"score\": 4, \"why\": \"one path missing\"}\n```",
    );
    let run = judged_run(api, &server.url);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(!run.stdout.contains(KEY) && !run.stderr.contains(KEY));
    let v: Value = serde_json::from_str(&run.stdout).unwrap();
    let judge = &v["inputs"][0]["conversations"][0]["results"][0]["judge"];
    for q in ["artifact", "recall", "continuation", "decision"] {
        assert_eq!(judge[q]["score"], 4, "{judge}");
        assert_eq!(judge[q]["why"], "one path missing");
        assert_eq!(judge[q]["answer"], "We wrote src/lib.rs.");
    }
    assert_eq!(v["totals"][0]["judge"]["recall"], 4.0);
    let requests = server.requests();
    assert_eq!(
        requests.len(),
        8,
        "four questions, each answered then graded"
    );
    for r in &requests {
        assert_eq!(r.method, "POST");
        assert_eq!(r.json()["model"], "judge-model");
    }
    requests
}

#[test]
fn the_judge_speaks_anthropic() {
    let requests = check_judge("anthropic");
    let first = &requests[0];
    assert_eq!(first.path, "/v1/messages");
    assert_eq!(first.header("x-api-key"), Some(KEY));
    assert_eq!(first.header("anthropic-version"), Some("2023-06-01"));
    let body = first.json();
    assert!(body["max_tokens"].as_u64().unwrap() > 0);
    let question = body["messages"][0]["content"].as_str().unwrap();
    assert!(
        question.contains("<transcript>")
            && question.contains("Question: Which files were created, modified or deleted"),
        "{question}"
    );
    // The grading call carries the reference from the original: its last request.
    let grade = requests[1].json();
    assert!(grade["system"].as_str().unwrap().starts_with("You grade"));
    let recall = requests[3].json()["messages"][0]["content"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        recall.contains("- boom"),
        "the original's error line: {recall}"
    );
}

#[test]
fn the_judge_speaks_openai() {
    let requests = check_judge("openai");
    let first = &requests[0];
    assert_eq!(first.path, "/chat/completions");
    assert_eq!(
        first.header("authorization"),
        Some(format!("Bearer {KEY}").as_str())
    );
    let body = first.json();
    assert_eq!(body["messages"][0]["role"], "system");
    assert_eq!(body["messages"][1]["role"], "user");
    let question = body["messages"][1]["content"].as_str().unwrap();
    assert!(question.contains("Question: Which files"), "{question}");
}

#[test]
fn a_judge_answering_garbage_is_one_clear_line() {
    let server = LocalServer::start(|_| (200, "this is not json".to_string()));
    let run = judged_run("anthropic", &server.url);
    let last = run.stderr.lines().last().unwrap_or_default();
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(
        last.starts_with("condense: error: judge (anthropic): unreadable reply:"),
        "{}",
        run.stderr
    );
    // A grade that is not the asked-for JSON names what it got.
    let server = judge_server("openai", "I would give it four.");
    let run = judged_run("openai", &server.url);
    assert_eq!(run.code, 1, "{}", run.stderr);
    let last = run.stderr.lines().last().unwrap_or_default();
    assert!(
        last.contains("grading the artifact answer: the reply is not {\"score\": N")
            && last.contains("I would give it four."),
        "{last}"
    );
    assert!(!run.stderr.contains(KEY));
}
