//! The stage's `[stage.config]` and its defaults.

use serde::{Deserialize, Serialize};

/// The stage's `[stage.config]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// Fraction of the effective window from which new collapses are committed.
    pub commit_at: f64,
    /// Fraction of the effective window from which collapsing is mandatory.
    pub block_at: f64,
    /// The most recent API turns (API rounds: model calls with their results), never
    /// collapsed.
    pub keep_recent_turns: usize,
    /// The most API turns (API rounds) one commit adds to a summary.
    pub turns_per_span: usize,
    /// A summary's budget as a fraction of the tokens it stands for.
    pub summary_ratio: f64,
    /// The smallest budget a summary gets, in tokens.
    pub summary_min_tokens: usize,
    /// The largest budget a summary gets, as a fraction of the effective window.
    pub summary_window_share: f64,
    /// The largest budget a summary gets, in tokens, whatever the window.
    pub summary_max_tokens: usize,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            commit_at: 0.90,
            block_at: 0.95,
            keep_recent_turns: 4,
            turns_per_span: 4,
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
}
