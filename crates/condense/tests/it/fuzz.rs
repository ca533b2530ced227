//! The reliability campaign in CI (issue 12 items 19-20): every fuzz target of condense-fuzz
//! with a fixed number of cases and a fixed seed (`CONDENSE_FUZZ_SEED` overrides it), the kept
//! regression cases of tests/fixtures/fuzz-regressions replayed, and the byte-exact cases the
//! campaign found: identical lines, big numbers, non-canonical formatting.
//!
//! A failure prints the seed, the case and the path of its minimized input (under
//! target/fuzz-failures/); `cargo xtask fuzz --minutes N` runs the same targets for longer.

use crate::support::{bin, condense, fixture, repo};
use condense_formats::Format;
use condense_fuzz::binary::{Binary, NOW, PIPELINE};
use condense_fuzz::campaign::{self, Config};
use condense_fuzz::{rewrite, Target, Verdict};
use std::path::{Path, PathBuf};

/// The seed of every CI campaign unless `CONDENSE_FUZZ_SEED` is set.
const SEED: u64 = 0x000C_0DE0_2026;

/// Cases per target: in-process targets are cheap, each binary case is two process runs.
const READ_CASES: u64 = 200;
const PIPELINE_CASES: u64 = 1_500;
const COMPRESS_CASES: u64 = 20;
const EXPAND_CASES: u64 = 40;

fn seed() -> u64 {
    std::env::var("CONDENSE_FUZZ_SEED")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(SEED)
}

fn failures_dir() -> PathBuf {
    bin()
        .parent()
        .and_then(Path::parent)
        .map_or_else(|| repo().join("target"), Path::to_path_buf)
        .join("fuzz-failures")
}

fn binary() -> Binary {
    Binary {
        path: bin(),
        timeout: None,
    }
}

/// Runs `target` for `cases` cases, then replays its regression cases; fails with the seed and
/// the minimized inputs. On a thread with the main thread's stack, as the binary has.
fn campaign(target: Target, cases: u64) {
    let work = tempfile::tempdir().unwrap();
    let config = Config {
        target,
        seed: seed(),
        cases,
        until: None,
        root: repo(),
        binary: Some(binary()),
        failures: failures_dir(),
        work: work.path().to_path_buf(),
        keep: 3,
        hang_after: None,
        // Through the binary each attempt is a process or two: a failure is shown small
        // enough by a few, and the test fails either way.
        minimize_binary: 8,
    };
    let (report, replayed) = std::thread::Builder::new()
        .stack_size(8 << 20)
        .spawn(move || {
            let report = campaign::run(&config).unwrap();
            let regressions = repo().join("tests/fixtures/fuzz-regressions");
            let replayed =
                campaign::replay(target, &regressions, config.binary.as_ref(), &config.work)
                    .unwrap();
            (report, replayed)
        })
        .unwrap()
        .join()
        .unwrap();
    let regressions: Vec<String> = replayed
        .iter()
        .filter_map(|(path, v)| match v {
            Verdict::Failed(f) => Some(format!("{}: {}: {}", path.display(), f.kind, f.detail)),
            _ => None,
        })
        .collect();
    assert!(
        report.stats.failures() == 0 && regressions.is_empty(),
        "{}\nregression cases failing:\n{}",
        report.describe(),
        regressions.join("\n")
    );
    eprintln!("{}", report.describe());
}

#[test]
fn read_anthropic() {
    campaign(Target::Read(Format::Anthropic), READ_CASES);
}

#[test]
fn read_openai() {
    campaign(Target::Read(Format::OpenAi), READ_CASES);
}

#[test]
fn read_claude_code() {
    campaign(Target::Read(Format::ClaudeCode), READ_CASES);
}

#[test]
fn read_openhands() {
    campaign(Target::Read(Format::OpenHands), READ_CASES);
}

#[test]
fn read_codex() {
    campaign(Target::Read(Format::Codex), READ_CASES);
}

#[test]
fn read_responses() {
    campaign(Target::Read(Format::Responses), READ_CASES);
}

#[test]
fn read_cline() {
    campaign(Target::Read(Format::Cline), READ_CASES);
}

#[test]
fn pipeline_loader() {
    campaign(Target::Pipeline, PIPELINE_CASES);
}

#[test]
fn compress_expand_anthropic() {
    campaign(Target::Compress(Format::Anthropic), COMPRESS_CASES);
}

#[test]
fn compress_expand_openai() {
    campaign(Target::Compress(Format::OpenAi), COMPRESS_CASES);
}

#[test]
fn compress_expand_claude_code() {
    campaign(Target::Compress(Format::ClaudeCode), COMPRESS_CASES);
}

#[test]
fn compress_expand_openhands() {
    campaign(Target::Compress(Format::OpenHands), COMPRESS_CASES);
}

#[test]
fn compress_expand_codex() {
    campaign(Target::Compress(Format::Codex), COMPRESS_CASES);
}

#[test]
fn compress_expand_responses() {
    campaign(Target::Compress(Format::Responses), COMPRESS_CASES);
}

#[test]
fn compress_expand_cline() {
    campaign(Target::Compress(Format::Cline), COMPRESS_CASES);
}

#[test]
fn expand_of_damaged_compressed_files() {
    campaign(Target::Expand, EXPAND_CASES);
}

