//! `observation-mask`: hides all but the most recent tool results behind a one-line placeholder.
//!
//! Agents re-read their old observations on every turn although they rarely need them again:
//! the file listing from turn 3 or the test output from turn 10 has been acted on long ago.
//! Observation masking keeps the agent's own reasoning and actions whole and replaces each tool
//! result older than the last few with
//!
//! ```text
//! [Observation masked: bash result, 12,345 chars; see condense store]
//! ```
//!
//! This is the baseline of SWE-agent and OpenHands. In "The Complexity Trap" (Lindenbauer et
//! al., 2025, arXiv:2508.21433), masking within SWE-agent on SWE-bench Verified halved cost
//! relative to the raw agent while matching, sometimes slightly exceeding, the solve rate of LLM
//! summarization (which costs a model call per summary): run it before anything smarter. The
//! host archives the masked text (`condense expand` restores it), hence "see condense store".
//!
//! ```toml
//! [[stage]]
//! name = "mask"
//! plugin = "observation-mask"
//! [stage.config]
//! keep_last = 5            # most recent results kept whole
//! per_tool = true          # ... of each tool (false: of all tools together)
//! tools = []               # only mask these tools (empty: every tool)
//! exclude_tools = ["Read"] # never mask these
//! ```
//!
//! # What is masked
//!
//! Every `tool_result` block at the top level of a chat message (event lines are left alone),
//! named by its matching `tool_use` (`unknown` when the call is not in the conversation). A
//! result is *eligible* when its tool passes `tools` and `exclude_tools` (a result of an unknown
//! tool is eligible only when `tools` is empty). The eligible results are grouped by tool name
//! (`per_tool = true`) or all together, and in each group all but the last `keep_last` are
//! masked. `keep_last` counts eligible results only.
//!
//! The placeholder replaces the result's text (its text blocks and any nested results; `<N>` is
//! the number of chars of that text); images and other non-text blocks stay after it, and
//! `is_error`, `tool_use_id` and the block's `extra` are untouched. String-shaped content stays a
//! string. A result is masked only when the placeholder is shorter than its text in bytes and in
//! tokens, so the stage never makes a conversation bigger.
//!
//! # Reruns
//!
//! The stage keeps no state: which results are masked depends only on their order. A result
//! that already holds a placeholder is recognised and left as it is, so running the stage on its
//! own output changes nothing, and appending turns only masks the results that newly fell out of
//! the window (the earlier ones stay masked, so a prompt cache prefix stays valid).

use condense_abi::{
    Context, Input, Replacements, Stage, StageConfig, StageError, StageEvent, StageOutput,
    StageReport,
};
use condense_model::{Content, Role, ToolResultAt};
pub use condense_text::{plural, thousands};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashSet};

/// The stage's `[stage.config]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, StageConfig)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// How many of the most recent eligible tool results stay whole (per tool, or in all,
    /// see per_tool); older ones are masked. Must be > 0.
    pub keep_last: usize,
    /// true: keep the last keep_last results of each tool; false: the last keep_last
    /// results of all eligible tools together.
    pub per_tool: bool,
    /// Only results of these tool names are masked (and counted for keep_last). Empty:
    /// every tool, including results whose call is not in the conversation.
    pub tools: Vec<String>,
    /// Results of these tool names are never masked (nor counted for keep_last). Must not
    /// overlap tools.
    pub exclude_tools: Vec<String>,
}

/// SWE-agent's default window.
pub const DEFAULT_KEEP_LAST: usize = 5;

impl Default for Config {
    fn default() -> Self {
        Config {
            keep_last: DEFAULT_KEEP_LAST,
            per_tool: true,
            tools: Vec::new(),
            exclude_tools: Vec::new(),
        }
    }
}

/// The tool name used for results whose call is not in the conversation.
pub const UNKNOWN_TOOL: &str = "unknown";

const PREFIX: &str = "[Observation masked: ";
const SUFFIX: &str = "; see condense store]";

/// The placeholder for a result of `tool` whose text had `chars` chars.
pub fn placeholder(tool: &str, chars: usize) -> String {
    format!("{PREFIX}{tool} result, {} chars{SUFFIX}", thousands(chars))
}

/// Whether `text` is a placeholder this stage wrote.
pub fn is_placeholder(text: &str) -> bool {
    text.starts_with(PREFIX) && text.ends_with(SUFFIX) && !text.contains('\n')
}

/// The stage.
#[derive(Debug)]
pub struct ObservationMask {
    config: Config,
}

impl ObservationMask {
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Whether results of `tool` may be masked.
    pub fn eligible(&self, tool: Option<&str>) -> bool {
        let c = &self.config;
        match tool {
            Some(t) => {
                (c.tools.is_empty() || c.tools.iter().any(|x| x == t))
                    && !c.exclude_tools.iter().any(|x| x == t)
            }
            None => c.tools.is_empty(),
        }
    }
}

