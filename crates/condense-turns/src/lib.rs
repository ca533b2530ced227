//! API-turn grouping and token estimates, shared by the `context-collapse` and `autocompact`
//! stages and by the host's LLM summarizer (which drops whole API turns from the head of a span
//! when the API says the prompt is too long).
//!
//! Pure: it depends on the model and the budget arithmetic only, never on the ABI or a
//! tokenizer; [`measure`] counts with anything that implements
//! [`CountTokens`](condense_model::CountTokens). It is a plain library rather than a module of
//! the `context-collapse` plugin because a plugin library cannot link another plugin: both
//! export the same loader symbol.
//!
//! # API turns
//!
//! An API turn is one **API round**: one model call and what answers it. That is the unit
//! Claude Code groups by (its `truncateHeadForPTLRetry` drops whole API turns from the head), and
//! the unit that matters in agent sessions, which are dominated by long autonomous stretches: a
//! user types one prompt and the agent works through it with dozens or hundreds of model calls.
//! A turn is:
//!
//! - an **assistant response**: one or more *consecutive* [`Role::Assistant`] messages (Claude
//!   Code writes one response as several lines, one per content block: they are one response);
//! - with the **tool-result messages** that answer it: user messages holding only
//!   `tool_result` blocks, [`Role::Tool`] messages;
//! - opened, when there is one, by the **user prompt** it answers: a [`Role::User`] message that
//!   is not only tool results ([`is_user_prompt`]; typed text, an image, a slash command).
//!
//! So a new turn starts at every user prompt, and at every assistant message that follows a
//! tool-result message (the next call of an autonomous stretch). Precisely, looking only at chat
//! messages that are not [`Role::System`] (event lines and system messages never decide a
//! boundary), a message `k` opens a turn when
//!
//! 1. it comes at or after the first user prompt (everything before it, system messages, event
//!    lines, an assistant greeting, is the *leading* part, which belongs to no turn), and
//! 2. it is a user prompt, or an assistant message whose previous chat message is neither an
//!    assistant message nor a user prompt (so a tool-result message), or any chat message right
//!    after a [condense message](is_condense_message), and
//! 3. no `tool_use` made before `k` is answered by a `tool_result` at or after `k`: **a turn
//!    never separates a call from its result**. A result that answers a call of an earlier turn
//!    (a user prompt arriving while tool results come back, a `Task` call whose subagent's own
//!    lines are written before its result) merges every turn from the call's to the result's
//!    into one.
//!
//! A turn holds every message from its start up to the next turn's start:
//!
//! - [`Role::Event`] lines travel with the turn they sit in (an event line between two turns
//!   ends the earlier one);
//! - [`Role::System`] messages are never part of a turn, wherever they sit: they stay in the
//!   turn's index range but [`Turn::members`] skips them.
//!
//! A **condense message** (a user message of one text block starting with `[condense: `, written
//! by `context-collapse` or `autocompact` in place of earlier messages) is a turn of its own: it
//! stands for turns already gone, the model never answered it as a prompt. This keeps a stage's
//! output grouped the way its input was: a collapse summary followed by the next model call of
//! an autonomous stretch is two turns, not one.
//!
//! ```
//! use condense_model::{Block, Message, RawJson, Role, ToolResult, ToolUse};
//! let call = |id: &str| ToolUse {
//!     id: id.into(),
//!     name: "Read".into(),
//!     input: RawJson::default(),
//!     extra: RawJson::default(),
//! };
//! let result = |id: &str| ToolResult {
//!     tool_use_id: id.into(),
//!     content: condense_model::Content::string("ok"),
//!     is_error: None,
//!     extra: RawJson::default(),
//! };
//! let msgs = vec![
//!     Message::new("s", Role::System, vec![Block::text("be brief")]),
//!     Message::new("u1", Role::User, vec![Block::text("fix the bug")]),
//!     Message::new("a1", Role::Assistant, vec![Block::text("Reading the code.")]),
//!     Message::new("a2", Role::Assistant, vec![Block::ToolUse(call("c1"))]),
//!     Message::new("r1", Role::User, vec![Block::ToolResult(result("c1"))]),
//!     Message::new("a3", Role::Assistant, vec![Block::ToolUse(call("c2"))]),
//!     Message::new("r2", Role::User, vec![Block::ToolResult(result("c2"))]),
//!     Message::new("a4", Role::Assistant, vec![Block::text("Fixed.")]),
//!     Message::new("u2", Role::User, vec![Block::text("thanks")]),
//! ];
//! let turns = condense_turns::group(&msgs);
//! assert_eq!(turns.leading_end, 1);
//! let ranges: Vec<_> = turns.turns.iter().map(|t| t.range()).collect();
//! // The prompt and the first response (two lines) with its result; the next call and its
//! // result; the last response; the next prompt.
//! assert_eq!(ranges, vec![1..5, 5..7, 7..8, 8..9]);
//! ```

pub mod measure;

use condense_model::{ReadMessage, Role};
use std::collections::HashMap;
use std::ops::Range;

