//! Renders a [`Digest`] as Markdown within a token budget.
//!
//! Each section gets a share of the budget; a section that needs less than its share gives the
//! rest to the others. Within a section the most important items are kept first (the first
//! request, then the newest; changed files before read ones, the most recently touched first;
//! the newest errors and decisions) and the kept items are shown in their usual order, with a
//! `(N more omitted)` line when some were dropped.

use super::files::FileStatus;
use super::sections::Digest;
use crate::text::fit_tokens;
use condense_tokens::TokenCounter;

pub(crate) const INTENT: &str = "Session intent";
pub(crate) const FILES: &str = "Files";
pub(crate) const ERRORS: &str = "Errors and fixes";
pub(crate) const DECISIONS: &str = "Decisions";
pub(crate) const STATE: &str = "Current state";
pub(crate) const PENDING: &str = "Pending tasks and next steps";
/// Shown in a section with nothing in it.
pub(crate) const NONE: &str = "(none)";
/// An item is shortened rather than dropped when at least this many tokens are left for it.
const MIN_SHRUNK_TOKENS: usize = 24;

struct Entry {
    /// The item's text (a bullet's lines, or a verbatim section body).
    text: String,
    /// 0 is kept first.
    rank: usize,
    /// Files subsection.
    group: Option<FileStatus>,
    cost: usize,
}

struct Part {
    heading: String,
    /// Items are bullets (`- `); otherwise one verbatim body.
    bullets: bool,
    share: f64,
    entries: Vec<Entry>,
}

/// `- first line` and continuation lines indented by two spaces.
fn bullet(text: &str) -> String {
    let mut out = String::new();
    for (i, line) in text.lines().enumerate() {
        out.push_str(if i == 0 { "- " } else { "  " });
        out.push_str(line);
        out.push('\n');
    }
    if out.is_empty() {
        out.push_str("- \n");
    }
    out
}

fn code_path(path: &str) -> String {
    if path.contains('`') {
        path.to_string()
    } else {
        format!("`{path}`")
    }
}

fn parts(d: &Digest) -> Vec<Part> {
    let part = |heading: &str, share: f64| Part {
        heading: heading.to_string(),
        bullets: true,
        share,
        entries: Vec::new(),
    };
    let entry = |text: String, rank: usize| Entry {
        text,
        rank,
        group: None,
        cost: 0,
    };
    let newest_first = |items: &[String]| -> Vec<Entry> {
        let n = items.len();
        items
            .iter()
            .enumerate()
            .map(|(i, t)| entry(t.clone(), n - 1 - i))
            .collect()
    };

    let mut intent = part(INTENT, 0.20);
    let n = d.intent.len();
    intent.entries = d
        .intent
        .iter()
        .enumerate()
        .map(|(i, t)| entry(t.clone(), if i == 0 { 0 } else { n - i }))
        .collect();

    let mut files = part(FILES, 0.30);
    let all = d.files.entries();
    let changed = all.iter().filter(|(_, s)| *s != FileStatus::Read).count();
    let (mut rank_changed, mut rank_read) = (changed, all.len());
    for (path, status) in all {
        // Walking oldest to newest, so ranks count down: the newest gets the lowest.
        let rank = if *status == FileStatus::Read {
            rank_read -= 1;
            rank_read
        } else {
            rank_changed -= 1;
            rank_changed
        };
        files.entries.push(Entry {
            text: code_path(path),
            rank,
            group: Some(*status),
            cost: 0,
        });
    }

    let mut errors = part(ERRORS, 0.15);
    errors.entries = newest_first(&d.errors);
    let mut decisions = part(DECISIONS, 0.10);
    decisions.entries = newest_first(&d.decisions);

    let mut state = part(STATE, 0.10);
    state
        .entries
        .extend(d.last_test.clone().map(|t| entry(t, 0)));
    state
        .entries
        .extend(d.last_assistant.clone().map(|t| entry(t, 1)));

    let mut pending = part(PENDING, 0.15);
    for (i, t) in d.todos.iter().flatten().enumerate() {
        pending.entries.push(entry(t.clone(), i + 1));
    }
    pending
        .entries
        .extend(d.unanswered.clone().map(|t| entry(t, 0)));

    let mut out = vec![intent, files, errors, decisions, state, pending];
    for (heading, body) in &d.extra {
        out.push(Part {
            heading: heading.clone(),
            bullets: false,
            share: 0.10,
            entries: vec![entry(body.clone(), 0)],
        });
    }
    out
}

