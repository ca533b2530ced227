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
//! fires when         conversation_tokens() >= threshold
//! ```
//!
//! The window arithmetic is `condense_tokens::BudgetConfig`'s: for a 200k window the threshold
//! is 167,000 when the model may write 20k tokens or more (180,000 effective) and 179,000 when
//! its output is capped at 8k (192,000 effective). `threshold_pct` moves it down or up, within
//! 0.5..=0.98 of the effective window (anything else is a config error).
//!
//! **The snip correction.** The seed's trigger is `tokenCount - snipTokensFreed >= threshold`:
//! Claude Code's `tokenCount` comes from the usage the API reported for the last response, which
//! still reflects the conversation *before* snip removed messages, so the tokens snip freed are
//! subtracted or the trigger fires early. Here the count before this pipeline's stages ran is
//! `conversation_tokens() + tokens_freed_before()` (the host counts the conversation handed to
//! each stage, after the earlier stages), so the seed's formula reads
//! `(conversation_tokens() + tokens_freed_before()) - tokens_freed_before() >= threshold`, which
//! is `conversation_tokens() >= threshold`: the stage compares the count it is handed, and the
//! savings of every earlier stage (budgeting, snip, microcompact, collapse) count exactly once.
//! Subtracting `tokens_freed_before()` from `conversation_tokens()` again would count them twice
//! and fire late. The report spells out both numbers.
//!
//! # When it does not fire
//!
//! In this order, each with a note saying so:
//! - `enabled = false`, or the host flag `disable:autocompact` (the host's translation of
//!   `CONDENSE_DISABLE_AUTOCOMPACT=1`; stages never read the environment): disabled, even when
//!   forced;
//! - below the threshold;
//! - the flag `context-collapse:active` (context collapse applied at least one collapse in this
//!   run): collapse commits at ~90% of the effective window and blocks at ~95%, and this
//!   threshold (~93%) sits between the two, so it would race collapse and throw away the granular
//!   context collapse keeps;
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
//! The host flag `force:autocompact` (its recovery chain after a prompt-too-long error) fires
//! below the threshold, while collapse is active and before `min_turns_between`.
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
//!    from `Host::summarize` with purpose `autocompact` and at most
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
//! input (`Host::count_tokens` over every block), the input is kept and the report says why.
//!
//! # Circuit breaker
//!
//! A failed attempt (the summarizer returns an error or an empty summary, or the result would not
//! be smaller) leaves the input unchanged with a note (the pipeline does not fail) and adds one to
//! `consecutive_failures` in the state. After `max_consecutive_failures` (3) in a row, the stage
//! stops calling the summarizer for the session and says so on every run; a successful
//! compaction, or a change of the stage config (its hash is kept in the state), resets it.

pub mod restore;
pub mod state;

use condense_abi::{Host, Stage, StageEvent, StageOutput, StageReport, SummaryRequest};
use condense_model::{Block, Content, Conversation, Message, Role};
use condense_tokens::BudgetConfig;
use condense_turns::measure::{cut_to_tokens, fraction_of, messages_tokens, percent, thousands};
use regex::Regex;
use restore::{FileSeen, Pin, PinnedItem, DEFAULT_READ_TOOLS};
use serde::{Deserialize, Serialize};
use state::{LastCompaction, State};

/// Raised when the stage compacts.
pub const FIRED_FLAG: &str = "autocompact:fired";
/// The host's recovery chain: fire below the threshold, while collapse is active, before
/// `min_turns_between`.
pub const FORCE_FLAG: &str = "force:autocompact";
/// The host's translation of `CONDENSE_DISABLE_AUTOCOMPACT=1`.
pub const DISABLE_FLAG: &str = "disable:autocompact";
/// Raised by context-collapse when it applied a collapse.
pub const COLLAPSE_ACTIVE_FLAG: &str = "context-collapse:active";
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

/// One `pin` rule: exactly one of `tool` and `regex`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PinRule {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub regex: Option<String>,
}

