//! Every real transcript reads and writes back to equal JSON.

use super::support::{fixture, round_trip};
use crate::{Format, ReadOptions};

/// Round trip, and the real files come back byte for byte: same key order, indent, escaping.
fn identical(bytes: &[u8], source: &str, opts: &ReadOptions) -> crate::Document {
    let doc = round_trip(bytes, source, opts);
    let out = doc.write().unwrap();
    assert!(out == bytes, "{source}: output bytes differ from the input");
    doc
}

fn auto() -> ReadOptions {
    ReadOptions::default()
}

#[test]
fn claude_code_viewer_session() {
    let bytes = fixture!(
        "transcripts/d-kimuson__claude-code-viewer/fe5e1c67-53e7-4862-81ae-d0e013e3270b.jsonl"
    );
    let doc = identical(&bytes, "fe5e1c67.jsonl", &auto());
    assert_eq!(doc.format(), Format::ClaudeCode);
}

#[test]
fn claude_reliability_session() {
    let bytes = fixture!("transcripts/DRMacIver__claude-reliability/transcript.jsonl");
    let doc = identical(&bytes, "transcript.jsonl", &auto());
    assert_eq!(doc.format(), Format::ClaudeCode);
}

#[test]
fn mini_swe_agent_trajectory() {
    let bytes = fixture!("transcripts/SWE-agent__mini-swe-agent/sqlfluff__sqlfluff-1733.traj.json");
    let doc = identical(&bytes, "sqlfluff.traj.json", &auto());
    assert_eq!(doc.format(), Format::OpenAi);
    assert_eq!(doc.labels(), vec![String::new()]);
}

#[test]
fn swe_agent_trajectories() {
    for (name, bytes) in [
        (
            "marshmallow.traj",
            fixture!("transcripts/SWE-agent__SWE-agent/marshmallow-code__marshmallow-1867.traj"),
        ),
        (
            "pydicom.traj",
            fixture!("transcripts/SWE-agent__SWE-agent/pydicom__pydicom-1458.traj"),
        ),
    ] {
        let doc = identical(&bytes, name, &auto());
        assert_eq!(doc.format(), Format::OpenAi, "{name}");
    }
}

#[test]
fn tau_bench_conversation_list() {
    let bytes = fixture!("transcripts/sierra-research__tau-bench/gpt-4o-airline.json");
    let doc = identical(&bytes, "gpt-4o-airline.json", &auto());
    assert_eq!(doc.format(), Format::OpenAi);
    assert_eq!(doc.conversations().len(), 200);
    let labels = doc.labels();
    assert_eq!(labels[0], "/0/traj");
    assert_eq!(labels[199], "/199/traj");
}

#[test]
fn openhands_output_lines() {
    let bytes = fixture!("transcripts/All-Hands-AI__OpenHands/output.jsonl");
    let doc = identical(&bytes, "output.jsonl", &auto());
    assert_eq!(doc.format(), Format::OpenHands);
    assert_eq!(doc.labels(), vec!["line 1", "line 2", "line 3"]);
}

#[test]
fn codex_rollouts() {
    for (name, bytes) in [
        (
            "rollout-2026-05-11T11-26-55.jsonl",
            fixture!("transcripts/codemie-ai__codemie-code/rollout-2026-05-11T11-26-55-019e1625-789d-76c0-80ab-3724b5ddb799.jsonl"),
        ),
        (
            "rollout-2026-05-11T13-28-45.jsonl",
            fixture!("transcripts/codemie-ai__codemie-code/rollout-2026-05-11T13-28-45-019e1695-0522-7c83-8b39-0dd379793f80.jsonl"),
        ),
    ] {
        let doc = identical(&bytes, name, &auto());
        assert_eq!(doc.format(), Format::Codex, "{name}");
        // Given the format, the same.
        let opts = ReadOptions {
            format: Some(Format::Codex),
            select: None,
        };
        identical(&bytes, name, &opts);
    }
}

#[test]
fn responses_request_and_cline_history() {
    let bytes = fixture!("edge/responses_request.json");
    assert_eq!(
        identical(&bytes, "responses_request.json", &auto()).format(),
        Format::Responses
    );
    let bytes = fixture!("edge/cline_api_conversation_history.json");
    assert_eq!(
        identical(&bytes, "api_conversation_history.json", &auto()).format(),
        Format::Cline
    );
}

#[test]
fn explicit_select_and_format_match_detection() {
    let bytes = fixture!("transcripts/All-Hands-AI__OpenHands/output.jsonl");
    let opts = ReadOptions {
        format: Some(Format::OpenHands),
        select: Some("/history".into()),
    };
    let doc = identical(&bytes, "output.jsonl", &opts);
    assert_eq!(doc.conversations().len(), 3);

    let bytes = fixture!("transcripts/sierra-research__tau-bench/gpt-4o-airline.json");
    let opts = ReadOptions {
        format: Some(Format::OpenAi),
        select: Some("/*/traj".into()),
    };
    assert_eq!(
        identical(&bytes, "tau.json", &opts).conversations().len(),
        200
    );
    let opts = ReadOptions {
        format: None,
        select: Some("/3/traj".into()),
    };
    let doc = identical(&bytes, "tau.json", &opts);
    assert_eq!(doc.conversations().len(), 1);
    assert_eq!(doc.labels(), vec![String::new()]);
}

#[test]
fn pretty_input_keeps_its_indent() {
    let bytes = fixture!("transcripts/SWE-agent__SWE-agent/pydicom__pydicom-1458.traj");
    let doc = crate::read(&bytes, "p.traj", &auto()).unwrap();
    let out = String::from_utf8(doc.write().unwrap()).unwrap();
    assert!(out.starts_with("{\n  \"environment\": \"swe_main\",\n  \"trajectory\": [\n    {"));
}

/// A JSONL input's style is its whole text's (byte order, last newline) with no indent and the
/// first line's separators, found without looking for an indent line by line.
#[test]
fn a_jsonl_style_is_its_texts_with_the_first_lines_separators() {
    use crate::json::Style;
    let mut texts: Vec<String> = super::support::fixture_files()
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "jsonl"))
        .map(|p| std::fs::read_to_string(p).unwrap())
        .collect();
    assert!(texts.len() >= 4);
    texts.extend(
        [
            "{\"a\": 1, \"b\": \"é\"}\n{\"a\":2}",
            "\n\n{\"a\":1,\"b\":2}\n  {\"c\": 3}\n",
            "{\"a\":\"\\u00e9\"}\n",
            "",
        ]
        .map(String::from),
    );
    for text in texts {
        let first = text.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
        let (spaced_colon, spaced_comma) = crate::scan::spaced_separators(first);
        let expected = Style {
            indent: None,
            spaced_colon,
            spaced_comma,
            ..Style::detect(&text)
        };
        assert_eq!(
            Style::lines(&text),
            expected,
            "{}",
            &text[..text.len().min(80)]
        );
    }
}
