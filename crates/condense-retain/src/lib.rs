//! What must survive compression: the facts an agent still needs after its conversation was
//! summarized, derived from the messages by code, merged span by span, rendered within a token
//! budget, and read back.
//!
//! A [`Retained`] record holds three things:
//!
//! - the **artifact trail** ([`ArtifactTrail`]): every path a tool call created, modified,
//!   deleted or read, with its status, last operation and operation count (file tools, editor
//!   tools, `apply_patch`, and shell commands through a small shell tokenizer, [`shell`]);
//! - the **error ledger** ([`ErrorLedger`]): each distinct error result by its first meaningful
//!   line ([`error_line`]), the tool and command or path, the first occurrence, a count, and the
//!   later success that fixed it;
//! - the **user requests**: the request text of every user prompt ([`request_text`]), in order.
//!
//! [`Retained::render`] writes three Markdown sections (`## User requests`, `## Files (artifact
//! trail)`, `## Errors`) within a budget, never dropping the last request or a written path;
//! [`Retained::parse`] reads them back when the structured record is lost. The definitions of
//! written paths, error results and requests are shared with `condense eval`, which measures
//! retention with its own code.
//!
//! The crate is pure: no tokenizer (the caller passes its token counter), no ABI, no I/O.
//!
//! ```
//! use condense_model::{Block, Content, Message, RawJson, Role, ToolResult};
//! use condense_retain::{FileStatus, Retained};
//!
//! let json = |s: &str| RawJson::from_string_unchecked(s.to_string());
//! let failed = ToolResult {
//!     is_error: Some(true),
//!     ..ToolResult::new("t2", Content::string("error[E0425]: cannot find value `x`"))
//! };
//! let messages = vec![
//!     Message::new("u1", Role::User, vec![Block::text("Add a login form")]),
//!     Message::new("a1", Role::Assistant, vec![
//!         Block::tool_use("t1", "Write", json(r#"{"file_path":"src/login.rs","content":"..."}"#)),
//!         Block::tool_use("t2", "Bash", json(r#"{"command":"cargo build"}"#)),
//!     ]),
//!     Message::new("r1", Role::User, vec![
//!         Block::tool_result("t1", Content::string("File created")),
//!         Block::ToolResult(failed),
//!     ]),
//! ];
//! let retained = Retained::from_messages(&messages);
//! assert_eq!(retained.artifacts.get("src/login.rs").map(|a| a.status), Some(FileStatus::Created));
//! assert_eq!(retained.errors.entries[0].line, "error[E0425]: cannot find value `x`");
//! assert_eq!(retained.requests, ["Add a login form"]);
//!
//! // Rendered within a budget (here: a rough 4-bytes-a-token counter), and read back.
//! let count = |s: &str| s.len().div_ceil(4);
//! let rendered = retained.render(500, &count);
//! assert!(rendered.tokens <= 500);
//! assert!(rendered.text.contains("`src/login.rs` — created"));
//! let back = Retained::parse(&rendered.text);
//! assert_eq!(back.requests, retained.requests);
//! assert_eq!(back.errors.entries[0].line, retained.errors.entries[0].line);
//! ```

pub mod artifacts;
pub mod errors;
pub mod ledger;
pub mod parse;
pub mod render;
pub mod requests;
pub mod shell;
#[cfg(test)]
mod testing;
mod text;
pub mod tools;

pub use artifacts::{Artifact, ArtifactTrail, FileOp, FileStatus, Standing};
pub use errors::{error_line, is_error_result, meaningful_line, ERROR_LINE_CHARS};
pub use ledger::{ErrorEntry, ErrorLedger, Fix};
pub use parse::strip_rendered;
pub use render::{RenderMemo, Rendered, ERRORS_HEADING, FILES_HEADING, REQUESTS_HEADING};
pub use requests::{clean_request, request_text, CONDENSE_MARKER};
pub use tools::{
    is_file_tool, is_shell_tool, normalize_name, patch_ops, shell_command, tool_file_ops,
    ShellCommand,
};

use condense_formats::claude_code::is_sidechain_work;
use condense_model::{Block, Message};
use serde::{Deserialize, Serialize};
use std::collections::{HashMap, HashSet};
use tools::Call;

/// What [`Retained::merge_later_undoable`] changed, to take it back with [`Retained::undo`].
#[derive(Debug, Clone, Default)]
pub struct Undo {
    artifacts: artifacts::TrailUndo,
    errors: ledger::LedgerUndo,
    /// The requests before the merge (a merge only appends).
    requests: usize,
}

/// Everything a summary must keep, derived from messages, merged span by span.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Retained {
    pub artifacts: ArtifactTrail,
    pub errors: ErrorLedger,
    /// User requests, oldest first: the full request text, not shortened (consecutive exact
    /// duplicates once).
    pub requests: Vec<String>,
}

