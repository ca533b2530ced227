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
use std::collections::BTreeMap;
use twox_hash::XxHash3_64;

/// Every decision, by tool_use id (the JSON's `version` is written by the SDK's state handle).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct State {
    #[serde(default)]
    pub replaced: BTreeMap<String, Replaced>,
    #[serde(default)]
    pub kept: Ids,
}

/// A sorted set of ids, kept as a sorted list: the same JSON as a `BTreeSet` (a sorted array),
/// read at every run without a tree insertion per id (a session at a million tokens keeps
/// about 800).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub struct Ids(Vec<String>);

impl Ids {
    pub fn contains(&self, id: &str) -> bool {
        self.0.binary_search_by(|k| k.as_str().cmp(id)).is_ok()
    }

    /// Adds `id`; `false` when it was there.
    pub fn insert(&mut self, id: String) -> bool {
        match self.0.binary_search(&id) {
            Ok(_) => false,
            Err(at) => {
                self.0.insert(at, id);
                true
            }
        }
    }
}

impl<'de> Deserialize<'de> for Ids {
    /// Any list of ids: sorted and without repeats once read, as a set's would be.
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let mut ids = Vec::<String>::deserialize(d)?;
        // A list this stage wrote is sorted already: the check is one pass.
        if !ids.is_sorted_by(|a, b| a < b) {
            ids.sort_unstable();
            ids.dedup();
        }
        Ok(Ids(ids))
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
    format!("{:016x}", XxHash3_64::oneshot(text.as_bytes()))
}

impl StageState for State {}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use condense_abi::testing::MemoryHost;
    use condense_abi::{Context, RunContext};

    #[test]
    fn kept_ids_read_as_a_set_and_write_sorted() {
        let ids: Ids = serde_json::from_str(r#"["c", "a", "b", "a"]"#).unwrap();
        assert_eq!(serde_json::to_string(&ids).unwrap(), r#"["a","b","c"]"#);
        let mut ids = ids;
        assert!(ids.contains("b") && !ids.contains("bb"));
        assert!(ids.insert("bb".into()) && !ids.insert("a".into()));
        assert_eq!(
            serde_json::to_string(&ids).unwrap(),
            r#"["a","b","bb","c"]"#
        );
    }

    #[test]
    fn roundtrip_and_empty() {
        let (host, run) = (MemoryHost::default(), RunContext::default());
        let cx = Context::local(&run, &host);
        assert_eq!(*cx.state::<State>().unwrap(), State::default());
        *host.state.borrow_mut() = Some("  ".into());
        assert_eq!(*cx.state::<State>().unwrap(), State::default());
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
        let mut state = cx.state::<State>().unwrap();
        state.set(s.clone());
        assert!(state.save().unwrap());
        let json = host.state.borrow().clone().unwrap();
        assert!(
            json.starts_with(r#"{"version":1,"replaced":{"b":{"tool":"Bash","#),
            "{json}"
        );
        assert!(json.ends_with(r#""kept":["a"]}"#), "{json}");
        assert_eq!(*cx.state::<State>().unwrap(), s);
    }

    #[test]
    fn bad_state_is_an_error() {
        let (host, run) = (MemoryHost::default(), RunContext::default());
        let cx = Context::local(&run, &host);
        *host.state.borrow_mut() = Some("{".into());
        assert!(cx.state::<State>().is_err());
        *host.state.borrow_mut() = Some(r#"{"version":7}"#.into());
        let err = cx.state::<State>().unwrap_err();
        assert!(err.message().contains("version 7"), "{}", err.message());
    }
}
