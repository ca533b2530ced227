//! Walking a conversation's tool results: the traversal every stage that clears, masks, persists
//! or truncates tool output needs, written once.
//!
//! [`Conversation::tool_results`] and [`Conversation::tool_results_mut`] visit each top-level
//! `tool_result` block in message order, with where it sits (message and block index), the
//! message's id and role, and the name of the tool whose `tool_use` it answers (from anywhere in
//! the conversation; `None` for an orphan). Stages that decide first and change later keep the
//! [`ToolResultAt`] of the results they chose and come back with
//! [`Conversation::tool_result_at_mut`].
//!
//! ```
//! use condense_model::{Block, Content, Conversation, Message, RawJson, Role, ToolResult, ToolUse};
//! let mut conv = Conversation::default();
//! let call = ToolUse { id: "c1".into(), name: "Read".into(), input: RawJson::default(), extra: RawJson::default() };
//! let result = ToolResult { tool_use_id: "c1".into(), content: Content::string("fn main() {}"), is_error: None, extra: RawJson::default() };
//! conv.messages.push(Message::new("a1", Role::Assistant, vec![Block::ToolUse(call)]));
//! conv.messages.push(Message::new("r1", Role::User, vec![Block::ToolResult(result)]));
//! for slot in conv.tool_results_mut() {
//!     assert_eq!((slot.at.message, slot.at.block, slot.at.tool.as_deref()), (1, 0, Some("Read")));
//!     slot.result.content = Content::string("[cleared]");
//! }
//! assert_eq!(conv.messages[1].content.text(), "[cleared]");
//! ```

use crate::{Block, Conversation, Message, Role, ToolResult};
use std::collections::HashMap;
use std::rc::Rc;

/// Where a tool result sits and which tool made it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ToolResultAt {
    /// Index of the message in [`Conversation::messages`].
    pub message: usize,
    /// Index of the block in that message's content.
    pub block: usize,
    /// Name of the tool whose `tool_use` this result answers (`None` for an orphan).
    pub tool: Option<String>,
}

/// One tool result, read-only: see [`Conversation::tool_results`]. The result is the model's
/// (`R` = `&ToolResult`) or another reading of it (`condense_abi::View::tool_results` gives its
/// borrowed view).
#[derive(Debug, Clone, Copy)]
pub struct ToolResultRef<'c, R = &'c ToolResult> {
    pub message: usize,
    pub block: usize,
    pub message_id: &'c str,
    pub role: Role,
    pub tool: Option<&'c str>,
    pub result: R,
}

impl<R> ToolResultRef<'_, R> {
    /// The owned position, to come back to with [`Conversation::tool_result_at_mut`].
    pub fn at(&self) -> ToolResultAt {
        ToolResultAt {
            message: self.message,
            block: self.block,
            tool: self.tool.map(str::to_string),
        }
    }
}

/// One tool result, to change in place: see [`Conversation::tool_results_mut`].
#[derive(Debug)]
pub struct ToolResultMut<'c> {
    pub at: ToolResultAt,
    pub message_id: &'c str,
    pub role: Role,
    pub result: &'c mut ToolResult,
}

