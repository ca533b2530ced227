//! Leaving unread the lines of a Claude Code session that an earlier read saw, byte for byte.
//!
//! Claude Code appends to its session file, and an agent that compresses once per turn hands
//! condense the whole file every time. The run resumes from the previous output, which
//! stands for the lines read before ([`crate::known`] does the same for a request body's
//! message list), so parsing them again was most of a turn: on a 15.5 MB session about two
//! thirds of its instructions. After a read, the list kept for the next one
//! ([`crate::known::KnownList`]) also holds, for a session, what the thread walk knew of each
//! line and whether it was context ([`LineMemo`]). A later read of a file that starts with
//! exactly those lines (the same bytes, hashed, from the same line number) reads only the
//! first [`ALWAYS_READ`] lines and the new ones; each line between is a placeholder with the
//! facts the earlier read kept ([`KnownLine`]).
//!
//! A new line can change which of the earlier lines are context (a rewind starts a branch, a
//! compaction starts over). So the thread is walked over every line's facts again, and when
//! any known line's place in it changed, the read gives up the known lines and reads every
//! line ([`read`] answers `None`): a placeholder stands for the very message the earlier read
//! made of the line, which depends on it.
//!
//! ```text
//! line 1..8      read (a session's id comes from them)
//! line 9..8,750  unread: facts from the memo, a placeholder each
//! line 8,751..   read (the new turn)
//! ```

use super::line::{self, Line};
use super::thread::{BlockFacts, Facts, Parent};
use super::ReadLines;
use crate::error::Ctx;
use crate::json::Result;
use crate::known::{self, Hashed, KnownList, ALWAYS_READ};
use crate::lines::{self, Lines};
use crate::notes::Notes;
use crate::parallel::{Lookup, Unread};
use crate::{Document, ReportedUsage};
use condense_model::packed::{put_len, put_str, Reader};
use condense_model::Format;
use std::sync::Arc;
use twox_hash::XxHash3_128;

/// What a read of a Claude Code session knew of its lines, kept with its list
/// ([`KnownList::lines`]) for a later read to leave them unread.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LineMemo {
    /// By line: what the thread walk read of it (shared with the read's
    /// [`ReadLines`]: a turn's list is kept without a copy of them).
    pub(crate) facts: Arc<Vec<Facts>>,
    /// By line: whether it was context.
    pub(crate) context: Vec<bool>,
    /// The 1-based numbers of the first and the last line.
    pub(crate) numbers: (usize, usize),
    /// The line whose usage was the session's reported usage, and that usage.
    pub(crate) usage: Option<(usize, ReportedUsage)>,
}

impl LineMemo {
    /// What `read` knew of the lines, the session's reported usage being `usage`.
    pub(crate) fn of(read: &ReadLines, usage: Option<&ReportedUsage>) -> LineMemo {
        LineMemo {
            facts: Arc::clone(&read.facts),
            context: read.context.clone(),
            numbers: read.numbers,
            usage: read.usage_line.zip(usage.cloned()),
        }
    }
}

/// A line left unread: what the earlier read knew of it.
#[derive(Debug)]
pub(crate) struct KnownLine {
    pub(crate) facts: Facts,
    /// The usage it reported, when it is the line whose usage the earlier read gave.
    pub(crate) usage: Option<ReportedUsage>,
}

/// A known list whose lines `text` starts with.
struct Found {
    list: KnownList,
    memo: LineMemo,
    /// Where the line after the list's last one starts.
    after: usize,
    hashed: Hashed,
}

