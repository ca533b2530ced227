//! `tool-result-budget`: level 1 of the pipeline, tool result budget trimming.
//!
//! A single tool call can return an enormous result (a ten-thousand-line file, a `find` over a
//! whole disk). This stage gives every tool result a size budget. A result over its budget is
//! not truncated: its full text is persisted to the condense store and the result's content is
//! replaced by a short reference holding the store key and a preview, so nothing is lost and the
//! full output can be fetched again. It is a purely local operation.
//!
//! ```toml
//! [[stage]]
//! name = "budget"
//! plugin = "tool-result-budget"
//! [stage.config]
//! max_result_size_chars = 50000               # budget of every tool without an override
//! preview_bytes = 2000                        # preview kept in the reference
//! per_tool = { Read = 100000, Bash = 30000 }  # per tool name overrides
//! ```
//!
//! # What is measured
//!
//! Every `tool_result` block at the top level of a chat message's content (event lines are left
//! alone). Its size is the number of **chars** (Unicode scalar values) of
//! [`Content::text`](condense_model::Content::text): its text blocks joined by newlines. Images
//! and other non-text blocks do not count. The tool name, for `per_tool`, comes from the
//! matching `tool_use` block; a result whose call is not in the conversation gets the default.
//! A result is persisted when its size is strictly greater than its budget.
//!
//! # The reference
//!
//! ```text
//! [condense: tool result persisted — 81,234 chars, key 5d41402abc4b2a76b9719d911017c592]
//! Preview (first 2,000 bytes):
//! <the first 2,000 bytes of the original, cut back to a character boundary>
//! [... 79,234 more chars; full output in the condense store under key 5d41402abc4b2a76b9719d911017c592]
//! ```
//!
//! The byte count shown is the preview's real length (1,998 when a 3-byte character straddles
//! byte 2,000). The reference replaces the result's text blocks as one text block (keeping the
//! last text block's `extra`); string-shaped content stays a string; non-text blocks (images)
//! stay, after the reference. `is_error`, `tool_use_id` and the block's `extra` are untouched.
//! A result is replaced only when the reference is shorter than the original, so the stage never
//! makes a conversation bigger.
//!
//! # Decisions are recorded
//!
//! Every judged result is recorded in the stage state (see [`state`]): persisted ones with their
//! exact reference text, kept ones by id. A rerun on the same conversation, on it with turns
//! appended, or on the stage's own output makes exactly the same replacements, even when the
//! config changed in between, so prompt caches stay valid across resumes. Only results not seen
//! before are judged against the current config. A result that already holds a reference (its
//! text starts with the marker) is never persisted again.

pub mod reference;
pub mod state;

use condense_abi::{
    Context, Input, Replacements, Stage, StageError, StageEvent, StageOutput, StageReport,
};
use condense_model::{Content, Role, ToolResultAt};
use condense_text::{has_chars, plural};
use reference::{is_reference, reference_text, thousands};
use serde::{Deserialize, Serialize};
use state::{fingerprint, Replaced, State};
use std::collections::BTreeMap;

/// The stage's `[stage.config]`. Each field's doc is the key's description in
/// `condense plugins --details` and docs/stages.md.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, condense_abi::StageConfig)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// Budget in chars (Unicode scalar values of the result's text; images do not count) of
    /// every tool without a per_tool entry. A larger result is persisted. Must be > 0.
    pub max_result_size_chars: usize,
    /// Bytes of the original kept as a preview in the reference, cut back to a character
    /// boundary. 0 keeps no preview. Must be <= max_result_size_chars.
    pub preview_bytes: usize,
    /// Table of tool name -> budget in chars, overriding max_result_size_chars for that tool,
    /// e.g. { Read = 100000, Bash = 30000 }. Each must be > 0.
    pub per_tool: BTreeMap<String, usize>,
}

/// `DEFAULT_MAX_RESULT_SIZE_CHARS` of the reference design.
pub const DEFAULT_MAX_RESULT_SIZE_CHARS: usize = 50_000;
/// The reference design's 2 KB preview.
pub const DEFAULT_PREVIEW_BYTES: usize = 2_000;

impl Default for Config {
    fn default() -> Self {
        Config {
            max_result_size_chars: DEFAULT_MAX_RESULT_SIZE_CHARS,
            preview_bytes: DEFAULT_PREVIEW_BYTES,
            per_tool: BTreeMap::new(),
        }
    }
}

/// The stage.
#[derive(Debug)]
pub struct ToolResultBudget {
    config: Config,
}

impl ToolResultBudget {
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The budget of results of `tool`.
    pub fn limit_for(&self, tool: Option<&str>) -> usize {
        tool.and_then(|t| self.config.per_tool.get(t))
            .copied()
            .unwrap_or(self.config.max_result_size_chars)
    }
}

