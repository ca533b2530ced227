//! Renders a [`Retained`] record as Markdown within a token budget.
//!
//! `````text
//! ## User requests
//! (2 earlier requests omitted)
//! - <an earlier request: whole, or its first 300 chars…, or its first line…>
//!   <its further lines, indented by two spaces>
//! Last request (verbatim):
//! ````
//! <the last request, exactly as the user wrote it>
//! ````
//!
//! ## Files (artifact trail)
//! - `src/a.rs` — created (1 op, last: write)
//! - `src/b.rs` — deleted (created here, 3 ops, last: delete)
//! - `README.md` — read (2 ops, last: read)
//! (4 read files omitted)
//!
//! ## Errors
//! - Bash: `npm run build` — ×3, unresolved (first toolu_01)
//!   <the first meaningful line, verbatim>
//! - Edit: `src/a.rs` — resolved by toolu_09 (first toolu_07)
//!   <line>
//! (2 more errors omitted: 1 resolved, 1 unresolved)
//! `````
//!
//! The last request sits in a code fence longer than any backtick run inside it, so it appears
//! verbatim as one exact substring. Paths are code spans whose fence is longer than any
//! backtick run in the path, never escaped or shortened. With more than 20 paths in the trail,
//! or when it keeps more of the optional content within the budget, the files are listed
//! compactly: one bullet per directory, each path still in full
//! (`` - `src/ui/`: created `src/ui/a.tsx`, `src/ui/b.tsx`; modified `src/ui/c.tsx` ``), then
//! `` - read (most recent first): `a`, `b` ``. An empty section says `(none)`.
//!
//! Budget: the last request, every created, modified or deleted path, and the
//! [`MANDATORY_ERRORS`] (40) newest distinct errors (unresolved first) are mandatory; when they
//! alone exceed the budget they are rendered anyway with nothing optional
//! ([`Rendered::over_budget`]). Otherwise optional content fills what is left, in this order:
//! further unresolved errors (newest first), earlier requests as their first line (newest first),
//! resolved errors (newest first), read paths (most recent first), then earlier requests
//! lengthened to 300 characters, then whole. Each candidate is counted once; the whole text is
//! counted at the end and trimmed from the lowest priority if the sum was optimistic, so the
//! result never exceeds the budget when the mandatory part fits.

use crate::artifacts::Artifact;
use crate::ledger::ErrorEntry;
use crate::text::push_code_span;
use crate::Retained;
pub use forms::RenderMemo;
use forms::{Costs, Forms, FULL, LINE, SHORT};
#[cfg(test)]
pub(crate) use pieces::{bullet, error_bullet};
use pieces::{compact_written, fenced, push_file_bullet};
pub(crate) use pieces::{push_bullet, push_error_bullet};

mod forms;
mod pieces;

pub const REQUESTS_HEADING: &str = "User requests";
pub const FILES_HEADING: &str = "Files (artifact trail)";
pub const ERRORS_HEADING: &str = "Errors";
pub(crate) const NONE: &str = "(none)";
pub(crate) const LAST_LABEL: &str = "Last request (verbatim):";
pub(crate) const READ_LABEL: &str = "- read (most recent first): ";
/// Up to this many paths, each gets its own bullet.
const SHORT_LIST: usize = 20;
/// The most errors kept whatever the budget: the newest distinct ones, unresolved first. An
/// error line is a few dozen tokens, and the errors an agent hit are what it must not repeat.
pub const MANDATORY_ERRORS: usize = 40;
/// Characters of an earlier request's first line, and of its shortened form.
const REQUEST_LINE_CHARS: usize = 100;
const REQUEST_CHARS: usize = 300;

/// A rendering and what it left out.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Rendered {
    pub text: String,
    /// `text`'s tokens, by the caller's counter.
    pub tokens: usize,
    /// The mandatory part (the last request, every written path) alone exceeded the budget:
    /// nothing optional is rendered and `tokens` is over the budget.
    pub over_budget: bool,
    /// Files are listed compactly, grouped by directory.
    pub compact_files: bool,
    /// Earlier requests left out (the oldest), and shown shortened.
    pub requests_omitted: usize,
    pub requests_shortened: usize,
    /// Read paths left out (the least recent).
    pub reads_omitted: usize,
    pub resolved_errors_omitted: usize,
    pub unresolved_errors_omitted: usize,
}

