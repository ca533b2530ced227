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
    /// API turns (API rounds) per committed span.
    pub turns_per_span: usize,
    /// The most a span's summary may take, in tokens.
    pub summary_max_tokens: usize,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            commit_at: 0.90,
            block_at: 0.95,
            keep_recent_turns: 4,
            turns_per_span: 4,
            summary_max_tokens: 2_000,
        }
    }
}
