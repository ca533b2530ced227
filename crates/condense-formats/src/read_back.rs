//! How a written document reads back, without parsing again what was written as it was read.
//!
//! After a run, condense reads its output back as `condense expand` will and archives every
//! message that reads back differently from what the stages produced (a summary gets the id
//! the format gives it). Most of an output is messages written as their exact input bytes,
//! which read back as they were read: parsing them again was a tenth of a turn at 1M tokens
//! (the whole output parsed, 600 KB of it as it was read). For an Anthropic, OpenAI Chat or
//! Responses request body whose frame (system prompt, tools, other fields) was written as
//! read, the write notes which
//! elements of the message array it copied and keeps a small document of the rest: the same
//! frame around only the elements it serialized. [`Document::read_back`] reads that document
//! and puts the copied messages back in their places, numbered as a read of the whole output
//! numbers them: the same conversation, which a test holds it to.
//!
//! The messages a stage changed are written again at every turn, mostly the same texts (the
//! results snip cut in earlier turns). A text read back as the very message it was written
//! from (all but the id) is kept by its [`text_key`] (the message's fingerprint and the text) in
//! the [`WriteMemo`]; a later write that writes the same message as the same text leaves it
//! out of what is read back too, since the same text reads back the same. `condense serve`
//! keeps the memo per session; `condense compress` stores the keys with the session.
//!
//! Anthropic's, OpenAI Chat's and Responses' readers read each element on its own (only the
//! `#n` id depends on the place; an OpenAI system prompt is an element like the others, and
//! one a stage set changes the frame; a Responses message a stage built as several items has
//! no echo). A Claude Code session's line reads as its text and its place in the thread: its
//! write notes which lines it copied ([`LinesEcho`]), and [`crate::claude_code::read_back`]
//! parses only the others (on a 15 MB session the whole output read again was a third of a
//! turn). Other formats (Codex's and OpenHands's grouped items, other JSONL files) read the
//! whole output again, as before.

use crate::container::Layout;
use crate::source::{Fp, Piece};
use crate::{Document, Format, FormatError, ReadOptions, WriteMemo};
use condense_model::fingerprint::Fingerprinter;
use condense_model::prehashed::PrehashedSet;
use condense_model::{Conversation, Message};
use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};

/// The output of one [`Document::write_remembering`]: its bytes, and which write made them. An
/// echo (`Echo`) belongs to one write, and [`Document::read_back`] takes its short way only
/// for that write's own output; knowing the write by this mark, not by hashing the bytes, spares
/// two passes over the whole output a turn (at 200k tokens, 800 KB hashed at the write and again
/// at the read back). The bytes cannot be changed in between: a `Written` only lends them, or
/// gives them up ([`Written::into_bytes`]).
#[derive(Debug, Clone)]
pub struct Written {
    bytes: Vec<u8>,
    write: u64,
}

/// Outputs are equal when their bytes are, whichever writes made them.
impl PartialEq for Written {
    fn eq(&self, other: &Written) -> bool {
        self.bytes == other.bytes
    }
}

impl Eq for Written {}

impl Written {
    /// The bytes, for a caller done reading them back.
    pub fn into_bytes(self) -> Vec<u8> {
        self.bytes
    }

    /// `bytes` as an output no write of this process made (the number no write takes: the
    /// count would have to reach it), for tests of what is read whole.
    #[cfg(test)]
    pub(crate) fn unmarked(bytes: Vec<u8>) -> Written {
        Written {
            bytes,
            write: u64::MAX,
        }
    }
}

impl std::ops::Deref for Written {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.bytes
    }
}

/// Marks the writes of this process, one number each ([`Written`]).
static WRITES: AtomicU64 = AtomicU64::new(0);

