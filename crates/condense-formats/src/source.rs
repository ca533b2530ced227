//! The input's own bytes, kept so that what no stage changed is written back exactly as read.
//!
//! A [`Source`] holds the text of the file and, per conversation, its *units*: the byte span of
//! each message (a JSONL line, or an element of a JSON array) with a fingerprint of the
//! message(s) read from it. At write, a message value-equal to one as read is emitted as its
//! original bytes; only the others are serialized (in the input's style, [`Style`]), and the
//! bytes between them (separators, blank lines, the wrapper) are copied. Value-equal messages
//! that occur several times use their texts in file order.
//!
//! Texts given by [`crate::Document::set_original_text`] (what `expand` restores) come first.

use crate::away::Away;
use crate::json::{Result, Style};
use crate::memo::WriteMemo;
use crate::parallel::Unread;
use condense_model::prehashed::PrehashedMap;
use condense_model::{Conversation, Message};
use serde_json::Value;
use std::borrow::Cow;
use std::collections::HashMap;
use std::ops::Range;
use std::sync::{Arc, OnceLock};

/// A 128-bit fingerprint of a value (xxh3 over its `Hash`): equal values, equal fingerprints;
/// different ones collide with negligible probability.
pub(crate) type Fp = u128;

pub(crate) use condense_model::fingerprint::fingerprint;

/// The fingerprint of several messages written as one unit (a Codex `compacted` line and its
/// replacement history).
pub(crate) fn fingerprint_all(messages: &[Message]) -> Fp {
    fingerprint(messages)
}

/// The fingerprint of a message: a placeholder's for an unread one ([`crate::known`]) is the
/// known fingerprint of the message it stands for.
fn print_of(unread: Option<&Unread>, m: &Message) -> Fp {
    let known = unread.and_then(|u| {
        let k = crate::known::placeholder_index(m)?;
        (u.mask.get(k) == Some(&true)).then(|| u.prints.get(k).copied())?
    });
    known.unwrap_or_else(|| fingerprint(m))
}

/// The fingerprint of `m`, message `index` of the first conversation as read: for any message
/// of the prefix an earlier read knew (unread or read again), the one that read recorded. Its
/// text is the same bytes (the prefix matched), both reads were quick (a list is known only
/// after a quick read, and one with unread messages is read quick or read whole without them),
/// and a quick message's id is its position: the same message, so the same fingerprint
/// (`tests::known` checks it against a full read). A turn at 1M tokens hashed its ~600 kept
/// messages again: 1.2 M instructions.
fn print_as_read(unread: Option<&Unread>, index: usize, m: &Message) -> Fp {
    unread
        .and_then(|u| u.prints.get(index).copied())
        .unwrap_or_else(|| print_of(unread, m))
}

/// What a conversation holds besides its messages: a change there changes the wrapper.
fn frame(conv: &Conversation) -> Fp {
    fingerprint(&(&conv.system, &conv.tools, &conv.extra))
}

/// A conversation's fingerprint from its frame's and its messages' (each message is hashed
/// once).
fn whole(frame: Fp, messages: &[Fp]) -> Fp {
    fingerprint(&(frame, messages))
}

/// The input's text and where each conversation's messages were in it.
#[derive(Clone, Default)]
pub(crate) struct Source {
    /// The input without its byte order mark and incomplete last line; shared with the caller
    /// that read it ([`crate::read_shared_knowing`]), so a proxy can forward the bytes it got
    /// without a copy of its own.
    pub text: Arc<String>,
    /// The length of that text: known while reading, before the text is moved in at the end.
    pub body_len: usize,
    /// Where the text is while it is away ([`crate::Document::send_text_away`]): `text` is
    /// then empty.
    pub away: Option<Arc<Away>>,
    pub convs: Vec<ConvSource>,
    /// The messages of the first conversation left unread ([`crate::known`]), whose
    /// fingerprints are the known ones.
    pub unread: Option<Unread>,
    /// The fingerprints of the conversations as read, made on first use ([`Source::finish`]):
    /// a command that only reads (`stats`) never hashes the conversation.
    prints: OnceLock<Vec<ConvPrints>>,
}

