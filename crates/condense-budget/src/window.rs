//! The context budget: how much of the window a conversation uses, and when to compact.
//!
//! The numbers follow the seeds (Claude Code's `calculateTokenBudget`, `getEffectiveContextWindowSize`
//! and `getAutoCompactThreshold`); every one of them is a field of [`BudgetConfig`].
//!
//! One output reserve serves everything: what the request keeps free for the model's next
//! response (`available`, the fit limit of `compress --fit`, `Host::output_reserve`) is what the
//! effective window keeps free for a summary.
//!
//! ```text
//! output_reserve        = min(max_output_tokens, output_reserve, summary_output_cap,
//!                             context_window / 4)                     (see BudgetConfig::reserve)
//! fixed                 = system prompt + tools + system messages + fixed_tokens
//! available             = context_window - fixed - messages - output_reserve   (may be < 0)
//! used                  = fixed + messages;  utilization = used / context_window
//! effective_window      = context_window - output_reserve
//! autocompact_threshold = effective_window - autocompact_buffer   (buffer scaled, see below)
//! ```
//!
//! For a 200k window that gives an output reserve of 20,000, an effective window of 180,000 and
//! a threshold of 167,000 when the model may write 20k tokens or more; 192,000 and 179,000 when
//! it is capped at 8k. Claude Code only meets windows of 200k and more; a small window (a local
//! model's 32k) where the reserve and the buffer leave no threshold scales instead of failing:
//! the reserve becomes at most a quarter of the window (32,000: 8,000), and a buffer that still
//! leaves no threshold is scaled to Claude Code's proportion, 13,000 of a 180,000 effective
//! window (7.2%). [`BudgetConfig::scaling_notes`] says so. Windows with room keep the numbers
//! they had (a 40,000 window reserves 20,000), so nothing tuned for them moves.

use condense_text::thousands;
use serde::{Deserialize, Serialize};

/// Budget settings, all in tokens except the `*_pct` fractions of the window. Fits a TOML
/// `[model]` table; missing keys take the defaults, unknown keys are an error.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct BudgetConfig {
    /// The model's context window.
    pub context_window: usize,
    /// The most the model may write in one response.
    pub max_output_tokens: usize,
    /// Tokens every request carries that the conversation file does not hold: the agent's
    /// system prompt and tool definitions when the file lacks them (a Claude Code session, a
    /// Codex rollout without its tools). Counted as fixed in every budget, so thresholds fire
    /// when the real request would reach them.
    pub fixed_tokens: usize,
    /// The most the request keeps free for the next response (and the effective window for a
    /// summary); the reserve in use is [`BudgetConfig::reserve`], which this caps.
    pub output_reserve: usize,
    /// The most a summary may take (Claude Code's `MAX_OUTPUT_TOKENS_FOR_SUMMARY`, based on the
    /// p99.99 summary of 17,387 tokens).
    pub summary_output_cap: usize,
    /// Distance of the autocompact threshold below the effective window
    /// (`AUTOCOMPACT_BUFFER_TOKENS`).
    pub autocompact_buffer: usize,
    /// Utilization from which the level is [`Level::Warning`].
    pub warning_pct: f64,
    /// Utilization from which the level is [`Level::Critical`].
    pub critical_pct: f64,
    /// Utilization below which the level is [`Level::Normal`] (from it: [`Level::Elevated`]).
    pub normal_below_pct: f64,
}

