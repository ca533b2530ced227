//! The stage on real transcripts (the in-repo copies): a Claude Code session
//! (DRMacIver/claude-reliability's, whose tool calls are all the agent's own: in the other
//! shipped session the repeated results are subagents' lines, which are not context) and a
//! mini-swe-agent trajectory (OpenAI messages, many `cat`/`sed` re-reads).

use crate::support::{assert_never_grows, results, summary};
use condense_formats::{Document, ReadOptions};
use condense_model::{Conversation, Format};
use condense_testing::{changed_messages, run, stage, MemoryHost};
use snip::Snip;
use std::collections::HashSet;

const CLAUDE_CODE: &str = "DRMacIver__claude-reliability/transcript.jsonl";

const MINI_SWE_AGENT: &str = "SWE-agent__mini-swe-agent/sqlfluff__sqlfluff-1733.traj.json";

fn document(path: &str) -> Document {
    condense_testing::transcript(path)
}

fn conversation(path: &str) -> Conversation {
    let doc = document(path);
    assert_eq!(doc.conversations().len(), 1);
    doc.conversations()[0].clone()
}

/// Duplicates as `condense stats` counts them: tool results of >= 200 bytes whose text was
/// seen before.
fn stats_duplicates(conv: &Conversation) -> usize {
    let mut seen = HashSet::new();
    results(conv)
        .into_iter()
        .map(|(_, r)| r.content.text())
        .filter(|t| t.len() >= 200 && !seen.insert(t.clone()))
        .count()
}

fn count(report: &condense_abi::StageReport, kind: &str) -> usize {
    report.events.iter().filter(|e| e.kind == kind).count()
}

#[test]
fn claude_code_session() {
    let input = conversation(CLAUDE_CODE);
    let host = MemoryHost::default();
    let out = run(&stage::<Snip>(""), &input, &host);
    assert_eq!(stats_duplicates(&input), 1);
    assert_eq!(count(&out.report, "deduplicated"), 1);
    insta::assert_json_snapshot!(
        "claude_code_summary",
        summary(&input, &out.conversation, &host)
    );
    insta::assert_yaml_snapshot!("claude_code_report", out.report);
    assert_never_grows(&input, &out.conversation);
    for (a, b) in input.messages.iter().zip(&out.conversation.messages) {
        assert_eq!(
            (&a.id, a.role, &a.extra, &a.envelope),
            (&b.id, b.role, &b.extra, &b.envelope)
        );
    }
}

#[test]
fn mini_swe_agent_trajectory() {
    let input = conversation(MINI_SWE_AGENT);
    let host = MemoryHost::default().with_format(Some(Format::OpenAi));
    let out = run(&stage::<Snip>(""), &input, &host);
    assert_eq!(count(&out.report, "deduplicated"), stats_duplicates(&input));
    insta::assert_json_snapshot!(
        "mini_swe_agent_summary",
        summary(&input, &out.conversation, &host)
    );
    insta::assert_yaml_snapshot!("mini_swe_agent_report", out.report);
    assert_never_grows(&input, &out.conversation);
    // Its repeated outputs are all under 200 chars (the most repeated, an empty
    // `<returncode>0</returncode>` output, 31 times, is 45 chars). With a lower threshold the
    // longer ones are replaced; those shorter than their marker stay.
    let out = run(
        &stage::<Snip>("min_duplicate_chars = 40"),
        &input,
        &MemoryHost::default(),
    );
    insta::assert_yaml_snapshot!("mini_swe_agent_low_threshold_notes", out.report.notes);
    assert_never_grows(&input, &out.conversation);
}

#[test]
fn real_transcripts_are_idempotent_under_every_config() {
    for path in [CLAUDE_CODE, MINI_SWE_AGENT] {
        let input = conversation(path);
        for config in crate::idempotence::CONFIGS {
            let host = MemoryHost::default();
            let s = stage::<Snip>(config);
            let once = run(&s, &input, &host);
            assert_never_grows(&input, &once.conversation);
            // No base64 image in these sessions: only the changed messages cross back.
            assert!(!once.copied, "{path} {config}");
            assert_eq!(
                once.replaced,
                changed_messages(&input, &once.conversation),
                "{path} {config}"
            );
            let twice = run(&s, &once.conversation, &host);
            assert_eq!(twice.conversation, once.conversation, "{path} {config}");
            assert_eq!(twice.report.blocks_changed, 0, "{path} {config}");
            assert!(!twice.copied, "{path} {config}: nothing to change, no copy");
        }
    }
}

#[test]
fn claude_code_output_written_and_read_back_is_left_alone() {
    let host = MemoryHost::default();
    let s = stage::<Snip>("");
    let mut doc = document(CLAUDE_CODE);
    let out = run(&s, &doc.conversations()[0], &host);
    doc.conversations_mut()[0] = out.conversation.clone();
    let written = doc.write().unwrap();
    let reread =
        condense_formats::read(&written, "written.jsonl", &ReadOptions::default()).unwrap();
    let again = run(&s, &reread.conversations()[0], &host);
    assert_eq!(again.report.blocks_changed, 0, "{:?}", again.report.notes);
    assert_eq!(again.conversation, reread.conversations()[0]);
    // The first run copies only the messages it changes; the rerun, planned through the view,
    // has nothing to change and copies nothing.
    assert!(!out.copied && !out.replaced.is_empty() && !again.copied);
}
