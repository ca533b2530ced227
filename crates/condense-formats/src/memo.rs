//! The serialized texts of changed messages, kept from one write of a document to the next
//! write of the same session's next document.
//!
//! A proxy (`condense serve`) writes a session's request after request: each is the previous
//! one plus a turn, and most of the messages a stage changed (a tool result snip cut, a
//! collapse summary) are the same messages, changed the same way, in every request. Writing
//! them serialized each one again: at 200k tokens, about 7 M instructions a request, nearly all
//! of the writer. A [`WriteMemo`] handed from one [`Document::write_remembering`] to the next
//! keeps each changed message's serialized text by the message's fingerprint, so a request
//! serializes only the messages new to it.
//!
//! ```
//! use condense_formats::{read, ReadOptions, WriteMemo};
//!
//! let body = br#"{"model":"m","messages":[{"role":"user","content":"hi"}]}"#;
//! let mut doc = read(body, "body.json", &ReadOptions::default())?;
//! doc.conversations_mut()[0].messages[0].content = condense_model::Content::string("hello");
//! let mut memo = WriteMemo::new();
//! let first = doc.write_remembering(&mut memo)?;
//! assert_eq!(memo.len(), 1);
//! // The same write again takes the message's text from the memo: the same bytes.
//! assert_eq!(doc.write_remembering(&mut memo)?, first);
//! assert_eq!(*first, *doc.write()?);
//! # Ok::<(), condense_formats::FormatError>(())
//! ```
//!
//! What a text depends on is in its key or in the memo's context: the message's fingerprint
//! (what the writer already takes to mean "the same message", see [`crate::source`]), a hash
//! of the text the message was read from (its numbers are spelled alike), the format and the
//! input's style. A text is kept at no indent and with `\n` line ends, and indented where it is
//! spliced, so one text serves any place in the array. A memo keeps only what the last write
//! used or made: its size is that of one output's changed messages.
//!
//! [`Document::write_remembering`]: crate::Document::write_remembering

use crate::json::Style;
use condense_model::prehashed::{PrehashedMap, PrehashedSet};
use condense_model::Format;

/// See the `memo` module docs.
#[derive(Debug, Default)]
pub struct WriteMemo {
    /// Off: nothing is looked up or kept (a plain [`crate::Document::write`]).
    off: bool,
    /// The format and style the texts were written in; another one empties the memo.
    context: Option<(Format, Style)>,
    /// The texts the previous write used or made.
    kept: PrehashedMap<u128, Vec<String>>,
    /// The texts this write used or made (the next write's `kept`).
    made: PrehashedMap<u128, Vec<String>>,
    /// What the last write copied as read, for [`crate::Document::read_back`].
    echo: Option<crate::read_back::Echo>,
    /// The same for a Claude Code session's lines ([`crate::claude_code::read_back`]).
    lines_echo: Option<crate::read_back::LinesEcho>,
    /// Texts that read back as the message they were written from (by
    /// `read_back`'s `text_key`): a later write leaves them out of what is read back.
    /// Only those the last read back used or checked are kept.
    verified: PrehashedSet<u128>,
    /// The keys of the texts this write serialized (not taken from the memo): what a process
    /// that keeps the memo in a store writes there ([`WriteMemo::serialized`]).
    fresh: Vec<u128>,
    /// Set by [`WriteMemo::with_texts`]: the [`WriteMemo::context`] its texts were written in,
    /// adopted by the first write in that context (any other empties the memo).
    stored_context: Option<u128>,
    /// How many messages' texts were taken from the memo (for tests).
    #[cfg(test)]
    pub(crate) hits: usize,
}

impl WriteMemo {
    /// An empty memo.
    pub fn new() -> WriteMemo {
        WriteMemo::default()
    }

    /// A memo that keeps no texts: for a single write whose output is then read back
    /// ([`crate::Document::read_back`]).
    pub fn off() -> WriteMemo {
        WriteMemo {
            off: true,
            ..WriteMemo::default()
        }
    }

    /// A memo of `texts` (by key) an earlier write in `context` left ([`WriteMemo::texts`],
    /// [`WriteMemo::context`]): for a process that writes once per turn (`condense compress`)
    /// and keeps the memo in its store between turns. A write in another context (format or
    /// style) drops them.
    pub fn with_texts(context: u128, texts: impl IntoIterator<Item = (u128, Vec<String>)>) -> Self {
        WriteMemo {
            kept: texts.into_iter().collect(),
            stored_context: Some(context),
            ..WriteMemo::default()
        }
    }

    /// A hash of the format and style of the last write's texts (none before a write): what
    /// [`WriteMemo::with_texts`] is handed back with them.
    pub fn context(&self) -> Option<u128> {
        self.context.as_ref().map(context_hash)
    }