impl BudgetConfig {
    /// Default context window: 200k (Claude models).
    pub const DEFAULT_CONTEXT_WINDOW: usize = 200_000;
    /// Default maximum output per response.
    pub const DEFAULT_MAX_OUTPUT_TOKENS: usize = 32_000;
    /// Default cap of the output reserve: the summary cap, so that at 200k the reserve is Claude
    /// Code's 20,000 (`reservedTokensForSummary`).
    pub const DEFAULT_OUTPUT_RESERVE: usize = 20_000;
    /// The reserve is at most this share of the window (a quarter), so small windows work.
    pub const MAX_RESERVE_SHARE_DIVISOR: usize = 4;
    /// Default `MAX_OUTPUT_TOKENS_FOR_SUMMARY`.
    pub const DEFAULT_SUMMARY_OUTPUT_CAP: usize = 20_000;
    /// Default `AUTOCOMPACT_BUFFER_TOKENS`.
    pub const DEFAULT_AUTOCOMPACT_BUFFER: usize = 13_000;
    /// Default warning level.
    pub const DEFAULT_WARNING_PCT: f64 = 0.85;
    /// Default critical level.
    pub const DEFAULT_CRITICAL_PCT: f64 = 0.95;
    /// Default end of the normal level.
    pub const DEFAULT_NORMAL_BELOW_PCT: f64 = 0.70;

    /// Checks that the numbers make sense together.
    pub fn validate(&self) -> Result<(), BudgetConfigError> {
        if self.context_window == 0 {
            return Err(BudgetConfigError::ZeroWindow);
        }
        let reserve = self.reserve();
        if reserve >= self.context_window {
            return Err(BudgetConfigError::ReserveTooLarge {
                output_reserve: reserve,
                context_window: self.context_window,
            });
        }
        if self.fixed_tokens.saturating_add(reserve) >= self.context_window {
            return Err(BudgetConfigError::FixedTooLarge {
                fixed_tokens: self.fixed_tokens,
                output_reserve: reserve,
                context_window: self.context_window,
            });
        }
        let buffer = self.buffer();
        if reserve.saturating_add(buffer) >= self.context_window {
            return Err(BudgetConfigError::NoRoomBeforeThreshold {
                reserved: reserve,
                autocompact_buffer: buffer,
                context_window: self.context_window,
            });
        }
        for (name, value) in [
            ("normal_below_pct", self.normal_below_pct),
            ("warning_pct", self.warning_pct),
            ("critical_pct", self.critical_pct),
        ] {
            if !(value.is_finite() && value > 0.0 && value <= 1.0) {
                return Err(BudgetConfigError::BadFraction { name, value });
            }
        }
        if !(self.normal_below_pct <= self.warning_pct && self.warning_pct <= self.critical_pct) {
            return Err(BudgetConfigError::LevelsOutOfOrder {
                normal_below_pct: self.normal_below_pct,
                warning_pct: self.warning_pct,
                critical_pct: self.critical_pct,
            });
        }
        Ok(())
    }

    /// The output reserve: `min(max_output_tokens, output_reserve, summary_output_cap)`, and
    /// at most a quarter of the window when that and the autocompact buffer leave no threshold
    /// (a small window). The request keeps it free for the next response, and the effective
    /// window for a summary (one number for both, as Claude Code's effective window does).
    /// Windows that had room keep Claude Code's numbers exactly.
    pub fn reserve(&self) -> usize {
        let unscaled = self.unscaled_reserve();
        if unscaled.saturating_add(self.autocompact_buffer) < self.context_window {
            unscaled
        } else {
            unscaled.min(self.context_window / Self::MAX_RESERVE_SHARE_DIVISOR)
        }
    }

    /// `min(max_output_tokens, output_reserve, summary_output_cap)`.
    fn unscaled_reserve(&self) -> usize {
        self.max_output_tokens
            .min(self.output_reserve)
            .min(self.summary_output_cap)
    }

    /// What the effective window keeps free for a summary: [`BudgetConfig::reserve`].
    pub fn reserved_for_summary(&self) -> usize {
        self.reserve()
    }

    /// The autocompact buffer in use: `autocompact_buffer`, unless the window is too small to
    /// leave a threshold above it; then Claude Code's proportion of the effective window
    /// (13,000 of 180,000), at least 1.
    pub fn buffer(&self) -> usize {
        let effective = self.effective_window();
        if self.autocompact_buffer < effective {
            return self.autocompact_buffer;
        }
        let scaled = (effective as u128 * Self::DEFAULT_AUTOCOMPACT_BUFFER as u128
            / REFERENCE_EFFECTIVE_WINDOW as u128) as usize;
        scaled.max(1).min(effective.saturating_sub(1))
    }

