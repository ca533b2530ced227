//! The artifact trail: every path the tool calls wrote or read, with its status, its last
//! operation and how many operations touched it, least recently touched first.
//!
//! Operations fall in four classes: *read* (`read`); *write*, a file made or replaced whole
//! (`create`, `write`, `move-to`, `copy-to`, `mkdir`, `touch`); *edit*, a file changed in place
//! (`edit`, `append`); *delete* (`delete`, `move-from`). A path's status follows what happened to
//! it, in order:
//!
//! | before \ then          | read      | write    | edit     | delete                 |
//! |------------------------|-----------|----------|----------|------------------------|
//! | (unseen)               | Read      | Created  | Modified | Deleted                |
//! | Read                   | Read      | Modified | Modified | Deleted                |
//! | Created                | Created   | Created  | Created  | Deleted (created here) |
//! | Modified               | Modified  | Modified | Modified | Deleted                |
//! | Deleted                | Deleted   | Modified | Modified | Deleted                |
//! | Deleted (created here) | (same)    | Created  | Created  | Deleted (created here) |
//!
//! So a file both read and changed is listed as changed; a `Write` to a file read earlier is a
//! modification, not a creation; a file created then deleted is still listed (the agent wrote
//! it), as deleted and "created here"; and a path written again after a delete is *Created*
//! when it did not exist before this history, *Modified* when it did (a read, edit or delete of
//! an unseen path means it existed). A file never read or written is absent.
//!
//! Each row is the status of the operations so far *as seen from an unseen path*, and the
//! table is the composition [`Standing::then`] of an earlier span's standing with a later
//! one's, which is associative: merging the trail of an earlier span with the trail of the
//! next one ([`ArtifactTrail::merge_later`]) gives exactly the trail of both spans at once.

use serde::{Deserialize, Serialize};
use std::collections::HashMap;

/// What a tool call did to a path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FileOp {
    /// Read only (`Read`, `view`, `cat f`, `< f`).
    Read,
    /// Created by an editor's `create` or a patch's `*** Add File:`.
    Create,
    /// Written or overwritten whole (`Write`, `> f`, `tee f`, a here-document).
    Write,
    /// Changed in place (`Edit`, `str_replace`, `sed -i`, a patch's `*** Update File:`).
    Edit,
    /// Appended to (`>> f`, `tee -a f`).
    Append,
    /// Deleted (`rm`, a patch's `*** Delete File:`).
    Delete,
    /// The source of a move (`mv SRC DST`): gone from here.
    MoveFrom,
    /// The destination of a move (`mv SRC DST`, a patch's `*** Move to:`).
    MoveTo,
    /// The destination of a copy (`cp SRC DST`).
    CopyTo,
    /// A directory made (`mkdir`).
    Mkdir,
    /// Touched (`touch f`).
    Touch,
}

impl FileOp {
    /// Every operation.
    pub const ALL: [FileOp; 11] = [
        FileOp::Read,
        FileOp::Create,
        FileOp::Write,
        FileOp::Edit,
        FileOp::Append,
        FileOp::Delete,
        FileOp::MoveFrom,
        FileOp::MoveTo,
        FileOp::CopyTo,
        FileOp::Mkdir,
        FileOp::Touch,
    ];

    /// The name rendered after `last:` (`read`, `create`, ..., `move-from`, `copy-to`).
    pub fn as_str(self) -> &'static str {
        match self {
            FileOp::Read => "read",
            FileOp::Create => "create",
            FileOp::Write => "write",
            FileOp::Edit => "edit",
            FileOp::Append => "append",
            FileOp::Delete => "delete",
            FileOp::MoveFrom => "move-from",
            FileOp::MoveTo => "move-to",
            FileOp::CopyTo => "copy-to",
            FileOp::Mkdir => "mkdir",
            FileOp::Touch => "touch",
        }
    }

    /// The operation named `name` ([`FileOp::as_str`]).
    pub fn from_name(name: &str) -> Option<FileOp> {
        FileOp::ALL.into_iter().find(|op| op.as_str() == name)
    }

    /// Whether the operation writes the path (anything but a read).
    pub fn writes(self) -> bool {
        self != FileOp::Read
    }

    /// The standing of an unseen path after this operation.
    fn on_unseen(self) -> Standing {
        let status = match self {
            FileOp::Read => FileStatus::Read,
            FileOp::Create
            | FileOp::Write
            | FileOp::MoveTo
            | FileOp::CopyTo
            | FileOp::Mkdir
            | FileOp::Touch => FileStatus::Created,
            FileOp::Edit | FileOp::Append => FileStatus::Modified,
            FileOp::Delete | FileOp::MoveFrom => FileStatus::Deleted,
        };
        Standing {
            status,
            created_here: status == FileStatus::Created,
        }
    }
}