/// What happened to one tool result in one run.
enum Outcome {
    /// Content to be replaced by `reference`; `fresh` when decided in this run.
    Replaced {
        reference: String,
        fresh: bool,
        tool: String,
        key: String,
        original_chars: usize,
        tokens: usize,
    },
    /// Left whole under the current budget, now or on an earlier run.
    Kept,
    /// Left whole although over the current budget: an earlier run kept it.
    KeptByEarlierDecision,
    /// Over the budget, but the reference would not be shorter.
    KeptNotShorter,
    /// Already holds a reference.
    AlreadyReference,
    /// Its id has a recorded replacement but its text is not the one persisted then.
    Mismatch,
}

/// Counts of one run, for the notes.
#[derive(Default)]
struct Tally {
    checked: usize,
    fresh: usize,
    fresh_chars: usize,
    earlier: usize,
    earlier_chars: usize,
    already: usize,
    kept_earlier: usize,
    not_shorter: usize,
    mismatched: Vec<String>,
}

impl ToolResultBudget {
    /// Judges the result `id` (of `tool`) whose text is `text`. Decides only: a replacement is
    /// made in the copied conversation afterwards.
    fn judge(
        &self,
        text: &str,
        id: &str,
        tool: Option<&str>,
        state: &mut State,
        cx: &Context<'_>,
    ) -> Result<Outcome, StageError> {
        if is_reference(text) {
            return Ok(Outcome::AlreadyReference);
        }
        // Over its limit in chars, counted only when the bytes leave it open.
        let over = |limit: usize| has_chars(text, limit.saturating_add(1));

        if let Some(done) = state.replaced.get(id) {
            let chars = text.chars().count();
            if done.original_chars != chars || done.original_xxh3 != fingerprint(text) {
                return Ok(Outcome::Mismatch);
            }
            if done.reference.len() >= text.len() {
                return Ok(Outcome::KeptNotShorter);
            }
            let (tool, key, reference) =
                (done.tool.clone(), done.key.clone(), done.reference.clone());
            let tokens = freed(cx, text, &reference);
            return Ok(Outcome::Replaced {
                reference,
                fresh: false,
                tool,
                key,
                original_chars: chars,
                tokens,
            });
        }
        if state.kept.contains(id) {
            return Ok(if over(self.limit_for(tool)) {
                Outcome::KeptByEarlierDecision
            } else {
                Outcome::Kept
            });
        }

        // A result not seen before: judge it against the current config.
        if !over(self.limit_for(tool)) {
            state.kept.insert(id.to_string());
            return Ok(Outcome::Kept);
        }
        let chars = text.chars().count();
        // The reference with an empty key is a lower bound: when even that is not shorter,
        // skip the store write.
        if reference_text(text, chars, "", self.config.preview_bytes).len() >= text.len() {
            state.kept.insert(id.to_string());
            return Ok(Outcome::KeptNotShorter);
        }
        let key = cx
            .store_put(text.as_bytes())
            .map_err(|e| format!("cannot persist tool result {id}: {}", e.message()))?;
        let reference = reference_text(text, chars, &key, self.config.preview_bytes);
        if reference.len() >= text.len() {
            state.kept.insert(id.to_string());
            return Ok(Outcome::KeptNotShorter);
        }
        let tool = tool.unwrap_or("?").to_string();
        state.replaced.insert(
            id.to_string(),
            Replaced {
                tool: tool.clone(),
                key: key.clone(),
                original_chars: chars,
                original_xxh3: fingerprint(text),
                reference: reference.clone(),
            },
        );
        let tokens = freed(cx, text, &reference);
        Ok(Outcome::Replaced {
            reference,
            fresh: true,
            tool,
            key,
            original_chars: chars,
            tokens,
        })
    }
}

fn freed(cx: &Context<'_>, original: &str, reference: &str) -> usize {
    cx.count_tokens(original)
        .saturating_sub(cx.count_tokens(reference))
}

/// `content` with its text replaced by `reference` (see `Content::with_text_replaced`).
fn replaced_content(content: &Content, reference: String) -> Content {
    content.with_text_replaced(reference, |_| false)
}

impl Stage for ToolResultBudget {
    type Config = Config;
    const NAME: &'static str = "tool-result-budget";
    const DESCRIPTION: &'static str =
        "Persists tool results over a size budget to the store, leaving a reference with a preview.";
    fn new(config: Config) -> Result<Self, StageError> {
        if config.max_result_size_chars == 0 {
            return Err("max_result_size_chars must be > 0, got 0".into());
        }
        if config.preview_bytes > config.max_result_size_chars {
            return Err(format!(
                "preview_bytes must be <= max_result_size_chars ({}), got {}",
                config.max_result_size_chars, config.preview_bytes
            )
            .into());
        }
        if let Some((tool, _)) = config.per_tool.iter().find(|(_, limit)| **limit == 0) {
            return Err(format!("per_tool.{tool} must be > 0, got 0").into());
        }
        Ok(ToolResultBudget { config })
    }