/// One API turn (one API round): an index range of the message list (see the [crate
/// docs](crate)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Turn {
    /// Index of the message that opens the turn: a user prompt, an assistant message (the next
    /// model call of an autonomous stretch) or a condense message.
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
    pub fn members<'m, M: ReadMessage>(
        &self,
        messages: &'m [M],
    ) -> impl Iterator<Item = usize> + 'm {
        let range = self.start..self.end.min(messages.len());
        range.filter(move |&i| messages[i].role() != Role::System)
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

pub use condense_model::CONDENSE_MARKER;

/// Whether `message` is a user prompt: a [`Role::User`] message with a block that is not a tool
/// result (typed text, an image, a slash command, a condense message). A user prompt always
/// opens a turn unless that would separate a call from its result.
pub fn is_user_prompt<M: ReadMessage + ?Sized>(message: &M) -> bool {
    message.role() == Role::User && message.has_non_result_block()
}

/// Whether `message` is one a condense stage wrote in place of earlier messages (a collapse
/// summary, a compaction summary, a restored file, a pinned item): a [`Role::User`] message of
/// one text block starting with [`CONDENSE_MARKER`]. It is a turn of its own.
pub fn is_condense_message<M: ReadMessage + ?Sized>(message: &M) -> bool {
    message.role() == Role::User
        && message
            .only_text()
            .is_some_and(|t| t.starts_with(CONDENSE_MARKER))
}

/// What a chat message is, for the turn boundaries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Prompt,
    Condense,
    Assistant,
    /// Tool results (a user message of only tool results, a [`Role::Tool`] message), or a user
    /// message without blocks.
    Results,
}

fn kind<M: ReadMessage>(message: &M) -> Kind {
    if is_condense_message(message) {
        Kind::Condense
    } else if is_user_prompt(message) {
        Kind::Prompt
    } else if message.role() == Role::Assistant {
        Kind::Assistant
    } else {
        Kind::Results
    }
}

