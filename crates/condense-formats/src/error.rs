//! [`FormatError`] and the small context every reader carries to name where a problem is (and
//! to note what it kept without understanding, see [`Notes`]).

use crate::notes::Notes;
use serde_json::Value;

/// Everything that can go wrong reading or writing a conversation file.
///
/// Every variant displays as one line that names the source (file name, `<stdin>`), the line for
/// JSONL files (1-based), and the JSON pointer of the offending value when there is one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FormatError {
    /// The text is not JSON (or a JSONL line is not).
    #[error("{at}: invalid JSON: {message}")]
    InvalidJson { at: String, message: String },
    /// The bytes are not UTF-8 text.
    #[error("{at}: not UTF-8 text: {message}")]
    NotUtf8 { at: String, message: String },
    /// A value does not have the type or shape the format requires.
    #[error("{at}: expected {expected}, found {found}")]
    Unexpected {
        at: String,
        expected: String,
        found: String,
    },
    /// `--format` names no known format.
    #[error("unknown format `{0}` (expected one of: {names})", names = crate::Format::names())]
    UnknownFormat(String),
    /// `--select` is not a valid pointer or points nowhere.
    #[error("{at}: --select {select}: {reason}")]
    Select {
        at: String,
        select: String,
        reason: String,
    },
    /// No conversation could be found (auto-detection failed, or the forced format does not fit).
    #[error("{at}: {reason}")]
    Detect { at: String, reason: String },
    /// The file a document's text was sent back to ([`crate::Document::send_text_away`]) no
    /// longer holds it.
    #[error("{at}: the file changed while condense held it ({reason})")]
    Changed { at: String, reason: String },
    /// The model holds something the format cannot express, or a stage left invalid raw JSON.
    #[error("cannot write {at}: {reason}")]
    Write { at: String, reason: String },
}

/// Where a reader is: the source name and, for JSONL, the 1-based line; and where it notes what
/// it kept without understanding.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Ctx<'a> {
    pub source: &'a str,
    pub line: Option<usize>,
    notes: Option<&'a Notes>,
}

/// Where a [`Ctx`] is, without its notes (which stay on their thread).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Place<'a> {
    source: &'a str,
    line: Option<usize>,
    noting: bool,
}

impl<'a> Place<'a> {
    /// A context at this place noting into `notes` (nothing if the original noted nothing): a
    /// reader on another thread notes there, and the original [`Ctx::absorb`]s them afterwards.
    pub fn noting_into<'n>(self, notes: &'n Notes) -> Ctx<'n>
    where
        'a: 'n,
    {
        Ctx {
            source: self.source,
            line: self.line,
            notes: self.noting.then_some(notes),
        }
    }
}

impl<'a> Ctx<'a> {
    pub fn new(source: &'a str) -> Self {
        Ctx {
            source,
            line: None,
            notes: None,
        }
    }

    /// A context whose readers note what they keep without understanding in `notes`.
    pub fn with_notes(source: &'a str, notes: &'a Notes) -> Self {
        Ctx {
            notes: Some(notes),
            ..Ctx::new(source)
        }
    }

    /// The same place, noting nothing (for content read only to be kept on an event).
    pub fn quiet(self) -> Self {
        Ctx {
            notes: None,
            ..self
        }
    }

    /// Notes a role or item kept verbatim and counted as its JSON (`role `exit``).
    pub fn note_unknown(&self, what: String) {
        if let Some(notes) = self.notes {
            notes.unknown(what);
        }
    }

    /// Notes a line carried verbatim and not counted (`line type `foo``).
    pub fn note_uncounted(&self, what: String) {
        if let Some(notes) = self.notes {
            notes.uncounted(what);
        }
    }

    /// This place without its notes, to send to another thread ([`Place::noting_into`]).
    pub fn place(&self) -> Place<'a> {
        Place {
            source: self.source,
            line: self.line,
            noting: self.notes.is_some(),
        }
    }

    /// Takes over what another context noted, after what this one noted so far.
    pub fn absorb(&self, other: Notes) {
        if let Some(notes) = self.notes {
            notes.absorb(other);
        }
    }

    /// Adds one warning line.
    pub fn warn(&self, line: String) {
        if let Some(notes) = self.notes {
            notes.warn(line);
        }
    }

    pub fn at_line(self, line: usize) -> Self {
        Ctx {
            line: Some(line),
            ..self
        }
    }

    /// `source`, `source:14`, `source: /messages/3` or `source:14: /message/content/0`.
    pub fn at(&self, pointer: &str) -> String {
        let mut out = self.source.to_string();
        if let Some(line) = self.line {
            out.push(':');
            out.push_str(&line.to_string());
        }
        if !pointer.is_empty() {
            out.push_str(": ");
            out.push_str(pointer);
        }
        out
    }

    /// A value at `pointer` is not what the format requires.
    pub fn unexpected(&self, pointer: &str, expected: &str, found: &Value) -> FormatError {
        FormatError::Unexpected {
            at: self.at(pointer),
            expected: expected.to_string(),
            found: describe(found),
        }
    }

    /// A required key is missing from the object at `pointer`.
    pub fn missing(&self, pointer: &str, expected: &str) -> FormatError {
        FormatError::Unexpected {
            at: self.at(pointer),
            expected: expected.to_string(),
            found: "nothing (the key is missing)".to_string(),
        }
    }

    pub fn detect(&self, reason: impl Into<String>) -> FormatError {
        FormatError::Detect {
            at: self.at(""),
            reason: reason.into(),
        }
    }

    /// A serde_json parse error, reported by line and column.
    pub fn invalid_json(&self, err: &serde_json::Error) -> FormatError {
        let text = err.to_string();
        // serde_json appends " at line L column C"; we report the line our own way.
        let message = match text.rfind(" at line ") {
            Some(cut) => &text[..cut],
            None => text.as_str(),
        };
        let line = match self.line {
            Some(l) => l + err.line().saturating_sub(1),
            None => err.line(),
        };
        let at = format!("{}:{}", self.source, line);
        FormatError::InvalidJson {
            at,
            message: format!("{message} at column {}", err.column()),
        }
    }
}

/// A short description of a value for "found ..." messages.
pub(crate) fn describe(value: &Value) -> String {
    match value {
        Value::String(s) => format!("the string {:?}", condense_text::ellipsize(s, 40)),
        Value::Object(map) => {
            let keys: Vec<&str> = map.keys().take(6).map(String::as_str).collect();
            if keys.is_empty() {
                "an empty object".to_string()
            } else {
                let more = if map.len() > keys.len() { ", ..." } else { "" };
                format!("an object with keys {}{more}", keys.join(", "))
            }
        }
        other => condense_model::kind_of(other).to_string(),
    }
}

/// Appends one RFC 6901 reference token to a pointer.
pub(crate) fn push_token(pointer: &str, token: &str) -> String {
    let escaped = token.replace('~', "~0").replace('/', "~1");
    format!("{pointer}/{escaped}")
}

impl From<crate::UnknownFormat> for FormatError {
    fn from(e: crate::UnknownFormat) -> Self {
        FormatError::UnknownFormat(e.0)
    }
}
