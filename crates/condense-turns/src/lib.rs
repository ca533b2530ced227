//! API-turn grouping and token estimates shared by the `context-collapse` and `autocompact`
//! stages.
//!
//! This is a plain library rather than a module of the `context-collapse` plugin because a
//! plugin library cannot link another plugin: both export the same loader symbol.
//!
//! # API turns
//!
//! A turn starts at a **user message that is not only tool results** (a [`Role::User`] message
//! holding at least one block that is not a `tool_result`) and holds every message up to the
//! next such message: the assistant messages, the tool-result messages (user messages holding
//! only tool results, [`Role::Tool`] messages) and the [`Role::Event`] lines that sit among them.
//!
//! - [`Role::System`] messages are never part of a turn, wherever they sit (they stay in the
//!   turn's index range but [`Turn::members`] skips them), and the content before the first turn
//!   (the *leading* part: system messages, anything before the first user message) belongs to
//!   no turn.
//! - A turn never separates a `tool_use` from its `tool_result`: a user message that would open a
//!   turn but answers a call made in an earlier message (a user typing while tool results come
//!   back) does not open one, so the call and its result stay in the same turn.
//!
//! ```
//! use condense_model::{Block, Message, RawJson, Role};
//! let msgs = vec![
//!     Message::new("s", Role::System, vec![Block::text("be brief")]),
//!     Message::new("u1", Role::User, vec![Block::text("hi")]),
//!     Message::new("a1", Role::Assistant, vec![Block::text("hello")]),
//!     Message::new("u2", Role::User, vec![Block::text("bye")]),
//! ];
//! let turns = condense_turns::group(&msgs);
//! assert_eq!(turns.leading_end, 1);
//! assert_eq!(turns.turns.len(), 2);
//! assert_eq!(turns.turns[0].range(), 1..3);
//! ```

pub mod measure;

use condense_model::{Block, Message, RawJson, Role};
use std::collections::{HashMap, HashSet};
use std::ops::Range;

/// One API turn: an index range of the message list (see the [crate docs](crate)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Turn {
    /// Index of the user message that opens the turn.
    pub start: usize,
    /// One past the turn's last message (the next turn's `start`, or the message count).
    pub end: usize,
}

impl Turn {
    /// `start..end`.
    pub fn range(&self) -> Range<usize> {
        self.start..self.end
    }

    /// Indices of the turn's messages: its range without [`Role::System`] messages.
    pub fn members<'m>(&self, messages: &'m [Message]) -> impl Iterator<Item = usize> + 'm {
        let range = self.start..self.end.min(messages.len());
        range.filter(move |&i| messages[i].role != Role::System)
    }
}

/// The turns of a message list.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Turns {
    /// In order; together they cover `leading_end..messages.len()`.
    pub turns: Vec<Turn>,
    /// Index of the first turn's start: the messages before it belong to no turn (the message
    /// count when there is no turn at all).
    pub leading_end: usize,
}

impl Turns {
    /// The turn holding message `index`, if any.
    pub fn turn_of(&self, index: usize) -> Option<usize> {
        if index < self.leading_end {
            return None;
        }
        let pos = self.turns.partition_point(|t| t.start <= index);
        pos.checked_sub(1).filter(|&t| index < self.turns[t].end)
    }
}

/// Whether `message` could open a turn: a user message with a block that is not a tool result.
pub fn opens_turn(message: &Message) -> bool {
    message.role == Role::User
        && message
            .content
            .blocks
            .iter()
            .any(|b| !matches!(b, Block::ToolResult(_)))
}

