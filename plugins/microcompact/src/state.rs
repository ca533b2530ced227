//! The stage's persistent state for a session.
//!
//! ```json
//! {
//!   "version": 1,
//!   "last_seen_ms": 1756868523665,
//!   "messages_seen": 438,
//!   "last_seen_id": "msg_0437",
//!   "pinned": [
//!     { "tool_use_id": "toolu_01", "tool": "Bash", "tokens": 5120 }
//!   ]
//! }
//! ```
//!
//! `last_seen_ms`, `messages_seen` and `last_seen_id` are written on every run: the host's time,
//! the length of the conversation then and the id of its last message. They stand in for
//! message timestamps in formats that have none: the conversation continues the one seen then
//! when it is at least as long, or when it still holds that last message (a run resumed from
//! the previous output sees it shorter, once a later stage collapsed or compacted its history).
//! `pinned` lists the cache edits already sent, in conversation order; they are re-sent on every
//! later run while the cache stays hot, and dropped once the time-based path clears the
//! results for real (or the results leave the conversation).

use condense_abi::StageState;
use condense_model::ids::{id_map, IdMap};
use serde::{Deserialize, Serialize};

/// What the stage keeps for a session (the JSON's `version` is written by the SDK's state
/// handle).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct State {
    /// The host's clock (`cx.now_ms`) on the previous run.
    #[serde(default)]
    pub last_seen_ms: Option<i64>,
    /// Number of messages the previous run saw.
    #[serde(default)]
    pub messages_seen: usize,
    /// The id of the last message the previous run saw (none in a state written before it
    /// was kept).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_seen_id: Option<String>,
    /// Cache edits already sent.
    #[serde(default)]
    pub pinned: Vec<Pinned>,
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

impl StageState for State {}

impl State {
    /// The cache edits already sent, by tool_use id (the first of an id, as a scan of the list
    /// would find it): looked up for every old result, where a scan made a long session
    /// quadratic.
    pub fn pinned_by_id(&self) -> IdMap<&str, &Pinned> {
        // Sized once: a long session pins hundreds, rehashed at every doubling otherwise.
        let mut by_id = id_map(self.pinned.len());
        for p in &self.pinned {
            by_id.entry(p.tool_use_id.as_str()).or_insert(p);
        }
        by_id
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use condense_abi::testing::MemoryHost;
    use condense_abi::{Context, RunContext};

    #[test]
    fn roundtrip_and_empty() {
        let (host, run) = (MemoryHost::default(), RunContext::default());
        let cx = Context::local(&run, &host);
        assert_eq!(*cx.state::<State>().unwrap(), State::default());
        *host.state.borrow_mut() = Some(" ".into());
        assert_eq!(*cx.state::<State>().unwrap(), State::default());
        let s = State {
            last_seen_ms: Some(5),
            messages_seen: 3,
            last_seen_id: Some("m3".into()),
            pinned: vec![Pinned {
                tool_use_id: "t1".into(),
                tool: "Read".into(),
                tokens: 10,
            }],
        };
        let mut state = cx.state::<State>().unwrap();
        state.set(s.clone());
        assert!(state.save().unwrap());
        assert_eq!(
            host.state.borrow().as_deref(),
            Some(
                r#"{"version":1,"last_seen_ms":5,"messages_seen":3,"last_seen_id":"m3","pinned":[{"tool_use_id":"t1","tool":"Read","tokens":10}]}"#
            )
        );
        assert_eq!(*cx.state::<State>().unwrap(), s);
        let by_id = s.pinned_by_id();
        assert!(by_id.contains_key("t1") && !by_id.contains_key("t2"));
    }

    #[test]
    fn bad_state_is_an_error() {
        let (host, run) = (MemoryHost::default(), RunContext::default());
        let cx = Context::local(&run, &host);
        *host.state.borrow_mut() = Some("[".into());
        assert!(cx.state::<State>().is_err());
        *host.state.borrow_mut() = Some(r#"{"version":2}"#.into());
        let err = cx.state::<State>().unwrap_err();
        assert!(err.message().contains("version 2"), "{}", err.message());
    }
}
