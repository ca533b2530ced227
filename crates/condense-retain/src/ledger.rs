//! The error ledger: each distinct error (by its first meaningful line) with the call it last
//! came from (and the id of its first occurrence), how often, and whether a later step fixed
//! it.
//!
//! An error is *resolved* by a later non-error result of the same call: the same shell command
//! (the whole command text), or the same file tool on the same path, or another tool with the
//! same input. When the same line happens again, the entry counts it and takes that
//! occurrence's call as what a fix must match; it is open again until such a fix. Resolution
//! works across spans: each ledger keeps the first success of every call it saw ([`Fix`]), so
//! [`ErrorLedger::merge_later`] resolves the earlier span's open errors exactly as deriving
//! both spans at once would.

use serde::{Deserialize, Serialize};
use std::collections::{HashMap, HashSet};

/// One distinct error.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorEntry {
    /// The first meaningful line (verbatim, at most 200 characters).
    pub line: String,
    /// The tool of its last occurrence (empty when the call was not in the span): the one whose
    /// resolution `resolved_by` tells.
    pub tool: String,
    /// The last occurrence's command (first line, cut to 100 characters) or path.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub about: String,
    /// What a later success must match to fix it (the last occurrence's call): `sh:<hash of
    /// the whole command>`, `file:<tool>:<path>`, `tool:<tool>:<hash of the input>`; empty
    /// when unknown (never resolved).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub key: String,
    /// The tool_use id of the first occurrence.
    pub first_id: String,
    /// How many results had this line.
    pub count: u32,
    /// The tool_use id of the later success that fixed the last occurrence.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resolved_by: Option<String>,
}

/// The first successful result of a call key in a span.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Fix {
    pub key: String,
    pub id: String,
}

/// Distinct errors in order of first occurrence, never capped (rendering shortens).
///
/// The ledger keeps its lookups (entries by line, open entries by call key, the keys fixed)
/// between merges, so merging a span's ledger costs what the span holds, not what the ledger
/// holds. They are rebuilt when `entries` or `fixes` changed length behind their back
/// (deserialized, pushed to directly); change entries in place only through the ledger's
/// methods.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ErrorLedger {
    pub entries: Vec<ErrorEntry>,
    /// The first success of each call key in the span, in order: what resolves an earlier
    /// span's open errors when the ledgers merge. Not shown.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fixes: Vec<Fix>,
    #[serde(skip)]
    index: LedgerIndex,
}

/// The ledger's lookups, and the lengths of `entries` and `fixes` they were made for.
#[derive(Debug, Clone, Default)]
struct LedgerIndex {
    by_line: HashMap<String, usize>,
    /// Open (unresolved) entries by key.
    open: HashMap<String, Vec<usize>>,
    fixed: HashSet<String>,
    entries: usize,
    fixes: usize,
}

/// What [`ErrorLedger::merge_later_undoable`] changed, to take it back.
#[derive(Debug, Clone, Default)]
pub(crate) struct LedgerUndo {
    entries: usize,
    fixes: usize,
    /// Entries as they were before the merge first changed them.
    changed: Vec<(usize, ErrorEntry)>,
}

impl PartialEq for ErrorLedger {
    fn eq(&self, other: &Self) -> bool {
        self.entries == other.entries && self.fixes == other.fixes
    }
}

impl Eq for ErrorLedger {}

impl ErrorLedger {
    /// Whether there is no error (fixes alone do not count).
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The entry with this line.
    pub fn get(&self, line: &str) -> Option<&ErrorEntry> {
        self.entries.iter().find(|e| e.line == line)
    }

    /// Errors not fixed by a later step.
    pub fn unresolved(&self) -> impl Iterator<Item = &ErrorEntry> {
        self.entries.iter().filter(|e| e.resolved_by.is_none())
    }

    /// Merges the ledger of the next span: its fixes resolve this span's open errors, then
    /// its entries join (same line: one entry, counts add, the later state of resolution
    /// wins; new lines are appended).
    pub fn merge_later(&mut self, later: ErrorLedger) {
        self.merge(later, None);
    }

    /// [`ErrorLedger::merge_later`], and what takes it back ([`ErrorLedger::undo`]).
    pub(crate) fn merge_later_undoable(&mut self, later: ErrorLedger) -> LedgerUndo {
        let mut undo = LedgerUndo {
            entries: self.entries.len(),
            fixes: self.fixes.len(),
            changed: Vec::new(),
        };
        self.merge(later, Some(&mut undo));
        undo
    }

    /// Takes back the merge `undo` was made by (the last one made on this ledger). The
    /// lookups are rebuilt when next needed.
    pub(crate) fn undo(&mut self, undo: LedgerUndo) {
        self.entries.truncate(undo.entries);
        self.fixes.truncate(undo.fixes);
        // Latest first, so an entry changed twice ends as it was before the first change.
        for (i, entry) in undo.changed.into_iter().rev() {
            if let Some(e) = self.entries.get_mut(i) {
                *e = entry;
            }
        }
        self.index = LedgerIndex {
            entries: usize::MAX,
            ..LedgerIndex::default()
        };
    }

    fn merge(&mut self, later: ErrorLedger, mut undo: Option<&mut LedgerUndo>) {
        for fix in later.fixes {
            self.succeed_logged(&fix.key, &fix.id, undo.as_deref_mut());
        }
        for entry in later.entries {
            self.occur_logged(entry, undo.as_deref_mut());
        }
    }

