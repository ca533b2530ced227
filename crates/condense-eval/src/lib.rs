//! `condense eval`: measures what survives compression.
//!
//! Runs pipelines (and three baselines) on a conversation at a window tight enough that the
//! request must lose most of its tokens, then scores each output with *probes* computed from
//! the ORIGINAL conversation by this crate's own code — independent of the stages, which keep
//! these facts with `condense-retain` (the probes and the scoring never use it,
//! `condense-summarize` or a plugin crate: they are the oracle; only the optional judge sends
//! its questions through `condense_summarize::llm::LlmClient`, the one LLM client).
//!
//! - [`probes`]: written paths, first meaningful lines of error results, the last user request;
//! - [`score`](mod@score): the compressed conversation's text, substring checks, integrity, what was lost;
//! - [`window`]: the window each conversation runs at, and the `[model]` table for it;
//! - [`baselines`]: `truncate-oldest`, `mask+truncate`, `autocompact`, built in code;
//! - [`run`]: one pipeline on one conversation (with the recovery chain, against a throwaway
//!   store), written out and read back, scored;
//! - [`judge`]: the optional LLM judge (four free-form questions, graded 0-5).
//!
//! ```
//! use condense_eval::{probes::Probes, score::score};
//! use condense_model::{Block, Conversation, Message, Role};
//!
//! let mut original = Conversation::default();
//! original.messages.push(Message::new("u", Role::User, vec![Block::text("Ship it")]));
//! let probes = Probes::from_original(&original);
//! assert_eq!(probes.last_request.as_deref(), Some("Ship it"));
//!
//! let s = score(&original, &Conversation::default(), true);
//! assert_eq!(s.lost.request.as_deref(), Some("Ship it"));
//! ```
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used))]

pub mod baselines;
pub mod judge;
pub mod probes;
pub mod run;
pub mod score;
pub mod window;

pub use baselines::Baseline;
pub use probes::Probes;
pub use run::{evaluate, Candidate, CandidateKind, ConversationEval, PipelineEval, Settings};
pub use score::{score, Hits, Lost, Score};
pub use window::Window;

/// What can go wrong in an evaluation; each displays as one line.
#[derive(Debug, thiserror::Error)]
pub enum EvalError {
    /// A pipeline (or baseline) failed to load or to run on a conversation.
    #[error("pipeline `{pipeline}` on {file}{conversation}: {message}")]
    Run {
        pipeline: String,
        file: String,
        /// ` (conversation LABEL)` or empty.
        conversation: String,
        message: String,
        /// The pipeline's configuration is at fault (a plugin not found, a config rejected).
        config: bool,
    },
    /// The window cannot be set (too small for the pipeline's `[model]`).
    #[error("{0}")]
    Window(String),
    /// A baseline name that does not exist.
    #[error(
        "unknown baseline `{0}` (baselines: truncate-oldest, mask+truncate, autocompact, or none)"
    )]
    UnknownBaseline(String),
    /// The judge's configuration (model, URL, key variable).
    #[error("judge: {0}")]
    JudgeConfig(String),
    /// The judge's API failed or answered something unreadable.
    #[error("judge ({api}): {message}")]
    Judge { api: &'static str, message: String },
    /// A temporary store or another local resource.
    #[error("{0}")]
    Io(String),
}

impl EvalError {
    /// Whether the user's configuration is at fault (exit code 2) rather than a run (1).
    pub fn is_config_error(&self) -> bool {
        match self {
            EvalError::Run { config, .. } => *config,
            EvalError::Window(_) | EvalError::UnknownBaseline(_) | EvalError::JudgeConfig(_) => {
                true
            }
            EvalError::Judge { .. } | EvalError::Io(_) => false,
        }
    }
}
