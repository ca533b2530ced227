//! `autocompact`: level 5 of the pipeline, the last resort.
//!
//! When the conversation still reaches the autocompact threshold after every lighter stage, this
//! stage replaces it by **one summary** written by the host's summarizer, then gives back what a
//! summary tends to lose: the most recently read files, pinned content, and the last user
//! message when it is still unanswered. It is destructive (the host archives what it removes, so
//! `condense expand` restores it), so it guards itself: a threshold with the seeds' arithmetic
//! that can be moved either way, suppression while context collapse is active, a minimum number
//! of turns between two compactions, a circuit breaker, and a result that must be smaller.
//!
//! ```toml
//! [[stage]]
//! name = "autocompact"
//! plugin = "autocompact"
//! [stage.config]
//! enabled = true
//! buffer_tokens = 13000              # threshold = effective window - buffer_tokens ...
//! threshold_pct = 0.85               # ... or this fraction of the effective window (0.5..=0.98)
//! min_turns_between = 2              # API turns (model calls) between two compactions
//! max_consecutive_failures = 3       # circuit breaker
//! summary_max_tokens = 20000         # never more than 1/4 of the effective window
//! restore_files = 5                  # most recently read files given back
//! restore_file_max_tokens = 5000     # each cut to this
//! read_tools = ["Read", "read_file", "view", "cat"]
//! pin = [{ tool = "TodoWrite" }, { regex = "IMPORTANT:.*" }]
//! pin_budget_tokens = 25000          # all pinned items together
//! pin_max_tokens = 5000              # each pinned item
//! ```
//!
//! # The trigger
//!
//! ```text
//! effective window = context_window - min(max_output_tokens, 20,000)
//! threshold        = effective window - buffer_tokens          (default)
//!                  = threshold_pct × effective window          (when threshold_pct is set)
//! fires when         cx.conversation_tokens >= threshold
//! ```
//!
//! The window arithmetic is `condense_budget::BudgetConfig`'s: for a 200k window the threshold
//! is 167,000 when the model may write 20k tokens or more (180,000 effective) and 179,000 when
//! its output is capped at 8k (192,000 effective). `threshold_pct` moves it down or up, within
//! 0.5..=0.98 of the effective window (anything else is a config error).
//!
//! **The snip correction.** The seed's trigger is `tokenCount - snipTokensFreed >= threshold`:
//! Claude Code's `tokenCount` comes from the usage the API reported for the last response, which
//! still reflects the conversation *before* snip removed messages, so the tokens snip freed are
//! subtracted or the trigger fires early. Here the count before this pipeline's stages ran is
//! `cx.conversation_tokens + cx.tokens_freed_before` (the host counts the conversation handed to
//! each stage, after the earlier stages), so the seed's formula reads
//! `(conversation_tokens + tokens_freed_before) - tokens_freed_before >= threshold`, which
//! is `conversation_tokens >= threshold`: the stage compares the count it is handed, and the
//! savings of every earlier stage (budgeting, snip, microcompact, collapse) count exactly once.
//! Subtracting `tokens_freed_before` from `conversation_tokens` again would count them twice
//! and fire late. The report spells out both numbers.
//!
//! # When it does not fire
//!
//! In this order, each with a note saying so:
//! - `enabled = false`, or the host turning the stage off (`cx.flags.disabled`, called
//!   `disable:autocompact` in notes: the host's translation of `CONDENSE_DISABLE_AUTOCOMPACT=1`;
//!   stages never read the environment): disabled, even when forced;
//! - below the threshold;
//! - the signal [`Signal::CollapseActive`], shown as `context-collapse:active` (context collapse
//!   applied at least one collapse in this run): collapse commits at ~90% of the effective
//!   window and blocks at ~95%, and this threshold (~93%) sits between the two, so it would race
//!   collapse and throw away the granular context collapse keeps;
//! - the circuit breaker is open (see below), even when forced;
//! - fewer than `min_turns_between` API turns since the last compaction (turns after its summary
//!   message when the agent adopted the output, otherwise the growth in turns since).
//!
//! An API turn is one API round (see `condense_turns`): one assistant response (consecutive
//! assistant messages) with the tool-result messages that answer its calls, opened by the user
//! prompt it answers when there is one; turns of the condense messages themselves (summaries,
//! restored files, pinned items) do not count. In an autonomous stretch every model call is a
//! turn. The default `min_turns_between = 2` stays in that light. What the guard is for is not
//! compacting again on (nearly) the same content: a rerun on the same input, an agent that keeps
//! its full history, a result that lands just under the threshold. Two new model calls with
//! their results are new content to merge into the anchored summary, and a compaction's result
//! is below the threshold by construction (restored items are dropped until it is), so reaching
//! it again within two calls means very large tool results, where waiting longer would only
//! risk a request that does not fit.
//!
//! The host's force (`cx.flags.forced`, called `force:autocompact` in notes: its recovery chain
//! after a prompt-too-long error) fires below the threshold, while collapse is active and before
//! `min_turns_between`.
//!
//! # The output
//!
//! 1. Every [`Role::System`] message, in order (and `Conversation::system` untouched).
//! 2. One summary message, [`Role::User`], id `autocompact-<n>` (`n` counts the session's
//!    compactions):
//!    ```text
//!    [condense: conversation compacted — summary of 412 messages]
//!    <summary>
//!    ```
//!    from `Context::summarize` with purpose `autocompact` and at most
//!    `min(summary_max_tokens, effective window / 4)` tokens. When the conversation starts with
//!    the summary of an earlier compaction, that summary is the request's `previous_summary`
//!    (anchored: the new messages are merged into it) and the count is cumulative. A summarizer
//!    call is a host service: it never runs this pipeline again, so the seed's recursion guard
//!    holds by construction.
//! 3. Post-compaction restoration, as plain user text messages (never `tool_result` blocks, so
//!    nothing can be orphaned): the `restore_files` most recently read files, each cut to
//!    `restore_file_max_tokens`, ids `autocompact-<n>-file-<k>`; then the pinned items, newest
//!    first within `pin_budget_tokens`, each cut to `pin_max_tokens`, ids `autocompact-<n>-pin-<k>`
//!    (see [`restore`] for what counts as a read and what a pin selects). Items of an earlier
//!    compaction's restoration are read back, so they survive the next one.
//! 4. The last user message, verbatim with its id, when no assistant message follows it (a user
//!    message that also carries tool results has them turned into text, since their calls are
//!    summarized away).
//!
//! The new messages take the timestamp of the last message summarized and, in a Claude Code
//! session, the wrapper line of the latest user message summarized without its line-specific
//! fields (`sessionId`, `cwd`, ... stay), so the host still finds the session and they read back
//! exactly as written.
//!
//! Event lines and every other message are removed (and archived by the host). If the result
//! would still reach the threshold, restored items are dropped, files first, oldest first, until
//! it does not, so one compaction does not set up the next. If the result is not smaller than the
//! input (`Context::count_tokens` over every block), the input is kept and the report says why.
//!
//! # Circuit breaker
//!
//! A failed attempt (the summarizer returns an error or an empty summary, or the result would not
//! be smaller) leaves the input unchanged with a note (the pipeline does not fail) and adds one to
//! `consecutive_failures` in the state. After `max_consecutive_failures` (3) in a row, the stage
//! stops calling the summarizer for the session and says so on every run; a successful
//! compaction, or a change of the stage config (its hash is kept in the state), resets it.
//!
//! # Report
//!
//! Notes: the threshold arithmetic, then why it did not fire or what it compacted. Events
//! `compacted`, `restored-file`, `pinned` and `kept`, one per message written or kept. When it
//! compacts, the report raises [`Signal::Compacted`] (shown as `autocompact:fired`).
//!
//! [`Role::System`]: condense_model::Role::System
//! [`Role::User`]: condense_model::Role::User