impl std::fmt::Debug for Source {
    /// The sizes only: the text can be megabytes.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let units: usize = self.convs.iter().map(|c| c.units.len()).sum();
        write!(
            f,
            "Source {{ {} bytes, {} conversations, {units} units }}",
            self.text.len(),
            self.convs.len()
        )
    }
}

/// One conversation as read: where its messages are, and the texts set for expand.
#[derive(Debug, Clone, Default)]
pub(crate) struct ConvSource {
    pub units: Vec<Unit>,
    /// Texts set by `set_original_text`, by message fingerprint, in the order given.
    overrides: PrehashedMap<Fp, Vec<String>>,
}

/// The fingerprints of one conversation as read.
#[derive(Debug, Clone, Default)]
pub(crate) struct ConvPrints {
    /// The whole conversation's fingerprint.
    whole: Fp,
    /// The fingerprint of its system prompt, tools and other fields.
    frame: Fp,
    /// Unit indices by fingerprint, in file order.
    by_fp: PrehashedMap<Fp, Units>,
    /// Units of one message by the message's id (the first one read with that id), for ids
    /// that are not their message's place (`#12` for the message at index 12): those are found
    /// by `positional`. A list without ids of its own (every request body) keeps none here.
    by_id: HashMap<String, usize>,
    /// By message index: the unit of the message whose id is its [`synthetic_id`] (the first
    /// read with that id), else [`NO_UNIT`].
    ///
    /// [`synthetic_id`]: condense_model::synthetic_id
    positional: Vec<usize>,
    /// Each message's fingerprint, in order.
    each: Vec<Fp>,
}

/// No unit, in [`ConvPrints::positional`].
const NO_UNIT: usize = usize::MAX;

/// The units of one fingerprint, in file order: nearly always one, held without an allocation
/// (a `Vec` each was 2,400 allocations a read at 1M tokens).
#[derive(Debug, Clone)]
struct Units {
    first: usize,
    rest: Vec<usize>,
}

impl Default for Units {
    fn default() -> Self {
        Units {
            first: NO_UNIT,
            rest: Vec::new(),
        }
    }
}

impl Units {
    fn push(&mut self, unit: usize) {
        if self.first == NO_UNIT {
            self.first = unit;
        } else {
            self.rest.push(unit);
        }
    }

    /// The `n`th unit.
    fn get(&self, n: usize) -> Option<usize> {
        match n {
            0 => Some(self.first).filter(|&u| u != NO_UNIT),
            _ => self.rest.get(n - 1).copied(),
        }
    }

    fn iter(&self) -> impl Iterator<Item = usize> + '_ {
        (0..).map_while(|n| self.get(n))
    }
}

/// The text of one message (or of a few written together) as read.
#[derive(Debug, Clone)]
pub(crate) struct Unit {
    /// The first message read from it and how many.
    pub first: usize,
    pub count: usize,
    pub span: Range<usize>,
}

impl Source {
    /// A source whose text, to be filled in, is `len` bytes long.
    pub fn of_len(len: usize) -> Source {
        Source {
            body_len: len,
            ..Source::default()
        }
    }

    /// Fingerprints every conversation and unit, once. `conversations` must be as read: the
    /// document calls this before it first hands them out to be changed, and before anything
    /// that compares with them.
    pub fn finish(&self, conversations: &[Conversation]) {
        self.prints.get_or_init(|| {
            conversations
                .iter()
                .enumerate()
                .map(|(i, conv)| {
                    let units = self.convs.get(i).map_or(&[][..], |c| c.units.as_slice());
                    let unread = self.unread.as_ref().filter(|_| i == 0);
                    ConvPrints::of(conv, units, unread)
                })
                .collect()
        });
    }

