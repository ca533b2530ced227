//! Renders a [`Digest`] as Markdown within a token budget.
//!
//! Each section gets a share of the budget; a section that needs less than its share gives the
//! rest to the others. Within a section the most important items are kept first (the newest
//! decisions; the last test run before the last assistant message; the unanswered request
//! before the todo items) and the kept items are shown in their usual order, with a
//! `(N more omitted)` line when some were dropped.

use super::sections::Digest;
use crate::text::fit_tokens;
use condense_tokens::TokenCounter;

pub(crate) const DECISIONS: &str = "Decisions";
pub(crate) const STATE: &str = "Current state";
pub(crate) const PENDING: &str = "Pending tasks and next steps";
pub(crate) const NOTES: &str = "Agent notes (verbatim, newest kept first)";
/// Shown in a section with nothing in it.
pub(crate) const NONE: &str = "(none)";
/// An item is shortened rather than dropped when at least this many tokens are left for it.
const MIN_SHRUNK_TOKENS: usize = 24;

struct Entry {
    /// The item's text (a bullet's lines, or a verbatim section body).
    text: String,
    /// 0 is kept first.
    rank: usize,
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

    let mut decisions = part(DECISIONS, 0.33);
    decisions.entries = newest_first(&d.decisions);

    let mut state = part(STATE, 0.33);
    state
        .entries
        .extend(d.last_test.clone().map(|t| entry(t, 0)));
    state
        .entries
        .extend(d.last_assistant.clone().map(|t| entry(t, 1)));

    let mut pending = part(PENDING, 0.29);
    for (i, t) in d.todos.iter().flatten().enumerate() {
        pending.entries.push(entry(t.clone(), i + 1));
    }
    pending
        .entries
        .extend(d.unanswered.clone().map(|t| entry(t, 0)));

    // Excerpts take only what the other sections leave (a share of 0: see `render`).
    let mut notes = part(NOTES, 0.0);
    notes.entries = newest_first(&d.notes);

    let mut out = vec![decisions, state, pending, notes];
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
    for e in kept() {
        if part.bullets {
            out.push_str(&bullet(&e.text));
        } else {
            out.push_str(e.text.trim_end());
            out.push('\n');
        }
        any = true;
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

/// What the headings cost: every part's heading with `(none)` under it, or, for a part of share
/// 0 (the first to give way), its omission marker.
fn skeleton(parts: &[Part]) -> String {
    parts
        .iter()
        .map(|p| {
            let under = if p.share == 0.0 && !p.entries.is_empty() {
                format!("({} more omitted)", p.entries.len())
            } else {
                NONE.to_string()
            };
            format!("## {}\n{under}\n", p.heading)
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// `text` cut so that its bullet (continuation lines indented) costs at most `budget` tokens:
/// `(text, cost)`. The indent costs about a token a line, so the cut is retried tighter by
/// what the bullet went over.
fn shrink(counter: &TokenCounter, text: &str, budget: usize) -> (String, usize) {
    let mut target = budget.saturating_sub(4);
    loop {
        let cut = fit_tokens(counter, text, target, "…");
        let cost = counter.count_text(&bullet(&cut));
        if cost <= budget || target == 0 {
            return (cut, cost);
        }
        target = target.saturating_sub(cost - budget + 1);
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
    if counter.count_text_drafted(&full) <= max_tokens {
        return full;
    }

    // When every section but the lowest-priority ones (share 0: the agent notes) fits whole,
    // they stay whole and the notes take what is left, newest first.
    let lowest: Vec<bool> = parts.iter().map(|p| p.share == 0.0).collect();
    let mut without: Vec<Vec<bool>> = parts
        .iter()
        .zip(&lowest)
        .map(|(p, low)| vec![!low; p.entries.len()])
        .collect();
    let base = counter.count_text_drafted(&render_all(&parts, &without));
    if base <= max_tokens {
        let mut left = max_tokens - base;
        for (pi, part) in parts.iter_mut().enumerate().filter(|(pi, _)| lowest[*pi]) {
            let mut order: Vec<usize> = (0..part.entries.len()).collect();
            order.sort_by_key(|i| part.entries[*i].rank);
            for i in order {
                let e = &mut part.entries[i];
                if e.cost > left && left >= MIN_SHRUNK_TOKENS {
                    (e.text, e.cost) = shrink(counter, &e.text, left);
                }
                if e.cost <= left {
                    left -= e.cost;
                    without[pi][i] = true;
                }
            }
        }
        return fit_lowest_first(&parts, without, counter, max_tokens);
    }

    // Headings cost the same whatever is kept; the items share the rest. (Omission markers
    // are left to the final check: counting one per section would starve the items.)
    let overhead = counter.count_text_drafted(&skeleton(&parts));
    let need: Vec<usize> = parts
        .iter()
        .map(|p| p.entries.iter().map(|e| e.cost).sum::<usize>())
        .collect();
    // Parts with a share split the budget; a part of share 0 (the agent notes) takes only what
    // they leave.
    let shared: Vec<usize> = (0..parts.len()).filter(|i| parts[*i].share > 0.0).collect();
    let available = max_tokens.saturating_sub(overhead);
    let shared_alloc = allocate(
        &shared.iter().map(|i| need[*i]).collect::<Vec<_>>(),
        &shared.iter().map(|i| parts[*i].share).collect::<Vec<_>>(),
        available,
    );
    let mut left_over = available.saturating_sub(shared_alloc.iter().sum());
    let mut alloc = vec![0; parts.len()];
    for (k, i) in shared.iter().enumerate() {
        alloc[*i] = shared_alloc[k];
    }
    for i in (0..parts.len()).filter(|i| parts[*i].share == 0.0) {
        alloc[i] = need[i].min(left_over);
        left_over -= alloc[i];
    }

    for (pi, part) in parts.iter_mut().enumerate() {
        let mut order: Vec<usize> = (0..part.entries.len()).collect();
        order.sort_by_key(|i| part.entries[*i].rank);
        let mut left = alloc[pi];
        for i in order {
            let e = &mut part.entries[i];
            if e.cost <= left {
                left -= e.cost;
            } else if left >= MIN_SHRUNK_TOKENS {
                let (text, cost) = shrink(counter, &e.text, left);
                e.text = text;
                e.cost = cost;
                left = left.saturating_sub(e.cost);
            } else {
                keep[pi][i] = false;
            }
        }
    }

    // The shares are estimates: drop more until the whole fits.
    fit_lowest_first(&parts, keep, counter, max_tokens)
}

/// The parts with the entries `keep` says, dropping more until the whole fits `max_tokens`:
/// from the lowest-priority part (share 0) first, then from the costliest, its lowest-ranked
/// entry first.
fn fit_lowest_first(
    parts: &[Part],
    mut keep: Vec<Vec<bool>>,
    counter: &TokenCounter,
    max_tokens: usize,
) -> String {
    loop {
        let text = render_all(parts, &keep);
        if counter.count_text_drafted(&text) <= max_tokens {
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
        // The lowest-priority part (share 0) gives way first, then the costliest.
        let Some(pi) = (0..parts.len())
            .filter(|pi| kept_cost(*pi) > 0)
            .max_by_key(|pi| (parts[*pi].share == 0.0, kept_cost(*pi)))
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
