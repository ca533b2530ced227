//! Command-line interface definition.

use clap::{Args, Parser, Subcommand, ValueEnum};
use std::path::PathBuf;

#[derive(Debug, Parser)]
#[command(
    name = "condense",
    version,
    about = "Keep an LLM agent's conversation inside its context window.",
    long_about = "Keep an LLM agent's conversation inside its context window.\n\n\
        condense reads a conversation in the format your agent already uses (Anthropic Messages, \
        OpenAI Chat Completions, Claude Code session JSONL, OpenHands event lists), runs it through \
        a pipeline of compression stages loaded as plugins, and writes it back in the same format, \
        smaller, with a report of what each stage did. Everything a stage removes is kept in a \
        store (.condense/ beside the input), so `condense expand` restores the original exactly.",
    after_help = "Examples:\n  \
        condense stats session.jsonl\n  \
        condense compress session.jsonl --out small.jsonl\n  \
        condense compress request.json --pipeline my-pipeline.toml --report json\n  \
        condense expand small.jsonl --store .condense --out restored.jsonl\n  \
        condense pipeline show > my-pipeline.toml"
)]
pub struct Cli {
    /// Show long error details (the full plugin ABI report, for example).
    #[arg(long, short, global = true)]
    pub verbose: bool,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Token counts by role, block type and tool, the budget, duplicates and images.
    Stats(StatsArgs),
    /// Run the pipeline and write the compressed conversation (same format as the input).
    Compress(CompressArgs),
    /// Rebuild the original conversation from a compressed one and its store.
    Expand(ExpandArgs),
    /// Show what each stage does: a unified diff of the conversation before and after it.
    Diff(DiffArgs),
    /// Render every stage's output for transcripts and compare with stored snapshots (a CI
    /// gate for pipeline changes: exit 1 and `.snap.new` files when anything differs).
    Snapshot(SnapshotArgs),
    /// Run several pipelines on the same transcripts and print them side by side.
    Compare(CompareArgs),
    /// Show or check a pipeline file.
    #[command(subcommand)]
    Pipeline(PipelineCommand),
    /// List the plugins condense can find, with versions and paths.
    Plugins(PluginsArgs),
    /// Write a new stage plugin: `condense plugin new NAME`.
    #[command(subcommand)]
    Plugin(PluginCommand),
}

/// Where to read a conversation from and how to interpret it.
#[derive(Debug, Args)]
pub struct InputArgs {
    /// The conversation file; `-` reads standard input.
    #[arg(value_name = "FILE", default_value = "-")]
    pub file: PathBuf,
    /// The input format; detected from the content when omitted.
    #[arg(long, value_parser = parse_format)]
    pub format: Option<condense_formats::Format>,
    /// JSON pointer to the messages inside a wrapper object, e.g. `/messages`, `/0/traj`;
    /// `*` selects every element (`/*/traj`). Common wrappers are found without it.
    #[arg(long, value_name = "POINTER")]
    pub select: Option<String>,
}

/// Overrides of the pipeline's `[model]` table.
#[derive(Debug, Default, Args)]
pub struct ModelArgs {
    /// The model's context window, in tokens (overrides the pipeline's [model]).
    #[arg(long)]
    pub context_window: Option<usize>,
    /// The model's maximum output tokens (overrides the pipeline's [model]); small windows need
    /// a smaller value than the default 32,000.
    #[arg(long)]
    pub max_output_tokens: Option<usize>,
}

fn parse_format(s: &str) -> Result<condense_formats::Format, String> {
    s.parse::<condense_formats::Format>()
        .map_err(|e| e.to_string())
}