    /// The fingerprints of conversation `i` as read (`None` before [`Source::finish`]: then
    /// nothing is taken for unchanged and everything is serialized).
    fn prints(&self, i: usize) -> Option<&ConvPrints> {
        self.prints.get()?.get(i)
    }

    /// Adds the unit of one message (or `count` messages) of conversation `conv`.
    pub fn add_unit(&mut self, conv: usize, first: usize, count: usize, span: Range<usize>) {
        if self.convs.len() <= conv {
            self.convs.resize_with(conv + 1, ConvSource::default);
        }
        self.convs[conv].units.push(Unit { first, count, span });
    }

    /// Whether conversation `i` is as read (and no text was set for it); `fps`: the
    /// [`fingerprint`] of each of its messages.
    pub fn unchanged(&self, i: usize, conv: &Conversation, fps: &[Fp]) -> bool {
        let no_overrides = self.convs.get(i).is_none_or(|s| s.overrides.is_empty());
        no_overrides
            && self
                .prints(i)
                .is_some_and(|p| p.whole == whole(frame(conv), fps))
    }

    /// The fingerprint of each message of conversation `i` as read (`None` before
    /// [`Source::finish`]).
    pub fn message_fingerprints(&self, i: usize) -> Option<&[Fp]> {
        self.prints(i).map(|p| p.each.as_slice())
    }

    /// Whether conversation `i`'s system prompt, tools and other fields are as read.
    pub fn frame_unchanged(&self, i: usize, conv: &Conversation) -> bool {
        self.prints(i).is_some_and(|p| p.frame == frame(conv))
    }

    /// The fingerprint of `message`, a message of conversation `i` ([`print_of`]).
    pub fn print_of(&self, i: usize, message: &Message) -> Fp {
        print_of(self.unread.as_ref().filter(|_| i == 0), message)
    }

    /// The fingerprint of each message of `conv`, conversation `i` as it is now.
    pub fn prints_now(&self, i: usize, conv: &Conversation) -> Vec<Fp> {
        crate::parallel::map_in_order(conv.messages.iter().collect(), |m| self.print_of(i, m))
    }

    /// The text a single message had, when a message value-equal to it was read.
    pub fn original_text(&self, i: usize, message: &Message) -> Option<Cow<'_, str>> {
        self.original_text_at(i, message, None)
    }

    /// [`Source::original_text`], preferring the text of the message read at `at` (its index
    /// in the conversation as read) when that message is value-equal to `message`. While the
    /// text is away, read from its file.
    pub fn original_text_at(
        &self,
        i: usize,
        message: &Message,
        at: Option<usize>,
    ) -> Option<Cow<'_, str>> {
        let (src, prints) = (self.convs.get(i)?, self.prints(i)?);
        let fp = self.print_of(i, message);
        let units = prints.by_fp.get(&fp)?;
        let single = || units.iter().map(|u| &src.units[u]).filter(|u| u.count == 1);
        let unit = single()
            .find(|u| Some(u.first) == at)
            .or_else(|| single().next())?;
        match &self.away {
            Some(away) => away.read(unit.span.clone()).map(Cow::Owned),
            None => self.text.get(unit.span.clone()).map(Cow::Borrowed),
        }
    }

    pub fn set_original_text(&mut self, i: usize, message: &Message, text: String) {
        if self.convs.len() <= i {
            self.convs.resize_with(i + 1, ConvSource::default);
        }
        let fp = fingerprint(message);
        self.convs[i].overrides.entry(fp).or_default().push(text);
    }

    /// A cursor over conversation `i`'s texts for one write.
    pub fn texts(&self, i: usize) -> Texts<'_> {
        Texts {
            text: &self.text,
            src: self.convs.get(i),
            prints: self.prints(i),
            used: PrehashedMap::default(),
        }
    }
}