/// Groups `messages` into API turns.
pub fn group(messages: &[Message]) -> Turns {
    let n = messages.len();
    // Where each call is made (first occurrence, chat messages only).
    let mut calls: HashMap<&str, usize> = HashMap::new();
    for (i, m) in messages.iter().enumerate().filter(|(_, m)| m.is_chat()) {
        for tu in m.tool_uses() {
            calls.entry(tu.id.as_str()).or_insert(i);
        }
    }
    // A turn boundary before message k is forbidden when a call made before k is answered at
    // or after k: for a call at i answered at j, every k in i+1..=j.
    let mut diff = vec![0i64; n + 2];
    for (j, m) in messages.iter().enumerate().filter(|(_, m)| m.is_chat()) {
        for tr in m.tool_results() {
            if let Some(&i) = calls.get(tr.tool_use_id.as_str()) {
                if i < j {
                    diff[i + 1] += 1;
                    diff[j + 1] -= 1;
                }
            }
        }
    }
    let mut open_pairs = 0i64;
    let mut starts = Vec::new();
    for (k, m) in messages.iter().enumerate() {
        open_pairs += diff[k];
        if open_pairs == 0 && opens_turn(m) {
            starts.push(k);
        }
    }
    let turns: Vec<Turn> = starts
        .iter()
        .enumerate()
        .map(|(t, &start)| Turn {
            start,
            end: starts.get(t + 1).copied().unwrap_or(n),
        })
        .collect();
    Turns {
        leading_end: starts.first().copied().unwrap_or(n),
        turns,
    }
}

/// Every `tool_result` (in a chat message) whose `tool_use` is not in an earlier chat message:
/// `(message id, tool_use id)`. Both stages check their output with it: what they produce must
/// not orphan a result the input did not already orphan.
pub fn orphaned_tool_results(messages: &[Message]) -> Vec<(String, String)> {
    let mut seen: HashSet<&str> = HashSet::new();
    let mut orphans = Vec::new();
    for m in messages.iter().filter(|m| m.is_chat()) {
        for tr in m.tool_results() {
            if !seen.contains(tr.tool_use_id.as_str()) {
                orphans.push((m.id.clone(), tr.tool_use_id.clone()));
            }
        }
        for tu in m.tool_uses() {
            seen.insert(tu.id.as_str());
        }
    }
    orphans
}

/// Line fields that describe one Claude Code line rather than the session.
const LINE_ONLY_KEYS: &[&str] = &[
    "toolUseResult",
    "isMeta",
    "isCompactSummary",
    "isVisibleInTranscriptOnly",
    "isApiErrorMessage",
    "requestId",
];

/// For a Claude Code session (`source_format` `claude-code`), the wrapper line of `message` as
/// the template of a user message a stage writes in its place: the session's fields
/// (`sessionId`, `cwd`, `version`, `gitBranch`, ...) without those describing that one line
/// (`toolUseResult`, `isMeta`, ...), and `type` `user`. The host finds a session by the
/// `sessionId` of its first lines, so a summary written without it would lose the session's
/// state and archive. Empty for other formats and for messages without a wrapper line.
///
/// `new` is the message being written: its id and timestamp go where the line has them, as the
/// writer will put them, so the message reads back exactly as the stage wrote it (the host's
/// expansion archive finds messages by their content, envelope included).
pub fn envelope_template(source_format: &str, message: &Message, new: &Message) -> RawJson {
    if source_format != "claude-code" || !message.is_chat() {
        return RawJson::default();
    }
    let Ok(mut map) = message.envelope.to_map() else {
        return RawJson::default();
    };
    if map.is_empty() {
        return RawJson::default();
    }
    for key in LINE_ONLY_KEYS {
        map.shift_remove(*key);
    }
    if map.contains_key("type") {
        map.insert("type".into(), "user".into());
    }
    if let Some(serde_json::Value::String(uuid)) = map.get_mut("uuid") {
        uuid.clone_from(&new.id);
    }
    match &new.timestamp {
        Some(ts) => {
            if let Some(serde_json::Value::String(t)) = map.get_mut("timestamp") {
                t.clone_from(ts);
            } else if !map.contains_key("timestamp") {
                map.insert("timestamp".into(), ts.clone().into());
            }
        }
        None => {
            if matches!(map.get("timestamp"), Some(serde_json::Value::String(_))) {
                map.shift_remove("timestamp");
            }
        }
    }
    RawJson::from_map(map)
}

#[cfg(test)]
mod tests {
    use super::*;
    use condense_model::{Content, RawJson, ToolResult, ToolUse};

