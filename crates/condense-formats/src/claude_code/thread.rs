//! Which lines of a Claude Code session are the context Claude Code would send.
//!
//! A session file holds more than the conversation the model sees: sub-agent lines
//! (`isSidechain: true`, a `Task` agent's own conversation), branches abandoned by a rewind, and
//! whatever came before a compaction. Claude Code rebuilds the conversation from the **leaf**, the
//! last main-thread message, by following `parentUuid` back to the root; a compaction writes a
//! `compact_boundary` system line (with a `null` parent) and a compact summary (`isCompactSummary`)
//! whose parent is that boundary, so the walk stops there. When the compaction kept a preserved
//! segment (`compactMetadata.preservedSegment`: `headUuid`, `anchorUuid`), the segment's head is
//! spliced under its anchor, as Claude Code's loader does.
//!
//! The walk alone would lose the results of parallel tool calls: Claude Code writes one
//! assistant line per content block, each the parent of the next, and hangs each tool result
//! under the line of its own call, so only the last result is an ancestor of the leaf. Those
//! results were sent (the live session sent every result of a response; a resumed one repairs
//! the pairing), so a line beside the path joins it when it continues the same response: a user
//! line made of tool results that answer calls on the path and are not answered there yet, or an
//! assistant line of the same API message (`message.id`) as its parent.
//!
//! A line without a `parentUuid`, or whose `parentUuid` names no line of the file, continues
//! from the main-thread line (or compaction line) before it in the file. That reads
//! hand-written sessions in file order, and the output of a stage that removed lines (a
//! collapsed span, a compaction) as the stage left it: the line after a removed span points at a
//! line no longer there. (A guess: were an abandoned branch's last line right before a removed
//! span, the line after the span would continue from that branch.) A file whose chat lines are
//! all sidechain lines is a sub-agent's own transcript: its thread is those lines.
//!
//! ```text
//! u1 ─ a1 ─ u2 ─ a2(tool_use t1) ─ a2'(tool_use t2) ─ r2(t2) ─ a3   ← leaf
//!      │              └ r1(t1)     (beside the path: answers t1, joins)
//!      └ u2-old ─ a-old            (abandoned branch: not context)
//! ```

use crate::json::str_at;
use condense_model::ids::{id_map, id_set, IdMap, IdSet};
use serde_json::Value;

/// What the walk reads of one line: its `type`, `uuid`, `parentUuid`, flags, preserved
/// segment, and of its message the role, API id and content blocks. Made from a parsed line
/// ([`Facts::of_value`]) or from a line's text without a tree of it
/// (`super::line`, which reads the same fields).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Facts {
    /// `type`, when a string.
    pub kind: Option<String>,
    /// `uuid`, when a string.
    pub uuid: Option<String>,
    /// `parentUuid`: a string names the parent, `null` makes a root, anything else (or none)
    /// leaves the parent to the line before.
    pub parent: Parent,
    /// `isSidechain: true`.
    pub sidechain: bool,
    /// `subtype`, when a string.
    pub subtype: Option<String>,
    /// `isCompactSummary: true`.
    pub compact_summary: bool,
    /// `compactMetadata.preservedSegment`: (`headUuid`, `anchorUuid`).
    pub preserved: Option<(String, String)>,
    /// `message.role` is `user` or `assistant` (with `type` one of those, a chat line).
    pub chat_role: bool,
    /// `message.id`, when a string.
    pub message_id: Option<String>,
    /// `message.content`'s blocks when it is an array: each one's `type`, and its `id` (a tool
    /// use's) or `tool_use_id` (a tool result's) when a string.
    pub blocks: Option<Vec<BlockFacts>>,
}

/// A line's `parentUuid`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) enum Parent {
    /// Missing, or neither a string nor `null`.
    #[default]
    Unsaid,
    /// `null`: a root.
    Root,
    /// The parent's uuid.
    Named(String),
}

/// What the walk reads of a content block.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct BlockFacts {
    pub kind: Option<String>,
    /// `id` for a `tool_use` block, `tool_use_id` for a `tool_result` one.
    pub id: Option<String>,
}

impl BlockFacts {
    /// The facts of a parsed block.
    pub(crate) fn of_value(block: &Value) -> BlockFacts {
        let kind = str_at(block, "type");
        let key = match kind {
            Some("tool_use") => Some("id"),
            Some("tool_result") => Some("tool_use_id"),
            _ => None,
        };
        BlockFacts {
            kind: kind.map(str::to_string),
            id: key.and_then(|k| str_at(block, k)).map(str::to_string),
        }
    }
}