impl ConvPrints {
    /// The fingerprints of `conv` as read, whose texts are `units`; an unread message's is the
    /// one known for it.
    fn of(conv: &Conversation, units: &[Unit], unread: Option<&Unread>) -> ConvPrints {
        // On every core for a long conversation: a long Claude Code session's messages took
        // 25 M instructions to hash, on the critical path of its read.
        let fps: Vec<Fp> =
            crate::parallel::map_in_order(conv.messages.iter().enumerate().collect(), |(i, m)| {
                print_as_read(unread, i, m)
            });
        let frame = frame(conv);
        let mut prints = ConvPrints {
            whole: whole(frame, &fps),
            frame,
            // Sized once: growing rehashes every key so far at each doubling (a read of 2,400
            // messages spent a quarter of its fingerprinting there).
            by_fp: PrehashedMap::with_capacity_and_hasher(units.len(), Default::default()),
            by_id: HashMap::new(),
            positional: vec![NO_UNIT; conv.messages.len()],
            each: Vec::new(),
        };
        for (i, unit) in units.iter().enumerate() {
            let range = unit.first..unit.first + unit.count;
            let (Some(messages), Some(one)) = (conv.messages.get(range), fps.get(unit.first))
            else {
                continue;
            };
            let fp = match messages {
                [_] => *one,
                many => fingerprint_all(many),
            };
            prints.by_fp.entry(fp).or_default().push(i);
            if let [one] = messages {
                prints.add_id(&one.id, unit.first, i);
            }
        }
        prints.each = fps;
        prints
    }

    /// Notes that the message at `index`, read alone as unit `unit`, has the id `id`.
    fn add_id(&mut self, id: &str, index: usize, unit: usize) {
        let named = condense_model::synthetic_index(id);
        if named == Some(index) {
            if let Some(slot) = self.positional.get_mut(index) {
                *slot = unit;
                return;
            }
        }
        // Units come in file order: an earlier message with this id as its place is the first.
        let earlier = named.is_some_and(|m| m < index && self.positional.get(m) != Some(&NO_UNIT));
        if !earlier {
            self.by_id.entry(id.to_string()).or_insert(unit);
        }
    }

    /// The unit of the first message read alone with the id `id`.
    fn unit_of_id(&self, id: &str) -> Option<usize> {
        if let Some(&unit) = self.by_id.get(id) {
            return Some(unit);
        }
        let index = condense_model::synthetic_index(id)?;
        self.positional
            .get(index)
            .copied()
            .filter(|&u| u != NO_UNIT)
    }
}

/// The original texts of one conversation, each used once per write, in file order.
pub(crate) struct Texts<'s> {
    text: &'s str,
    src: Option<&'s ConvSource>,
    prints: Option<&'s ConvPrints>,
    /// By fingerprint: how many overrides and units were used.
    used: PrehashedMap<Fp, (usize, usize)>,
}

/// One piece of output: original text, or a value to serialize.
#[derive(Debug)]
pub(crate) enum Piece<'s> {
    /// Original bytes (a unit's span, or a text set for expand).
    Text(&'s str),
    /// Text made from original bytes with something spliced in.
    Owned(String),
    Value(Value),
    /// A value to serialize, its numbers spelled as in `like` (the text of the message it was
    /// read as) where their values match: `1e5` stays `1e5`.
    Respelled {
        value: Value,
        like: &'s str,
    },
    /// A value serialized already (numbers respelled), at no indent and with `\n` line ends:
    /// indented where it is placed ([`crate::memo`]).
    Serialized(String),
}

