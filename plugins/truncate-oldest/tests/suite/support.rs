//! What only this stage's tests need: a run at a token budget, filler text, and the
//! invariants of any output of the stage (the test host, runner and builders are
//! `condense_testing`'s).

use condense_model::{Conversation, Message, Role};
use condense_testing::{run, stage, Applied, MemoryHost};
use std::collections::{HashMap, HashSet};
use truncate_oldest::TruncateOldest;

/// A stage with `max_tokens = budget`, run.
pub fn run_with_budget(budget: usize, conv: &Conversation) -> Applied {
    let stage = stage::<TruncateOldest>(&format!("max_tokens = {budget}"));
    run(&stage, conv, &MemoryHost::default())
}

/// `n` bytes of filler text.
pub fn filler(label: &str, n: usize) -> String {
    let mut s = String::new();
    while s.len() < n {
        s.push_str(label);
        s.push_str(" lorem ipsum dolor sit amet\n");
    }
    s.truncate(n);
    s
}

/// The invariants of any output of the stage, given its input:
/// the kept messages are a subsequence of the input, unchanged; no kept tool_result lost its
/// call; no kept call lost its results; system messages and (when asked) the first user
/// message are kept.
pub fn check_invariants(input: &Conversation, output: &Conversation, keep_first_user: bool) {
    let by_id: HashMap<&str, &Message> =
        input.messages.iter().map(|m| (m.id.as_str(), m)).collect();
    let mut last = None;
    for m in &output.messages {
        let pos = input.position(&m.id).unwrap();
        assert!(last.is_none_or(|l| l < pos), "order kept");
        last = Some(pos);
        assert_eq!(by_id[m.id.as_str()], m, "kept messages are unchanged");
    }
    let (input_uses, input_results) = (call_ids(input), result_ids(input));
    let (kept_uses, kept_results) = (call_ids(output), result_ids(output));
    for r in &kept_results {
        assert!(
            !input_uses.contains(r) || kept_uses.contains(r),
            "result {r} kept without its call"
        );
    }
    for u in &kept_uses {
        assert!(
            !input_results.contains(u) || kept_results.contains(u),
            "call {u} kept without its result"
        );
    }
    for m in &input.messages {
        if m.role == Role::System {
            assert!(
                output.position(&m.id).is_some(),
                "system message {} kept",
                m.id
            );
        }
    }
    if keep_first_user {
        if let Some(first) = input.messages.iter().find(|m| m.role == Role::User) {
            assert!(
                output.position(&first.id).is_some(),
                "first user message kept"
            );
        }
    }
    assert_eq!(output.system, input.system);
    assert_eq!(output.tools, input.tools);
}

/// The ids of every tool_use in `conv`.
fn call_ids(conv: &Conversation) -> HashSet<&str> {
    conv.messages
        .iter()
        .flat_map(|m| m.tool_uses())
        .map(|t| t.id.as_str())
        .collect()
}

/// The tool_use ids every tool_result in `conv` answers.
fn result_ids(conv: &Conversation) -> HashSet<&str> {
    conv.tool_results()
        .map(|r| r.result.tool_use_id.as_str())
        .collect()
}