    /// `context_window - reserve()` (0 if that would be negative).
    pub fn effective_window(&self) -> usize {
        self.context_window.saturating_sub(self.reserve())
    }

    /// `effective_window() - buffer()` (0 if that would be negative).
    pub fn autocompact_threshold(&self) -> usize {
        self.effective_window().saturating_sub(self.buffer())
    }

    /// What was scaled to fit a small window, in words, for reports: "window 32,000: output
    /// reserve scaled to 8,000 (a quarter of the window)". Empty when nothing was.
    pub fn scaling_notes(&self) -> Vec<String> {
        let mut notes = Vec::new();
        let unscaled = self.unscaled_reserve();
        let reserve = self.reserve();
        if reserve < unscaled {
            notes.push(format!(
                "window {}: output reserve scaled to {} (a quarter of the window; {} otherwise)",
                thousands(self.context_window),
                thousands(reserve),
                thousands(unscaled)
            ));
        }
        let buffer = self.buffer();
        if buffer < self.autocompact_buffer {
            notes.push(format!(
                "window {}: autocompact buffer scaled to {} ({} leaves no threshold in a {} \
                 effective window)",
                thousands(self.context_window),
                thousands(buffer),
                thousands(self.autocompact_buffer),
                thousands(self.effective_window())
            ));
        }
        notes
    }

    /// The level of a utilization (`used / context_window`).
    pub fn level(&self, utilization: f64) -> Level {
        if utilization >= self.critical_pct {
            Level::Critical
        } else if utilization >= self.warning_pct {
            Level::Warning
        } else if utilization >= self.normal_below_pct {
            Level::Elevated
        } else {
            Level::Normal
        }
    }
}

/// The effective window Claude Code's 13,000-token buffer was sized for (200,000 - 20,000).
const REFERENCE_EFFECTIVE_WINDOW: usize = 180_000;

impl Default for BudgetConfig {
    fn default() -> Self {
        BudgetConfig {
            context_window: Self::DEFAULT_CONTEXT_WINDOW,
            max_output_tokens: Self::DEFAULT_MAX_OUTPUT_TOKENS,
            fixed_tokens: 0,
            output_reserve: Self::DEFAULT_OUTPUT_RESERVE,
            summary_output_cap: Self::DEFAULT_SUMMARY_OUTPUT_CAP,
            autocompact_buffer: Self::DEFAULT_AUTOCOMPACT_BUFFER,
            warning_pct: Self::DEFAULT_WARNING_PCT,
            critical_pct: Self::DEFAULT_CRITICAL_PCT,
            normal_below_pct: Self::DEFAULT_NORMAL_BELOW_PCT,
        }
    }
}

/// Why a [`BudgetConfig`] is unusable.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum BudgetConfigError {
    #[error("context_window must be greater than 0")]
    ZeroWindow,
    #[error(
        "output_reserve ({output_reserve}) must be smaller than context_window ({context_window})"
    )]
    ReserveTooLarge {
        output_reserve: usize,
        context_window: usize,
    },
    #[error(
        "fixed_tokens ({fixed_tokens}) + output_reserve ({output_reserve}) must be smaller than \
         context_window ({context_window}): no request would fit"
    )]
    FixedTooLarge {
        fixed_tokens: usize,
        output_reserve: usize,
        context_window: usize,
    },
    #[error(
        "min(max_output_tokens, summary_output_cap) ({reserved}) + autocompact_buffer \
         ({autocompact_buffer}) must be smaller than context_window ({context_window}), \
         or the autocompact threshold is 0"
    )]
    NoRoomBeforeThreshold {
        reserved: usize,
        autocompact_buffer: usize,
        context_window: usize,
    },
    #[error("{name} must be a fraction of the window in (0, 1], got {value}")]
    BadFraction { name: &'static str, value: f64 },
    #[error(
        "levels must satisfy normal_below_pct <= warning_pct <= critical_pct, got \
         {normal_below_pct} / {warning_pct} / {critical_pct}"
    )]
    LevelsOutOfOrder {
        normal_below_pct: f64,
        warning_pct: f64,
        critical_pct: f64,
    },
}