/// How much of an earlier request is shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Level {
    Omitted,
    Line,
    Short,
    Full,
}

impl Level {
    /// The form shown ([`forms`]), if any.
    fn form(self) -> Option<usize> {
        match self {
            Level::Omitted => None,
            Level::Line => Some(LINE),
            Level::Short => Some(SHORT),
            Level::Full => Some(FULL),
        }
    }
}

/// What is kept.
#[derive(Debug, Clone)]
struct Plan {
    compact: bool,
    requests: Vec<Level>,
    reads: usize,
    errors: Vec<bool>,
}

/// The record, arranged for rendering.
struct Parts<'a> {
    /// Earlier requests, oldest first (their forms are made lazily: [`forms`]).
    earlier: &'a [String],
    last: Option<&'a str>,
    written: Vec<&'a Artifact>,
    /// Most recent first.
    reads: Vec<&'a Artifact>,
    errors: &'a [ErrorEntry],
}

fn write(p: &Parts<'_>, plan: &Plan, costs: &mut Costs<'_, '_>) -> String {
    let mut out = String::new();
    out.push_str("## ");
    out.push_str(REQUESTS_HEADING);
    out.push('\n');
    match p.last {
        None => {
            out.push_str(NONE);
            out.push('\n');
        }
        Some(last) => {
            let omitted = plan
                .requests
                .iter()
                .filter(|l| **l == Level::Omitted)
                .count();
            if omitted > 0 {
                let s = if omitted == 1 { "" } else { "s" };
                out.push_str(&format!("({omitted} earlier request{s} omitted)\n"));
            }
            for (i, level) in plan.requests.iter().enumerate() {
                if let Some(form) = level.form() {
                    costs.forms.push_bullet(i, form, &mut out);
                }
            }
            out.push_str(LAST_LABEL);
            out.push('\n');
            out.push_str(&fenced(last));
        }
    }

    out.push_str("\n## ");
    out.push_str(FILES_HEADING);
    out.push('\n');
    if p.written.is_empty() && p.reads.is_empty() {
        out.push_str(NONE);
        out.push('\n');
    }
    let reads = &p.reads[..plan.reads.min(p.reads.len())];
    if plan.compact {
        compact_written(&p.written, &mut out);
        if !reads.is_empty() {
            out.push_str(READ_LABEL);
            for (n, a) in reads.iter().enumerate() {
                if n > 0 {
                    out.push_str(", ");
                }
                push_code_span(&mut out, &a.path);
            }
            out.push('\n');
        }
    } else {
        for a in p.written.iter().chain(reads) {
            push_file_bullet(&mut out, a);
        }
    }
    let reads_omitted = p.reads.len() - reads.len();
    if reads_omitted > 0 {
        let s = if reads_omitted == 1 { "" } else { "s" };
        out.push_str(&format!("({reads_omitted} read file{s} omitted)\n"));
    }

    out.push_str("\n## ");
    out.push_str(ERRORS_HEADING);
    out.push('\n');
    if p.errors.is_empty() {
        out.push_str(NONE);
        out.push('\n');
    }
    let (mut resolved, mut unresolved) = (0, 0);
    for (e, keep) in p.errors.iter().zip(&plan.errors) {
        if *keep {
            push_error_bullet(&mut out, e);
        } else if e.resolved_by.is_some() {
            resolved += 1;
        } else {
            unresolved += 1;
        }
    }
    if resolved + unresolved > 0 {
        let s = if resolved + unresolved == 1 { "" } else { "s" };
        out.push_str(&format!(
            "({} more error{s} omitted: {resolved} resolved, {unresolved} unresolved)\n",
            resolved + unresolved
        ));
    }
    out
}

/// A step of the fill, to undo when the whole turns out over the budget.
#[derive(Debug, Clone, Copy)]
enum Step {
    Error(usize),
    Request(usize, Level),
    Read,
}

/// A filled plan: what it keeps, in the order it was added.
struct Fill {
    plan: Plan,
    steps: Vec<(Step, usize)>,
}

