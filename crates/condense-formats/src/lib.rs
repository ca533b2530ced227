//! Reads and writes conversations in the formats agents already use, losslessly.
//!
//! Seven formats map to and from the [`condense_model`] conversation model:
//!
//! | [`Format`] | what | conversations |
//! |---|---|---|
//! | `anthropic` | Messages API request body, or a bare message list | one per body or list |
//! | `openai` | Chat Completions request body, or a bare message list | one per body or list |
//! | `claude-code` | Claude Code session JSONL | the whole file |
//! | `openhands` | OpenHands event lists (`history` of evaluation output lines) | one per list |
//! | `codex` | Codex CLI rollout JSONL (`~/.codex/sessions/.../rollout-*.jsonl`) | the whole file |
//! | `responses` | OpenAI Responses API request body (`input`, `instructions`), or an item list | one per body or list |
//! | `cline` | Cline / Roo Code `api_conversation_history.json` (tools as XML in text) | one per list or body |
//!
//! What the new formats read as context and what they carry verbatim (each module's docs have the
//! long form):
//! - `codex`: each `response_item` is a message (shared with `responses`, see below); the first
//!   line, a `session_meta`, is a header outside the conversation whose `base_instructions` are
//!   the system prompt; `turn_context`, `event_msg` and later `session_meta` lines are events,
//!   except a `user_message` event that no response item repeats (some rollouts keep the user's
//!   words only there), which is a user message; the last
//!   `compacted` line starts the context as it does in Codex: before it only user and developer
//!   messages stay (all of them with a `replacement_history`, which is the context instead);
//!   the last `token_count` event is the [`ReportedUsage`];
//! - `responses` items: `message` (roles `developer`/`system` are system messages),
//!   `function_call` / `custom_tool_call` / `local_shell_call` → a [`condense_model::ToolUse`]
//!   whose id is the `call_id` (a custom tool's free-text input is kept as a JSON string), their
//!   `*_output` → a [`condense_model::Role::Tool`] message with the result; `reasoning`,
//!   `web_search_call` and the other server items are one opaque block counted by its JSON;
//! - `cline`: the Anthropic shape; a user text block `[tool for 'x'] Result:` and the result
//!   after it become a tool result answering a tool use made from the `<tool>...</tool>` XML of
//!   the assistant message before it (ids `cline-<message>-<n>`); the exact text is kept in
//!   hints and written back as it was.
//!
//! [`read`] finds the conversations in a file (auto-detecting the wrapper and the format, both
//! overridable with [`ReadOptions`]) and returns a [`Document`]: the file with its conversations
//! taken out. Stages change the conversations; [`Document::write`] puts them back into the same
//! wrapper in the same format. Reading and writing without changes gives JSON equal to the input:
//! every field the model does not know is kept in `extra`/`envelope`.
//!
//! Wrappers found without `--select`: an object with `messages` (a request body, also
//! mini-swe-agent trajectories), an object with `history` (SWE-agent `.traj`, OpenHands output
//! lines), an object with a Responses `input`, a list of objects with `traj` (tau-bench), a list
//! of request bodies, a list of messages or input items; JSONL either as a Claude Code session,
//! a Codex rollout, or as one such value per line. A `select`
//! pointer (RFC 6901, with `*` for "every element", e.g. `/*/traj`) overrides this; in JSONL it
//! applies to every line.
//!
//! What is kept where:
//! - fields the model does not map go to the `extra` of the object they were in; the wrapper
//!   line of a Claude Code or Codex message or an OpenHands event is the message's `envelope`,
//!   with the mapped value replaced by a `null` placeholder that keeps its position;
//! - keys of `extra` starting with `condense:` are hints a reader leaves for its writer (the
//!   original OpenAI role `developer`, an object's original key order, ...): stages leave them
//!   alone, writers never write them out;
//! - lines and events the model does not map are [`condense_model::Role::Event`] messages written
//!   back verbatim from their envelope (their id and timestamp are informational);
//! - roles and items no reader understands are kept verbatim as one opaque block (counted by
//!   their JSON, not as 0 tokens) and named in [`Document::warnings`].
//!
//! Robust reading: a JSONL file whose last line is incomplete (a session still being written)
//! is read without it, with a warning; the line is written back untouched. Any other line that is
//! not JSON is an error naming its line and column. CRLF files are written with CRLF.
//!
//! Bytes: what no stage changed is written back as the exact bytes read (the document keeps the
//! text and the span of every message, and splices what changed into it). So reading and writing
//! with no change is byte-identical for any input [`read`] accepts, not only canonical JSON:
//! numbers as written (`1e5`, `-0`, integers beyond 64 bits), `\/` and surrogate-pair escapes,
//! Python's `", "` / `": "` separators, `{\n }`, repeated keys, CRLF, JSONL blank lines and
//! trailing spaces, the byte order mark. With changes, a message (or event) value-equal to one as
//! read is still its original text: a JSONL line, or a JSON array element (value-equal messages
//! read several times use their texts in file order); the bytes between and around them
//! (separators, blank lines, a request body's other keys, a trajectory's other fields) are copied.
//! Only a changed or new message is serialized, in the input's style where it can be detected:
//! indent, separators, `\uXXXX` escaping of ASCII-only input, CRLF; its numbers are then
//! serde_json's (`1E2` → `100.0`). A request body whose system prompt, tools or other fields a
//! stage changed is serialized with its message array still spliced in. A repeated key: stages see
//! its last value (serde_json's), the bytes keep both while the message is unchanged.
//! [`Document::original_text`] and [`Document::set_original_text`] let `expand` put back the exact
//! text of the messages it restores.
//!
//! Format knowledge other crates need, without reading a file, lives here too, so no other crate
//! spells a format's field names: [`claude_code`] (a line's `isMeta` / `isSidechain` flags, a
//! sub-agent's lines, the session in a request's `metadata.user_id`), [`openhands`] (an observation's failed exit code),
//! [`envelope_template`] (the
//! wrapper a stage gives a message it writes, by [`Format`]) and [`files`] (which files in a
//! folder are sessions).
//!
//! ```
//! use condense_formats::{read, Format, ReadOptions};
//!
//! let input = br#"{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}"#;
//! let mut doc = read(input, "req.json", &ReadOptions::default()).unwrap();
//! assert_eq!(doc.format(), Format::OpenAi);
//! assert_eq!(doc.conversations()[0].messages[0].content.text(), "hi");
//!
//! doc.conversations_mut()[0].messages[0].content = condense_model::Content::string("hello");
//! let out = doc.write().unwrap();
//! assert_eq!(out, br#"{"model":"gpt-4o","messages":[{"role":"user","content":"hello"}]}"#);
//! ```

