//! Summaries that never drop what the agent needs: the retained record first, prose after.
//!
//! Whatever the summarizer (extractive or an LLM), a summary the host returns starts with the
//! sections of a [`Retained`] record, rendered by code, not by a model:
//!
//! - `## User requests`: every request in order, the last one verbatim;
//! - `## Files (artifact trail)`: every path created, modified or deleted, always;
//! - `## Errors`: each distinct error's first meaningful line, and whether it was fixed;
//!
//! then the summarizer's own sections (decisions, current state, pending tasks; an LLM's nine
//! sections) within what is left of the budget. Budget pressure shortens the prose first, then
//! the optional parts of the record (read files, resolved errors, older requests); a written
//! path and the last request are never dropped, even when they alone exceed the budget.
//!
//! The record is **carried forward**, not re-derived from text: [`summarize_retaining`] takes
//! the records of the earlier summaries it builds on (the host keeps one per summary it wrote,
//! keyed by the summary's text) and merges the new span into them. A summary without a record
//! (written by an older condense, edited by hand) is read back with [`Retained::parse`].
//!
//! ```
//! use condense_model::{Block, Message, RawJson, Role};
//! use condense_summarize::retaining::{summarize_retaining, Earlier};
//! use condense_summarize::{build, SummarizerConfig, SummaryRequest};
//! use condense_tokens::TokenCounter;
//! use std::sync::Arc;
//!
//! let counter = Arc::new(TokenCounter::default());
//! let summarizer = build(&SummarizerConfig::default(), Arc::clone(&counter))?;
//! let write = Block::tool_use("t1", "Write", RawJson::from_string_unchecked(
//!     r#"{"file_path":"src/auth.rs","content":"fn f() {}"}"#.into()));
//! let span = vec![
//!     Message::new("u1", Role::User, vec![Block::text("Fix the login bug")]),
//!     Message::new("a1", Role::Assistant, vec![write]),
//! ];
//! let request = SummaryRequest { messages: &span, previous_summary: None, max_tokens: 400,
//!     purpose: "autocompact" };
//! let out = summarize_retaining(summarizer.as_ref(), &counter, &request, Earlier::default())?;
//! assert!(out.text.contains("`src/auth.rs`"));
//! assert!(out.text.contains("Fix the login bug"));
//! # Ok::<(), condense_summarize::SummarizeError>(())
//! ```

use crate::{SummarizeError, Summarizer, SummaryRequest};
use condense_model::Message;
pub use condense_retain::{RenderMemo, Retained, Undo};
use condense_tokens::TokenCounter;

/// The share of the budget the retained record may take before the prose gets the rest (the
/// mandatory part may take more).
const RETAINED_SHARE: f64 = 0.85;
/// Below this many tokens left, no prose is asked for.
const MIN_PROSE_TOKENS: usize = 60;

/// What a new summary builds on, oldest first: each earlier summary's text with its record
/// (`None`: no record was kept, read it back from the text).
#[derive(Debug, Default)]
pub struct Earlier {
    pub summaries: Vec<(String, Option<Retained>)>,
}

/// A summary and the record it carries.
#[derive(Debug)]
pub struct RetainingSummary {
    pub text: String,
    pub retained: Retained,
}

/// Summarizes `request` (whose `previous_summary` and earlier summaries are given in `earlier`;
/// `request.messages` must not contain summary messages) with the retained record in front.
pub fn summarize_retaining(
    summarizer: &dyn Summarizer,
    counter: &TokenCounter,
    request: &SummaryRequest<'_>,
    earlier: Earlier,
) -> Result<RetainingSummary, SummarizeError> {
    let mut retained = Retained::default();
    let mut earlier_prose = Vec::new();
    for (text, record) in earlier.summaries {
        retained.merge_later(record.unwrap_or_else(|| Retained::parse(&text)));
        let prose = strip_retained_sections(&text);
        if !prose.trim().is_empty() {
            earlier_prose.push(prose);
        }
    }
    retained.merge_later(Retained::from_messages(request.messages));
    let memo = &mut RenderMemo::default();
    let text = write(
        summarizer,
        counter,
        request,
        &retained,
        &earlier_prose,
        memo,
    )?;
    Ok(RetainingSummary { text, retained })
}

/// A summary written onto a record handed over ([`summarize_onto`]), and what turns that
/// record back into the one it was handed over as.
#[derive(Debug)]
pub struct OntoSummary {
    pub text: String,
    pub undo: Undo,
}

/// [`summarize_retaining`] for a running summary: `request.previous_summary` (non-empty) is the
/// one summary the new one builds on and `record` is its record, handed over rather than
/// copied; `request.messages` holds no summary message. The span is merged into `record` in
/// place, so a commit costs its span, not the whole record: on success `record` is the new
/// summary's record and `Retained::undo` with the returned undo turns a copy of it back into
/// the previous one; on failure `record` is as it was.
pub fn summarize_onto(
    summarizer: &dyn Summarizer,
    counter: &TokenCounter,
    request: &SummaryRequest<'_>,
    record: &mut Retained,
) -> Result<OntoSummary, SummarizeError> {
    let memo = &mut RenderMemo::default();
    summarize_onto_memo(summarizer, counter, request, record, memo)
}

