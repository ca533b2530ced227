//! One run of the stage: re-apply the committed collapses ([`reapply`]), commit new spans
//! ([`commit`]), then build the projection, the report and the state ([`finish`], [`notes`]).

mod commit;
mod finish;
mod notes;
mod reapply;

use crate::state::{Collapse, State};
use crate::summary::summary_message;
use crate::{Config, FORCE_FLAG};
use condense_abi::{Host, StageReport};
use condense_model::{Message, Role};
use condense_tokens::BudgetConfig;
use condense_turns::measure::{fraction_of, message_tokens};
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
    /// For a collapse of an earlier run: itself and its input tokens before any merge in this run.
    prior: Option<(Collapse, usize)>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Found {
    Span,
    SummaryMessage,
    Adopted,
}

pub(crate) struct Run<'a> {
    config: &'a Config,
    messages: &'a [Message],
    host: &'a dyn Host,
    turns: condense_turns::Turns,
    stored: State,
    collapses: Vec<Applied>,
    units: Vec<Unit>,
    effective: usize,
    commit_threshold: usize,
    block_threshold: usize,
    conversation_tokens: usize,
    projected: usize,
    forced: bool,
    /// Why committing stopped while still over `commit_at`.
    stopped: Option<String>,
    report: StageReport,
}

impl<'a> Run<'a> {
    pub(crate) fn new(
        config: &'a Config,
        messages: &'a [Message],
        stored: State,
        host: &'a dyn Host,
    ) -> Self {
        let budget = BudgetConfig {
            context_window: host.context_window(),
            max_output_tokens: host.max_output_tokens(),
            ..BudgetConfig::default()
        };
        let effective = budget.effective_window();
        let conversation_tokens = host.conversation_tokens();
        Run {
            config,
            messages,
            host,
            turns: condense_turns::group(messages),
            stored,
            collapses: Vec::new(),
            units: Vec::new(),
            effective,
            commit_threshold: fraction_of(config.commit_at, effective),
            block_threshold: fraction_of(config.block_at, effective),
            conversation_tokens,
            projected: conversation_tokens,
            forced: host.has_flag(FORCE_FLAG),
            stopped: None,
            report: StageReport::default(),
        }
    }

    fn tokens_of_range(&self, range: Range<usize>) -> usize {
        self.messages[range]
            .iter()
            .filter(|m| m.role != Role::System)
            .map(|m| message_tokens(self.host, m))
            .sum()
    }

    fn summary_tokens(&self, c: &Collapse) -> usize {
        message_tokens(self.host, &summary_message(c, None, ""))
    }
}
