//! The stage on every real transcript in tests/fixtures/transcripts, envelopes and `extra`
//! fields included: what it finds there (a false positive would show up in the snapshot), and
//! that reruns change nothing.

use crate::support::text_tokens;
use condense_model::Conversation;
use condense_testing::{changed_messages, run, stage, MemoryHost};
use redact_secrets::RedactSecrets;
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;

const FILES: &[&str] = &[
    "d-kimuson__claude-code-viewer/fe5e1c67-53e7-4862-81ae-d0e013e3270b.jsonl",
    "DRMacIver__claude-reliability/transcript.jsonl",
    "SWE-agent__mini-swe-agent/sqlfluff__sqlfluff-1733.traj.json",
    "All-Hands-AI__OpenHands/output.jsonl",
    "sierra-research__tau-bench/gpt-4o-airline.json",
    "SWE-agent__SWE-agent/marshmallow-code__marshmallow-1867.traj",
    "SWE-agent__SWE-agent/pydicom__pydicom-1458.traj",
];

fn conversations(file: &str) -> Vec<Conversation> {
    condense_testing::transcript(file).conversations().to_vec()
}

/// The `N` of a report's `(N texts scanned)` note.
fn scanned(report: &condense_abi::StageReport) -> usize {
    let note = &report.notes[0];
    let (_, rest) = note.split_once('(').unwrap();
    rest.split_once(" texts scanned")
        .unwrap()
        .0
        .parse()
        .unwrap()
}

#[test]
fn real_transcripts_findings() {
    let without_envelopes = stage::<RedactSecrets>("envelopes = false");
    let stage = stage::<RedactSecrets>("");
    let mut summary = Map::new();
    for file in FILES {
        let convs = conversations(file);
        let mut found: BTreeMap<String, usize> = BTreeMap::new();
        let mut blocks = 0;
        // Envelopes and `extra` fields scanned (and found clean): the no-false-positive check
        // covers them too.
        let mut raw_fields = 0;
        for conv in &convs {
            let once = run(&stage, conv, &MemoryHost::default());
            raw_fields += scanned(&once.report)
                - scanned(&run(&without_envelopes, conv, &MemoryHost::default()).report);
            blocks += once.report.blocks_changed;
            for e in &once.report.events {
                // `github-token: 2`, or `github-token: 1 (envelope)` for raw JSON fields.
                let (kind, rest) = e.detail.rsplit_once(": ").unwrap();
                let (n, field) = rest.split_once(' ').unwrap_or((rest, ""));
                let key = format!("{kind} {field}");
                *found.entry(key.trim_end().to_string()).or_default() +=
                    n.parse::<usize>().unwrap();
            }
            assert!(
                text_tokens(&once.conversation) <= text_tokens(conv),
                "{file}"
            );
            // Messages are copied one at a time and only those with a secret cross back.
            assert!(!once.copied, "{file}");
            assert_eq!(
                once.replaced,
                changed_messages(conv, &once.conversation),
                "{file}"
            );
            let twice = run(&stage, &once.conversation, &MemoryHost::default());
            assert_eq!(twice.conversation, once.conversation, "{file}");
            assert!(twice.report.events.is_empty(), "{file}");
            assert!(!twice.changed, "{file}");
        }
        summary.insert(
            file.to_string(),
            json!({
                "conversations": convs.len(),
                "raw_fields_scanned": raw_fields,
                "blocks_changed": blocks,
                "redacted": found
            }),
        );
    }
    insta::assert_json_snapshot!("real_transcripts_findings", Value::Object(summary));
}