    /// The lookups, rebuilt when stale (see the type's docs).
    fn index(&mut self) -> &mut LedgerIndex {
        let ix = &mut self.index;
        if ix.entries != self.entries.len() || ix.fixes != self.fixes.len() {
            *ix = LedgerIndex::default();
            for fix in &self.fixes {
                ix.fixed.insert(fix.key.clone());
            }
            for (i, e) in self.entries.iter().enumerate() {
                ix.by_line.insert(e.line.clone(), i);
                if e.resolved_by.is_none() && !e.key.is_empty() {
                    ix.open.entry(e.key.clone()).or_default().push(i);
                }
            }
            ix.entries = self.entries.len();
            ix.fixes = self.fixes.len();
        }
        ix
    }

    /// An occurrence (or, when merging, the later span's entry) of an error.
    pub(crate) fn occur(&mut self, entry: ErrorEntry) {
        self.occur_logged(entry, None);
    }

    fn occur_logged(&mut self, entry: ErrorEntry, undo: Option<&mut LedgerUndo>) {
        let known = self.index().by_line.get(&entry.line).copied();
        let i = match known {
            Some(i) => {
                if let Some(undo) = undo {
                    undo.changed.push((i, self.entries[i].clone()));
                }
                let ix = &mut self.index;
                let e = &mut self.entries[i];
                if e.resolved_by.is_none() {
                    if let Some(list) = ix.open.get_mut(&e.key) {
                        list.retain(|j| *j != i);
                    }
                }
                e.count = e.count.saturating_add(entry.count);
                e.key = entry.key;
                e.resolved_by = entry.resolved_by;
                // What the entry shows is the occurrence its state is about.
                if !entry.tool.is_empty() {
                    e.tool = entry.tool;
                    e.about = entry.about;
                }
                i
            }
            None => {
                let i = self.entries.len();
                self.index.by_line.insert(entry.line.clone(), i);
                self.entries.push(entry);
                self.index.entries = self.entries.len();
                i
            }
        };
        let e = &self.entries[i];
        if e.resolved_by.is_none() && !e.key.is_empty() {
            self.index.open.entry(e.key.clone()).or_default().push(i);
        }
    }

    /// A non-error result of the call `key` (tool_use `id`).
    pub(crate) fn succeed(&mut self, key: &str, id: &str) {
        self.succeed_logged(key, id, None);
    }

    fn succeed_logged(&mut self, key: &str, id: &str, mut undo: Option<&mut LedgerUndo>) {
        if key.is_empty() {
            return;
        }
        if let Some(list) = self.index().open.remove(key) {
            for i in list {
                if let Some(undo) = undo.as_deref_mut() {
                    undo.changed.push((i, self.entries[i].clone()));
                }
                self.entries[i].resolved_by = Some(id.to_string());
            }
        }
        if self.index.fixed.insert(key.to_string()) {
            self.fixes.push(Fix {
                key: key.to_string(),
                id: id.to_string(),
            });
            self.index.fixes = self.fixes.len();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One step of a history: an error line from a call, or a success of a call.
    #[derive(Debug, Clone, Copy)]
    enum Step {
        Err(&'static str, &'static str),
        Ok(&'static str),
    }

    fn build(steps: &[(usize, Step)]) -> ErrorLedger {
        let mut b = ErrorLedger::default();
        for (n, step) in steps {
            let id = format!("t{n}");
            match step {
                Step::Err(line, key) => b.occur(ErrorEntry {
                    line: (*line).into(),
                    tool: "bash".into(),
                    about: (*key).into(),
                    key: (*key).into(),
                    first_id: id,
                    count: 1,
                    resolved_by: None,
                }),
                Step::Ok(key) => b.succeed(key, &id),
            }
        }
        b
    }

    #[test]
    fn resolution_reopening_and_counts() {
        use Step::*;
        let l = build(&[
            (1, Err("E1", "make")),
            (2, Err("E2", "test")),
            (3, Ok("make")),
            (4, Err("E2", "test")),
            (5, Err("E3", "make")),
            (6, Ok("test")),
            (7, Err("E1", "make")),
        ]);
        let get = |line: &str| l.get(line).cloned();
        let e1 = get("E1").unwrap();
        assert_eq!(
            (e1.count, e1.first_id.as_str(), e1.resolved_by.as_deref()),
            (2, "t1", None)
        );
        let e2 = get("E2").unwrap();
        assert_eq!((e2.count, e2.resolved_by.as_deref()), (2, Some("t6")));
        assert_eq!(get("E3").unwrap().resolved_by, None);
        assert_eq!(
            l.fixes,
            vec![
                Fix {
                    key: "make".into(),
                    id: "t3".into()
                },
                Fix {
                    key: "test".into(),
                    id: "t6".into()
                }
            ]
        );
        assert_eq!(l.unresolved().count(), 2);
    }

    #[test]
    fn merging_equals_folding() {
        use Step::*;
        let alphabet = [
            Err("E1", "a"),
            Err("E1", "b"),
            Err("E2", "a"),
            Ok("a"),
            Ok("b"),
        ];
        let mut seqs: Vec<Vec<Step>> = vec![vec![]];
        let mut frontier = seqs.clone();
        for _ in 0..5 {
            frontier = frontier
                .iter()
                .flat_map(|s| {
                    alphabet.iter().map(move |step| {
                        let mut s = s.clone();
                        s.push(*step);
                        s
                    })
                })
                .collect();
            seqs.extend(frontier.iter().cloned());
        }
        assert!(seqs.len() > 3000);
        for s in &seqs {
            let numbered: Vec<(usize, Step)> = s.iter().copied().enumerate().collect();
            let whole = build(&numbered);
            for split in 0..=numbered.len() {
                let (a, b) = numbered.split_at(split);
                let mut merged = build(a);
                merged.merge_later(build(b));
                assert_eq!(merged, whole, "{s:?} split at {split}");
            }
        }
    }
}
