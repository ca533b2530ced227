//! The stage authoring surface: ordinary Rust over the model types.
//!
//! A stage author implements [`Stage`] and writes one [`export_stage!`](crate::export_stage)
//! line; the crate does the rest (conversion, config parsing with unknown keys rejected,
//! metadata, and `catch_unwind` around every entry point). A stage reads the facts of the call
//! and the host's services from its [`Context`](crate::Context), keeps its decisions across
//! runs in a [`Versioned`](crate::Versioned) state, and fails with a [`StageError`].

use crate::context::{Context, Signal};
use crate::StageConfig;
use condense_model::{Block, Conversation};
use serde::{Deserialize, Serialize};
use std::fmt;

/// The services a host gives stages: counting, the store, the stage's state and the
/// summarizer. Implemented by the real host (`condense-host`) and the test host
/// ([`crate::testing::MemoryHost`]); stages reach it through their [`Context`], which also
/// carries the plain facts of the call.
pub trait Host {
    /// Tokens in `text` with the pipeline's tokenizer.
    fn count_tokens(&self, text: &str) -> usize;
    /// Tokens of `block` exactly as the host counts it for the conversation's total.
    fn count_block(&self, block: &Block) -> usize;
    /// Stores bytes in the content-addressed store, returning their key.
    fn store_put(&self, bytes: &[u8]) -> Result<String, String>;
    /// Reads bytes stored under `key`.
    fn store_get(&self, key: &str) -> Result<Option<Vec<u8>>, String>;
    /// This stage's persistent state for this session (what it decided on earlier runs).
    fn state_get(&self) -> Result<Option<String>, String>;
    /// Replaces this stage's persistent state for this session.
    fn state_put(&self, state: &str) -> Result<(), String>;
    /// Summarizes `request.messages` with the pipeline's summarizer.
    fn summarize(&self, request: SummaryRequest) -> Result<String, String>;
}

/// Why a stage failed: one line, without the stage's name (the host puts it in front, once).
///
/// Any error that displays converts into it, so `?` works on `String`s, `serde_json` errors,
/// `format!(..)` messages and the SDK's own errors alike:
///
/// ```
/// use condense_abi::StageError;
/// fn check(max: usize) -> Result<(), StageError> {
///     if max == 0 {
///         return Err("max_bytes must be > 0, got 0".into());
///     }
///     let _n: u32 = "12".parse()?; // a ParseIntError converts too
///     Ok(())
/// }
/// assert_eq!(check(0).unwrap_err().message(), "max_bytes must be > 0, got 0");
/// ```
// No `Display` impl on purpose: it would make the blanket `From<E: Display>` overlap with
// `From<StageError> for StageError`. Read the text with `message()`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StageError(String);

impl StageError {
    /// An error saying `message` (one line).
    pub fn new(message: impl Into<String>) -> Self {
        StageError(message.into())
    }

    /// The message.
    pub fn message(&self) -> &str {
        &self.0
    }

    /// The message, owned.
    pub fn into_message(self) -> String {
        self.0
    }
}

impl<E: fmt::Display> From<E> for StageError {
    fn from(e: E) -> Self {
        StageError(e.to_string())
    }
}

/// What a stage asks the host's summarizer for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SummaryRequest {
    /// The span to summarize, oldest first.
    pub messages: Vec<condense_model::Message>,
    /// The summary this one extends (anchored iterative summarization: the new span is merged
    /// into it section by section rather than regenerated).
    pub previous_summary: Option<String>,
    /// The most the summary may take, in tokens.
    pub max_tokens: usize,
    /// Who asks: `context-collapse`, `autocompact`, ... (summarizers may adapt their prompt).
    pub purpose: String,
}

/// What a stage did, for the report. The host adds tokens before and after and the time.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StageReport {
    pub blocks_changed: usize,
    /// The stage's own figure of tokens freed, when it computes one.
    pub tokens_freed: Option<usize>,
    pub notes: Vec<String>,
    pub events: Vec<StageEvent>,
    /// False only for stages whose removals must NOT be kept (secret redaction).
    pub archive_removed: bool,
    /// Facts later stages of this run see in [`RunFlags::signals`](crate::RunFlags::signals).
    /// Reports show them under `flags`, by their names (`context-collapse:active`).
    #[serde(rename = "flags")]
    pub signals: Vec<Signal>,
}

impl Default for StageReport {
    fn default() -> Self {
        StageReport {
            blocks_changed: 0,
            tokens_freed: None,
            notes: Vec::new(),
            events: Vec::new(),
            archive_removed: true,
            signals: Vec::new(),
        }
    }
}

impl StageReport {
    /// Adds a free-form note.
    pub fn note(&mut self, note: impl Into<String>) {
        self.notes.push(note.into());
    }

    /// Raises `signal` for the stages after this one.
    pub fn raise(&mut self, signal: Signal) {
        if !self.signals.contains(&signal) {
            self.signals.push(signal);
        }
    }
}

/// One structured thing a stage did to one message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StageEvent {
    /// What happened: `persisted`, `deduplicated`, `truncated`, `cleared`, ...
    pub kind: String,
    pub message_id: String,
    pub detail: String,
    /// Tokens this event freed (0 when not applicable).
    pub tokens: usize,
}