impl<'s> Texts<'s> {
    /// The text for a message value-equal to one read (or set), not used yet in this write.
    pub fn take(&mut self, message: &Message) -> Option<&'s str> {
        self.take_fp(fingerprint(message))
    }

    /// [`Texts::take`] for a unit of several messages.
    pub fn take_all(&mut self, messages: &[Message]) -> Option<&'s str> {
        self.take_fp(fingerprint_all(messages))
    }

    fn take_fp(&mut self, fp: Fp) -> Option<&'s str> {
        let src = self.src?;
        let used = self.used.entry(fp).or_default();
        if let Some(text) = src.overrides.get(&fp).and_then(|t| t.get(used.0)) {
            used.0 += 1;
            return Some(text);
        }
        let unit = self.prints?.by_fp.get(&fp)?.get(used.1)?;
        used.1 += 1;
        self.text.get(src.units[unit].span.clone())
    }

    /// The text the message with this id was read from (to spell its numbers alike).
    fn read_as(&self, id: &str) -> Option<&'s str> {
        let unit = self.src?.units.get(self.prints?.unit_of_id(id)?)?;
        self.text.get(unit.span.clone())
    }

    /// The piece for a message whose [`fingerprint`] is `fp`: its text, or what `write` makes
    /// of it (numbers spelled as in the text it was read from).
    pub fn piece_fp(
        &mut self,
        message: &Message,
        fp: Fp,
        write: impl FnOnce() -> Result<Vec<Value>>,
    ) -> Result<Vec<Piece<'s>>> {
        if let Some(text) = self.take_fp(fp) {
            return Ok(vec![Piece::Text(text)]);
        }
        let like = self.read_as(&message.id);
        Ok(write()?
            .into_iter()
            .map(|value| match like {
                Some(like) => Piece::Respelled { value, like },
                None => Piece::Value(value),
            })
            .collect())
    }

    /// [`Texts::piece_fp`] with the serialized texts of an earlier write kept in `memo`
    /// ([`crate::memo`]): a message changed the same way as in the previous write is not
    /// serialized again.
    pub fn piece_memo(
        &mut self,
        message: &Message,
        fp: Fp,
        (style, memo): (&Style, &mut WriteMemo),
        write: impl FnOnce() -> Result<Vec<Value>>,
    ) -> Result<Vec<Piece<'s>>> {
        if memo.is_off() {
            return self.piece_fp(message, fp, write);
        }
        if let Some(text) = self.take_fp(fp) {
            return Ok(vec![Piece::Text(text)]);
        }
        let like = self.read_as(&message.id);
        let key = crate::memo::key(fp, like);
        if let Some(texts) = memo.get(key) {
            return Ok(texts.iter().cloned().map(Piece::Serialized).collect());
        }
        let mut texts = Vec::new();
        for value in write()? {
            let text = serialize_at(&value, style, "", false)?;
            texts.push(match like {
                Some(like) => respell(text, like),
                None => text,
            });
        }
        memo.put(key, texts.clone());
        Ok(texts.into_iter().map(Piece::Serialized).collect())
    }
}

/// Serializes a value in `style`, its lines after the first indented by `indent` (the depth it
/// sits at), with CRLF line ends when `crlf`.
pub(crate) fn serialize_at(
    value: &Value,
    style: &Style,
    indent: &str,
    crlf: bool,
) -> Result<String> {
    let mut out = Vec::new();
    style.write(value, &mut out)?;
    // Serialized JSON is valid UTF-8: the buffer becomes the string, not a copy of it.
    let text = String::from_utf8(out)
        .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned());
    Ok(at_indent(Cow::Owned(text), indent, crlf).into_owned())
}

/// Serialized `text` (`\n` line ends, no indent) with its lines after the first indented by
/// `indent` and CRLF line ends when `crlf`.
fn at_indent<'t>(text: Cow<'t, str>, indent: &str, crlf: bool) -> Cow<'t, str> {
    if (indent.is_empty() && !crlf) || !text.contains('\n') {
        return text;
    }
    let newline = if crlf { "\r\n" } else { "\n" };
    Cow::Owned(text.replace('\n', &format!("{newline}{indent}")))
}

