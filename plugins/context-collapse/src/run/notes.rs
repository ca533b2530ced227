//! The report's leading notes: the threshold arithmetic and the outcome.

use super::Run;
use crate::FORCE_FLAG;
use condense_abi::text::plural;
use condense_turns::measure::{percent, thousands};

impl Run<'_> {
    /// The arithmetic and the outcome, in front of the other notes.
    pub(super) fn summary_notes(&mut self, reapplied: usize, committed: usize) {
        let reserved = self.host.context_window() - self.effective;
        let mut notes = vec![format!(
            "{} tokens, {} projected with the collapses; commit at {} = {} of {} effective \
             ({} window - {} reserved for output), block at {} = {}",
            thousands(self.conversation_tokens),
            thousands(self.projected),
            thousands(self.commit_threshold),
            percent(self.config.commit_at),
            thousands(self.effective),
            thousands(self.host.context_window()),
            thousands(reserved),
            thousands(self.block_threshold),
            percent(self.config.block_at),
        )];
        if self.forced {
            notes.push(format!(
                "{FORCE_FLAG}: committing as if above commit_at until only keep_recent_turns = {} turns remain",
                self.config.keep_recent_turns
            ));
        }
        if reapplied > 0 {
            notes.push(format!(
                "re-applied {}",
                plural(reapplied, "committed collapse", "committed collapses")
            ));
        }
        let spans = self
            .report
            .events
            .iter()
            .filter(|e| e.kind == "collapsed")
            .count();
        if committed > 0 {
            notes.push(format!(
                "committed {} in this run",
                plural(spans, "span", "spans")
            ));
        } else if !self.forced && self.projected < self.commit_threshold {
            notes.push("below commit_at: no new collapse".to_string());
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