/// The stage's `[stage.config]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    pub enabled: bool,
    pub buffer_tokens: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub threshold_pct: Option<f64>,
    pub min_turns_between: usize,
    pub max_consecutive_failures: usize,
    pub summary_max_tokens: usize,
    pub restore_files: usize,
    pub restore_file_max_tokens: usize,
    pub read_tools: Vec<String>,
    pub pin: Vec<PinRule>,
    pub pin_budget_tokens: usize,
    pub pin_max_tokens: usize,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            enabled: true,
            buffer_tokens: BudgetConfig::DEFAULT_AUTOCOMPACT_BUFFER,
            threshold_pct: None,
            min_turns_between: 2,
            max_consecutive_failures: 3,
            summary_max_tokens: BudgetConfig::DEFAULT_SUMMARY_OUTPUT_CAP,
            restore_files: 5,
            restore_file_max_tokens: 5_000,
            read_tools: DEFAULT_READ_TOOLS.iter().map(|s| s.to_string()).collect(),
            pin: Vec::new(),
            pin_budget_tokens: 25_000,
            pin_max_tokens: 5_000,
        }
    }
}

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
    const CONFIG_DOCS: &'static [(&'static str, &'static str)] = &[
        (
            "enabled",
            "false disables the stage (so does the host flag disable:autocompact, from \
             CONDENSE_DISABLE_AUTOCOMPACT=1).",
        ),
        (
            "buffer_tokens",
            "The threshold is the effective window (window - min(max output, 20,000)) minus \
             this: 167,000 for a 200k window.",
        ),
        (
            "threshold_pct",
            "Optional: the threshold as this fraction of the effective window instead, lower or \
             higher than the default, in 0.5..=0.98.",
        ),
        (
            "min_turns_between",
            "API turns that must pass between two compactions (force:autocompact overrides). \
             An API turn is one API round: an assistant response with the tool results that \
             answer it, opened by the user prompt it answers when there is one (every model \
             call of an autonomous stretch is one); condense messages do not count.",
        ),
        (
            "max_consecutive_failures",
            "Circuit breaker: after this many failed attempts in a row, stop trying for the \
             session (a success or a config change resets it). >= 1.",
        ),
        (
            "summary_max_tokens",
            "The most the summary may take, never more than 1/4 of the effective window.",
        ),
        (
            "restore_files",
            "How many of the most recently read files are given back after compacting (0: none).",
        ),
        (
            "restore_file_max_tokens",
            "Each restored file is cut to this many tokens.",
        ),
        (
            "read_tools",
            "Tool names whose calls with a file path read a file (editor view commands, \
             `cat <path>` shell calls and writes count too).",
        ),
        (
            "pin",
            "Content given back after compacting: [{ tool = \"TodoWrite\" }] (the latest call \
             of the tool) or [{ regex = \"IMPORTANT:.*\" }] (matches in user text and tool \
             results).",
        ),
        ("pin_budget_tokens", "Tokens for all pinned items together."),
        (
            "pin_max_tokens",
            "Each pinned item is cut to this many tokens.",
        ),
    ];

    fn new(config: Config) -> Result<Self, String> {
        if let Some(pct) = config.threshold_pct {
            if !(pct.is_finite() && THRESHOLD_PCT_RANGE.contains(&pct)) {
                return Err(format!(
                    "threshold_pct must be a fraction of the effective window in 0.5..=0.98, got {pct}"
                ));
            }
        }
        for (name, value) in [
            ("max_consecutive_failures", config.max_consecutive_failures),
            ("summary_max_tokens", config.summary_max_tokens),
            ("restore_file_max_tokens", config.restore_file_max_tokens),
            ("pin_max_tokens", config.pin_max_tokens),
        ] {
            if value == 0 {
                return Err(format!("{name} must be >= 1, got 0"));
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
                    ))
                }
            }
        }
        let canonical = serde_json::to_string(&config).map_err(|e| e.to_string())?;
        let config_hash = format!("{:016x}", xxhash_rust::xxh3::xxh3_64(canonical.as_bytes()));
        Ok(Autocompact {
            config,
            pins,
            config_hash,
        })
    }

    fn apply(&self, conversation: Conversation, host: &dyn Host) -> Result<StageOutput, String> {
        let (mut state, loaded) = State::load(host)?;
        let trigger = Trigger::compute(&self.config, host);
        let mut report = StageReport::default();
        report.note(trigger.note());
        if state.config_hash != self.config_hash {
            if state.consecutive_failures > 0 {
                report.note(format!(
                    "the stage config changed: circuit breaker reset (was {} consecutive failure{})",
                    state.consecutive_failures,
                    plural(state.consecutive_failures)
                ));
            }
            state.consecutive_failures = 0;
            state.last_failure = None;
            state.config_hash = self.config_hash.clone();
        }
        let mut output = None;
        match self.decide(&trigger, &state, &conversation, host) {
            Err(why) => report.note(why),
            Ok(forced_note) => {
                if let Some(n) = forced_note {
                    report.note(n);
                }
                match self.compact(&conversation, &state, host, &trigger, &mut report) {
                    Ok(Some((messages, last))) => {
                        state.compactions += 1;
                        state.consecutive_failures = 0;
                        state.last_failure = None;
                        state.last = Some(last);
                        output = Some(messages);
                    }
                    Ok(None) => {}
                    Err(failure) => {
                        state.consecutive_failures += 1;
                        let max = self.config.max_consecutive_failures;
                        report.note(format!(
                            "compaction failed, conversation left unchanged: {failure} \
                             ({} consecutive failure{} of max_consecutive_failures = {max})",
                            state.consecutive_failures,
                            plural(state.consecutive_failures)
                        ));
                        if state.consecutive_failures >= max {
                            report.note(
                                "circuit breaker open: no more attempts in this session (a \
                                 config change resets it)",
                            );
                        }
                        state.last_failure = Some(failure);
                    }
                }
            }
        }
        let trivial = loaded.is_none() && state.compactions == 0 && state.consecutive_failures == 0;
        if !trivial {
            state.save(host, loaded.as_deref())?;
        }
        let conversation = match output {
            Some(messages) => {
                report.flags.push(FIRED_FLAG.to_string());
                Conversation {
                    messages,
                    ..conversation
                }
            }
            None => conversation,
        };
        Ok(StageOutput {
            conversation,
            report,
        })
    }
}

