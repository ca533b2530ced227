//! The probes: facts of the ORIGINAL conversation that a compressed one must still show.
//!
//! Three kinds, each defined in the shared retention spec (issue 10) and computed here by this
//! crate's own code, never by the stages' (`condense-retain`) — the point of an oracle:
//!
//! - **artifacts** ([`paths`], [`shell`]): every path a tool call created, overwrote, edited,
//!   appended to, moved or copied to, or deleted, with a leading `./` removed;
//! - **errors** ([`errors`]): the distinct first meaningful lines of the error results;
//! - **the last user request** ([`request`]): the request text of the last real user prompt.
//!
//! ```
//! use condense_eval::probes::Probes;
//! use condense_model::{Block, Content, Conversation, Message, RawJson, Role};
//!
//! let input = RawJson::from_string_unchecked(r#"{"command":"cargo test > out.log"}"#.into());
//! let mut conv = Conversation::default();
//! conv.messages = vec![
//!     Message::new("u", Role::User, vec![Block::text("Fix the build")]),
//!     Message::new("a", Role::Assistant, vec![Block::tool_use("t1", "Bash", input)]),
//!     Message::new("r", Role::User, vec![Block::tool_result(
//!         "t1",
//!         Content::string("error[E0308]: mismatched types"),
//!     )]),
//! ];
//! let probes = Probes::from_original(&conv);
//! assert_eq!(probes.artifacts, ["out.log"]);
//! assert!(probes.errors.is_empty()); // no is_error, exit status or traceback: not an error result
//! assert_eq!(probes.last_request.as_deref(), Some("Fix the build"));
//! ```

pub mod errors;
mod lex;
pub mod paths;
pub mod request;
pub mod shell;

use condense_model::{Conversation, Message};
use serde::Serialize;

/// What the original conversation holds that its compressed form must keep.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Probes {
    /// Written paths, distinct, in the order they were first written.
    pub artifacts: Vec<String>,
    /// First meaningful lines of the error results (cut to 200 chars), distinct, in order.
    pub errors: Vec<String>,
    /// The request text of the last user prompt, when there is one.
    pub last_request: Option<String>,
}

impl Probes {
    /// The probes of `original`.
    pub fn from_original(original: &Conversation) -> Probes {
        Probes {
            artifacts: paths::written_paths(original),
            errors: errors::error_lines(original),
            last_request: request::last_request(original),
        }
    }
}

/// The messages whose tool calls and results are the session's work: every chat message, and
/// a sub-agent's lines, which the Claude Code reader carries beside the context as events that
/// keep their content (`isSidechain: true` in the line): what a sub-agent wrote is on disk and
/// the errors it hit happened, though the model never saw its lines.
pub(crate) fn work_messages(conv: &Conversation) -> impl Iterator<Item = &Message> {
    conv.messages
        .iter()
        .filter(|m| m.is_chat() || condense_formats::claude_code::is_sidechain_work(m))
}

/// A tool name as the spec compares it: lower case, `-` and spaces as `_`.
pub(crate) fn norm_tool(name: &str) -> String {
    name.trim()
        .chars()
        .map(|c| match c {
            '-' | ' ' => '_',
            c => c.to_ascii_lowercase(),
        })
        .collect()
}

/// Pushes `item` unless already there (keeps first-seen order).
pub(crate) fn push_distinct(list: &mut Vec<String>, item: String) {
    if !item.is_empty() && !list.contains(&item) {
        list.push(item);
    }
}

#[cfg(test)]
mod tests {
    use super::{norm_tool, Probes};
    use condense_model::{Block, Content, Conversation, Message, RawJson, Role, ToolResult};

    #[test]
    fn tool_names_compare_loosely() {
        assert_eq!(norm_tool("Str-Replace Editor"), "str_replace_editor");
        assert_eq!(norm_tool("MultiEdit"), "multiedit");
    }

    /// A chat line as the Claude Code reader keeps it when it is not context: an event with its
    /// content and the whole line as its envelope.
    fn carried(id: &str, blocks: Vec<Block>, sidechain: bool) -> Message {
        let mut m = Message::new(id, Role::Event, blocks);
        m.envelope = RawJson::from_string_unchecked(format!(
            r#"{{"type":"assistant","isSidechain":{sidechain},"message":{{"role":"assistant"}}}}"#
        ));
        m
    }

    #[test]
    fn a_sub_agents_writes_and_errors_are_probes_its_prompt_is_not_a_request() {
        let input = |s: &str| RawJson::from_string_unchecked(s.into());
        let failed = |id: &str, text: &str| {
            Block::ToolResult(ToolResult {
                is_error: Some(true),
                ..ToolResult::new(id, Content::string(text))
            })
        };
        let mut conv = Conversation {
            messages: vec![
                Message::new("u", Role::User, vec![Block::text("Build it")]),
                carried("s0", vec![Block::text("the sub-agent's prompt")], true),
                carried(
                    "s1",
                    vec![
                        Block::tool_use("t1", "Write", input(r#"{"file_path":"./types/todo.ts"}"#)),
                        Block::tool_use("t2", "Bash", input(r#"{"command":"ls types/"}"#)),
                    ],
                    true,
                ),
                carried(
                    "s2",
                    vec![failed("t2", "ls: types/: No such file or directory")],
                    true,
                ),
                // An abandoned branch is carried too, but it is not the session's work.
                carried(
                    "x1",
                    vec![Block::tool_use(
                        "t3",
                        "Write",
                        input(r#"{"file_path":"gone.ts"}"#),
                    )],
                    false,
                ),
            ],
            ..Conversation::default()
        };
        conv.messages[1].envelope =
            RawJson::from_string_unchecked(r#"{"type":"user","isSidechain":true}"#.into());
        let probes = Probes::from_original(&conv);
        assert_eq!(probes.artifacts, ["types/todo.ts"]);
        assert_eq!(probes.errors, ["ls: types/: No such file or directory"]);
        assert_eq!(probes.last_request.as_deref(), Some("Build it"));
    }
}
