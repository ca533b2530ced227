//! What the readers kept without understanding, gathered into [`crate::Document::warnings`].
//!
//! Readers note through their [`crate::error::Ctx`]; at the end of a read the notes become one
//! warning line per kind, so `stats` can say how much of the count is guesswork:
//!
//! ```text
//! 3 messages or items condense does not understand are kept verbatim and counted as their JSON: item `mcp_call` (1), role `exit` (2)
//! ```

use std::cell::RefCell;
use std::collections::BTreeMap;

/// Notes taken while reading one file.
#[derive(Debug, Default)]
pub(crate) struct Notes {
    /// Roles and items kept verbatim as one opaque block and counted as their JSON, by what
    /// they are (`role `exit``), with how many.
    unknown: RefCell<BTreeMap<String, usize>>,
    /// Lines carried verbatim and not counted, by what they are.
    uncounted: RefCell<BTreeMap<String, usize>>,
    /// Other warning lines, in order.
    lines: RefCell<Vec<String>>,
}

impl Notes {
    pub fn unknown(&self, what: String) {
        *self.unknown.borrow_mut().entry(what).or_default() += 1;
    }

    pub fn uncounted(&self, what: String) {
        *self.uncounted.borrow_mut().entry(what).or_default() += 1;
    }

    /// Whether a message or item was noted as not understood ([`Notes::unknown`],
    /// [`Notes::uncounted`]).
    pub fn noted_items(&self) -> bool {
        !self.unknown.borrow().is_empty() || !self.uncounted.borrow().is_empty()
    }

    pub fn warn(&self, line: String) {
        self.lines.borrow_mut().push(line);
    }

    /// Adds what `other` noted after what these notes hold.
    pub fn absorb(&self, other: Notes) {
        for (what, n) in other.unknown.into_inner() {
            *self.unknown.borrow_mut().entry(what).or_default() += n;
        }
        for (what, n) in other.uncounted.into_inner() {
            *self.uncounted.borrow_mut().entry(what).or_default() += n;
        }
        self.lines.borrow_mut().extend(other.lines.into_inner());
    }

    /// The warning lines: the other lines first, then one for the unknown roles and items, then
    /// one for the uncounted lines.
    pub fn into_warnings(self) -> Vec<String> {
        let mut out = self.lines.into_inner();
        let unknown = self.unknown.into_inner();
        if !unknown.is_empty() {
            let one = total(&unknown) == 1;
            out.push(format!(
                "{} condense does not understand {} kept verbatim and counted as {} JSON: {}",
                plural(total(&unknown), "message or item", "messages or items"),
                if one { "is" } else { "are" },
                if one { "its" } else { "their" },
                listing(&unknown)
            ));
        }
        let uncounted = self.uncounted.into_inner();
        if !uncounted.is_empty() {
            out.push(format!(
                "{} of a kind condense does not know {} carried verbatim and not counted: {}",
                plural(total(&uncounted), "line", "lines"),
                if total(&uncounted) == 1 { "is" } else { "are" },
                listing(&uncounted)
            ));
        }
        out
    }
}

fn total(counts: &BTreeMap<String, usize>) -> usize {
    counts.values().sum()
}

fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// `role `exit` (2), item `mcp_call` (1)`.
fn listing(counts: &BTreeMap<String, usize>) -> String {
    counts
        .iter()
        .map(|(what, n)| format!("{what} ({n})"))
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_line_per_kind_with_counts() {
        let notes = Notes::default();
        notes.warn("line 9 is incomplete".into());
        notes.unknown("role `exit`".into());
        notes.unknown("role `exit`".into());
        notes.unknown("item `mcp_call`".into());
        notes.uncounted("line type `x`".into());
        assert_eq!(
            notes.into_warnings(),
            [
                "line 9 is incomplete",
                "3 messages or items condense does not understand are kept verbatim and counted \
                 as their JSON: item `mcp_call` (1), role `exit` (2)",
                "1 line of a kind condense does not know is carried verbatim and not counted: \
                 line type `x` (1)",
            ]
        );
        assert!(Notes::default().into_warnings().is_empty());
    }
}
