//! `snip`: level 2 of the pipeline, snip compression (deduplication and truncation).
//!
//! The lightest lossy level, meant to run on every turn. It cleans up redundant content in
//! three ways, in this order:
//!
//! 1. **Duplicate tool results.** A tool result whose text equals the text of another tool
//!    result and is at least `min_duplicate_chars` chars long is replaced by a pointer to the
//!    copy that is kept: `[Duplicate file content, see earlier in conversation: tool_use_id
//!    toolu_01…]`. With `keep = "first"` the first occurrence is kept and later ones point back
//!    to it; with `keep = "last"` the latest is kept and earlier ones point forward to it
//!    (`see later in conversation`). A file read again after it changed has a different text,
//!    so it is not a duplicate. The marker's form is `condense_model::duplicate`'s: when
//!    context-collapse folds the kept copy into a summary, it rewrites the pointers to it to say
//!    so, and snip recognises those as its own markers too.
//! 2. **Oversized tool output.** A tool result over `max_tool_result_bytes` keeps its first
//!    `max_tool_result_bytes` bytes (cut back to a character boundary) and, when
//!    `keep_tail_bytes > 0`, its last bytes too (logs put errors last), with a notice naming the
//!    store key of the original: `\n... [truncated, 12,345 total chars, store key <key>]`, or
//!    `\n... [truncated 8,000 chars, store key <key>] ...\n` between head and tail. An error
//!    result (flagged, a non-zero exit, a traceback) whose first meaningful line falls in the
//!    part cut out keeps it after the notice: `\n[the error was: <line>]`. A result replaced as
//!    a duplicate is not truncated.
//! 3. **Base64 images** (`strip_images`), in messages and inside tool results, become a text
//!    block with their metadata: `[image removed: image/png, 12,345 bytes decoded, 800x600,
//!    store key <key>]` (size from the base64 length; dimensions from the PNG, GIF, JPEG or WebP
//!    header when it gives them, via `condense_budget::image::image_dimensions`).
//!
//! Everything removed is put in the store first (original texts of duplicates and truncated
//! results, image data); the host also archives every change for `condense expand`.
//!
//! ```toml
//! [[stage]]
//! name = "snip"
//! plugin = "snip"
//! [stage.config]
//! min_duplicate_chars = 200      # shorter results are never deduplicated
//! keep = "first"                 # or "last": which copy of a duplicate stays
//! max_tool_result_bytes = 4096   # head kept of an oversized tool result
//! keep_tail_bytes = 0            # also keep this many bytes of its end
//! protect_recent_turns = 1       # results of the last N tool-calling turns are never cut
//! strip_images = true
//! ```
//!
//! # Details
//!
//! - Only tool_result blocks at the top level of chat messages are judged (event lines never
//!   reach the model and are left alone). Their text is
//!   [`Content::text`](condense_model::Content::text) without snip's own image markers; lengths
//!   are chars (Unicode scalar values) for `min_duplicate_chars`, bytes for the size limits.
//! - **Protected turns.** A turn is a run of consecutive assistant messages (Claude Code writes
//!   each block of one response as its own line, so its parallel calls are one turn). The
//!   results of the tool calls of the last `protect_recent_turns` turns that called tools are
//!   never truncated and keep their images: the agent is acting on them. They can still be
//!   deduplicated, except when the copy they repeat is itself truncated (the agent would lose
//!   the content it is acting on). Images in messages after the last assistant message (not
//!   answered yet) are kept too. `protect_recent_turns = 0` protects nothing.
//! - **Never grows.** Each replacement is made only when it is shorter than what it replaces;
//!   an image only when its marker is also cheaper than the image's token estimate.
//! - **Idempotent and stateless.** Duplicate markers, truncated texts (recognised by their
//!   notice) and image markers are never processed again, so `snip(snip(x)) == snip(x)`. The
//!   outcome depends only on the conversation and the config. With `keep = "last"`, a new
//!   occurrence appended later moves the kept copy forward (earlier prompts change); `"first"`
//!   keeps the prefix stable.
//! - **Report.** `tokens_freed` sums, over the changes, the host's token count of the text
//!   before minus after (for an image, its estimate from `condense_budget::image` before). One event per change, of kind `deduplicated`, `truncated` or `image-stripped`;
//!   the first note sums up: `12 duplicate tool results, 3 truncated, 0 images; 14,230 tokens
//!   freed`, further notes say what was kept whole and why.