mod anthropic;
mod away;
mod body;
pub mod claude_code;
mod cline;
mod codex;
mod container;
pub mod cut;
mod detect;
mod envelope;
mod error;
pub mod files;
pub mod frames;
mod items;
mod json;
pub mod known;
mod lines;
mod memo;
mod notes;
mod openai;
pub mod openhands;
mod parallel;
mod quick;
mod read_back;
mod responses;
mod scan;
mod select;
mod source;
mod utf8;
mod writer;

#[cfg(test)]
mod tests;

pub use envelope::envelope_template;
pub use error::FormatError;
pub use memo::WriteMemo;
pub use read_back::{ReadBack, Written};

use condense_model::Conversation;
use std::borrow::Cow;

pub use condense_model::{Format, UnknownFormat};

/// What [`read`] should not guess.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReadOptions {
    /// The format, instead of detecting it.
    pub format: Option<Format>,
    /// A JSON pointer to the message list(s) or request body(ies); `*` matches every element.
    pub select: Option<String>,
}

/// A parsed file: its wrapper plus one or more conversations.
#[derive(Debug, Clone)]
pub struct Document {
    format: Format,
    layout: container::Layout,
    conversations: Vec<Conversation>,
    labels: Vec<String>,
    /// The input started with a UTF-8 byte order mark; the output does too.
    bom: bool,
    /// The input's lines end with CRLF; the output's do too.
    crlf: bool,
    /// An incomplete last line of a JSONL file (a session still being written), carried through
    /// byte for byte after the lines written (empty: none).
    tail: Vec<u8>,
    /// By conversation index (missing entries: none): the usage the session itself reported
    /// for its last model call, when the format records one (Claude Code `message.usage`,
    /// Codex `token_count` events).
    usage: Vec<Option<ReportedUsage>>,
    /// Things read but not understood, or carried through untouched (a partial last line, roles
    /// condense does not know): one line each, for `stats` and the reports to show.
    warnings: Vec<String>,
    /// The read noted messages or items it does not understand (kept verbatim, or not
    /// counted): a later read that left them unread would not note them, so no list is kept
    /// ([`Document::known_list`]).
    noted_items: bool,
    /// The input's text and where each message was in it, so that what no stage changed is
    /// written back as the exact bytes read.
    source: source::Source,
    /// When the only conversation's messages were read quick ([`quick`]): the stubs the
    /// format detection read of them, for [`Document::known_list`].
    quick_stubs: Option<Vec<serde_json::Value>>,
    /// The hash of the message list's text a known list matched on ([`known`]): the list's
    /// hash for the next read goes on from it.
    known_hashed: Option<known::Hashed>,
    /// By conversation index: the fingerprint of each of its messages as they are now, when the
    /// caller handed them over ([`Document::vouch_fingerprints`]); forgotten at any change.
    vouched: Vec<Option<Vec<u128>>>,
    /// A Claude Code session's: what its read knew of each line, for reading its output back
    /// ([`Document::read_back`]).
    claude_lines: Option<claude_code::ReadLines>,
}

