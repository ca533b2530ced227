//! Reads rendered sections back into a [`Retained`] record: the fallback when a summary's
//! structured record is lost. Besides [`crate::render`]'s format it reads the sections of the
//! older extractive summaries (`## Session intent`, `## Files` with `### Created` /
//! `### Modified` / `### Read`, `## Errors and fixes`). Unknown sections are ignored; code
//! fences are respected (a `## ` line inside one is not a heading).

use crate::artifacts::{Artifact, ArtifactTrail, FileOp, FileStatus};
use crate::ledger::{ErrorEntry, ErrorLedger};
use crate::render::{ERRORS_HEADING, FILES_HEADING, LAST_LABEL, READ_LABEL, REQUESTS_HEADING};
use crate::text::{read_code_spans, Piece};
use crate::tools::{file_key, is_file_tool, is_shell_tool, normalize_name, shell_key};
use crate::Retained;

/// The sections `parse` reads, by heading (case-insensitive).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Requests,
    Files,
    Errors,
    OldIntent,
    OldFiles,
    OldErrors,
}

fn kind(heading: &str) -> Option<Kind> {
    let h = heading.trim();
    [
        (REQUESTS_HEADING, Kind::Requests),
        (FILES_HEADING, Kind::Files),
        (ERRORS_HEADING, Kind::Errors),
        ("Session intent", Kind::OldIntent),
        ("Files", Kind::OldFiles),
        ("Errors and fixes", Kind::OldErrors),
    ]
    .into_iter()
    .find(|(name, _)| name.eq_ignore_ascii_case(h))
    .map(|(_, k)| k)
}

/// A line without a trailing `\r` (for structure; content keeps it).
fn bare(line: &str) -> &str {
    line.strip_suffix('\r').unwrap_or(line)
}

/// The backtick fence a line opens (3 or more backticks at its start).
fn fence_of(line: &str) -> Option<&str> {
    let n = line.bytes().take_while(|b| *b == b'`').count();
    (n >= 3).then(|| &line[..n])
}

/// Whether `line` closes a fence opened with `fence`.
fn closes(line: &str, fence: &str) -> bool {
    let l = bare(line).trim_end();
    l.len() >= fence.len() && l.bytes().all(|b| b == b'`')
}

/// Calls `on` with each `## ` heading outside a code fence (`Some(heading)`, the line's text
/// after `## `) and each other line (`None`, the line), in order.
fn walk<'s>(summary: &'s str, mut on: impl FnMut(Option<&'s str>, &'s str)) {
    let mut fence: Option<&str> = None;
    for line in summary.split('\n') {
        if let Some(f) = fence {
            if closes(line, f) {
                fence = None;
            }
        } else if let Some(h) = bare(line).strip_prefix("## ") {
            on(Some(h), line);
            continue;
        } else {
            fence = fence_of(line);
        }
        on(None, line);
    }
}

/// `(heading, body lines)` of every `## ` section (`None` for text before the first heading).
fn sections(summary: &str) -> Vec<(Option<&str>, Vec<&str>)> {
    let mut out: Vec<(Option<&str>, Vec<&str>)> = vec![(None, Vec::new())];
    walk(summary, |heading, line| match heading {
        Some(h) => out.push((Some(h), Vec::new())),
        None => {
            if let Some((_, body)) = out.last_mut() {
                body.push(line);
            }
        }
    });
    out
}

/// `summary` without the sections [`Retained::parse`] reads (the rendered record, and the
/// older extractive summaries' `Session intent`, `Files` and `Errors and fixes`): what is left
/// is the prose around it. Code fences are respected. Written as the lines come, not from
/// `sections`: a running summary is stripped at every commit, and gathering its lines section
/// by section first cost as much as reading them.
pub fn strip_rendered(summary: &str) -> String {
    let mut out = String::new();
    let mut keep = true;
    walk(summary, |heading, line| {
        if let Some(h) = heading {
            keep = kind(h).is_none();
            if keep {
                out.push_str("## ");
                out.push_str(h);
                out.push('\n');
            }
        } else if keep {
            out.push_str(line);
            out.push('\n');
        }
    });
    out.trim().to_string()
}

/// The bullets of a section body: `- ` lines with their two-space continuation lines (blank
/// lines between continuation lines belong to the bullet). Other lines end a bullet.
fn bullets(body: &[&str]) -> Vec<String> {
    let mut out = Vec::new();
    let mut current: Option<String> = None;
    let mut blanks = 0;
    for line in body {
        if let Some(rest) = line.strip_prefix("- ") {
            out.extend(current.take());
            current = Some(rest.to_string());
            blanks = 0;
        } else if let (Some(rest), Some(text)) = (line.strip_prefix("  "), current.as_mut()) {
            for _ in 0..blanks {
                text.push('\n');
            }
            blanks = 0;
            text.push('\n');
            text.push_str(rest);
        } else if bare(line).is_empty() && current.is_some() {
            blanks += 1; // maybe a blank line inside the bullet
        } else {
            out.extend(current.take());
            blanks = 0;
        }
    }
    out.extend(current);
    out
}

