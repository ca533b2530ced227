//! Committing new spans: the oldest uncollapsed turns, summarized (merged into the summary
//! right before them when there is one), while over `commit_at` or forced.

use super::{Applied, Found, Run, Unit};
use crate::state::Collapse;
use crate::PURPOSE;
use condense_abi::text::plural;
use condense_abi::{StageEvent, SummaryRequest};
use condense_model::{Message, Role};
use condense_turns::measure::{cut_to_tokens, thousands};
use std::ops::Range;

impl Run<'_> {
    /// How many unit positions hold turns left as they are.
    fn open_turns(&self) -> Vec<usize> {
        self.units
            .iter()
            .enumerate()
            .filter(|(_, u)| matches!(u, Unit::Turn(_)))
            .map(|(i, _)| i)
            .collect()
    }

    /// Commits new spans while over `commit_at` (or forced) and turns may still be collapsed.
    pub(crate) fn commit(&mut self) {
        let keep = self.config.keep_recent_turns;
        loop {
            let over = self.projected >= self.commit_threshold;
            if !(over || self.forced) {
                break;
            }
            let open = self.open_turns();
            if open.len() <= keep {
                if over {
                    self.stopped = Some(format!(
                        "the {} are kept",
                        plural(keep, "most recent turn", "most recent turns")
                    ));
                    self.report.note(format!(
                        "nothing more to collapse: {} left, keep_recent_turns = {keep}",
                        plural(open.len(), "uncollapsed turn", "uncollapsed turns")
                    ));
                }
                break;
            }
            let eligible = &open[..open.len() - keep];
            // The span: consecutive open turns from the oldest eligible one.
            let u0 = eligible[0];
            let mut u1 = u0;
            while u1 < self.units.len()
                && eligible.contains(&u1)
                && u1 - u0 < self.config.turns_per_span
            {
                u1 += 1;
            }
            let merge_into = match u0.checked_sub(1).map(|u| &self.units[u]) {
                Some(Unit::Collapsed(c)) => Some(*c),
                _ => None,
            };
            if let Err((why, short)) = self.commit_span(u0..u1, merge_into) {
                self.report.note(why);
                self.stopped = Some(short.to_string());
                break;
            }
        }
    }

    /// Summarizes the turns of units `span` (merged into collapse `merge_into` when given) and
    /// replaces them by the collapse.
    fn commit_span(
        &mut self,
        span: Range<usize>,
        merge_into: Option<usize>,
    ) -> Result<(), (String, &'static str)> {
        let turn_idx: Vec<usize> = self.units[span.clone()]
            .iter()
            .filter_map(|u| match u {
                Unit::Turn(t) => Some(*t),
                Unit::Collapsed(_) => None,
            })
            .collect();
        let first_turn = self.turns.turns[turn_idx[0]];
        let last_turn = self.turns.turns[turn_idx[turn_idx.len() - 1]];
        let range = first_turn.start..last_turn.end;
        let ids: Vec<String> = range
            .clone()
            .filter(|&i| self.messages[i].role != Role::System)
            .map(|i| self.messages[i].id.clone())
            .collect();
        let chat: Vec<Message> = range
            .clone()
            .map(|i| &self.messages[i])
            .filter(|m| m.is_chat() && m.role != Role::System)
            .cloned()
            .collect();
        let span_tokens = self.tokens_of_range(range.clone());
        let first_id = self.messages[range.start].id.clone();
        let last_id = ids.last().cloned().unwrap_or_default();
        let previous = merge_into.map(|c| self.collapses[c].collapse.clone());
        let describe = |what: &str| {
            format!(
                "{what} {} ({} messages, ids {first_id}…{last_id}, {} tokens)",
                plural(turn_idx.len(), "turn", "turns"),
                ids.len(),
                thousands(span_tokens)
            )
        };

        let request = SummaryRequest {
            messages: chat,
            previous_summary: previous.as_ref().map(|p| p.summary.clone()),
            max_tokens: self.config.summary_max_tokens,
            purpose: PURPOSE.to_string(),
        };
        let summary = self.host.summarize(request).map_err(|e| {
            (
                format!(
                    "summarizer failed, {}: {e}; nothing more committed in this run",
                    describe("not collapsing")
                ),
                "the summarizer failed",
            )
        })?;
        if summary.trim().is_empty() {
            return Err((
                format!(
                    "summarizer returned an empty summary, {}; nothing more committed in this run",
                    describe("not collapsing")
                ),
                "the summarizer returned an empty summary",
            ));
        }
        let cut = cut_to_tokens(self.host, summary.trim(), self.config.summary_max_tokens);
        if cut.cut {
            self.report.note(format!(
                "summary of ids {first_id}…{last_id} cut from {} to summary_max_tokens = {}",
                thousands(cut.original_tokens),
                thousands(self.config.summary_max_tokens)
            ));
        }
        let now = self.host.now_ms();
        let collapse = match &previous {
            Some(p) => {
                let mut ids_all = p.ids.clone();
                ids_all.extend(ids.iter().cloned());
                Collapse {
                    first: p.first.clone(),
                    last: last_id.clone(),
                    count: p.count + ids.len(),
                    turns: p.turns + turn_idx.len(),
                    ids: ids_all,
                    summary: cut.text,
                    merges: p.merges + 1,
                    committed_ms: now,
                }
            }
            None => Collapse {
                first: first_id.clone(),
                last: last_id.clone(),
                count: ids.len(),
                turns: turn_idx.len(),
                ids: ids.clone(),
                summary: cut.text,
                merges: 0,
                committed_ms: now,
            },
        };
        let old_summary = previous.as_ref().map_or(0, |p| self.summary_tokens(p));
        let new_summary = self.summary_tokens(&collapse);
        if new_summary >= span_tokens + old_summary {
            return Err((
                format!(
                    "{}: its summary ({} tokens) would not be smaller; nothing more committed in \
                     this run",
                    describe("not collapsing"),
                    thousands(new_summary)
                ),
                "a summary would not have been smaller",
            ));
        }
        let saving = span_tokens + old_summary - new_summary;
        self.projected = self.projected.saturating_sub(saving);
        let detail = match &previous {
            Some(p) => format!(
                "{} into the summary of ids {}…{} ({} → {} tokens; now {} messages)",
                describe("merged"),
                p.first,
                p.last,
                thousands(old_summary),
                thousands(new_summary),
                collapse.count
            ),
            None => format!(
                "{} → summary message of {} tokens",
                describe("collapsed"),
                thousands(new_summary)
            ),
        };
        self.report.events.push(StageEvent {
            kind: "collapsed".into(),
            message_id: collapse.first.clone(),
            detail,
            tokens: saving,
        });
        match merge_into {
            Some(c) => {
                let applied = &mut self.collapses[c];
                applied.range.end = range.end;
                applied.input_tokens += span_tokens;
                applied.collapse = collapse;
                applied.fresh = true;
                self.units.drain(span);
            }
            None => {
                let c = self.collapses.len();
                self.collapses.push(Applied {
                    collapse,
                    range,
                    input_tokens: span_tokens,
                    found: Found::Span,
                    fresh: true,
                    prior: None,
                });
                self.units.splice(span, [Unit::Collapsed(c)]);
            }
        }
        Ok(())
    }
}