/// Where a path is listed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FileStatus {
    Created,
    Modified,
    Deleted,
    Read,
}

impl FileStatus {
    /// `created`, `modified`, `deleted`, `read`.
    pub fn as_str(self) -> &'static str {
        match self {
            FileStatus::Created => "created",
            FileStatus::Modified => "modified",
            FileStatus::Deleted => "deleted",
            FileStatus::Read => "read",
        }
    }

    /// The status named `name` ([`FileStatus::as_str`], any case).
    pub fn from_name(name: &str) -> Option<FileStatus> {
        [
            FileStatus::Created,
            FileStatus::Modified,
            FileStatus::Deleted,
            FileStatus::Read,
        ]
        .into_iter()
        .find(|s| s.as_str().eq_ignore_ascii_case(name))
    }

    /// Whether the path was written (created, modified or deleted).
    pub fn written(self) -> bool {
        self != FileStatus::Read
    }
}

/// A path's status with whether it was absent before this history (the row of the table).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Standing {
    pub status: FileStatus,
    /// The path did not exist before this history: true for `Created`, and for a `Deleted`
    /// path that was created first.
    pub created_here: bool,
}

impl Standing {
    /// The standing after an earlier span left `self` and a later span, seen from an unseen
    /// path, left `later`.
    pub fn then(self, later: Standing) -> Standing {
        if later.status == FileStatus::Read {
            return self;
        }
        let existed = !self.created_here;
        let status = match (later.status, existed) {
            (FileStatus::Deleted, _) => FileStatus::Deleted,
            (_, true) => FileStatus::Modified,
            (_, false) => FileStatus::Created,
        };
        Standing {
            status,
            created_here: !existed,
        }
    }

    /// The standing after `op`.
    pub fn after(self, op: FileOp) -> Standing {
        self.then(op.on_unseen())
    }
}

fn is_false(b: &bool) -> bool {
    !*b
}

/// One path of the trail.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Artifact {
    pub path: String,
    pub status: FileStatus,
    /// See [`Standing::created_here`].
    #[serde(default, skip_serializing_if = "is_false")]
    pub created_here: bool,
    /// The last operation on the path.
    #[serde(rename = "op")]
    pub last_op: FileOp,
    /// How many operations touched it.
    pub ops: u32,
}

impl Artifact {
    /// The path after one operation, from unseen.
    pub fn new(path: impl Into<String>, op: FileOp) -> Artifact {
        let s = op.on_unseen();
        Artifact {
            path: path.into(),
            status: s.status,
            created_here: s.created_here,
            last_op: op,
            ops: 1,
        }
    }

    pub fn standing(&self) -> Standing {
        Standing {
            status: self.status,
            created_here: self.created_here,
        }
    }

    /// This path after `later` (the same path in the next span).
    fn then(&mut self, later: &Artifact) {
        let s = self.standing().then(later.standing());
        self.status = s.status;
        self.created_here = s.created_here;
        self.last_op = later.last_op;
        self.ops = self.ops.saturating_add(later.ops);
    }
}

/// Paths by recency, least recently touched first.
///
/// Kept as slots in recency order with an index by path: a path touched again leaves a hole
/// where it was and moves to the end, and the holes are swept out once they outnumber the
/// paths. So merging a span's trail costs what the span touched, not what the trail holds (a
/// running summary merges a span into the whole session's trail at every commit). Serialized
/// as the list of paths, least recent first.
#[derive(Debug, Clone, Default)]
pub struct ArtifactTrail {
    slots: Vec<Option<Artifact>>,
    /// Each path's slot.
    index: HashMap<String, usize>,
}

/// What [`ArtifactTrail::merge_later_undoable`] changed, to take it back.
#[derive(Debug, Clone, Default)]
pub(crate) struct TrailUndo {
    /// The slots before the merge (the merge only appends and leaves holes).
    len: usize,
    /// Each path the merge touched, in order: where it was and what it was, if anywhere.
    touched: Vec<(String, Option<(usize, Artifact)>)>,
}

impl PartialEq for ArtifactTrail {
    fn eq(&self, other: &Self) -> bool {
        self.entries().eq(other.entries())
    }
}

impl Eq for ArtifactTrail {}

impl Serialize for ArtifactTrail {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(self.entries())
    }
}

impl<'de> Deserialize<'de> for ArtifactTrail {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let mut trail = ArtifactTrail::default();
        for artifact in Vec::<Artifact>::deserialize(deserializer)? {
            trail.push(artifact);
        }
        Ok(trail)
    }
}

impl ArtifactTrail {
    /// Every path, least recently touched first.
    pub fn entries(&self) -> impl DoubleEndedIterator<Item = &Artifact> {
        self.slots.iter().flatten()
    }