impl Facts {
    /// The facts of a parsed line.
    pub(crate) fn of_value(line: &Value) -> Facts {
        let message = line.get("message");
        let preserved = line
            .get("compactMetadata")
            .and_then(|m| m.get("preservedSegment"))
            .and_then(|s| Some((str_at(s, "headUuid")?, str_at(s, "anchorUuid")?)))
            .map(|(h, a)| (h.to_string(), a.to_string()));
        Facts {
            kind: str_at(line, "type").map(str::to_string),
            uuid: str_at(line, "uuid").map(str::to_string),
            parent: match line.get("parentUuid") {
                Some(Value::Null) => Parent::Root,
                Some(Value::String(uuid)) => Parent::Named(uuid.clone()),
                _ => Parent::Unsaid,
            },
            sidechain: line.get("isSidechain").and_then(Value::as_bool) == Some(true),
            subtype: str_at(line, "subtype").map(str::to_string),
            compact_summary: line.get("isCompactSummary").and_then(Value::as_bool) == Some(true),
            preserved,
            chat_role: message
                .and_then(|m| str_at(m, "role"))
                .is_some_and(|role| matches!(role, "user" | "assistant")),
            message_id: message.and_then(|m| str_at(m, "id")).map(str::to_string),
            blocks: message
                .and_then(|m| m.get("content"))
                .and_then(Value::as_array)
                .map(|blocks| blocks.iter().map(BlockFacts::of_value).collect()),
        }
    }

    /// Whether the line is a chat message (`type` user or assistant with a message of that
    /// role): the only lines that can reach the model.
    pub(crate) fn is_chat(&self) -> bool {
        matches!(self.kind.as_deref(), Some("user" | "assistant")) && self.chat_role
    }

    /// A line after which Claude Code's context starts over: the `compact_boundary` system
    /// line or the compact summary message.
    fn starts_context(&self) -> bool {
        (self.kind.as_deref() == Some("system")
            && self.subtype.as_deref() == Some("compact_boundary"))
            || self.compact_summary
    }

    /// The id of every content block of type `kind`.
    fn block_ids<'s>(&'s self, kind: &'s str) -> impl Iterator<Item = &'s str> + 's {
        self.blocks
            .iter()
            .flatten()
            .filter(move |b| b.kind.as_deref() == Some(kind))
            .filter_map(|b| b.id.as_deref())
    }
}

/// For each line, whether it is a message of the context Claude Code would send (see the module
/// docs). Non-chat lines are never context. Borrowed facts, so that a read back can take those
/// of the lines written as read from the read that made them ([`super::read_back()`]).
pub(crate) fn context_lines(lines: &[&Facts]) -> Vec<bool> {
    let walk = Walk::new(lines);
    let Some(leaf) = (0..lines.len()).rposition(|i| walk.main[i]) else {
        return vec![false; lines.len()];
    };
    walk.path_to(leaf)
        .into_iter()
        .zip(&walk.main)
        .map(|(on, main)| on && *main)
        .collect()
}

/// The parent links of a session.
struct Walk<'a> {
    lines: &'a [&'a Facts],
    /// By line: a chat line of the main thread (of the sub-agent, in a sub-agent's own file).
    main: Vec<bool>,
    by_uuid: IdMap<&'a str, usize>,
    /// Preserved segments of compactions: head uuid → anchor uuid.
    splices: IdMap<&'a str, &'a str>,
}