/// The threshold arithmetic of one run.
#[derive(Debug, Clone)]
pub struct Trigger {
    pub window: usize,
    pub reserved: usize,
    pub effective: usize,
    pub buffer: usize,
    pub pct: Option<f64>,
    pub threshold: usize,
    /// `Host::conversation_tokens()`: what the check compares.
    pub tokens: usize,
    /// `Host::tokens_freed_before()`.
    pub freed_before: usize,
}

impl Trigger {
    /// The threshold for the host's window and the stage's config.
    pub fn compute(config: &Config, host: &dyn Host) -> Trigger {
        let budget = BudgetConfig {
            context_window: host.context_window(),
            max_output_tokens: host.max_output_tokens(),
            autocompact_buffer: config.buffer_tokens,
            ..BudgetConfig::default()
        };
        let effective = budget.effective_window();
        let threshold = match config.threshold_pct {
            Some(pct) => fraction_of(pct, effective),
            None => budget.autocompact_threshold(),
        };
        Trigger {
            window: budget.context_window,
            reserved: budget.reserved_for_summary(),
            effective,
            buffer: config.buffer_tokens,
            pct: config.threshold_pct,
            threshold,
            tokens: host.conversation_tokens(),
            freed_before: host.tokens_freed_before(),
        }
    }

    /// Whether the default threshold has no room (the effective window is not larger than the
    /// buffer): it would be 0 and fire on anything.
    pub fn no_room(&self) -> bool {
        self.pct.is_none() && self.effective <= self.buffer
    }

    /// Whether the conversation reached the threshold.
    pub fn reached(&self) -> bool {
        self.tokens >= self.threshold
    }