impl Fill {
    /// How much optional content it keeps, most important first (compared as a tuple):
    /// unresolved errors, earlier requests, resolved errors, read paths, lengthenings.
    fn score(&self, p: &Parts<'_>) -> (usize, usize, usize, usize, usize) {
        let kept = |resolved: bool| {
            p.errors
                .iter()
                .zip(&self.plan.errors)
                .filter(|(e, keep)| **keep && e.resolved_by.is_some() == resolved)
                .count()
        };
        let requests = self
            .plan
            .requests
            .iter()
            .filter(|l| **l != Level::Omitted)
            .count();
        let lengthened = self.plan.requests.iter().map(|l| *l as usize).sum();
        (
            kept(false),
            requests,
            kept(true),
            self.plan.reads,
            lengthened,
        )
    }
}

/// Which errors are kept whatever the budget: the [`MANDATORY_ERRORS`] newest, unresolved
/// ones first, then resolved ones.
fn mandatory_errors(errors: &[ErrorEntry]) -> Vec<bool> {
    let mut keep = vec![false; errors.len()];
    let mut left = MANDATORY_ERRORS;
    for resolved in [false, true] {
        for i in (0..errors.len()).rev() {
            if left > 0 && errors[i].resolved_by.is_some() == resolved {
                keep[i] = true;
                left -= 1;
            }
        }
    }
    keep
}

/// Fills what `left` tokens allow into `plan`, by priority (see the module docs).
fn fill(p: &Parts<'_>, mut plan: Plan, mut left: usize, costs: &mut Costs<'_, '_>) -> Fill {
    let mut steps: Vec<(Step, usize)> = Vec::new();
    let newest_first = |resolved: bool| -> Vec<usize> {
        (0..p.errors.len())
            .rev()
            .filter(|i| p.errors[*i].resolved_by.is_some() == resolved)
            .collect()
    };
    // 1. Unresolved errors, newest first (beyond the mandatory ones).
    for i in newest_first(false) {
        if plan.errors[i] {
            continue;
        }
        let cost = costs.error(p, i);
        if cost > left {
            break;
        }
        left -= cost;
        plan.errors[i] = true;
        steps.push((Step::Error(i), cost));
    }
    // 2. Earlier requests, their first line, newest first.
    for i in (0..p.earlier.len()).rev() {
        let cost = costs.request(i, LINE);
        if cost > left {
            break;
        }
        left -= cost;
        plan.requests[i] = Level::Line;
        steps.push((Step::Request(i, Level::Omitted), cost));
    }
    // 3. Resolved errors, newest first (beyond the mandatory ones).
    for i in newest_first(true) {
        if plan.errors[i] {
            continue;
        }
        let cost = costs.error(p, i);
        if cost > left {
            break;
        }
        left -= cost;
        plan.errors[i] = true;
        steps.push((Step::Error(i), cost));
    }
    // 4. Read paths, most recent first.
    for (n, a) in p.reads.iter().enumerate() {
        let cost = costs.piece(|piece| {
            if !plan.compact {
                push_file_bullet(piece, a);
            } else if n == 0 {
                piece.push_str(READ_LABEL);
                push_code_span(piece, &a.path);
                piece.push('\n');
            } else {
                piece.push_str(", ");
                push_code_span(piece, &a.path);
            }
        });
        if cost > left {
            break;
        }
        left -= cost;
        plan.reads += 1;
        steps.push((Step::Read, cost));
    }
    // 5. Earlier requests lengthened: to 300 characters, then whole, newest first.
    for (to, form) in [(Level::Short, SHORT), (Level::Full, FULL)] {
        for i in (0..p.earlier.len()).rev() {
            let from = plan.requests[i];
            if from == Level::Omitted {
                continue;
            }
            if costs.forms.same(i, form, form - 1) {
                plan.requests[i] = to;
                continue;
            }
            let extra = costs
                .request(i, form)
                .saturating_sub(costs.request(i, form - 1));
            if extra > left {
                continue;
            }
            left -= extra;
            plan.requests[i] = to;
            steps.push((Step::Request(i, from), extra));
        }
    }
    Fill { plan, steps }
}

