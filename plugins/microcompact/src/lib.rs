//! `microcompact`: level 3 of the pipeline, clearing old tool results the model no longer needs.
//!
//! A file read half an hour ago is most likely no longer useful, yet its result still fills the
//! context. This stage clears the results of **compressible tools** (file reads, shells,
//! searches, edits, web fetches), always keeping the `keep_recent` most recent ones. How it
//! clears them depends on the state of the provider's prompt cache:
//!
//! * **Time-based path (cache cold).** When more than `gap_minutes` have passed since the last
//!   assistant message, the cached prefix has expired and will be uploaded again whatever
//!   happens, so changing it costs nothing extra. The content of every older compressible
//!   result is replaced by `[Old tool result content cleared]` (the block's shape, `is_error`,
//!   `tool_use_id` and `extra` are kept). An error result (flagged, a non-zero exit, a
//!   traceback) keeps its first meaningful line: `[Old tool result content cleared; the error
//!   was: KeyError: 'user']`, so the agent still knows which errors it hit. With `clear_tool_inputs`, the large inputs of those
//!   calls (a `Write` holding a whole file) become `{"cleared":true,"original_chars":N}`.
//! * **Cache-edit path (cache hot).** Otherwise changing a message would invalidate the cached
//!   prefix, so the messages are left byte-identical. When the older compressible results
//!   hold more than `trigger_tokens` and new edits would free at least `clear_at_least`
//!   tokens, the stage records **cache edits** (the tool_use ids whose results to clear) in its
//!   state and report (`cache-edit` events). Edits sent on earlier runs are pinned and sent
//!   again on every later run, marked as re-sent. For Anthropic requests with
//!   `emit_context_management`, the stage also writes the request's top-level
//!   `context_management` with a `clear_tool_uses_20250919` edit, so the API clears
//!   server-side; request fields are not messages and cost no tokens in the host's count.
//! * **Forced.** The host's recovery chain (`condense compress --fit`) forces the stage
//!   (`cx.flags.forced`): the time path runs whatever the gap, since the request is being
//!   rebuilt anyway.
//!
//! The two paths are exclusive and the time-based one wins when both apply.
//!
//! ```toml
//! [[stage]]
//! name = "microcompact"
//! plugin = "microcompact"
//! [stage.config]
//! keep_recent = 3                 # most recent compressible results always kept (>= 1)
//! gap_minutes = 60                # idle time after which the cache is taken as cold
//! exclude_tools = ["WebFetch"]    # never cleared
//! clear_tool_inputs = true        # cold path: clear large inputs too
//! min_input_chars = 1000          # ... over this many chars
//! trigger_tokens = 40000          # hot path: older results must hold more than this
//! clear_at_least = 20000          # ... and new edits must free at least this
//! emit_context_management = true  # hot path, Anthropic requests: write context_management
//! ```
//!
//! # Which results
//!
//! A tool result belongs to the tool named by the `tool_use` block with its id
//! ([`Conversation::tool_names_by_id`]). Names match `compressible_tools` and `exclude_tools`
//! **exactly, case-sensitively** (`Bash` and `bash` are both in the default list, `BASH` is
//! not). `exclude_tools` wins over `compressible_tools`. Results whose `tool_use` is not in the
//! conversation are never cleared. Only results at the top level of chat messages count (event
//! lines are left alone). The `keep_recent` window counts compressible, non-excluded results,
//! already cleared ones included, from the end of the conversation.
//!
//! # The gap
//!
//! The gap is the host's clock (`cx.now_ms`) minus the timestamp of the last assistant message
//! ([`Message::timestamp`](condense_model::Message::timestamp), RFC 3339, which Claude Code
//! transcripts carry). When that message has no (readable) timestamp, the gap is the time since
//! the stage's previous run on this session (`last_seen_ms` in its state; a request is sent
//! right after each run, so that is when the cache was last written), unless the conversation
//! is not the one seen then continued: shorter, and without the last message seen then (a run
//! resumed from the previous output is shorter once a later stage collapsed its history, and
//! still holds that message). With neither, the gap is unknown and the time-based path does
//! not fire.
//! The path fires when the gap is strictly greater than `gap_minutes`.
//!
//! # Tokens
//!
//! Counted with the host's tokenizer (`cx.count_tokens`) over a result's payload (texts,
//! nested blocks; an image counts 1,600). A result frees its tokens minus the marker's; a
//! result no bigger than the marker is left as it is, and an input is replaced only when the
//! replacement is smaller, so the stage never makes a conversation bigger. The hot path's
//! trigger compares the tokens of all older results still whole in the messages (pinned ones
//! included: the request still carries them); `clear_at_least` compares what the new edits
//! would free.
//!
//! Running the stage again on its output changes nothing more: cleared markers and cleared
//! inputs are recognised and skipped.