    /// The texts the last write used or made, by key (after [`crate::Document::write_remembering`]).
    pub fn texts(&self) -> impl Iterator<Item = (u128, &[String])> + '_ {
        self.kept.iter().map(|(k, t)| (*k, t.as_slice()))
    }

    /// The keys of the texts the last write serialized itself (the others it took from the
    /// memo), in the order it wrote them.
    pub fn serialized(&self) -> &[u128] {
        &self.fresh
    }

    /// How many messages' texts it keeps.
    pub fn len(&self) -> usize {
        self.kept.len() + self.made.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub(crate) fn is_off(&self) -> bool {
        self.off
    }

    /// Starts a write in `format` and `style`: texts written in another are dropped.
    pub(crate) fn begin(&mut self, format: Format, style: &Style) {
        if self.off {
            return;
        }
        if let Some(stored) = self.stored_context.take() {
            let context = (format, style.clone());
            if context_hash(&context) != stored {
                self.kept.clear();
            }
            self.context = Some(context);
        }
        if self
            .context
            .as_ref()
            .is_none_or(|(f, s)| *f != format || s != style)
        {
            self.kept.clear();
            self.made.clear();
            self.context = Some((format, style.clone()));
        }
    }

    /// The texts kept under `key`, kept for the next write as well.
    pub(crate) fn get(&mut self, key: u128) -> Option<&[String]> {
        if !self.made.contains_key(&key) {
            let texts = self.kept.remove(&key)?;
            self.made.insert(key, texts);
        }
        #[cfg(test)]
        {
            self.hits += 1;
        }
        self.made.get(&key).map(Vec::as_slice)
    }

    /// Keeps `texts` under `key` (never called on a memo that is off: see `Texts::piece_memo`).
    pub(crate) fn put(&mut self, key: u128, texts: Vec<String>) {
        self.fresh.push(key);
        self.made.insert(key, texts);
    }

    /// Starts a write: nothing serialized by it yet.
    pub(crate) fn start(&mut self) {
        self.fresh.clear();
    }

    /// Ends a write: what it did not use is dropped.
    pub(crate) fn end(&mut self) {
        self.kept = std::mem::take(&mut self.made);
    }

    /// The texts known to read back as the message they were written from (see
    /// [`crate::Document::read_back`]), to keep for the next write of the same session: a
    /// process that writes once per turn (`condense compress`) stores them and hands them back
    /// with [`WriteMemo::trust`].
    pub fn verified(&self) -> impl Iterator<Item = u128> + '_ {
        self.verified.iter().copied()
    }

    /// Takes `keys` (an earlier [`WriteMemo::verified`]) as texts that read back as their
    /// message: the next write leaves them out of what is read back.
    pub fn trust(&mut self, keys: impl IntoIterator<Item = u128>) {
        self.verified.clear();
        self.verified.extend(keys);
    }

    pub(crate) fn is_verified(&self, key: u128) -> bool {
        self.verified.contains(&key)
    }

    /// What the last write copied as read (none until a write notes it).
    pub(crate) fn echo(&self) -> Option<&crate::read_back::Echo> {
        self.echo.as_ref()
    }

    pub(crate) fn echo_mut(&mut self) -> &mut Option<crate::read_back::Echo> {
        &mut self.echo
    }

    pub(crate) fn lines_echo(&self) -> Option<&crate::read_back::LinesEcho> {
        self.lines_echo.as_ref()
    }

    pub(crate) fn lines_echo_mut(&mut self) -> &mut Option<crate::read_back::LinesEcho> {
        &mut self.lines_echo
    }
}

/// The hash of a memo's context (format and style), as [`WriteMemo::context`] gives it.
fn context_hash(context: &(Format, Style)) -> u128 {
    // Every field of the style, as its derived `Debug` spells them: a field added to the style
    // is part of the hash without a change here.
    let (format, style) = context;
    let spelled = format!("{} {style:?}", format.as_str());
    twox_hash::XxHash3_128::oneshot(spelled.as_bytes())
}

/// The key of a message's texts: its fingerprint and a hash of the text it was read from.
pub(crate) fn key(fp: u128, read_as: Option<&str>) -> u128 {
    let like = read_as.map_or(0, |t| twox_hash::XxHash3_64::oneshot(t.as_bytes()));
    let mut bytes = [0u8; 24];
    bytes[..16].copy_from_slice(&fp.to_le_bytes());
    bytes[16..].copy_from_slice(&like.to_le_bytes());
    twox_hash::XxHash3_128::oneshot(&bytes)
}