/// What one write copied of the message array: see the [module docs](self).
#[derive(Debug, Clone)]
pub(crate) struct Echo {
    /// Per message of the conversation written: it reads back as the message it was written
    /// from (its bytes as read, or a text an earlier read back checked).
    known: Vec<bool>,
    /// The frame as written around only the other elements; for a body at the root, `{"messages":
    /// [...]}` alone ([`Echo::frame_elided`]).
    serialized: String,
    /// The body's other members were left out of [`Echo::serialized`]: written as read, they
    /// read back as the document's own frame (system prompt, tools, other fields), which is
    /// taken instead of parsing them again (a Claude Code or SDK agent's frame, a 30 KB system
    /// prompt and 20 tool definitions, was 0.8 M instructions of a proxied turn's 8.8 M).
    frame_elided: bool,
    /// The [`text_key`] of each of those elements, in order.
    pending: Vec<u128>,
    /// The keys of the checked texts the write used.
    reused: Vec<u128>,
    /// The write the echo belongs to, once its output is whole ([`Written`]).
    output: Option<u64>,
}

/// What a write of a Claude Code session copied as read: for each line written, the input
/// line whose exact text it is (`None`: a line serialized, or a text set for expand), for
/// [`crate::claude_code::read_back`].
#[derive(Debug, Clone)]
pub(crate) struct LinesEcho {
    copied: Vec<Option<usize>>,
    /// The write it belongs to, once its output is whole ([`Written`]).
    output: Option<u64>,
}

impl LinesEcho {
    /// Each line's input line (for tests).
    #[cfg(test)]
    pub(crate) fn copied(&self) -> &[Option<usize>] {
        &self.copied
    }

    /// The echo of the lines `pieces`, written from an input `text` whose lines are at `spans`
    /// (in order).
    pub(crate) fn of(text: &str, spans: &[Range<usize>], pieces: &[Piece<'_>]) -> LinesEcho {
        // A piece that is an input line is a slice of `text` at that line's span: found by
        // where it lies (addresses compared, nothing read).
        let line_of = |piece: &Piece<'_>| {
            let Piece::Text(t) = piece else {
                return None;
            };
            let range = condense_text::range_in(text, t)?;
            let at = spans.binary_search_by_key(&range.start, |s| s.start).ok()?;
            (spans[at] == range).then_some(at)
        };
        LinesEcho {
            copied: pieces.iter().map(line_of).collect(),
            output: None,
        }
    }
}

/// The key of a text written for a message: the message's fingerprint and the text.
fn text_key(fp: Fp, text: &str) -> u128 {
    // Hashed in two pieces, not copied into one buffer: the same hash (xxh3's streaming form
    // gives what it gives for the joined bytes), without copying every changed text a write.
    let mut hash = Fingerprinter::new();
    std::hash::Hasher::write(&mut hash, &fp.to_le_bytes());
    std::hash::Hasher::write(&mut hash, text.as_bytes());
    hash.digest128()
}

