//! The offline, deterministic extractive summarizer (`kind = "extractive"`).
//!
//! It writes an *anchored* summary: fixed Markdown sections that act as a checklist, filled
//! from the messages themselves, so exact paths, error lines and the user's own words survive.
//!
//! ```text
//! ## Session intent
//! - <each user request, verbatim, first 600 chars; continuation lines indented>
//!
//! ## Files
//! ### Created
//! - `<path>`
//! ### Modified
//! - `<path>`
//! ### Read
//! - `<path>`
//!
//! ## Errors and fixes
//! - `<tool_use id>` <Tool> `<command or path>`: (same command succeeded later: `<id>`)
//!   <error line> (up to 3 per result)
//!
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
//! ```
//!
//! A section with nothing in it says `(none)`; one trimmed to fit the budget ends with
//! `(N more omitted)`.
//!
//! * **Requests** are user text blocks (not tool results), without system reminders, command
//!   output, interruption markers, Claude Code's expanded slash-command prompts (`isMeta`) and
//!   sub-agent prompts (`isSidechain`); a slash command shows as `/name args`.
//! * **Files** come from tool calls: `file_path`/`path`/`notebook_path` of `Write`
//!   (created, unless read before), `Edit`/`MultiEdit`/`NotebookEdit` (modified), `Read`
//!   (read), the `command` of Anthropic's and OpenHands' editor tools
//!   (`create`/`str_replace`/`insert`/`view`), `apply_patch` envelopes, and shell commands
//!   (`cat`/`head`/`tail`/`sed -n`/`< f` read; `sed -i`/`tee`/`> f`/`>> f` write). The table in the
//!   `files` module gives the status rules; a file both read and changed is listed as changed.
//! * **Errors** are results flagged `is_error`, and shell results with error lines (`Error:`,
//!   `error[E`, `Traceback`, `FAILED`, `panicked at`, `Exception`, ...).
//! * **Decisions** are assistant sentences with a marker (`decided`, `instead`, `the fix is`,
//!   `root cause`, `I'll`/`we will`/`going to` unless followed by an exploring verb such as
//!   "read" or "check"); the 12 most recent are kept.
//! * **Pending** is the latest todo list (`TodoWrite`, Codex `update_plan`, OpenHands
//!   `task_tracker`) without its completed items.
//!
//! With a `previous_summary` the span is merged into it section by section (see [`merge`]),
//! never regenerated. The budget: sections share `max_tokens` (intent 20%, files 30%, errors
//! 15%, decisions 10%, state 10%, pending 15%), a section needing less gives the rest away, and
//! the result is checked with the token counter, so it never exceeds `max_tokens`.

pub(crate) mod files;
pub mod merge;
mod render;
mod sections;
mod shell;

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
