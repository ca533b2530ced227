//! Finding the compressible tool results and the time since the last assistant message.

use crate::state::State;
use crate::time::{format_gap, parse_rfc3339_ms};
use crate::{is_cleared_marker, Config};
use condense_abi::{BlockView, ContentView, View};
use condense_model::{CountTokens, Piece, Role, ToolResultAt};
use std::collections::HashMap;

/// What an image is taken to cost: the most one image costs with Anthropic's rule (the figure
/// the token counter also uses for images it cannot size). Host token counting takes text only.
pub const IMAGE_TOKENS: usize = 1_600;

/// One compressible tool result outside the `keep_recent` window.
#[derive(Debug, Clone)]
pub struct Old {
    /// Where it sits, and its tool (always named: results of unknown calls are never old).
    pub at: ToolResultAt,
    pub tool_use_id: String,
    /// Tokens of its content now.
    pub tokens: usize,
    /// It already holds [`CLEARED_MARKER`](crate::CLEARED_MARKER).
    pub cleared: bool,
}

impl Old {
    /// The name of its tool, for events and pinned edits.
    pub fn tool(&self) -> &str {
        self.at.tool.as_deref().unwrap_or("?")
    }
}

/// The tool results of a conversation, sorted out.
#[derive(Debug, Default)]
pub struct Scan {
    /// Compressible results outside the keep window, in conversation order.
    pub old: Vec<Old>,
    /// Compressible results kept as the most recent ones.
    pub kept_recent: usize,
    /// Results of tools in `exclude_tools`.
    pub excluded: usize,
    /// Results of other tools, or whose tool_use is not in the conversation.
    pub other: usize,
}

impl Scan {
    pub fn new(conv: &View<'_>, config: &Config, counter: &dyn CountTokens) -> Scan {
        let mut scan = Scan::default();
        let mut compressible = Vec::new();
        // Event lines never reach the model: only chat messages' results count.
        for slot in conv.tool_results().filter(|r| r.role != Role::Event) {
            match slot.tool {
                Some(t) if config.exclude_tools.iter().any(|x| x == t) => scan.excluded += 1,
                Some(t) if config.compressible_tools.iter().any(|x| x == t) => {
                    compressible.push(slot);
                }
                _ => scan.other += 1,
            }
        }
        let split = compressible.len().saturating_sub(config.keep_recent);
        scan.kept_recent = compressible.len() - split;
        scan.old = compressible[..split]
            .iter()
            .map(|slot| Old {
                at: slot.at(),
                tool_use_id: slot.result.tool_use_id().to_string(),
                tokens: content_tokens(slot.result.content(), counter),
                cleared: is_cleared(slot.result.content()),
            })
            .collect();
        scan
    }
}

/// Whether a result's content is a cleared marker and nothing else.
pub fn is_cleared(content: ContentView<'_>) -> bool {
    let mut blocks = content.blocks();
    matches!(
        (blocks.next(), blocks.next()),
        (Some(BlockView::Text { text, .. }), None) if is_cleared_marker(text)
    )
}

/// Tokens of a content's payload: texts, tool inputs, nested results, opaque JSON; images at
/// [`IMAGE_TOKENS`].
pub fn content_tokens(content: ContentView<'_>, counter: &dyn CountTokens) -> usize {
    let mut tokens = 0;
    content.pieces(&mut |piece| {
        tokens += match piece {
            Piece::Text(text) => counter.count_tokens(text),
            Piece::Image { .. } => IMAGE_TOKENS,
        }
    });
    tokens
}

/// Time since the last assistant message, or why it is not known.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Gap {
    Known {
        ms: i64,
        /// Where the time came from, for notes.
        source: String,
    },
    Unknown(String),
}

impl Gap {
    /// The gap as the notes show it: `95 min`, `unknown`.
    pub fn show(&self) -> String {
        match self {
            Gap::Known { ms, .. } => format_gap(*ms),
            Gap::Unknown(_) => "unknown".to_string(),
        }
    }

    pub fn ms(&self) -> Option<i64> {
        match self {
            Gap::Known { ms, .. } => Some(*ms),
            Gap::Unknown(_) => None,
        }
    }

    /// Where the figure came from, or why there is none.
    pub fn source(&self) -> &str {
        match self {
            Gap::Known { source, .. } | Gap::Unknown(source) => source,
        }
    }
}

/// The gap at `now`: from the timestamp of the last assistant message when it has one, else
/// from the previous run recorded in `state`, when the conversation continues the one seen
/// then (see `continues`).
pub fn gap(conv: &View<'_>, state: &State, now: i64) -> Gap {
    let last_assistant = conv.messages().rev().find(|m| m.role() == Role::Assistant);
    let mut why = match last_assistant {
        None => "no assistant message".to_string(),
        Some(m) => match m.timestamp() {
            None => "no timestamp on the last assistant message".to_string(),
            Some(ts) => match parse_rfc3339_ms(ts) {
                Some(at) => {
                    return Gap::Known {
                        ms: (now - at).max(0),
                        source: format!("last assistant message at {ts}"),
                    }
                }
                None => format!("unreadable timestamp {ts:?} on the last assistant message"),
            },
        },
    };
    match state.last_seen_ms {
        Some(at) if continues(conv, state) => Gap::Known {
            ms: (now - at).max(0),
            source: format!("{why}; time since the previous run"),
        },
        Some(_) => {
            why.push_str(&format!(
                " and the previous run saw a longer conversation ({} messages, now {}{})",
                state.messages_seen,
                conv.len(),
                match &state.last_seen_id {
                    Some(id) => format!(", without its last message {id}"),
                    None => String::new(),
                }
            ));
            Gap::Unknown(why)
        }
        None => {
            why.push_str(" and no previous run");
            Gap::Unknown(why)
        }
    }
}

/// Whether `conv` continues the conversation the previous run saw: at least as long, or still
/// holding the last message it saw. A run resumed from the previous output sees it shorter
/// once a later stage collapsed or compacted its history, and the gap since that run is still
/// the gap since the request the cache holds.
fn continues(conv: &View<'_>, state: &State) -> bool {
    conv.len() >= state.messages_seen
        || state
            .last_seen_id
            .as_deref()
            .is_some_and(|id| conv.messages().rev().any(|m| m.id() == id))
}

/// Where each tool_use block is: (message index, block index) by tool_use id.
pub fn tool_use_positions<'v>(conv: &View<'v>) -> HashMap<&'v str, (usize, usize)> {
    let mut at = HashMap::new();
    for (mi, message) in conv.messages().enumerate() {
        if !message.is_chat() {
            continue;
        }
        for (bi, block) in message.blocks().enumerate() {
            if let BlockView::ToolUse { id, .. } = block {
                at.insert(id, (mi, bi));
            }
        }
    }
    at
}