impl Retained {
    /// Derives the record from a span of messages.
    ///
    /// Every tool call of every chat message counts, and those of a sub-agent's lines (see
    /// [`is_sidechain_work`]: the Claude Code reader keeps them as events, not context, with
    /// their content), except a file tool call whose result says `is_error: true` (it wrote
    /// nothing; a failed shell command may have). Requests come from chat messages only. A call
    /// and its result are matched by id within `messages`: spans should not separate them (API
    /// rounds never do).
    pub fn from_messages(messages: &[Message]) -> Retained {
        let chat = || {
            messages
                .iter()
                .filter(|m| m.is_chat() || is_sidechain_work(m))
        };
        let failed: HashSet<&str> = chat()
            .flat_map(Message::tool_results)
            .filter(|r| r.is_error == Some(true))
            .map(|r| r.tool_use_id.as_str())
            .collect();
        let mut calls: HashMap<&str, Call> = HashMap::new();
        let mut trail = ArtifactTrail::default();
        let mut ledger = ErrorLedger::default();
        let mut requests: Vec<String> = Vec::new();

        for m in chat() {
            if let Some(req) = request_text(m) {
                if requests.last() != Some(&req) {
                    requests.push(req);
                }
            }
            for block in &m.content.blocks {
                match block {
                    Block::ToolUse(tu) => {
                        let call = Call::of(tu);
                        if call.shell || !failed.contains(tu.id.as_str()) {
                            for (path, op) in &call.ops {
                                trail.record(path, *op);
                            }
                        }
                        calls.insert(tu.id.as_str(), call);
                    }
                    Block::ToolResult(tr) => {
                        let call = calls.get(tr.tool_use_id.as_str());
                        if is_error_result(tr, &m.envelope) {
                            let Some(line) = meaningful_line(&tr.content.text()) else {
                                continue;
                            };
                            ledger.occur(ErrorEntry {
                                line,
                                tool: call.map(|c| c.name.clone()).unwrap_or_default(),
                                about: call.map(|c| c.about.clone()).unwrap_or_default(),
                                key: call.map(|c| c.key.clone()).unwrap_or_default(),
                                first_id: tr.tool_use_id.clone(),
                                count: 1,
                                resolved_by: None,
                            });
                        } else if let Some(call) = call {
                            ledger.succeed(&call.key, &tr.tool_use_id);
                        }
                    }
                    _ => {}
                }
            }
        }
        Retained {
            artifacts: trail,
            errors: ledger,
            requests,
        }
    }

    /// Merges the next span's record into this one (`self` is the earlier span): the result
    /// equals [`Retained::from_messages`] over both spans at once. It costs what `later`
    /// holds, not what `self` holds (merged into a blank record, `later` is moved in).
    pub fn merge_later(&mut self, later: Retained) {
        if self.is_blank() {
            *self = later;
            return;
        }
        self.artifacts.merge_later(later.artifacts);
        self.errors.merge_later(later.errors);
        self.merge_requests(later.requests);
    }

    /// [`Retained::merge_later`], and what takes it back: [`Retained::undo`] on the merged
    /// record gives this one back, so a caller that may still need the earlier record can
    /// merge into it in place instead of merging into a copy.
    pub fn merge_later_undoable(&mut self, later: Retained) -> Undo {
        let requests = self.requests.len();
        let artifacts = self.artifacts.merge_later_undoable(later.artifacts);
        let errors = self.errors.merge_later_undoable(later.errors);
        self.merge_requests(later.requests);
        Undo {
            artifacts,
            errors,
            requests,
        }
    }

    /// Takes back the merge `undo` was made by: the record as it was before it. `undo` must
    /// be the last merge made on this record (or on a copy of it).
    pub fn undo(&mut self, undo: Undo) {
        self.artifacts.undo(undo.artifacts);
        self.errors.undo(undo.errors);
        self.requests.truncate(undo.requests);
    }

    fn merge_requests(&mut self, later: Vec<String>) {
        let mut later_requests = later.into_iter().peekable();
        if self.requests.last().is_some() && self.requests.last() == later_requests.peek() {
            later_requests.next();
        }
        self.requests.extend(later_requests);
    }

    /// Nothing at all, not even a fix.
    fn is_blank(&self) -> bool {
        self.is_empty() && self.errors.fixes.is_empty()
    }

    /// Whether there is nothing to keep: no path, no error, no request (the ledger's fixes,
    /// which are never shown, do not count).
    pub fn is_empty(&self) -> bool {
        self.artifacts.is_empty() && self.errors.is_empty() && self.requests.is_empty()
    }

    /// The last user request, if any.
    pub fn last_request(&self) -> Option<&str> {
        self.requests.last().map(String::as_str)
    }

    /// Markdown sections within `budget` tokens, counted with `count` (the caller's tokenizer;
    /// see [`mod@render`] for the format and the budget rules).
    pub fn render(&self, budget: usize, count: &dyn Fn(&str) -> usize) -> Rendered {
        render::render(self, budget, count, &mut RenderMemo::default())
    }

    /// [`Retained::render`], with the counts of the pieces earlier renderings wrote kept in
    /// `memo` (the same text as `render`'s): a record rendered again and again, a running
    /// summary's at each commit, counts only its new pieces. `memo` must only ever be used
    /// with this same `count`.
    pub fn render_memo(
        &self,
        budget: usize,
        count: &dyn Fn(&str) -> usize,
        memo: &mut RenderMemo,
    ) -> Rendered {
        render::render(self, budget, count, memo)
    }

    /// Reads back what [`Retained::render`] wrote (and the sections of the older extractive
    /// summaries: `Session intent`, `Files` with `### Created`/`Modified`/`Read`, `Errors and
    /// fixes`): every listed path with its status, the error lines, the requests. Other
    /// sections are ignored. Operation counts and keys are rebuilt where the text allows.
    pub fn parse(summary: &str) -> Retained {
        parse::parse(summary)
    }
}

#[cfg(test)]
mod tests;
