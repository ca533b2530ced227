//! [`envelope_template`]: the wrapper a stage gives a message it writes in place of others, so
//! the file reads back with the session intact. Format knowledge, so it lives here and stages
//! ask with the [`Format`] the host gives them.
//!
//! ```
//! use condense_formats::{envelope_template, Format};
//! use condense_model::{Block, Message, RawJson, Role};
//!
//! let mut old = Message::new("u1", Role::User, vec![Block::text("hi")]);
//! old.envelope = RawJson::from_string_unchecked(
//!     r#"{"sessionId":"s1","type":"user","message":null,"uuid":"u1"}"#.into(),
//! );
//! let new = Message::new("summary-1", Role::User, vec![Block::text("[condense: ...]")]);
//! assert_eq!(
//!     envelope_template(Format::ClaudeCode, &old, &new).as_str(),
//!     r#"{"sessionId":"s1","type":"user","message":null,"uuid":"summary-1"}"#
//! );
//! assert!(envelope_template(Format::Anthropic, &old, &new).is_empty());
//! ```

use crate::claude_code;
use condense_model::{Format, Message, RawJson};

/// For a Claude Code session, the wrapper line of `message` as the template of the user
/// message `new` that a stage writes in its place ([`claude_code::line_template`]: the
/// session's fields, `type` `user`, `new`'s id and timestamp). Empty for every other format
/// (their writers wrap a new message themselves) and for messages without a wrapper line.
pub fn envelope_template(format: Format, message: &Message, new: &Message) -> RawJson {
    match format {
        Format::ClaudeCode => claude_code::line_template(message, new),
        _ => RawJson::default(),
    }
}
