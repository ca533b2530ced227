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

use condense_model::Conversation;
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
    use super::norm_tool;

    #[test]
    fn tool_names_compare_loosely() {
        assert_eq!(norm_tool("Str-Replace Editor"), "str_replace_editor");
        assert_eq!(norm_tool("MultiEdit"), "multiedit");
    }
}