/// The session `text` holds, with the lines of a list known under its first line's key left
/// unread (module docs). `None` when no list matches or a known line's place in the thread
/// changed: the caller reads every line. `shared`: as [`super::read`]'s.
pub(crate) fn read(
    text: &str,
    lookup: &Lookup<'_>,
    shared: Option<&Arc<String>>,
    ctx: &Ctx<'_>,
) -> Result<Option<Document>> {
    let Some(first) = lines::non_empty(text).next() else {
        return Ok(None);
    };
    let key = known::list_key(Format::ClaudeCode, first.3.as_bytes());
    let Some(found) = find(text, first, (lookup.lists)(key)) else {
        return Ok(None);
    };
    let Found {
        list,
        memo,
        after,
        hashed,
    } = found;
    let messages = list.messages;
    let mut values = Vec::with_capacity(messages);
    let mut spans = Vec::with_capacity(messages);
    for (number, start, _, line_text) in lines::non_empty(text).take(ALWAYS_READ) {
        // Parsed by the earlier read, so it parses.
        let Ok(read) = line::parse_line(line_text) else {
            return Ok(None);
        };
        values.push((number, read));
        spans.push(start..start + line_text.len());
    }
    let context = memo.context;
    let facts = Arc::try_unwrap(memo.facts).unwrap_or_else(|shared| shared.to_vec());
    let last_known = memo.numbers.1;
    for (i, facts) in facts.into_iter().enumerate().skip(ALWAYS_READ) {
        let usage = memo
            .usage
            .as_ref()
            .filter(|(at, _)| *at == i)
            .map(|(_, usage)| usage.clone());
        // Its own number is not counted (nothing reports it): the last known line's.
        values.push((
            last_known,
            Line::Unread(Box::new(KnownLine { facts, usage })),
        ));
        let (start, end) = list.spans[i];
        spans.push(first.1 + start as usize..first.1 + end as usize);
    }
    // What the read notes (a line cut short at the end) is kept apart until it is taken: a
    // read that gives up leaves the full read to note it, once.
    let notes = Notes::default();
    let attempt = Ctx::with_notes(ctx.source, &notes);
    let rest = lines::parse_with_from(text, (after, last_known), &attempt, line::parse_line)?;
    values.extend(rest.values);
    spans.extend(rest.spans);
    let lines = Lines {
        values,
        spans,
        body: rest.body,
        tail: rest.tail,
    };
    let mut doc = crate::container::claude_document(lines, shared, &attempt)?;
    let same_thread = doc
        .claude_lines
        .as_ref()
        .is_some_and(|read| read.context.get(..messages) == Some(&context[..]));
    if !same_thread {
        return Ok(None);
    }
    ctx.absorb(notes);
    let mut mask = vec![false; doc.conversations[0].messages.len()];
    mask[ALWAYS_READ..messages].fill(true);
    doc.source.unread = Some(Unread {
        mask,
        prints: list.prints,
    });
    doc.known_hashed = Some(hashed);
    Ok(Some(doc))
}

/// The longest of `lists` with a memo whose lines `text` starts with: the same first line
/// number, and the same bytes from the first line's start to the last known line's end
/// (hashed), which ends there (a line end follows).
fn find(
    text: &str,
    (number, start, _, first): (usize, usize, usize, &str),
    mut lists: Vec<KnownList>,
) -> Option<Found> {
    lists.sort_by_key(|l| std::cmp::Reverse(l.messages));
    lists.into_iter().find_map(|mut list| {
        let memo = list.lines.take()?;
        let m = list.messages;
        let whole = ALWAYS_READ < m
            && list.spans.len() == m
            && list.prints.len() == m
            && memo.facts.len() == m
            && memo.context.len() == m
            && memo.numbers.0 == number
            && list.spans.first() == Some(&(0, u32::try_from(first.len()).ok()?));
        if !whole {
            return None;
        }
        let end = start.checked_add(usize::try_from(list.spans[m - 1].1).ok()?)?;
        let mut state = XxHash3_128::new();
        state.write(text.as_bytes().get(start..end)?);
        if state.finish_128() != list.bytes {
            return None;
        }
        let rest = text.get(end..)?;
        let after = end
            + [("\n", 1), ("\r\n", 2)]
                .iter()
                .find(|(ending, _)| rest.starts_with(ending))?
                .1;
        let mut prefixes = list.shorter.clone();
        prefixes.push((m, list.bytes));
        let hashed = Hashed::new(start..end, state, prefixes);
        Some(Found {
            list,
            memo,
            after,
            hashed,
        })
    })
}

/// The flags of a line's facts, in one byte.
const SIDECHAIN: u8 = 1;
const COMPACT_SUMMARY: u8 = 2;
const CHAT_ROLE: u8 = 4;
const CONTEXT: u8 = 8;
const PARENT_ROOT: u8 = 16;
const PARENT_NAMED: u8 = 32;

