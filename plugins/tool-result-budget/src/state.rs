//! The stage's persistent state: every decision it made, by tool_use id.
//!
//! ```json
//! {
//!   "version": 1,
//!   "replaced": {
//!     "toolu_01": {
//!       "tool": "Bash",
//!       "key": "9f1c…",
//!       "original_chars": 60000,
//!       "original_xxh3": "1a2b3c4d5e6f7a8b",
//!       "reference": "[condense: tool result persisted — 60,000 chars, key 9f1c…]\n…"
//!     }
//!   },
//!   "kept": ["toolu_00", "toolu_02"]
//! }
//! ```
//!
//! `replaced` holds the exact reference text put in place of each persisted result, so a rerun
//! puts back the very same text whatever the config says by then. `kept` lists the results that
//! were judged and left whole, so a later, lower limit does not replace them either (that would
//! change a prefix the model has already cached). Both maps are sorted, so the JSON is stable.

use condense_abi::StageState;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use xxhash_rust::xxh3::xxh3_64;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct State {
    pub version: u32,
    #[serde(default)]
    pub replaced: BTreeMap<String, Replaced>,
    #[serde(default)]
    pub kept: BTreeSet<String>,
}

impl Default for State {
    fn default() -> Self {
        State {
            version: Self::VERSION,
            replaced: BTreeMap::new(),
            kept: BTreeSet::new(),
        }
    }
}

/// One persisted result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Replaced {
    /// The tool that produced it (`?` when its tool_use was not in the conversation).
    pub tool: String,
    /// Store key of the original text.
    pub key: String,
    /// Chars of the original text.
    pub original_chars: usize,
    /// xxh3-64 of the original text, hex: the decision is re-applied only to the same text.
    pub original_xxh3: String,
    /// The exact text that replaced it.
    pub reference: String,
}

/// The fingerprint stored in [`Replaced::original_xxh3`].
pub fn fingerprint(text: &str) -> String {
    format!("{:016x}", xxh3_64(text.as_bytes()))
}

impl StageState for State {
    const VERSION: u32 = 1;
    fn version(&self) -> u32 {
        self.version
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::ToolResultBudget;
    use condense_abi::{parse_state, state_json, Stage};

    #[test]
    fn roundtrip_and_empty() {
        assert_eq!(
            parse_state::<State>(ToolResultBudget::NAME, None),
            Ok(State::default())
        );
        assert_eq!(
            parse_state::<State>(ToolResultBudget::NAME, Some("  ")),
            Ok(State::default())
        );
        let mut s = State::default();
        s.kept.insert("a".into());
        s.replaced.insert(
            "b".into(),
            Replaced {
                tool: "Bash".into(),
                key: "k".into(),
                original_chars: 3,
                original_xxh3: fingerprint("abc"),
                reference: "r".into(),
            },
        );
        let json = state_json(ToolResultBudget::NAME, &s).unwrap();
        assert_eq!(
            parse_state::<State>(ToolResultBudget::NAME, Some(&json)),
            Ok(s)
        );
    }

    #[test]
    fn bad_state_is_an_error() {
        assert!(parse_state::<State>(ToolResultBudget::NAME, Some("{")).is_err());
        let err =
            parse_state::<State>(ToolResultBudget::NAME, Some(r#"{"version":7}"#)).unwrap_err();
        assert!(err.contains("version 7"), "{err}");
    }
}
