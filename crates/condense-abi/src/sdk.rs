//! The stage authoring surface: ordinary Rust over the model types.
//!
//! A stage author implements [`Stage`] and writes one [`export_stage!`](crate::export_stage)
//! line; the crate does the rest (conversion, config parsing with unknown keys rejected,
//! metadata, and `catch_unwind` around every entry point). A stage reads the facts of the call
//! and the host's services from its [`Context`], keeps its decisions across
//! runs in a [`Versioned`](crate::Versioned) state, and fails with a [`StageError`].

use crate::context::{Context, Signal};
use crate::ffi::FfiConversationRef;
use crate::view::View;
use crate::StageConfig;
use condense_model::{Block, Conversation, Message, ReadMessage};
use serde::{Deserialize, Serialize};
use std::cell::{Cell, OnceCell};
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
/// Inside a loaded plugin the conversation stays on the host's side of the boundary. A stage
/// reads it in place through [`Input::view`] (nothing copied: every string is the host's), and
/// copies it in with [`Input::into_conversation`] only to change it. A stage that decides from
/// host figures alone (a token threshold, a flag) reads nothing at all; one that only looks
/// (nothing over budget, no new duplicate) reads through the view and returns
/// [`StageOutput::unchanged`]: the host keeps its own conversation and nothing crosses back.
///
/// ```
/// use condense_abi::Input;
/// use condense_model::{Block, Conversation, Message, Role};
/// let mut conv = Conversation::default();
/// conv.messages.push(Message::new("u1", Role::User, vec![Block::text("hello")]));
/// let input = Input::of(&conv);
/// assert_eq!(input.view().unwrap().message(0).unwrap().content().text(), "hello");
/// assert_eq!(input.into_conversation().unwrap(), conv);
/// ```
pub struct Input<'a> {
    source: InputSource<'a>,
    /// The conversation as the view reads it, once asked for: lent by the host, or made here
    /// over a conversation in this process.
    mirror: OnceCell<Mirror<'a>>,
    /// Counts copies, for [`crate::testing::apply`].
    copies: Option<&'a Cell<usize>>,
}

/// Where the mirror of the conversation comes from: the host lends it.
type Lend<'a> = dyn Fn() -> Result<&'a FfiConversationRef<'a>, StageError> + 'a;

enum InputSource<'a> {
    /// The host across the boundary (or a test host) lends its mirror on request.
    Lent(&'a Lend<'a>),
    /// A conversation in this process.
    Local(&'a Conversation),
}

enum Mirror<'a> {
    Lent(&'a FfiConversationRef<'a>),
    Made(FfiConversationRef<'a>),
}

impl<'a> Input<'a> {
    /// An input over a conversation in this process: what in-process callers and doc examples
    /// use. The view mirrors it in place; a copy clones it.
    pub fn of(conversation: &'a Conversation) -> Self {
        Input {
            source: InputSource::Local(conversation),
            mirror: OnceCell::new(),
            copies: None,
        }
    }

    /// An input whose mirror `lend` lends only if the stage reads it (what the plugin adapter
    /// and the test host use); `copies` counts [`Input::into_conversation`] calls.
    pub(crate) fn lent(lend: &'a Lend<'a>, copies: Option<&'a Cell<usize>>) -> Self {
        Input {
            source: InputSource::Lent(lend),
            mirror: OnceCell::new(),
            copies,
        }
    }

    fn mirror(&self) -> Result<&FfiConversationRef<'a>, StageError> {
        let mirror = match self.mirror.get() {
            Some(mirror) => mirror,
            None => {
                let made = match self.source {
                    InputSource::Lent(lend) => Mirror::Lent(lend()?),
                    InputSource::Local(conversation) => {
                        Mirror::Made(FfiConversationRef::from(conversation))
                    }
                };
                self.mirror.get_or_init(|| made)
            }
        };
        Ok(match mirror {
            Mirror::Lent(lent) => lent,
            Mirror::Made(made) => made,
        })
    }

    /// The conversation, read in place: nothing is copied (see [`View`]). The error names a
    /// malformed value the host sent.
    pub fn view(&self) -> Result<View<'_>, StageError> {
        Ok(View::new(self.mirror()?)?)
    }

    /// The conversation, as an owned value the stage may change freely. In a plugin this is
    /// where the copy across the boundary happens; the error names a malformed value.
    pub fn into_conversation(self) -> Result<Conversation, StageError> {
        if let Some(copies) = self.copies {
            copies.set(copies.get() + 1);
        }
        if let (InputSource::Local(conversation), None) = (&self.source, self.mirror.get()) {
            return Ok((*conversation).clone());
        }
        let view = self.view()?;
        let mut conversation = view.header();
        conversation.messages = view.messages().map(|m| m.to_message()).collect();
        Ok(conversation)
    }
}

