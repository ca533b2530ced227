//! Finding the protected recent turns and unanswered messages, and the text snip measures.

use crate::markers::is_image_marker;
use condense_abi::{BlockView, ContentView, View};
use condense_model::ids::IdSet;
use condense_model::{Content, Conversation, Role};
use std::borrow::Cow;

/// The tool_use ids of the last `turns` assistant turns that called tools.
///
/// A turn is a run of consecutive assistant messages (event lines in between do not break it;
/// any other chat message does): Claude Code writes each block of one model response as its own
/// line, so the parallel calls of one response are one turn.
pub fn protected_ids<'v>(conv: &View<'v>, turns: usize) -> IdSet<&'v str> {
    // Walked from the end, so a long conversation's earlier turns are never looked at.
    let mut ids = IdSet::default();
    // Turns that called tools, counting the one the walk is in; whether it called any.
    let (mut found, mut calling) = (0, false);
    for message in conv.messages().rev().filter(|m| m.is_chat()) {
        if message.role() != Role::Assistant {
            // The last wanted turn ends here: stop rather than walk to the next caller.
            if calling && found == turns {
                break;
            }
            calling = false;
            continue;
        }
        let mut calls = message
            .blocks()
            .filter_map(|b| match b {
                BlockView::ToolUse { id, .. } => Some(id),
                _ => None,
            })
            .peekable();
        if calls.peek().is_none() {
            continue;
        }
        if !calling {
            if found == turns {
                break;
            }
            found += 1;
            calling = true;
        }
        ids.extend(calls);
    }
    ids
}

/// Index of the first chat message after the last assistant message: messages from there on
/// have not been answered yet, so their images are kept (when any turn is protected). `None`
/// when there is no such message.
pub fn first_unanswered(conv: &Conversation) -> Option<usize> {
    let last_assistant = conv
        .messages
        .iter()
        .rposition(|m| m.role == Role::Assistant);
    let from = last_assistant.map_or(0, |i| i + 1);
    (from < conv.messages.len()).then_some(from)
}

/// The text of a tool result's content that snip measures, compares and cuts:
/// [`Content::text`] without snip's own image markers (so stripping an image never changes it).
///
/// Borrowed when the content is one text block (most results): snip measures every result
/// of the conversation, and copying them all would hold the conversation's results twice.
pub fn payload_text<'v>(content: ContentView<'v>) -> Cow<'v, str> {
    let mut blocks = content.blocks();
    if let (Some(BlockView::Text { text, .. }), None) = (blocks.next(), blocks.next()) {
        if !is_image_marker(text) {
            return Cow::Borrowed(text);
        }
    }
    let mut out = String::new();
    for block in content.blocks() {
        match block {
            BlockView::Text { text, .. } if !is_image_marker(text) => {
                if !out.is_empty() {
                    out.push('\n');
                }
                out.push_str(text);
            }
            BlockView::ToolResult(nested) => {
                let text = nested.content().text();
                if !out.is_empty() && !text.is_empty() {
                    out.push('\n');
                }
                out.push_str(&text);
            }
            _ => {}
        }
    }
    Cow::Owned(out)
}

/// `content` with its text replaced by `text` (see `Content::with_text_replaced`).
pub fn replace_payload(content: &Content, text: String) -> Content {
    content.with_text_replaced(text, |t| is_image_marker(&t.text))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use condense_model::{Block, Message, RawJson, ToolUse};

    fn call(id: &str) -> Block {
        Block::ToolUse(ToolUse {
            id: id.into(),
            name: "Bash".into(),
            input: RawJson::default(),
            extra: RawJson::default(),
        })
    }

    #[test]
    fn consecutive_assistant_lines_are_one_turn() {
        let conv = Conversation {
            messages: vec![
                Message::new("a0", Role::Assistant, vec![call("t0")]),
                Message::new("u0", Role::User, vec![Block::text("results")]),
                Message::new(
                    "a1",
                    Role::Assistant,
                    vec![Block::text("reading two files")],
                ),
                Message::new("a2", Role::Assistant, vec![call("t1")]),
                Message::new("e", Role::Event, vec![]),
                Message::new("a3", Role::Assistant, vec![call("t2")]),
                Message::new("u1", Role::User, vec![Block::text("results")]),
                Message::new("a4", Role::Assistant, vec![Block::text("done")]),
            ],
            ..Conversation::default()
        };
        let input = condense_abi::Input::of(&conv);
        let view = input.view().unwrap();
        let mut one: Vec<&str> = protected_ids(&view, 1).into_iter().collect();
        one.sort();
        assert_eq!(one, ["t1", "t2"]);
        assert_eq!(protected_ids(&view, 2).len(), 3);
        assert!(protected_ids(&view, 0).is_empty());
        assert_eq!(first_unanswered(&conv), None);
    }

    /// The walk from the end against the plain definition (runs of consecutive assistant
    /// messages, those that call no tool left out, the last `turns` of them), on generated
    /// conversations.
    #[test]
    fn the_walk_from_the_end_finds_the_last_turns() {
        fn by_definition(conv: &Conversation, turns: usize) -> Vec<String> {
            let mut groups: Vec<Vec<String>> = Vec::new();
            let mut in_turn = false;
            for m in conv.messages.iter().filter(|m| m.role != Role::Event) {
                if m.role != Role::Assistant {
                    in_turn = false;
                    continue;
                }
                if !in_turn {
                    groups.push(Vec::new());
                    in_turn = true;
                }
                if let Some(g) = groups.last_mut() {
                    g.extend(m.content.blocks.iter().filter_map(|b| match b {
                        Block::ToolUse(t) => Some(t.id.clone()),
                        _ => None,
                    }));
                }
            }
            let mut ids: Vec<String> = groups
                .into_iter()
                .rev()
                .filter(|g| !g.is_empty())
                .take(turns)
                .flatten()
                .collect();
            ids.sort();
            ids
        }
        let mut seed = 0x9e37_79b9_u64;
        for case in 0..300 {
            let mut messages = Vec::new();
            for i in 0..(case % 23) {
                seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
                let pick = (seed >> 33) % 6;
                let role = match pick {
                    0..=2 => Role::Assistant,
                    3..=4 => Role::User,
                    _ => Role::Event,
                };
                let blocks = if role == Role::Assistant && (seed >> 40) % 2 == 0 {
                    vec![call(&format!("t{i}")), call(&format!("u{i}"))]
                } else {
                    vec![Block::text("words")]
                };
                messages.push(Message::new(format!("m{i}"), role, blocks));
            }
            let conv = Conversation {
                messages,
                ..Conversation::default()
            };
            let input = condense_abi::Input::of(&conv);
            let view = input.view().unwrap();
            for turns in 0..5 {
                let mut walked: Vec<&str> = protected_ids(&view, turns).into_iter().collect();
                walked.sort_unstable();
                assert_eq!(
                    walked,
                    by_definition(&conv, turns),
                    "case {case}, {turns} turns"
                );
            }
        }
    }
}
