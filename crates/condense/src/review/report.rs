//! What `condense snapshot` prints: the diffs of changed snapshots under each transcript's
//! retention change (text), the same as data (`--json`), or a summary for a pull request
//! comment (`--markdown`). Also the Markdown helpers `condense compare --markdown` shares.

use super::retention::{Retention, KINDS};
use super::snapshot::{Entry, Outcome, Set, Status};
use super::unified;
use crate::input::Skipped;
use crate::term::escape_controls;
use condense_text::thousands;
use serde::Serialize;
use std::fmt::Write;
use std::path::Path;

/// The diffs of every changed snapshot, each transcript's under a header with its retention
/// change.
pub fn text(sets: &[Set], entries: &[Entry], color: bool) -> String {
    let mut out = String::new();
    for (i, set) in sets.iter().enumerate() {
        let mine: Vec<&Entry> = entries
            .iter()
            .filter(|e| e.set == i && e.status != Status::Unchanged)
            .collect();
        if mine.is_empty() {
            continue;
        }
        let header = format!(
            "════ {} ({}) ════",
            set.name,
            escape_controls(&set.transcript)
        );
        let retention = format!("retention: {}", set.retention_line());
        if color {
            let _ = write!(
                out,
                "\x1b[1m{header}\x1b[0m\n\x1b[1;33m{retention}\x1b[0m\n\n"
            );
        } else {
            let _ = write!(out, "{header}\n{retention}\n\n");
        }
        for e in mine {
            let verb = if e.outcome == Outcome::Accepted {
                "accepted"
            } else {
                "pending"
            };
            match &e.old {
                None => {
                    let _ = writeln!(out, "new snapshot ({verb}): {}", e.key);
                }
                Some(old) => {
                    let _ = writeln!(out, "changed snapshot ({verb}): {}", e.key);
                    out.push_str(&unified(
                        old,
                        &e.content(),
                        &e.snap.display().to_string(),
                        &e.pending.display().to_string(),
                        color,
                    ));
                }
            }
        }
        out.push('\n');
    }
    out
}

#[derive(Debug, Serialize)]
struct JsonReport<'a> {
    snapshots: String,
    transcripts: Vec<JsonSet<'a>>,
    unchanged: usize,
    changed: usize,
    new: usize,
    accepted: usize,
    rejected: usize,
    /// Written as `.snap.new`, waiting for a review (skipped ones included).
    pending: usize,
    #[serde(skip_serializing_if = "Skipped::is_empty")]
    skipped: &'a Skipped,
}

#[derive(Debug, Serialize)]
struct JsonSet<'a> {
    transcript: &'a str,
    name: &'a str,
    retention: &'a Retention,
    /// The retention of the reference snapshot (null when there is none).
    previous: Option<&'a Retention>,
    /// The change in words ("tokens -1,840; artifact 108/108 -> 105/108 (lost: ...)").
    retention_change: String,
    /// Whether some probe kind keeps fewer probes than the reference.
    loses_probes: bool,
    stages_changed: Vec<&'a str>,
    snapshots: Vec<JsonEntry<'a>>,
}

#[derive(Debug, Serialize)]
struct JsonEntry<'a> {
    name: &'a str,
    stage: Option<&'a str>,
    /// unchanged, changed or new.
    status: &'static str,
    /// unchanged, pending, accepted, rejected or skipped.
    outcome: &'static str,
    file: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pending_file: Option<String>,
}

fn status(s: Status) -> &'static str {
    match s {
        Status::Unchanged => "unchanged",
        Status::Changed => "changed",
        Status::New => "new",
    }
}

fn outcome(o: Outcome) -> &'static str {
    match o {
        Outcome::Same => "unchanged",
        Outcome::Pending => "pending",
        Outcome::Accepted => "accepted",
        Outcome::Rejected => "rejected",
        Outcome::Skipped => "skipped",
    }
}

/// The stages whose snapshot of set `i` differs from the reference.
fn stages_changed(entries: &[Entry], i: usize) -> Vec<&str> {
    entries
        .iter()
        .filter(|e| e.set == i && e.status != Status::Unchanged)
        .filter_map(|e| e.stage.as_deref())
        .collect()
}