/// Renders a part with the entries `keep` says to keep.
fn render_part(out: &mut String, part: &Part, keep: &[bool]) {
    out.push_str("## ");
    out.push_str(&part.heading);
    out.push('\n');
    let kept = || {
        part.entries
            .iter()
            .zip(keep)
            .filter(|(_, k)| **k)
            .map(|(e, _)| e)
    };
    let mut any = false;
    if part.entries.iter().any(|e| e.group.is_some()) {
        for status in [FileStatus::Created, FileStatus::Modified, FileStatus::Read] {
            let mut group = kept().filter(|e| e.group == Some(status)).peekable();
            if group.peek().is_some() {
                out.push_str("### ");
                out.push_str(status.heading());
                out.push('\n');
                for e in group {
                    out.push_str(&bullet(&e.text));
                    any = true;
                }
            }
        }
    } else {
        for e in kept() {
            if part.bullets {
                out.push_str(&bullet(&e.text));
            } else {
                out.push_str(e.text.trim_end());
                out.push('\n');
            }
            any = true;
        }
    }
    let omitted = keep.iter().filter(|k| !**k).count();
    if omitted > 0 {
        out.push_str(&format!("({omitted} more omitted)\n"));
    } else if !any {
        out.push_str(NONE);
        out.push('\n');
    }
}

fn render_all(parts: &[Part], keep: &[Vec<bool>]) -> String {
    let mut out = String::new();
    for (i, (part, k)) in parts.iter().zip(keep).enumerate() {
        if i > 0 {
            out.push('\n');
        }
        render_part(&mut out, part, k);
    }
    out
}

/// Splits `available` tokens over parts needing `need` tokens, by share, handing what a part
/// does not need to the others.
fn allocate(need: &[usize], shares: &[f64], available: usize) -> Vec<usize> {
    let mut alloc = vec![0; need.len()];
    let mut open: Vec<usize> = (0..need.len()).filter(|i| need[*i] > 0).collect();
    let mut left = available;
    loop {
        let total: f64 = open.iter().map(|i| shares[*i]).sum();
        let fair = |i: usize| (left as f64 * shares[i] / total) as usize;
        match open.iter().position(|i| need[*i] <= fair(*i)) {
            Some(pos) => {
                let i = open.remove(pos);
                alloc[i] = need[i];
                left -= need[i];
            }
            None => {
                for i in &open {
                    alloc[*i] = fair(*i);
                }
                return alloc;
            }
        }
    }
}

/// The summary within `max_tokens`.
pub(crate) fn render(d: &Digest, counter: &TokenCounter, max_tokens: usize) -> String {
    let mut parts = parts(d);
    for part in &mut parts {
        for e in &mut part.entries {
            e.cost = counter.count_text(&bullet(&e.text));
        }
    }
    let mut keep: Vec<Vec<bool>> = parts.iter().map(|p| vec![true; p.entries.len()]).collect();
    let full = render_all(&parts, &keep);
    if counter.count_text(&full) <= max_tokens {
        return full;
    }

    // Headings and markers cost the same whatever is kept; the items share the rest.
    let none: Vec<Vec<bool>> = parts.iter().map(|p| vec![false; p.entries.len()]).collect();
    let overhead = counter.count_text(&render_all(&parts, &none));
    let sub_headings = 4; // `### Created` etc.
    let need: Vec<usize> = parts
        .iter()
        .map(|p| p.entries.iter().map(|e| e.cost).sum::<usize>())
        .collect();
    let shares: Vec<f64> = parts.iter().map(|p| p.share).collect();
    let alloc = allocate(
        &need,
        &shares,
        max_tokens.saturating_sub(overhead + 3 * sub_headings),
    );

    for (pi, part) in parts.iter_mut().enumerate() {
        let mut order: Vec<usize> = (0..part.entries.len()).collect();
        order.sort_by_key(|i| part.entries[*i].rank);
        let mut left = alloc[pi];
        for i in order {
            let e = &mut part.entries[i];
            if e.cost <= left {
                left -= e.cost;
            } else if left >= MIN_SHRUNK_TOKENS {
                e.text = fit_tokens(counter, &e.text, left.saturating_sub(4), "…");
                e.cost = counter.count_text(&bullet(&e.text));
                left = left.saturating_sub(e.cost);
            } else {
                keep[pi][i] = false;
            }
        }
    }

    // The shares are estimates: drop more until the whole fits.
    loop {
        let text = render_all(&parts, &keep);
        if counter.count_text(&text) <= max_tokens {
            return text;
        }
        let kept_cost = |pi: usize| -> usize {
            parts[pi]
                .entries
                .iter()
                .zip(&keep[pi])
                .filter(|(_, k)| **k)
                .map(|(e, _)| e.cost)
                .sum()
        };
        let Some(pi) = (0..parts.len())
            .filter(|pi| kept_cost(*pi) > 0)
            .max_by_key(|pi| kept_cost(*pi))
        else {
            return fit_tokens(counter, &text, max_tokens, "\n(cut)");
        };
        let worst = (0..parts[pi].entries.len())
            .filter(|i| keep[pi][*i])
            .max_by_key(|i| parts[pi].entries[*i].rank);
        if let Some(i) = worst {
            keep[pi][i] = false;
        }
    }
}