/// How full the window is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Level {
    /// Below `normal_below_pct` (70%).
    Normal,
    /// From `normal_below_pct` up to `warning_pct` (70-85%).
    Elevated,
    /// From `warning_pct` (85%).
    Warning,
    /// From `critical_pct` (95%).
    Critical,
}

impl Level {
    /// The level's name, as reports spell it (`normal`, `elevated`, `warning`, `critical`).
    pub fn as_str(self) -> &'static str {
        match self {
            Level::Normal => "normal",
            Level::Elevated => "elevated",
            Level::Warning => "warning",
            Level::Critical => "critical",
        }
    }
}

/// Where a conversation stands against its window. Serializes to JSON for reports.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Budget {
    pub context_window: usize,
    /// System prompt, tool definitions and [`condense_model::Role::System`] messages, plus the
    /// configured [`BudgetConfig::fixed_tokens`].
    pub fixed: usize,
    /// Every other message.
    pub messages: usize,
    /// [`BudgetConfig::reserve`].
    pub output_reserve: usize,
    /// `context_window - fixed - messages - output_reserve`; negative when over.
    pub available: i64,
    /// `fixed + messages`.
    pub used: usize,
    /// `used / context_window` (0 for a zero window).
    pub utilization: f64,
    pub level: Level,
    /// `context_window - output_reserve`.
    pub effective_window: usize,
    /// `effective_window - autocompact_buffer` (the buffer scaled for a small window).
    pub autocompact_threshold: usize,
}

impl Budget {
    /// The budget of `fixed` and `messages` tokens under `config` (its `fixed_tokens` are added
    /// to `fixed`). Never fails: a config that does not [`validate`](BudgetConfig::validate)
    /// gives saturated (0) windows.
    pub fn compute(config: &BudgetConfig, fixed: usize, messages: usize) -> Budget {
        let fixed = fixed.saturating_add(config.fixed_tokens);
        let used = fixed.saturating_add(messages);
        let signed = |n: usize| i64::try_from(n).unwrap_or(i64::MAX);
        let available = signed(config.context_window)
            .saturating_sub(signed(used))
            .saturating_sub(signed(config.reserve()));
        let utilization = if config.context_window == 0 {
            0.0
        } else {
            used as f64 / config.context_window as f64
        };
        Budget {
            context_window: config.context_window,
            fixed,
            messages,
            output_reserve: config.reserve(),
            available,
            used,
            utilization,
            level: config.level(utilization),
            effective_window: config.effective_window(),
            autocompact_threshold: config.autocompact_threshold(),
        }
    }

    /// Whether `used` has reached the autocompact threshold.
    pub fn over_autocompact_threshold(&self) -> bool {
        self.used >= self.autocompact_threshold
    }

    /// Tokens to free to get back under the autocompact threshold (0 when under).
    pub fn excess_over_threshold(&self) -> usize {
        (self.used + 1).saturating_sub(self.autocompact_threshold)
    }

