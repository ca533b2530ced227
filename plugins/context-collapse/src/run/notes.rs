//! The report's leading notes: the threshold arithmetic, the target and what was reached.

use super::Run;
use condense_text::{percent, plural, thousands};

impl<M: condense_model::ReadMessage> Run<'_, M> {
    /// The arithmetic and the outcome, in front of the other notes.
    pub(super) fn summary_notes(&mut self, reapplied: usize, committed: usize, before: usize) {
        let reserved = self.cx.context_window - self.effective;
        let mut notes = vec![format!(
            "{} tokens, {} projected with the collapses; commit at {} = {} of {} effective \
             ({} window - {} reserved for output), block at {} = {}",
            thousands(self.conversation_tokens),
            thousands(self.projected),
            thousands(self.commit_threshold),
            percent(self.config.commit_at),
            thousands(self.effective),
            thousands(self.cx.context_window),
            thousands(reserved),
            thousands(self.block_threshold),
            percent(self.config.block_at),
        )];
        if reapplied > 0 {
            notes.push(format!(
                "re-applied {} committed before this stage ran (window {}, max output {}): the \
                 same collapses give the same view on every run",
                plural(reapplied, "collapse", "collapses"),
                thousands(self.cx.context_window),
                thousands(self.cx.max_output_tokens),
            ));
        }
        let goal = self.goal.unwrap_or(self.commit_threshold);
        // Forced by the host: the note names the force as users know it from the docs.
        let why = if self.forced {
            "force:context-collapse: a tenth of the effective window below min(projection, \
             commit_at, window - output reserve)"
                .to_string()
        } else if goal < self.commit_threshold {
            format!(
                "the request fits only below {} (window - {} output reserve)",
                thousands(self.fit_limit),
                thousands(self.cx.output_reserve)
            )
        } else {
            "commit_at".to_string()
        };
        let spans = self
            .report
            .events
            .iter()
            .filter(|e| e.kind == "collapsed")
            .count();
        if committed > 0 {
            notes.push(format!(
                "committed {} in this run: {} → {} tokens projected, target {} ({why}); a run \
                 that commits goes on down to {} (a twentieth of the effective window below the \
                 target), so the next turns do not commit again at once",
                plural(spans, "span", "spans"),
                thousands(before),
                thousands(self.projected),
                thousands(goal),
                thousands(goal.saturating_sub(self.headroom())),
            ));
        } else if self.projected < goal {
            notes.push(format!(
                "below the target {} ({why}): no new collapse",
                thousands(goal)
            ));
        } else {
            notes.push(format!(
                "target {} ({why}) not reached: {} tokens projected, nothing committed",
                thousands(goal),
                thousands(self.projected)
            ));
        }
        notes.append(&mut self.report.notes);
        if self.projected >= self.block_threshold {
            notes.push(format!(
                "BLOCKING: still {} tokens, at or above block_at ({} = {} of the effective \
                 window), and nothing more could be collapsed ({}); the request may not fit",
                thousands(self.projected),
                thousands(self.block_threshold),
                percent(self.config.block_at),
                self.stopped
                    .as_deref()
                    .unwrap_or("no turn may be collapsed")
            ));
        }
        self.report.notes = notes;
    }
}