    /// "167,000 threshold = 180,000 effective - 13,000 buffer; 171,230 tokens (...)".
    pub fn note(&self) -> String {
        let threshold = match self.pct {
            Some(pct) => format!(
                "{} threshold = {} (threshold_pct) of {} effective",
                thousands(self.threshold),
                percent(pct),
                thousands(self.effective)
            ),
            None => format!(
                "{} threshold = {} effective - {} buffer",
                thousands(self.threshold),
                thousands(self.effective),
                thousands(self.buffer)
            ),
        };
        format!(
            "{threshold}; {} tokens (effective = {} window - {} reserved for output; {} = {} \
             before this pipeline - {} freed by earlier stages)",
            thousands(self.tokens),
            thousands(self.window),
            thousands(self.reserved),
            thousands(self.tokens),
            thousands(self.tokens + self.freed_before),
            thousands(self.freed_before)
        )
    }
}

/// Whether `message` is one a condense stage wrote (a summary, a restored file, a pinned item,
/// a collapse summary): a user message of one text starting with `[condense: `. Each is an API
/// turn of its own.
pub use condense_turns::is_condense_message;

/// Whether `message` is one this stage wrote (summary, restored file, pinned item).
pub fn is_own_message(message: &Message) -> bool {
    message.id.starts_with(ID_PREFIX)
        && is_condense_message(message)
        && [SUMMARY_MARKER, FILE_MARKER, PIN_MARKER]
            .iter()
            .any(|m| message.content.text().starts_with(m))
}

/// `(n, count, summary)` of a summary message of this stage (`n` from its id when it parses).
pub fn parse_summary(message: &Message) -> Option<(usize, usize, String)> {
    if !is_own_message(message) {
        return None;
    }
    let text = message.content.text();
    let rest = text.strip_prefix(SUMMARY_MARKER)?;
    let (header, body) = rest.split_once('\n').unwrap_or((rest, ""));
    let count = header
        .strip_suffix(" messages]")
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let n = message
        .id
        .strip_prefix(ID_PREFIX)
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    Some((n, count, body.to_string()))
}

/// API turns (API rounds) that are real turns, not a condense message's.
fn real_turns(messages: &[Message]) -> Vec<condense_turns::Turn> {
    condense_turns::group(messages)
        .turns
        .into_iter()
        .filter(|t| !is_condense_message(&messages[t.start]))
        .collect()
}

impl Autocompact {
    /// `Ok(note when forced past a guard)` to compact, `Err(why not)` otherwise.
    fn decide(
        &self,
        t: &Trigger,
        state: &State,
        conversation: &Conversation,
        host: &dyn Host,
    ) -> Result<Option<String>, String> {
        if !self.config.enabled {
            return Err("disabled by config (enabled = false)".into());
        }
        if host.has_flag(DISABLE_FLAG) {
            return Err(format!(
                "disabled by the host (flag {DISABLE_FLAG}, from CONDENSE_DISABLE_AUTOCOMPACT=1)"
            ));
        }
        let forced = host.has_flag(FORCE_FLAG);
        let mut overridden = Vec::new();
        if t.no_room() {
            if !forced {
                return Err(format!(
                    "no threshold: the effective window ({}) is not larger than buffer_tokens \
                     ({}); set threshold_pct or a larger window",
                    thousands(t.effective),
                    thousands(t.buffer)
                ));
            }
            overridden.push("no threshold".to_string());
        } else if !t.reached() {
            if !forced {
                return Err(format!(
                    "below the threshold by {} tokens: not compacting",
                    thousands(t.threshold - t.tokens)
                ));
            }
            overridden.push("below the threshold".to_string());
        }
        if host.has_flag(COLLAPSE_ACTIVE_FLAG) {
            if !forced {
                return Err(format!(
                    "suppressed: context-collapse is active (flag {COLLAPSE_ACTIVE_FLAG}); \
                     compacting now would race it and throw away the granular context its \
                     collapses keep ({FORCE_FLAG} overrides)"
                ));
            }
            overridden.push("context-collapse active".to_string());
        }
        let max = self.config.max_consecutive_failures;
        if state.consecutive_failures >= max {
            return Err(format!(
                "circuit breaker open: {} consecutive failures (max_consecutive_failures = {max}; \
                 last: {}); not trying again in this session (a config change resets it){}",
                state.consecutive_failures,
                state.last_failure.as_deref().unwrap_or("unknown"),
                if forced {
                    " (force:autocompact does not override it)"
                } else {
                    ""
                }
            ));
        }
        if let Some(last) = &state.last {
            let messages = &conversation.messages;
            let turns = real_turns(messages);
            let since = match messages.iter().position(|m| m.id == last.summary_id) {
                Some(p) => Some(turns.iter().filter(|t| t.start > p).count()),
                None => turns.len().checked_sub(last.turns_total),
            };
            if let Some(since) = since.filter(|&s| s < self.config.min_turns_between) {
                if !forced {
                    return Err(format!(
                        "compacted {since} turn{} ago ({}); min_turns_between = {}: not compacting \
                         again yet",
                        plural(since),
                        last.summary_id,
                        self.config.min_turns_between
                    ));
                }
                overridden.push(format!("min_turns_between ({since} since the last)"));
            }
        }
        Ok((!overridden.is_empty())
            .then(|| format!("{FORCE_FLAG}: compacting despite {}", overridden.join(", "))))
    }

