//! `context-collapse`: level 4 of the pipeline, a projection that folds old API turns into
//! summaries without rewriting the conversation.
//!
//! When the conversation approaches the window, this stage **commits** collapses: spans of old
//! API turns, each replaced in the stage's output by one summary message the host's summarizer
//! writes. Committed collapses live in the stage state, and every run **re-applies** all of them
//! whose span is still in the input, so the same collapses always give the same view (stable
//! across runs, friendly to prompt caches). The input is never rewritten otherwise, and the host
//! archives the replaced messages, so `condense expand` restores every original message. It is a
//! database view over the message list, not an edit of it.
//!
//! ```toml
//! [[stage]]
//! name = "collapse"
//! plugin = "context-collapse"
//! [stage.config]
//! commit_at = 0.90           # commit new collapses from 90% of the effective window
//! block_at = 0.95            # from 95%, collapsing is mandatory (reported when not enough)
//! keep_recent_turns = 4      # the most recent API turns (model calls) are never collapsed (>= 1)
//! turns_per_span = 4         # the most API turns one commit adds (>= 1) ...
//! backlog_span_tokens = 16000 # ... except over a backlog: up to this many tokens (0: never)
//! backlog_commits = 16       # ... or a 16th of the backlog, up to half the window (0: never)
//! summary_ratio = 0.15       # a summary's budget: 15% of what it stands for ...
//! summary_min_tokens = 1000  # ... at least this ...
//! summary_window_share = 0.2 # ... at most 20% of the effective window ...
//! summary_max_tokens = 20000 # ... and at most this
//! ```
//!
//! # API turns
//!
//! The unit is the **API turn**, one API round (see `condense_turns`): one assistant response
//! (consecutive assistant messages, as Claude Code writes one response line by line) with the
//! tool-result messages that answer its calls, opened by the user prompt it answers when there
//! is one. An autonomous stretch of 150 sequential tool calls after one user prompt is about 150
//! turns, not one (parallel calls made in one response are one turn), so collapse can fold the
//! old part of a long stretch and keep its recent calls, which is what agent sessions need: they
//! are dominated by such stretches. A call whose result comes back much later (a `Task` subagent
//! whose own lines are written in between) is one turn with everything in between, since a turn
//! never separates a call from its result.
//!
//! The defaults count these turns. `keep_recent_turns = 4` keeps the last four model calls and
//! everything they got back verbatim: the agent's working set (the file just read, the command
//! just run, the edit just made and its check) plus the prompt, when it is that recent. Fewer
//! would summarize the result the agent is acting on; more would, in a tight window, hold back
//! exactly the tool output that fills it. `turns_per_span = 4` bounds a span to a small step of
//! work (a few calls and their results), so each merge into the running summary (below) brings
//! it a coherent step; a span is cut shorter when fewer turns already bring the projection under
//! the target. A session that grows a few turns per run commits a span now and then.
//!
//! A conversation that jumps far past the target at once (a first run over a long session) is
//! a **backlog**: committing it four turns at a time would make one summarizer call, and one
//! merge into the running summary, per four turns (169 of them for a 1M-token session, each
//! re-rendering a summary that grows with what it stands for). While more than
//! `backlog_span_tokens` (16,000) tokens are still to be freed down to the landing point
//! (below), a span keeps growing past `turns_per_span`, up to that many tokens of turns; what
//! is left is committed as it is without a backlog, so the last commits are right-sized. A
//! backlog over `backlog_commits` (16) times that grows its spans to a 16th of itself (set
//! when the run starts, at most half the effective window): 19, 31 and 49 commits for the
//! first run over sessions of 1M, 2M and 4M tokens where spans of 16,000 took 57, 124 and 258,
//! so the merges into the running summary no longer grow faster than the input. The running summary's record
//! (requests, files, errors) is that of the same turns; only its prose is merged less often.
//!
//! # When it commits
//!
//! The effective window is the host's `context_window` minus `min(max_output_tokens, 20,000)`
//! (the `condense_budget::BudgetConfig` arithmetic, the same as autocompact's). The stage takes
//! `cx.conversation_tokens` **as it is**: it is already the count of the conversation handed
//! to this stage, after the earlier stages freed what they freed, so subtracting
//! `cx.tokens_freed_before` would count those savings twice. From it, it subtracts what the
//! re-applied collapses save (the **projected** count).
//!
//! The **target** is `commit_at × effective`, or the window less the host's output reserve
//! (`context_window - output_reserve`) when that is lower: committing down to a count at which
//! the request still would not fit helps nobody. When the projected count reaches the target,
//! the stage commits new spans, oldest uncollapsed turns first, until the projection is below
//! the landing point (below) or only the `keep_recent_turns` most recent turns are left.
//!
//! Commits are **right-sized**: a span grows turn by turn (at most `turns_per_span`, or over a
//! backlog `backlog_span_tokens`) only until its commit is expected to land the projection
//! below the **landing point**, a twentieth of the effective window below the target, with its
//! summary taking its full budget, not wherever the last span happens to end. A run that
//! commits goes on, span after span, until the projection is below the landing point (or only
//! the `keep_recent_turns` most recent turns are left): that is room for the next turns before
//! the next commit. Stopping at the first span below the target would commit again a turn or
//! two later, and every commit is a new prompt prefix from the running summary on (a prompt
//! cache miss for the whole request): over 40 turns of the bench's sessions past 200k tokens
//! (a few thousand tokens a turn), 3 or 4 commits where stopping at the target made 11 to 13.
//! A summary's budget scales with what it stands for and with the window
//! ([`Config::summary_budget`]: `summary_ratio` of the tokens it replaces, between
//! `summary_min_tokens` and `min(summary_window_share × effective, summary_max_tokens)`); when a
//! single turn is so large that its commit frees far more than needed (a `Task` call with its
//! sub-agent's lines), the summary may use the room left down to the landing point, up to that
//! cap. The report states the target and what was reached.
//!
//! The host's force (`cx.flags.forced`, called `force:context-collapse` in notes: the host's
//! recovery chain after a prompt-too-long error, or `--fit` when the request still does not fit)
//! lowers the target to a tenth of the effective window below the projection (or below the
//! target, if lower). If the projected count is still at or above `block_at × effective` when
//! nothing more may be collapsed, the report says so plainly; the stage does not fail.
//!
//! What a span saves is estimated as the tokens of its messages (`Context::count_tokens` of every
//! block, see `condense_turns::measure`) minus the tokens of its summary message. A span whose
//! summary would not be smaller is not committed: this stage never grows the conversation.
//!
//! # What a summary keeps
//!
//! The summaries come from the host (`Context::summarize`), which writes them from the original
//! messages (not from what earlier levels cleared or truncated) and always starts them with the
//! user's requests (the last one verbatim), every file created, modified or deleted, and the
//! errors met, carried forward from summary to summary (see `condense_summarize::retaining`).
//!
//! # Spans
//!
//! Spans are whole API turns (see [`turns`]): a span never separates a `tool_use` from its
//! `tool_result`, never holds a system message, and never touches the leading content before the
//! first user prompt. A span is `turns_per_span` consecutive turns (more over a backlog), or
//! fewer at the end of what may be collapsed. A span may end in the middle of an autonomous stretch: the summary then
//! stands for the calls made so far, and the turn after it is the next model call.
//!
//! A span that starts right after an existing summary is **merged** into it: the summarizer gets
//! the older summary as `previous_summary` and the new span's messages (anchored iterative
//! summarization) and writes one combined summary for the combined span, which keeps the older
//! summary's id. Since spans are committed oldest first, the collapsed history is in practice one
//! running summary at the head of the conversation, extended span by span, whose size stays
//! within its cap (`summary_window_share`, `summary_max_tokens`) however long the session gets.
//!
//! # Pointers into a folded span
//!
//! snip keeps the first copy of a repeated tool result and points the later ones back at it
//! (`condense_model::duplicate`). When a span folds that first copy into a summary, a pointer
//! left after the span would name a result the agent cannot see. The projection rewrites every
//! such pointer to say so, about as long as before: `[Duplicate file content, see tool_use_id
//! toolu_01: folded into a summary, not shown]`, and the report notes how many. The rule reads
//! the projected messages only, so a re-applied projection writes the same markers; the host
//! archives the pointers they replace, as any change.
//!
//! # The summary message
//!
//! A [`Role::User`] text message with id `collapse-<first id>`:
//!
//! ```text
//! [condense: summary of 23 earlier messages (ids 4f1c…9a2e)]
//! <the summary>
//! ```
//!
//! `23` counts every message the summary replaces (event lines included: they travel with their
//! turn). It takes the timestamp of the first message it replaces and, in a Claude Code session,
//! that message's wrapper line without its line-specific fields (`sessionId`, `cwd`, ... stay), so
//! the host still finds the session and the message reads back exactly as written. Event lines are not given to the summarizer (the model never saw them). System messages
//! inside a span's range stay, right after its summary. The stage recognises its own summary
//! messages in its input (its output read back), so a rerun on its own output changes nothing.
//!
//! # Report
//!
//! Notes: the threshold arithmetic, the target and the projection reached, and how many
//! collapses were re-applied (with the window they are kept for: stage state is kept per window
//! and pipeline settings, so a run under another window never inherits them, and `--fresh`
//! drops them). Events `reapplied` (a collapse committed before this stage ran) and `collapsed`
//! (committed or merged in this run), each with the span's first message id, its size, its
//! summary's size and budget, and the tokens it saves. `tokens_freed` is the sum. Whenever at
//! least one collapse is applied, the report raises [`Signal::CollapseActive`] (shown as
//! `context-collapse:active`): autocompact stands down then, since it would otherwise fire
//! between collapse's commit point and its blocking point and throw away the granular context
//! collapse keeps.
//!
//! [`Role::User`]: condense_model::Role::User
//! [`Signal::CollapseActive`]: condense_abi::Signal::CollapseActive

