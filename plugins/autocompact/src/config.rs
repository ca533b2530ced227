//! The stage's `[stage.config]` and its defaults. Each field's `///` comment is the key's
//! description in `condense plugins --details` and docs/stages.md.

use crate::restore::DEFAULT_READ_TOOLS;
use condense_budget::BudgetConfig;
use serde::{Deserialize, Serialize};

/// One `pin` rule: exactly one of `tool` and `regex`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PinRule {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub regex: Option<String>,
}

/// The stage's `[stage.config]`. Its compact JSON, in declaration order, is hashed into the
/// state's `config_hash` (a change resets the circuit breaker): reordering the fields resets
/// every stored breaker once.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, condense_abi::StageConfig)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// false disables the stage (so does the host flag disable:autocompact, from
    /// CONDENSE_DISABLE_AUTOCOMPACT=1).
    pub enabled: bool,
    /// The threshold is the effective window (window - min(max output, 20,000)) minus
    /// this: 167,000 for a 200k window.
    pub buffer_tokens: usize,
    /// Optional: the threshold as this fraction of the effective window instead, lower or
    /// higher than the default, in 0.5..=0.98.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub threshold_pct: Option<f64>,
    /// API turns that must pass between two compactions (force:autocompact overrides).
    /// An API turn is one API round: an assistant response with the tool results that
    /// answer it, opened by the user prompt it answers when there is one (every model
    /// call of an autonomous stretch is one); condense messages do not count.
    pub min_turns_between: usize,
    /// Circuit breaker: after this many failed attempts in a row, stop trying for the
    /// session (a success or a config change resets it). >= 1.
    pub max_consecutive_failures: usize,
    /// The most the summary may take, never more than 1/4 of the effective window.
    pub summary_max_tokens: usize,
    /// How many of the most recently read files are given back after compacting (0: none).
    pub restore_files: usize,
    /// Each restored file is cut to this many tokens.
    pub restore_file_max_tokens: usize,
    /// Tool names whose calls with a file path read a file (editor view commands,
    /// `cat <path>` shell calls and writes count too).
    pub read_tools: Vec<String>,
    /// Content given back after compacting: [{ tool = "TodoWrite" }] (the latest call
    /// of the tool) or [{ regex = "IMPORTANT:.*" }] (matches in user text and tool
    /// results).
    pub pin: Vec<PinRule>,
    /// Tokens for all pinned items together.
    pub pin_budget_tokens: usize,
    /// Each pinned item is cut to this many tokens.
    pub pin_max_tokens: usize,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            enabled: true,
            buffer_tokens: BudgetConfig::DEFAULT_AUTOCOMPACT_BUFFER,
            threshold_pct: None,
            min_turns_between: 2,
            max_consecutive_failures: 3,
            summary_max_tokens: BudgetConfig::DEFAULT_SUMMARY_OUTPUT_CAP,
            restore_files: 5,
            restore_file_max_tokens: 5_000,
            read_tools: DEFAULT_READ_TOOLS.iter().map(|s| s.to_string()).collect(),
            pin: Vec::new(),
            pin_budget_tokens: 25_000,
            pin_max_tokens: 5_000,
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn the_hashed_json_keeps_the_order_stored_config_hashes_were_made_with() {
        let config = Config {
            threshold_pct: Some(0.85),
            read_tools: vec!["Read".into()],
            ..Config::default()
        };
        assert_eq!(
            serde_json::to_string(&config).unwrap(),
            r#"{"enabled":true,"buffer_tokens":13000,"threshold_pct":0.85,"min_turns_between":2,"max_consecutive_failures":3,"summary_max_tokens":20000,"restore_files":5,"restore_file_max_tokens":5000,"read_tools":["Read"],"pin":[],"pin_budget_tokens":25000,"pin_max_tokens":5000}"#
        );
        let unset = Config {
            read_tools: Vec::new(),
            ..Config::default()
        };
        assert_eq!(
            serde_json::to_string(&unset).unwrap(),
            r#"{"enabled":true,"buffer_tokens":13000,"min_turns_between":2,"max_consecutive_failures":3,"summary_max_tokens":20000,"restore_files":5,"restore_file_max_tokens":5000,"read_tools":[],"pin":[],"pin_budget_tokens":25000,"pin_max_tokens":5000}"#
        );
    }
}