    fn text(id: &str, role: Role) -> Message {
        Message::new(id, role, vec![Block::text(id)])
    }
    fn call(id: &str, call: &str) -> Message {
        Message::new(
            id,
            Role::Assistant,
            vec![Block::ToolUse(ToolUse {
                id: call.into(),
                name: "Bash".into(),
                input: RawJson::default(),
                extra: RawJson::default(),
            })],
        )
    }
    fn result(call: &str) -> Block {
        Block::ToolResult(ToolResult {
            tool_use_id: call.into(),
            content: Content::string("ok"),
            is_error: None,
            extra: RawJson::default(),
        })
    }
    fn ranges(msgs: &[Message]) -> (usize, Vec<Range<usize>>) {
        let t = group(msgs);
        (t.leading_end, t.turns.iter().map(Turn::range).collect())
    }

    #[test]
    fn tool_results_and_events_travel_with_their_turn() {
        let msgs = vec![
            text("sys", Role::System),
            text("u1", Role::User),
            call("a1", "c1"),
            Message::new("r1", Role::User, vec![result("c1")]),
            text("ev", Role::Event),
            text("a2", Role::Assistant),
            text("u2", Role::User),
            call("a3", "c2"),
            Message::new("r2", Role::Tool, vec![result("c2")]),
        ];
        assert_eq!(ranges(&msgs), (1, vec![1..6, 6..9]));
    }

    #[test]
    fn a_user_message_answering_an_earlier_call_does_not_open_a_turn() {
        let msgs = vec![
            text("u1", Role::User),
            call("a1", "c1"),
            Message::new(
                "r1",
                Role::User,
                vec![result("c1"), Block::text("also this")],
            ),
            text("a2", Role::Assistant),
            text("u2", Role::User),
        ];
        assert_eq!(ranges(&msgs), (0, vec![0..4, 4..5]));
    }

    #[test]
    fn a_call_answered_much_later_keeps_everything_between_in_one_turn() {
        let msgs = vec![
            text("u1", Role::User),
            call("a1", "c1"),
            text("u2", Role::User),
            text("a2", Role::Assistant),
            Message::new("r1", Role::User, vec![result("c1")]),
            text("u3", Role::User),
        ];
        assert_eq!(ranges(&msgs), (0, vec![0..5, 5..6]));
    }

    #[test]
    fn system_messages_inside_a_turn_are_not_members() {
        let msgs = vec![
            text("u1", Role::User),
            text("s", Role::System),
            text("a1", Role::Assistant),
        ];
        let t = group(&msgs);
        assert_eq!(t.turns[0].members(&msgs).collect::<Vec<_>>(), vec![0, 2]);
        assert_eq!(t.turn_of(1), Some(0));
    }

    #[test]
    fn leading_content_and_no_turns() {
        let msgs = vec![text("s", Role::System), text("a", Role::Assistant)];
        assert_eq!(ranges(&msgs), (2, vec![]));
        let t = group(&msgs);
        assert_eq!(t.turn_of(0), None);
        assert_eq!(group(&[]).leading_end, 0);
    }

    #[test]
    fn claude_code_templates_keep_the_session_fields() {
        let mut m = text("x", Role::User);
        m.envelope = RawJson::from_string_unchecked(
            r#"{"parentUuid":"p","sessionId":"s1","type":"user","message":null,"uuid":"x","isMeta":true,"toolUseResult":{"a":1}}"#.into(),
        );
        let new = Message {
            timestamp: Some("2025-01-01T00:00:00Z".into()),
            ..text("summary-1", Role::User)
        };
        assert_eq!(
            envelope_template("claude-code", &m, &new).as_str(),
            r#"{"parentUuid":"p","sessionId":"s1","type":"user","message":null,"uuid":"summary-1","timestamp":"2025-01-01T00:00:00Z"}"#
        );
        assert!(envelope_template("openai", &m, &new).is_empty());
    }

    #[test]
    fn orphans_are_found() {
        let msgs = vec![
            Message::new("r0", Role::User, vec![result("c0")]),
            call("a1", "c1"),
            Message::new("r1", Role::User, vec![result("c1")]),
        ];
        assert_eq!(
            orphaned_tool_results(&msgs),
            vec![("r0".to_string(), "c0".to_string())]
        );
    }
}
