//! The stage's own messages, recognised in its input: an earlier summary read back, and the
//! API turns that are not a condense message's.

use crate::{is_condense_message, FILE_MARKER, ID_PREFIX, PIN_MARKER, SUMMARY_MARKER};
use condense_model::Message;

/// Whether `message` is one this stage wrote (summary, restored file, pinned item).
pub fn is_own_message(message: &Message) -> bool {
    message.id.starts_with(ID_PREFIX)
        && is_condense_message(message)
        && [SUMMARY_MARKER, FILE_MARKER, PIN_MARKER]
            .iter()
            .any(|m| message.content.text().starts_with(m))
}

/// `(n, count, summary)` of a summary message of this stage (`n` from its id when it parses).
pub fn parse_summary(message: &Message) -> Option<(usize, usize, String)> {
    if !is_own_message(message) {
        return None;
    }
    let text = message.content.text();
    let rest = text.strip_prefix(SUMMARY_MARKER)?;
    let (header, body) = rest.split_once('\n').unwrap_or((rest, ""));
    let count = header
        .strip_suffix(" messages]")
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let n = message
        .id
        .strip_prefix(ID_PREFIX)
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    Some((n, count, body.to_string()))
}

/// API turns (API rounds) that are real turns, not a condense message's.
pub(crate) fn real_turns(messages: &[Message]) -> Vec<condense_turns::Turn> {
    condense_turns::group(messages)
        .turns
        .into_iter()
        .filter(|t| !is_condense_message(&messages[t.start]))
        .collect()
}