/// Counts of one run, for the notes.
#[derive(Default)]
struct Tally {
    results: usize,
    eligible: usize,
    masked_by_tool: BTreeMap<String, usize>,
    already: usize,
    not_shorter: usize,
}

impl Stage for ObservationMask {
    type Config = Config;
    const NAME: &'static str = "observation-mask";
    const DESCRIPTION: &'static str =
        "Masks all but the last few tool results of each tool with a one-line placeholder (the SWE-agent/OpenHands baseline).";

    fn new(config: Config) -> Result<Self, StageError> {
        if config.keep_last == 0 {
            return Err(
                "keep_last must be > 0, got 0 (the latest result is what the agent acts on)".into(),
            );
        }
        for (key, list) in [
            ("tools", &config.tools),
            ("exclude_tools", &config.exclude_tools),
        ] {
            if list.iter().any(|t| t.trim().is_empty()) {
                return Err(format!("{key} must not hold an empty tool name").into());
            }
        }
        if let Some(both) = config
            .tools
            .iter()
            .find(|t| config.exclude_tools.contains(t))
        {
            return Err(format!("tool `{both}` is in both tools and exclude_tools").into());
        }
        Ok(ObservationMask { config })
    }

    fn apply(&self, input: Input<'_>, cx: &Context<'_>) -> Result<StageOutput, StageError> {
        // Decided through the view; only the messages holding a masked result are copied.
        let view = input.view()?;
        let mut tally = Tally::default();
        // Eligible results per group, oldest first.
        let mut groups: BTreeMap<String, Vec<ToolResultAt>> = BTreeMap::new();
        for found in view.tool_results() {
            // Event lines never reach the model: nothing to save there.
            if found.role == Role::Event {
                continue;
            }
            tally.results += 1;
            if !self.eligible(found.tool) {
                continue;
            }
            tally.eligible += 1;
            let key = if self.config.per_tool {
                found.tool.unwrap_or(UNKNOWN_TOOL).to_string()
            } else {
                String::new()
            };
            groups.entry(key).or_default().push(found.at());
        }
        let older: HashSet<ToolResultAt> = groups
            .into_values()
            .flat_map(|mut slots| {
                let n = slots.len().saturating_sub(self.config.keep_last);
                slots.truncate(n);
                slots
            })
            .collect();

        let mut report = StageReport::default();
        let mut replacements = Replacements::new(&view);
        // The walk visits results in message order, so events come out oldest first.
        for slot in view.tool_results() {
            let at = slot.at();
            if !older.contains(&at) {
                continue;
            }
            let text = slot.result.content().text_cow();
            if is_placeholder(&text) {
                tally.already += 1;
                continue;
            }
            let tool = slot.tool.unwrap_or(UNKNOWN_TOOL);
            let chars = text.chars().count();
            let masked = placeholder(tool, chars);
            let (before, after) = (cx.count_tokens(&text), cx.count_tokens(&masked));
            if masked.len() >= text.len() || after >= before {
                tally.not_shorter += 1;
                continue;
            }
            let Some(result) = replacements.tool_result_mut(&at) else {
                continue;
            };
            result.content = masked_content(&result.content, masked);
            *tally.masked_by_tool.entry(tool.to_string()).or_default() += 1;
            report.blocks_changed += 1;
            *report.tokens_freed.get_or_insert(0) += before - after;
            report.events.push(StageEvent {
                kind: "masked".to_string(),
                message_id: slot.message_id.to_string(),
                detail: format!(
                    "tool {tool} result {}: {} chars",
                    result.tool_use_id,
                    thousands(chars)
                ),
                tokens: before - after,
            });
        }
        self.write_notes(&mut report, &tally);
        Ok(replacements.into_output(report))
    }
}

impl ObservationMask {
    fn write_notes(&self, report: &mut StageReport, t: &Tally) {
        let window = format!(
            "keep_last = {} {}",
            self.config.keep_last,
            if self.config.per_tool {
                "per tool"
            } else {
                "in all"
            }
        );
        let masked: usize = t.masked_by_tool.values().sum();
        if masked == 0 {
            report.note(format!(
                "nothing masked ({} tool results, {} eligible, {window})",
                t.results, t.eligible
            ));
        } else {
            let by_tool: Vec<String> = t
                .masked_by_tool
                .iter()
                .map(|(tool, n)| format!("{tool} {n}"))
                .collect();
            report.note(format!(
                "masked {masked} of {} tool results ({} eligible, {window}): {}",
                t.results,
                t.eligible,
                by_tool.join(", ")
            ));
        }
        if t.already > 0 {
            report.note(format!(
                "{} already masked",
                plural(t.already, "older result was", "older results were")
            ));
        }
        if t.not_shorter > 0 {
            report.note(format!(
                "kept {} whole: the placeholder would not be shorter",
                plural(t.not_shorter, "older result", "older results")
            ));
        }
    }
}

/// `content` with its text replaced by `text` (see `Content::with_text_replaced`).
fn masked_content(content: &Content, text: String) -> Content {
    content.with_text_replaced(text, |_| false)
}

condense_abi::export_stage!(ObservationMask);
