//! The end of a run: the projected messages, the `reapplied` events, the orphan check, the
//! state to save and the report.

use super::{Found, Run, Unit};
use crate::state::State;
use crate::summary::summary_message;
use condense_abi::{Signal, StageEvent, StageReport};
use condense_model::duplicate::{folded_marker, pointed_to};
use condense_model::ids::IdSet;
use condense_model::{orphaned_tool_results, Block, Message, ReadMessage, Role};
use condense_text::{plural, thousands};
use std::collections::HashSet;

/// What a run ends with.
pub(crate) struct Finished {
    /// The projection, or `None` when it is the input itself (no collapse, or every one in
    /// place).
    pub messages: Option<Vec<Message>>,
    pub report: StageReport,
    /// Every collapse applied in this run, in conversation order: the state to save.
    pub state: State,
}

impl<M: ReadMessage> Run<'_, M> {
    /// The projected messages (`None` when the projection is the input itself: there is no
    /// collapse, since the turns partition the input, or every collapse is its summary message
    /// in place), the report, and the state to save.
    pub(crate) fn finish(mut self) -> Result<Finished, String> {
        let messages = self.messages;
        let summaries: Vec<Message> = self
            .collapses
            .iter()
            .map(|a| {
                let first = messages.get(a.range.start).map(ReadMessage::to_message);
                summary_message(&a.collapse, first.as_ref(), self.cx.format)
            })
            .collect();
        // A collapse is unchanged when what it replaces in the input (system messages aside) is
        // its summary message already.
        let unchanged: Vec<bool> = self
            .collapses
            .iter()
            .zip(&summaries)
            .map(|(a, summary)| {
                let mut replaced = messages[a.range.clone()]
                    .iter()
                    .filter(|m| m.role() != Role::System);
                a.found != Found::Span
                    && replaced.next().is_some_and(|m| m.is(summary))
                    && replaced.next().is_none()
            })
            .collect();
        // The projection is the input itself when every collapse is unchanged and alone in its
        // range (a run resumed from the previous output, or run on it, that commits nothing):
        // then it is not built, copied and compared, only reported.
        let identity = self.units.iter().all(|u| match u {
            Unit::Collapsed(c) => unchanged[*c] && self.collapses[*c].range.len() == 1,
            Unit::Turn(_) => true,
        });
        let project = !self.collapses.is_empty() && !identity;
        let mut out: Vec<Message> = if project {
            messages[..self.turns.leading_end]
                .iter()
                .map(ReadMessage::to_message)
                .collect()
        } else {
            Vec::new()
        };
        let mut freed = 0usize;
        let mut blocks_changed = 0usize;
        let mut reapplied = 0usize;
        for unit in &self.units {
            match unit {
                Unit::Turn(t) if project => out.extend(
                    messages[self.turns.turns[*t].range()]
                        .iter()
                        .map(ReadMessage::to_message),
                ),
                Unit::Turn(_) => {}
                Unit::Collapsed(c) => {
                    let applied = &self.collapses[*c];
                    if project {
                        out.push(summaries[*c].clone());
                        out.extend(
                            messages[applied.range.clone()]
                                .iter()
                                .filter(|m| m.role() == Role::System)
                                .map(ReadMessage::to_message),
                        );
                    }
                    let summary = self.summary_tokens(&applied.collapse);
                    freed += applied.input_tokens.saturating_sub(summary);
                    if !unchanged[*c] {
                        blocks_changed += messages[applied.range.clone()]
                            .iter()
                            .filter(|m| m.role() != Role::System)
                            .map(|m| m.block_count())
                            .sum::<usize>();
                    }
                    if let Some((prior, prior_tokens)) = &applied.prior {
                        reapplied += 1;
                        let prior_summary = self.summary_tokens(prior);
                        let how = match applied.found {
                            Found::Span => "",
                            Found::SummaryMessage => {
                                " (its summary message was already in the input)"
                            }
                            Found::Adopted => {
                                " (a summary message found without a record, adopted)"
                            }
                        };
                        self.report.events.push(StageEvent {
                            kind: "reapplied".into(),
                            message_id: prior.first.clone(),
                            detail: format!(
                                "{} messages (ids {}…{}, {} turns, {} tokens) → summary message of {} tokens{how}",
                                prior.count,
                                prior.first,
                                prior.last,
                                prior.turns,
                                thousands(*prior_tokens),
                                thousands(prior_summary)
                            ),
                            tokens: prior_tokens.saturating_sub(prior_summary),
                        });
                    }
                }
            }
        }
        let pointers = if project {
            fold_dangling_duplicates(&mut out)
        } else {
            0
        };
        if pointers > 0 {
            self.report.note(format!(
                "{} pointed at results folded into a summary: {} so now",
                plural(pointers, "duplicate marker", "duplicate markers"),
                if pointers == 1 { "it says" } else { "they say" }
            ));
        }
        // Events in conversation order: re-applied first within a span, then the commits.
        self.report.events.sort_by_key(|e| {
            let pos = self
                .collapses
                .iter()
                .position(|c| c.collapse.first == e.message_id)
                .unwrap_or(usize::MAX);
            (pos, e.kind != "reapplied")
        });

        let introduced: Vec<String> = if project {
            let input_orphans: HashSet<(&str, &str)> = orphaned_tool_results(messages)
                .into_iter()
                .map(|(i, t)| (messages[i].id(), t))
                .collect();
            orphaned_tool_results(&out)
                .into_iter()
                .map(|(i, t)| (out[i].id.as_str(), t))
                .filter(|o| !input_orphans.contains(o))
                .map(|(m, t)| format!("{t} in {m}"))
                .collect()
        } else {
            Vec::new()
        };
        if !introduced.is_empty() {
            return Err(format!(
                "internal error, the projection would orphan tool results ({}); input left unchanged",
                introduced.join(", ")
            ));
        }

        let committed = self.collapses.iter().filter(|c| c.fresh).count();
        debug_assert_eq!(
            self.report.events.iter().map(|e| e.tokens).sum::<usize>(),
            freed,
            "events add up to tokens_freed"
        );
        self.summary_notes(reapplied, committed, self.before_commits);
        if !self.collapses.is_empty() {
            self.report.raise(Signal::CollapseActive);
        }
        // Moved, not cloned: a collapse holds the id of every message it stands for.
        let state = State {
            collapses: std::mem::take(&mut self.collapses)
                .into_iter()
                .map(|c| c.collapse)
                .collect(),
        };
        self.report.blocks_changed = blocks_changed;
        self.report.tokens_freed = (freed > 0).then_some(freed);
        Ok(Finished {
            messages: project.then_some(out),
            report: self.report,
            state,
        })
    }
}