mod compact;
mod config;
mod messages;
pub mod restore;
pub mod state;
mod trigger;

pub use config::{Config, PinRule};
pub use messages::{is_own_message, parse_summary};
pub use trigger::Trigger;

use condense_abi::{Context, Input, Signal, Stage, StageError, StageOutput, StageReport};
use condense_model::Conversation;
use condense_text::plural;
use regex::Regex;
use restore::Pin;
use state::State;

/// Start of the summary message's text.
pub const SUMMARY_MARKER: &str = "[condense: conversation compacted — summary of ";
/// Start of a restored file's message.
pub const FILE_MARKER: &str = "[condense: file restored after compaction — ";
/// Start of a pinned item's message.
pub const PIN_MARKER: &str = "[condense: pinned — ";
/// Prefix of every message id this stage creates.
pub const ID_PREFIX: &str = "autocompact-";
/// The `purpose` of the summary request.
pub const PURPOSE: &str = "autocompact";

/// The lowest and highest `threshold_pct`.
pub const THRESHOLD_PCT_RANGE: std::ops::RangeInclusive<f64> = 0.5..=0.98;

/// Whether `message` is one a condense stage wrote (a summary, a restored file, a pinned item,
/// a collapse summary): a user message of one text starting with `[condense: `. Each is an API
/// turn of its own.
pub use condense_turns::is_condense_message;