/// The usage a session reported for a model call: what the model really received, to compare
/// with condense's own count.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct ReportedUsage {
    /// Input tokens not read from or written to a prompt cache.
    pub input_tokens: u64,
    /// Input tokens read from the prompt cache.
    pub cache_read_tokens: u64,
    /// Input tokens written to the prompt cache.
    pub cache_write_tokens: u64,
    pub output_tokens: u64,
    /// Where it was read from, e.g. `the last assistant message's usage` or `the last
    /// token_count event`.
    pub source: String,
}

impl ReportedUsage {
    /// Everything the model read: input + cache reads + cache writes.
    pub fn prompt_tokens(&self) -> u64 {
        self.input_tokens + self.cache_read_tokens + self.cache_write_tokens
    }
}

impl Document {
    /// The format the conversations are read and written in.
    pub fn format(&self) -> Format {
        self.format
    }

    pub fn conversations(&self) -> &[Conversation] {
        &self.conversations
    }

    /// The conversations, to change in place (their number is fixed by the file).
    pub fn conversations_mut(&mut self) -> &mut [Conversation] {
        // The texts are matched to the conversations as read: fingerprint those before any
        // change.
        self.source.finish(&self.conversations);
        self.vouched.clear();
        &mut self.conversations
    }

    /// Hands the writer the [`fingerprint`](condense_model::fingerprint::fingerprint) of each
    /// message of conversation `conv` as it is now, which the caller made already (a run's
    /// `output_fingerprints`), so that the writer does not hash the messages again (at 1M
    /// tokens 0.6 M instructions a write). They must be the messages' own: the writer takes
    /// each message's text by them. When their number is not the conversation's none are
    /// kept; any later [`Document::conversations_mut`] forgets them.
    pub fn vouch_fingerprints(&mut self, conv: usize, prints: Vec<u128>) {
        let fits = self.conversations.get(conv).map(|c| c.messages.len()) == Some(prints.len());
        if self.vouched.len() <= conv {
            self.vouched.resize(conv + 1, None);
        }
        self.vouched[conv] = fits.then_some(prints);
    }

    /// The fingerprint of each message of conversation `i` as it is now: the vouched ones (of
    /// its messages as they are, since any change forgets them), or made
    /// ([`source::Source::prints_now`]).
    fn prints_now(&self, i: usize, conv: &Conversation) -> Vec<u128> {
        match self.vouched.get(i) {
            Some(Some(prints)) => prints.clone(),
            _ => self.source.prints_now(i, conv),
        }
    }

    /// The usage conversation `i` reported for its last model call, when its format records
    /// one.
    pub fn reported_usage(&self, i: usize) -> Option<&ReportedUsage> {
        self.usage.get(i).and_then(Option::as_ref)
    }

    /// What was read but not understood or carried through untouched, one line each.
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    /// One label per conversation saying where it is: `""` when the file holds one, otherwise
    /// its pointer (`/3/traj`) or line (`line 2`, or `line 2:/0/traj` for several per line).
    pub fn labels(&self) -> Vec<String> {
        self.labels.clone()
    }

    /// The file again: the same wrapper, the conversations written back in the same format and
    /// layout. What no stage changed is the exact bytes read; changed and new messages are
    /// serialized in the input's style (pretty-printed with its indent, or compact with its
    /// separators; JSONL one object per line).
    pub fn write(&self) -> Result<Vec<u8>, FormatError> {
        self.write_bytes(&mut WriteMemo::off())
    }