pub(crate) fn parse(summary: &str) -> Retained {
    let mut requests: Vec<String> = Vec::new();
    let mut written: Vec<Artifact> = Vec::new();
    let mut reads: Vec<Artifact> = Vec::new();
    let mut errors: Vec<ErrorEntry> = Vec::new();
    for (heading, body) in sections(summary) {
        let Some(kind) = heading.and_then(kind) else {
            continue;
        };
        match kind {
            Kind::Requests => parse_requests(&body, &mut requests),
            Kind::OldIntent => {
                requests.extend(bullets(&body));
            }
            Kind::Files => {
                for text in bullets(&body) {
                    file_item(&text, &mut written, &mut reads);
                }
            }
            Kind::OldFiles => old_files(&body, &mut written, &mut reads),
            Kind::Errors => {
                errors.extend(bullets(&body).iter().filter_map(|t| error_item(t)));
            }
            Kind::OldErrors => {
                errors.extend(bullets(&body).iter().flat_map(|t| old_error_item(t)));
            }
        }
    }
    requests.dedup();
    let mut artifacts = ArtifactTrail::default();
    // Reads were listed most recent first; their recency relative to writes is unknown.
    for a in reads.into_iter().rev().chain(written) {
        artifacts.push(a);
    }
    let mut errors_read = ErrorLedger::default();
    for e in errors {
        errors_read.occur(e);
    }
    Retained {
        artifacts,
        errors: errors_read,
        requests,
    }
}

fn parse_requests(body: &[&str], requests: &mut Vec<String>) {
    let mut lines = body.iter().copied();
    let mut before: Vec<&str> = Vec::new();
    // Bullets end at the `Last request` label; the fenced block after it is verbatim.
    for line in lines.by_ref() {
        if bare(line).trim() == LAST_LABEL {
            break;
        }
        before.push(line);
    }
    requests.extend(bullets(&before));
    let Some(fence) = lines.next().and_then(fence_of) else {
        return;
    };
    let mut last: Vec<&str> = Vec::new();
    for line in lines {
        if closes(line, fence) {
            requests.push(last.join("\n"));
            return;
        }
        last.push(line);
    }
}

/// A path listed with `status` and nothing else known: one operation, the one that gives
/// the status from an unseen path.
fn listed(path: String, status: FileStatus) -> Artifact {
    let op = match status {
        FileStatus::Created => FileOp::Create,
        FileStatus::Modified => FileOp::Edit,
        FileStatus::Deleted => FileOp::Delete,
        FileStatus::Read => FileOp::Read,
    };
    Artifact::new(path, op)
}

fn code_pieces(text: &str) -> Vec<Piece<'_>> {
    read_code_spans(text)
}

/// A `## Files (artifact trail)` bullet: detailed, a directory group, or the read list.
fn file_item(text: &str, written: &mut Vec<Artifact>, reads: &mut Vec<Artifact>) {
    if let Some(rest) = READ_LABEL
        .strip_prefix("- ")
        .and_then(|l| text.strip_prefix(l))
    {
        for piece in code_pieces(rest) {
            if let Piece::Code(path) = piece {
                reads.push(listed(path, FileStatus::Read));
            }
        }
        return;
    }
    let pieces = code_pieces(text);
    match pieces.as_slice() {
        [Piece::Code(path), Piece::Plain(rest), ..] if rest.starts_with(" — ") => {
            let rest = &rest[" — ".len()..];
            let word = rest.split([' ', '(']).next().unwrap_or("");
            let Some(status) = FileStatus::from_name(word) else {
                return;
            };
            let mut a = listed(path.clone(), status);
            if let Some(details) = rest.split_once('(').map(|(_, d)| d.trim_end_matches(')')) {
                a.created_here |= details.contains("created here");
                for part in details.split(", ") {
                    if let Some(n) = part.strip_suffix(" ops").or(part.strip_suffix(" op")) {
                        a.ops = n.trim().parse().unwrap_or(1);
                    } else if let Some(op) = part.strip_prefix("last: ") {
                        a.last_op = FileOp::from_name(op.trim()).unwrap_or(a.last_op);
                    }
                }
            }
            if status == FileStatus::Read {
                reads.push(a);
            } else {
                written.push(a);
            }
        }
        [Piece::Code(_), Piece::Plain(after), ..] if after.starts_with(':') => {
            // `dir/`: created `a`, `b`; modified `c`
            let mut status = None;
            for piece in &pieces[1..] {
                match piece {
                    Piece::Plain(p) => {
                        if let Some(s) = p
                            .split([' ', ';', ',', ':'])
                            .filter_map(FileStatus::from_name)
                            .next_back()
                        {
                            status = Some(s);
                        }
                    }
                    Piece::Code(path) => match status {
                        Some(FileStatus::Read) => {
                            reads.push(listed(path.clone(), FileStatus::Read))
                        }
                        Some(s) => written.push(listed(path.clone(), s)),
                        None => {}
                    },
                }
            }
        }
        _ => {}
    }
}