/// The stage.
#[derive(Debug)]
pub struct Autocompact {
    config: Config,
    pins: Vec<Pin>,
    config_hash: String,
}

impl Autocompact {
    pub fn config(&self) -> &Config {
        &self.config
    }
}

impl Stage for Autocompact {
    type Config = Config;
    const NAME: &'static str = "autocompact";
    const DESCRIPTION: &'static str = "Level 5, the last resort: at the autocompact threshold, \
        replaces the conversation by one summary, then restores recently read files, pinned \
        content and the unanswered last user message; circuit breaker, never larger.";

    fn new(config: Config) -> Result<Self, StageError> {
        if let Some(pct) = config.threshold_pct {
            if !(pct.is_finite() && THRESHOLD_PCT_RANGE.contains(&pct)) {
                return Err(format!(
                    "threshold_pct must be a fraction of the effective window in 0.5..=0.98, got {pct}"
                )
                .into());
            }
        }
        for (name, value) in [
            ("max_consecutive_failures", config.max_consecutive_failures),
            ("summary_max_tokens", config.summary_max_tokens),
            ("restore_file_max_tokens", config.restore_file_max_tokens),
            ("pin_max_tokens", config.pin_max_tokens),
        ] {
            if value == 0 {
                return Err(format!("{name} must be >= 1, got 0").into());
            }
        }
        let mut pins = Vec::new();
        for (i, rule) in config.pin.iter().enumerate() {
            match (&rule.tool, &rule.regex) {
                (Some(tool), None) if !tool.is_empty() => pins.push(Pin::Tool(tool.clone())),
                (None, Some(re)) if !re.is_empty() => pins
                    .push(Pin::Regex(Regex::new(re).map_err(|e| {
                        format!("pin[{i}].regex is not a valid regex: {e}")
                    })?)),
                _ => {
                    return Err(format!(
                        "pin[{i}] must have exactly one non-empty `tool` or `regex`"
                    )
                    .into())
                }
            }
        }
        let canonical = serde_json::to_string(&config)?;
        let config_hash = format!(
            "{:016x}",
            twox_hash::XxHash3_64::oneshot(canonical.as_bytes())
        );
        Ok(Autocompact {
            config,
            pins,
            config_hash,
        })
    }

    fn apply(&self, input: Input<'_>, cx: &Context<'_>) -> Result<StageOutput, StageError> {
        let mut state = cx.state::<State>()?;
        // Nothing stored yet (the handle gives the default then): a state that still records
        // nothing is not written, so a session below the threshold leaves no trace.
        let fresh = *state == State::default();
        let trigger = Trigger::compute(&self.config, cx);
        let mut report = StageReport::default();
        report.note(trigger.note());
        if state.config_hash != self.config_hash {
            if state.consecutive_failures > 0 {
                report.note(format!(
                    "the stage config changed: circuit breaker reset (was {})",
                    plural(
                        state.consecutive_failures,
                        "consecutive failure",
                        "consecutive failures"
                    )
                ));
            }
            state.consecutive_failures = 0;
            state.last_failure = None;
            state.config_hash = self.config_hash.clone();
        }
        // Below the threshold (the usual case) the decision needs only host figures, so the
        // conversation is read only when it may be compacted or the last compaction is recent.
        let mut read = None;
        let mut output = None;
        match self.precheck(&trigger, &state, cx) {
            Err(why) => report.note(why),
            Ok(overridden) => {
                let conversation = read.insert(input.into_conversation()?);
                match self.decide(overridden, &state, conversation, cx) {
                    Err(why) => report.note(why),
                    Ok(forced_note) => {
                        if let Some(n) = forced_note {
                            report.note(n);
                        }
                        output = self.attempt(conversation, &mut state, cx, &trigger, &mut report);
                    }
                }
            }
        }
        let trivial = fresh && state.compactions == 0 && state.consecutive_failures == 0;
        if !trivial {
            state.save()?;
        }
        Ok(match (output, read) {
            (Some(messages), Some(conversation)) => {
                report.raise(Signal::Compacted);
                StageOutput::changed(
                    Conversation {
                        messages,
                        ..conversation
                    },
                    report,
                )
            }
            _ => StageOutput::unchanged(report),
        })
    }
}

condense_abi::export_stage!(Autocompact);
