//! A budget for a request that says how much the model may write: the APIs refuse a prompt
//! that fits the window but not beside the request's output limit (Anthropic: "input length
//! and `max_tokens` exceed context limit"), so what the limit asks beyond the budget's reserve
//! is left free too ([`BudgetConfig::leaving_output`]).

use crate::BudgetConfig;

/// The room an output limit asks beyond the reserve is counted in steps of this many tokens,
/// rounded up: a client that sizes its limit to each prompt then meets a few budgets, not one
/// per request (a host that keeps something per budget keeps a few).
pub const OUTPUT_ROOM_STEP: usize = 8_192;

impl BudgetConfig {
    /// This budget for a request that lets the model write up to `limit` tokens, and the room
    /// left for it beyond the output reserve (0: none needed, or none possible). The room,
    /// rounded up to [`OUTPUT_ROOM_STEP`], counts as fixed tokens, so every threshold leaves it
    /// free, and the reserve plus the room is `max_output_tokens` when that is more than the
    /// budget's own. A room the window cannot hold leaves the budget as it is: the request is
    /// then the upstream's to refuse, as it would be without condense.
    pub fn leaving_output(&self, limit: usize) -> (BudgetConfig, usize) {
        let reserve = self.reserve();
        let room = limit
            .saturating_sub(reserve)
            .div_ceil(OUTPUT_ROOM_STEP)
            .saturating_mul(OUTPUT_ROOM_STEP);
        if room == 0 {
            return (self.clone(), 0);
        }
        let mut with_room = self.clone();
        with_room.fixed_tokens = with_room.fixed_tokens.saturating_add(room);
        with_room.max_output_tokens = with_room.max_output_tokens.max(reserve + room);
        match with_room.validate() {
            Ok(()) => (with_room, room),
            Err(_) => (self.clone(), 0),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A limit within the reserve changes nothing; one past it is left free as fixed tokens,
    /// in whole steps; one the window cannot leave free changes nothing.
    #[test]
    fn an_output_limit_past_the_reserve_is_left_free() {
        let base = BudgetConfig::default();
        let with = |window, limit| {
            let config = BudgetConfig {
                context_window: window,
                ..base.clone()
            };
            let (b, room) = config.leaving_output(limit);
            (b.fixed_tokens, b.reserve(), b.max_output_tokens, room)
        };
        assert_eq!(with(200_000, 16_000), (0, 20_000, 32_000, 0));
        // 4,000 past the reserve: one step, within the budget's own output size.
        assert_eq!(with(200_000, 24_000), (8_192, 20_000, 32_000, 8_192));
        // 44,000 past it: 6 steps.
        assert_eq!(with(200_000, 64_000), (49_152, 20_000, 69_152, 49_152));
        assert_eq!(
            with(1_000_000, 128_000),
            (114_688, 20_000, 134_688, 114_688)
        );
        assert_eq!(with(200_000, 500_000), (0, 20_000, 32_000, 0));
        // The thresholds move down by the room.
        let (left, _) = base.leaving_output(64_000);
        assert_eq!(left.autocompact_threshold(), base.autocompact_threshold());
        let budget = crate::Budget::compute(&left, 0, 120_000);
        assert_eq!(budget.used, 120_000 + 49_152);
    }
}