/// [`summarize_onto`], keeping the counts of the record's rendered pieces in `memo` (see
/// [`Retained::render_memo`]): handed from commit to commit of a running summary with its
/// record, so a commit counts the pieces it adds, not the whole record again. `memo` must only
/// ever be used with this same `counter`.
pub fn summarize_onto_memo(
    summarizer: &dyn Summarizer,
    counter: &TokenCounter,
    request: &SummaryRequest<'_>,
    record: &mut Retained,
    memo: &mut RenderMemo,
) -> Result<OntoSummary, SummarizeError> {
    let prose = request
        .previous_summary
        .map(|p| strip_retained_sections(p.trim()))
        .filter(|p| !p.trim().is_empty());
    let undo = record.merge_later_undoable(Retained::from_messages(request.messages));
    let request = SummaryRequest {
        previous_summary: None,
        ..*request
    };
    match write(
        summarizer,
        counter,
        &request,
        record,
        prose.as_slice(),
        memo,
    ) {
        Ok(text) => Ok(OntoSummary { text, undo }),
        Err(e) => {
            record.undo(undo);
            Err(e)
        }
    }
}

/// The summary of `request` (whose earlier summaries' prose is `earlier_prose`) with
/// `retained` rendered in front.
fn write(
    summarizer: &dyn Summarizer,
    counter: &TokenCounter,
    request: &SummaryRequest<'_>,
    retained: &Retained,
    earlier_prose: &[String],
    memo: &mut RenderMemo,
) -> Result<String, SummarizeError> {
    // Cached: a running summary renders mostly the same record commit after commit.
    let count = |t: &str| counter.count_text_cached(t);
    let share = (request.max_tokens as f64 * RETAINED_SHARE) as usize;
    let rendered = retained.render_memo(share.max(1), &count, memo);
    let left = request.max_tokens.saturating_sub(rendered.tokens + 1);
    // Several earlier summaries are merged into one as a chain of merges would have (the
    // latest todo list, state and answer win), whoever the summarizer is.
    let previous = match earlier_prose {
        [] => None,
        [one] => Some(one.clone()),
        several => crate::extractive::combine(several, counter),
    };
    let prose = if left >= MIN_PROSE_TOKENS && (!request.messages.is_empty() || previous.is_some())
    {
        let prose_request = SummaryRequest {
            messages: request.messages,
            previous_summary: previous.as_deref(),
            max_tokens: left,
            purpose: request.purpose,
        };
        strip_retained_sections(&summarizer.summarize(&prose_request)?)
    } else {
        String::new()
    };
    Ok(match prose.trim() {
        "" => rendered.text.trim().to_string(),
        p => format!("{}\n\n{p}", rendered.text.trim()),
    })
}

/// What a stage asked for, as the host answers it: `messages` may hold earlier summary
/// messages (a collapse summary that autocompact now summarizes); they and `previous_summary`
/// are what the new summary builds on ([`Earlier`], with the record `record_of` finds for each
/// summary text, else read back from the text), and the other messages are the span.
pub fn summarize_span(
    summarizer: &dyn Summarizer,
    counter: &TokenCounter,
    request: &SummaryRequest<'_>,
    record_of: &dyn Fn(&str) -> Option<Retained>,
) -> Result<RetainingSummary, SummarizeError> {
    let mut earlier = Earlier::default();
    let mut remember = |text: &str| {
        let text = text.trim();
        if !text.is_empty() {
            earlier.summaries.push((text.to_string(), record_of(text)));
        }
    };
    if let Some(prev) = request.previous_summary {
        remember(prev);
    }
    let mut span = Vec::with_capacity(request.messages.len());
    for m in request.messages {
        match summary_body(m) {
            Some(body) => remember(body),
            None => span.push(m.clone()),
        }
    }
    let request = SummaryRequest {
        messages: &span,
        previous_summary: None,
        ..*request
    };
    summarize_retaining(summarizer, counter, &request, earlier)
}

/// `text` without the retained record's sections: a previous summary's prose only (code
/// fences respected: a verbatim request may hold `## ` lines).
pub fn strip_retained_sections(text: &str) -> String {
    condense_retain::strip_rendered(text)
}

/// Whether `message` is a summary a condense stage wrote (`[condense: ` text), which a new
/// summary builds on rather than reads as conversation.
pub fn is_summary_message(message: &Message) -> bool {
    summary_body(message).is_some()
}

/// The summary text of a condense summary message: its text after the `[condense: ...]`
/// header line.
pub fn summary_body(message: &Message) -> Option<&str> {
    let [condense_model::Block::Text(t)] = message.content.blocks.as_slice() else {
        return None;
    };
    let rest = t.text.strip_prefix(condense_model::CONDENSE_MARKER)?;
    // Restored files and pinned items are condense messages too, but not summaries.
    if !(rest.starts_with("summary of ") || rest.starts_with("conversation compacted")) {
        return None;
    }
    Some(rest.split_once('\n').map_or("", |(_, body)| body).trim())
}
