//! Summarizers: the host service stages call to turn a span of messages into a summary.
//!
//! INTERFACE STUB written by the lead; the full implementation (anchored extractive summarizer,
//! Anthropic/OpenAI HTTP backends) replaces the bodies, keeping these names.

use condense_model::Message;
use condense_tokens::TokenCounter;
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// What to summarize.
#[derive(Debug, Clone, Copy)]
pub struct SummaryRequest<'a> {
    /// The span, oldest first.
    pub messages: &'a [Message],
    /// The summary this one extends (merged into section by section).
    pub previous_summary: Option<&'a str>,
    /// The most the summary may take, in tokens.
    pub max_tokens: usize,
    /// Who asks (`context-collapse`, `autocompact`).
    pub purpose: &'a str,
}

/// Why summarizing failed: one line.
#[derive(Debug, thiserror::Error)]
pub enum SummarizeError {
    #[error("summarizer config: {0}")]
    Config(String),
    #[error("summarizer failed: {0}")]
    Failed(String),
}

/// A summarizer. Implementations are deterministic for the same input where they can be.
pub trait Summarizer: Send + Sync {
    fn name(&self) -> &str;
    fn summarize(&self, request: &SummaryRequest<'_>) -> Result<String, SummarizeError>;
}

/// The pipeline file's `[summarizer]` table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase", deny_unknown_fields)]
pub enum SummarizerConfig {
    Extractive {},
}

impl Default for SummarizerConfig {
    fn default() -> Self {
        SummarizerConfig::Extractive {}
    }
}

/// Builds the summarizer a config describes.
pub fn build(
    config: &SummarizerConfig,
    counter: Arc<TokenCounter>,
) -> Result<Box<dyn Summarizer>, SummarizeError> {
    match config {
        SummarizerConfig::Extractive {} => Ok(Box::new(Stub { counter })),
    }
}

struct Stub {
    counter: Arc<TokenCounter>,
}

impl Summarizer for Stub {
    fn name(&self) -> &str {
        "extractive"
    }
    fn summarize(&self, request: &SummaryRequest<'_>) -> Result<String, SummarizeError> {
        let mut out = request.previous_summary.unwrap_or("").to_string();
        for m in request.messages {
            let t = m.content.text();
            if self.counter.count_text(&out) + self.counter.count_text(&t) > request.max_tokens {
                break;
            }
            out.push_str(&t);
            out.push('\n');
        }
        Ok(out)
    }
}
