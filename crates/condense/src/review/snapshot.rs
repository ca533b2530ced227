//! `condense snapshot`: every stage's output for a set of transcripts, compared with the
//! snapshots kept under `--snapshots`, as a CI gate for pipeline changes.
//!
//! Each transcript gets a folder (`PARENT__NAME`) holding `00-retention.snap` (tokens, cut and
//! `condense eval`'s probes on the pipeline's output: a change that loses probes shows there
//! first) and `NN-STAGE.snap` per stage (its report and the rendered conversation), in insta's
//! format. Everything is computed first; then each changed snapshot is accepted (`--accept`,
//! `--accept NAME...`, or `a` in `--review`), rejected (its `.snap.new` removed), skipped or
//! left pending (`.snap.new` written beside the `.snap`, as insta does).

use super::insta_format::{self, content_of, Header};
use super::retention::Retention;
use super::{load, render_all, run_recorded, Recorded};
use crate::cli::{ModelArgs, SnapshotArgs};
use crate::commands::parse_now;
use crate::input::{collect_inputs, read_path, Skipped};
use crate::Failure;
use condense_model::Conversation;
use condense_text::thousands;
use std::fmt::Write;
use std::path::{Path, PathBuf};

/// The time `snapshot` runs at unless `--now` says otherwise: fixed, so snapshots are
/// reproducible.
const SNAPSHOT_EPOCH_MS: i64 = 0;

/// The `source` of every snapshot file's header (insta: the test file that made it).
const SOURCE: &str = "condense snapshot";

/// How a snapshot compares with its reference.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    Unchanged,
    Changed,
    New,
}

/// What was done with a changed snapshot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Nothing to do (unchanged).
    Same,
    /// `.snap.new` written, waiting for a review.
    Pending,
    Accepted,
    Rejected,
    /// Skipped in `--review`: still pending.
    Skipped,
}

/// One snapshot file.
#[derive(Debug)]
pub struct Entry {
    /// `TRANSCRIPT/NN-STAGE`: how `--accept` and the reports name it.
    pub key: String,
    /// The stage, or None for the retention snapshot.
    pub stage: Option<String>,
    /// Index into the transcript sets.
    pub set: usize,
    pub snap: PathBuf,
    pub pending: PathBuf,
    /// The whole file text to write.
    pub text: String,
    /// The reference's content, when there is one.
    pub old: Option<String>,
    pub status: Status,
    pub outcome: Outcome,
}

impl Entry {
    /// The new content (what follows the header).
    pub fn content(&self) -> String {
        content_of(&self.text)
    }
}

/// One transcript's snapshot set.
#[derive(Debug)]
pub struct Set {
    pub transcript: String,
    /// The folder name under `--snapshots`.
    pub name: String,
    pub retention: Retention,
    /// The retention in the reference snapshot (None when there is none, or it is unreadable).
    pub previous: Option<Retention>,
}

impl Set {
    /// "tokens -1,840; artifact 108/108 -> 105/108 (lost: ...)", or the state for a new set.
    pub fn retention_line(&self) -> String {
        match &self.previous {
            Some(old) => self.retention.delta(old),
            None => self.retention.summary(),
        }
    }
}

/// `condense snapshot`: exit 0 when every snapshot matches (or was accepted), 1 when one still
/// differs (pending, skipped or rejected) or a transcript could not be read (named on stderr
/// and skipped; the others are still compared).
pub fn snapshot(args: SnapshotArgs) -> Result<(), Failure> {
    let now = Some(match &args.now {
        Some(t) => parse_now(t)?,
        None => SNAPSHOT_EPOCH_MS,
    });
    let pipeline = load(args.pipeline.as_deref(), &ModelArgs::default())?;
    let mut skipped = Skipped::default();
    let files = collect_inputs(&args.inputs, None, &mut skipped)?;
    if files.is_empty() && skipped.is_empty() {
        return Err(Failure::usage("no transcripts to snapshot"));
    }
    let mut sets = Vec::new();
    let mut entries = Vec::new();
    for file in &files {
        let Some(doc) = skipped.read(file, read_path) else {
            continue;
        };
        let labels = doc.labels();
        // A transcript the pipeline fails on is named and skipped like an unreadable one.
        let Some(rec) = skipped.read(file, |_| {
            run_recorded(
                &pipeline,
                doc.conversations(),
                &labels,
                doc.format().as_str(),
                now,
                true,
            )
        }) else {
            continue;
        };
        let set = build_set(
            file,
            &rec,
            &labels,
            &args.snapshots,
            sets.len(),
            &mut entries,
        )?;
        sets.push(set);
    }
    select(&args, &mut entries)?;
    let color = !args.json && !args.markdown && super::use_color(args.color);
    if args.review {
        super::interactive::review(&mut entries, &sets, color)?;
    }
    std::fs::create_dir_all(&args.snapshots)
        .and_then(|()| insta_format::ensure_manifest(&args.snapshots))
        .map_err(|e| Failure::run(format!("{}: {e}", args.snapshots.display())))?;
    for e in &entries {
        write(e)?;
    }
    if args.json {
        crate::output::print_json(&super::report::json(
            &args.snapshots,
            &sets,
            &entries,
            &skipped,
        ))?;
    } else if args.markdown {
        crate::output::print(&super::report::markdown(&sets, &entries))?;
    } else if !args.review {
        crate::output::print(&super::report::text(&sets, &entries, color))?;
    }
    finish(&args.snapshots, &sets, &entries, &skipped)
}