    /// The exact text `message` had in the file, when it is value-equal to a message (or event)
    /// of conversation `conv` as read: a whole line of a JSONL session (without its line end),
    /// or an element of a JSON array. `None` for a message read from no text of its own (a
    /// Codex replacement-history item, a Responses `input` string) or read from none at all.
    /// When value-equal messages were read from several texts, the first one. The text is
    /// always one JSON value the reader parsed (callers embed it unchecked: the archive).
    pub fn original_text(
        &self,
        conv: usize,
        message: &condense_model::Message,
    ) -> Option<Cow<'_, str>> {
        self.source.finish(&self.conversations);
        self.source.original_text(conv, message)
    }

    /// [`Document::original_text`], where `at` is where `message` may stand in the conversation
    /// as read: when the message read there is value-equal to it, that message's text. Of
    /// value-equal messages read from different texts (a line written again with another
    /// spelling), the one at its place, not the first.
    pub fn original_text_at(
        &self,
        conv: usize,
        message: &condense_model::Message,
        at: usize,
    ) -> Option<Cow<'_, str>> {
        self.source.finish(&self.conversations);
        self.source.original_text_at(conv, message, Some(at))
    }

    /// The fingerprint ([`condense_model::fingerprint::fingerprint`]) of each message of
    /// conversation `conv` as read, in order: made once per document (the writer matches
    /// messages to their texts by them), for a caller that would otherwise hash the input's
    /// messages again. `None` for a conversation the document does not hold.
    pub fn message_fingerprints(&self, conv: usize) -> Option<&[u128]> {
        self.source.finish(&self.conversations);
        self.source.message_fingerprints(conv)
    }

    /// Makes [`Document::write`] emit `text` for a message of conversation `conv` value-equal
    /// to `message` (the archive kept it; expand restores it). Texts set for value-equal
    /// messages are used in the order set, before the file's own. A text that cannot stand in
    /// that place is refused (`false`): it must be one JSON value, and in a JSONL session one
    /// line: no `\n`, and no `\r` at its end (the line end would take it). A `\r` inside is
    /// whitespace a line may have (`}\r ` before its end, which a JSONL reader keeps).
    pub fn set_original_text(
        &mut self,
        conv: usize,
        message: &condense_model::Message,
        text: String,
    ) -> bool {
        let jsonl = !matches!(self.layout, container::Layout::Json { .. });
        let one_value = scan::value(text.as_bytes(), 0)
            .is_some_and(|v| text[v.end..].trim().is_empty() && text[..v.start].trim().is_empty());
        let one_line = !text.contains('\n') && !text.ends_with('\r');
        let fits = one_value && conv < self.conversations.len() && (!jsonl || one_line);
        if fits {
            self.source.set_original_text(conv, message, text);
        }
        fits
    }
}

impl Document {
    /// Lets the text the document was read from go while the stages run, to be read again
    /// from `file` (named `source` in errors), which it was read from (see the `away`
    /// module). Texts asked of [`Document::original_text_at`] meanwhile are read from the file;
    /// [`Document::write`] and the other calls that need the whole text fail until
    /// [`Document::bring_text_back`].
    /// Nothing is let go (`false`) when the text is shared (a proxy forwards the body it read;
    /// a Claude Code session's events hold their lines as pieces of it) or already away.
    pub fn send_text_away(&mut self, file: std::fs::File, source: &str) -> bool {
        if self.source.away.is_some() {
            return false;
        }
        let Some(text) = std::sync::Arc::get_mut(&mut self.source.text) else {
            return false;
        };
        let text = std::mem::take(text);
        let offset = self.bom_text().len() as u64;
        self.source.away = Some(std::sync::Arc::new(away::Away::new(
            file, source, offset, &text,
        )));
        true
    }

    /// Takes back the text sent away ([`Document::send_text_away`]) from its file: an error,
    /// naming the file, when the file no longer holds it (or any read of it on the way failed);
    /// the text then stays away. Nothing to do when it is not away.
    pub fn bring_text_back(&mut self) -> Result<(), FormatError> {
        let Some(away) = &self.source.away else {
            return Ok(());
        };
        self.source.text = std::sync::Arc::new(away.bring_back()?);
        self.source.away = None;
        Ok(())
    }

    /// An error for a call that needs the whole text while it is away.
    fn text_here(&self) -> Result<(), FormatError> {
        match self.source.away {
            Some(_) => Err(FormatError::Write {
                at: "the input".into(),
                reason: "its text is away (bring_text_back first)".into(),
            }),
            None => Ok(()),
        }
    }

