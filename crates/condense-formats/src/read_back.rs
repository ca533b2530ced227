//! How a written document reads back, without parsing again what was written as it was read.
//!
//! After a run, condense reads its output back as `condense expand` will and archives every
//! message that reads back differently from what the stages produced (a summary gets the id
//! the format gives it). Most of an output is messages written as their exact input bytes,
//! which read back as they were read: parsing them again was a tenth of a turn at 1M tokens
//! (the whole output parsed, 600 KB of it as it was read). For an Anthropic request body whose
//! frame (system prompt, tools, other fields) was written as read, the write notes which
//! elements of the message array it copied and keeps a small document of the rest: the same
//! frame around only the elements it serialized. [`Document::read_back`] reads that document
//! and puts the copied messages back in their places, numbered as a read of the whole output
//! numbers them: the same conversation, which a test holds it to.
//!
//! Anthropic's reader reads each element on its own (only the `#n` id depends on the place);
//! other formats (OpenAI's system message in the array, Codex's and OpenHands's grouped items,
//! JSONL sessions) read the whole output again, as before.

use crate::container::Layout;
use crate::source::Piece;
use crate::{Document, Format, FormatError, ReadOptions, WriteMemo};
use condense_model::Conversation;
use std::ops::Range;
use xxhash_rust::xxh3::xxh3_64;

/// What one write copied of the message array: see the [module docs](self).
#[derive(Debug, Clone)]
pub(crate) struct Echo {
    /// Per message of the conversation written: written as the bytes it was read from.
    echoed: Vec<bool>,
    /// The frame as written around only the serialized elements.
    serialized: String,
    /// The output's length and hash, once written: `read_back` is handed that output.
    output: Option<(usize, u64)>,
}

impl Echo {
    /// The echo of an array written from `pieces` (one per message of the conversation) into
    /// `out` at `ranges` (one per piece), inside `text` (the input, its frame written as read)
    /// at `array`. `None` unless the format reads each element on its own.
    pub(crate) fn of(
        format: Format,
        pieces: &[Piece<'_>],
        ranges: &[Range<usize>],
        out: &str,
        (text, array): (&str, &Range<usize>),
    ) -> Option<Echo> {
        if format != Format::Anthropic || pieces.len() != ranges.len() {
            return None;
        }
        let echoed: Vec<bool> = pieces.iter().map(|p| matches!(p, Piece::Text(_))).collect();
        let written: Vec<&str> = ranges
            .iter()
            .zip(&echoed)
            .filter(|(_, e)| !**e)
            .map(|(r, _)| out.get(r.clone()))
            .collect::<Option<_>>()?;
        let list = written.iter().map(|t| t.len() + 1).sum::<usize>() + 2;
        let mut serialized = String::with_capacity(text.len() - array.len() + list);
        serialized.push_str(text.get(..array.start)?);
        serialized.push('[');
        serialized.push_str(&written.join(","));
        serialized.push(']');
        serialized.push_str(text.get(array.end..)?);
        Some(Echo {
            echoed,
            serialized,
            output: None,
        })
    }

    /// How many messages the write copied as read.
    #[cfg(test)]
    pub(crate) fn copied(&self) -> usize {
        self.echoed.iter().filter(|e| **e).count()
    }

    /// Notes the output the echo belongs to, once it is whole.
    pub(crate) fn written(&mut self, out: &[u8]) {
        self.output = Some((out.len(), xxh3_64(out)));
    }
}

impl Document {
    /// The conversations `out` reads back as (with `opts`, the options it was read with):
    /// what [`crate::read`] of `out` gives them (`source` names `out` in an error). `memo`: the
    /// memo of the write that gave `out` ([`Document::write_remembering`]), which says what that
    /// write copied as read; without it, or for another output, `out` is read whole.
    pub fn read_back(
        &self,
        (out, source): (&[u8], &str),
        memo: &WriteMemo,
        opts: &ReadOptions,
    ) -> Result<Vec<Conversation>, FormatError> {
        if let Some(conversations) = self.read_serialized(out, memo, opts) {
            return Ok(conversations);
        }
        Ok(crate::read(out, source, opts)?.conversations)
    }

    /// [`read_back`](Self::read_back) from the echo of the write, when it has one for `out`.
    pub(crate) fn read_serialized(
        &self,
        out: &[u8],
        memo: &WriteMemo,
        opts: &ReadOptions,
    ) -> Option<Vec<Conversation>> {
        let (Some(echo), None, [produced]) = (memo.echo(), &opts.select, &self.conversations[..])
        else {
            return None;
        };
        if echo.output != Some((out.len(), xxh3_64(out)))
            || echo.echoed.len() != produced.messages.len()
            || !matches!(self.layout, Layout::Json { .. })
        {
            return None;
        }
        // An error here is left for the read of the whole output to report in its own words.
        let doc = crate::read_owned(echo.serialized.as_bytes().to_vec(), "<output>", opts).ok()?;
        let [mut back] = <[Conversation; 1]>::try_from(doc.conversations).ok()?;
        let serialized = echo.echoed.iter().filter(|e| !**e).count();
        if back.messages.len() != serialized {
            return None;
        }
        let mut read = std::mem::take(&mut back.messages).into_iter();
        for (i, (message, &echoed)) in produced.messages.iter().zip(&echo.echoed).enumerate() {
            let mut m = match echoed {
                true => message.clone(),
                false => read.next()?,
            };
            // Numbered by its place in the output, as a read of the output numbers it.
            m.id = format!("#{i}");
            back.messages.push(m);
        }
        Some(vec![back])
    }
}
