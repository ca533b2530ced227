//! The baselines every pipeline is compared with, built in code as pipeline files.
//!
//! - `truncate-oldest`: drop the oldest messages until the conversation fits the fit limit
//!   (the naive sliding window);
//! - `mask+truncate`: `observation-mask` with its defaults (all but the last five results of
//!   each tool become a one-line placeholder, the SWE-agent/OpenHands baseline), then
//!   `truncate-oldest`;
//! - `autocompact`: level 5 alone (one summary of everything, with its restored files and the
//!   unanswered request).
//!
//! Their plugins are found by name exactly as `condense compress` finds them (`target/plugins`
//! beside the binary after `cargo xtask plugins`, or `CONDENSE_PLUGIN_PATH`).
//!
//! ```
//! use condense_eval::{Baseline, Window};
//!
//! let window = Window::for_cut(70_000, 0.85);
//! let p = Baseline::MaskTruncate.pipeline(&window).unwrap();
//! let plugins: Vec<&str> = p.stages.iter().map(|s| s.plugin.as_str()).collect();
//! assert_eq!(plugins, ["observation-mask", "truncate-oldest"]);
//! assert_eq!(p.stages[1].config["max_tokens"].as_integer(), Some(10_500));
//! assert_eq!(p.budget.context_window, 12_000);
//! assert_eq!(Baseline::parse("none").unwrap(), None);
//! ```

use crate::window::Window;
use crate::EvalError;
use condense_host::Pipeline;

/// A baseline pipeline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Baseline {
    TruncateOldest,
    MaskTruncate,
    Autocompact,
}

impl Baseline {
    /// Every baseline, in the order tables list them.
    pub const ALL: [Baseline; 3] = [
        Baseline::TruncateOldest,
        Baseline::MaskTruncate,
        Baseline::Autocompact,
    ];

    /// The name `--baseline` takes and tables show.
    pub fn name(self) -> &'static str {
        match self {
            Baseline::TruncateOldest => "truncate-oldest",
            Baseline::MaskTruncate => "mask+truncate",
            Baseline::Autocompact => "autocompact",
        }
    }

    /// A `--baseline` value: a baseline, or `None` for `none`.
    pub fn parse(name: &str) -> Result<Option<Baseline>, EvalError> {
        if name == "none" {
            return Ok(None);
        }
        Baseline::ALL
            .into_iter()
            .find(|b| b.name() == name)
            .map(Some)
            .ok_or_else(|| EvalError::UnknownBaseline(name.to_string()))
    }

    /// The pipeline file text for a fit limit of `limit` tokens.
    pub fn toml(self, limit: usize) -> String {
        let truncate = format!(
            "[[stage]]\nname = \"truncate-oldest\"\nplugin = \"truncate-oldest\"\n\n[stage.config]\nmax_tokens = {limit}\n"
        );
        let mask = "[[stage]]\nname = \"observation-mask\"\nplugin = \"observation-mask\"\n";
        let stages = match self {
            Baseline::TruncateOldest => truncate,
            Baseline::MaskTruncate => format!("{mask}\n{truncate}"),
            Baseline::Autocompact => {
                "[[stage]]\nname = \"autocompact\"\nplugin = \"autocompact\"\n".to_string()
            }
        };
        format!(
            "# baseline `{}`\n[model]\ntokenizer = \"o200k_base\"\n\n[summarizer]\nkind = \"extractive\"\n\n{stages}",
            self.name()
        )
    }

    /// The baseline as a pipeline for `window`.
    pub fn pipeline(self, window: &Window) -> Result<Pipeline, EvalError> {
        let source = format!("<baseline {}>", self.name());
        let mut p = Pipeline::parse(&self.toml(window.limit()), &source, None)
            .map_err(|e| EvalError::Window(e.to_string()))?;
        window.apply(&mut p.budget)?;
        Ok(p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_baseline_parses_for_any_window() {
        for b in Baseline::ALL {
            for tokens in [10, 10_000, 1_000_000] {
                let w = Window::for_cut(tokens, 0.85);
                let p = b.pipeline(&w).unwrap();
                assert_eq!(p.budget.context_window, w.context_window);
            }
            assert_eq!(Baseline::parse(b.name()).unwrap(), Some(b));
        }
        assert!(Baseline::parse("truncate")
            .unwrap_err()
            .to_string()
            .contains("unknown baseline `truncate`"));
    }
}