mod config;
mod run;
pub mod state;
mod summary;

/// API-turn grouping (the `condense-turns` library, shared with autocompact).
pub use condense_turns as turns;

pub use config::Config;
pub use summary::{is_summary_message, parse_header, summary_message};

use condense_abi::{Context, Input, MessageView, Stage, StageError, StageOutput};
use condense_model::{Conversation, ReadMessage};
use run::Run;
use state::State;

/// The start of a summary message's text.
pub const SUMMARY_MARKER: &str = "[condense: summary of ";
/// The prefix of a summary message's id.
pub const ID_PREFIX: &str = "collapse-";
/// The `purpose` of this stage's summary requests.
pub const PURPOSE: &str = "context-collapse";

/// The stage.
#[derive(Debug)]
pub struct ContextCollapse {
    config: Config,
}

impl ContextCollapse {
    pub fn config(&self) -> &Config {
        &self.config
    }
}

impl Stage for ContextCollapse {
    type Config = Config;
    const NAME: &'static str = "context-collapse";
    const DESCRIPTION: &'static str = "Level 4: a projection that replaces committed spans of old \
        API turns by one summary each, re-applied identically on every run; the input is never \
        rewritten otherwise.";

    fn new(config: Config) -> Result<Self, StageError> {
        let fraction_ok = |v: f64| v.is_finite() && v > 0.0 && v <= 1.0;
        if !fraction_ok(config.commit_at) {
            return Err(format!(
                "commit_at must be a fraction of the effective window in (0, 1], got {}",
                config.commit_at
            )
            .into());
        }
        if !fraction_ok(config.block_at) {
            return Err(format!(
                "block_at must be a fraction of the effective window in (0, 1], got {}",
                config.block_at
            )
            .into());
        }
        if config.commit_at > config.block_at {
            return Err(format!(
                "commit_at ({}) must not be above block_at ({})",
                config.commit_at, config.block_at
            )
            .into());
        }
        for (name, value) in [
            ("summary_ratio", config.summary_ratio),
            ("summary_window_share", config.summary_window_share),
        ] {
            if !fraction_ok(value) {
                return Err(format!("{name} must be a fraction in (0, 1], got {value}").into());
            }
        }
        for (name, value) in [
            ("keep_recent_turns", config.keep_recent_turns),
            ("turns_per_span", config.turns_per_span),
            ("summary_min_tokens", config.summary_min_tokens),
            ("summary_max_tokens", config.summary_max_tokens),
        ] {
            if value == 0 {
                return Err(format!("{name} must be >= 1, got 0").into());
            }
        }
        Ok(ContextCollapse { config })
    }