impl<'a> Walk<'a> {
    fn new(lines: &'a [&'a Facts]) -> Self {
        let sub_agent_file = lines.iter().filter(|l| l.is_chat()).all(|l| l.sidechain);
        let main = lines
            .iter()
            .map(|l| l.is_chat() && l.sidechain == sub_agent_file)
            .collect();
        // A uuid a line, hashed with foldhash: SipHash and the map's growth were 2% of a long
        // session's read.
        let mut by_uuid = id_map(lines.len());
        let mut splices = id_map(0);
        for (i, line) in lines.iter().enumerate() {
            if let Some(uuid) = &line.uuid {
                by_uuid.insert(uuid.as_str(), i);
            }
            if let Some((head, anchor)) = &line.preserved {
                splices.insert(head.as_str(), anchor.as_str());
            }
        }
        Walk {
            lines,
            main,
            by_uuid,
            splices,
        }
    }

    /// The line `i` continues from: its `parentUuid` (spliced for a preserved segment), none
    /// for a `null` one (a root), else the main-thread or compaction line before it.
    fn parent(&self, i: usize) -> Option<usize> {
        let line = &self.lines[i];
        let spliced = line
            .uuid
            .as_deref()
            .and_then(|u| self.splices.get(u).copied());
        let named = match (spliced, &line.parent) {
            (Some(anchor), _) => Some(anchor),
            (None, Parent::Root) => return None,
            (None, Parent::Named(uuid)) => Some(uuid.as_str()),
            (None, Parent::Unsaid) => None,
        };
        named
            .and_then(|uuid| self.by_uuid.get(uuid).copied())
            .or_else(|| (0..i).rfind(|&j| self.main[j] || self.lines[j].starts_context()))
    }

    /// The lines on the path from the root (or the last compaction) to `leaf`, with the lines
    /// beside it that continue the same responses.
    fn path_to(&self, leaf: usize) -> Vec<bool> {
        let mut on = vec![false; self.lines.len()];
        let mut at = Some(leaf);
        while let Some(i) = at {
            if on[i] {
                break; // a cycle in the links: the walk has been here
            }
            on[i] = true;
            if self.lines[i].starts_context() {
                break;
            }
            at = self.parent(i);
        }
        self.join_parallel(&mut on);
        on
    }

    /// Adds the lines beside the path that continue a response on it (module docs). Parents
    /// come before children in the file, so one pass in file order sees every candidate after
    /// the line that makes it one.
    fn join_parallel(&self, on: &mut [bool]) {
        let mut calls: IdSet<&str> = id_set(0);
        let mut answered: IdSet<&str> = id_set(0);
        for (line, _) in self.lines.iter().zip(on.iter()).filter(|(_, on)| **on) {
            calls.extend(line.block_ids("tool_use"));
            answered.extend(line.block_ids("tool_result"));
        }
        for i in 0..self.lines.len() {
            let line = &self.lines[i];
            if on[i] || !self.main[i] {
                continue;
            }
            let Some(parent) = self.parent(i).filter(|&p| on[p]) else {
                continue;
            };
            let joins = match line.kind.as_deref() {
                Some("user") => answers_open_calls(line, &calls, &answered),
                _ => line.message_id.is_some() && line.message_id == self.lines[parent].message_id,
            };
            if joins {
                on[i] = true;
                calls.extend(line.block_ids("tool_use"));
                answered.extend(line.block_ids("tool_result"));
            }
        }
    }
}