    /// Whether the request no longer fits with its output reserve.
    pub fn over_window(&self) -> bool {
        self.available < 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(max_output_tokens: usize) -> BudgetConfig {
        BudgetConfig {
            max_output_tokens,
            ..BudgetConfig::default()
        }
    }

    #[test]
    fn seed_thresholds() {
        // slot-cap off: max output >= 20k.
        for max_out in [20_000, 32_000, 64_000] {
            let c = cfg(max_out);
            assert_eq!(c.effective_window(), 180_000);
            assert_eq!(c.autocompact_threshold(), 167_000);
        }
        // slot-cap on: max output 8k.
        let c = cfg(8_000);
        assert_eq!(c.effective_window(), 192_000);
        assert_eq!(c.autocompact_threshold(), 179_000);
        assert!(c.validate().is_ok());
        assert!(BudgetConfig::default().validate().is_ok());
    }

    #[test]
    fn budget_numbers() {
        let b = Budget::compute(&BudgetConfig::default(), 35_000, 100_000);
        assert_eq!(b.used, 135_000);
        assert_eq!(b.available, 200_000 - 135_000 - 20_000);
        assert_eq!(b.level, Level::Normal);
        assert_eq!(b.effective_window, 180_000);
        assert_eq!(b.autocompact_threshold, 167_000);
        assert!(!b.over_autocompact_threshold());
        assert_eq!(b.excess_over_threshold(), 0);

        let over = Budget::compute(&BudgetConfig::default(), 35_000, 170_000);
        assert_eq!(over.available, -25_000);
        assert!(over.over_window());
        assert!(over.over_autocompact_threshold());
        assert_eq!(over.excess_over_threshold(), 205_000 - 167_000 + 1);
        assert_eq!(over.level, Level::Critical);

        let at = Budget::compute(&BudgetConfig::default(), 0, 167_000);
        assert!(at.over_autocompact_threshold());
        assert_eq!(at.excess_over_threshold(), 1);
    }

    #[test]
    fn fixed_tokens_the_file_lacks_count_as_fixed() {
        let c = BudgetConfig {
            fixed_tokens: 16_000,
            ..Default::default()
        };
        let b = Budget::compute(&c, 1_000, 152_000);
        assert_eq!((b.fixed, b.messages, b.used), (17_000, 152_000, 169_000));
        assert_eq!(b.available, 200_000 - 169_000 - 20_000);
        // Without them, the same messages would be under the threshold.
        assert!(b.over_autocompact_threshold());
        assert!(
            !Budget::compute(&BudgetConfig::default(), 1_000, 152_000).over_autocompact_threshold()
        );
        let too_many = BudgetConfig {
            fixed_tokens: 195_000,
            ..Default::default()
        };
        let err = too_many.validate().unwrap_err().to_string();
        assert!(
            err.starts_with("fixed_tokens (195000) + output_reserve"),
            "{err}"
        );
    }

    #[test]
    fn small_windows_scale_the_reserve_and_the_buffer() {
        // The README's `--context-window 32000`: the 20,000 reserve and 13,000 buffer no
        // longer exceed the window; the reserve is a quarter of it, one number everywhere.
        let c = BudgetConfig {
            context_window: 32_000,
            ..Default::default()
        };
        assert!(c.validate().is_ok());
        assert_eq!((c.reserve(), c.reserved_for_summary()), (8_000, 8_000));
        assert_eq!((c.effective_window(), c.buffer()), (24_000, 13_000));
        assert_eq!(c.autocompact_threshold(), 11_000);
        assert_eq!(
            c.scaling_notes(),
            ["window 32,000: output reserve scaled to 8,000 (a quarter of the window; 20,000 otherwise)"]
        );
        let b = Budget::compute(&c, 0, 1_000);
        assert_eq!((b.output_reserve, b.available), (8_000, 23_000));
        // Smaller still: the buffer would leave no threshold, so it takes Claude Code's
        // proportion (13,000 of 180,000) of the effective window.
        let c = BudgetConfig {
            context_window: 16_000,
            ..Default::default()
        };
        assert!(c.validate().is_ok());
        assert_eq!((c.reserve(), c.effective_window()), (4_000, 12_000));
        assert_eq!((c.buffer(), c.autocompact_threshold()), (866, 11_134));
        assert_eq!(c.scaling_notes().len(), 2);
        assert!(c.scaling_notes()[1].starts_with("window 16,000: autocompact buffer scaled to 866"));
        // 200k and up: nothing scaled, Claude Code's numbers.
        assert!(BudgetConfig::default().scaling_notes().is_empty());
        assert_eq!(BudgetConfig::default().reserve(), 20_000);
        // A window with room for both keeps the full reserve.
        let c = BudgetConfig {
            context_window: 40_000,
            ..Default::default()
        };
        assert_eq!((c.reserve(), c.autocompact_threshold()), (20_000, 7_000));
        assert!(c.scaling_notes().is_empty());
        // An explicit reserve below the others is the one in use, everywhere.
        let c = BudgetConfig {
            output_reserve: 2_000,
            ..Default::default()
        };
        assert_eq!((c.reserve(), c.effective_window()), (2_000, 198_000));
    }

    #[test]
    fn levels_at_the_boundaries() {
        let c = BudgetConfig::default();
        let level = |used: usize| Budget::compute(&c, 0, used).level;
        assert_eq!(level(0), Level::Normal);
        assert_eq!(level(139_999), Level::Normal);
        assert_eq!(level(140_000), Level::Elevated);
        assert_eq!(level(169_999), Level::Elevated);
        assert_eq!(level(170_000), Level::Warning);
        assert_eq!(level(189_999), Level::Warning);
        assert_eq!(level(190_000), Level::Critical);
        assert_eq!(level(250_000), Level::Critical);
        // Fixed tokens count toward utilization too.
        assert_eq!(Budget::compute(&c, 100_000, 40_000).level, Level::Elevated);
    }

    #[test]
    fn validation_errors() {
        let bad = |c: BudgetConfig| c.validate().unwrap_err().to_string();
        assert!(bad(BudgetConfig {
            context_window: 0,
            ..Default::default()
        })
        .contains("greater than 0"));
        // A reserve larger than the window is capped at a quarter of it, not an error.
        assert!(BudgetConfig {
            output_reserve: 300_000,
            ..Default::default()
        }
        .validate()
        .is_ok());
        assert!(bad(BudgetConfig {
            warning_pct: 1.5,
            ..Default::default()
        })
        .contains("warning_pct"));
        assert!(bad(BudgetConfig {
            critical_pct: f64::NAN,
            ..Default::default()
        })
        .contains("critical_pct"));
        assert!(bad(BudgetConfig {
            warning_pct: 0.5,
            ..Default::default()
        })
        .contains("normal_below_pct <= warning_pct"));
    }

    #[test]
    fn toml_model_table() {
        #[derive(Deserialize)]
        struct File {
            model: BudgetConfig,
        }
        let f: File =
            toml::from_str("[model]\ncontext_window = 128000\nwarning_pct = 0.8\n").unwrap();
        assert_eq!(f.model.context_window, 128_000);
        assert_eq!(f.model.warning_pct, 0.8);
        assert_eq!(f.model.autocompact_buffer, 13_000);
        assert!(f.model.validate().is_ok());
        let f: File = toml::from_str("[model]\n").unwrap();
        assert_eq!(f.model, BudgetConfig::default());
        let err = toml::from_str::<File>("[model]\ncontext_windw = 1\n")
            .err()
            .unwrap();
        assert!(err.to_string().contains("context_windw"), "{err}");
    }

    #[test]
    fn budget_serializes() {
        let b = Budget::compute(&BudgetConfig::default(), 10, 20);
        let v = serde_json::to_value(&b).unwrap();
        assert_eq!(v["level"], "normal");
        assert_eq!(v["available"], 200_000 - 30 - 20_000);
        assert_eq!(v["autocompact_threshold"], 167_000);
    }

    #[test]
    fn level_names_are_the_report_names() {
        for level in [
            Level::Normal,
            Level::Elevated,
            Level::Warning,
            Level::Critical,
        ] {
            assert_eq!(
                serde_json::to_value(level).unwrap(),
                serde_json::Value::from(level.as_str())
            );
        }
    }
}
