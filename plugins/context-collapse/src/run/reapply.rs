//! Re-applying the committed collapses: finding each one's span (or its summary message) in
//! the input, adopting summary messages found without a record, and laying out the units.

use super::{Applied, Found, Run, Unit};
use crate::state::Collapse;
use crate::summary::{adopt, is_summary_message};
use crate::ID_PREFIX;
use condense_model::id_list::IdRef;
use condense_model::ids::{id_map, IdMap};
use condense_model::{ReadMessage, Role};
use condense_text::plural;
use std::collections::BTreeMap;
use std::ops::Range;

impl<M: ReadMessage> Run<'_, M> {
    /// Whether `end` closes a turn: the messages from `end` to the end of the turn holding
    /// `end - 1` are all system messages. Returns that turn's end.
    fn turn_end_at(&self, end: usize) -> Option<usize> {
        let t = self.turns.turn_of(end.checked_sub(1)?)?;
        let turn_end = self.turns.turns[t].end;
        self.messages[end..turn_end]
            .iter()
            .all(|m| m.role() == Role::System)
            .then_some(turn_end)
    }

    /// Where a stored collapse is in the input: the whole-turn range it covers and how.
    fn locate(&self, c: &Collapse, index: &IdMap<&str, usize>) -> Option<(Range<usize>, Found)> {
        let starts_turn = |p: usize| self.turns.turns.iter().any(|t| t.start == p);
        if let Some(&p) = c.ids.first().and_then(|id| index.get(id.as_ref())) {
            if starts_turn(p) {
                if let Some(end) = self
                    .match_ids(p, c.ids.iter())
                    .and_then(|q| self.turn_end_at(q))
                {
                    return Some((p..end, Found::Span));
                }
            }
        }
        // The summary message itself (the stage's output read back), possibly followed by the
        // messages of spans merged into it since.
        let summary_id = format!("{ID_PREFIX}{}", c.first);
        let &p = index.get(summary_id.as_str())?;
        if !(is_summary_message(&self.messages[p]) && starts_turn(p)) {
            return None;
        }
        let next = (p + 1..self.messages.len()).find(|&i| self.messages[i].role() != Role::System);
        if let Some(k) = next.and_then(|q| c.ids.position(self.messages[q].id())) {
            if let Some(end) = self.match_ids(p + 1, c.ids.iter().skip(k)) {
                if let Some(end) = self.turn_end_at(end) {
                    return Some((p..end, Found::SummaryMessage));
                }
            }
        }
        let end = self.turn_end_at(p + 1)?;
        Some((p..end, Found::SummaryMessage))
    }

    /// Where `ids` end when they are the non-system messages from `from` on, in order.
    fn match_ids<'i>(&self, from: usize, ids: impl Iterator<Item = IdRef<'i>>) -> Option<usize> {
        let mut q = from;
        for id in ids {
            // The next message that is not a system message must be this one.
            loop {
                let m = self.messages.get(q)?;
                q += 1;
                if m.role() != Role::System {
                    if !id.is(m.id()) {
                        return None;
                    }
                    break;
                }
            }
        }
        Some(q)
    }

    /// Re-applies the stored collapses, adopts summary messages without a record, and lays out
    /// the units.
    pub(crate) fn plan(&mut self) {
        // Sized once: growing rehashes every id so far at each doubling. Looked up only, so
        // the per-process seed of the ids' hasher changes nothing.
        let mut index: IdMap<&str, usize> = id_map(self.messages.len());
        for (i, m) in self.messages.iter().enumerate() {
            index.entry(m.id()).or_insert(i);
        }
        let mut located: BTreeMap<usize, (Range<usize>, Collapse, Found)> = BTreeMap::new();
        let mut dropped = Vec::new();
        for c in std::mem::take(&mut self.stored.collapses) {
            match self.locate(&c, &index) {
                Some((range, found))
                    if !located
                        .values()
                        .any(|(r, _, _)| r.start < range.end && range.start < r.end) =>
                {
                    located.insert(range.start, (range, c, found));
                }
                _ => dropped.push(c.first.clone()),
            }
        }
        if !dropped.is_empty() {
            self.report.note(format!(
                "dropped {} whose messages are no longer in the conversation (first ids: {})",
                plural(dropped.len(), "collapse", "collapses"),
                dropped.join(", ")
            ));
        }

        let mut t = 0;
        while t < self.turns.turns.len() {
            let turn = self.turns.turns[t];
            if let Some((range, collapse, found)) = located.remove(&turn.start) {
                while t < self.turns.turns.len() && self.turns.turns[t].start < range.end {
                    t += 1;
                }
                self.push_collapsed(collapse, range, found);
                continue;
            }
            let members: Vec<usize> = turn.members(self.messages).collect();
            if let [only] = members.as_slice() {
                let m = &self.messages[*only];
                if is_summary_message(m) {
                    let collapse = adopt(m, self.cx.now_ms);
                    self.push_collapsed(collapse, turn.range(), Found::Adopted);
                    t += 1;
                    continue;
                }
            }
            self.units.push(Unit::Turn(t));
            t += 1;
        }
        for c in &self.collapses {
            self.projected = self.projected.saturating_sub(
                c.input_tokens
                    .saturating_sub(self.summary_tokens(&c.collapse)),
            );
        }
    }

    fn push_collapsed(&mut self, collapse: Collapse, range: Range<usize>, found: Found) {
        let input_tokens = self.tokens_of_range(range.clone());
        self.units.push(Unit::Collapsed(self.collapses.len()));
        self.collapses.push(Applied {
            prior: Some((collapse.without_ids(), input_tokens)),
            collapse,
            range,
            input_tokens,
            found,
            fresh: false,
            summary_tokens: None,
        });
    }
}