pub mod cache_edit;
pub mod clear;
pub mod scan;
pub mod state;
pub mod time;

use condense_abi::{
    Context, Input, Replacements, Stage, StageError, StageOutput, StageReport, View,
};
use condense_model::{Conversation, Format, Message, RawJson};
pub use condense_text::{plural, thousands};
use scan::{Gap, Scan};
use serde::{Deserialize, Serialize};
use state::State;

/// The text that replaces a cleared result.
pub const CLEARED_MARKER: &str = "[Old tool result content cleared]";
/// The start of the text that replaces a cleared error result, which keeps the error's first
/// meaningful line: `[Old tool result content cleared; the error was: <line>]`.
pub const CLEARED_ERROR_PREFIX: &str = "[Old tool result content cleared; the error was: ";

/// The marker for a cleared result: [`CLEARED_MARKER`], or for an error result (flagged,
/// non-zero exit, traceback: `condense_retain::error_line`) one that keeps its first
/// meaningful line, so the agent still sees which error it hit and retention does not depend on
/// a later summary.
pub fn cleared_marker(error_line: Option<&str>) -> String {
    match error_line {
        Some(line) => format!("{CLEARED_ERROR_PREFIX}{line}]"),
        None => CLEARED_MARKER.to_string(),
    }
}

/// Whether `text` is a marker [`cleared_marker`] wrote.
pub fn is_cleared_marker(text: &str) -> bool {
    text == CLEARED_MARKER
        || (text.starts_with(CLEARED_ERROR_PREFIX) && text.ends_with(']') && !text.contains('\n'))
}

/// Tool names cleared by default: Claude Code's tools and the usual names of other agents.
pub const DEFAULT_COMPRESSIBLE_TOOLS: &[&str] = &[
    "Read",
    "Bash",
    "Grep",
    "Glob",
    "WebSearch",
    "WebFetch",
    "Edit",
    "Write",
    "MultiEdit",
    "NotebookEdit",
    "read_file",
    "write_file",
    "edit_file",
    "shell",
    "bash",
    "execute_bash",
    "run",
    "run_command",
    "str_replace_editor",
    "str_replace_based_edit_tool",
    "grep",
    "glob",
    "find",
    "list_files",
    "ls",
    "cat",
    "view",
    "search",
    "web_search",
    "web_fetch",
];

/// The stage's `[stage.config]`. Each field's doc is the key's description in
/// `condense plugins --details` and docs/stages.md.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, condense_abi::StageConfig)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// Tool names whose results may be cleared, matched exactly and case-sensitively against
    /// the name of the result's tool_use. Default: Claude Code's Read, Bash, Grep, Glob,
    /// WebSearch, WebFetch, Edit, Write, MultiEdit, NotebookEdit and the usual names of other
    /// agents (read_file, shell, bash, str_replace_editor, grep, ...). Must not be empty.
    pub compressible_tools: Vec<String>,
    /// Tool names whose results are never cleared, even when listed in compressible_tools.
    pub exclude_tools: Vec<String>,
    /// The most recent compressible results always kept whole. Must be >= 1.
    pub keep_recent: usize,
    /// Minutes since the last assistant message (or the previous run, without timestamps)
    /// after which the prompt cache is taken as cold and old results are cleared in the
    /// messages. 0 clears whenever any time has passed.
    pub gap_minutes: u64,
    /// Cache hot: cache edits are made only when the older compressible results still whole
    /// hold more than this many tokens. Also the trigger of the context_management edit.
    pub trigger_tokens: usize,
    /// Cache hot: cache edits are made only when the new ones free at least this many tokens.
    /// Also the clear_at_least of the context_management edit.
    pub clear_at_least: usize,
    /// Cache cold: also replace the inputs of the cleared calls over min_input_chars by
    /// {"cleared":true,"original_chars":N}. Passed on as clear_tool_inputs in
    /// context_management.
    pub clear_tool_inputs: bool,
    /// With clear_tool_inputs: only inputs whose JSON text has more chars than this are
    /// cleared.
    pub min_input_chars: usize,
    /// Cache hot, Anthropic requests only: write the request's top-level context_management
    /// with a clear_tool_uses_20250919 edit (merged with other request fields and edits)
    /// whenever there are cache edits to send. The API takes it only with the beta
    /// context-management-2025-06-27 named in the anthropic-beta header: condense serve adds
    /// it; a request written by condense compress needs its sender to.
    pub emit_context_management: bool,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            compressible_tools: DEFAULT_COMPRESSIBLE_TOOLS
                .iter()
                .map(|t| t.to_string())
                .collect(),
            exclude_tools: Vec::new(),
            keep_recent: 3,
            gap_minutes: 60,
            trigger_tokens: 40_000,
            clear_at_least: 20_000,
            clear_tool_inputs: false,
            min_input_chars: 1_000,
            emit_context_management: false,
        }
    }
}