/// `input` compressed with no stage must come back byte for byte on stdout; compressed with
/// stages that act and expanded, byte for byte too.
fn assert_exact(name: &str, input: &[u8]) {
    let dir = tempfile::tempdir().unwrap();
    let d = |p: &str| dir.path().join(p).display().to_string();
    std::fs::write(d(name), input).unwrap();
    std::fs::write(d("empty.toml"), "").unwrap();
    std::fs::write(d("p.toml"), PIPELINE).unwrap();
    let run = condense(&[
        "compress",
        &d(name),
        "--pipeline",
        &d("empty.toml"),
        "--store",
        &d("s0"),
    ]);
    assert_eq!(run.code, 0, "{name}: {}", run.stderr);
    assert!(
        run.stdout.as_bytes() == input,
        "{name}: no stage, not byte-identical: {}",
        condense_fuzz::first_difference(input, run.stdout.as_bytes())
    );
    let out = d(&format!("out-{name}"));
    let back = d(&format!("back-{name}"));
    let run = condense(&[
        "compress",
        &d(name),
        "--pipeline",
        &d("p.toml"),
        "--store",
        &d("s"),
        "--out",
        &out,
        "--now",
        NOW,
        "--report",
        "json",
    ]);
    assert_eq!(run.code, 0, "{name}: {}", run.stderr);
    let report: serde_json::Value = serde_json::from_str(&run.stderr).unwrap();
    assert!(
        report["tokens_saved"].as_u64().unwrap_or(0) > 0,
        "{name}: the stages must act for the expand to mean something: {report}"
    );
    let run = condense(&["expand", &out, "--store", &d("s"), "--out", &back]);
    assert_eq!(run.code, 0, "{name}: {}", run.stderr);
    let restored = std::fs::read(&back).unwrap();
    assert!(
        restored == input,
        "{name}: expand(compress(x)) != x: {}",
        condense_fuzz::first_difference(input, &restored)
    );
}

fn edge(name: &str) -> Vec<u8> {
    std::fs::read(fixture(&format!("edge/{name}"))).unwrap()
}

/// A Claude Code session whose first tool result is long enough for every stage to act on.
fn claude_session() -> Vec<u8> {
    std::fs::read(fixture(
        "transcripts/DRMacIver__claude-reliability/transcript.jsonl",
    ))
    .unwrap()
}

#[test]
fn identical_lines_expand_exactly() {
    // `sed 17p`: line 17 twice. Their archive entries must be told apart.
    let text = claude_session();
    let mut lines: Vec<&[u8]> = text.split_inclusive(|&b| b == b'\n').collect();
    lines.insert(17, lines[16]);
    assert_exact("dup.jsonl", &lines.concat());
    // Every line of a short session twice.
    let doubled: Vec<u8> = lines[..40]
        .iter()
        .flat_map(|l| [*l, *l])
        .flatten()
        .copied()
        .collect();
    assert_exact("doubled.jsonl", &doubled);
}

/// Adds fields holding big and non-canonical numbers to the object of every JSONL line, or to
/// the body.
fn with_numbers(text: &[u8], jsonl: bool) -> Vec<u8> {
    let field =
        br#""n1":12345678901234567890123,"n2":1e5,"n3":-0,"n4":1E2,"n5":0.30000000000000004,"#;
    let mut out = Vec::new();
    if jsonl {
        for line in text.split_inclusive(|&b| b == b'\n') {
            out.push(line[0]);
            out.extend_from_slice(field);
            out.extend_from_slice(&line[1..]);
        }
    } else {
        out.push(text[0]);
        out.extend_from_slice(field);
        out.extend_from_slice(&text[1..]);
    }
    out
}

#[test]
fn big_numbers_round_trip() {
    assert_exact("numbers.jsonl", &with_numbers(&claude_session(), true));
    let body = edge("openai-big-tool-results.json");
    assert!(body.starts_with(b"{"));
    assert_exact("numbers.json", &with_numbers(&body, false));
}

#[test]
fn non_canonical_formatting_round_trips() {
    let session = claude_session();
    // Compact, so that separators and line ends are the rewrite's own.
    let pretty = edge("openai-big-tool-results.json");
    let value: serde_json::Value = serde_json::from_slice(&pretty).unwrap();
    let body = serde_json::to_vec(&value).unwrap();
    // The body has no `/`: paths in its contents, for the `\/` case.
    let with_paths = String::from_utf8(body.clone())
        .unwrap()
        .replace("\"content\":\"", "\"content\":\"see /tmp/a/b: ")
        .into_bytes();
    let cases: Vec<(&str, Vec<u8>)> = vec![
        (
            "python-separators.jsonl",
            rewrite::python_separators(&session),
        ),
        ("python-separators.json", rewrite::python_separators(&body)),
        ("crlf.jsonl", rewrite::crlf(&session)),
        ("crlf.json", rewrite::crlf(&pretty)),
        (
            "blank-lines.jsonl",
            rewrite::blank_lines_and_trailing_spaces(&session),
        ),
        ("slashes.jsonl", rewrite::escaped_slashes(&session)),
        ("slashes.json", rewrite::escaped_slashes(&with_paths)),
        ("surrogates.jsonl", rewrite::surrogate_escapes(&session)),
        ("surrogates.json", rewrite::surrogate_escapes(&body)),
    ];
    let mut failed = Vec::new();
    for (name, input) in &cases {
        assert!(
            input != &session && input != &body && input != &pretty,
            "{name}"
        );
        if let Err(e) = std::panic::catch_unwind(|| assert_exact(name, input)) {
            let msg = e
                .downcast_ref::<String>()
                .cloned()
                .unwrap_or_else(|| format!("{name}: failed"));
            failed.push(msg);
        }
    }
    assert!(failed.is_empty(), "{}", failed.join("\n"));
}
