//! `truncate-oldest`: the naive sliding window every smarter method is compared against.
//!
//! When the conversation is over its token budget, the oldest messages are dropped, whole, until
//! it fits. Nothing is summarized and nothing is rewritten: what stays is byte-identical, and
//! what goes is archived by the host (`condense expand` restores it).
//!
//! ```toml
//! [[stage]]
//! name = "window"
//! plugin = "truncate-oldest"
//! [stage.config]
//! max_tokens = 0           # 0: the host's context_window - max_output_tokens
//! keep_first_user = true   # the task statement always stays
//! ```
//!
//! # What always stays
//!
//! - The top-level system prompt, the tool definitions and every [`Role::System`] message.
//! - The first [`Role::User`] message (the task), unless `keep_first_user = false`.
//! - Calls with their results: the kept tail never starts on a tool_result whose tool_use was
//!   dropped (an orphaned result is dropped too, and the cut moves on), and an assistant
//!   tool_use is never kept without its results nor dropped while they stay.
//! - The last turn: when even dropping everything else does not fit, the stage drops what it
//!   can, keeps the last call/result group and says it is still over budget.
//!
//! Event lines ([`Role::Event`], not sent to the model) go when the chat messages on both sides
//! of them go, and stay next to a kept message.
//!
//! # Counting
//!
//! Each message is estimated as the host counts it, with `condense_turns::measure`: the host's
//! tokenizer over each block's text (a tool_use's name and input JSON, a result's nested blocks)
//! plus [`MESSAGE_OVERHEAD_TOKENS`](condense_budget::MESSAGE_OVERHEAD_TOKENS) per message; an
//! image counts the estimate from its dimensions (1,600 tokens, the most one costs, when they
//! cannot be read). The system prompt and tool definitions count too. See [`plan`].
//!
//! # Reruns
//!
//! The stage keeps no state. Its output fits the budget (or cannot be cut further), so running
//! it again changes nothing.

pub mod plan;

use condense_abi::{
    Context, Input, RunContext, Stage, StageConfig, StageError, StageEvent, StageOutput,
    StageReport,
};
use condense_model::{Conversation, Role};
pub use condense_text::{plural, thousands};
use condense_turns::measure::message_tokens;
use serde::{Deserialize, Serialize};

/// The stage's `[stage.config]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, StageConfig)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// The budget in tokens the conversation must fit (system prompt, tool definitions
    /// and messages). 0: the host's context_window - max_output_tokens.
    pub max_tokens: usize,
    /// Whether the first user message (the task) always stays. System messages always
    /// stay.
    pub keep_first_user: bool,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            max_tokens: 0,
            keep_first_user: true,
        }
    }
}

/// The stage.
#[derive(Debug)]
pub struct TruncateOldest {
    config: Config,
}

impl TruncateOldest {
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The budget: `max_tokens`, or the host's window minus its max output tokens; with where
    /// it comes from, for the notes.
    pub fn budget(&self, run: &RunContext) -> Result<(usize, String), StageError> {
        if self.config.max_tokens > 0 {
            return Ok((self.config.max_tokens, "max_tokens".to_string()));
        }
        let (window, output) = (run.context_window, run.max_output_tokens);
        let budget = window.saturating_sub(output);
        if budget == 0 {
            return Err(format!(
                "no token budget: context_window ({window}) - max_output_tokens ({output}) \
                 leaves nothing; set max_tokens"
            )
            .into());
        }
        Ok((
            budget,
            format!(
                "context_window {} - max_output_tokens {}",
                thousands(window),
                thousands(output)
            ),
        ))
    }
}

impl Stage for TruncateOldest {
    type Config = Config;
    const NAME: &'static str = "truncate-oldest";
    const DESCRIPTION: &'static str =
        "Drops the oldest messages until the conversation fits the budget (the naive sliding window baseline).";

    fn new(config: Config) -> Result<Self, StageError> {
        Ok(TruncateOldest { config })
    }

    fn apply(&self, input: Input<'_>, cx: &Context<'_>) -> Result<StageOutput, StageError> {
        let conversation = input.into_conversation()?;
        let (budget, source) = self.budget(cx)?;
        let costs: Vec<usize> = conversation
            .messages
            .iter()
            .map(|m| message_tokens(cx, m))
            .collect();
        let fixed = plan::fixed_tokens(cx, &conversation);
        let plan = plan::plan(
            &conversation,
            &costs,
            fixed,
            budget,
            self.config.keep_first_user,
        );
        let budget_text = format!("{} ({source})", thousands(budget));

        let mut report = StageReport::default();
        let mut kept = Vec::with_capacity(conversation.messages.len());
        let (mut chat, mut events) = (0, 0);
        for ((message, dropped), cost) in conversation
            .messages
            .into_iter()
            .zip(&plan.dropped)
            .zip(&costs)
        {
            if !dropped {
                kept.push(message);
                continue;
            }
            report.blocks_changed += message.content.blocks.len();
            if message.role == Role::Event {
                events += 1;
                continue;
            }
            chat += 1;
            report.events.push(StageEvent {
                kind: "dropped".to_string(),
                message_id: message.id.clone(),
                detail: format!(
                    "{} message, {}",
                    message.role.as_str(),
                    plural(message.content.blocks.len(), "block", "blocks")
                ),
                tokens: *cost,
            });
        }
        let freed = plan.total_before - plan.total_after;
        if chat + events == 0 {
            report.note(if plan.fits {
                format!(
                    "fits: ~{} tokens of a budget of {budget_text}; nothing dropped",
                    thousands(plan.total_before)
                )
            } else {
                format!(
                    "over budget (~{} tokens of {budget_text}) but nothing can be dropped: only \
                     pinned messages and the last turn are left",
                    thousands(plan.total_before)
                )
            });
        } else {
            report.tokens_freed = Some(freed);
            report.note(format!(
                "dropped {} ({chat} chat, {}), ~{} tokens freed; kept {}, ~{} tokens of a \
                 budget of {budget_text}",
                plural(chat + events, "message", "messages"),
                plural(events, "event line", "event lines"),
                thousands(freed),
                plural(kept.len(), "message", "messages"),
                thousands(plan.total_after)
            ));
            if plan.extra_for_pairs > 0 {
                report.note(format!(
                    "dropped {} more than the budget needed, to keep tool calls and results \
                     together",
                    plural(plan.extra_for_pairs, "message", "messages")
                ));
            }
            if !plan.fits {
                report.note(format!(
                    "still over budget by ~{} tokens: only pinned messages and the last turn are \
                     left",
                    thousands(plan.total_after - budget)
                ));
            }
        }
        // Messages without blocks count no block: test what was dropped instead.
        Ok(if chat + events == 0 {
            StageOutput::unchanged(report)
        } else {
            StageOutput::changed(
                Conversation {
                    messages: kept,
                    ..conversation
                },
                report,
            )
        })
    }
}

condense_abi::export_stage!(TruncateOldest);
