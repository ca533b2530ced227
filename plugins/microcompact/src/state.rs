//! The stage's persistent state for a session.
//!
//! ```json
//! {
//!   "version": 1,
//!   "last_seen_ms": 1756868523665,
//!   "messages_seen": 438,
//!   "pinned": [
//!     { "tool_use_id": "toolu_01", "tool": "Bash", "tokens": 5120 }
//!   ]
//! }
//! ```
//!
//! `last_seen_ms` and `messages_seen` are written on every run: the host's time and the length
//! of the conversation then. They stand in for message timestamps in formats that have none.
//! `pinned` lists the cache edits already sent, in conversation order; they are re-sent on every
//! later run while the cache stays hot, and dropped once the time-based path clears the
//! results for real (or the results leave the conversation).

use condense_abi::StageState;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct State {
    pub version: u32,
    /// `host.now_ms()` of the previous run.
    #[serde(default)]
    pub last_seen_ms: Option<i64>,
    /// Number of messages the previous run saw.
    #[serde(default)]
    pub messages_seen: usize,
    /// Cache edits already sent.
    #[serde(default)]
    pub pinned: Vec<Pinned>,
}

impl Default for State {
    fn default() -> Self {
        State {
            version: Self::VERSION,
            last_seen_ms: None,
            messages_seen: 0,
            pinned: Vec::new(),
        }
    }
}

/// One cache edit already sent: the tool use whose result the server was asked to clear.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Pinned {
    pub tool_use_id: String,
    pub tool: String,
    /// Tokens the edit freed when it was first sent.
    pub tokens: usize,
}

impl StageState for State {
    const VERSION: u32 = 1;
    fn version(&self) -> u32 {
        self.version
    }
}

impl State {
    /// Whether `tool_use_id` has a cache edit pinned.
    pub fn is_pinned(&self, tool_use_id: &str) -> bool {
        self.pinned.iter().any(|p| p.tool_use_id == tool_use_id)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::Microcompact;
    use condense_abi::{parse_state, state_json, Stage};

    #[test]
    fn roundtrip_and_empty() {
        assert_eq!(
            parse_state::<State>(Microcompact::NAME, None),
            Ok(State::default())
        );
        assert_eq!(
            parse_state::<State>(Microcompact::NAME, Some(" ")),
            Ok(State::default())
        );
        let s = State {
            last_seen_ms: Some(5),
            messages_seen: 3,
            pinned: vec![Pinned {
                tool_use_id: "t1".into(),
                tool: "Read".into(),
                tokens: 10,
            }],
            ..State::default()
        };
        assert_eq!(
            parse_state::<State>(
                Microcompact::NAME,
                Some(&state_json(Microcompact::NAME, &s).unwrap())
            ),
            Ok(s.clone())
        );
        assert!(s.is_pinned("t1") && !s.is_pinned("t2"));
    }

    #[test]
    fn bad_state_is_an_error() {
        assert!(parse_state::<State>(Microcompact::NAME, Some("[")).is_err());
        let err = parse_state::<State>(Microcompact::NAME, Some(r#"{"version":2}"#)).unwrap_err();
        assert!(err.contains("version 2"), "{err}");
    }
}
