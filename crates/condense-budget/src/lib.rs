//! Pure token-budget arithmetic: what the window holds, what a message and an image cost
//! beyond the text a tokenizer counts, and the fractions stages turn into thresholds.
//!
//! No tokenizer lives here (those are `condense-tokens`, the host's): a stage depends on this
//! crate for the numbers and counts text only through the host, so "plugins count only through
//! the host" holds by the crate graph.
//!
//! - [`BudgetConfig`] / [`Budget`] / [`Level`]: how much of the window is used, the level
//!   (normal, elevated, warning, critical) and the autocompact threshold, with the seeds'
//!   defaults (the `[model]` table of a pipeline file).
//! - [`BudgetConfig::leaving_output`]: the budget of a request whose output limit asks for more
//!   than the reserve (the APIs refuse a prompt that does not fit beside it).
//! - [`image`]: an image's token estimate from the dimensions in its first bytes.
//! - [`MESSAGE_OVERHEAD_TOKENS`]: what every message adds for its role and separators.
//! - [`fraction_of`]: a fraction of a window, rounded the way thresholds need.
//!
//! ```
//! use condense_budget::{fraction_of, Budget, BudgetConfig, Level};
//!
//! let config = BudgetConfig::default();
//! assert_eq!(config.autocompact_threshold(), 167_000);
//! let budget = Budget::compute(&config, 10_000, 150_000);
//! assert_eq!(budget.level, Level::Elevated);
//! assert!(!budget.over_autocompact_threshold());
//! assert_eq!(fraction_of(0.9, config.effective_window()), 162_000);
//! assert_eq!(condense_budget::image::tokens_for_size(200, 200), 54);
//! ```
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used))]

pub mod image;
mod output_limit;
mod window;

pub use output_limit::OUTPUT_ROOM_STEP;
pub use window::{Budget, BudgetConfig, BudgetConfigError, Level};

/// Tokens added to every message (and to a system prompt) for its role and the separators
/// around it. OpenAI's chat format costs 3 per message plus the role name (1 for all roles);
/// Goose and the OpenAI cookbook use the same figure.
pub const MESSAGE_OVERHEAD_TOKENS: usize = 4;

/// `fraction × whole`, rounded up to a whole token (a product within 1e-6 of an integer counts
/// as that integer, so `0.9 × 56,000` is 50,400, not 50,401).
pub fn fraction_of(fraction: f64, whole: usize) -> usize {
    let x = fraction * whole as f64;
    let nearest = x.round();
    let t = if (x - nearest).abs() < 1e-6 {
        nearest
    } else {
        x.ceil()
    };
    if t <= 0.0 {
        0
    } else {
        t as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fractions_of_a_window() {
        assert_eq!(fraction_of(0.9, 56_000), 50_400);
        assert_eq!(fraction_of(0.95, 180_000), 171_000);
        assert_eq!(fraction_of(0.5, 3), 2);
        assert_eq!(fraction_of(0.0, 100), 0);
        assert_eq!(fraction_of(-0.5, 100), 0);
    }
}