pub(crate) fn render(
    r: &Retained,
    budget: usize,
    count: &dyn Fn(&str) -> usize,
    memo: &mut RenderMemo,
) -> Rendered {
    let (earlier, last) = match r.requests.split_last() {
        Some((last, earlier)) => (earlier, Some(last.as_str())),
        None => (&[][..], None),
    };
    let parts = Parts {
        earlier,
        last,
        written: r.artifacts.written().collect(),
        reads: r.artifacts.read_only().rev().collect(),
        errors: &r.errors.entries,
    };
    let mandatory_errors = mandatory_errors(parts.errors);
    let skeleton = |compact: bool| Plan {
        compact,
        requests: vec![Level::Omitted; parts.earlier.len()],
        reads: 0,
        errors: mandatory_errors.clone(),
    };
    let mut costs = Costs {
        count,
        memo,
        errors: vec![None; parts.errors.len()],
        forms: Forms::new(earlier),
        scratch: String::new(),
    };

    // The mandatory part (with the omission markers) in each layout: the compact one always,
    // the detailed one for a short trail.
    let layouts: Vec<bool> = if r.artifacts.len() > SHORT_LIST {
        vec![true]
    } else {
        vec![false, true]
    };
    let mut best: Option<Fill> = None;
    let mut smallest: Option<(Plan, String, usize)> = None;
    for compact in layouts {
        let plan = skeleton(compact);
        let text = write(&parts, &plan, &mut costs);
        let base = count(&text);
        if base > budget {
            if smallest.as_ref().is_none_or(|(_, _, t)| base < *t) {
                smallest = Some((plan, text, base));
            }
            continue;
        }
        let filled = fill(&parts, plan, budget - base, &mut costs);
        // The detailed layout unless the compact one keeps more.
        if best
            .as_ref()
            .is_none_or(|b| filled.score(&parts) > b.score(&parts))
        {
            best = Some(filled);
        }
    }
    let Some(Fill {
        mut plan,
        mut steps,
    }) = best
    else {
        let (plan, text, tokens) = smallest.unwrap_or_else(|| {
            let plan = skeleton(true);
            let text = write(&parts, &plan, &mut costs);
            let tokens = count(&text);
            (plan, text, tokens)
        });
        return finish(&parts, &plan, text, tokens, true, &mut costs);
    };

    // The counts were per piece: check the whole, and undo the lowest priority until it fits.
    loop {
        let text = write(&parts, &plan, &mut costs);
        let tokens = count(&text);
        if tokens <= budget || steps.is_empty() {
            return finish(&parts, &plan, text, tokens, false, &mut costs);
        }
        let mut excess = tokens - budget;
        while let Some((step, cost)) = steps.pop() {
            match step {
                Step::Error(i) => plan.errors[i] = false,
                Step::Request(i, from) => plan.requests[i] = from,
                Step::Read => plan.reads -= 1,
            }
            if cost >= excess {
                break;
            }
            excess -= cost;
        }
    }
}

fn finish(
    p: &Parts<'_>,
    plan: &Plan,
    text: String,
    tokens: usize,
    over: bool,
    costs: &mut Costs<'_, '_>,
) -> Rendered {
    let omitted = |resolved: bool| {
        p.errors
            .iter()
            .zip(&plan.errors)
            .filter(|(e, keep)| !**keep && e.resolved_by.is_some() == resolved)
            .count()
    };
    Rendered {
        text,
        tokens,
        over_budget: over,
        compact_files: plan.compact,
        requests_omitted: plan
            .requests
            .iter()
            .filter(|l| **l == Level::Omitted)
            .count(),
        requests_shortened: plan
            .requests
            .iter()
            .enumerate()
            .filter(|(i, l)| match l {
                Level::Line => !costs.forms.same(*i, LINE, FULL),
                Level::Short => !costs.forms.same(*i, SHORT, FULL),
                _ => false,
            })
            .count(),
        reads_omitted: p.reads.len() - plan.reads.min(p.reads.len()),
        resolved_errors_omitted: omitted(true),
        unresolved_errors_omitted: omitted(false),
    }
}

#[cfg(test)]
mod tests;
