//! The marker snip writes in place of a repeated tool result, which other stages read too.
//!
//! snip replaces a tool result whose text another result holds with a pointer to the copy it
//! keeps: `[Duplicate file content, see earlier in conversation: tool_use_id toolu_01]` (or
//! `see later`, when the last copy is kept). A stage that folds the kept copy away
//! (context-collapse) leaves that pointer naming a result no longer in the conversation, and
//! says so in its place ([`folded_marker`]). Every form starts with [`DUPLICATE_PREFIX`], is
//! one line and ends with `]`: snip never processes it again, and `condense expand` knows it as
//! a marker.
//!
//! ```
//! use condense_model::duplicate::{duplicate_marker, folded_marker, pointed_to, Toward};
//!
//! let marker = duplicate_marker(Toward::Earlier, "toolu_01");
//! assert_eq!(pointed_to(&marker), Some((Toward::Earlier, "toolu_01")));
//! let folded = folded_marker("toolu_01");
//! assert!(folded.starts_with(condense_model::duplicate::DUPLICATE_PREFIX));
//! assert_eq!(pointed_to(&folded), None); // it points nowhere now
//! ```

/// Every duplicate marker starts with this.
pub const DUPLICATE_PREFIX: &str = "[Duplicate file content, see ";

/// Where the kept copy is, from the marker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Toward {
    /// An earlier result (snip's `keep = "first"`).
    Earlier,
    /// A later one (`keep = "last"`).
    Later,
}

impl Toward {
    fn word(self) -> &'static str {
        match self {
            Toward::Earlier => "earlier",
            Toward::Later => "later",
        }
    }
}

/// What comes between the direction and the kept copy's id.
const IN_CONVERSATION: &str = " in conversation: tool_use_id ";

/// The marker pointing at the kept copy, the result of tool call `kept_id`.
pub fn duplicate_marker(toward: Toward, kept_id: &str) -> String {
    format!(
        "{DUPLICATE_PREFIX}{}{IN_CONVERSATION}{kept_id}]",
        toward.word()
    )
}

/// The direction and id a [`duplicate_marker`] points at; `None` for any other text.
pub fn pointed_to(text: &str) -> Option<(Toward, &str)> {
    let rest = text.strip_prefix(DUPLICATE_PREFIX)?;
    let (toward, rest) = [Toward::Earlier, Toward::Later]
        .into_iter()
        .find_map(|t| Some((t, rest.strip_prefix(t.word())?)))?;
    let id = rest.strip_prefix(IN_CONVERSATION)?.strip_suffix(']')?;
    let plain = !id.is_empty() && !id.contains([' ', ']', '\n']);
    plain.then_some((toward, id))
}

/// What a [`duplicate_marker`] becomes once the result it points at, of tool call `kept_id`, is
/// folded into a summary: the pointer, saying the content is no longer there to see.
/// About as long as the pointer it replaces: `[Duplicate file content, see tool_use_id
/// toolu_01: folded into a summary, not shown]`.
pub fn folded_marker(kept_id: &str) -> String {
    format!("{DUPLICATE_PREFIX}tool_use_id {kept_id}: folded into a summary, not shown]")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markers_read_back_and_other_texts_point_nowhere() {
        for toward in [Toward::Earlier, Toward::Later] {
            let m = duplicate_marker(toward, "call_7");
            assert_eq!(pointed_to(&m), Some((toward, "call_7")));
        }
        assert_eq!(
            duplicate_marker(Toward::Earlier, "t1"),
            "[Duplicate file content, see earlier in conversation: tool_use_id t1]"
        );
        for other in [
            "",
            "[Duplicate file content, see earlier in conversation: tool_use_id ]",
            "[Duplicate file content, see earlier in conversation: tool_use_id a b]",
            "[Duplicate file content, see earlier in conversation: tool_use_id t1] and more",
            "[Duplicate file content, see elsewhere in conversation: tool_use_id t1]",
            "see earlier in conversation: tool_use_id t1]",
        ] {
            assert_eq!(pointed_to(other), None, "{other:?}");
        }
        let folded = folded_marker("t1");
        assert!(folded.starts_with(DUPLICATE_PREFIX) && folded.ends_with(']'));
        assert!(!folded.contains('\n') && pointed_to(&folded).is_none());
    }
}