/// The stage.
#[derive(Debug)]
pub struct Microcompact {
    config: Config,
}

impl Microcompact {
    pub fn config(&self) -> &Config {
        &self.config
    }

    fn gap_ms(&self) -> i64 {
        i64::try_from(self.config.gap_minutes).map_or(i64::MAX, |m| m.saturating_mul(60_000))
    }
}

impl Stage for Microcompact {
    type Config = Config;
    const NAME: &'static str = "microcompact";
    const DESCRIPTION: &'static str = "Clears old results of compressible tools: in the messages \
        when the prompt cache is cold, as cache edits (and Anthropic context_management) when hot.";
    fn new(config: Config) -> Result<Self, StageError> {
        if config.keep_recent < 1 {
            return Err(format!(
                "keep_recent must be >= 1 (the most recent result always survives), got {}",
                config.keep_recent
            )
            .into());
        }
        if config.compressible_tools.is_empty() {
            return Err(
                "compressible_tools must not be empty: nothing would ever be cleared".into(),
            );
        }
        Ok(Microcompact { config })
    }

    fn apply(&self, input: Input<'_>, cx: &Context<'_>) -> Result<StageOutput, StageError> {
        let mut state = cx.state::<State>()?;
        let now = cx.now_ms;
        // Everything is decided through the view; the conversation is copied in only to clear
        // results in it (the time path) or to write new request fields.
        let view = input.view()?;
        let gap = scan::gap(&view, &state, now);
        let scan = Scan::new(&view, &self.config, cx);
        let seen = (
            view.len(),
            view.messages().last().map(|m| m.id().to_string()),
        );
        let mut report = StageReport::default();
        let threshold = self.config.gap_minutes;
        // What the stage changed: messages cleared in place (the time path), or new request
        // fields in a copy.
        let mut cleared: Vec<(usize, Message)> = Vec::new();
        let mut changed: Option<Conversation> = None;

        // The host's recovery chain (`condense compress --fit`) forces the time path: the
        // request is being rebuilt anyway, so the cache is as good as cold.
        let forced = cx.flags.forced;
        if forced {
            report.note("forced by the recovery chain: clearing as if the cache were cold");
        }
        let cold = forced || gap.ms().is_some_and(|ms| ms > self.gap_ms());
        if cold {
            let done = if scan.old.is_empty() {
                clear::Cleared::default()
            } else {
                let mut replacements = Replacements::new(&view);
                let done = clear::clear_old(
                    &view,
                    &mut replacements,
                    &scan,
                    &self.config,
                    cx,
                    &mut report,
                );
                cleared = replacements.into_messages();
                done
            };
            report.tokens_freed = Some(done.tokens);
            report.note(time_note(&gap, threshold, &scan, &done));
            if !forced && !state.pinned.is_empty() {
                report.note(format!(
                    "dropped {}: the cache is cold and the results are cleared in the messages",
                    plural(
                        state.pinned.len(),
                        "pinned cache edit",
                        "pinned cache edits"
                    )
                ));
            }
            state.pinned.clear();
        } else {
            let hot = cache_edit::plan(&view, &scan, &mut state, &self.config, cx, &mut report);
            report.tokens_freed = Some(0);
            report.note(self.hot_note(&gap, &hot));
            if hot.dropped > 0 {
                report.note(format!(
                    "dropped {}: their results are no longer old, whole results of this conversation",
                    plural(hot.dropped, "pinned cache edit", "pinned cache edits")
                ));
            }
            if self.config.emit_context_management && !state.pinned.is_empty() {
                let (note, extra) = self.emit(&view, cx.format);
                report.note(note);
                if let Some(extra) = extra {
                    let mut conversation = input.into_conversation()?;
                    conversation.extra = extra;
                    changed = Some(conversation);
                }
            }
        }
        report.note(format!(
            "gap {}: {}; {} ({} kept as most recent), {} excluded, {} of other tools",
            gap.show(),
            gap.source(),
            plural(
                scan.old.len() + scan.kept_recent,
                "compressible result",
                "compressible results"
            ),
            thousands(scan.kept_recent),
            thousands(scan.excluded),
            thousands(scan.other)
        ));

        state.last_seen_ms = Some(now);
        (state.messages_seen, state.last_seen_id) = seen;
        state.save()?;
        Ok(match changed {
            Some(conversation) => StageOutput::changed(conversation, report),
            None => StageOutput::replaced(cleared, report),
        })
    }
}

