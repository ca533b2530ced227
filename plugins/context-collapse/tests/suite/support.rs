//! The in-memory host, a runner, conversation builders and checks shared by the tests.

use condense_abi::testing::{apply, Applied, MemoryHost};
use condense_abi::{build_stage, StageReport};
use condense_model::{Block, Content, Conversation, Message, RawJson, Role};
use context_collapse::ContextCollapse;
use serde_json::{json, Value};
use std::collections::HashSet;

pub use condense_abi::testing::MemoryHost as Host;

/// A stage from TOML config text.
pub fn stage(config_toml: &str) -> ContextCollapse {
    build_stage::<ContextCollapse>(config_toml).unwrap()
}

/// Tokens of a conversation as the stage estimates them (bytes / 4 with the default host).
pub fn tokens(host: &MemoryHost, conv: &Conversation) -> usize {
    condense_turns::measure::messages_tokens(host, &conv.messages)
}

/// Runs the stage with the host's conversation count set to the input's size.
pub fn run(stage: &ContextCollapse, conv: &Conversation, host: &mut MemoryHost) -> Applied {
    host.conversation_tokens = tokens(host, conv);
    apply(stage, conv, &*host).unwrap()
}

pub fn text(id: &str, role: Role, text: &str) -> Message {
    Message::new(id, role, vec![Block::text(text)])
}

pub fn tool_use(id: &str, name: &str, input: Value) -> Block {
    Block::tool_use(id, name, RawJson::from_string_unchecked(input.to_string()))
}

pub fn tool_result(id: &str, text: &str) -> Block {
    Block::tool_result(id, Content::string(text))
}

/// Every tool_result of `conv` has its tool_use in an earlier message.
pub fn assert_no_orphans(conv: &Conversation) {
    let orphans = condense_model::orphaned_tool_results(&conv.messages);
    assert!(orphans.is_empty(), "orphaned tool results: {orphans:?}");
}

/// Ids are unique.
pub fn assert_unique_ids(conv: &Conversation) {
    let mut seen = HashSet::new();
    for m in &conv.messages {
        assert!(seen.insert(m.id.as_str()), "duplicate id {}", m.id);
    }
}

/// The report as JSON, for snapshots.
pub fn report_json(report: &StageReport) -> Value {
    serde_json::to_value(report).unwrap()
}

/// The state with each summary shown by its length and the id lists by their ends and count.
pub fn state_summary(host: &MemoryHost) -> Value {
    let mut v = host.state_json();
    if let Some(list) = v.get_mut("collapses").and_then(Value::as_array_mut) {
        for c in list {
            let ids = c["ids"].as_array().unwrap().clone();
            c["ids"] = json!(format!(
                "{} ids: {} … {}",
                ids.len(),
                ids.first().and_then(Value::as_str).unwrap_or(""),
                ids.last().and_then(Value::as_str).unwrap_or("")
            ));
        }
    }
    v
}

/// The ids of a conversation's messages.
pub fn ids(conv: &Conversation) -> Vec<&str> {
    conv.messages.iter().map(|m| m.id.as_str()).collect()
}

/// The host's default summarizer (offline, extractive) as a [`MemoryHost`] summarizer, counting
/// tokens with o200k like the host does.
pub fn extractive() -> impl Fn(&condense_abi::SummaryRequest) -> Result<String, String> {
    let counter = std::sync::Arc::new(condense_tokens::TokenCounter::new(Default::default()));
    let summarizer = condense_summarize::build(
        &condense_summarize::SummarizerConfig::default(),
        std::sync::Arc::clone(&counter),
    )
    .unwrap();
    // As the host answers: the retained record first, earlier summaries read back from their
    // text (a test host keeps no records).
    move |r| {
        let request = condense_summarize::SummaryRequest {
            messages: &r.messages,
            previous_summary: r.previous_summary.as_deref(),
            max_tokens: r.max_tokens,
            purpose: &r.purpose,
        };
        condense_summarize::retaining::summarize_span(
            summarizer.as_ref(),
            &counter,
            &request,
            &|_| None,
        )
        .map(|s| s.text)
        .map_err(|e| e.to_string())
    }
}
