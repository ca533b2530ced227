//! A hand-made session covering each case, and the stage's output on it, snapshotted.
//!
//! Ten user prompts after a leading system message, 18 API turns (API rounds): each step is the
//! prompt with the call it makes and its result, then the answer (a second model call, so a
//! second turn); tool calls and their results, an event line, a user message that answers a call
//! and adds text (it does not open a turn, so step 3 is one turn), a system message in the middle
//! of a turn, and a last user message still unanswered.

use crate::support::{run, state_summary, tokens};
use condense_abi::Signal;
use condense_model::{Block, Content, Conversation, Message, RawJson, Role};
use condense_testing::{
    assert_no_orphans, assert_unique_ids, extractive, ids, report_json, stage, text, tool_result,
    tool_use, MemoryHost,
};
use serde_json::json;

/// `n` lines of filler of about 50 chars each.
pub fn filler(label: &str, n: usize) -> String {
    (1..=n)
        .map(|i| format!("{label} line {i:03}: lorem ipsum dolor sit amet, consectetur"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Step `i`, two API turns: the user asks and the assistant reads a file (`u`, `a`, `r`), then
/// the assistant answers (`b`).
pub fn plain_turn(i: usize) -> Vec<Message> {
    vec![
        text(
            &format!("u{i}"),
            Role::User,
            &format!("Step {i}: look at module {i}"),
        ),
        Message::new(
            format!("a{i}"),
            Role::Assistant,
            vec![
                Block::text(format!("Reading module {i}.")),
                tool_use(
                    &format!("t{i}"),
                    "Read",
                    json!({"file_path": format!("src/m{i}.rs")}),
                ),
            ],
        ),
        Message::new(
            format!("r{i}"),
            Role::User,
            vec![tool_result(
                &format!("t{i}"),
                Content::string(filler(&format!("m{i}.rs"), 30)),
                None,
            )],
        ),
        text(
            &format!("b{i}"),
            Role::Assistant,
            &format!("Module {i} looks fine."),
        ),
    ]
}

pub fn conversation() -> Conversation {
    let mut messages = vec![text("s0", Role::System, "You are a careful coding agent.")];
    messages.extend(plain_turn(1));
    // Step 2: an event line among the first turn's messages.
    messages.extend(plain_turn(2));
    messages.insert(
        messages.len() - 1,
        Message {
            envelope: RawJson::from_string_unchecked(r#"{"type":"summary","summary":"x"}"#.into()),
            ..Message::new("e2", Role::Event, vec![])
        },
    );
    // Step 3: the user answers the call and adds text in the same message: one turn.
    messages.push(text("u3", Role::User, "Step 3: run the tests"));
    messages.push(Message::new(
        "a3",
        Role::Assistant,
        vec![tool_use("t3", "Bash", json!({"command": "cargo test"}))],
    ));
    messages.push(Message::new(
        "r3",
        Role::User,
        vec![
            tool_result("t3", Content::string(filler("test", 30)), None),
            Block::text("and check the lints too"),
        ],
    ));
    messages.push(text("b3", Role::Assistant, "Tests pass; lints are clean."));
    for i in 4..=9 {
        messages.extend(plain_turn(i));
    }
    // A system message at the end of step 5's first turn (after its call's result).
    let at = messages.iter().position(|m| m.id == "b5").unwrap();
    messages.insert(
        at,
        text("s5", Role::System, "Reminder: keep answers short."),
    );
    // Step 10: the last user message, not answered yet.
    messages.push(text("u10", Role::User, "Now summarize what changed."));
    Conversation {
        messages,
        ..Conversation::default()
    }
}

/// A host whose effective window puts the fixture (4,170 tokens) over `commit_at`: effective
/// 2,600 tokens (window 22,600 - min(max output 20,000, 20,000)), commit at 2,340, block at 2,470.
/// Collapsing turns 1-4 (u1…b2) is not enough; merging turns 5-8 (u3…r5) into their summary is.
pub fn host() -> MemoryHost {
    MemoryHost::default().with_window(22_600, 20_000)
}

#[test]
fn fixture_is_over_commit_at() {
    let h = host();
    let n = tokens(&h, &conversation());
    assert_eq!(n, 4_170);
    let conv = conversation();
    let turns = condense_turns::group(&conv.messages);
    assert_eq!(turns.turns.len(), 18);
    let starts: Vec<&str> = turns
        .turns
        .iter()
        .map(|t| conv.messages[t.start].id.as_str())
        .collect();
    assert_eq!(
        starts,
        [
            "u1", "b1", "u2", "b2", "u3", "u4", "b4", "u5", "b5", "u6", "b6", "u7", "b7", "u8",
            "b8", "u9", "b9", "u10"
        ]
    );
}

#[test]
fn fixture_output_report_and_state() {
    let mut h = host();
    let input = conversation();
    let out = run(&stage(""), &input, &mut h);
    insta::assert_snapshot!(
        "fixture_output",
        condense_model::render::render(&out.conversation)
    );
    insta::assert_json_snapshot!("fixture_report", report_json(&out.report));
    insta::assert_json_snapshot!("fixture_state", state_summary(&h));
    assert_eq!(out.report.signals, vec![Signal::CollapseActive]);
    assert_no_orphans(&out.conversation);
    assert_unique_ids(&out.conversation);
    assert!(tokens(&h, &out.conversation) < 2_340);
}

#[test]
fn the_recent_turns_and_the_leading_content_are_kept_verbatim() {
    let mut h = host();
    let input = conversation();
    let out = run(&stage(""), &input, &mut h);
    // Leading system message first, then the summary, then turns 9..=18 (from b5) as they
    // were: the 4 most recent (b8, u9, b9, u10) and those not needed to get under commit_at.
    assert_eq!(out.conversation.messages[0], input.messages[0]);
    assert_eq!(out.conversation.messages[1].id, "collapse-u1");
    let from_b5 = input.position("b5").unwrap();
    let tail = &input.messages[from_b5..];
    assert_eq!(
        &out.conversation.messages[out.conversation.messages.len() - tail.len()..],
        tail
    );
    // The system message inside the collapsed turn 8 stays, right after the summary; the next
    // turn starts with the assistant's answer.
    assert_eq!(
        ids(&out.conversation)[..4],
        ["s0", "collapse-u1", "s5", "b5"]
    );
}

#[test]
fn the_second_span_is_merged_into_the_first_summary() {
    let mut h = host();
    let out = run(&stage(""), &conversation(), &mut h);
    let requests = h.summary_requests.borrow();
    assert_eq!(requests.len(), 2, "two spans: turns 1-4, then 5-8 merged");
    assert_eq!(requests[0].previous_summary, None);
    assert_eq!(requests[0].purpose, "context-collapse");
    // The budget scales with the window: 15% of the span would be 138 tokens, the minimum is
    // 1,000, but a summary may take at most 20% of the 2,600-token effective window.
    assert_eq!(requests[0].max_tokens, 520);
    assert_eq!(requests[1].max_tokens, 520);
    let first: Vec<&str> = requests[0].messages.iter().map(|m| m.id.as_str()).collect();
    // System messages are not given to the summarizer; event lines are (it writes no prose
    // from them, but a sub-agent's lines carry work the retained record lists).
    assert_eq!(first.first(), Some(&"u1"));
    assert_eq!(first.last(), Some(&"b2"));
    assert!(first.contains(&"e2"));
    assert_eq!(requests[0].messages.len(), 9);
    let second: Vec<&str> = requests[1].messages.iter().map(|m| m.id.as_str()).collect();
    assert_eq!(second.first(), Some(&"u3"));
    assert_eq!(second.last(), Some(&"r5"));
    assert!(!second.contains(&"s5"));
    let previous = requests[1].previous_summary.as_deref().unwrap();
    assert!(
        previous.starts_with("summary of 9 messages: u1, a1"),
        "{previous}"
    );
    // One summary message for the combined span, named after its first message.
    let summaries: Vec<&Message> = out
        .conversation
        .messages
        .iter()
        .filter(context_collapse::is_summary_message)
        .collect();
    assert_eq!(summaries.len(), 1);
    assert!(summaries[0]
        .content
        .text()
        .starts_with("[condense: summary of 20 earlier messages (ids u1…r5)]\n"));
}

#[test]
fn below_commit_at_nothing_changes() {
    let mut h = MemoryHost::default(); // 200k window
    let input = conversation();
    let out = run(&stage(""), &input, &mut h);
    assert_eq!(out.conversation, input);
    assert!(
        !out.changed,
        "an identical projection is handed back as unchanged"
    );
    assert!(out.report.signals.is_empty());
    assert!(out.report.events.is_empty());
    assert_eq!(out.report.tokens_freed, None);
    assert_eq!(h.state_puts.get(), 0, "no state written");
    assert!(h.summary_requests.borrow().is_empty());
    assert_eq!(
        out.report.notes[1],
        "below the target 162,000 (commit_at): no new collapse"
    );
}

#[test]
fn fixture_with_the_extractive_summarizer() {
    // The host's default summarizer instead of the id-listing fake: what users get offline.
    let mut h = host().with_summarizer(extractive());
    let input = conversation();
    let out = run(&stage(""), &input, &mut h);
    assert_no_orphans(&out.conversation);
    assert!(tokens(&h, &out.conversation) < tokens(&h, &input));
    insta::assert_snapshot!(
        "fixture_extractive_output",
        condense_model::render::render(&out.conversation)
    );
    // The rendering elides long texts; the summary itself is what to review.
    let summary = out
        .conversation
        .messages
        .iter()
        .find(|m| m.id.starts_with("collapse-"))
        .expect("a summary message");
    insta::assert_snapshot!("fixture_extractive_summary", summary.content.text());
}
