//! The pieces a rendering writes: bullets, file and error lines, the compact per-directory
//! list and the fenced last request. Each is appended to the text it goes into (or to the
//! buffer a piece is counted in), never made as a string of its own: a running summary renders
//! hundreds of them at every commit.

use crate::artifacts::{Artifact, FileStatus};
use crate::ledger::ErrorEntry;
use crate::text::{longest_backtick_run, push_code_span};
use std::collections::HashMap;
use std::fmt::Write as _;

/// A bullet: `- ` and the first line, further lines indented by two spaces.
#[cfg(test)]
pub(crate) fn bullet(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 8);
    push_bullet(&mut out, text);
    out
}

/// A bullet (`- ` and the first line, further lines indented by two spaces) appended to `out`
/// (pieces are written where they go, never into a string of their own: see
/// [`super::forms`]).
pub(crate) fn push_bullet(out: &mut String, text: &str) {
    for (i, line) in text.split('\n').enumerate() {
        out.push_str(if i == 0 { "- " } else { "  " });
        out.push_str(line);
        out.push('\n');
    }
}

/// `` - `path` — status (ops label)`` and a line end, appended to `out`.
pub(super) fn push_file_bullet(out: &mut String, a: &Artifact) {
    out.push_str("- ");
    push_code_span(out, &a.path);
    out.push_str(" — ");
    out.push_str(a.status.as_str());
    out.push_str(" (");
    if a.status == FileStatus::Deleted && a.created_here {
        out.push_str("created here, ");
    }
    let s = if a.ops == 1 { "" } else { "s" };
    // Writing to a String cannot fail.
    let _ = writeln!(out, "{} op{s}, last: {})", a.ops, a.last_op.as_str());
}

/// The directory part of a path, with its `/` (`./` for a bare name).
fn dir_of(path: &str) -> &str {
    match path.trim_end_matches('/').rfind('/') {
        Some(i) => &path[..=i],
        None => "./",
    }
}

/// One bullet per directory: statuses in a fixed order, paths in recency order.
pub(super) fn compact_written(written: &[&Artifact], out: &mut String) {
    // In order of first appearance; found by name, not by a scan of the list (a trail with
    // many directories made that quadratic).
    let mut dirs: Vec<(&str, Vec<&Artifact>)> = Vec::new();
    let mut at: HashMap<&str, usize> = HashMap::new();
    for a in written {
        let dir = dir_of(&a.path);
        match at.get(dir) {
            Some(&i) => dirs[i].1.push(a),
            None => {
                at.insert(dir, dirs.len());
                dirs.push((dir, vec![a]));
            }
        }
    }
    for (dir, list) in dirs {
        out.push_str("- ");
        push_code_span(out, dir);
        out.push(':');
        let mut first_group = true;
        for status in [
            FileStatus::Created,
            FileStatus::Modified,
            FileStatus::Deleted,
        ] {
            let mut paths = list.iter().filter(|a| a.status == status).peekable();
            if paths.peek().is_none() {
                continue;
            }
            out.push_str(if first_group { " " } else { "; " });
            first_group = false;
            out.push_str(status.as_str());
            out.push(' ');
            for (n, a) in paths.enumerate() {
                if n > 0 {
                    out.push_str(", ");
                }
                push_code_span(out, &a.path);
            }
        }
        out.push('\n');
    }
}

#[cfg(test)]
pub(crate) fn error_bullet(e: &ErrorEntry) -> String {
    let mut out = String::new();
    push_error_bullet(&mut out, e);
    out
}

/// An error's bullet (`- tool: `about` — ×n, state (first id)` and its line), appended to
/// `out`.
pub(crate) fn push_error_bullet(out: &mut String, e: &ErrorEntry) {
    out.push_str("- ");
    out.push_str(if e.tool.is_empty() { "tool" } else { &e.tool });
    if !e.about.is_empty() {
        out.push_str(": ");
        push_code_span(out, &e.about);
    }
    out.push_str(" — ");
    if e.count > 1 {
        // Writing to a String cannot fail.
        let _ = write!(out, "×{}, ", e.count);
    }
    match &e.resolved_by {
        Some(id) => {
            out.push_str("resolved by ");
            out.push_str(id);
        }
        None => out.push_str("unresolved"),
    }
    out.push_str(" (first ");
    out.push_str(&e.first_id);
    out.push_str(")\n  ");
    out.push_str(&e.line);
    out.push('\n');
}

/// The last request in a code fence longer than any backtick run inside it.
pub(super) fn fenced(text: &str) -> String {
    let fence = "`".repeat((longest_backtick_run(text) + 1).max(3));
    format!("{fence}\n{text}\n{fence}\n")
}