    /// Builds the compacted conversation: `Ok(None)` when there is nothing to summarize,
    /// `Err(failure)` on a failed attempt.
    fn compact(
        &self,
        conversation: &Conversation,
        state: &State,
        host: &dyn Host,
        t: &Trigger,
        report: &mut StageReport,
    ) -> Result<Option<(Vec<Message>, LastCompaction)>, String> {
        let messages = &conversation.messages;
        let system: Vec<Message> = messages
            .iter()
            .filter(|m| m.role == Role::System)
            .cloned()
            .collect();
        // The summary of an earlier compaction, when the conversation starts with one.
        let first_chat = messages
            .iter()
            .position(|m| m.is_chat() && m.role != Role::System);
        let previous = first_chat.and_then(|i| parse_summary(&messages[i]).map(|p| (i, p)));
        // The last user message, when nothing answered it.
        let kept = messages
            .iter()
            .rposition(|m| condense_turns::is_user_prompt(m) && !is_condense_message(m))
            .filter(|&i| !messages[i + 1..].iter().any(|m| m.role == Role::Assistant));
        let to_summarize: Vec<Message> = messages
            .iter()
            .enumerate()
            .filter(|(i, m)| {
                m.is_chat() && m.role != Role::System && Some(*i) != kept && !is_own_message(m)
            })
            .map(|(_, m)| m.clone())
            .collect();
        if to_summarize.is_empty() {
            report.note("nothing to summarize: not compacting");
            return Ok(None);
        }
        let max_tokens = self.config.summary_max_tokens.min(t.effective / 4).max(1);
        let request = SummaryRequest {
            messages: to_summarize.clone(),
            previous_summary: previous.as_ref().map(|(_, (_, _, body))| body.clone()),
            max_tokens,
            purpose: PURPOSE.to_string(),
        };
        let summary = host
            .summarize(request)
            .map_err(|e| format!("the summarizer failed: {e}"))?;
        if summary.trim().is_empty() {
            return Err("the summarizer returned an empty summary".into());
        }
        let cut = cut_to_tokens(host, summary.trim(), max_tokens);
        if cut.cut {
            report.note(format!(
                "summary cut from {} to {} tokens (min(summary_max_tokens, effective / 4))",
                thousands(cut.original_tokens),
                thousands(max_tokens)
            ));
        }
        let n = state
            .compactions
            .max(previous.as_ref().map_or(0, |(_, (n, _, _))| *n))
            + 1;
        let timestamp = to_summarize.last().and_then(|m| m.timestamp.clone());
        let count = previous.as_ref().map_or(0, |(_, (_, c, _))| *c) + to_summarize.len();
        // For Claude Code, the session's line fields, from the latest user message summarized.
        let format = host.source_format();
        let template = to_summarize
            .iter()
            .rev()
            .find(|m| condense_turns::is_user_prompt(m))
            .or(to_summarize.last());
        let new_message = |id: &str, text: String| {
            let mut m = Message {
                id: id.to_string(),
                role: Role::User,
                timestamp: timestamp.clone(),
                content: Content::string(text),
                extra: Default::default(),
                envelope: Default::default(),
            };
            if let Some(t) = template {
                m.envelope = condense_turns::envelope_template(&format, t, &m);
            }
            m
        };
        let summary_id = format!("{ID_PREFIX}{n}");
        let summary_msg = new_message(
            &summary_id,
            format!("{SUMMARY_MARKER}{count} messages]\n{}", cut.text),
        );

        // Restoration, from everything but the kept message.
        let source = || {
            messages
                .iter()
                .enumerate()
                .filter(move |(i, _)| Some(*i) != kept)
        };
        let mut seen = restore::files_seen(source(), &self.config.read_tools);
        seen.truncate(self.config.restore_files);
        seen.reverse(); // oldest first, the most recent last
        let mut files: Vec<(Message, String)> = seen
            .iter()
            .enumerate()
            .map(|(k, f)| self.file_message(host, f, n, k + 1, &new_message))
            .collect();
        let mut pins =
            self.pin_messages(host, restore::pinned(source(), &self.pins), n, &new_message);

        let kept_msg = kept.map(|i| without_tool_results(&messages[i]));
        let tokens_in = messages_tokens(host, messages);
        let build = |files: &[(Message, String)], pins: &[(Message, String)]| {
            let mut out = system.clone();
            out.push(summary_msg.clone());
            out.extend(files.iter().map(|(m, _)| m.clone()));
            out.extend(pins.iter().map(|(m, _)| m.clone()));
            out.extend(kept_msg.clone());
            out
        };
        let mut out = build(&files, &pins);
        let mut tokens_out = messages_tokens(host, &out);
        // Land below the threshold, or the next run compacts again: drop restored items.
        let mut dropped = Vec::new();
        while !t.no_room()
            && t.tokens.saturating_sub(tokens_in) + tokens_out >= t.threshold
            && !(files.is_empty() && pins.is_empty())
        {
            let (m, _) = if files.is_empty() {
                pins.remove(0)
            } else {
                files.remove(0)
            };
            dropped.push(m.id);
            out = build(&files, &pins);
            tokens_out = messages_tokens(host, &out);
        }
        if tokens_out >= tokens_in {
            return Err(format!(
                "the result ({} tokens) would not be smaller than the input ({} tokens)",
                thousands(tokens_out),
                thousands(tokens_in)
            ));
        }
        if !dropped.is_empty() {
            report.note(format!(
                "dropped {} restored item{} so the result lands below the threshold: {}",
                dropped.len(),
                plural(dropped.len()),
                dropped.join(", ")
            ));
        }

        let removed: Vec<&Message> = messages
            .iter()
            .enumerate()
            .filter(|(i, m)| m.role != Role::System && Some(*i) != kept)
            .map(|(_, m)| m)
            .collect();
        report.blocks_changed = removed.iter().map(|m| m.content.blocks.len()).sum();
        let removed_tokens = messages_tokens(host, removed.iter().copied());
        let summary_tokens = messages_tokens(host, [&summary_msg]);
        report.events.push(StageEvent {
            kind: "compacted".into(),
            message_id: summary_id.clone(),
            detail: format!(
                "{} messages ({} tokens){} → summary of {} tokens",
                removed.len(),
                thousands(removed_tokens),
                if previous.is_some() {
                    ", merged into the previous summary"
                } else {
                    ""
                },
                thousands(summary_tokens)
            ),
            tokens: removed_tokens.saturating_sub(summary_tokens),
        });
        for (kind, items) in [("restored-file", &files), ("pinned", &pins)] {
            for (m, detail) in items {
                report.events.push(StageEvent {
                    kind: kind.into(),
                    message_id: m.id.clone(),
                    detail: detail.clone(),
                    tokens: 0,
                });
            }
        }
        if let Some(k) = &kept_msg {
            report.events.push(StageEvent {
                kind: "kept".into(),
                message_id: k.id.clone(),
                detail: "the last user message, unanswered: kept with its id".into(),
                tokens: 0,
            });
        }
        report.tokens_freed = Some(tokens_in - tokens_out);
        report.note(format!(
            "compacted {} messages into {summary_id} ({} → {} tokens of messages; {} file{} and \
             {} pinned item{} restored{})",
            removed.len(),
            thousands(tokens_in),
            thousands(tokens_out),
            files.len(),
            plural(files.len()),
            pins.len(),
            plural(pins.len()),
            if kept_msg.is_some() {
                ", the unanswered last user message kept"
            } else {
                ""
            }
        ));
        let last = LastCompaction {
            summary_id,
            turns_total: real_turns(messages).len(),
            at_ms: host.now_ms(),
            tokens_before: tokens_in,
            tokens_after: tokens_out,
        };
        Ok(Some((out, last)))
    }

