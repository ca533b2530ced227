//! The stage's `[stage.config]` and its defaults. Each field's `///` comment is the key's
//! description in `condense plugins --details` and docs/stages.md.

use serde::{Deserialize, Serialize};

/// The stage's `[stage.config]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, condense_abi::StageConfig)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// Fraction of the effective window (window - min(max output, 20,000)) from which new
    /// collapses are committed, in (0, 1].
    pub commit_at: f64,
    /// Fraction of the effective window from which collapsing is mandatory; a count still
    /// above it once nothing more may be collapsed is reported. commit_at <= block_at <= 1.
    pub block_at: f64,
    /// The most recent API turns, never collapsed (>= 1). An API turn is one API round:
    /// an assistant response (consecutive assistant messages) with the tool results that
    /// answer it, opened by the user prompt it answers when there is one; an autonomous
    /// stretch of tool calls is one turn per call. 4 keeps the agent's last few calls and
    /// their results verbatim.
    pub keep_recent_turns: usize,
    /// The most API turns (API rounds, see keep_recent_turns) one commit adds to a
    /// summary (>= 1). A span grows turn by turn only until its commit is expected to
    /// bring the projection below the landing point (a twentieth of the effective window
    /// below the commit_at target), so commits free about what is needed; a run that
    /// commits goes on, span after span, down to that point.
    pub turns_per_span: usize,
    /// A backlog (more than this many tokens to free, as in a first run over a long
    /// session) is folded in spans of up to this many tokens of turns (more for a backlog
    /// over backlog_commits times this), past turns_per_span: one summarizer call per
    /// 16,000 tokens instead of one per 4 turns. What is left after the backlog is
    /// committed turns_per_span at a time, so the last commits stay right-sized. 0: spans
    /// never pass turns_per_span.
    pub backlog_span_tokens: usize,
    /// A backlog much larger than backlog_span_tokens is folded in about this many spans
    /// (each at least backlog_span_tokens and at most half the effective window), so a
    /// first run over a session many windows long makes about as many summarizer calls,
    /// and merges into the running summary as often, as one a few windows long. 0: spans
    /// of backlog_span_tokens whatever the backlog.
    pub backlog_commits: usize,
    /// A summary's budget as a fraction of the tokens it stands for, in (0, 1]; 0.15: a
    /// summary of 40,000 tokens of turns may take 6,000.
    pub summary_ratio: f64,
    /// The smallest budget a summary gets, in tokens (>= 1).
    pub summary_min_tokens: usize,
    /// The largest budget a summary gets, as a fraction of the effective window, in
    /// (0, 1]. When one commit must free more than needed (one huge turn), the summary
    /// may use the room left below the target up to this cap.
    pub summary_window_share: f64,
    /// The largest budget a summary gets, in tokens, whatever the window (>= 1). The
    /// host's summarizer keeps every written path and the last request even beyond it.
    pub summary_max_tokens: usize,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            commit_at: 0.90,
            block_at: 0.95,
            keep_recent_turns: 4,
            turns_per_span: 4,
            backlog_span_tokens: 16_000,
            backlog_commits: 16,
            summary_ratio: 0.15,
            summary_min_tokens: 1_000,
            summary_window_share: 0.20,
            summary_max_tokens: 20_000,
        }
    }
}

impl Config {
    /// The budget of a summary standing for `replaced` tokens, in an `effective`-token window:
    /// `summary_ratio × replaced`, at least `summary_min_tokens`, at most
    /// `min(summary_window_share × effective, summary_max_tokens)` (the cap wins over the
    /// minimum in a tiny window).
    pub fn summary_budget(&self, replaced: usize, effective: usize) -> usize {
        let scaled = (replaced as f64 * self.summary_ratio).ceil() as usize;
        scaled
            .max(self.summary_min_tokens)
            .min(self.summary_cap(effective))
    }

    /// The tokens a backlog span may grow to when `backlog` tokens are to be freed in an
    /// `effective`-token window: `backlog / backlog_commits`, at least `backlog_span_tokens`,
    /// at most half the window (unless that is below `backlog_span_tokens`); 0 when spans
    /// never pass `turns_per_span`.
    pub fn backlog_span(&self, backlog: usize, effective: usize) -> usize {
        let floor = self.backlog_span_tokens;
        match self.backlog_commits {
            _ if floor == 0 => 0,
            0 => floor,
            k => (backlog / k).min(effective / 2).max(floor),
        }
    }

    /// `min(summary_window_share × effective, summary_max_tokens)`, at least 1.
    pub fn summary_cap(&self, effective: usize) -> usize {
        ((effective as f64 * self.summary_window_share) as usize)
            .min(self.summary_max_tokens)
            .max(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn budgets_scale_with_what_is_replaced_and_with_the_window() {
        let c = Config::default();
        // 15% of what it replaces...
        assert_eq!(c.summary_budget(40_000, 180_000), 6_000);
        // ... at least 1,000 ...
        assert_eq!(c.summary_budget(2_000, 180_000), 1_000);
        // ... at most 20% of the effective window ...
        assert_eq!(c.summary_budget(40_000, 18_000), 3_600);
        // ... and at most 20,000 tokens.
        assert_eq!(c.summary_budget(1_000_000, 900_000), 20_000);
        // In a tiny window the cap wins over the minimum.
        assert_eq!(c.summary_budget(2_000, 4_000), 800);
    }

    #[test]
    fn a_backlog_span_grows_with_the_backlog_between_its_floor_and_half_the_window() {
        let c = Config::default();
        // A backlog under 16 x 16,000: spans of 16,000, as without backlog_commits.
        assert_eq!(c.backlog_span(200_000, 180_000), 16_000);
        // Sixteen spans of a larger one...
        assert_eq!(c.backlog_span(1_000_000, 180_000), 62_500);
        // ... each at most half the window, but never under the floor.
        assert_eq!(c.backlog_span(4_000_000, 180_000), 90_000);
        assert_eq!(c.backlog_span(4_000_000, 20_000), 16_000);
        let off = |commits, span| Config {
            backlog_commits: commits,
            backlog_span_tokens: span,
            ..Config::default()
        };
        assert_eq!(off(0, 16_000).backlog_span(4_000_000, 180_000), 16_000);
        assert_eq!(off(16, 0).backlog_span(4_000_000, 180_000), 0);
    }
}