    /// Created, modified and deleted paths, least recently touched first.
    pub fn written(&self) -> impl DoubleEndedIterator<Item = &Artifact> {
        self.entries().filter(|a| a.status.written())
    }

    /// Paths only read, least recently touched first.
    pub fn read_only(&self) -> impl DoubleEndedIterator<Item = &Artifact> {
        self.entries().filter(|a| !a.status.written())
    }

    pub fn get(&self, path: &str) -> Option<&Artifact> {
        self.index.get(path).and_then(|&i| self.slots[i].as_ref())
    }

    pub fn len(&self) -> usize {
        self.index.len()
    }

    pub fn is_empty(&self) -> bool {
        self.index.is_empty()
    }

    /// Records `op` on `path`; the path becomes the most recent.
    pub fn record(&mut self, path: &str, op: FileOp) {
        self.push(Artifact::new(path, op));
    }

    /// Adds `artifact` as the most recent, combined with what the trail holds for its path.
    pub fn push(&mut self, artifact: Artifact) {
        self.touch(artifact);
        self.sweep_if_sparse();
    }

    /// Merges the trail of the next span: statuses compose ([`Standing::then`]), operation
    /// counts add up, the later span's last operation wins, and its paths become the most
    /// recent, in its order.
    pub fn merge_later(&mut self, later: ArtifactTrail) {
        for artifact in later.slots.into_iter().flatten() {
            self.push(artifact);
        }
    }

    /// [`ArtifactTrail::merge_later`], and what takes it back ([`ArtifactTrail::undo`]).
    pub(crate) fn merge_later_undoable(&mut self, later: ArtifactTrail) -> TrailUndo {
        // Swept before, not during: the undo refers to the slots as they are now.
        self.sweep_if_sparse();
        let mut undo = TrailUndo {
            len: self.slots.len(),
            touched: Vec::with_capacity(later.index.len()),
        };
        for artifact in later.slots.into_iter().flatten() {
            let was = self
                .index
                .get(&artifact.path)
                .and_then(|&i| Some((i, self.slots[i].clone()?)));
            undo.touched.push((artifact.path.clone(), was));
            self.touch(artifact);
        }
        undo
    }

    /// Takes back the merge `undo` was made by (the last one made on this trail).
    pub(crate) fn undo(&mut self, undo: TrailUndo) {
        self.slots.truncate(undo.len);
        // Latest first, so a path touched twice ends where it was before the first touch.
        for (path, was) in undo.touched.into_iter().rev() {
            match was {
                Some((i, artifact)) if i < undo.len => {
                    self.slots[i] = Some(artifact);
                    self.index.insert(path, i);
                }
                Some(_) => {}
                None => {
                    self.index.remove(&path);
                }
            }
        }
    }

    /// `artifact` as the most recent: combined with the path's slot, which becomes a hole.
    fn touch(&mut self, artifact: Artifact) {
        let end = self.slots.len();
        match self.index.get_mut(&artifact.path) {
            Some(i) => {
                let merged = self.slots[*i].take().map(|mut a| {
                    a.then(&artifact);
                    a
                });
                *i = end;
                // The index only names slots that hold their path.
                self.slots.push(Some(merged.unwrap_or(artifact)));
            }
            None => {
                self.index.insert(artifact.path.clone(), end);
                self.slots.push(Some(artifact));
            }
        }
    }