/// The text of one piece at `indent`.
fn piece_text<'p>(
    piece: &'p Piece<'_>,
    style: &Style,
    indent: &str,
    crlf: bool,
) -> Result<Cow<'p, str>> {
    Ok(match piece {
        Piece::Text(text) => Cow::Borrowed(text),
        Piece::Owned(text) => Cow::Borrowed(text.as_str()),
        Piece::Value(value) => Cow::Owned(serialize_at(value, style, indent, crlf)?),
        Piece::Respelled { value, like } => {
            Cow::Owned(respell(serialize_at(value, style, indent, crlf)?, like))
        }
        Piece::Serialized(text) => at_indent(Cow::Borrowed(text), indent, crlf),
    })
}

/// Spells the numbers of serialized `text` as `like` spelled the same values (`100000.0` →
/// `1e5`, `-0.0` → `-0`, a big integer as written), where `like` spells each value one way.
fn respell(text: String, like: &str) -> String {
    // A text without number literals has nothing to respell: `like` (the message as read, a
    // whole tool result before a stage cut it) is not scanned for nothing.
    let numbers = crate::scan::numbers(&text);
    if numbers.is_empty() {
        return text;
    }
    // value as serde_json writes it -> as `like` wrote it (None: spelled several ways)
    let mut spelling: HashMap<String, Option<&str>> = HashMap::new();
    for span in crate::scan::numbers(like) {
        let written = &like[span];
        let Ok(value) = serde_json::from_str::<Value>(written) else {
            continue;
        };
        // Every spelling counts, the canonical one too: a value spelled two ways is left alone.
        spelling
            .entry(value.to_string())
            .and_modify(|s| {
                if *s != Some(written) {
                    *s = None;
                }
            })
            .or_insert(Some(written));
    }
    spelling.retain(|canonical, s| s.is_some_and(|w| w != canonical));
    if spelling.is_empty() {
        return text;
    }
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    for span in numbers {
        if let Some(Some(written)) = spelling.get(&text[span.clone()]) {
            out.push_str(&text[at..span.start]);
            out.push_str(written);
            at = span.end;
        }
    }
    out.push_str(&text[at..]);
    out
}