/// `--json`.
pub fn json<'a>(
    root: &Path,
    sets: &'a [Set],
    entries: &'a [Entry],
    skipped: &'a Skipped,
) -> impl Serialize + 'a {
    let count = |f: &dyn Fn(&Entry) -> bool| entries.iter().filter(|e| f(e)).count();
    JsonReport {
        snapshots: root.display().to_string(),
        transcripts: sets
            .iter()
            .enumerate()
            .map(|(i, s)| JsonSet {
                transcript: &s.transcript,
                name: &s.name,
                retention: &s.retention,
                previous: s.previous.as_ref(),
                retention_change: s.retention_line(),
                loses_probes: s
                    .previous
                    .as_ref()
                    .is_some_and(|old| s.retention.loses_probes(old)),
                stages_changed: stages_changed(entries, i),
                snapshots: entries
                    .iter()
                    .filter(|e| e.set == i)
                    .map(|e| JsonEntry {
                        name: &e.key,
                        stage: e.stage.as_deref(),
                        status: status(e.status),
                        outcome: outcome(e.outcome),
                        file: e.snap.display().to_string(),
                        pending_file: matches!(e.outcome, Outcome::Pending | Outcome::Skipped)
                            .then(|| e.pending.display().to_string()),
                    })
                    .collect(),
            })
            .collect(),
        unchanged: count(&|e| e.status == Status::Unchanged),
        changed: count(&|e| e.status == Status::Changed),
        new: count(&|e| e.status == Status::New),
        accepted: count(&|e| e.outcome == Outcome::Accepted),
        rejected: count(&|e| e.outcome == Outcome::Rejected),
        pending: count(&|e| matches!(e.outcome, Outcome::Pending | Outcome::Skipped)),
        skipped,
    }
}

/// `--markdown`: one table row per transcript, then the probes each lost.
pub fn markdown(sets: &[Set], entries: &[Entry]) -> String {
    let changed = entries
        .iter()
        .filter(|e| e.status != Status::Unchanged)
        .count();
    let mut o = String::from("### condense snapshot\n\n");
    let _ = writeln!(
        o,
        "{} transcript{}, {} of {} snapshots changed or new.\n",
        sets.len(),
        if sets.len() == 1 { "" } else { "s" },
        changed,
        entries.len()
    );
    o.push_str(
        "| transcript | tokens | cut | artifact | errors | request | integrity | stages changed |\n\
         | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |\n",
    );
    let mut lost = String::new();
    for (i, s) in sets.iter().enumerate() {
        let r = &s.retention;
        let old = s.previous.as_ref();
        let tokens = match old {
            Some(p) if p.tokens_after != r.tokens_after => format!(
                "{} -> {} ({})",
                thousands(p.tokens_after),
                thousands(r.tokens_after),
                super::retention::signed(r.tokens_after as i64 - p.tokens_after as i64)
            ),
            _ => thousands(r.tokens_after),
        };
        let cut = match old {
            Some(p) if p.cut != r.cut => format!("{} -> {}", p.cut, r.cut),
            _ => r.cut.clone(),
        };
        let probes: Vec<String> = KINDS
            .iter()
            .map(|k| {
                let now = r.kind(k).0;
                match old.map(|p| p.kind(k).0) {
                    Some(was) if was != now => format!("**{was} -> {now}**"),
                    _ => now.to_string(),
                }
            })
            .collect();
        let stages: Vec<String> = stages_changed(entries, i)
            .iter()
            .map(|s| format!("`{}`", cell(s)))
            .collect();
        let _ = writeln!(
            o,
            "| `{}` | {tokens} | {cut} | {} | {} |",
            cell(&s.name),
            probes.join(" | "),
            if stages.is_empty() {
                "none".to_string()
            } else {
                stages.join(", ")
            }
        );
        let changes = match old {
            Some(p) if s.retention.loses_probes(p) => s.retention.probe_changes(p),
            Some(_) => Vec::new(),
            None => KINDS
                .iter()
                .filter(|k| !r.kind(k).1.is_empty())
                .map(|k| format!("{k} lost: {}", super::retention::listed(r.kind(k).1)))
                .collect(),
        };
        if !changes.is_empty() {
            let _ = writeln!(lost, "- `{}`: {}", cell(&s.name), cell(&changes.join("; ")));
        }
    }
    if !lost.is_empty() {
        o.push_str("\n**Probes lost**\n\n");
        o.push_str(&lost);
    }
    o
}

/// Text safe in a Markdown table cell (and on one line).
pub fn cell(s: &str) -> String {
    s.chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect::<String>()
        .replace('|', "\\|")
        .replace('`', "'")
}