#[derive(Debug, Args)]
pub struct StatsArgs {
    #[command(flatten)]
    pub input: InputArgs,
    /// The model's context window, in tokens, for the budget.
    #[arg(long, default_value_t = 200_000)]
    pub context_window: usize,
    /// The model's maximum output tokens, for the effective window and autocompact threshold.
    #[arg(long, default_value_t = 32_000)]
    pub max_output_tokens: usize,
    /// Tokenizer: o200k_base, cl100k_base, tiktoken-o200k_base, tiktoken-cl100k_base, estimate.
    #[arg(long, default_value = "o200k_base")]
    pub tokenizer: String,
    /// How many tools to list by tokens in their results.
    #[arg(long, default_value_t = 10)]
    pub top: usize,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ReportFormat {
    Text,
    Json,
}

#[derive(Debug, Args)]
pub struct CompressArgs {
    #[command(flatten)]
    pub input: InputArgs,
    /// The pipeline file (TOML); the embedded default pipeline when omitted.
    #[arg(long, short, value_name = "FILE")]
    pub pipeline: Option<PathBuf>,
    /// Write the result here instead of standard output.
    #[arg(long, short, value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// The store directory (default: the pipeline's [store], else .condense/ beside the input).
    #[arg(long, value_name = "DIR")]
    pub store: Option<PathBuf>,
    #[command(flatten)]
    pub model: ModelArgs,
    /// The per-stage report on standard error: a table, or JSON.
    #[arg(long, value_enum, default_value = "text")]
    pub report: ReportFormat,
    /// The time stages see (RFC 3339 or Unix milliseconds); the system clock when omitted.
    #[arg(long, value_name = "TIME")]
    pub now: Option<String>,
    /// The session id under which stage state and archives are kept (default: derived from the
    /// conversation).
    #[arg(long)]
    pub session: Option<String>,
    /// Recovery chain: if the result still exceeds the window (less the output reserve),
    /// force the levels' triggers from lightest to heaviest until it fits; exit 1 if nothing
    /// does (the best result is still written).
    #[arg(long)]
    pub fit: bool,
    /// The model answered prompt_too_long: like --fit, and at least one forced level must
    /// shrink the conversation.
    #[arg(long)]
    pub prompt_too_long: bool,
}

#[derive(Debug, Args)]
pub struct ExpandArgs {
    #[command(flatten)]
    pub input: InputArgs,
    /// The store the compressed conversation was written with.
    #[arg(long, value_name = "DIR")]
    pub store: Option<PathBuf>,
    /// Write the result here instead of standard output.
    #[arg(long, short, value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// The session id used when compressing, if it was given explicitly.
    #[arg(long)]
    pub session: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ColorChoice {
    Auto,
    Always,
    Never,
}

#[derive(Debug, Args)]
pub struct DiffArgs {
    #[command(flatten)]
    pub input: InputArgs,
    /// The pipeline file; the embedded default when omitted.
    #[arg(long, short, value_name = "FILE")]
    pub pipeline: Option<PathBuf>,
    /// Show only this stage's diff.
    #[arg(long, value_name = "NAME")]
    pub stage: Option<String>,
    /// Colour the diff: auto (on a terminal, unless NO_COLOR is set), always, never.
    #[arg(long, value_enum, default_value = "auto")]
    pub color: ColorChoice,
    /// The time stages see (RFC 3339 or Unix ms). Default: 1970-01-01, so reviews are
    /// reproducible; time-based behaviour needs an explicit --now.
    #[arg(long, value_name = "TIME")]
    pub now: Option<String>,
    #[command(flatten)]
    pub model: ModelArgs,
}

#[derive(Debug, Args)]
pub struct SnapshotArgs {
    /// Transcript files, or folders to walk.
    #[arg(required = true, value_name = "DIR_OR_FILE")]
    pub inputs: Vec<PathBuf>,
    /// The pipeline file; the embedded default when omitted.
    #[arg(long, short, value_name = "FILE")]
    pub pipeline: Option<PathBuf>,
    /// Where snapshots live: one folder per transcript, one `NN-stage.snap` per stage.
    #[arg(long, value_name = "OUTDIR")]
    pub snapshots: PathBuf,
    /// Take the new versions as the reference (write `.snap`, remove `.snap.new`).
    #[arg(long)]
    pub accept: bool,
    /// The time stages see (RFC 3339 or Unix ms); default 1970-01-01.
    #[arg(long, value_name = "TIME")]
    pub now: Option<String>,
    /// Colour the diffs: auto, always, never.
    #[arg(long, value_enum, default_value = "auto")]
    pub color: ColorChoice,
}

#[derive(Debug, Args)]
pub struct CompareArgs {
    /// Transcript files, or folders to walk.
    #[arg(required = true, value_name = "FILE")]
    pub inputs: Vec<PathBuf>,
    /// A pipeline file; give two or more.
    #[arg(long = "pipeline", short, value_name = "FILE", required = true)]
    pub pipelines: Vec<PathBuf>,
    #[command(flatten)]
    pub model: ModelArgs,
    /// The time stages see (RFC 3339 or Unix ms); default 1970-01-01.
    #[arg(long, value_name = "TIME")]
    pub now: Option<String>,
    /// Print JSON instead of tables.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Subcommand)]
pub enum PipelineCommand {
    /// Print the effective pipeline as TOML (the embedded default, or FILE).
    Show {
        /// A pipeline file; the embedded default when omitted.
        #[arg(long, short, value_name = "FILE")]
        pipeline: Option<PathBuf>,
    },
    /// Validate a pipeline file and load every plugin it names, with its config.
    Check {
        /// The pipeline file.
        file: PathBuf,
    },
}

#[derive(Debug, Subcommand)]
pub enum PluginCommand {
    /// Scaffold an out-of-tree stage plugin crate (Cargo.toml, a stage, a test, a pipeline).
    New(PluginNewArgs),
}

#[derive(Debug, Args)]
pub struct PluginNewArgs {
    /// The plugin's name: lowercase letters, digits and dashes.
    pub name: String,
    /// The folder to create it in.
    #[arg(long, default_value = ".")]
    pub dir: PathBuf,
    /// The `crates/` folder of a condense checkout (default: the one this condense was built
    /// from), for the condense-abi and condense-model path dependencies.
    #[arg(long, value_name = "DIR")]
    pub abi_path: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct PluginsArgs {
    /// Also print each plugin's description and config keys.
    #[arg(long)]
    pub details: bool,
    /// Print the details as Markdown (what docs/stages.md is generated from).
    #[arg(long)]
    pub markdown: bool,
    /// Also search the plugin folders named in this pipeline file.
    #[arg(long, short, value_name = "FILE")]
    pub pipeline: Option<PathBuf>,
}