    /// Per message of conversation `conv`: whether it was left unread ([`known`]), a
    /// placeholder standing in for a message an earlier read knew. `None` when every message
    /// was read. A conversation with unread messages must not be handed to stages: a run that
    /// cannot do without them reads them with [`Document::read_unread`].
    pub fn unread(&self, conv: usize) -> Option<&[bool]> {
        (conv == 0)
            .then_some(self.source.unread.as_ref())
            .flatten()
            .map(|u| u.mask.as_slice())
    }

    /// Whether every conversation is as read (value-equal, no text set for it): what
    /// [`Document::write`] then gives is the input, and reading it back gives what was read.
    pub fn unchanged(&self) -> bool {
        self.source.finish(&self.conversations);
        self.conversations
            .iter()
            .enumerate()
            .all(|(i, conv)| self.source.unchanged(i, conv, &self.prints_now(i, conv)))
    }

    /// Whether `bytes` are exactly the input this document was read from (what [`Document::write`]
    /// gives when nothing changed).
    pub fn is_input(&self, bytes: &[u8]) -> bool {
        if self.source.away.is_some() {
            return false;
        }
        let mut rest = bytes;
        let each = self.input_parts().into_iter().all(|part| {
            let after = rest.strip_prefix(part);
            rest = after.unwrap_or_default();
            after.is_some()
        });
        each && rest.is_empty()
    }

    /// The input this document was read from, in the pieces it keeps: the byte order mark (or
    /// nothing), the text read, the incomplete last line carried through (or nothing).
    fn input_parts(&self) -> [&[u8]; 3] {
        self.input_parts_with(&self.source.text)
    }

    /// [`Document::input_parts`] with `text` as the text read (brought back from its file).
    fn input_parts_with<'a>(&'a self, text: &'a str) -> [&'a [u8]; 3] {
        [self.bom_text().as_bytes(), text.as_bytes(), &self.tail]
    }

    /// The byte order mark the input started with, or nothing.
    fn bom_text(&self) -> &'static str {
        if self.bom {
            container::BOM
        } else {
            ""
        }
    }

    /// Conversation `conv` read again from the document's text, every message read (what the
    /// document held before any change, placeholders or not).
    pub fn read_unread(&self, conv: usize) -> Result<Conversation, FormatError> {
        // A Claude Code session is read as its first read took it: by its lines, detected.
        let (source, format) = match self.format {
            Format::ClaudeCode => ("<input>.jsonl", None),
            format => ("<input>", Some(format)),
        };
        let opts = ReadOptions {
            format,
            select: None,
        };
        let bytes = match &self.source.away {
            // Read again whole for this once, then let go again.
            Some(away) => self.input_parts_with(&away.bring_back()?).concat(),
            None => self.input_parts().concat(),
        };
        let mut doc = container::read_owned(bytes, source, &opts, None)?;
        match doc.conversations.get_mut(conv) {
            Some(c) => Ok(std::mem::take(c)),
            None => Err(FormatError::Write {
                at: "the input".into(),
                reason: format!("it no longer holds conversation {conv} when read again"),
            }),
        }
    }

    /// What to keep ([`known::KnownWrite`]: a record of [`known::RECORDS`], blocks of
    /// [`known::BLOCKS`]) so that a later read of this input's message list may leave it
    /// unread: when the document's one conversation was read quick, or is a Claude Code
    /// session's lines ([`Document::lists_known`]).
    /// `get`: what is kept so far (a record's bytes by namespace and name).
    pub fn known_record(
        &self,
        get: impl Fn(&str, &str) -> Option<Vec<u8>>,
    ) -> Option<known::KnownWrite> {
        let (key, list) = self.known_list()?;
        Some(known::updated(key, list, get))
    }

    /// Whether a later read of this input's message list may leave its messages unread
    /// ([`known`]; [`Document::known_list`] gives the list to keep for it): the document's one
    /// conversation was read quick, one element a message, or is a Claude Code session's, one
    /// line a message.
    pub fn lists_known(&self) -> bool {
        self.known_units().is_some()
    }

    /// The units and fingerprints of the one conversation, when [`Document::lists_known`]: a
    /// list read quick, or a Claude Code session's lines.
    fn known_units(&self) -> Option<(&[source::Unit], &[u128])> {
        if self.source.away.is_some()
            || self.noted_items
            || (self.quick_stubs.is_none() && self.claude_lines.is_none())
        {
            return None;
        }
        let units = &self.source.convs.first()?.units;
        let prints = self.message_fingerprints(0)?;
        // One element per message, in order (every JSON reader is 1:1).
        let one_to_one = units.len() == prints.len()
            && units
                .iter()
                .enumerate()
                .all(|(i, u)| u.first == i && u.count == 1);
        (one_to_one && self.conversations.len() == 1).then_some((units, prints))
    }

    /// What a later read of this input's message list may leave unread ([`known`]), with the
    /// key to keep it under ([`Document::known_record`]).
    pub fn known_list(&self) -> Option<(u64, known::KnownList)> {
        let (units, prints) = self.known_units()?;
        let stubs = self.quick_stubs.clone().unwrap_or_default();
        let lines = self.claude_lines.as_ref().map(|read| {
            let usage = self.usage.first().and_then(Option::as_ref);
            known::LineMemo::of(read, usage)
        });
        let spans: Vec<_> = units.iter().map(|u| u.span.clone()).collect();
        let first = self.source.text.get(spans.first()?.clone())?;
        let prefix = known::prefix_of(&self.source.text, &spans, self.known_hashed.as_ref())?;
        let list = known::KnownList {
            messages: spans.len(),
            bytes: prefix.bytes,
            shorter: prefix.shorter,
            spans: prefix.spans,
            prints: prints.to_vec(),
            stubs,
            lines,
        };
        Some((known::list_key(self.format, first.as_bytes()), list))
    }
}

