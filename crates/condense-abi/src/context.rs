//! What a stage is handed besides the conversation: the facts of this run ([`RunContext`], plain
//! data that crosses the boundary once per call) and the host's services ([`Context`]).
//!
//! ```
//! use condense_abi::testing::MemoryHost;
//! use condense_abi::{Context, RunContext, Signal};
//! let host = MemoryHost::default();
//! let mut run = RunContext::default();
//! run.flags.forced = true;
//! run.flags.signals.push(Signal::CollapseActive);
//! let cx = Context::local(&run, &host);
//! assert!(cx.flags.forced && cx.flags.raised(Signal::CollapseActive));
//! assert_eq!(cx.count_tokens("12345678"), 2); // the test host counts bytes / 4
//! ```

use crate::export::Services;
use crate::sdk::{Host, StageError, SummaryRequest};
use condense_model::{Block, CountTokens, Format};
use serde::{Deserialize, Serialize};

/// The facts of one stage call, fixed for the call. Time is injected (tests pin it), so a stage
/// that reads nothing else is deterministic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunContext {
    /// The current time, Unix milliseconds.
    pub now_ms: i64,
    /// The model's context window, in tokens.
    pub context_window: usize,
    /// The model's maximum output tokens.
    pub max_output_tokens: usize,
    /// Tokens kept free for the next response (the pipeline's `[model] output_reserve`): the
    /// request fits when the conversation takes at most `context_window - output_reserve`.
    pub output_reserve: usize,
    /// Tokens freed by the stages that ran before this one in this pipeline run.
    pub tokens_freed_before: usize,
    /// Tokens of the conversation as handed to this stage (system prompt, tools and messages),
    /// counted by the host with its block cache, plus the pipeline's `[model] fixed_tokens`:
    /// what the real request carries, so thresholds compare the request's size.
    pub conversation_tokens: usize,
    /// The session this conversation belongs to (stable across runs of the same session).
    pub session: String,
    /// The format the conversation was read from and will be written back in (`None` when
    /// unknown, as in tests of a bare conversation).
    pub format: Option<Format>,
    /// What the host and earlier stages say about this call.
    pub flags: RunFlags,
}

impl Default for RunContext {
    /// A 200,000-token window with 32,000 output tokens and the default 8,192 reserve, at a
    /// fixed time, for tests.
    fn default() -> Self {
        RunContext {
            now_ms: 1_750_000_000_000,
            context_window: 200_000,
            max_output_tokens: 32_000,
            output_reserve: 8_192,
            tokens_freed_before: 0,
            conversation_tokens: 0,
            session: "test-session".into(),
            format: Some(Format::Anthropic),
            flags: RunFlags::default(),
        }
    }
}

/// Typed flags of one stage call.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunFlags {
    /// The host forces this stage past its own thresholds: the recovery chain after a
    /// prompt-too-long error, or `condense serve` retrying a request that did not fit.
    pub forced: bool,
    /// The host turned this stage off for this run (`CONDENSE_DISABLE_AUTOCOMPACT=1` for
    /// autocompact); the stage should say so in its report and change nothing.
    pub disabled: bool,
    /// What stages that ran earlier in this run raised ([`StageReport::signals`]).
    ///
    /// [`StageReport::signals`]: crate::StageReport::signals
    pub signals: Vec<Signal>,
}

impl RunFlags {
    /// Whether an earlier stage raised `signal` in this run.
    pub fn raised(&self, signal: Signal) -> bool {
        self.signals.contains(&signal)
    }
}

/// A fact one stage raises for the stages after it in the same run. Serialized (in reports)
/// under the names given below.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[non_exhaustive]
pub enum Signal {
    /// context-collapse's projection is active: it manages the context, so autocompact stands
    /// down (unless forced).
    #[serde(rename = "context-collapse:active")]
    CollapseActive,
    /// autocompact replaced the conversation by a summary in this run.
    #[serde(rename = "autocompact:fired")]
    Compacted,
}

impl Signal {
    /// Every signal, in code order (the FFI code of a signal is its index here).
    pub const ALL: [Signal; 2] = [Signal::CollapseActive, Signal::Compacted];

    pub(crate) fn code(self) -> u8 {
        match self {
            Signal::CollapseActive => 0,
            Signal::Compacted => 1,
        }
    }

    pub(crate) fn from_code(code: u8) -> Option<Signal> {
        Signal::ALL.get(usize::from(code)).copied()
    }
}

/// What a stage is handed besides the conversation: the facts of this call (it dereferences to
/// [`RunContext`], so `cx.now_ms`, `cx.flags.forced`) and the host's services. Stages never do
/// I/O, read clocks or load tokenizers themselves: everything outside the conversation comes
/// through here, which is what makes every stage deterministic and snapshot-testable.
#[derive(Clone, Copy)]
pub struct Context<'a> {
    run: &'a RunContext,
    services: &'a dyn Services,
}

impl std::fmt::Debug for Context<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context").field("run", self.run).finish()
    }
}

impl std::ops::Deref for Context<'_> {
    type Target = RunContext;
    fn deref(&self) -> &RunContext {
        self.run
    }
}

impl CountTokens for Context<'_> {
    fn count_tokens(&self, text: &str) -> usize {
        Context::count_tokens(self, text)
    }
}

impl<'a> Context<'a> {
    /// A context over a host in this process (what tests and [`crate::testing::apply`] use).
    pub fn local<H: Host>(run: &'a RunContext, host: &'a H) -> Self {
        Context {
            run,
            services: host,
        }
    }

    /// A context over the host across the plugin boundary.
    pub(crate) fn plugin(run: &'a RunContext, host: &'a dyn Services) -> Self {
        Context {
            run,
            services: host,
        }
    }

    /// Tokens in `text` with the pipeline's tokenizer.
    pub fn count_tokens(&self, text: &str) -> usize {
        self.services.count_tokens(text)
    }

    /// Tokens of `block` exactly as the host counts it for [`RunContext::conversation_tokens`]
    /// (from its cache when it has seen the block).
    pub fn count_block(&self, block: &Block) -> usize {
        self.services.count_block(block)
    }

    /// Stores bytes in the content-addressed store, returning their key.
    pub fn store_put(&self, bytes: &[u8]) -> Result<String, StageError> {
        let put = self.services.store_put(bytes);
        // The host's own words ("disk full"): the stage says what it was storing.
        put.map_err(StageError::new)
    }

    /// Reads bytes stored under `key`.
    pub fn store_get(&self, key: &str) -> Result<Option<Vec<u8>>, StageError> {
        let got = self.services.store_get(key);
        got.map_err(StageError::new)
    }

    /// Summarizes `request.messages` with the pipeline's summarizer (offline extractive by
    /// default, or an LLM the host calls). Stages never talk to a model themselves.
    pub fn summarize(&self, request: SummaryRequest) -> Result<String, StageError> {
        let summary = self.services.summarize(request);
        summary.map_err(StageError::new)
    }

    /// This stage's stored state for this session (the default when there is none), as a
    /// handle that saves with one call: see [`crate::Versioned`].
    pub fn state<S: crate::StageState>(&self) -> Result<crate::Versioned<'a, S>, StageError> {
        let stored = self
            .services
            .state_get()
            .map_err(|e| StageError::new(format!("cannot read the stage state: {e}")))?;
        let value = crate::state::parse_state::<S>(stored.as_deref())?;
        Ok(crate::Versioned::new(value, stored, *self))
    }

    pub(crate) fn state_put(&self, text: &str) -> Result<(), StageError> {
        self.services
            .state_put(text)
            .map_err(|e| StageError::new(format!("cannot write the stage state: {e}")))
    }
}