/// The retention and stage snapshots of one transcript.
fn build_set(
    file: &Path,
    rec: &Recorded<'_>,
    labels: &[String],
    root: &Path,
    index: usize,
    entries: &mut Vec<Entry>,
) -> Result<Set, Failure> {
    let name = stem(file);
    let dir = root.join(&name);
    let transcript = file.display().to_string();
    let outputs: Vec<&Conversation> = rec.runs.iter().map(|r| &r.conversation).collect();
    let retention = Retention::measure(
        rec.before,
        &outputs,
        rec.runs.iter().map(|r| r.tokens_before).sum(),
        rec.runs.iter().map(|r| r.tokens_after).sum(),
    );
    let retention_snap = dir.join("00-retention.snap");
    let previous = std::fs::read_to_string(&retention_snap)
        .ok()
        .and_then(|t| serde_json::from_str(&content_of(&t)).ok());
    let header = |description: String, expression: String| Header {
        source: SOURCE.into(),
        description,
        expression,
        input_file: transcript.clone(),
    };
    let body = serde_json::to_string_pretty(&retention).map_err(|e| encoding(file, e))?;
    entries.push(entry(
        format!("{name}/00-retention"),
        None,
        index,
        retention_snap,
        insta_format::file_text(
            &header(
                retention.summary(),
                "retention (condense eval's probes)".into(),
            ),
            &body,
        ),
    ));
    let stage_count = rec.runs.first().map_or(0, |r| r.stages.len());
    for i in 0..stage_count {
        let first = &rec.runs[0].stages[i];
        let before: usize = rec.runs.iter().map(|r| r.stages[i].tokens_before).sum();
        let after: usize = rec.runs.iter().map(|r| r.stages[i].tokens_after).sum();
        let description = format!(
            "stage {} `{}` ({}): {} -> {} tokens",
            i + 1,
            first.name,
            first.status,
            thousands(before),
            thousands(after)
        );
        let file_name = format!("{:02}-{}", i + 1, first.name);
        let text = insta_format::file_text(
            &header(description, format!("stage {} `{}`", i + 1, first.name)),
            &stage_text(rec, i, labels).map_err(|e| encoding(file, e))?,
        );
        entries.push(entry(
            format!("{name}/{file_name}"),
            Some(first.name.clone()),
            index,
            dir.join(format!("{file_name}.snap")),
            text,
        ));
    }
    Ok(Set {
        transcript,
        name,
        retention,
        previous,
    })
}

/// A snapshot that cannot be serialized: an error, never an empty snapshot that would pass
/// or fail for the wrong reason.
fn encoding(file: &Path, e: serde_json::Error) -> Failure {
    Failure::run(format!(
        "{}: cannot write its snapshot: {e}",
        file.display()
    ))
}

fn entry(key: String, stage: Option<String>, set: usize, snap: PathBuf, text: String) -> Entry {
    let old = std::fs::read_to_string(&snap).ok().map(|t| content_of(&t));
    let status = match &old {
        Some(o) if *o == content_of(&text) => Status::Unchanged,
        Some(_) => Status::Changed,
        None => Status::New,
    };
    Entry {
        key,
        stage,
        set,
        pending: snap.with_extension("snap.new"),
        snap,
        text,
        old,
        status,
        outcome: if status == Status::Unchanged {
            Outcome::Same
        } else {
            Outcome::Pending
        },
    }
}

/// `--accept` (all) or `--accept NAME...` (those named; a name that names nothing is a usage
/// error, before anything is written).
fn select(args: &SnapshotArgs, entries: &mut [Entry]) -> Result<(), Failure> {
    let Some(names) = &args.accept else {
        return Ok(());
    };
    for name in names {
        if !entries.iter().any(|e| matches(e, name)) {
            let mut keys: Vec<&str> = entries
                .iter()
                .filter(|e| e.status != Status::Unchanged)
                .map(|e| e.key.as_str())
                .collect();
            if keys.is_empty() {
                keys.push("none");
            }
            return Err(Failure::usage(format!(
                "--accept: no snapshot named `{name}` (changed: {})",
                keys.join(", ")
            )));
        }
    }
    for e in entries.iter_mut() {
        if e.outcome == Outcome::Pending
            && (names.is_empty() || names.iter().any(|n| matches(e, n)))
        {
            e.outcome = Outcome::Accepted;
        }
    }
    Ok(())
}