    fn apply(&self, input: Input<'_>, cx: &Context<'_>) -> Result<StageOutput, StageError> {
        let mut state = cx.state::<State>()?;
        let mut report = StageReport::default();
        let mut tally = Tally::default();
        // Judged through the view; the conversation is copied in only when a result is
        // replaced (most runs replace none).
        let mut replacements: Vec<(ToolResultAt, String)> = Vec::new();
        let view = input.view()?;
        // Event lines never reach the model: only chat messages' results are judged.
        for slot in view.tool_results().filter(|slot| slot.role != Role::Event) {
            tally.checked += 1;
            let result = slot.result;
            let text = result.content().text_cow();
            match self.judge(&text, result.tool_use_id(), slot.tool, &mut state, cx)? {
                Outcome::Replaced {
                    reference,
                    fresh,
                    tool,
                    key,
                    original_chars,
                    tokens,
                } => {
                    if fresh {
                        tally.fresh += 1;
                        tally.fresh_chars += original_chars;
                    } else {
                        tally.earlier += 1;
                        tally.earlier_chars += original_chars;
                    }
                    report.blocks_changed += 1;
                    *report.tokens_freed.get_or_insert(0) += tokens;
                    report.events.push(StageEvent {
                        kind: "persisted".to_string(),
                        message_id: slot.message_id.to_string(),
                        detail: format!(
                            "tool {tool} result {}: {} chars -> key {key}{}",
                            result.tool_use_id(),
                            thousands(original_chars),
                            if fresh { "" } else { " (earlier decision)" }
                        ),
                        tokens,
                    });
                    replacements.push((slot.at(), reference));
                }
                Outcome::Kept => {}
                Outcome::KeptByEarlierDecision => tally.kept_earlier += 1,
                Outcome::KeptNotShorter => tally.not_shorter += 1,
                Outcome::AlreadyReference => tally.already += 1,
                Outcome::Mismatch => tally.mismatched.push(result.tool_use_id().to_string()),
            }
        }
        state.save()?;
        write_notes(&mut report, &tally, self.config.max_result_size_chars);
        if replacements.is_empty() {
            return Ok(StageOutput::unchanged(report));
        }
        // Only the messages holding a replaced result are copied, and cross back alone.
        let mut messages = Replacements::new(&view);
        for (at, reference) in replacements {
            let result = messages.tool_result_mut(&at).ok_or_else(|| {
                format!(
                    "the conversation has no tool result at message {}, block {}",
                    at.message, at.block
                )
            })?;
            result.content = replaced_content(&result.content, reference);
        }
        // Every replacement is counted.
        Ok(messages.into_output(report))
    }
}

fn write_notes(report: &mut StageReport, t: &Tally, max: usize) {
    if t.fresh > 0 {
        report.note(format!(
            "persisted {} ({} chars) to the store",
            plural(t.fresh, "tool result", "tool results"),
            thousands(t.fresh_chars)
        ));
    }
    if t.earlier > 0 {
        report.note(format!(
            "re-applied {} of earlier runs ({} chars, already in the store)",
            plural(t.earlier, "replacement", "replacements"),
            thousands(t.earlier_chars)
        ));
    }
    if t.fresh == 0 && t.earlier == 0 {
        report.note(format!(
            "no tool result over its limit ({} checked, max_result_size_chars = {})",
            t.checked,
            thousands(max)
        ));
    }
    if t.already > 0 {
        report.note(format!(
            "{} already held a persisted reference",
            plural(t.already, "tool result", "tool results")
        ));
    }
    if t.kept_earlier > 0 {
        report.note(format!(
            "kept {} over the current limit whole: an earlier run judged them under the limit",
            plural(t.kept_earlier, "tool result", "tool results")
        ));
    }
    if t.not_shorter > 0 {
        report.note(format!(
            "kept {} over the limit whole: the reference would not be shorter",
            plural(t.not_shorter, "tool result", "tool results")
        ));
    }
    if !t.mismatched.is_empty() {
        report.note(format!(
            "left whole {} whose text differs from the one persisted earlier under the same id: {}",
            plural(t.mismatched.len(), "tool result", "tool results"),
            t.mismatched.join(", ")
        ));
    }
}

condense_abi::export_stage!(ToolResultBudget);
