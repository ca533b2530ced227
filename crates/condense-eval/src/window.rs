//! The window a conversation is evaluated at.
//!
//! Unless a window is given, it is chosen per conversation so the request must lose `cut`
//! (0.85 by default) of its tokens: the *fit limit* (what the conversation may use: the window
//! less the output reserve) is `ceil((1 - cut) × tokens_before)`, and the output reserve (and
//! the model's maximum output) is an eighth of the window, so `window ≈ 8 × limit / 7`. Every
//! pipeline's `[model]` is set for that window ([`Window::apply`]), its `autocompact_buffer`
//! lowered when the window is too small for it.
//!
//! ```
//! use condense_eval::Window;
//! use condense_budget::BudgetConfig;
//!
//! let w = Window::for_cut(70_000, 0.85);
//! assert_eq!(w.limit(), 10_500);
//! assert_eq!((w.context_window, w.output_reserve), (12_000, 1_500));
//!
//! let mut budget = BudgetConfig::default();
//! w.apply(&mut budget).unwrap();
//! assert_eq!((budget.context_window, budget.max_output_tokens), (12_000, 1_500));
//! assert!(budget.autocompact_buffer < 12_000 - 1_500);
//! ```

use crate::EvalError;
use condense_budget::BudgetConfig;
use serde::Serialize;

/// A context window and its output reserve.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Window {
    pub context_window: usize,
    /// Also the model's maximum output.
    pub output_reserve: usize,
}

impl Window {
    /// The window that makes a conversation of `tokens_before` tokens lose `cut` of them.
    pub fn for_cut(tokens_before: usize, cut: f64) -> Window {
        let keep = (1.0 - cut).clamp(0.0, 1.0) * tokens_before as f64;
        // The epsilon keeps 0.15 × 1000 at 150 (floating point gives 150.00000000000003).
        let limit = ((keep - 1e-6).ceil().max(1.0)) as usize;
        let window = (limit * 8).div_ceil(7);
        Window {
            context_window: window,
            output_reserve: window - limit,
        }
    }

    /// A given window, an eighth of it reserved for the output.
    pub fn with_context_window(context_window: usize) -> Window {
        Window {
            context_window,
            output_reserve: context_window / 8,
        }
    }

    /// What the conversation may use: the window less the output reserve.
    pub fn limit(&self) -> usize {
        self.context_window - self.output_reserve
    }

    /// Sets a pipeline's `[model]` for this window: `context_window`, `max_output_tokens` and
    /// `output_reserve`; `autocompact_buffer` lowered if the window leaves no room for it.
    pub fn apply(&self, budget: &mut BudgetConfig) -> Result<(), EvalError> {
        budget.context_window = self.context_window;
        budget.max_output_tokens = self.output_reserve;
        budget.output_reserve = self.output_reserve;
        let reserved = budget.reserved_for_summary();
        if reserved.saturating_add(budget.autocompact_buffer) >= self.context_window {
            budget.autocompact_buffer = self
                .context_window
                .saturating_sub(reserved)
                .saturating_sub(1);
        }
        budget.validate().map_err(|e| {
            EvalError::Window(format!(
                "a {}-token window does not work: {e}",
                self.context_window
            ))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_limit_is_the_kept_share_rounded_up() {
        let w = Window::for_cut(1000, 0.85);
        assert_eq!(w.limit(), 150);
        let w = Window::for_cut(69_123, 0.85);
        assert_eq!(w.limit(), 10_369);
        assert!(w.output_reserve.abs_diff(w.context_window / 8) <= 1);
        assert_eq!(Window::for_cut(3, 0.99).limit(), 1);
    }

    #[test]
    fn tiny_windows_still_validate() {
        for tokens in [1, 10, 100, 10_000, 100_000, 2_000_000] {
            let mut b = BudgetConfig::default();
            Window::for_cut(tokens, 0.85).apply(&mut b).unwrap();
        }
        let mut b = BudgetConfig::default();
        assert!(Window::with_context_window(0).apply(&mut b).is_err());
        let mut b = BudgetConfig::default();
        Window::with_context_window(128_000).apply(&mut b).unwrap();
        assert_eq!(b.autocompact_buffer, 13_000);
    }
}
