//! Guarded outputs: the invariants the host checks after every stage.
//!
//! A stage's output must still be a conversation the API accepts:
//! - every tool_result answers a tool_use that comes earlier;
//! - message ids are unique;
//! - a `tool` message follows an assistant message (or another tool message);
//! - no chat message is empty (the APIs reject empty content).
//!
//! Real transcripts sometimes break these already (a truncated session ends on a dangling call,
//! an export repeats an id), so the host blames a stage only for violations it *introduced*:
//! it compares the violations of the output with those of the input. The check is one linear
//! pass with a hash set, no tokenizing.

use condense_model::ids::id_set;
use condense_model::{orphaned_tool_results, Block, Conversation, Role};
use std::collections::HashSet;
use std::fmt;

/// One broken invariant.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Violation {
    pub kind: ViolationKind,
    pub message_id: String,
    /// The tool_use id, for orphaned results.
    pub detail: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ViolationKind {
    OrphanedToolResult,
    DuplicateId,
    MisplacedToolMessage,
    EmptyMessage,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.kind {
            ViolationKind::OrphanedToolResult => write!(
                f,
                "orphaned tool_result for `{}` in message {} (no earlier tool_use with that id)",
                self.detail, self.message_id
            ),
            ViolationKind::DuplicateId => write!(f, "duplicate message id {}", self.message_id),
            ViolationKind::MisplacedToolMessage => write!(
                f,
                "tool message {} does not follow an assistant message",
                self.message_id
            ),
            ViolationKind::EmptyMessage => write!(f, "message {} has no content", self.message_id),
        }
    }
}

fn is_empty_content(blocks: &[Block]) -> bool {
    blocks
        .iter()
        .all(|b| matches!(b, Block::Text(t) if t.text.trim().is_empty()))
}

/// Every invariant `conv` breaks.
pub fn violations(conv: &Conversation) -> Vec<Violation> {
    let mut out = Vec::new();
    let mut orphans = orphaned_tool_results(&conv.messages).into_iter().peekable();
    // Sized once, one id per message: growing it rehashes the ids seen so far at each doubling.
    let mut ids = id_set::<&str>(conv.messages.len());
    let mut previous_role: Option<Role> = None;
    for (i, m) in conv.messages.iter().enumerate() {
        if !ids.insert(m.id.as_str()) {
            out.push(Violation {
                kind: ViolationKind::DuplicateId,
                message_id: m.id.clone(),
                detail: String::new(),
            });
        }
        if !m.is_chat() {
            continue;
        }
        if m.role == Role::Tool && !matches!(previous_role, Some(Role::Assistant | Role::Tool)) {
            out.push(Violation {
                kind: ViolationKind::MisplacedToolMessage,
                message_id: m.id.clone(),
                detail: String::new(),
            });
        }
        if is_empty_content(&m.content.blocks) {
            out.push(Violation {
                kind: ViolationKind::EmptyMessage,
                message_id: m.id.clone(),
                detail: String::new(),
            });
        }
        while let Some((_, tool_use_id)) = orphans.next_if(|(at, _)| *at == i) {
            out.push(Violation {
                kind: ViolationKind::OrphanedToolResult,
                message_id: m.id.clone(),
                detail: tool_use_id.to_string(),
            });
        }
        previous_role = Some(m.role);
    }
    out
}

/// Violations in `after` that `before` did not have (compared by kind and detail, and by
/// message id where ids survive).
pub fn introduced(before: &[Violation], after: &[Violation]) -> Vec<Violation> {
    let known: HashSet<&Violation> = before.iter().collect();
    after
        .iter()
        .filter(|v| !known.contains(v))
        .cloned()
        .collect()
}

/// One line describing what a stage broke.
pub fn describe(introduced: &[Violation]) -> String {
    let first = introduced
        .first()
        .map(ToString::to_string)
        .unwrap_or_default();
    match introduced.len() {
        0 | 1 => format!("broke an invariant: {first}"),
        n => format!("broke {n} invariants: {first} (and {} more)", n - 1),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use condense_model::{Content, Message, RawJson};

    fn call(id: &str) -> Block {
        Block::tool_use(id, "Read", RawJson::default())
    }
    fn result(id: &str) -> Block {
        Block::tool_result(id, Content::string("ok"))
    }

    #[test]
    fn a_well_formed_conversation_has_none() {
        let mut c = Conversation::default();
        c.messages
            .push(Message::new("1", Role::User, vec![Block::text("go")]));
        c.messages
            .push(Message::new("2", Role::Assistant, vec![call("a")]));
        c.messages
            .push(Message::new("3", Role::Tool, vec![result("a")]));
        assert!(violations(&c).is_empty());
    }

    #[test]
    fn each_kind_is_found() {
        let mut c = Conversation::default();
        c.messages
            .push(Message::new("1", Role::Tool, vec![result("x")]));
        c.messages
            .push(Message::new("1", Role::User, vec![Block::text("  ")]));
        let kinds: Vec<ViolationKind> = violations(&c).iter().map(|v| v.kind).collect();
        assert_eq!(
            kinds,
            [
                ViolationKind::MisplacedToolMessage,
                ViolationKind::OrphanedToolResult,
                ViolationKind::DuplicateId,
                ViolationKind::EmptyMessage
            ]
        );
    }

    #[test]
    fn only_new_violations_are_blamed() {
        let mut c = Conversation::default();
        c.messages
            .push(Message::new("1", Role::User, vec![result("old-orphan")]));
        let before = violations(&c);
        c.messages
            .push(Message::new("2", Role::User, vec![result("new-orphan")]));
        let new = introduced(&before, &violations(&c));
        assert_eq!(new.len(), 1);
        assert!(describe(&new).contains("new-orphan"), "{}", describe(&new));
    }
}
