//! Incremental summaries: a previous summary parsed back into a `Digest`, and a new span's
//! digest merged into it section by section.
//!
//! Merge rules (previous ⊕ span):
//!
//! * **Decisions**, **Agent notes**: the span's items are appended (exact duplicates skipped),
//!   the most recent `MAX_DECISIONS` (12) and `MAX_NOTES` (40) kept; the budget trims oldest
//!   first.
//! * **Current state**: the span's last test run and last assistant message replace the
//!   previous ones when the span has them.
//! * **Pending tasks**: the span's todo list replaces the previous one when the span has one;
//!   an unanswered request is replaced by the span's, or cleared when the span has an assistant
//!   turn.
//! * Sections this summarizer does not know (a hand-edited or LLM-written previous summary)
//!   are kept verbatim after the known ones; text before the first heading is kept as
//!   `Earlier summary`. (The user's requests, files and errors of a previous summary are not
//!   the prose's: the host merges them from its retained record and strips them before.)

use super::render::{DECISIONS, NONE, NOTES, PENDING, STATE};
use super::sections::{Digest, LAST_ASSISTANT, LAST_TEST, MAX_DECISIONS, MAX_NOTES, UNANSWERED};
use condense_tokens::TokenCounter;

#[derive(Clone, Copy, PartialEq)]
enum Section {
    Decisions,
    Notes,
    State,
    Pending,
    /// Index into `Digest::extra`.
    Extra(usize),
}

fn known(heading: &str) -> Option<Section> {
    let h = heading.trim().to_ascii_lowercase();
    [
        (DECISIONS, Section::Decisions),
        (STATE, Section::State),
        (PENDING, Section::Pending),
        (NOTES, Section::Notes),
    ]
    .into_iter()
    .find(|(name, _)| name.to_ascii_lowercase() == h)
    .map(|(_, s)| s)
}

/// Parses a summary this summarizer wrote (anything else ends up in `extra`).
pub(crate) fn parse(summary: &str) -> Digest {
    let mut d = Digest::default();
    let mut section: Option<Section> = None;
    let mut preamble = String::new();
    let mut item: Option<String> = None;

    let finish = |d: &mut Digest, section: Option<Section>, item: &mut Option<String>| {
        let Some(text) = item.take() else { return };
        match section {
            Some(Section::Decisions) => d.decisions.push(text),
            Some(Section::Notes) => d.notes.push(text),
            Some(Section::State) if text.starts_with(LAST_TEST) => d.last_test = Some(text),
            Some(Section::State) if text.starts_with(LAST_ASSISTANT) => {
                d.last_assistant = Some(text)
            }
            Some(Section::Pending) if text.starts_with(UNANSWERED) => d.unanswered = Some(text),
            Some(Section::Pending) => d.todos.get_or_insert_with(Vec::new).push(text),
            _ => {}
        }
    };

    for line in summary.lines() {
        if let Some(heading) = line.strip_prefix("## ") {
            finish(&mut d, section, &mut item);
            section = Some(known(heading).unwrap_or_else(|| {
                d.extra.push((heading.trim().to_string(), String::new()));
                Section::Extra(d.extra.len() - 1)
            }));
            continue;
        }
        match section {
            None => {
                preamble.push_str(line);
                preamble.push('\n');
            }
            Some(Section::Extra(i)) => {
                if let Some((_, body)) = d.extra.get_mut(i) {
                    body.push_str(line);
                    body.push('\n');
                }
            }
            Some(_) => {
                if let Some(rest) = line.strip_prefix("- ") {
                    finish(&mut d, section, &mut item);
                    item = Some(rest.to_string());
                } else if let (Some(rest), Some(text)) = (line.strip_prefix("  "), item.as_mut()) {
                    text.push('\n');
                    text.push_str(rest);
                } else if line.trim() == NONE || is_omitted_marker(line) || line.trim().is_empty() {
                    finish(&mut d, section, &mut item);
                }
            }
        }
    }
    finish(&mut d, section, &mut item);
    for (_, body) in &mut d.extra {
        *body = body.trim_end().to_string();
    }
    let preamble = preamble.trim();
    if !preamble.is_empty() {
        d.extra
            .insert(0, ("Earlier summary".to_string(), preamble.to_string()));
    }
    d
}

fn is_omitted_marker(line: &str) -> bool {
    let l = line.trim();
    l.starts_with('(') && l.ends_with(" more omitted)")
}

/// Appends `later` to `earlier`, skipping items already there.
fn append(earlier: &mut Vec<String>, later: Vec<String>) {
    for item in later {
        if !earlier.contains(&item) {
            earlier.push(item);
        }
    }
}

/// `previous` with a later span's digest merged in (see the module docs for the rules).
pub(crate) fn merge(mut previous: Digest, span: Digest) -> Digest {
    append(&mut previous.decisions, span.decisions);
    let skip = previous.decisions.len().saturating_sub(MAX_DECISIONS);
    previous.decisions.drain(..skip);
    append(&mut previous.notes, span.notes);
    let skip = previous.notes.len().saturating_sub(MAX_NOTES);
    previous.notes.drain(..skip);
    if span.last_test.is_some() {
        previous.last_test = span.last_test;
    }
    if span.last_assistant.is_some() {
        previous.last_assistant = span.last_assistant;
    }
    if span.todos.is_some() {
        previous.todos = span.todos;
    }
    if span.unanswered.is_some() || span.saw_assistant {
        previous.unanswered = span.unanswered;
    }
    previous.saw_assistant |= span.saw_assistant;
    previous
}

/// Several summaries' prose (oldest first) merged into one, as a chain of merges would: each
/// later summary is merged into the earlier ones by the rules above (its todo list replaces
/// theirs, its state wins, ...). Rendered whole, with `counter`; `None` for no summary.
pub(crate) fn combine(texts: &[String], counter: &TokenCounter) -> Option<String> {
    let mut digests = texts.iter().map(|t| parse(t));
    let first = digests.next()?;
    let merged = digests.fold(first, |earlier, mut later| {
        // A summary that records an assistant message answered any earlier request.
        later.saw_assistant |= later.last_assistant.is_some();
        merge(earlier, later)
    });
    Some(super::render::render(&merged, counter, usize::MAX))
}