mod images;
pub mod markers;
mod run;
pub mod scan;

use condense_abi::{Context, Input, Stage, StageError, StageOutput};
use serde::{Deserialize, Serialize};

/// Which occurrence of a duplicated tool result stays whole.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Keep {
    /// The earliest occurrence is kept; later ones point back to it (keeps prompt prefixes
    /// stable as the conversation grows).
    #[default]
    First,
    /// The latest occurrence is kept; earlier ones point forward to it.
    Last,
}

/// The stage's `[stage.config]`. Each field's doc is the key's description in
/// `condense plugins --details` and docs/stages.md.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, condense_abi::StageConfig)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// Tool results shorter than this many chars are never deduplicated. Must be > 0.
    pub min_duplicate_chars: usize,
    /// Which copy of a duplicated tool result stays whole: "first" (later copies point back to
    /// it) or "last" (earlier copies point forward to the latest).
    pub keep: Keep,
    /// A tool result over this many bytes keeps only its first this-many bytes (cut back to a
    /// character boundary) plus a truncation notice with the store key of the original. Must
    /// be > 0.
    pub max_tool_result_bytes: usize,
    /// Bytes of the end of a truncated tool result kept too, after the notice (logs put errors
    /// last). 0 keeps no tail.
    pub keep_tail_bytes: usize,
    /// The tool results of the last N assistant turns that called tools are never truncated
    /// and keep their images (the agent is acting on them). 0 protects nothing.
    pub protect_recent_turns: usize,
    /// Replace base64 images (in messages and in tool results) by a text block with their
    /// media type, decoded size, dimensions and store key.
    pub strip_images: bool,
}

/// Tool results shorter than this are not deduplicated (a repeated "ok" is not a wasted read).
pub const DEFAULT_MIN_DUPLICATE_CHARS: usize = 200;
/// The reference design's 4 KB of kept output.
pub const DEFAULT_MAX_TOOL_RESULT_BYTES: usize = 4_096;

impl Default for Config {
    fn default() -> Self {
        Config {
            min_duplicate_chars: DEFAULT_MIN_DUPLICATE_CHARS,
            keep: Keep::First,
            max_tool_result_bytes: DEFAULT_MAX_TOOL_RESULT_BYTES,
            keep_tail_bytes: 0,
            protect_recent_turns: 1,
            strip_images: true,
        }
    }
}

/// The stage.
#[derive(Debug)]
pub struct Snip {
    config: Config,
}

impl Snip {
    pub fn config(&self) -> &Config {
        &self.config
    }
}

impl Stage for Snip {
    type Config = Config;
    const NAME: &'static str = "snip";
    const DESCRIPTION: &'static str = "Replaces duplicate tool results by a pointer, truncates \
        oversized tool output, and strips base64 images to their metadata.";
    fn new(config: Config) -> Result<Self, StageError> {
        if config.max_tool_result_bytes == 0 {
            return Err("max_tool_result_bytes must be > 0, got 0".into());
        }
        if config.min_duplicate_chars == 0 {
            return Err("min_duplicate_chars must be > 0, got 0".into());
        }
        Ok(Snip { config })
    }

    fn apply(&self, input: Input<'_>, cx: &Context<'_>) -> Result<StageOutput, StageError> {
        run::apply(&self.config, input, cx)
    }
}

condense_abi::export_stage!(Snip);
