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
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ArtifactTrail {
    entries: Vec<Artifact>,
}

impl ArtifactTrail {
    /// Every path, least recently touched first.
    pub fn entries(&self) -> &[Artifact] {
        &self.entries
    }

    /// Created, modified and deleted paths, least recently touched first.
    pub fn written(&self) -> impl DoubleEndedIterator<Item = &Artifact> {
        self.entries.iter().filter(|a| a.status.written())
    }

    /// Paths only read, least recently touched first.
    pub fn read_only(&self) -> impl DoubleEndedIterator<Item = &Artifact> {
        self.entries.iter().filter(|a| !a.status.written())
    }

    pub fn get(&self, path: &str) -> Option<&Artifact> {
        self.entries.iter().find(|a| a.path == path)
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Records `op` on `path`; the path becomes the most recent.
    pub fn record(&mut self, path: &str, op: FileOp) {
        self.merge_later(ArtifactTrail {
            entries: vec![Artifact::new(path, op)],
        });
    }

    /// Adds `artifact` as the most recent, combined with what the trail holds for its path.
    pub fn push(&mut self, artifact: Artifact) {
        self.merge_later(ArtifactTrail {
            entries: vec![artifact],
        });
    }

    /// Merges the trail of the next span: statuses compose ([`Standing::then`]), operation
    /// counts add up, the later span's last operation wins, and its paths become the most
    /// recent, in its order.
    pub fn merge_later(&mut self, later: ArtifactTrail) {
        let mut builder = Builder::from(std::mem::take(self));
        for artifact in later.entries {
            builder.push(artifact);
        }
        *self = builder.finish();
    }
}

/// Builds a trail in O(operations): paths by index, recency by sequence number.
#[derive(Debug, Default)]
pub(crate) struct Builder {
    index: HashMap<String, usize>,
    /// (last touch, artifact)
    slots: Vec<(u64, Artifact)>,
    seq: u64,
}

impl Builder {
    fn from(trail: ArtifactTrail) -> Builder {
        let mut b = Builder::default();
        for a in trail.entries {
            b.push(a);
        }
        b
    }

    pub(crate) fn record(&mut self, path: &str, op: FileOp) {
        self.push(Artifact::new(path, op));
    }

    fn push(&mut self, artifact: Artifact) {
        self.seq += 1;
        match self.index.get(&artifact.path) {
            Some(&i) => {
                let slot = &mut self.slots[i];
                slot.0 = self.seq;
                slot.1.then(&artifact);
            }
            None => {
                self.index.insert(artifact.path.clone(), self.slots.len());
                self.slots.push((self.seq, artifact));
            }
        }
    }

    pub(crate) fn finish(mut self) -> ArtifactTrail {
        self.slots.sort_by_key(|(seq, _)| *seq);
        ArtifactTrail {
            entries: self.slots.into_iter().map(|(_, a)| a).collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use FileOp::*;

    fn fold(ops: &[FileOp]) -> ArtifactTrail {
        let mut b = Builder::default();
        for op in ops {
            b.record("f", *op);
        }
        b.finish()
    }

    fn standing(ops: &[FileOp]) -> (FileStatus, bool) {
        let t = fold(ops);
        let a = &t.entries()[0];
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
        assert_eq!((t.entries()[0].ops, t.entries()[0].last_op), (4, Append));
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
        let mut b = Builder::default();
        for (p, op) in [
            ("a", Read),
            ("b", Write),
            ("c", Edit),
            ("a", Edit),
            ("d", Read),
        ] {
            b.record(p, op);
        }
        let whole = b.finish();
        let paths: Vec<&str> = whole.entries().iter().map(|a| a.path.as_str()).collect();
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