/// Groups `messages` into API turns (API rounds, see the [crate docs](crate)).
pub fn group<M: ReadMessage>(messages: &[M]) -> Turns {
    let n = messages.len();
    // Where each call is made (first occurrence, chat messages only).
    let mut calls: HashMap<&str, usize> = HashMap::new();
    for (i, m) in messages.iter().enumerate().filter(|(_, m)| m.is_chat()) {
        for id in m.tool_use_ids() {
            calls.entry(id).or_insert(i);
        }
    }
    // A turn boundary before message k is forbidden when a call made before k is answered at
    // or after k: for a call at i answered at j, every k in i+1..=j.
    let mut diff = vec![0i64; n + 2];
    for (j, m) in messages.iter().enumerate().filter(|(_, m)| m.is_chat()) {
        for id in m.tool_result_ids() {
            if let Some(&i) = calls.get(id) {
                if i < j {
                    diff[i + 1] += 1;
                    diff[j + 1] -= 1;
                }
            }
        }
    }
    let mut open_pairs = 0i64;
    let mut starts = Vec::new();
    // The kind of the previous chat message that is not a system message; `None` in the
    // leading part (before the first user prompt).
    let mut previous: Option<Kind> = None;
    for (k, m) in messages.iter().enumerate() {
        open_pairs += diff[k];
        if !m.is_chat() || m.role() == Role::System {
            continue;
        }
        let this = kind(m);
        let opens = match (previous, this) {
            // The leading part ends at the first user prompt.
            (None, Kind::Prompt | Kind::Condense) => true,
            (None, _) => false,
            (Some(_), Kind::Prompt | Kind::Condense) => true,
            (Some(Kind::Condense), _) => true,
            (Some(Kind::Results), Kind::Assistant) => true,
            (Some(_), _) => false,
        };
        if previous.is_some() || opens {
            previous = Some(this);
        }
        if opens && open_pairs == 0 {
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

#[cfg(test)]
mod tests {
    use super::*;
    use condense_model::{orphaned_tool_results, Block, Content, Message, RawJson, ThinkingBlock};

    fn text(id: &str, role: Role) -> Message {
        Message::new(id, role, vec![Block::text(id)])
    }
    fn use_block(call: &str) -> Block {
        Block::tool_use(call, "Bash", RawJson::default())
    }
    fn call(id: &str, call: &str) -> Message {
        Message::new(id, Role::Assistant, vec![use_block(call)])
    }
    fn result(call: &str) -> Block {
        Block::tool_result(call, Content::string("ok"))
    }
    fn results(id: &str, call: &str) -> Message {
        Message::new(id, Role::User, vec![result(call)])
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
            results("r1", "c1"),
            text("ev", Role::Event),
            text("a2", Role::Assistant),
            text("u2", Role::User),
            call("a3", "c2"),
            Message::new("r2", Role::Tool, vec![result("c2")]),
            text("ev2", Role::Event),
        ];
        // u1 with its call and result (and the event line after it); the next response; u2 with
        // its call, the Role::Tool result and the trailing event line.
        assert_eq!(ranges(&msgs), (1, vec![1..5, 5..6, 6..10]));
    }

    #[test]
    fn an_autonomous_stretch_is_one_turn_per_model_call() {
        let msgs = vec![
            text("u1", Role::User),
            call("a1", "c1"),
            results("r1", "c1"),
            call("a2", "c2"),
            results("r2", "c2"),
            call("a3", "c3"),
            results("r3", "c3"),
            text("a4", Role::Assistant),
        ];
        assert_eq!(ranges(&msgs), (0, vec![0..3, 3..5, 5..7, 7..8]));
    }

    #[test]
    fn claude_code_split_assistant_lines_form_one_turn() {
        // One response written as three lines (text, then two tool_use blocks), with an event
        // line among them, then the results.
        let msgs = vec![
            text("u1", Role::User),
            text("a1-text", Role::Assistant),
            text("ev", Role::Event),
            call("a1-use1", "c1"),
            call("a1-use2", "c2"),
            results("r1", "c1"),
            results("r2", "c2"),
            Message::new(
                "a2-thinking",
                Role::Assistant,
                vec![Block::Thinking(ThinkingBlock {
                    thinking: "hmm".into(),
                    extra: RawJson::default(),
                })],
            ),
            text("a2-text", Role::Assistant),
        ];
        assert_eq!(ranges(&msgs), (0, vec![0..7, 7..9]));
    }

    #[test]
    fn parallel_calls_with_results_in_separate_messages_stay_in_one_turn() {
        let msgs = vec![
            text("u1", Role::User),
            Message::new(
                "a1",
                Role::Assistant,
                vec![use_block("c1"), use_block("c2")],
            ),
            results("r1", "c1"),
            Message::new("r2", Role::Tool, vec![result("c2")]),
            text("a2", Role::Assistant),
        ];
        assert_eq!(ranges(&msgs), (0, vec![0..4, 4..5]));
    }

    #[test]
    fn a_user_prompt_mid_stretch_opens_a_turn() {
        let msgs = vec![
            text("u1", Role::User),
            call("a1", "c1"),
            results("r1", "c1"),
            text("u2", Role::User),
            call("a2", "c2"),
            results("r2", "c2"),
            call("a3", "c3"),
            results("r3", "c3"),
        ];
        assert_eq!(ranges(&msgs), (0, vec![0..3, 3..6, 6..8]));
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
    fn interleaved_results_merge_the_turns_between_call_and_result() {
        // c1's result comes back after a later prompt and a later call: the turns from c1's to
        // its result's are one.
        let msgs = vec![
            text("u1", Role::User),
            call("a1", "c1"),
            text("u2", Role::User),
            call("a2", "c2"),
            results("r2", "c2"),
            text("a3", Role::Assistant),
            results("r1", "c1"),
            call("a4", "c4"),
            results("r4", "c4"),
            text("u3", Role::User),
        ];
        assert_eq!(ranges(&msgs), (0, vec![0..7, 7..9, 9..10]));
        let orphans =
            |msgs: &[Message], turn: Range<usize>| orphaned_tool_results(&msgs[turn]).len();
        for t in group(&msgs).turns {
            assert_eq!(orphans(&msgs, t.range()), 0, "{:?}", t.range());
        }
    }

    #[test]
    fn a_condense_message_is_a_turn_of_its_own() {
        let summary = Message::new(
            "collapse-u1",
            Role::User,
            vec![Block::text(
                "[condense: summary of 9 earlier messages (ids u1…r3)]\nx",
            )],
        );
        let msgs = vec![
            text("s", Role::System),
            summary,
            text("s2", Role::System),
            call("a4", "c4"),
            results("r4", "c4"),
            call("a5", "c5"),
            results("r5", "c5"),
        ];
        assert_eq!(ranges(&msgs), (1, vec![1..3, 3..5, 5..7]));
        assert!(is_condense_message(&msgs[1]));
        assert!(is_user_prompt(&msgs[1]));
        assert!(!is_condense_message(&text("u", Role::User)));
    }

    #[test]
    fn system_messages_inside_a_turn_are_not_members() {
        let msgs = vec![
            text("u1", Role::User),
            text("s", Role::System),
            text("a1", Role::Assistant),
        ];
        let t = group(&msgs);
        assert_eq!(t.turns.len(), 1);
        assert_eq!(t.turns[0].members(&msgs).collect::<Vec<_>>(), vec![0, 2]);
        assert_eq!(t.turn_of(1), Some(0));
    }

    #[test]
    fn leading_content_and_no_turns() {
        let msgs = vec![
            text("s", Role::System),
            call("a", "c0"),
            results("r", "c0"),
            text("a2", Role::Assistant),
        ];
        assert_eq!(ranges(&msgs), (4, vec![]));
        let t = group(&msgs);
        assert_eq!(t.turn_of(0), None);
        assert_eq!(group::<Message>(&[]).leading_end, 0);
        // The first user prompt ends the leading part.
        let mut msgs = msgs;
        msgs.push(text("u1", Role::User));
        msgs.push(text("a3", Role::Assistant));
        let t = group(&msgs);
        assert_eq!(t.leading_end, 4);
        assert_eq!(t.turns, vec![Turn { start: 4, end: 6 }]);
    }
}