/// An optional string: a byte (0 absent, 1 present), then the string as
/// [`condense_model::packed`] writes one.
fn put_opt(out: &mut Vec<u8>, s: Option<&str>) {
    match s {
        Some(s) => {
            out.push(1);
            put_str(out, s);
        }
        None => out.push(0),
    }
}

/// What [`put_opt`] wrote: `None` on bytes that are not it.
fn opt(r: &mut Reader<'_>) -> Option<Option<String>> {
    match r.byte()? {
        0 => Some(None),
        1 => Some(Some(r.string()?)),
        _ => None,
    }
}

/// The lines' facts and context flags, one after the other: a byte of flags, then the
/// strings ([`put_opt`]; the blocks a presence byte, their count and each one's two).
pub(crate) fn encode_lines(facts: &[Facts], context: &[bool]) -> Vec<u8> {
    let mut out = Vec::with_capacity(facts.len() * 160);
    for (facts, context) in facts.iter().zip(context) {
        let mut flags = 0;
        for (on, flag) in [
            (facts.sidechain, SIDECHAIN),
            (facts.compact_summary, COMPACT_SUMMARY),
            (facts.chat_role, CHAT_ROLE),
            (*context, CONTEXT),
            (facts.parent == Parent::Root, PARENT_ROOT),
            (matches!(facts.parent, Parent::Named(_)), PARENT_NAMED),
        ] {
            if on {
                flags |= flag;
            }
        }
        out.push(flags);
        put_opt(&mut out, facts.kind.as_deref());
        put_opt(&mut out, facts.uuid.as_deref());
        if let Parent::Named(parent) = &facts.parent {
            put_str(&mut out, parent);
        }
        put_opt(&mut out, facts.subtype.as_deref());
        match &facts.preserved {
            Some((head, anchor)) => {
                out.push(1);
                put_str(&mut out, head);
                put_str(&mut out, anchor);
            }
            None => out.push(0),
        }
        put_opt(&mut out, facts.message_id.as_deref());
        match &facts.blocks {
            Some(blocks) => {
                out.push(1);
                put_len(&mut out, blocks.len());
                for block in blocks {
                    put_opt(&mut out, block.kind.as_deref());
                    put_opt(&mut out, block.id.as_deref());
                }
            }
            None => out.push(0),
        }
    }
    out
}

/// The lines [`encode_lines`] wrote, appended to `facts` and `context`; `None` when `bytes`
/// are not such lines.
pub(crate) fn decode_lines(
    bytes: &[u8],
    (facts, context): (&mut Vec<Facts>, &mut Vec<bool>),
) -> Option<()> {
    let mut r = Reader::new(bytes);
    while !r.is_done() {
        let flags = r.byte()?;
        let kind = opt(&mut r)?;
        let uuid = opt(&mut r)?;
        let parent = if flags & PARENT_NAMED != 0 {
            Parent::Named(r.string()?)
        } else if flags & PARENT_ROOT != 0 {
            Parent::Root
        } else {
            Parent::Unsaid
        };
        let subtype = opt(&mut r)?;
        let preserved = match r.byte()? {
            0 => None,
            1 => Some((r.string()?, r.string()?)),
            _ => return None,
        };
        let message_id = opt(&mut r)?;
        let blocks = match r.byte()? {
            0 => None,
            // A count past what is left stops at the first block missing.
            1 => Some(
                (0..r.length()?)
                    .map(|_| {
                        Some(BlockFacts {
                            kind: opt(&mut r)?,
                            id: opt(&mut r)?,
                        })
                    })
                    .collect::<Option<Vec<_>>>()?,
            ),
            _ => return None,
        };
        facts.push(Facts {
            kind,
            uuid,
            parent,
            sidechain: flags & SIDECHAIN != 0,
            subtype,
            compact_summary: flags & COMPACT_SUMMARY != 0,
            preserved,
            chat_role: flags & CHAT_ROLE != 0,
            message_id,
            blocks,
        });
        context.push(flags & CONTEXT != 0);
    }
    Some(())
}
