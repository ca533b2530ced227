//! Writing a [`Document`] back: the input's own bytes for everything no stage changed, the
//! changed messages serialized in the input's style, spliced in place ([`crate::source`]).
//!
//! - A conversation equal to what was read is its original text.
//! - Otherwise its message array is rebuilt element by element: a message value-equal to one
//!   read is that element's text, the others are serialized at the indent of the array; the
//!   bytes between elements are kept by position. The body around the array (a request's
//!   `model`, `temperature`, ...) is copied while the system prompt, tools and other fields are
//!   as read, and serialized (with the array still spliced in) when a stage changed them.
//! - JSONL sessions do the same with lines: an unchanged line is its text, blank lines and line
//!   ends between lines are kept by position.
//! - What the input's spans could not tell (an unusual layout) is serialized whole, as before.

use crate::body::{self, conversation_name};
use crate::container::{codec, one_conversation, Layout, Placed, Root};
use crate::json::{Result, Style};
use crate::lines;
use crate::memo::WriteMemo;
use crate::read_back::{Echo, LinesEcho};
use crate::scan;
use crate::source::{join_lines, serialize_at, splice_array, Fp, Piece};
use crate::{anthropic, items};
use crate::{claude_code, cline, codex, openhands, responses, Document, Format, FormatError};
use condense_model::{Conversation, Message};
use serde_json::Value;
use std::borrow::Cow;

/// Stands for a body's message array while the body is serialized, replaced by the spliced array
/// afterwards (control characters: no real key or text serializes to the same escaped string).
const ARRAY_PLACEHOLDER: &str = "\u{1}condense:messages\u{2}";

impl Document {
    pub(crate) fn write_bytes(&self, memo: &mut WriteMemo) -> Result<Vec<u8>> {
        self.text_here()?;
        self.source.finish(&self.conversations);
        *memo.echo_mut() = None;
        *memo.lines_echo_mut() = None;
        memo.start();
        let mut out = self.write_layout(memo)?;
        out.extend_from_slice(&self.tail);
        out.splice(0..0, self.bom_text().bytes());
        Ok(out)
    }

    fn write_layout(&self, memo: &mut WriteMemo) -> Result<Vec<u8>> {
        let text = self.source.text.as_str();
        // Sized by the branch that fills it: a spliced JSON body is built as a string of its own.
        let mut out = Vec::new();
        match &self.layout {
            Layout::ClaudeCode { style, spans } => {
                let [conv] = self.conversations.as_slice() else {
                    return Err(one_conversation(self.format));
                };
                let prints = self.prints_now(0, conv);
                let pieces = claude_code::write(conv, &prints, &mut self.source.texts(0))?;
                *memo.lines_echo_mut() = Some(LinesEcho::of(text, spans, &pieces));
                out.reserve(text.len());
                join_lines(text, spans, &pieces, style, self.crlf, &mut out)?;
            }
            Layout::Codex {
                style,
                header,
                spans,
            } => {
                let [conv] = self.conversations.as_slice() else {
                    return Err(one_conversation(self.format));
                };
                let header_text = match (header, spans.first()) {
                    (Some(_), Some(span)) if self.source.frame_unchanged(0, conv) => {
                        text.get(span.clone())
                    }
                    _ => None,
                };
                let mut texts = self.source.texts(0);
                let pieces = codex::write(conv, header.as_ref(), header_text, &mut texts)?;
                out.reserve(text.len());
                join_lines(text, spans, &pieces, style, self.crlf, &mut out)?;
            }
            Layout::Json { root, style } => {
                let mut next = 0;
                memo.begin(self.format, style);
                match self.splice_root(root, style, &mut next, memo)? {
                    Some(Cow::Owned(spliced)) => out = spliced.into_bytes(),
                    Some(Cow::Borrowed(spliced)) => out.extend_from_slice(spliced.as_bytes()),
                    None => {
                        let mut fresh = Vec::new();
                        style.write(&self.fill(root, &mut next)?, &mut fresh)?;
                        if style.trailing_newline {
                            fresh.push(b'\n');
                        }
                        out = self.line_ends(fresh);
                    }
                }
            }
            Layout::Lines {
                lines,
                style,
                spans,
            } => {
                let mut next = 0;
                memo.begin(self.format, style);
                let mut pieces = Vec::with_capacity(lines.len());
                for (root, span) in lines.iter().zip(spans) {
                    let piece = match self.splice_root(root, style, &mut next, memo)? {
                        // The line's own text around its value (trailing spaces).
                        Some(spliced) => match (spliced, &root.span) {
                            (Cow::Borrowed(_), _) => Piece::Text(&text[span.clone()]),
                            (Cow::Owned(value), Some(at)) => Piece::Owned(format!(
                                "{}{value}{}",
                                &text[span.start..at.start],
                                &text[at.end..span.end]
                            )),
                            (Cow::Owned(value), None) => Piece::Owned(value),
                        },
                        None => Piece::Value(self.fill(root, &mut next)?),
                    };
                    pieces.push(piece);
                }
                out.reserve(text.len());
                join_lines(text, spans, &pieces, style, self.crlf, &mut out)?;
            }
        }
        Ok(out)
    }

