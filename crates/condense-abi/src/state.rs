//! A stage's persistent state: versioned JSON kept by the host per stage and session, read and
//! saved through a [`Versioned`] handle.
//!
//! The state type carries no version field of its own: the handle writes `"version"` first in
//! the JSON object, then the type's fields, and refuses a stored state of another version.
//!
//! ```
//! use condense_abi::testing::MemoryHost;
//! use condense_abi::{Context, RunContext, StageState};
//!
//! #[derive(serde::Serialize, serde::Deserialize, Default, Debug, PartialEq)]
//! struct Seen { runs: usize }
//! impl StageState for Seen {}
//!
//! let (host, run) = (MemoryHost::default(), RunContext::default());
//! let cx = Context::local(&run, &host);
//! let mut state = cx.state::<Seen>()?;
//! state.runs += 1;
//! assert!(state.save()?);
//! assert_eq!(host.state.borrow().as_deref(), Some(r#"{"version":1,"runs":1}"#));
//! assert!(!cx.state::<Seen>()?.save()?); // nothing changed: nothing written
//! # Ok::<(), condense_abi::StageError>(())
//! ```

use crate::sdk::StageError;
use crate::Context;
use serde::de::DeserializeOwned;
use serde::Serialize;

/// A stage's state type. Bump [`VERSION`](Self::VERSION) when its JSON changes incompatibly:
/// a state saved under another version is refused with both versions named.
pub trait StageState: Serialize + DeserializeOwned + Default {
    /// The format version this stage reads and writes.
    const VERSION: u32 = 1;
}

/// The key the version is kept under.
const VERSION_KEY: &str = "version";

/// Parses stored state text: none yet (or blank) gives `S::default()`; otherwise the text must
/// be a JSON object carrying `"version": S::VERSION` and `S`'s fields.
pub(crate) fn parse_state<S: StageState>(text: Option<&str>) -> Result<S, StageError> {
    let Some(text) = text.filter(|t| !t.trim().is_empty()) else {
        return Ok(S::default());
    };
    if let Some(state) = parse_as_written::<S>(text) {
        return Ok(state);
    }
    let mut object: serde_json::Map<String, serde_json::Value> = serde_json::from_str(text)
        .map_err(|e| StageError::new(format!("stored state is not valid: {e}")))?;
    let version = object.remove(VERSION_KEY);
    match version.as_ref().and_then(serde_json::Value::as_u64) {
        Some(v) if v == u64::from(S::VERSION) => {}
        Some(v) => {
            return Err(StageError::new(format!(
                "stored state has version {v}, this stage reads version {}",
                S::VERSION
            )))
        }
        None => {
            return Err(StageError::new(
                "stored state is not valid: it has no version number",
            ))
        }
    }
    serde_json::from_value(serde_json::Value::Object(object))
        .map_err(|e| StageError::new(format!("stored state is not valid: {e}")))
}

/// State text as [`state_json`] writes it (`{"version":N,` first), read straight into `S`:
/// the version from its prefix, the fields from the rest. A state is read at every run and can
/// be large (microcompact's pinned edits: 42 KB after a first run at 1M tokens); going through a
/// JSON map first built every entry twice. `None` for anything else (another layout, another
/// version, a field `S` refuses): [`parse_state`] then reads it the general way, with its errors.
fn parse_as_written<S: StageState>(text: &str) -> Option<S> {
    let rest = text.strip_prefix(r#"{"version":"#)?;
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    if rest[..digits].parse::<u32>().ok()? != S::VERSION {
        return None;
    }
    let fields = match rest.as_bytes().get(digits)? {
        b',' => format!("{{{}", &rest[digits + 1..]),
        b'}' => format!("{{{}", &rest[digits..]),
        _ => return None,
    };
    serde_json::from_str(&fields).ok()
}

/// The JSON text [`parse_state`] reads back: `{"version":N, ...fields}`, compact, fields in
/// declaration order.
pub(crate) fn state_json<S: StageState>(state: &S) -> Result<String, StageError> {
    #[derive(Serialize)]
    struct Envelope<'s, S> {
        version: u32,
        #[serde(flatten)]
        state: &'s S,
    }
    serde_json::to_string(&Envelope {
        version: S::VERSION,
        state,
    })
    .map_err(|e| StageError::new(format!("cannot serialize the stage state: {e}")))
}

/// A stage's state for this session, read with [`Context::state`]: dereferences to `S`, and
/// [`save`](Self::save) writes it back in one call, only when it changed.
#[derive(Debug)]
pub struct Versioned<'a, S: StageState> {
    value: S,
    stored: Option<String>,
    cx: Context<'a>,
}

impl<'a, S: StageState> Versioned<'a, S> {
    pub(crate) fn new(value: S, stored: Option<String>, cx: Context<'a>) -> Self {
        Versioned { value, stored, cx }
    }

    /// Writes the state unless that would change nothing (its text is what was read, or nothing
    /// was stored and it is the default). Returns whether it wrote.
    pub fn save(&mut self) -> Result<bool, StageError> {
        let text = state_json(&self.value)?;
        let unchanged = match &self.stored {
            Some(old) => *old == text,
            None => text == state_json(&S::default())?,
        };
        if unchanged {
            return Ok(false);
        }
        self.cx.state_put(&text)?;
        self.stored = Some(text);
        Ok(true)
    }