/// Makes every duplicate marker of `out` whose kept copy is no longer in it say so
/// (`condense_model::duplicate`), and returns how many it changed.
///
/// snip keeps the first copy of a repeated result and points the later ones back at it; a
/// span folded into a summary takes the first copy with it, and the pointers after the span
/// then name a result the agent cannot see (all 123 of them in a first run over a 1M-token
/// session). Each says instead that the content was folded into a summary. The rule depends on
/// `out` alone, so a re-applied projection writes the same markers.
fn fold_dangling_duplicates(out: &mut [Message]) -> usize {
    let present: IdSet<String> = out
        .iter()
        .flat_map(|m| &m.content.blocks)
        .filter_map(|b| match b {
            Block::ToolResult(r) => Some(r.tool_use_id.clone()),
            _ => None,
        })
        .collect();
    let mut changed = 0;
    for block in out.iter_mut().flat_map(|m| &mut m.content.blocks) {
        let Block::ToolResult(result) = block else {
            continue;
        };
        // A marker is the whole of its result: one text block.
        let [Block::Text(text)] = result.content.blocks.as_mut_slice() else {
            continue;
        };
        let Some((_, kept)) = pointed_to(&text.text) else {
            continue;
        };
        if !present.contains(kept) {
            text.text = folded_marker(kept);
            changed += 1;
        }
    }
    changed
}