    /// A restored file's message and its event detail.
    fn file_message(
        &self,
        host: &dyn Host,
        f: &FileSeen,
        n: usize,
        k: usize,
        new_message: &dyn Fn(&str, String) -> Message,
    ) -> (Message, String) {
        let cut = cut_to_tokens(host, &f.content, self.config.restore_file_max_tokens);
        let mut provenance = format!("{} in message {}", f.how, f.message_id);
        if let Some(e) = &f.edited_in {
            provenance.push_str(&format!("; edited later in message {e}: may be stale"));
        }
        if cut.cut {
            provenance.push_str(&format!(
                "; cut to {} of {} tokens",
                thousands(self.config.restore_file_max_tokens),
                thousands(cut.original_tokens)
            ));
        }
        let text = format!("{FILE_MARKER}{}]\n({provenance})\n{}", f.path, cut.text);
        let id = format!("{ID_PREFIX}{n}-file-{k}");
        let detail = format!(
            "{} ({provenance}), {} tokens",
            f.path,
            thousands(host.count_tokens(&cut.text))
        );
        (new_message(&id, text), detail)
    }

    /// The pinned items' messages within the budgets, oldest first, with their event details.
    fn pin_messages(
        &self,
        host: &dyn Host,
        items: Vec<PinnedItem>,
        n: usize,
        new_message: &dyn Fn(&str, String) -> Message,
    ) -> Vec<(Message, String)> {
        let mut left = self.config.pin_budget_tokens;
        let mut out = Vec::new();
        for item in items {
            // Each item cut to pin_max_tokens, then taken whole if it fits what is left of the
            // budget (newest first; an older, smaller item may still fit after a skipped one).
            let cut = cut_to_tokens(host, &item.content, self.config.pin_max_tokens);
            let used = host.count_tokens(&cut.text);
            if cut.text.trim().is_empty() || used > left {
                continue;
            }
            left -= used;
            let mut provenance = format!("from message {}", item.message_id);
            if cut.cut {
                provenance.push_str(&format!(
                    "; cut to {} of {} tokens",
                    thousands(self.config.pin_max_tokens),
                    thousands(cut.original_tokens)
                ));
            }
            let text = format!("{PIN_MARKER}{}]\n({provenance})\n{}", item.key, cut.text);
            let detail = format!("{} ({provenance}), {} tokens", item.key, thousands(used));
            out.push((text, detail));
        }
        out.reverse();
        out.into_iter()
            .enumerate()
            .map(|(k, (text, detail))| {
                (
                    new_message(&format!("{ID_PREFIX}{n}-pin-{}", k + 1), text),
                    detail,
                )
            })
            .collect()
    }
}

/// The message with its tool_result blocks turned into text (their calls are summarized away).
fn without_tool_results(message: &Message) -> Message {
    if message.tool_results().next().is_none() {
        return message.clone();
    }
    let mut m = message.clone();
    m.content.blocks = m
        .content
        .blocks
        .into_iter()
        .map(|b| match b {
            Block::ToolResult(r) => Block::text(format!(
                "[tool result for {}]\n{}",
                r.tool_use_id,
                r.content.text()
            )),
            other => other,
        })
        .collect();
    m
}

fn plural(n: usize) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

condense_abi::export_stage!(Autocompact);