    fn apply(&self, input: Input<'_>, cx: &Context<'_>) -> Result<StageOutput, StageError> {
        // The run reads the host's conversation in place: a projection copies only the
        // messages it keeps, a summary only the span it stands for, and a run that commits
        // nothing copies nothing.
        let view = input.view()?;
        let messages: Vec<MessageView<'_>> = view.messages().collect();
        let mut state = cx.state::<State>()?;
        // The run consumes the stored collapses and hands back the ones it applied.
        let stored = std::mem::take(&mut *state);
        let mut run = Run::new(&self.config, &messages, stored, *cx);
        run.plan();
        run.commit();
        let finished = run.finish()?;
        state.set(finished.state);
        state.save()?;
        let report = finished.report;
        // A projection can still come out as the input itself (its collapses' summary
        // messages were already in place): then it is handed back as unchanged too.
        let same = |out: &[condense_model::Message]| {
            out.len() == messages.len() && messages.iter().zip(out).all(|(v, m)| v.is(m))
        };
        Ok(match finished.messages {
            Some(out) if !same(&out) => StageOutput::changed(
                Conversation {
                    messages: out,
                    ..view.header()
                },
                report,
            ),
            _ => StageOutput::unchanged(report),
        })
    }
}

condense_abi::export_stage!(ContextCollapse);
