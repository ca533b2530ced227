//! [`Format`]: which file format a conversation was read from (and will be written back in).
//!
//! It lives in the model rather than in `condense-formats` (which reads and writes them, and
//! re-exports it) so that stages, which never parse files, can branch on it as a type: the
//! Anthropic-only `context_management` field, for one.
//!
//! ```
//! use condense_model::Format;
//! assert_eq!("claude-code".parse::<Format>(), Ok(Format::ClaudeCode));
//! assert_eq!(Format::OpenAi.to_string(), "openai");
//! ```

use std::fmt;
use std::str::FromStr;

/// A conversation file format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Format {
    /// Anthropic Messages API request body (`system`, `messages`, `tools`, ...).
    Anthropic,
    /// OpenAI Chat Completions request body or message list.
    OpenAi,
    /// Claude Code session JSONL.
    ClaudeCode,
    /// OpenHands event list.
    OpenHands,
    /// Codex CLI rollout JSONL.
    Codex,
    /// OpenAI Responses API request body or input item list.
    Responses,
    /// Cline / Roo Code `api_conversation_history.json`: Anthropic messages with XML tool calls.
    Cline,
}

impl Format {
    /// Every format, in the order help texts list them.
    pub const ALL: [Format; 7] = [
        Format::Anthropic,
        Format::OpenAi,
        Format::ClaudeCode,
        Format::OpenHands,
        Format::Codex,
        Format::Responses,
        Format::Cline,
    ];

    /// The name `--format` takes: `anthropic`, `openai`, `claude-code`, `openhands`, `codex`,
    /// `responses`, `cline`.
    pub fn as_str(self) -> &'static str {
        match self {
            Format::Anthropic => "anthropic",
            Format::OpenAi => "openai",
            Format::ClaudeCode => "claude-code",
            Format::OpenHands => "openhands",
            Format::Codex => "codex",
            Format::Responses => "responses",
            Format::Cline => "cline",
        }
    }

    /// Every name, comma-separated (for messages).
    pub fn names() -> String {
        Format::ALL.map(Format::as_str).join(", ")
    }
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A name that is not one of [`Format::ALL`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownFormat(pub String);

impl fmt::Display for UnknownFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "unknown format `{}` (expected one of: {})",
            self.0,
            Format::names()
        )
    }
}

impl std::error::Error for UnknownFormat {}

impl FromStr for Format {
    type Err = UnknownFormat;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let wanted = s.trim().to_ascii_lowercase();
        Format::ALL
            .into_iter()
            .find(|f| f.as_str() == wanted)
            .ok_or_else(|| UnknownFormat(s.to_string()))
    }
}
