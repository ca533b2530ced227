//! Summarizers: the host service stages call to turn a span of messages into a summary.
//!
//! A stage (context collapse, autocompact) never talks to a model itself: it asks the host,
//! which hands the request to the [`Summarizer`] the pipeline file's `[summarizer]` table
//! describes ([`SummarizerConfig`], built by [`build`]). Three kinds exist:
//!
//! * **`extractive`** (the default): offline and deterministic. It writes the *prose* of an
//!   anchored, sectioned Markdown summary from the messages themselves: decisions, the current
//!   state (last test run, last assistant message), pending tasks (the latest todo list, an
//!   unanswered request) and, with what the budget leaves, verbatim agent notes (the agent's
//!   messages and its sub-agents' reports). Given a `previous_summary` it wrote, it *merges* the
//!   new span into it section by section instead of starting over, so nothing the previous
//!   summary recorded is silently lost. See [`extractive`] for the format and rules.
//! * **`anthropic`** (Messages API) and **`openai`** (Chat Completions, which also covers
//!   Ollama, vLLM, llama.cpp's server and LM Studio through `base_url`): an LLM writes the
//!   summary with a nine-section prompt and an `<analysis>` scratchpad that is stripped from the
//!   reply. Retries with exponential backoff on 429/5xx, and drops the oldest turns from the
//!   head of the span when the API says the prompt is too long. See [`llm`]; its HTTP client,
//!   [`LlmClient`], is public (`condense eval`'s judge uses it).
//!
//! Every summary a summarizer writes fits `request.max_tokens`, counted with the pipeline's
//! [`TokenCounter`]. What the host hands a stage is composed by [`retaining`]: the retained
//! record (the user's requests, every file written or read, the error ledger), rendered by
//! code, first, then the summarizer's prose within what is left of the budget; only the
//! record's mandatory part (every written path, the last request) may exceed it.
//!
//! ```
//! use condense_model::{Block, Message, Role};
//! use condense_summarize::{build, SummarizerConfig, SummaryRequest};
//! use condense_tokens::TokenCounter;
//! use std::sync::Arc;
//!
//! let summarizer = build(&SummarizerConfig::default(), Arc::new(TokenCounter::default()))?;
//! let span = vec![
//!     Message::new("u1", Role::User, vec![Block::text("Fix the login bug in src/auth.rs")]),
//!     Message::new("a1", Role::Assistant, vec![Block::text("The fix is to refresh the token.")]),
//!     Message::new("u2", Role::User, vec![Block::text("Also add a test.")]),
//! ];
//! let summary = summarizer.summarize(&SummaryRequest {
//!     messages: &span,
//!     previous_summary: None,
//!     max_tokens: 500,
//!     purpose: "autocompact",
//! })?;
//! assert!(summary.contains("## Decisions\n- The fix is to refresh the token.\n"));
//! assert!(summary.contains("- Last assistant message: The fix is to refresh the token."));
//! assert!(summary.contains("- Unanswered user request: Also add a test."));
//! assert!(summary.contains("## Agent notes (verbatim, newest kept first)\n"));
//! // The requests, files and errors are the retained record's (see `retaining`).
//! assert!(!summary.contains("## User requests"));
//! # Ok::<(), condense_summarize::SummarizeError>(())
//! ```
//!
//! An LLM backend, as the pipeline file writes it (the key is read from the environment
//! variable `api_key_env` names, at build time, and never written anywhere):
//!
//! ```toml
//! [summarizer]
//! kind = "openai"
//! model = "qwen2.5-coder:7b"
//! base_url = "http://localhost:11434/v1"   # Ollama; no key needed for a local server
//! ```

pub mod extractive;
pub mod llm;
pub mod retaining;
mod text;

use condense_model::Message;
use condense_tokens::TokenCounter;
use serde::{Deserialize, Serialize};
use std::sync::Arc;

pub use llm::{ApiKind, LlmClient, LlmConfig, LlmConfigError, LlmError};

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

/// Why summarizing failed: one line, never holding an API key.
#[derive(Debug, thiserror::Error)]
pub enum SummarizeError {
    /// The `[summarizer]` table is wrong (missing model, bad `base_url`, unset key variable).
    #[error("summarizer config: {0}")]
    Config(String),
    /// Summarizing failed (HTTP status and the API's message, retries exhausted, ...).
    #[error("summarizer failed: {0}")]
    Failed(String),
}

/// A summarizer. Implementations are deterministic for the same input where they can be.
pub trait Summarizer: Send + Sync {
    fn name(&self) -> &str;
    fn summarize(&self, request: &SummaryRequest<'_>) -> Result<String, SummarizeError>;
}

/// The pipeline file's `[summarizer]` table, tagged by `kind`.
///
/// ```
/// use condense_summarize::SummarizerConfig;
/// let c: SummarizerConfig = toml::from_str("kind = \"anthropic\"\nmodel = \"claude-haiku-4-5\"")?;
/// assert!(matches!(c, SummarizerConfig::Anthropic(_)));
/// # Ok::<(), toml::de::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase", deny_unknown_fields)]
pub enum SummarizerConfig {
    /// Offline, deterministic, no model. No keys.
    Extractive {},
    /// Anthropic Messages API (`POST {base_url}/v1/messages`).
    Anthropic(LlmConfig),
    /// OpenAI-compatible Chat Completions (`POST {base_url}/chat/completions`).
    Openai(LlmConfig),
}

impl Default for SummarizerConfig {
    fn default() -> Self {
        SummarizerConfig::Extractive {}
    }
}

impl SummarizerConfig {
    /// The `kind` value.
    pub fn kind(&self) -> &'static str {
        match self {
            SummarizerConfig::Extractive {} => "extractive",
            SummarizerConfig::Anthropic(_) => "anthropic",
            SummarizerConfig::Openai(_) => "openai",
        }
    }
}

/// Builds the summarizer a config describes. LLM kinds read their key from the environment
/// variable `api_key_env` names now, so a missing key fails here, not mid-run.
pub fn build(
    config: &SummarizerConfig,
    counter: Arc<TokenCounter>,
) -> Result<Box<dyn Summarizer>, SummarizeError> {
    build_with_env(config, counter, &|name| std::env::var(name).ok())
}

/// [`build`] with the environment given as a lookup function (for tests and embedding).
pub fn build_with_env(
    config: &SummarizerConfig,
    counter: Arc<TokenCounter>,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Box<dyn Summarizer>, SummarizeError> {
    match config {
        SummarizerConfig::Extractive {} => Ok(Box::new(extractive::Extractive::new(counter))),
        SummarizerConfig::Anthropic(c) => Ok(Box::new(llm::LlmSummarizer::new(
            llm::ApiKind::Anthropic,
            c,
            counter,
            env,
        )?)),
        SummarizerConfig::Openai(c) => Ok(Box::new(llm::LlmSummarizer::new(
            llm::ApiKind::OpenAi,
            c,
            counter,
            env,
        )?)),
    }
}
