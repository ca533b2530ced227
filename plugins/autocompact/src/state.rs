//! The stage state for one session, as JSON.
//!
//! ```json
//! {
//!   "version": 1,
//!   "config_hash": "5d41402abc4b2a76",
//!   "compactions": 2,
//!   "consecutive_failures": 0,
//!   "last_failure": null,
//!   "last": {
//!     "summary_id": "autocompact-2",
//!     "turns_total": 41,
//!     "at_ms": 1750000000000,
//!     "tokens_before": 171230,
//!     "tokens_after": 23410
//!   }
//! }
//! ```
//!
//! - `config_hash`: xxh3 of the stage config; a different config resets the circuit breaker.
//! - `compactions`: how many times the stage compacted this session (numbers the summary ids).
//! - `consecutive_failures`, `last_failure`: the circuit breaker. A failed attempt (the summarizer
//!   failed, or the result would not have been smaller) adds one; a compaction resets it to 0.
//!   From `max_consecutive_failures` on, the stage stops trying for the session.
//! - `last`: the last compaction: the id of its summary message, how many API turns (API rounds,
//!   see `condense_turns`) its input had (to count the turns since when the agent did not adopt
//!   the output), when, and the token estimates of the messages before and after.

use condense_abi::StageState;
use serde::{Deserialize, Serialize};

/// See the [module docs](self). The handle the stage reads it through writes `"version": 1`
/// in front of these fields.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct State {
    pub config_hash: String,
    pub compactions: usize,
    pub consecutive_failures: usize,
    pub last_failure: Option<String>,
    pub last: Option<LastCompaction>,
}

/// The last compaction of the session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LastCompaction {
    pub summary_id: String,
    pub turns_total: usize,
    pub at_ms: i64,
    pub tokens_before: usize,
    pub tokens_after: usize,
}

impl StageState for State {}
