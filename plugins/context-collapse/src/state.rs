//! The stage state: the committed collapses of a session, as JSON.
//!
//! ```json
//! {
//!   "version": 1,
//!   "collapses": [
//!     {
//!       "first": "u1", "last": "a9", "count": 23, "turns": 8,
//!       "ids": ["u1", "a1", "r1", "…", "a9"],
//!       "summary": "…",
//!       "merges": 1,
//!       "committed_ms": 1750000000000,
//!       "replaced_tokens": 41200
//!     }
//!   ]
//! }
//! ```
//!
//! - `first`, `last`, `count`: the original messages the summary stands for (they name the
//!   summary message `collapse-<first>` and fill its header).
//! - `ids`: the ids the span has in the input, oldest first, [`Role::System`] messages excluded
//!   (they are never collapsed). Usually the original ids; a summary message the stage found in its
//!   input without a record (its own output read back, state lost) is adopted under its own id.
//!   Consecutive synthetic ids (`#0`, `#1`, …: request bodies' messages have no ids of their
//!   own) are kept as `[first, last]` runs ([`IdList`]): `[[0, 1595]]` for 1,596 of them.
//! - `summary`: the summary text (without the header line).
//! - `turns`: API turns covered; `merges`: how many later spans were merged into it;
//!   `committed_ms`: host time of the last commit or merge; `replaced_tokens`: tokens of
//!   everything the summary stands for when it was committed (its budget scales with it).
//!
//! Collapses are kept in conversation order. A collapse is matched against each input by its
//! ids only, not by content: earlier stages may have rewritten a message's content (a cleared
//! tool result), which does not make its summary wrong.
//!
//! [`Role::System`]: condense_model::Role::System

use condense_abi::StageState;
use condense_model::id_list::IdList;
use serde::{Deserialize, Serialize};

/// See the [module docs](self). The handle the stage reads it through writes `"version": 1`
/// in front of these fields.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct State {
    pub collapses: Vec<Collapse>,
}

/// One committed collapse.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Collapse {
    pub first: String,
    pub last: String,
    pub count: usize,
    pub turns: usize,
    pub ids: IdList,
    pub summary: String,
    pub merges: usize,
    pub committed_ms: i64,
    /// Tokens of everything the summary stands for, as they were when committed (its budget
    /// scales with it). 0 in states written before it was kept, and for adopted summaries.
    #[serde(default)]
    pub replaced_tokens: usize,
}

impl Collapse {
    /// This collapse without the ids of the messages it stands for: what its summary message
    /// and its report are made of, copied without a string per message.
    pub fn without_ids(&self) -> Collapse {
        Collapse {
            first: self.first.clone(),
            last: self.last.clone(),
            count: self.count,
            turns: self.turns,
            ids: IdList::default(),
            summary: self.summary.clone(),
            merges: self.merges,
            committed_ms: self.committed_ms,
            replaced_tokens: self.replaced_tokens,
        }
    }
}

impl StageState for State {}
