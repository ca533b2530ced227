//! The stage's `[stage.config]` and its defaults.

use crate::restore::DEFAULT_READ_TOOLS;
use condense_tokens::BudgetConfig;
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

/// The stage's `[stage.config]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    pub enabled: bool,
    pub buffer_tokens: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub threshold_pct: Option<f64>,
    pub min_turns_between: usize,
    pub max_consecutive_failures: usize,
    pub summary_max_tokens: usize,
    pub restore_files: usize,
    pub restore_file_max_tokens: usize,
    pub read_tools: Vec<String>,
    pub pin: Vec<PinRule>,
    pub pin_budget_tokens: usize,
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
