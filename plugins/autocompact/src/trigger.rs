//! When the stage fires: the threshold arithmetic of one run and the guards in front of it.

use crate::messages::real_turns;
use crate::state::State;
use crate::{Autocompact, Config};
use condense_abi::{RunContext, Signal};
use condense_budget::{fraction_of, BudgetConfig};
use condense_model::Conversation;
use condense_text::{percent, plural, thousands};

/// The threshold arithmetic of one run.
#[derive(Debug, Clone)]
pub struct Trigger {
    pub window: usize,
    pub reserved: usize,
    pub effective: usize,
    pub buffer: usize,
    pub pct: Option<f64>,
    pub threshold: usize,
    /// `RunContext::conversation_tokens`: what the check compares.
    pub tokens: usize,
    /// `RunContext::tokens_freed_before`.
    pub freed_before: usize,
}

impl Trigger {
    /// The threshold for the call's window and the stage's config.
    pub fn compute(config: &Config, run: &RunContext) -> Trigger {
        let budget = BudgetConfig {
            context_window: run.context_window,
            max_output_tokens: run.max_output_tokens,
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
            tokens: run.conversation_tokens,
            freed_before: run.tokens_freed_before,
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

impl Autocompact {
    /// The checks that need only the call's figures and the stored state: `Err(why not)`, or
    /// the checks the host's force overrode so far.
    ///
    /// The notes keep the names users know the host's flags by (`disable:autocompact`,
    /// `force:autocompact`, `context-collapse:active`), as the config docs do.
    pub(crate) fn precheck(
        &self,
        t: &Trigger,
        state: &State,
        run: &RunContext,
    ) -> Result<Vec<String>, String> {
        if !self.config.enabled {
            return Err("disabled by config (enabled = false)".into());
        }
        if run.flags.disabled {
            return Err(
                "disabled by the host (flag disable:autocompact, from CONDENSE_DISABLE_AUTOCOMPACT=1)"
                    .into(),
            );
        }
        let forced = run.flags.forced;
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
        if run.flags.raised(Signal::CollapseActive) {
            if !forced {
                return Err(
                    "suppressed: context-collapse is active (flag context-collapse:active); \
                     compacting now would race it and throw away the granular context its \
                     collapses keep (force:autocompact overrides)"
                        .into(),
                );
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
        Ok(overridden)
    }

    /// The check that reads the conversation (turns since the last compaction), then the
    /// verdict: `Err(why not)`, or `Ok(note when the host's force overrode a check)`.
    pub(crate) fn decide(
        &self,
        mut overridden: Vec<String>,
        state: &State,
        conversation: &Conversation,
        run: &RunContext,
    ) -> Result<Option<String>, String> {
        let forced = run.flags.forced;
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
                        "compacted {} ago ({}); min_turns_between = {}: not compacting again yet",
                        plural(since, "turn", "turns"),
                        last.summary_id,
                        self.config.min_turns_between
                    ));
                }
                overridden.push(format!("min_turns_between ({since} since the last)"));
            }
        }
        Ok((!overridden.is_empty()).then(|| {
            format!(
                "force:autocompact: compacting despite {}",
                overridden.join(", ")
            )
        }))
    }
}