impl std::fmt::Debug for Input<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self.source {
            InputSource::Lent(_) => "Input(lent)",
            InputSource::Local(_) => "Input(local)",
        })
    }
}

/// What a stage did to the conversation it was handed ([`StageOutput::change`]).
#[derive(Debug, Clone, PartialEq)]
pub enum Change {
    /// Nothing: the host keeps the conversation it holds, and nothing crosses back.
    Unchanged,
    /// The whole new conversation (messages removed, added or reordered, or the header changed).
    Whole(Conversation),
    /// Messages replaced in place: `(index, message)` with ascending indices, each at most once,
    /// each message keeping its id; every other message and the header are as handed in. Only
    /// these cross back, and the host checks, counts and archives only them: a stage that
    /// rewrites a few tool results of a long session (snip, tool-result-budget) copies those
    /// messages, not the conversation ([`crate::MessageView::to_message`]).
    Replaced(Vec<(usize, Message)>),
}

/// What [`Stage::apply`] returns: what the stage did to the conversation ([`Change`]) and its
/// report.
#[derive(Debug, Clone)]
pub struct StageOutput {
    pub change: Change,
    pub report: StageReport,
}

impl StageOutput {
    /// The stage produced `conversation`.
    pub fn changed(conversation: Conversation, report: StageReport) -> Self {
        StageOutput {
            change: Change::Whole(conversation),
            report,
        }
    }

    /// The stage replaced `messages` in place (see [`Change::Replaced`]); none is
    /// [`unchanged`](Self::unchanged).
    pub fn replaced(messages: Vec<(usize, Message)>, report: StageReport) -> Self {
        StageOutput {
            change: if messages.is_empty() {
                Change::Unchanged
            } else {
                Change::Replaced(messages)
            },
            report,
        }
    }

    /// The stage left the conversation as it was handed in.
    pub fn unchanged(report: StageReport) -> Self {
        StageOutput {
            change: Change::Unchanged,
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

    /// `conversation` with this output's change made: what the host continues with. The
    /// error names a replacement that does not fit ([`Change::Replaced`]'s rules).
    pub fn apply_to(
        self,
        conversation: &Conversation,
    ) -> Result<(Conversation, StageReport), String> {
        let conversation = match self.change {
            Change::Unchanged => conversation.clone(),
            Change::Whole(c) => c,
            Change::Replaced(messages) => {
                let mut out = conversation.clone();
                replace_messages(&mut out, messages)?;
                out
            }
        };
        Ok((conversation, self.report))
    }
}

/// Makes a [`Change::Replaced`] in `conversation`, each message put in its place, once its
/// rules hold (`check_replaced`). Gives back what they replaced, by index: the host archives
/// those, and puts them back when it refuses the change.
pub fn replace_messages(
    conversation: &mut Conversation,
    replaced: Vec<(usize, Message)>,
) -> Result<Vec<(usize, Message)>, String> {
    check_replaced(&replaced, &conversation.messages)?;
    let messages = &mut conversation.messages;
    Ok(replaced
        .into_iter()
        .map(|(i, m)| (i, std::mem::replace(&mut messages[i], m)))
        .collect())
}

/// Checks a [`Change::Replaced`] against the messages it replaces: indices ascending, in range,
/// each at most once, and every replacement keeping its message's id.
pub(crate) fn check_replaced(
    replaced: &[(usize, Message)],
    messages: &[Message],
) -> Result<(), String> {
    let mut previous: Option<usize> = None;
    for (i, m) in replaced {
        if let Some(p) = previous.filter(|&p| p >= *i) {
            return Err(format!(
                "replaced message {i} out of order (after {p}): indices must ascend, each once"
            ));
        }
        previous = Some(*i);
        let Some(old) = messages.get(*i) else {
            return Err(format!(
                "replaced message {i} of a conversation of {} messages",
                messages.len()
            ));
        };
        if old.id != m.id {
            return Err(format!(
                "replaced message {i} changed its id ({} -> {}): a replacement keeps its id (return the whole conversation to change ids)",
                old.id,
                m.id
            ));
        }
    }
    Ok(())
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

    /// Runs the stage over one conversation. Read it through [`Input::view`]; to change it,
    /// copy in only the messages you change ([`crate::Replacements`]), or the whole
    /// conversation ([`Input::into_conversation`]) to remove, add or reorder messages; return
    /// [`StageOutput::unchanged`] whenever nothing changed.
    fn apply(&self, input: Input<'_>, cx: &Context<'_>) -> Result<StageOutput, StageError>;
}
