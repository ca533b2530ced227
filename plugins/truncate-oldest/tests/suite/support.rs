//! The shared in-memory host, a runner, block builders, invariant checks.

use condense_abi::build_stage;
use condense_abi::testing::{apply, Applied};
use condense_model::{Block, Content, Conversation, Message, RawJson, Role};
use std::collections::{HashMap, HashSet};
use truncate_oldest::TruncateOldest;

pub type FakeHost = condense_abi::testing::MemoryHost;

pub fn stage(config_toml: &str) -> TruncateOldest {
    build_stage::<TruncateOldest>(config_toml).unwrap()
}

pub fn run(stage: &TruncateOldest, conv: &Conversation) -> Applied {
    apply(stage, conv, &FakeHost::default()).unwrap()
}

/// A stage with `max_tokens = budget`, run.
pub fn run_with_budget(budget: usize, conv: &Conversation) -> Applied {
    run(&stage(&format!("max_tokens = {budget}")), conv)
}

pub fn text(id: &str, role: Role, text: &str) -> Message {
    Message::new(id, role, vec![Block::text(text)])
}

pub fn tool_use(id: &str, name: &str) -> Block {
    Block::tool_use(
        id,
        name,
        RawJson::from_string_unchecked(r#"{"command":"make test"}"#.into()),
    )
}

pub fn tool_result(id: &str, text: &str) -> Block {
    Block::tool_result(id, Content::string(text))
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

pub fn ids(conv: &Conversation) -> Vec<&str> {
    conv.messages.iter().map(|m| m.id.as_str()).collect()
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
    let input_uses: HashSet<&str> = input
        .messages
        .iter()
        .flat_map(|m| m.tool_uses())
        .map(|t| t.id.as_str())
        .collect();
    let input_results: HashSet<&str> = input
        .messages
        .iter()
        .flat_map(|m| m.tool_results())
        .map(|t| t.tool_use_id.as_str())
        .collect();
    let kept_uses: HashSet<&str> = output
        .messages
        .iter()
        .flat_map(|m| m.tool_uses())
        .map(|t| t.id.as_str())
        .collect();
    let kept_results: HashSet<&str> = output
        .messages
        .iter()
        .flat_map(|m| m.tool_results())
        .map(|t| t.tool_use_id.as_str())
        .collect();
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
