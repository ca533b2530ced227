//! Test support for stages, shared by every plugin's tests (a dev-dependency only: plugins
//! themselves never link the tokenizer or the summarizer this crate brings in).
//!
//! - the test host ([`MemoryHost`]) and [`run`], which applies a stage as the host does;
//! - [`stage`]: a stage from config TOML text, as the host builds it;
//! - block and message builders ([`text`], [`tool_use`], [`tool_result`], [`call`], [`image`]);
//! - [`transcript`]: a shipped real session from `tests/fixtures/transcripts/`, read;
//! - [`extractive`] and [`o200k`]: the host's default summarizer and tokenizer, for tests that
//!   want the real figures rather than bytes / 4;
//! - assertions every stage must pass ([`assert_no_orphans`], [`assert_unique_ids`]) and small
//!   readers for snapshots ([`report_json`], [`ids`], [`has_note`]).
//!
//! ```
//! use condense_testing::{call, text, tool_result};
//! use condense_model::Role;
//! let mut messages = vec![text("u1", Role::User, "list the files")];
//! messages.extend(call("1", "Bash", serde_json::json!({"command": "ls"}), "a.rs\nb.rs"));
//! assert_eq!(messages.len(), 3);
//! condense_testing::assert_no_orphans(&condense_model::Conversation { messages, ..Default::default() });
//! ```

pub use condense_abi::testing::{apply, changed_messages, Applied, MemoryHost};

use condense_abi::{build_stage, Stage, StageReport, SummaryRequest};
use condense_formats::{Document, ReadOptions};
use condense_model::{
    Block, Content, Conversation, Image, ImageSource, Message, RawJson, Role, ToolResult,
};
use serde_json::Value;
use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::Arc;

/// Stage `S` built from config TOML text, as the host builds it (panics with the stage's
/// message when the config is refused).
pub fn stage<S: Stage>(config_toml: &str) -> S {
    match build_stage::<S>(config_toml) {
        Ok(stage) => stage,
        Err(e) => panic!("{}: config refused: {}", S::NAME, e.message()),
    }
}

/// Applies `stage` as the host does (the call's facts are `host.run`), panicking on failure.
pub fn run<S: Stage>(stage: &S, conversation: &Conversation, host: &MemoryHost) -> Applied {
    match apply(stage, conversation, host) {
        Ok(applied) => applied,
        Err(e) => panic!("{} failed: {}", S::NAME, e.message()),
    }
}

/// A message of one text block.
pub fn text(id: &str, role: Role, text: &str) -> Message {
    Message::new(id, role, vec![Block::text(text)])
}

/// A tool_use block with `input` as its JSON arguments.
pub fn tool_use(id: &str, name: &str, input: Value) -> Block {
    Block::tool_use(id, name, RawJson::from_string_unchecked(input.to_string()))
}

/// A tool_result block answering `id`.
pub fn tool_result(id: &str, content: Content, is_error: Option<bool>) -> Block {
    Block::ToolResult(ToolResult {
        is_error,
        ..ToolResult::new(id, content)
    })
}

/// One tool call `t{n}` and its result, as an assistant message `a{n}` and a user message
/// `r{n}`.
pub fn call(n: &str, tool: &str, input: Value, result: &str) -> Vec<Message> {
    vec![
        Message::new(
            format!("a{n}"),
            Role::Assistant,
            vec![tool_use(&format!("t{n}"), tool, input)],
        ),
        Message::new(
            format!("r{n}"),
            Role::User,
            vec![tool_result(&format!("t{n}"), Content::string(result), None)],
        ),
    ]
}

/// A tiny base64 PNG image block (its header only).
pub fn image() -> Block {
    Block::Image(Image {
        source: ImageSource::Base64 {
            media_type: "image/png".into(),
            data: "iVBORw0KGgo=".into(),
        },
        extra: RawJson::default(),
    })
}

/// `n` numbered lines of `label` output, newline-terminated.
pub fn lines(label: &str, n: usize) -> String {
    (1..=n)
        .map(|i| format!("{label} line {i:04}: some output\n"))
        .collect()
}

/// The path of a shipped transcript, relative to `tests/fixtures/transcripts/`.
pub fn transcript_path(relative: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/transcripts")
        .join(relative)
}

/// A shipped transcript, read with format detection (panics naming the file if it cannot be).
pub fn transcript(relative: &str) -> Document {
    let path = transcript_path(relative);
    let bytes =
        std::fs::read(&path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    condense_formats::read(&bytes, relative, &ReadOptions::default())
        .unwrap_or_else(|e| panic!("cannot read {relative}: {e}"))
}

/// A counter with the host's default tokenizer (o200k), shared by [`o200k`] and
/// [`extractive`].
fn counter() -> Arc<condense_tokens::TokenCounter> {
    Arc::new(condense_tokens::TokenCounter::new(Default::default()))
}

/// Counts with the host's default tokenizer, for [`MemoryHost::with_counter`].
pub fn o200k() -> impl Fn(&str) -> usize {
    let counter = counter();
    move |text| counter.count_text(text)
}

/// The host's default summarizer (offline, extractive), answering as the host does (the
/// retained record first, earlier summaries read back from their text: a test host keeps no
/// records), for [`MemoryHost::with_summarizer`].
pub fn extractive() -> impl Fn(&SummaryRequest) -> Result<String, String> {
    let counter = counter();
    let summarizer = match condense_summarize::build(
        &condense_summarize::SummarizerConfig::default(),
        Arc::clone(&counter),
    ) {
        Ok(summarizer) => summarizer,
        Err(e) => panic!("the default summarizer does not build: {e}"),
    };
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

/// Panics if a tool_result has lost its tool_use (one the input did not already orphan).
pub fn assert_no_orphans(conv: &Conversation) {
    let orphans = condense_model::orphaned_tool_results(&conv.messages);
    assert!(orphans.is_empty(), "orphaned tool results: {orphans:?}");
}

/// Panics if two messages share an id.
pub fn assert_unique_ids(conv: &Conversation) {
    let mut seen = HashSet::new();
    for m in &conv.messages {
        assert!(seen.insert(m.id.as_str()), "duplicate message id {}", m.id);
    }
}

/// The report as JSON, for snapshots.
pub fn report_json(report: &StageReport) -> Value {
    match serde_json::to_value(report) {
        Ok(value) => value,
        Err(e) => panic!("the report does not serialize: {e}"),
    }
}

/// The ids of a conversation's messages.
pub fn ids(conv: &Conversation) -> Vec<&str> {
    conv.messages.iter().map(|m| m.id.as_str()).collect()
}

/// Whether some note of the report contains `part`.
pub fn has_note(report: &StageReport, part: &str) -> bool {
    report.notes.iter().any(|n| n.contains(part))
}
