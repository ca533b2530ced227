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
//! pass with a hash set, no tokenizing, and only for a change that can break one: a message
//! replaced with the same shape ([`keeps_invariants`]) leaves the violations as they were.

use condense_model::ids::id_set;
use condense_model::{orphaned_tool_results, Block, Conversation, Message, ReadMessage, Role};
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
    #[cfg(test)]
    PASSES.set(PASSES.get() + 1);
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

/// Whether `new` in place of `old` (one message of a conversation) leaves the conversation's
/// [`violations`] as they were: what they are made of is the same in both (the id, the role,
/// whether the content is empty, the tool_use and tool_result ids, in order). Most stages'
/// changes are such (a tool result's text cut, cleared or persisted): the host then checks
/// those messages, not the whole conversation again (a pass over every message and id at
/// every change, 2% of a proxy turn at 200k tokens).
pub fn keeps_invariants(old: &Message, new: &Message) -> bool {
    old.id == new.id
        && old.role == new.role
        && is_empty_content(&old.content.blocks) == is_empty_content(&new.content.blocks)
        && old.tool_use_ids().eq(new.tool_use_ids())
        && old.tool_result_ids().eq(new.tool_result_ids())
}

#[cfg(test)]
thread_local! {
    /// How many times [`violations`] went over a conversation on this thread (tests only).
    static PASSES: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// How many times [`violations`] went over a conversation on this thread so far.
#[cfg(test)]
pub(crate) fn passes() -> usize {
    PASSES.get()
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

    /// Every fact `violations` reads is compared: changing any one of them is a change of shape;
    /// changing only a text is not.
    #[test]
    fn a_message_keeps_the_invariants_when_only_its_texts_change() {
        let old = Message::new("3", Role::Tool, vec![result("a"), Block::text("tail")]);
        let cut = Message::new(
            "3",
            Role::Tool,
            vec![
                Block::tool_result("a", Content::string("[cut]")),
                Block::text("t"),
            ],
        );
        assert!(keeps_invariants(&old, &cut));
        let changed = [
            Message::new("4", Role::Tool, vec![result("a"), Block::text("tail")]),
            Message::new("3", Role::User, vec![result("a"), Block::text("tail")]),
            Message::new("3", Role::Tool, vec![result("b"), Block::text("tail")]),
            Message::new("3", Role::Tool, vec![result("a"), call("c")]),
            Message::new("3", Role::Tool, vec![Block::text(" ")]),
        ];
        for new in &changed {
            assert!(!keeps_invariants(&old, new), "{new:?}");
        }
        let empty = Message::new("5", Role::User, vec![Block::text("")]);
        let blank = Message::new("5", Role::User, vec![Block::text("  ")]);
        let said = Message::new("5", Role::User, vec![Block::text("go")]);
        assert!(keeps_invariants(&empty, &blank));
        assert!(!keeps_invariants(&blank, &said));
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