/// Whether `name` names `e`: its key (`TRANSCRIPT/02-snip`), its transcript's folder, or a
/// path ending in its key, its `.snap` or its `.snap.new` (what cargo-insta and a shell's
/// completion would give).
fn matches(e: &Entry, name: &str) -> bool {
    let name = name.trim_end_matches('/');
    let (transcript, _) = e.key.split_once('/').unwrap_or((&e.key, ""));
    let ends = |path: &str| {
        path == name || path.ends_with(&format!("/{name}")) || name.ends_with(&format!("/{path}"))
    };
    name == transcript
        || ends(&e.key)
        || ends(&format!("{}.snap", e.key))
        || ends(&format!("{}.snap.new", e.key))
        || Path::new(name) == e.snap
        || Path::new(name) == e.pending
}

/// Writes what `e`'s outcome asks for.
fn write(e: &Entry) -> Result<(), Failure> {
    let put = |p: &Path| {
        if let Some(dir) = p.parent() {
            std::fs::create_dir_all(dir)
                .map_err(|err| Failure::run(format!("{}: {err}", dir.display())))?;
        }
        std::fs::write(p, &e.text).map_err(|err| Failure::run(format!("{}: {err}", p.display())))
    };
    // A `.snap.new` that is not (or no longer) wanted is removed; one already gone is fine.
    match e.outcome {
        Outcome::Same | Outcome::Rejected => {
            let _ = std::fs::remove_file(&e.pending);
            Ok(())
        }
        Outcome::Accepted => {
            put(&e.snap)?;
            let _ = std::fs::remove_file(&e.pending);
            Ok(())
        }
        Outcome::Pending | Outcome::Skipped => put(&e.pending),
    }
}

/// The summary line on stderr and the exit code.
fn finish(root: &Path, sets: &[Set], entries: &[Entry], skipped: &Skipped) -> Result<(), Failure> {
    let count = |f: &dyn Fn(&Entry) -> bool| entries.iter().filter(|e| f(e)).count();
    let same = count(&|e| e.status == Status::Unchanged);
    let changed = count(&|e| e.status == Status::Changed);
    let added = count(&|e| e.status == Status::New);
    let accepted = count(&|e| e.outcome == Outcome::Accepted);
    let rejected = count(&|e| e.outcome == Outcome::Rejected);
    let waiting = count(&|e| matches!(e.outcome, Outcome::Pending | Outcome::Skipped));
    let mut extra = String::new();
    for (n, word) in [(accepted, "accepted"), (rejected, "rejected")] {
        if n > 0 {
            let _ = write!(extra, ", {n} {word}");
        }
    }
    eprintln!(
        "condense snapshot: {} transcript{}, {same} unchanged, {changed} changed, {added} new{extra}{}",
        sets.len(),
        if sets.len() == 1 { "" } else { "s" },
        skipped.suffix()
    );
    let differ = waiting + rejected;
    if differ > 0 {
        let what = if waiting > 0 {
            format!(
                "review the .snap.new files (--review, or cargo insta review --manifest-path {}), or accept them with --accept",
                root.join("Cargo.toml").display()
            )
        } else {
            "rejected, the reference stays as it was".to_string()
        };
        return Err(Failure {
            code: 1,
            message: format!(
                "{differ} snapshot{} from what the pipeline gives; {what}{}",
                if differ == 1 { " differs" } else { "s differ" },
                skipped.suffix()
            ),
            detail: None,
        });
    }
    skipped.outcome(sets.len())
}

/// What one stage snapshot holds: the stage's report (without timings) and the rendering.
fn stage_text(
    rec: &Recorded<'_>,
    i: usize,
    labels: &[String],
) -> Result<String, serde_json::Error> {
    let mut out = String::new();
    for (ci, r) in rec.runs.iter().enumerate() {
        let s = &r.stages[i];
        let mut report = serde_json::to_value(&s.report)?;
        if let Some(obj) = report.as_object_mut() {
            obj.insert("status".into(), s.status.into());
            obj.insert("tokens_before".into(), s.tokens_before.into());
            obj.insert("tokens_after".into(), s.tokens_after.into());
            if let Some(e) = &s.error {
                obj.insert("error".into(), e.clone().into());
            }
        }
        let label = labels.get(ci).map_or("", String::as_str);
        let _ = writeln!(
            out,
            "# report{}",
            if label.is_empty() {
                String::new()
            } else {
                format!(" {label}")
            }
        );
        let _ = writeln!(out, "{}\n", serde_json::to_string_pretty(&report)?);
    }
    let outputs: Vec<&Conversation> = rec
        .runs
        .iter()
        .zip(rec.before)
        .map(|(r, b)| r.stages[i].output.as_ref().unwrap_or(b))
        .collect();
    out.push_str("# conversation\n");
    out.push_str(&render_all(&outputs, labels));
    Ok(out)
}

/// The folder name of a transcript's snapshots: `PARENT__NAME`, other characters as `_`.
fn stem(path: &Path) -> String {
    let name = path
        .file_name()
        .map_or("input".into(), |n| n.to_string_lossy().to_string());
    let parent = path
        .parent()
        .and_then(|p| p.file_name())
        .map(|n| n.to_string_lossy().to_string());
    let raw = match parent {
        Some(p) => format!("{p}__{name}"),
        None => name,
    };
    raw.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_') {
                c
            } else {
                '_'
            }
        })
        .collect()
}