/// Whether a user line holds tool results only, each answering a call in `calls` that is not in
/// `answered`.
fn answers_open_calls(line: &Facts, calls: &IdSet<&str>, answered: &IdSet<&str>) -> bool {
    let Some(blocks) = &line.blocks else {
        return false;
    };
    !blocks.is_empty()
        && blocks.iter().all(|b| {
            b.kind.as_deref() == Some("tool_result")
                && b.id
                    .as_deref()
                    .is_some_and(|id| calls.contains(id) && !answered.contains(id))
        })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;

    fn line(uuid: &str, parent: Option<&str>, kind: &str, content: Value) -> Value {
        json!({
            "parentUuid": parent, "isSidechain": false, "type": kind, "uuid": uuid,
            "message": {"role": kind, "content": content}
        })
    }

    fn context(lines: &[Value]) -> Vec<bool> {
        let facts: Vec<Facts> = lines.iter().map(Facts::of_value).collect();
        context_lines(&facts.iter().collect::<Vec<_>>())
    }

    #[test]
    fn an_abandoned_branch_is_not_context() {
        let lines = [
            line("u1", None, "user", json!("first")),
            line(
                "a1",
                Some("u1"),
                "assistant",
                json!([{"type": "text", "text": "ok"}]),
            ),
            line(
                "u2",
                Some("a1"),
                "user",
                json!("the prompt the user rewound"),
            ),
            line(
                "a2",
                Some("u2"),
                "assistant",
                json!([{"type": "text", "text": "old"}]),
            ),
            line("u3", Some("a1"), "user", json!("the prompt instead")),
            line(
                "a3",
                Some("u3"),
                "assistant",
                json!([{"type": "text", "text": "new"}]),
            ),
        ];
        assert_eq!(context(&lines), [true, true, false, false, true, true]);
    }

    #[test]
    fn parallel_tool_results_beside_the_path_join_it() {
        let call = |id: &str| json!([{"type": "tool_use", "id": id, "name": "Read", "input": {}}]);
        let result = |id: &str| json!([{"type": "tool_result", "tool_use_id": id, "content": "x"}]);
        let mut a1 = line("a1", Some("u1"), "assistant", call("t1"));
        let mut a2 = line("a2", Some("a1"), "assistant", call("t2"));
        a1["message"]["id"] = json!("msg_1");
        a2["message"]["id"] = json!("msg_1");
        let lines = [
            line("u1", None, "user", json!("read both")),
            a1,
            a2,
            line("r1", Some("a1"), "user", result("t1")),
            line("r2", Some("a2"), "user", result("t2")),
            line(
                "a3",
                Some("r2"),
                "assistant",
                json!([{"type": "text", "text": "done"}]),
            ),
        ];
        assert_eq!(context(&lines), [true; 6]);
    }

    #[test]
    fn the_other_pieces_of_a_response_join_when_the_leaf_hangs_under_the_first() {
        let call = |id: &str| json!([{"type": "tool_use", "id": id, "name": "Read", "input": {}}]);
        let result = |id: &str| json!([{"type": "tool_result", "tool_use_id": id, "content": "x"}]);
        let mut a1 = line("a1", Some("u1"), "assistant", call("t1"));
        let mut a2 = line("a2", Some("a1"), "assistant", call("t2"));
        a1["message"]["id"] = json!("msg_1");
        a2["message"]["id"] = json!("msg_1");
        // The file ends with the result of the first call: the walk goes r1 → a1 → u1.
        let lines = [
            line("u1", None, "user", json!("read both")),
            a1,
            a2,
            line("r2", Some("a2"), "user", result("t2")),
            line("r1", Some("a1"), "user", result("t1")),
        ];
        assert_eq!(context(&lines), [true; 5]);
    }

    #[test]
    fn a_result_already_answered_on_the_path_does_not_join() {
        let call = json!([{"type": "tool_use", "id": "t1", "name": "Read", "input": {}}]);
        let result = json!([{"type": "tool_result", "tool_use_id": "t1", "content": "x"}]);
        let lines = [
            line("u1", None, "user", json!("read")),
            line("a1", Some("u1"), "assistant", call),
            line("r1-old", Some("a1"), "user", result.clone()),
            line("r1", Some("a1"), "user", result),
            line(
                "a2",
                Some("r1"),
                "assistant",
                json!([{"type": "text", "text": "ok"}]),
            ),
        ];
        assert_eq!(context(&lines), [true, true, false, true, true]);
    }

    #[test]
    fn a_compaction_starts_the_context_and_a_preserved_segment_is_spliced_in() {
        let boundary = json!({
            "parentUuid": null, "logicalParentUuid": "a1", "type": "system",
            "subtype": "compact_boundary", "uuid": "b",
            "compactMetadata": {"trigger": "auto", "preservedSegment":
                {"headUuid": "u2", "anchorUuid": "s", "tailUuid": "a2"}}
        });
        let mut summary = line(
            "s",
            Some("b"),
            "user",
            json!("This session is being continued"),
        );
        summary["isCompactSummary"] = json!(true);
        let lines = [
            line("u1", None, "user", json!("old")),
            line(
                "a1",
                Some("u1"),
                "assistant",
                json!([{"type": "text", "text": "old"}]),
            ),
            line("u2", Some("a1"), "user", json!("kept")),
            line(
                "a2",
                Some("u2"),
                "assistant",
                json!([{"type": "text", "text": "kept"}]),
            ),
            boundary,
            summary,
            line("u3", Some("a2"), "user", json!("next")),
        ];
        assert_eq!(
            context(&lines),
            [false, false, true, true, false, true, true]
        );
    }

    #[test]
    fn a_line_after_a_removed_span_continues_from_the_line_before_it() {
        // What a stage leaves: a summary line (parent null) in place of u1..a2, and u3 whose
        // parent a2 is gone.
        let lines = [
            json!({"type": "summary", "summary": "s"}),
            line("collapse-u1", None, "user", json!("[condense: summary]")),
            line("u3", Some("a2"), "user", json!("next")),
            line(
                "a3",
                Some("u3"),
                "assistant",
                json!([{"type": "text", "text": "ok"}]),
            ),
        ];
        assert_eq!(context(&lines), [false, true, true, true]);
        // A line without parentUuid (a message a stage created) continues the same way.
        let minimal =
            json!({"type": "user", "uuid": "new-1", "message": {"role": "user", "content": "x"}});
        let lines = [
            line("u1", None, "user", json!("first")),
            minimal,
            line(
                "a1",
                Some("new-1"),
                "assistant",
                json!([{"type": "text", "text": "ok"}]),
            ),
        ];
        assert_eq!(context(&lines), [true, true, true]);
    }

    #[test]
    fn a_sub_agents_own_file_is_its_thread() {
        let mut u = line("x1", None, "user", json!("find the tests"));
        let mut a = line(
            "x2",
            Some("x1"),
            "assistant",
            json!([{"type": "text", "text": "found"}]),
        );
        u["isSidechain"] = json!(true);
        a["isSidechain"] = json!(true);
        assert_eq!(context(&[u, a]), [true, true]);
    }

    #[test]
    fn sidechains_are_not_context_and_unlinked_sessions_start_after_the_last_compaction() {
        let mut side = line("x1", None, "user", json!("sub-agent prompt"));
        side["isSidechain"] = json!(true);
        let unlinked =
            |kind: &str| json!({"type": kind, "message": {"role": kind, "content": "hi"}});
        let lines = [
            unlinked("user"),
            json!({"type": "system", "subtype": "compact_boundary"}),
            unlinked("user"),
            side,
            unlinked("assistant"),
        ];
        assert_eq!(context(&lines), [false, false, true, false, true]);
    }
}
