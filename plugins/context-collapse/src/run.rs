//! One run of the stage: re-apply the committed collapses ([`reapply`]), commit new spans
//! ([`commit`]), then build the projection, the report and the state ([`finish`], [`notes`]).

mod commit;
mod finish;
mod notes;
mod reapply;

use crate::state::{Collapse, State};
use crate::summary::summary_message;
use crate::Config;
use condense_abi::{Context, StageReport};
use condense_budget::{fraction_of, BudgetConfig};
use condense_model::{ReadMessage, Role};
use condense_turns::measure::message_tokens;
use std::cell::OnceCell;
use std::ops::Range;

/// One part of the conversation after the leading content.
#[derive(Debug, Clone)]
enum Unit {
    /// An API turn left as it is (index into the turns).
    Turn(usize),
    /// A collapse (index into `Run::collapses`) over a range of the input.
    Collapsed(usize),
}

/// A collapse applied in this run.
#[derive(Debug, Clone)]
struct Applied {
    collapse: Collapse,
    /// Whole turns of the input it replaces (system messages inside stay).
    range: Range<usize>,
    /// Tokens of the input messages in `range` (system messages excluded).
    input_tokens: usize,
    /// How it was found: the original messages, or a summary message already in the input.
    found: Found,
    /// Whether it was committed or merged in this run.
    fresh: bool,
    /// For a collapse of an earlier run: itself (without its ids, which its report does not
    /// name) and its input tokens before any merge in this run.
    prior: Option<(Collapse, usize)>,
    /// Its summary message's tokens, when this run committed it: the next commit merging into
    /// it needs them, and counting the running summary again at every commit cost as much as
    /// the summary had grown.
    summary_tokens: Option<usize>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Found {
    Span,
    SummaryMessage,
    Adopted,
}

/// A run over `M`s: the view of the host's conversation a stage reads in place (or, in tests
/// and in-process, the model's messages).
pub(crate) struct Run<'a, M> {
    config: &'a Config,
    messages: &'a [M],
    cx: Context<'a>,
    turns: condense_turns::Turns,
    /// Tokens of each turn, counted on first need: a turn is measured while a span grows over
    /// it and again when the span is committed.
    turn_tokens: Vec<OnceCell<usize>>,
    stored: State,
    collapses: Vec<Applied>,
    units: Vec<Unit>,
    effective: usize,
    commit_threshold: usize,
    block_threshold: usize,
    /// What the request may take to fit: `context_window - output_reserve`.
    fit_limit: usize,
    /// The target commits aimed at in this run (set by `commit`).
    goal: Option<usize>,
    /// The projection before this run's commits (after re-applying).
    before_commits: usize,
    conversation_tokens: usize,
    projected: usize,
    forced: bool,
    /// Why committing stopped while still over `commit_at`.
    stopped: Option<String>,
    report: StageReport,
}

impl<'a, M: ReadMessage> Run<'a, M> {
    pub(crate) fn new(
        config: &'a Config,
        messages: &'a [M],
        stored: State,
        cx: Context<'a>,
    ) -> Self {
        // The window less the model's output, as Claude Code reckons it. The autocompact
        // buffer plays no part in when collapse commits, so it is left out: the reserve is
        // scaled down only when the output alone would not fit the window.
        let budget = BudgetConfig {
            context_window: cx.context_window,
            max_output_tokens: cx.max_output_tokens,
            autocompact_buffer: 0,
            ..BudgetConfig::default()
        };
        let effective = budget.effective_window();
        let conversation_tokens = cx.conversation_tokens;
        let fit_limit = cx.context_window.saturating_sub(cx.output_reserve);
        let turns = condense_turns::group(messages);
        Run {
            config,
            messages,
            cx,
            turn_tokens: vec![OnceCell::new(); turns.turns.len()],
            turns,
            stored,
            collapses: Vec::new(),
            units: Vec::new(),
            effective,
            commit_threshold: fraction_of(config.commit_at, effective),
            block_threshold: fraction_of(config.block_at, effective),
            fit_limit,
            goal: None,
            before_commits: conversation_tokens,
            conversation_tokens,
            projected: conversation_tokens,
            forced: cx.flags.forced,
            stopped: None,
            report: StageReport::default(),
        }
    }

    /// Where commits aim: `commit_at × effective`, or less when the request would not fit
    /// there (a window whose output reserve is larger than what the effective window keeps
    /// free). Forced (the recovery chain), at least a tenth of the effective window below the
    /// projection.
    fn target(&self) -> usize {
        let target = match self.fit_limit {
            0 => self.commit_threshold,
            fit => self.commit_threshold.min(fit),
        };
        if self.forced {
            target
                .min(self.projected)
                .saturating_sub(self.effective / 10)
        } else {
            target
        }
    }

    /// How far below the target commits may land: a twentieth of the effective window, so
    /// the next turn does not trigger the next commit at once.
    fn headroom(&self) -> usize {
        self.effective / 20
    }

    fn tokens_of_range(&self, range: Range<usize>) -> usize {
        self.messages[range]
            .iter()
            .filter(|m| m.role() != Role::System)
            .map(|m| message_tokens(&self.cx, m))
            .sum()
    }

    /// [`Self::tokens_of_range`] of turn `t`, counted once per run.
    fn turn_tokens(&self, t: usize) -> usize {
        *self.turn_tokens[t].get_or_init(|| self.tokens_of_range(self.turns.turns[t].range()))
    }

    fn summary_tokens(&self, c: &Collapse) -> usize {
        message_tokens(&self.cx, &summary_message(c, None, None))
    }
}