/// Reads a file. `source` names it in errors (`-` is shown as `<stdin>`).
pub fn read(bytes: &[u8], source: &str, opts: &ReadOptions) -> Result<Document, FormatError> {
    container::read(bytes, source, opts)
}

/// [`read`] from bytes the document may keep: the text it holds to write back what no stage
/// changed is then these bytes, not a copy of them.
pub fn read_owned(
    bytes: Vec<u8>,
    source: &str,
    opts: &ReadOptions,
) -> Result<Document, FormatError> {
    container::read_owned(bytes, source, opts, None)
}

/// [`read_owned`], leaving unread the messages of a list an earlier read saw with exactly the
/// same text ([`known`]): `known` gives the lists known under a first element's key
/// ([`known::first_key`]). See [`Document::unread`].
pub fn read_owned_knowing(
    bytes: Vec<u8>,
    source: &str,
    opts: &ReadOptions,
    known: &dyn Fn(u64) -> Vec<known::KnownList>,
) -> Result<Document, FormatError> {
    let lookup = parallel::Lookup {
        lists: known,
        matched: None,
        frames: None,
        elements: None,
    };
    container::read_owned(bytes, source, opts, Some(lookup))
}

/// [`read_owned_knowing`] of a text the caller shares (a proxy keeps the request body it
/// forwards when nothing is compressed): the document keeps that text, not a copy of it.
/// `matched`: the known list a look at this same text matched ([`cut::ListCut::into_matched`]),
/// taken instead of asking `known` and hashing the text again. `frames`: the system prompts
/// and tool lists read before ([`frames`]), for a read given the Anthropic, OpenAI Chat or
/// Responses format (no `select`).
pub fn read_shared_knowing(
    text: std::sync::Arc<String>,
    source: &str,
    opts: &ReadOptions,
    (known, matched): (known::Lists<'_>, Option<known::Matched>),
    frames: Option<&frames::FrameMemo>,
) -> Result<Document, FormatError> {
    let matched = std::cell::Cell::new(matched);
    // Members are taken by a body's keys: only where the format is said, not guessed (a stub
    // would stand in the wrong format's detection).
    let said = matches!(
        opts.format,
        Some(Format::Anthropic | Format::OpenAi | Format::Responses)
    );
    let framed = said && opts.select.is_none();
    let lookup = parallel::Lookup {
        lists: known,
        matched: Some(&matched),
        frames: frames.filter(|_| framed),
        elements: None,
    };
    container::read_shared(text, source, opts, Some(lookup))
}

/// `bytes` as a `String` when they are UTF-8, else the bytes back: the check every read makes
/// of its input (vectorized), for a caller that keeps the text to read it with
/// [`read_shared_knowing`].
pub fn utf8_string(bytes: Vec<u8>) -> Result<String, Vec<u8>> {
    utf8::string(bytes)
}

/// The format [`read`] would pick for this input (reads it whole).
pub fn detect(bytes: &[u8], source: &str) -> Result<Format, FormatError> {
    read(bytes, source, &ReadOptions::default()).map(|doc| doc.format())
}