impl Echo {
    /// The echo of an array written from `pieces` (one per message of the conversation, whose
    /// fingerprints are `fps`) into `out` at `ranges` (one per piece), inside `text` (the
    /// input, its frame written as read) at `array`, the `messages` of a body at the root when
    /// `root_body`; `memo` knows the texts checked before. `None` unless the format reads each
    /// element on its own.
    pub(crate) fn of(
        (format, pieces, fps): (Format, &[Piece<'_>], &[Fp]),
        (out, ranges): (&str, &[Range<usize>]),
        (text, array, root_body): (&str, &Range<usize>, bool),
        memo: &WriteMemo,
    ) -> Option<Echo> {
        // A Responses message a stage built may be written as several items (its text, each
        // call and each result): then there are more pieces than messages (every message is
        // written as at least one), and the output is read whole.
        let each_on_its_own = matches!(
            format,
            Format::Anthropic | Format::OpenAi | Format::Responses
        );
        if !each_on_its_own || pieces.len() != ranges.len() || pieces.len() != fps.len() {
            return None;
        }
        let mut echo = Echo {
            known: Vec::with_capacity(pieces.len()),
            serialized: String::new(),
            frame_elided: root_body,
            pending: Vec::new(),
            reused: Vec::new(),
            output: None,
        };
        let mut written: Vec<&str> = Vec::new();
        for ((piece, range), fp) in pieces.iter().zip(ranges).zip(fps) {
            if matches!(piece, Piece::Text(_)) {
                echo.known.push(true);
                continue;
            }
            let piece_text = out.get(range.clone())?;
            let key = text_key(*fp, piece_text);
            let checked = memo.is_verified(key);
            echo.known.push(checked);
            if checked {
                echo.reused.push(key);
            } else {
                echo.pending.push(key);
                written.push(piece_text);
            }
        }
        let list = written.iter().map(|t| t.len() + 1).sum::<usize>() + 2;
        // Anthropic's, OpenAI Chat's and Responses' readers read a body's messages whatever
        // its other members hold.
        let member;
        let (before, after) = if root_body {
            member = format!("{{\"{}\":", crate::body::list_member(format));
            (member.as_str(), "}")
        } else {
            (text.get(..array.start)?, text.get(array.end..)?)
        };
        echo.serialized = String::with_capacity(before.len() + list + after.len());
        echo.serialized.push_str(before);
        echo.serialized.push('[');
        for (k, element) in written.iter().enumerate() {
            if k > 0 {
                echo.serialized.push(',');
            }
            echo.serialized.push_str(element);
        }
        echo.serialized.push(']');
        echo.serialized.push_str(after);
        Some(echo)
    }

    /// How many messages read back as known (copied as read, or checked before).
    #[cfg(test)]
    pub(crate) fn known(&self) -> usize {
        self.known.iter().filter(|e| **e).count()
    }

    /// Whether the body's other members were left out ([`Echo::frame_elided`]).
    #[cfg(test)]
    pub(crate) fn frame_elided(&self) -> bool {
        self.frame_elided
    }

    /// How many of those were checked before.
    #[cfg(test)]
    pub(crate) fn reused(&self) -> usize {
        self.reused.len()
    }

    /// Notes the write the echo belongs to, once its output is whole.
    fn written(&mut self, write: u64) {
        self.output = Some(write);
    }
}

/// A conversation as its output reads back ([`Document::read_back`]).
#[derive(Debug, Clone, PartialEq)]
pub struct ReadBack {
    /// What a read of the output gives, except the messages [`ReadBack::same`] marks, left
    /// empty (no id, no content).
    pub conversation: Conversation,
    /// Per message: known to read back as the document's own message at that place (synthetic
    /// `#n` ids aside), so left out: copying them only to compare them was most of what
    /// remained of reading back. Empty after a read of the whole output.
    pub same: Vec<bool>,
}

impl ReadBack {
    /// A conversation read from the whole output: nothing left out.
    fn whole(conversation: Conversation) -> ReadBack {
        ReadBack {
            conversation,
            same: Vec::new(),
        }
    }

    /// The conversation a read of the whole output gives: the messages left out copied from
    /// `produced` (the document's conversation), those with a synthetic id numbered by their
    /// place (a message's own id, a Claude Code line's `uuid`, reads back as it is).
    pub fn into_conversation(mut self, produced: &Conversation) -> Conversation {
        let left_out = self.same.iter().enumerate().filter(|(_, s)| **s);
        for (i, _) in left_out {
            if let (Some(m), Some(p)) = (
                self.conversation.messages.get_mut(i),
                produced.messages.get(i),
            ) {
                *m = p.clone();
                if m.id.starts_with('#') {
                    m.id = condense_model::synthetic_id(i);
                }
            }
        }
        self.conversation
    }
}

impl Document {
    /// [`Document::write`], taking the texts of messages changed the same way as in an earlier
    /// write from `memo` and keeping this write's there for the next ([`WriteMemo`]): the same
    /// bytes, with only the messages new since serialized. For a document written again and
    /// again as it grows (a proxied session's requests). The output is marked as this write's
    /// ([`Written`]), for [`Document::read_back`].
    pub fn write_remembering(&self, memo: &mut WriteMemo) -> Result<Written, FormatError> {
        let bytes = self.write_bytes(memo);
        memo.end();
        let bytes = bytes?;
        let write = WRITES.fetch_add(1, Ordering::Relaxed);
        if let Some(echo) = memo.echo_mut() {
            echo.written(write);
        }
        if let Some(echo) = memo.lines_echo_mut() {
            echo.output = Some(write);
        }
        Ok(Written { bytes, write })
    }

    /// How `out` reads back (with `opts`, the options it was read with): what [`crate::read`]
    /// of `out` gives its conversations (`source` names `out` in an error), but for the messages
    /// known to read back as this document's own ([`ReadBack`]). `memo`: the memo of the write
    /// that gave `out` ([`Document::write_remembering`]), which says what that write copied as
    /// read; without it, or for the output of another write, `out` is read whole. The texts
    /// found to read back as their messages are kept in `memo` for the next write.
    pub fn read_back(
        &self,
        (out, source): (&Written, &str),
        memo: &mut WriteMemo,
        opts: &ReadOptions,
    ) -> Result<Vec<ReadBack>, FormatError> {
        let (read, verified) = if let Some((read, verified)) = self.read_serialized(out, memo, opts)
        {
            (vec![read], verified)
        } else if let Some(read) = self.read_lines_back(out, memo, opts) {
            (vec![read], PrehashedSet::default())
        } else {
            let whole = crate::read(out, source, opts)?.conversations;
            let whole = whole.into_iter().map(ReadBack::whole).collect();
            (whole, PrehashedSet::default())
        };
        memo.trust(verified);
        Ok(read)
    }

    /// [`read_back`](Self::read_back) of a Claude Code session's output, parsing only the lines
    /// its write serialized ([`crate::claude_code::read_back`]), when the write of `out` noted
    /// which lines it copied. Not for a file with a byte order mark or an incomplete last line
    /// carried through (read whole, as before).
    pub(crate) fn read_lines_back(
        &self,
        out: &Written,
        memo: &WriteMemo,
        opts: &ReadOptions,
    ) -> Option<ReadBack> {
        // Only a Claude Code session's read keeps its lines (`claude_lines`): no layout to check.
        let (Some(echo), Some(known), None, Some(Format::ClaudeCode), [produced]) = (
            memo.lines_echo(),
            &self.claude_lines,
            &opts.select,
            opts.format,
            &self.conversations[..],
        ) else {
            return None;
        };
        if echo.output != Some(out.write) || self.bom || !self.tail.is_empty() {
            return None;
        }
        let text = crate::utf8::str_of(&out.bytes)?;
        crate::claude_code::read_back(text, &echo.copied, known, produced)
    }

    /// [`read_back`](Self::read_back) from the echo of the write, when it has one for `out`;
    /// with the keys of the texts known to read back as their messages.
    pub(crate) fn read_serialized(
        &self,
        out: &Written,
        memo: &WriteMemo,
        opts: &ReadOptions,
    ) -> Option<(ReadBack, PrehashedSet<u128>)> {
        let (Some(echo), None, [produced]) = (memo.echo(), &opts.select, &self.conversations[..])
        else {
            return None;
        };
        if echo.output != Some(out.write)
            || echo.known.len() != produced.messages.len()
            || !matches!(self.layout, Layout::Json { .. })
        {
            return None;
        }
        // An error here is left for the read of the whole output to report in its own words.
        let doc = crate::read_owned(echo.serialized.as_bytes().to_vec(), "<output>", opts).ok()?;
        let [mut back] = <[Conversation; 1]>::try_from(doc.conversations).ok()?;
        if back.messages.len() != echo.pending.len() {
            return None;
        }
        if echo.frame_elided {
            back.system.clone_from(&produced.system);
            back.tools.clone_from(&produced.tools);
            back.extra.clone_from(&produced.extra);
        }
        let mut verified: PrehashedSet<u128> = echo.reused.iter().copied().collect();
        let mut read = std::mem::take(&mut back.messages)
            .into_iter()
            .zip(&echo.pending);
        let mut same = Vec::with_capacity(produced.messages.len());
        for (i, (message, &known)) in produced.messages.iter().zip(&echo.known).enumerate() {
            // A message with a synthetic id reads back as itself but for the id; another one
            // (a summary a stage made) reads back under `#i`, which the archive keeps.
            let left_out = known && message.id.starts_with('#');
            let m = if left_out {
                // Empty: nothing allocated.
                Message::new(String::new(), message.role, Vec::new())
            } else if known {
                let mut m = message.clone();
                m.id = condense_model::synthetic_id(i);
                m
            } else {
                let (mut m, key) = read.next()?;
                if m.same_but_id(message) {
                    verified.insert(*key);
                }
                // Numbered by its place in the output, as a read of the output numbers it.
                m.id = condense_model::synthetic_id(i);
                m
            };
            same.push(left_out);
            back.messages.push(m);
        }
        Some((
            ReadBack {
                conversation: back,
                same,
            },
            verified,
        ))
    }
}