/// The conversation a stage is handed, read lazily.
///
/// Inside a loaded plugin the conversation stays on the host's side of the boundary until the
/// stage asks for it with [`Input::into_conversation`]; only then is it copied into the plugin.
/// A stage that decides from host services alone (a token threshold, a flag) that it has
/// nothing to do never pays for that copy: it returns [`StageOutput::unchanged`] and the host
/// keeps its own conversation.
///
/// ```
/// use condense_abi::Input;
/// use condense_model::Conversation;
/// let input = Input::from(Conversation::default());
/// assert!(input.into_conversation().unwrap().messages.is_empty());
/// ```
pub struct Input<'a> {
    source: InputSource<'a>,
}

enum InputSource<'a> {
    Owned(Conversation),
    Lazy(&'a dyn Fn() -> Result<Conversation, StageError>),
}

impl<'a> Input<'a> {
    /// An input that is built only if the stage asks for it (what the plugin adapter uses).
    pub fn lazy(materialize: &'a dyn Fn() -> Result<Conversation, StageError>) -> Self {
        Input {
            source: InputSource::Lazy(materialize),
        }
    }

    /// The conversation, as an owned value the stage may change freely. In a plugin this is
    /// where the copy across the boundary happens; the error names a malformed value.
    pub fn into_conversation(self) -> Result<Conversation, StageError> {
        match self.source {
            InputSource::Owned(conversation) => Ok(conversation),
            InputSource::Lazy(materialize) => materialize(),
        }
    }
}

impl From<Conversation> for Input<'static> {
    fn from(conversation: Conversation) -> Self {
        Input {
            source: InputSource::Owned(conversation),
        }
    }
}

impl std::fmt::Debug for Input<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self.source {
            InputSource::Owned(_) => "Input(owned)",
            InputSource::Lazy(_) => "Input(lazy)",
        })
    }
}

/// What [`Stage::apply`] returns: the new conversation, or `None` when the stage changed
/// nothing (the host then keeps the conversation it already holds: nothing crosses back, and
/// there is nothing to check or archive).
#[derive(Debug, Clone)]
pub struct StageOutput {
    pub conversation: Option<Conversation>,
    pub report: StageReport,
}

impl StageOutput {
    /// The stage produced `conversation`.
    pub fn changed(conversation: Conversation, report: StageReport) -> Self {
        StageOutput {
            conversation: Some(conversation),
            report,
        }
    }

    /// The stage left the conversation as it was handed in.
    pub fn unchanged(report: StageReport) -> Self {
        StageOutput {
            conversation: None,
            report,
        }
    }

    /// [`changed`](Self::changed) when the report counts a changed block, otherwise
    /// [`unchanged`](Self::unchanged): for stages that count every change they make.
    pub fn from_counted(conversation: Conversation, report: StageReport) -> Self {
        if report.blocks_changed == 0 {
            Self::unchanged(report)
        } else {
            Self::changed(conversation, report)
        }
    }
}

/// A compression stage.
///
/// ```
/// use condense_abi::{Context, Input, Stage, StageConfig, StageError, StageOutput, StageReport};
///
/// #[derive(Default, serde::Serialize, serde::Deserialize, StageConfig)]
/// #[serde(deny_unknown_fields, default)]
/// struct Config {
///     /// The conversation is dropped from this many tokens on.
///     min_tokens: usize,
/// }
///
/// /// Drops every message once the conversation reaches `min_tokens`.
/// struct DropAll(Config);
/// impl Stage for DropAll {
///     type Config = Config;
///     const NAME: &'static str = "drop-all";
///     const DESCRIPTION: &'static str = "Drops every message past a size.";
///     fn new(config: Config) -> Result<Self, StageError> { Ok(DropAll(config)) }
///     fn apply(&self, input: Input<'_>, cx: &Context<'_>) -> Result<StageOutput, StageError> {
///         if cx.conversation_tokens < self.0.min_tokens {
///             // Decided without reading the conversation: nothing crosses the boundary.
///             return Ok(StageOutput::unchanged(StageReport::default()));
///         }
///         let mut conversation = input.into_conversation()?;
///         let report = StageReport { blocks_changed: conversation.messages.len(), ..StageReport::default() };
///         conversation.messages.clear();
///         Ok(StageOutput::changed(conversation, report))
///     }
/// }
/// // In a plugin crate: condense_abi::export_stage!(DropAll);
/// ```
pub trait Stage: Sized + Send + Sync + 'static {
    /// The `[stage.config]` table: `#[derive(StageConfig)]` on a struct whose fields are the
    /// keys, each documented by its `///` comment; `Default` gives the defaults.
    type Config: StageConfig;
    /// The plugin name users write in pipeline files.
    const NAME: &'static str;
    /// One line saying what the stage does.
    const DESCRIPTION: &'static str;

    /// Builds the stage, validating the config ("max_result_bytes must be > 0, got 0").
    fn new(config: Self::Config) -> Result<Self, StageError>;

    /// Runs the stage over one conversation. Read it with [`Input::into_conversation`] only
    /// when needed, and return [`StageOutput::unchanged`] whenever nothing changed.
    fn apply(&self, input: Input<'_>, cx: &Context<'_>) -> Result<StageOutput, StageError>;
}
