//! Committing new spans: the oldest uncollapsed turns, summarized (merged into the summary
//! right before them when there is one), while over `commit_at` or forced.

use super::{Applied, Found, Run, Unit};
use crate::state::Collapse;
use crate::PURPOSE;
use condense_abi::{StageEvent, SummaryRequest};
use condense_model::id_list::IdList;
use condense_model::{Message, ReadMessage, Role};
use condense_text::{plural, thousands};
use std::borrow::Cow;
use std::ops::Range;

impl<M: ReadMessage> Run<'_, M> {
    /// How many unit positions hold turns left as they are.
    fn open_turns(&self) -> Vec<usize> {
        self.units
            .iter()
            .enumerate()
            .filter(|(_, u)| matches!(u, Unit::Turn(_)))
            .map(|(i, _)| i)
            .collect()
    }

    /// Commits new spans when the projection is at or above the target (see `Run::target`),
    /// then goes on while it is at or above the landing point (`Run::headroom` below the
    /// target) and turns may still be collapsed. Each span grows turn by turn, up to
    /// `turns_per_span` (further over a backlog, see `Config::backlog_span_tokens`), only until
    /// its commit is expected to bring the projection below the landing point: a commit frees
    /// about what is needed, not everything it could.
    pub(crate) fn commit(&mut self) {
        let keep = self.config.keep_recent_turns;
        let target = self.target();
        self.goal = Some(target);
        self.before_commits = self.projected;
        if self.projected < target {
            return;
        }
        let landing = target.saturating_sub(self.headroom());
        // How far a backlog span may grow: set by the backlog this run starts with, so a
        // backlog is folded in about `backlog_commits` spans however large it is.
        let span_max = self
            .config
            .backlog_span(self.projected.saturating_sub(landing), self.effective);
        // Once it commits, a run goes on down to the landing point: stopping just below the
        // target would commit again a turn or two later, each time a new prefix.
        while self.projected >= landing {
            let open = self.open_turns();
            if open.len() <= keep && self.projected < target {
                // Below the target already, on the way to the landing point.
                self.report.note(format!(
                    "stopped at {} tokens projected, above the landing point: the {} are kept",
                    thousands(self.projected),
                    plural(keep, "most recent turn", "most recent turns")
                ));
                break;
            }
            if open.len() <= keep {
                self.stopped = Some(format!(
                    "the {} are kept",
                    plural(keep, "most recent turn", "most recent turns")
                ));
                self.report.note(format!(
                    "nothing more to collapse: {} left, keep_recent_turns = {keep}",
                    plural(open.len(), "uncollapsed turn", "uncollapsed turns")
                ));
                break;
            }
            let eligible = &open[..open.len() - keep];
            let merge_into = match eligible[0].checked_sub(1).map(|u| &self.units[u]) {
                Some(Unit::Collapsed(c)) => Some(*c),
                _ => None,
            };
            let (prior_replaced, old_summary) = merge_into.map_or((0, 0), |c| {
                let applied = &self.collapses[c];
                (
                    self.replaced_tokens(applied),
                    applied
                        .summary_tokens
                        .unwrap_or_else(|| self.summary_tokens(&applied.collapse)),
                )
            });
            // The span: consecutive open turns from the oldest eligible one, until the commit
            // is expected to land below the target (its summary taking its full budget).
            // Past `turns_per_span` turns, a span grows only over a backlog (more than
            // `span_max` still to free down to the landing point), up to that many tokens
            // (`Config::backlog_span`): what is left after it is committed as it would be
            // without a backlog.
            let backlog = match span_max {
                n if self.projected.saturating_sub(landing) > n => n,
                _ => 0,
            };
            let u0 = eligible[0];
            let mut u1 = u0;
            let mut span_tokens = 0;
            // `eligible` is in ascending order: membership is a binary search.
            while u1 < self.units.len() && eligible.binary_search(&u1).is_ok() {
                let Unit::Turn(t) = self.units[u1] else {
                    break;
                };
                let tokens = self.turn_tokens(t);
                if u1 - u0 >= self.config.turns_per_span && span_tokens + tokens > backlog {
                    break;
                }
                span_tokens += tokens;
                u1 += 1;
                let budget = self
                    .config
                    .summary_budget(prior_replaced + span_tokens, self.effective);
                let expected = (self.projected + budget).saturating_sub(span_tokens + old_summary);
                if expected < landing {
                    break;
                }
            }
            if let Err((why, short)) = self.commit_span(u0..u1, merge_into, old_summary, landing) {
                self.report.note(why);
                self.stopped = Some(short.to_string());
                break;
            }
        }
    }

    /// What a collapse stands for, in tokens: as recorded when committed, else (an adopted
    /// summary, a state of an older version) what it replaces in this input.
    fn replaced_tokens(&self, applied: &Applied) -> usize {
        match applied.collapse.replaced_tokens {
            0 => applied.input_tokens,
            n => n,
        }
    }

    /// Summarizes the turns of units `span` (merged into collapse `merge_into` when given, whose
    /// summary message has `old_summary` tokens) and replaces them by the collapse. The summary's budget is `Config::summary_budget` of what
    /// it stands for, raised up to the cap by the room left above `landing`: when one commit
    /// has to free more than needed (a single huge turn), the summary keeps more of it.
    fn commit_span(
        &mut self,
        span: Range<usize>,
        merge_into: Option<usize>,
        old_summary: usize,
        landing: usize,
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
        let ids: IdList = range
            .clone()
            .filter(|&i| self.messages[i].role() != Role::System)
            .map(|i| self.messages[i].id())
            .collect();
        // The span's event lines go too: the summarizer writes no prose from them, but a
        // sub-agent's lines (kept as events with their content) are the session's work, and the
        // retained record lists the files it wrote and the errors it hit.
        let span_messages: Vec<Message> = range
            .clone()
            .map(|i| &self.messages[i])
            .filter(|m| m.role() != Role::System)
            .map(ReadMessage::to_message)
            .collect();
        // The span's turns cover `range` (turns are contiguous).
        let span_tokens: usize = turn_idx.iter().map(|&t| self.turn_tokens(t)).sum();
        let first_id = self.messages[range.start].id().to_string();
        let last_id = ids.last().map(Cow::into_owned).unwrap_or_default();
        // The collapse merged into, without its ids: they grow with every merge of a running
        // summary, and copying them at each commit made a long session quadratic. They are
        // moved into the merged collapse once the commit is sure (below).
        let previous = merge_into.map(|c| without_ids(&self.collapses[c].collapse));
        let prior_replaced = merge_into.map_or(0, |c| self.replaced_tokens(&self.collapses[c]));
        let replaced = prior_replaced + span_tokens;
        let scaled = self.config.summary_budget(replaced, self.effective);
        let cap = self.config.summary_cap(self.effective);
        // The summary message's own cost (header line, message overhead) besides its text.
        let header = self.summary_tokens(&Collapse {
            first: first_id.clone(),
            last: last_id.clone(),
            count: previous.as_ref().map_or(0, |p| p.count) + ids.len(),
            turns: 0,
            ids: IdList::default(),
            summary: String::new(),
            merges: 0,
            committed_ms: 0,
            replaced_tokens: 0,
        });
        let room = landing
            .saturating_sub(self.projected.saturating_sub(span_tokens + old_summary))
            .saturating_sub(header);
        let budget = if room > scaled { room.min(cap) } else { scaled };
        let id_count = ids.len();
        let describe = |what: &str| {
            format!(
                "{what} {} ({id_count} messages, ids {first_id}…{last_id}, {} tokens)",
                plural(turn_idx.len(), "turn", "turns"),
                thousands(span_tokens)
            )
        };

        let request = SummaryRequest {
            messages: span_messages,
            previous_summary: previous.as_ref().map(|p| p.summary.clone()),
            max_tokens: budget,
            purpose: PURPOSE.to_string(),
        };
        let summary = self.cx.summarize(request).map_err(|e| {
            (
                format!(
                    "summarizer failed, {}: {}; nothing more committed in this run",
                    describe("not collapsing"),
                    e.message()
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
        // The host's summaries fit their budget, except that they never drop a written path or
        // the last request: a longer one is kept whole (cutting it would cut exactly those).
        let summary = summary.trim().to_string();
        let summary_text_tokens = self.cx.count_tokens(&summary);
        if summary_text_tokens > budget {
            self.report.note(format!(
                "summary of ids {first_id}…{last_id} is {} tokens, over its budget of {}: kept \
                 whole (every written path and the last request stay)",
                thousands(summary_text_tokens),
                thousands(budget)
            ));
        }
        let now = self.cx.now_ms;
        let mut collapse = match &previous {
            Some(p) => {
                Collapse {
                    first: p.first.clone(),
                    last: last_id.clone(),
                    count: p.count + ids.len(),
                    turns: p.turns + turn_idx.len(),
                    // Filled once the commit is sure: the summary message does not show them.
                    ids: IdList::default(),
                    summary,
                    merges: p.merges + 1,
                    committed_ms: now,
                    replaced_tokens: replaced,
                }
            }
            None => Collapse {
                first: first_id.clone(),
                last: last_id.clone(),
                count: ids.len(),
                turns: turn_idx.len(),
                ids: IdList::default(),
                summary,
                merges: 0,
                committed_ms: now,
                replaced_tokens: replaced,
            },
        };
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
        collapse.ids = match merge_into {
            Some(c) => {
                let mut all = std::mem::take(&mut self.collapses[c].collapse.ids);
                all.extend(ids);
                all
            }
            None => ids,
        };
        let saving = span_tokens + old_summary - new_summary;
        self.projected = self.projected.saturating_sub(saving);
        let detail = match &previous {
            Some(p) => format!(
                "{} into the summary of ids {}…{} ({} → {} tokens, budget {}; now {} messages)",
                describe("merged"),
                p.first,
                p.last,
                thousands(old_summary),
                thousands(new_summary),
                thousands(budget),
                collapse.count
            ),
            None => format!(
                "{} → summary message of {} tokens (budget {})",
                describe("collapsed"),
                thousands(new_summary),
                thousands(budget)
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
                applied.summary_tokens = Some(new_summary);
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
                    summary_tokens: Some(new_summary),
                });
                self.units.splice(span, [Unit::Collapsed(c)]);
            }
        }
        Ok(())
    }
}

/// `c` without its ids (see `commit_span`).
fn without_ids(c: &Collapse) -> Collapse {
    Collapse {
        first: c.first.clone(),
        last: c.last.clone(),
        count: c.count,
        turns: c.turns,
        ids: IdList::default(),
        summary: c.summary.clone(),
        merges: c.merges,
        committed_ms: c.committed_ms,
        replaced_tokens: c.replaced_tokens,
    }
}