    /// Sweeps the holes out once they outnumber the paths (so each sweep is paid for by as
    /// many moves before it).
    fn sweep_if_sparse(&mut self) {
        if self.slots.len() <= 2 * self.index.len() + 16 {
            return;
        }
        self.slots.retain(Option::is_some);
        for (i, a) in self.slots.iter().enumerate() {
            if let Some(slot) = a.as_ref().and_then(|a| self.index.get_mut(&a.path)) {
                *slot = i;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use FileOp::*;

    fn fold(ops: &[FileOp]) -> ArtifactTrail {
        let mut b = ArtifactTrail::default();
        for op in ops {
            b.record("f", *op);
        }
        b
    }

    fn standing(ops: &[FileOp]) -> (FileStatus, bool) {
        let t = fold(ops);
        let a = t.entries().next().unwrap();
        (a.status, a.created_here)
    }

    #[test]
    fn status_table() {
        use FileStatus as S;
        assert_eq!(standing(&[Read]), (S::Read, false));
        assert_eq!(standing(&[Write, Edit]), (S::Created, true));
        assert_eq!(standing(&[Read, Write]), (S::Modified, false));
        assert_eq!(standing(&[Edit, Read]), (S::Modified, false));
        assert_eq!(standing(&[Read, Read, Edit]), (S::Modified, false));
        assert_eq!(standing(&[Mkdir]), (S::Created, true));
        assert_eq!(standing(&[Touch]), (S::Created, true));
        assert_eq!(standing(&[Append]), (S::Modified, false));
        // Deletes.
        assert_eq!(standing(&[Delete]), (S::Deleted, false));
        assert_eq!(standing(&[Read, MoveFrom]), (S::Deleted, false));
        assert_eq!(standing(&[Create, Edit, Delete]), (S::Deleted, true));
        assert_eq!(standing(&[Write, Delete, Read]), (S::Deleted, true));
        // Written again after a delete: created when it did not exist before this history.
        assert_eq!(standing(&[Write, Delete, Write]), (S::Created, true));
        assert_eq!(standing(&[Read, Delete, Write]), (S::Modified, false));
        assert_eq!(standing(&[MoveFrom, MoveTo]), (S::Modified, false));
        assert_eq!(standing(&[Delete, Edit]), (S::Modified, false));
        let t = fold(&[Read, Write, Edit, Append]);
        let a = t.entries().next().unwrap();
        assert_eq!((a.ops, a.last_op), (4, Append));
    }

    #[test]
    fn merging_equals_folding() {
        // Every sequence of up to four operations (one of each class and a few more), split
        // at every point.
        let alphabet = [Read, Write, Edit, Delete, MoveTo, Append];
        let mut seqs: Vec<Vec<FileOp>> = vec![vec![]];
        for _ in 0..4 {
            let longer: Vec<Vec<FileOp>> = seqs
                .iter()
                .filter(|s| s.len() == seqs.last().map_or(0, Vec::len))
                .flat_map(|s| {
                    alphabet.iter().map(move |op| {
                        let mut s = s.clone();
                        s.push(*op);
                        s
                    })
                })
                .collect();
            seqs.extend(longer);
        }
        assert!(seqs.len() > 1000);
        for s in &seqs {
            let whole = fold(s);
            for split in 0..=s.len() {
                let (a, b) = s.split_at(split);
                let mut merged = fold(a);
                merged.merge_later(fold(b));
                assert_eq!(merged, whole, "{s:?} split at {split}");
            }
        }
    }

    #[test]
    fn recency_order_follows_the_last_touch() {
        let mut whole = ArtifactTrail::default();
        for (p, op) in [
            ("a", Read),
            ("b", Write),
            ("c", Edit),
            ("a", Edit),
            ("d", Read),
        ] {
            whole.record(p, op);
        }
        let paths: Vec<&str> = whole.entries().map(|a| a.path.as_str()).collect();
        assert_eq!(paths, ["b", "c", "a", "d"]);
        let written: Vec<&str> = whole.written().map(|a| a.path.as_str()).collect();
        assert_eq!(written, ["b", "c", "a"]);

        let mut first = ArtifactTrail::default();
        first.record("a", Read);
        first.record("b", Write);
        let mut second = ArtifactTrail::default();
        second.record("c", Edit);
        second.record("a", Edit);
        second.record("d", Read);
        first.merge_later(second);
        assert_eq!(first, whole);
    }

    #[test]
    fn holes_are_swept_and_undo_restores_the_order() {
        let mut t = ArtifactTrail::default();
        for i in 0..200 {
            t.record(&format!("p{}", i % 3), if i % 2 == 0 { Read } else { Edit });
        }
        // Three paths: the holes their moves left were swept as they went.
        assert!(t.slots.len() <= 2 * 3 + 16 + 1, "{}", t.slots.len());
        let paths: Vec<&str> = t.entries().map(|a| a.path.as_str()).collect();
        assert_eq!(paths, ["p2", "p0", "p1"]);
        let before = t.clone();
        let mut later = ArtifactTrail::default();
        for p in ["p0", "new", "p0", "p2", "new"] {
            later.record(p, Write);
        }
        let undo = t.merge_later_undoable(later);
        let paths: Vec<&str> = t.entries().map(|a| a.path.as_str()).collect();
        assert_eq!(paths, ["p1", "p0", "p2", "new"]);
        t.undo(undo);
        assert_eq!(t, before);
        assert_eq!(t.get("new"), None);
        assert_eq!(t.get("p0"), before.get("p0"));
        t.record("p2", Read);
        let paths: Vec<&str> = t.entries().map(|a| a.path.as_str()).collect();
        assert_eq!(paths, ["p0", "p1", "p2"]);
    }

    #[test]
    fn serialized_form() {
        let mut t = ArtifactTrail::default();
        t.record("src/a.rs", Create);
        t.record("src/a.rs", Delete);
        t.record("b", MoveFrom);
        let json = serde_json::to_string(&t).unwrap();
        assert_eq!(
            json,
            r#"[{"path":"src/a.rs","status":"deleted","created_here":true,"op":"delete","ops":2},{"path":"b","status":"deleted","op":"move-from","ops":1}]"#
        );
        let back: ArtifactTrail = serde_json::from_str(&json).unwrap();
        assert_eq!(back, t);
    }
}