fn time_note(gap: &Gap, threshold: u64, scan: &Scan, done: &clear::Cleared) -> String {
    let inputs = if done.inputs > 0 {
        format!(" and {}", plural(done.inputs, "tool input", "tool inputs"))
    } else {
        String::new()
    };
    let mut note = format!(
        "gap {} > {threshold} min: cleared {}{inputs}, kept {} most recent",
        gap.show(),
        plural(done.results, "old result", "old results"),
        thousands(scan.kept_recent)
    );
    note.push_str(&format!(" ({} tokens freed)", thousands(done.tokens)));
    if done.already > 0 {
        note.push_str(&format!("; {} already cleared", thousands(done.already)));
    }
    if done.inputs_already > 0 {
        note.push_str(&format!(
            "; {} already cleared",
            plural(done.inputs_already, "input", "inputs")
        ));
    }
    if done.too_small > 0 {
        note.push_str(&format!(
            "; {} no bigger than the marker left as is",
            thousands(done.too_small)
        ));
    }
    note
}

impl Microcompact {
    fn hot_note(&self, gap: &Gap, hot: &cache_edit::Hot) -> String {
        let c = &self.config;
        let gap_part = match gap {
            Gap::Known { .. } => format!("gap {} <= {} min", gap.show(), c.gap_minutes),
            Gap::Unknown(_) => "gap unknown".to_string(),
        };
        let resent = if hot.resent > 0 {
            format!(
                "; re-sent {}",
                plural(
                    hot.resent,
                    "cache edit of earlier runs",
                    "cache edits of earlier runs"
                )
            )
        } else {
            String::new()
        };
        if hot.fired {
            return format!(
                "cache hot (gap {}): {} clearable tokens > {} trigger: {} freeing {} tokens \
                 server-side (>= {} clear_at_least), messages unchanged{resent}",
                gap.show(),
                thousands(hot.clearable),
                thousands(c.trigger_tokens),
                plural(hot.new_edits, "cache edit", "cache edits"),
                thousands(hot.new_tokens),
                thousands(c.clear_at_least)
            );
        }
        let why = if hot.clearable <= c.trigger_tokens {
            format!(
                "clearable tokens {} <= {} trigger",
                thousands(hot.clearable),
                thousands(c.trigger_tokens)
            )
        } else if hot.candidates == 0 {
            format!(
                "clearable tokens {} > {} trigger but every old result already has a cache edit",
                thousands(hot.clearable),
                thousands(c.trigger_tokens)
            )
        } else {
            format!(
                "clearable tokens {} > {} trigger but new edits would free only {} < {} clear_at_least",
                thousands(hot.clearable),
                thousands(c.trigger_tokens),
                thousands(hot.new_tokens),
                thousands(c.clear_at_least)
            )
        };
        format!("{gap_part} and {why}: no new cache edits{resent}")
    }

    /// The cache-edit strategy written into the request fields, when the format (the one the
    /// conversation will be written back in) takes it: the note saying what happened, and the
    /// new fields when they differ from the conversation's.
    fn emit(&self, conversation: &View<'_>, format: Option<Format>) -> (String, Option<RawJson>) {
        if format != Some(Format::Anthropic) {
            let shown = format.map_or("unknown", Format::as_str);
            let note = format!(
                "context_management not written: the {shown} format does not support it \
                 (Anthropic requests only)"
            );
            return (note, None);
        }
        let edit = cache_edit::strategy_edit(conversation, &self.config);
        let fields = RawJson::from_string_unchecked(conversation.extra().to_string());
        match cache_edit::write_context_management(&fields, edit) {
            Ok(extra) => {
                let note = format!(
                    "wrote context_management {} edit into the request fields (trigger {}, \
                     keep {}, clear_at_least {})",
                    cache_edit::STRATEGY,
                    thousands(self.config.trigger_tokens),
                    self.config.keep_recent,
                    thousands(self.config.clear_at_least)
                );
                (note, (extra != fields).then_some(extra))
            }
            Err(why) => (format!("context_management not written: {why}"), None),
        }
    }
}

condense_abi::export_stage!(Microcompact);
