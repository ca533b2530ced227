//! The summary message: writing it, recognising it in the input, and adopting one found
//! without a record.

use crate::state::Collapse;
use crate::{ID_PREFIX, SUMMARY_MARKER};
use condense_model::{Content, Format, Message, ReadMessage, Role};

/// A summary message's header line, parsed: `(count, first, last)`.
pub fn parse_header(text: &str) -> Option<(usize, &str, &str)> {
    let rest = text.strip_prefix(SUMMARY_MARKER)?;
    let (count, rest) = rest.split_once(" earlier messages (ids ")?;
    let (ids, _) = rest.split_once(")]")?;
    let (first, last) = ids.split_once('…')?;
    Some((count.parse().ok()?, first, last))
}

/// Whether `message` is a summary message of this stage.
pub fn is_summary_message<M: ReadMessage + ?Sized>(message: &M) -> bool {
    message.role() == Role::User
        && message.id().starts_with(ID_PREFIX)
        && message
            .only_text()
            .is_some_and(|t| t.starts_with(SUMMARY_MARKER))
}

/// The summary message of a collapse, with the timestamp and, for Claude Code, the wrapper line
/// of `first`, the first message it replaces (see [`condense_formats::envelope_template`]; none
/// when the format is unknown).
pub fn summary_message(
    collapse: &Collapse,
    first: Option<&Message>,
    format: Option<Format>,
) -> Message {
    let text = format!(
        "{SUMMARY_MARKER}{} earlier messages (ids {}…{})]\n{}",
        collapse.count, collapse.first, collapse.last, collapse.summary
    );
    let mut message = Message {
        id: format!("{ID_PREFIX}{}", collapse.first),
        role: Role::User,
        timestamp: first.and_then(|m| m.timestamp.clone()),
        content: Content::string(text),
        extra: Default::default(),
        envelope: Default::default(),
    };
    if let (Some(first), Some(format)) = (first, format) {
        message.envelope = condense_formats::envelope_template(format, first, &message);
    }
    message
}

/// A collapse record for a summary message ([`is_summary_message`]: one text block) found in
/// the input without one.
pub(crate) fn adopt<M: ReadMessage + ?Sized>(message: &M, now_ms: i64) -> Collapse {
    let text = message.only_text().unwrap_or_default();
    let (header, body) = text.split_once('\n').unwrap_or((text, ""));
    let fallback = message.id().trim_start_matches(ID_PREFIX).to_string();
    let (count, first, last) = parse_header(header)
        .map(|(n, a, b)| (n, a.to_string(), b.to_string()))
        .unwrap_or((1, fallback.clone(), fallback));
    Collapse {
        first,
        last,
        count,
        turns: 1,
        ids: [message.id()].into_iter().collect(),
        summary: body.to_string(),
        merges: 0,
        committed_ms: now_ms,
        replaced_tokens: 0,
    }
}