    /// Replaces the value (to save a state built from scratch).
    pub fn set(&mut self, value: S) {
        self.value = value;
    }

    /// The value, without saving it.
    pub fn into_inner(self) -> S {
        self.value
    }
}

impl<S: StageState> std::ops::Deref for Versioned<'_, S> {
    type Target = S;
    fn deref(&self) -> &S {
        &self.value
    }
}

impl<S: StageState> std::ops::DerefMut for Versioned<'_, S> {
    fn deref_mut(&mut self) -> &mut S {
        &mut self.value
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::testing::MemoryHost;
    use crate::RunContext;
    use serde::Deserialize;
    use std::collections::BTreeMap;

    #[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
    #[serde(deny_unknown_fields)]
    struct State {
        #[serde(default)]
        seen: BTreeMap<String, usize>,
    }

    impl StageState for State {
        const VERSION: u32 = 3;
    }

    fn message(r: Result<State, StageError>) -> String {
        r.unwrap_err().message().to_string()
    }

    #[test]
    fn no_state_or_blank_state_is_the_default() {
        for text in [None, Some(""), Some(" \n\t")] {
            assert_eq!(parse_state::<State>(text).unwrap(), State::default());
        }
    }

    #[test]
    fn invalid_json_and_unknown_fields_are_named() {
        assert_eq!(
            message(parse_state::<State>(Some("{"))),
            "stored state is not valid: EOF while parsing an object at line 1 column 1"
        );
        let err = message(parse_state::<State>(Some(r#"{"version":3,"x":1}"#)));
        assert!(
            err.starts_with("stored state is not valid: unknown field `x`"),
            "{err}"
        );
        assert_eq!(
            message(parse_state::<State>(Some(r#"{"seen":{}}"#))),
            "stored state is not valid: it has no version number"
        );
    }

    #[test]
    fn another_version_is_refused() {
        assert_eq!(
            message(parse_state::<State>(Some(r#"{"version":7}"#))),
            "stored state has version 7, this stage reads version 3"
        );
    }

    #[test]
    fn the_version_comes_first_and_round_trips() {
        let mut state = State::default();
        state.seen.insert("b".into(), 2);
        state.seen.insert("a".into(), 1);
        let json = state_json(&state).unwrap();
        assert_eq!(json, r#"{"version":3,"seen":{"a":1,"b":2}}"#);
        assert_eq!(parse_state::<State>(Some(&json)).unwrap(), state);
    }

    /// The text as written is read without the general path, to the same state; every text
    /// the quick read declines (another layout, a duplicate version, a refused field) gets the
    /// general path's answer.
    #[test]
    fn the_quick_read_agrees_with_the_general_one() {
        let mut state = State::default();
        state.seen.insert("a".into(), 1);
        let json = state_json(&state).unwrap();
        assert_eq!(parse_as_written::<State>(&json), Some(state.clone()));
        assert_eq!(
            parse_as_written::<State>(r#"{"version":3}"#),
            Some(State::default())
        );
        for declined in [
            r#"{"seen":{"a":1},"version":3}"#,
            r#"{"version":3,"seen":{},"version":3}"#,
            r#"{"version":3,"x":1}"#,
            r#"{"version":30,"seen":{}}"#,
            r#"{"version":7}"#,
            r#"{"version": 3,"seen":{}}"#,
            r#"{"version":3"#,
        ] {
            assert_eq!(parse_as_written::<State>(declined), None, "{declined}");
        }
        assert_eq!(
            parse_state::<State>(Some(r#"{"seen":{"a":1},"version":3}"#)).unwrap(),
            state
        );
    }

    #[test]
    fn save_writes_only_what_changes() {
        let host = MemoryHost::default();
        let run = RunContext::default();
        let cx = Context::local(&run, &host);
        let mut state = cx.state::<State>().unwrap();
        // Nothing stored and nothing to store: no write.
        assert!(!state.save().unwrap());
        state.seen.insert("a".into(), 1);
        assert!(state.save().unwrap());
        // Saved once: saving the same value again writes nothing.
        assert!(!state.save().unwrap());
        let mut again = cx.state::<State>().unwrap();
        assert_eq!(again.seen.get("a"), Some(&1));
        assert!(!again.save().unwrap());
        assert_eq!(host.state_puts.get(), 1);
    }

    #[test]
    fn a_serialize_failure_is_an_error_not_a_silent_default() {
        // serde_json refuses maps whose keys are not strings.
        #[derive(Default, Serialize, Deserialize)]
        struct Bad {
            map: BTreeMap<(u8, u8), u8>,
        }
        impl StageState for Bad {}
        let bad = Bad {
            map: BTreeMap::from([((1, 2), 0)]),
        };
        let err = state_json(&bad).unwrap_err();
        assert_eq!(
            err.message(),
            "cannot serialize the stage state: key must be a string"
        );
    }
}
