//! `condense snapshot --review`: one changed snapshot at a time, as `cargo insta review`
//! does: the transcript's retention change, the diff, then accept / reject / skip / quit.
//!
//! Answers are lines on standard input: typed at the terminal, or piped (`printf 'a\nr\n'`),
//! which is how tests and scripts drive it. A piped answer is echoed after the question so the
//! transcript reads as a terminal session would. When the answers run out, the remaining
//! snapshots are skipped (left pending), never accepted.

use super::snapshot::{Entry, Outcome, Set, Status};
use super::unified;
use crate::Failure;
use std::io::{BufRead, IsTerminal};

/// Asks about every pending entry, in order, and records the answers in `entries`.
pub fn review(entries: &mut [Entry], sets: &[Set], color: bool) -> Result<(), Failure> {
    let stdin = std::io::stdin();
    let echo = !stdin.is_terminal();
    review_with(entries, sets, color, &mut stdin.lock(), echo)
}

/// [`review`] reading answers from `input`.
fn review_with(
    entries: &mut [Entry],
    sets: &[Set],
    color: bool,
    input: &mut dyn BufRead,
    echo: bool,
) -> Result<(), Failure> {
    let total = entries
        .iter()
        .filter(|e| e.outcome == Outcome::Pending)
        .count();
    if total == 0 {
        crate::output::print("condense snapshot --review: nothing to review\n")?;
        return Ok(());
    }
    let mut asked = 0;
    let mut shown_set = None;
    let mut rest = None;
    for e in entries.iter_mut() {
        if e.outcome != Outcome::Pending {
            continue;
        }
        asked += 1;
        if let Some(outcome) = rest {
            e.outcome = outcome;
            continue;
        }
        let mut text = String::new();
        if shown_set != Some(e.set) {
            shown_set = Some(e.set);
            let set = &sets[e.set];
            text.push_str(&format!(
                "════ {} ({}) ════\nretention: {}\n\n",
                set.name,
                crate::term::escape_controls(&set.transcript),
                set.retention_line()
            ));
        }
        let kind = if e.status == Status::New {
            "new"
        } else {
            "changed"
        };
        text.push_str(&format!("── [{asked}/{total}] {} ({kind}) ──\n", e.key));
        let new = e.content();
        let old = e.old.clone().unwrap_or_default();
        text.push_str(&unified(
            &old,
            &new,
            &e.snap.display().to_string(),
            &e.pending.display().to_string(),
            color,
        ));
        crate::output::print(&text)?;
        e.outcome = loop {
            crate::output::print("accept (a), reject (r), skip (s), quit (q)? ")?;
            let mut line = String::new();
            let read = input
                .read_line(&mut line)
                .map_err(|err| Failure::run(format!("<stdin>: cannot read an answer: {err}")))?;
            if read == 0 {
                crate::output::print("\nno more answers: the remaining snapshots are skipped\n")?;
                rest = Some(Outcome::Skipped);
                break Outcome::Skipped;
            }
            let answer = line.trim().to_ascii_lowercase();
            if echo {
                crate::output::print(&format!("{answer}\n"))?;
            }
            match answer.as_str() {
                "a" | "accept" => break Outcome::Accepted,
                "r" | "reject" => break Outcome::Rejected,
                "s" | "skip" => break Outcome::Skipped,
                "q" | "quit" => {
                    rest = Some(Outcome::Skipped);
                    break Outcome::Skipped;
                }
                _ => crate::output::print("please answer a, r, s or q\n")?,
            }
        };
        crate::output::print("\n")?;
    }
    Ok(())
}