impl Conversation {
    /// Every top-level tool result, in message order (see the [module docs](crate::visit)).
    pub fn tool_results(&self) -> impl Iterator<Item = ToolResultRef<'_>> {
        // Shared by every message's inner iterator: one map for the walk, not one per message.
        let names = Rc::new(self.tool_names_by_id());
        self.messages
            .iter()
            .enumerate()
            .flat_map(move |(mi, message)| {
                let names = Rc::clone(&names);
                message
                    .content
                    .blocks
                    .iter()
                    .enumerate()
                    .filter_map(move |(bi, block)| match block {
                        Block::ToolResult(result) => Some(ToolResultRef {
                            message: mi,
                            block: bi,
                            message_id: &message.id,
                            role: message.role,
                            tool: names.get(result.tool_use_id.as_str()).copied(),
                            result,
                        }),
                        _ => None,
                    })
            })
    }

    /// Every top-level tool result, in message order, to change in place.
    pub fn tool_results_mut(&mut self) -> Vec<ToolResultMut<'_>> {
        let names: HashMap<String, String> = self
            .tool_names_by_id()
            .into_iter()
            .map(|(id, name)| (id.to_string(), name.to_string()))
            .collect();
        let mut out = Vec::new();
        for (mi, message) in self.messages.iter_mut().enumerate() {
            let role = message.role;
            let id = message.id.as_str();
            for (bi, block) in message.content.blocks.iter_mut().enumerate() {
                if let Block::ToolResult(result) = block {
                    out.push(ToolResultMut {
                        at: ToolResultAt {
                            message: mi,
                            block: bi,
                            tool: names.get(&result.tool_use_id).cloned(),
                        },
                        message_id: id,
                        role,
                        result,
                    });
                }
            }
        }
        out
    }

    /// The tool result at `at`, if that block is still a tool result.
    pub fn tool_result_at_mut(&mut self, at: &ToolResultAt) -> Option<&mut ToolResult> {
        self.messages.get_mut(at.message)?.tool_result_mut(at.block)
    }
}

impl Message {
    /// The tool result that is block `block` of the content, if it is one.
    pub fn tool_result_mut(&mut self, block: usize) -> Option<&mut ToolResult> {
        match self.content.blocks.get_mut(block)? {
            Block::ToolResult(result) => Some(result),
            _ => None,
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use crate::{Block, Content, Conversation, Message, RawJson, Role, ToolResult, ToolUse};

    fn conversation() -> Conversation {
        let call = |id: &str, name: &str| {
            Block::ToolUse(ToolUse {
                id: id.into(),
                name: name.into(),
                input: RawJson::default(),
                extra: RawJson::default(),
            })
        };
        let result = |id: &str, text: &str| {
            Block::ToolResult(ToolResult {
                tool_use_id: id.into(),
                content: Content::string(text),
                is_error: None,
                extra: RawJson::default(),
            })
        };
        let mut conv = Conversation::default();
        conv.messages.extend([
            Message::new("u", Role::User, vec![Block::text("go")]),
            Message::new(
                "a",
                Role::Assistant,
                vec![call("c1", "Read"), call("c2", "Bash")],
            ),
            Message::new(
                "r",
                Role::User,
                vec![
                    Block::text("note"),
                    result("c1", "file"),
                    result("c2", "ok"),
                ],
            ),
            Message::new("t", Role::Tool, vec![result("gone", "orphan")]),
        ]);
        conv
    }

    #[test]
    fn visits_every_result_with_its_place_and_tool() {
        let conv = conversation();
        let seen: Vec<_> = conv
            .tool_results()
            .map(|r| {
                (
                    r.message,
                    r.block,
                    r.message_id,
                    r.tool,
                    r.result.content.text(),
                )
            })
            .collect();
        assert_eq!(
            seen,
            [
                (2, 1, "r", Some("Read"), "file".to_string()),
                (2, 2, "r", Some("Bash"), "ok".to_string()),
                (3, 0, "t", None, "orphan".to_string()),
            ]
        );
    }

    #[test]
    fn the_mutable_walk_agrees_and_positions_come_back() {
        let mut conv = conversation();
        let ats: Vec<_> = conv.tool_results().map(|r| r.at()).collect();
        let mut_ats: Vec<_> = conv.tool_results_mut().into_iter().map(|r| r.at).collect();
        assert_eq!(ats, mut_ats);
        for slot in conv.tool_results_mut() {
            if slot.role == Role::Tool {
                slot.result.content = Content::string("cleared");
            }
        }
        assert_eq!(conv.messages[3].content.text(), "cleared");
        let at = ats[0].clone();
        conv.tool_result_at_mut(&at).unwrap().content = Content::string("x");
        let Block::ToolResult(first) = &conv.messages[2].content.blocks[1] else {
            panic!("not a tool result")
        };
        assert_eq!(first.content.text(), "x");
        let wrong = crate::ToolResultAt {
            message: 2,
            block: 0,
            tool: None,
        };
        assert!(conv.tool_result_at_mut(&wrong).is_none());
    }
}
