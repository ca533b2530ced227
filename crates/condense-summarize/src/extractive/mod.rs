//! The offline, deterministic extractive summarizer (`kind = "extractive"`).
//!
//! It writes the *prose* part of an anchored summary: fixed Markdown sections that act as a
//! checklist, filled from the messages themselves. The user's requests, the artifact trail and
//! the error ledger are not its job: the host puts them in front of every summary from a
//! `condense_retain::Retained` record (see [`crate::retaining`]), whichever summarizer writes
//! the prose.
//!
//! ```text
//! ## Decisions
//! - <assistant sentence with a decision marker>
//!
//! ## Current state
//! - Last test run (`<id>`): `<command>` → <summary line, e.g. 14 passed; 2 failed>
//! - Last assistant message: <first 600 chars>
//!
//! ## Pending tasks and next steps
//! - [<status>] <unfinished item of the latest todo list>
//! - Unanswered user request: <the last request, if no assistant turn followed it>
//!
//! ## Agent notes (verbatim, newest kept first)
//! - <an assistant text message, first 1,500 chars>
//! - Sub-agent report (`<id>`): <a Task result, first 1,500 chars>
//! ```
//!
//! A section with nothing in it says `(none)`; one trimmed to fit the budget ends with
//! `(N more omitted)`.
//!
//! * **Decisions** are assistant sentences with a marker (`decided`, `instead`, `the fix is`,
//!   `root cause`, `I'll`/`we will`/`going to` unless followed by an exploring verb such as
//!   "read" or "check"); the 12 most recent are kept. Sub-agent (`isSidechain`) lines are not
//!   the agent's own decisions.
//! * **Current state** is the last test run (a shell command running a test suite, with its
//!   outcome line) and the start of the last assistant message.
//! * **Pending** is the latest todo list (`TodoWrite`, Codex `update_plan`, OpenHands
//!   `task_tracker`) without its completed items, and the last user request when no assistant
//!   turn answered it.
//! * **Agent notes** are verbatim excerpts: the agent's text messages and its sub-agents'
//!   reports (results of `Task`-like tools), the 40 most recent. They have the smallest share
//!   and take whatever the other sections leave, so a summary given a larger budget (it stands
//!   for more) keeps more of what the agent said, and a tight one keeps none.
//!
//! With a `previous_summary` the span is merged into it section by section (see [`merge`]),
//! never regenerated. The budget: sections share `max_tokens` (decisions 33%, state 33%, pending
//! 29%, notes 5%), a section needing less gives the rest away, and the result is checked with the token
//! counter, so it never exceeds `max_tokens`.

pub mod merge;
pub(crate) use merge::combine;
mod render;
mod sections;
mod test_command;

use crate::{SummarizeError, Summarizer, SummaryRequest};
use condense_tokens::TokenCounter;
use std::sync::Arc;

/// The extractive summarizer.
#[derive(Debug)]
pub struct Extractive {
    counter: Arc<TokenCounter>,
}

impl Extractive {
    pub fn new(counter: Arc<TokenCounter>) -> Self {
        Extractive { counter }
    }
}

impl Summarizer for Extractive {
    fn name(&self) -> &str {
        "extractive"
    }

    fn summarize(&self, request: &SummaryRequest<'_>) -> Result<String, SummarizeError> {
        let span = sections::digest(request.messages);
        let digest = match request.previous_summary {
            Some(prev) if !prev.trim().is_empty() => merge::merge(merge::parse(prev), span),
            _ => span,
        };
        Ok(render::render(&digest, &self.counter, request.max_tokens))
    }
}