/// Writes JSONL lines: each piece a line, the original line breaks, blank lines and the text
/// before the first and after the last line kept by position (line `k` is preceded by what
/// preceded line `k` in the input).
pub(crate) fn join_lines(
    text: &str,
    spans: &[Range<usize>],
    pieces: &[Piece<'_>],
    style: &Style,
    crlf: bool,
    out: &mut Vec<u8>,
) -> Result<()> {
    let newline = if crlf { "\r\n" } else { "\n" };
    let (Some(first), Some(last)) = (spans.first(), spans.last()) else {
        for (k, piece) in pieces.iter().enumerate() {
            if k > 0 {
                out.extend_from_slice(newline.as_bytes());
            }
            out.extend_from_slice(piece_text(piece, style, "", crlf)?.as_bytes());
        }
        if style.trailing_newline && !pieces.is_empty() {
            out.extend_from_slice(newline.as_bytes());
        }
        return Ok(());
    };
    out.extend_from_slice(&text.as_bytes()[..first.start]);
    for (k, piece) in pieces.iter().enumerate() {
        if k > 0 {
            let sep = match (spans.get(k - 1), spans.get(k)) {
                (Some(before), Some(after)) => &text[before.end..after.start],
                _ => newline,
            };
            out.extend_from_slice(sep.as_bytes());
        }
        out.extend_from_slice(piece_text(piece, style, "", crlf)?.as_bytes());
    }
    if !pieces.is_empty() {
        out.extend_from_slice(&text.as_bytes()[last.end..]);
    }
    Ok(())
}

/// Appends to `out` a JSON array of pieces in place of the array at `span` whose elements were
/// at `elements`: the original bracket spacing and separators are kept by position, new
/// elements are serialized at the indent of the first one.
/// `ranges`, when given, gets where each piece was written in `out`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn splice_array(
    text: &str,
    span: Range<usize>,
    elements: &[Range<usize>],
    pieces: &[Piece<'_>],
    style: &Style,
    crlf: bool,
    out: &mut String,
    mut ranges: Option<&mut Vec<Range<usize>>>,
) -> Result<()> {
    let newline = if crlf { "\r\n" } else { "\n" };
    let unit = style.indent.as_deref().unwrap_or("");
    let (open, close, sep, indent) = match (elements.first(), elements.last()) {
        (Some(first), Some(last)) => {
            let indent = crate::scan::line_indent(text, first.start).unwrap_or("");
            let sep = match elements.get(1) {
                Some(second) => text[first.end..second.start].to_string(),
                None if style.indent.is_some() => format!(",{newline}{indent}"),
                None => default_comma(style).to_string(),
            };
            (
                text[span.start..first.start].to_string(),
                text[last.end..span.end].to_string(),
                sep,
                indent.to_string(),
            )
        }
        _ if pieces.is_empty() => {
            out.push_str(&text[span]);
            return Ok(());
        }
        _ => match &style.indent {
            Some(_) => {
                let outer = crate::scan::line_indent(text, span.start).unwrap_or("");
                let indent = format!("{outer}{unit}");
                (
                    format!("[{newline}{indent}"),
                    format!("{newline}{outer}]"),
                    format!(",{newline}{indent}"),
                    indent,
                )
            }
            None => (
                "[".into(),
                "]".into(),
                default_comma(style).to_string(),
                String::new(),
            ),
        },
    };
    if pieces.is_empty() {
        out.push_str("[]");
        return Ok(());
    }
    out.push_str(&open);
    for (k, piece) in pieces.iter().enumerate() {
        if k > 0 {
            match (elements.get(k - 1), elements.get(k)) {
                (Some(before), Some(after)) => out.push_str(&text[before.end..after.start]),
                _ => out.push_str(&sep),
            }
        }
        let start = out.len();
        out.push_str(&piece_text(piece, style, &indent, crlf)?);
        if let Some(ranges) = ranges.as_deref_mut() {
            ranges.push(start..out.len());
        }
    }
    out.push_str(&close);
    Ok(())
}

fn default_comma(style: &Style) -> &'static str {
    if style.spaced_comma {
        ", "
    } else {
        ","
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use condense_model::{Block, Role};

    #[test]
    fn the_units_of_a_fingerprint_come_in_the_order_pushed() {
        let mut units = Units::default();
        assert_eq!(units.get(0), None);
        assert_eq!(units.iter().count(), 0);
        for u in [4, 0, 9] {
            units.push(u);
        }
        assert_eq!(units.iter().collect::<Vec<_>>(), [4, 0, 9]);
        assert_eq!((units.get(2), units.get(3)), (Some(9), None));
    }

    #[test]
    fn a_message_is_found_by_its_id_first_read_first_whether_or_not_it_is_its_place() {
        let ids = ["#0", "x", "#1", "#3", "#3", "#0"];
        let conv = Conversation {
            messages: ids
                .iter()
                .map(|id| Message::new(*id, Role::User, vec![Block::text(*id)]))
                .collect(),
            ..Conversation::default()
        };
        let units: Vec<Unit> = (0..ids.len())
            .map(|i| Unit {
                first: i,
                count: 1,
                span: i..i + 1,
            })
            .collect();
        let prints = ConvPrints::of(&conv, &units, None);
        let found = |id: &str| prints.unit_of_id(id);
        // "#0" and "#3" are their places (the later ones are not first); "#1" is not message
        // 1's id but message 2's; no message has "#2".
        assert_eq!(
            ["#0", "x", "#1", "#2", "#3", "#4"].map(found),
            [Some(0), Some(1), Some(2), None, Some(3), None]
        );
        // Only the ids that are not their place are kept by name.
        assert_eq!(prints.by_id.len(), 2);
    }
}