    /// CRLF line ends for serialized output when the input has them.
    fn line_ends(&self, out: Vec<u8>) -> Vec<u8> {
        if self.crlf {
            lines::to_crlf(&out)
        } else {
            out
        }
    }

    /// The text of a root with each conversation spliced into its place: borrowed when nothing
    /// changed; `None` when the input's spans are unknown (the caller serializes the root).
    /// A JSON file's root is its whole text, a JSONL line's root its value.
    fn splice_root(
        &self,
        root: &Root,
        style: &Style,
        next: &mut usize,
        memo: &mut WriteMemo,
    ) -> Result<Option<Cow<'_, str>>> {
        let text = self.source.text.as_str();
        let Some(span) = &root.span else {
            return Ok(None);
        };
        if root.slots.iter().any(|p| p.span.is_none()) {
            return Ok(None);
        }
        let first = *next;
        let Some(convs) = self.conversations.get(first..first + root.slots.len()) else {
            return Err(fewer_conversations());
        };
        *next += root.slots.len();
        let whole = match &self.layout {
            Layout::Json { .. } => 0..text.len(),
            _ => span.clone(),
        };
        // Each message's fingerprint, made once: what tells an unchanged conversation, and
        // which text each message of a changed one is.
        let fps: Vec<Vec<Fp>> = convs
            .iter()
            .enumerate()
            .map(|(k, conv)| self.prints_now(first + k, conv))
            .collect();
        let unchanged: Vec<bool> = convs
            .iter()
            .zip(&fps)
            .enumerate()
            .map(|(k, (conv, fps))| self.source.unchanged(first + k, conv, fps))
            .collect();
        if unchanged.iter().all(|u| *u) {
            return Ok(Some(Cow::Borrowed(&text[whole])));
        }
        let mut order: Vec<usize> = (0..root.slots.len()).collect();
        order.sort_by_key(|&k| root.slots[k].span.as_ref().map_or(0, |s| s.start));
        let mut out = String::with_capacity(whole.len());
        let mut at = whole.start;
        for k in order {
            let placed = &root.slots[k];
            let Some(slot) = &placed.span else {
                continue;
            };
            out.push_str(&text[at..slot.start]);
            if unchanged[k] {
                out.push_str(&text[slot.clone()]);
            } else {
                let conv = (&convs[k], fps[k].as_slice());
                self.slot_text(first + k, conv, placed, (style, &mut *memo), &mut out)?;
            }
            at = slot.end;
        }
        out.push_str(&text[at..whole.end]);
        Ok(Some(Cow::Owned(out)))
    }

    /// Appends to `out` the text of one conversation a stage changed, in its place (built in
    /// `out` itself: a request body is not copied from buffer to buffer).
    fn slot_text(
        &self,
        i: usize,
        (conv, fps): (&Conversation, &[Fp]),
        placed: &Placed,
        (style, memo): (&Style, &mut WriteMemo),
        out: &mut String,
    ) -> Result<()> {
        let text = self.source.text.as_str();
        let Some(span) = placed.span.clone() else {
            return Err(fewer_conversations());
        };
        let label = self.labels.get(i).map_or("", String::as_str);
        let frame_unchanged = self.source.frame_unchanged(i, conv);
        // With the frame as read around the array of the document's only conversation, what
        // the write copied as read is noted for reading the output back ([`Echo`]).
        let notes_echo = frame_unchanged
            && self.conversations.len() == 1
            && matches!(self.layout, Layout::Json { .. });
        let mut array_into = |out: &mut String, array: &std::ops::Range<usize>| -> Result<()> {
            let pieces = self.message_pieces(i, conv, fps, (style, &mut *memo))?;
            let elements = &placed.elements;
            let mut ranges = Vec::new();
            splice_array(
                text,
                array.clone(),
                elements,
                &pieces,
                style,
                self.crlf,
                out,
                notes_echo.then_some(&mut ranges),
            )?;
            if notes_echo {
                let of = (self.format, pieces.as_slice(), fps);
                let root_body = placed.pointer.is_empty() && placed.body_keys.is_some();
                let echo = Echo::of(of, (out, &ranges), (text, array, root_body), memo);
                *memo.echo_mut() = echo;
            }
            Ok(())
        };
        if let (Some(array), true) = (&placed.array, frame_unchanged) {
            out.push_str(&text[span.start..array.start]);
            array_into(out, array)?;
            out.push_str(&text[array.end..span.end]);
            return Ok(());
        }
        let spliced = match &placed.array {
            Some(array) => {
                let mut array_text = String::new();
                array_into(&mut array_text, array)?;
                Some(array_text)
            }
            None => None,
        };
        // A stage changed the system prompt, tools or other fields: the conversation is
        // serialized, its message array still spliced in.
        let mut value = self.write_conversation(conv, placed, label)?;
        let key = body::list_member(self.format);
        let splice = match (&spliced, &mut value) {
            (Some(_), Value::Object(body)) if body.contains_key(key) => {
                body.insert(key.into(), Value::String(ARRAY_PLACEHOLDER.into()));
                true
            }
            _ => false,
        };
        let indent = scan::line_indent(text, span.start).unwrap_or("");
        let written = serialize_at(&value, style, indent, self.crlf)?;
        // The placeholder as JSON text (`Display` of a `Value` cannot fail).
        let placeholder = Value::String(ARRAY_PLACEHOLDER.into()).to_string();
        let whole = match spliced {
            Some(array_text) if splice && written.matches(&placeholder).count() == 1 => {
                written.replacen(&placeholder, &array_text, 1)
            }
            _ if splice => {
                // The placeholder was not found once: serialize without splicing.
                let value = self.write_conversation(conv, placed, label)?;
                serialize_at(&value, style, indent, self.crlf)?
            }
            _ => written,
        };
        out.push_str(&whole);
        Ok(())
    }

    /// Each message of a conversation as array elements: its original text when it is as read,
    /// otherwise serialized by its format (or as `memo` kept it from an earlier write). `fps`:
    /// each message's fingerprint.
    fn message_pieces(
        &self,
        i: usize,
        conv: &Conversation,
        fps: &[Fp],
        (style, memo): (&Style, &mut WriteMemo),
    ) -> Result<Vec<Piece<'_>>> {
        let mut texts = self.source.texts(i);
        let mut pieces = Vec::with_capacity(conv.messages.len() + 1);
        if let (Some(codec), Some(system)) = (codec(self.format), &conv.system) {
            if !codec.system_key {
                pieces.push(Piece::Value((codec.write)(&body::system_message(system))?));
            }
        }
        for (msg, fp) in conv.messages.iter().zip(fps) {
            let write = || self.write_message(msg);
            pieces.extend(texts.piece_memo(msg, *fp, (style, &mut *memo), write)?);
        }
        Ok(pieces)
    }

    /// One message as the array element(s) its format writes.
    fn write_message(&self, msg: &Message) -> Result<Vec<Value>> {
        Ok(match (self.format, codec(self.format)) {
            (Format::Responses, _) => items::write_items(msg)?,
            (Format::Cline, _) => vec![(anthropic::CODEC.write)(&cline::lower_message(msg))?],
            (_, Some(codec)) => vec![(codec.write)(msg)?],
            (_, None) => vec![openhands::write_message(msg)?],
        })
    }

    /// A conversation serialized whole as its format writes it (body or list).
    fn write_conversation(
        &self,
        conv: &Conversation,
        placed: &Placed,
        label: &str,
    ) -> Result<Value> {
        let lowered;
        let conv = if self.format == Format::Cline {
            lowered = cline::lower(conv);
            &lowered
        } else {
            conv
        };
        match (self.format, codec(self.format), &placed.body_keys) {
            (Format::Responses, _, Some(keys)) => responses::write_body(conv, keys, label),
            (Format::Responses, _, None) => responses::write_list(conv, label),
            (_, Some(codec), Some(keys)) => body::write_body(conv, keys, codec, label),
            (_, Some(codec), None) => body::write_list(conv, codec, label),
            (_, None, _) => openhands::write_list(conv, label),
        }
    }

    /// The root with its slots filled from the conversations from index `next` on, serialized
    /// whole (when the input's spans are unknown).
    fn fill(&self, root: &Root, next: &mut usize) -> Result<Value> {
        let mut value = root.value.clone();
        for placed in &root.slots {
            let (Some(conv), Some(label)) = (self.conversations.get(*next), self.labels.get(*next))
            else {
                return Err(fewer_conversations());
            };
            *next += 1;
            let written = self.write_conversation(conv, placed, label)?;
            match value.pointer_mut(&placed.pointer) {
                Some(slot) => *slot = written,
                None => {
                    return Err(FormatError::Write {
                        at: conversation_name(label),
                        reason: format!("its place {} is gone from the wrapper", placed.pointer),
                    })
                }
            }
        }
        Ok(value)
    }
}

fn fewer_conversations() -> FormatError {
    FormatError::Write {
        at: "the document".into(),
        reason: "fewer conversations than places to put them".into(),
    }
}
