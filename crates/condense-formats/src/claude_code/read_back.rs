//! A session's output read back without parsing again the lines written as they were read.
//!
//! After a run, condense reads its output back as `condense expand` will ([`crate::read_back`]).
//! A session's output is mostly its input's lines, copied: every line outside the context (what
//! a compaction replaced, sub-agents' lines) and every message no stage changed. Reading the
//! whole output again parsed them all a second time: on a 15 MB session, 100 to 145 ms of a
//! 320 to 400 ms turn. A line's message depends on the line's text and on whether the thread
//! walk finds it in the context, so here only the lines the write serialized are parsed; the
//! walk runs over their facts and, for the lines copied, the facts the input's read made of the
//! same text ([`ReadLines`]). A copied line whose place in the thread is what it was reads back
//! as the message it was written from, and is left out ([`ReadBack::same`]); one whose place
//! changed is parsed again, as a read of the whole output would.

use super::{parse_line, prepare, thread, Prepared, ReadLines};
use crate::error::Ctx;
use crate::ReadBack;
use condense_model::{Conversation, Message};

/// How `text`, a session written from `produced` with each line's source in `copied` (the
/// input line it is the exact text of, or `None` for a line serialized), reads back, given what
/// the input's read knew of its lines (`known`). `None` when the lines are not the write's
/// (another count), or a line does not read: the caller reads the whole output, which reports
/// any error in its own words.
pub(crate) fn read_back(
    text: &str,
    copied: &[Option<usize>],
    known: &ReadLines,
    produced: &Conversation,
) -> Option<ReadBack> {
    let lines: Vec<(usize, usize, usize, &str)> = crate::lines::non_empty(text).collect();
    if lines.is_empty() || lines.len() != copied.len() || lines.len() != produced.messages.len() {
        return None;
    }
    let ctx = Ctx::new("<output>");
    // The lines serialized, parsed; the copied ones taken as the input's read made them.
    let mut from = Vec::with_capacity(lines.len());
    for ((number, _, _, line), copy) in lines.iter().zip(copied) {
        from.push(match copy {
            Some(at) => Origin::Copied(*at),
            None => Origin::Written(Box::new(parsed(*number, line, &ctx)?)),
        });
    }
    let facts: Vec<&thread::Facts> = from
        .iter()
        .map(|line| match line {
            Origin::Copied(at) => known.facts.get(*at),
            Origin::Written(read) => Some(&read.0),
        })
        .collect::<Option<_>>()?;
    let context = thread::context_lines(&facts);
    let mut messages = Vec::with_capacity(lines.len());
    let mut same = Vec::with_capacity(lines.len());
    for (index, (((number, _, _, line), from), produced)) in
        lines.iter().zip(from).zip(&produced.messages).enumerate()
    {
        let in_context = context[index];
        let (facts, prepared) = match from {
            Origin::Copied(at) if known.context.get(at) == Some(&in_context) => {
                // Read as the input's line was: the message written from. Empty: nothing
                // allocated.
                messages.push(Message::new(String::new(), produced.role, Vec::new()));
                same.push(true);
                continue;
            }
            // Copied, but its place in the thread changed: read as a whole read would.
            Origin::Copied(_) => parsed(*number, line, &ctx)?,
            Origin::Written(read) => *read,
        };
        let read = (index, in_context, facts.is_chat());
        messages.push(prepared.into_message(read, None, &ctx).ok()?);
        same.push(false);
    }
    Some(ReadBack {
        conversation: Conversation {
            messages,
            ..Conversation::default()
        },
        same,
    })
}

/// Where a line of the output comes from.
enum Origin<'t> {
    /// Copied from input line `.0`, as read.
    Copied(usize),
    /// Written anew: its facts and what its message is made of, parsed (boxed: most lines
    /// of an output are copied).
    Written(Box<(thread::Facts, Prepared<'t>)>),
}

/// Line `number` (`line`: its text) parsed and prepared as [`super::read`] does.
fn parsed<'t>(
    number: usize,
    line: &'t str,
    ctx: &Ctx<'_>,
) -> Option<(thread::Facts, Prepared<'t>)> {
    let read = parse_line(line).ok()?;
    Some(prepare(number, read, line, &ctx.at_line(number)))
}