/// The older `## Files` section: `### Created` / `### Modified` / `### Read` lists.
fn old_files(body: &[&str], written: &mut Vec<Artifact>, reads: &mut Vec<Artifact>) {
    let mut status = None;
    for line in body {
        let line = bare(line);
        if let Some(h) = line.strip_prefix("### ") {
            status = FileStatus::from_name(h.trim());
            continue;
        }
        let (Some(rest), Some(s)) = (line.strip_prefix("- "), status) else {
            continue;
        };
        let path = match code_pieces(rest).as_slice() {
            [Piece::Code(p)] => p.clone(),
            _ => rest.trim().to_string(),
        };
        if path.is_empty() {
            continue;
        }
        let a = listed(path, s);
        if s == FileStatus::Read {
            reads.insert(0, a); // the old lists were least recent first
        } else {
            written.push(a);
        }
    }
}

/// What a later success must match, rebuilt from a rendered entry when the text allows.
fn key_for(tool: &str, about: &str) -> String {
    let norm = normalize_name(tool);
    if about.is_empty() || about.ends_with('…') {
        String::new()
    } else if is_shell_tool(tool) {
        shell_key(about)
    } else if is_file_tool(tool) || norm == "apply_patch" || norm == "patch" {
        file_key(tool, about)
    } else {
        String::new()
    }
}

/// A `## Errors` bullet: `Tool: `about` — ×N, resolved by ID (first ID)` and the line.
fn error_item(text: &str) -> Option<ErrorEntry> {
    let (header, rest) = text.split_once('\n')?;
    let line = rest.split('\n').next().unwrap_or("");
    let pieces = code_pieces(header);
    let (tool, about, state) = match pieces.as_slice() {
        [Piece::Plain(p), ..] if p.contains(" — ") => {
            let (tool, state) = p.split_once(" — ")?;
            (tool.to_string(), String::new(), state.to_string())
        }
        [Piece::Plain(p), Piece::Code(about), Piece::Plain(state), ..] => (
            p.trim_end().trim_end_matches(':').to_string(),
            about.clone(),
            state.strip_prefix(" — ")?.to_string(),
        ),
        _ => return None,
    };
    let (state, first) = state.rsplit_once(" (first ")?;
    let first_id = first.strip_suffix(')').unwrap_or(first).to_string();
    let (count, state) = match state.strip_prefix('×').and_then(|s| s.split_once(", ")) {
        Some((n, rest)) => (n.parse().unwrap_or(1), rest),
        None => (1, state),
    };
    let resolved_by = state.strip_prefix("resolved by ").map(str::to_string);
    let tool = if tool == "tool" { String::new() } else { tool };
    Some(ErrorEntry {
        key: key_for(&tool, &about),
        line: line.to_string(),
        tool,
        about,
        first_id,
        count,
        resolved_by,
    })
}

/// An older `## Errors and fixes` item: `` `id` Tool `context`: (same command succeeded later:
/// `id2`) `` and one error line per continuation line.
fn old_error_item(text: &str) -> Vec<ErrorEntry> {
    let mut lines = text.split('\n');
    let header = lines.next().unwrap_or("");
    let pieces = code_pieces(header);
    let Some(Piece::Code(id)) = pieces.first() else {
        return Vec::new();
    };
    let tool = match pieces.get(1) {
        Some(Piece::Plain(p)) => p.trim().trim_end_matches(':').trim().to_string(),
        _ => String::new(),
    };
    let about = match (pieces.get(2), pieces.get(3)) {
        (Some(Piece::Code(c)), Some(Piece::Plain(p))) if p.starts_with(':') => c.clone(),
        _ => String::new(),
    };
    let resolved_by = header
        .find("(same command succeeded later: ")
        .and_then(|at| match code_pieces(&header[at..]).get(1) {
            Some(Piece::Code(later)) => Some(later.clone()),
            _ => None,
        });
    let tool = if tool == "tool" { String::new() } else { tool };
    lines
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(|line| ErrorEntry {
            line: line.to_string(),
            tool: tool.clone(),
            about: about.clone(),
            key: key_for(&tool, &about),
            first_id: id.clone(),
            count: 1,
            resolved_by: resolved_by.clone(),
        })
        .collect()
}

#[cfg(test)]
mod tests;
