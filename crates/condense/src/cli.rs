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

/// What the commands that take folders say about them in `--help` (a macro, because `concat!`
/// takes literals only).
macro_rules! folders_help {
    () => {
        "Folders: given a folder, the command runs on every session in it: the .json, .jsonl and \
         .traj files, searched recursively (~/.claude/projects/<project>/, ~/.codex/sessions/). \
         Hidden folders, condense's stores (.condense/, or any folder with a store's layout: \
         only store.db and its -wal/-shm files, or an older store's blobs/, state/, records/), \
         compress outputs (NAME.condensed.EXT) and other files \
         are skipped. A session file that cannot be read or parsed is named on stderr in one \
         line and skipped; the others still run.\n\n\
         Exit codes: 0 done; 1 when a file was skipped (the others were done) or anything \
         else failed; 2 usage or configuration error (nothing was run)."
    };
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Token counts by role, block type and tool, the budget, duplicates and images.
    #[command(after_help = concat!(
        "On a folder: each session's table, then one row per file and a total (--json: one \
         object with `files`, `total` and `skipped`).\n\n",
        folders_help!()
    ))]
    Stats(StatsArgs),
    /// Run the pipeline and write the compressed conversation (same format as the input).
    #[command(after_help = concat!(
        "On a folder: each session is compressed with its own store (.condense/ beside it, or \
         --store) and written beside it as NAME.condensed.EXT (a.jsonl -> a.condensed.jsonl; \
         later runs do not take these for sessions), or with --out DIR under DIR, mirroring \
         the folder's layout. A summary table (file, format, tokens before and after, status) \
         ends the report (--report json: a JSON list, one entry per file). --out - (standard \
         output) and --session are refused for a folder. A file whose compression fails is skipped like an \
         unreadable one; with --fit, a file that does not fit also makes the exit code 1.\n\n",
        folders_help!()
    ))]
    Compress(CompressArgs),
    /// Rebuild the original conversation from a compressed one and its store.
    Expand(ExpandArgs),
    /// Show what each stage does: a unified diff of the conversation before and after it.
    #[command(after_help = concat!(
        "On a folder: the diffs of every session, each under a header naming its file.\n\n",
        folders_help!()
    ))]
    Diff(DiffArgs),
    /// Render every stage's output for transcripts and compare with stored snapshots (a CI
    /// gate for pipeline changes: exit 1 and `.snap.new` files when anything differs).
    #[command(after_help = concat!(
        "Snapshots: one folder per transcript under --snapshots, holding 00-retention.snap \
         (tokens, cut and condense eval's probes on the pipeline's output) and NN-STAGE.snap \
         per stage, in insta's format. A changed one is written beside as .snap.new. Review \
         them with --review, or with cargo-insta (the snapshot folder gets a Cargo.toml for \
         it): cargo insta review --manifest-path SNAPSHOTS/Cargo.toml (accept and reject \
         take the same flag). The exit code is 1 while a snapshot differs (left pending, \
         skipped or rejected).\n\n",
        folders_help!()
    ))]
    Snapshot(SnapshotArgs),
    /// Run several pipelines on the same transcripts and print them side by side.
    #[command(after_help = folders_help!())]
    Compare(CompareArgs),
    /// Measure what survives compression: run pipelines and baselines at a tight window and
    /// score each output with probes taken from the original (paths written, errors, the last
    /// request, integrity).
    #[command(
        long_about = "Measure what survives compression.\n\n\
            Runs each pipeline (-p; the embedded default pipeline when none is given) and each \
            baseline on every conversation at a window tight enough that the request must lose most \
            of its tokens, with the recovery chain (like `compress --fit`), against a throwaway \
            store. Every output is scored with probes computed from the ORIGINAL conversation by \
            code independent of the stages:\n\n\
            \x20 artifact   every path a tool call wrote: Write/Edit/editor/apply_patch calls,\n\
            \x20            shell `>`, `>>`, tee, sed -i, mv, cp, rm, touch, mkdir. Kept when\n\
            \x20            the path still appears in the compressed conversation.\n\
            \x20 errors     the first meaningful line (cut to 200 chars) of every error result\n\
            \x20            (is_error, a non-zero exit code, a Python traceback). Kept when it\n\
            \x20            still appears verbatim.\n\
            \x20 request    the user's last request. Kept when it still appears verbatim.\n\
            \x20 integrity  4 checks: tool results still answer earlier calls, tool_use ids and\n\
            \x20            message ids stay unique, the written output reads back equal.\n\n\
            The window: unless --context-window is given, each conversation gets its own, chosen \
            so the request must lose --cut (85%) of its tokens: the fit limit (the window less the \
            output reserve) is 15% of the conversation's tokens and the output reserve is an eighth \
            of the window. Conversations under --min-tokens are not long enough to need \
            compressing and are skipped. Stages see --now, by default 2100-01-01, so the prompt \
            cache is cold, as when a user resumes an old session (the realistic, harder case).\n\n\
            Baselines: truncate-oldest (drop the oldest messages to the fit limit), mask+truncate \
            (observation-mask, then truncate-oldest), autocompact (level 5 alone).\n\n\
            --judge adds an LLM judge (Factory's probe method): the model answers four questions \
            about each output (artifact, recall, continuation, decision) and a second call grades \
            each answer 0-5 against the original. It is optional and non-deterministic, and makes 8 \
            API calls per output.",
        after_help = concat!(folders_help!(), "\n\nExamples:\n  \
            condense eval session.jsonl\n  \
            condense eval transcripts/ -p mine.toml --baseline truncate-oldest --json\n  \
            condense eval session.jsonl --context-window 32000 --baseline none\n  \
            condense eval session.jsonl --judge anthropic --judge-model claude-sonnet-4-5")
    )]
    Eval(EvalArgs),
    /// Show or check a pipeline file.
    #[command(subcommand)]
    Pipeline(PipelineCommand),
    /// List the plugins condense can find, with versions and paths.
    Plugins(PluginsArgs),
    /// Write a new stage plugin: `condense plugin new NAME`.
    #[command(subcommand)]
    Plugin(PluginCommand),
    /// Print a shell completion script: `condense completions bash > ~/.local/share/bash-completion/completions/condense`.
    #[command(after_help = "Install:\n  \
        bash  condense completions bash > ~/.local/share/bash-completion/completions/condense\n  \
        zsh   condense completions zsh > ~/.zfunc/_condense   (with fpath+=~/.zfunc before compinit)\n  \
        fish  condense completions fish > ~/.config/fish/completions/condense.fish")]
    Completions(CompletionsArgs),
    /// Print the manual page (roff): `condense man | man -l -`.
    Man,
    /// Run a proxy in front of the model API: every request kept inside the window.
    #[command(after_help = crate::serve::AFTER_HELP)]
    Serve(crate::serve::ServeArgs),
}

/// The shells `condense completions` writes for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Shell {
    Bash,
    Zsh,
    Fish,
}

#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// The shell.
    #[arg(value_enum)]
    pub shell: Shell,
}

/// The subcommand named on the command line ("stats", "pipeline show"), for the `--help` an
/// argument error points to; None when there is none.
pub fn subcommand_named() -> Option<String> {
    let cmd = <Cli as clap::CommandFactory>::command();
    let mut current = &cmd;
    let mut path: Vec<String> = Vec::new();
    for arg in std::env::args().skip(1) {
        if arg.starts_with('-') {
            continue;
        }
        match current.find_subcommand(&arg) {
            Some(sub) => {
                path.push(arg);
                current = sub;
            }
            None => break,
        }
    }
    (!path.is_empty()).then(|| path.join(" "))
}

/// Where to read a conversation from and how to interpret it.
#[derive(Debug, Args)]
pub struct InputArgs {
    /// The conversation file; `-` reads standard input. stats, compress and diff also take a
    /// folder: every session in it.
    #[arg(value_name = "FILE", default_value = "-")]
    pub file: PathBuf,
    /// The input format; detected from the content when omitted. Said, it lets `compress`
    /// run turn after turn on an OpenAI Chat or Responses body leave the history the last run
    /// read unread (an Anthropic body's is left unread either way).
    #[arg(long, value_parser = FormatParser)]
    pub format: Option<condense_formats::Format>,
    /// JSON pointer to the messages inside a wrapper object, e.g. `/messages`, `/0/traj`;
    /// `*` selects every element (`/*/traj`). Common wrappers are found without it.
    #[arg(long, value_name = "POINTER")]
    pub select: Option<String>,
}

/// Overrides of the pipeline's `[model]` table.
#[derive(Debug, Default, Args)]
pub struct ModelArgs {
    /// The model's context window, in tokens (overrides the pipeline's `[model]`).
    #[arg(long)]
    pub context_window: Option<usize>,
    /// The model's maximum output tokens (overrides the pipeline's `[model]`; default 32,000).
    /// The output reserve, kept free for the response and for a summary, is the smallest of
    /// this, 20,000 and a quarter of the window (a 32,000 window: 8,000).
    #[arg(long)]
    pub max_output_tokens: Option<usize>,
    /// Tokens of the system prompt and tool definitions the file does not hold (a Claude Code
    /// session): the budget counts them (overrides the pipeline's `[model]` fixed_tokens).
    #[arg(long, value_name = "N")]
    pub fixed_tokens: Option<usize>,
}

/// `--format`: a [`condense_formats::Format`] name, listed in `--help` and in the error for a
/// wrong one.
#[derive(Debug, Clone, Copy)]
struct FormatParser;

impl clap::builder::TypedValueParser for FormatParser {
    type Value = condense_formats::Format;

    fn parse_ref(
        &self,
        cmd: &clap::Command,
        arg: Option<&clap::Arg>,
        value: &std::ffi::OsStr,
    ) -> Result<Self::Value, clap::Error> {
        // Checked against the names first, so a wrong one gets clap's error listing them.
        clap::builder::PossibleValuesParser::new(
            condense_formats::Format::ALL.map(condense_formats::Format::as_str),
        )
        .parse_ref(cmd, arg, value)?;
        value
            .to_str()
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| clap::Error::new(clap::error::ErrorKind::InvalidValue).with_cmd(cmd))
    }

    fn possible_values(
        &self,
    ) -> Option<Box<dyn Iterator<Item = clap::builder::PossibleValue> + '_>> {
        Some(Box::new(
            condense_formats::Format::ALL
                .iter()
                .map(|f| clap::builder::PossibleValue::new(f.as_str())),
        ))
    }
}

#[derive(Debug, Args)]
pub struct StatsArgs {
    #[command(flatten)]
    pub input: InputArgs,
    /// The model's context window, in tokens, for the budget. Small windows scale the output
    /// reserve (and, when it leaves no threshold, the autocompact buffer); the budget says so.
    #[arg(long, default_value_t = 200_000)]
    pub context_window: usize,
    /// The model's maximum output tokens. The output reserve, kept free for the response and
    /// for a summary (the effective window is the window less it), is the smallest of this,
    /// 20,000 and a quarter of the window.
    #[arg(long, default_value_t = 32_000)]
    pub max_output_tokens: usize,
    /// Tokens of the system prompt and tool definitions the file does not hold (a Claude Code
    /// session): the budget counts them as fixed.
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub fixed_tokens: usize,
    /// Tokenizer: o200k_base, cl100k_base, tiktoken-o200k_base, tiktoken-cl100k_base, estimate.
    #[arg(long, default_value = "o200k_base")]
    pub tokenizer: String,
    /// How many tools to list by tokens in their results (0: none, and no table).
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
    /// Write the result here instead of standard output (`-`: standard output). With a folder:
    /// the folder to write the outputs under (default: beside each input, as
    /// NAME.condensed.EXT). A new file gets the umask's usual mode; a replaced one keeps its own.
    #[arg(long, short, value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// The store directory (default: the pipeline's `[store]`, else .condense/ beside the input).
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
    /// Ignore the stage state saved by earlier runs of this session (committed collapses,
    /// replacement decisions, ...) and replace it. State is kept per window and pipeline
    /// settings, so another --context-window never inherits it; --fresh also drops the state
    /// saved under the same settings. The run still leaves a resume point for the next.
    #[arg(long)]
    pub fresh: bool,
    /// Run the stages over the whole input even when it only extends the input of this
    /// session's previous run. By default such a run starts from the previous output plus the
    /// new messages (same pipeline and settings only), so compressing once per turn does not
    /// redo the whole session; `expand` restores the whole input either way.
    #[arg(long)]
    pub no_resume: bool,
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
    /// Write what could be restored even when the store cannot resolve every marker (a lost
    /// record, a placeholder with no entry); a warning still names them. Without it, expand
    /// exits 1 and writes nothing.
    #[arg(long)]
    pub partial: bool,
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
    /// The time stages see (RFC 3339 or Unix ms); the system clock when omitted, as for
    /// `compress`, so the diff shows what `compress` would do now.
    #[arg(long, value_name = "TIME")]
    pub now: Option<String>,
    #[command(flatten)]
    pub model: ModelArgs,
    /// Print JSON instead: per stage its figures, what it did to the probes and its diff.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct SnapshotArgs {
    /// Transcript files, or folders to walk.
    #[arg(required = true, value_name = "DIR_OR_FILE")]
    pub inputs: Vec<PathBuf>,
    /// The pipeline file; the embedded default when omitted.
    #[arg(long, short, value_name = "FILE")]
    pub pipeline: Option<PathBuf>,
    /// Where snapshots live: one folder per transcript, with `00-retention.snap` and one
    /// `NN-stage.snap` per stage (and a `Cargo.toml` for cargo-insta, written once).
    #[arg(long, value_name = "OUTDIR")]
    pub snapshots: PathBuf,
    /// Take the new versions as the reference (write `.snap`, remove `.snap.new`); with
    /// names, only those: a snapshot (`TRANSCRIPT/02-snip`, or a path ending so), or a
    /// transcript's folder name (all its snapshots). Put the names after the inputs.
    #[arg(long, value_name = "NAME", num_args = 0.., conflicts_with = "review")]
    pub accept: Option<Vec<String>>,
    /// Go through each changed snapshot: show the retention change and the diff, then ask
    /// accept (a), reject (r), skip (s) or quit (q). Answers are read from the terminal, or
    /// one per line from piped standard input; when the answers run out, the rest are skipped.
    #[arg(long, conflicts_with_all = ["json", "markdown"])]
    pub review: bool,
    /// Print JSON instead of diffs: per transcript its retention (before and now) and each
    /// snapshot's status.
    #[arg(long, conflicts_with = "markdown")]
    pub json: bool,
    /// Print a Markdown summary instead of diffs (per transcript: tokens, cut, probes, stages
    /// that changed), for a pull request comment.
    #[arg(long)]
    pub markdown: bool,
    /// The time stages see (RFC 3339 or Unix ms). Default: 1970-01-01T00:00:00Z, pinned (not
    /// the clock) so snapshots are reproducible: a time gap is measured from 1970, so the
    /// prompt cache always reads as hot. Give --now to snapshot time-based behaviour.
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
    /// The time stages see (RFC 3339 or Unix ms); the system clock when omitted, as for
    /// `compress`.
    #[arg(long, value_name = "TIME")]
    pub now: Option<String>,
    /// Print JSON instead of tables.
    #[arg(long, conflicts_with = "markdown")]
    pub json: bool,
    /// Print a Markdown summary instead (per transcript: tokens, cut, probes, stages that
    /// changed the conversation), for a pull request comment.
    #[arg(long)]
    pub markdown: bool,
}

#[derive(Debug, Args)]
pub struct EvalArgs {
    /// Transcript files, or folders to walk (see Folders below).
    #[arg(required = true, value_name = "FILE_OR_DIR")]
    pub inputs: Vec<PathBuf>,
    /// A pipeline file to evaluate, labelled by its file name (repeatable). Default: the
    /// embedded default pipeline, labelled `default`.
    #[arg(long = "pipeline", short, value_name = "PIPELINE")]
    pub pipelines: Vec<PathBuf>,
    /// A baseline to compare with (repeatable): truncate-oldest, mask+truncate, autocompact,
    /// or none. Default: all three.
    #[arg(long = "baseline", value_name = "NAME")]
    pub baselines: Vec<String>,
    /// Run every conversation at this window (an eighth reserved for the output) instead of
    /// one chosen per conversation from --cut.
    #[arg(long, value_name = "N")]
    pub context_window: Option<String>,
    /// The share of its tokens each conversation must lose: the fit limit is
    /// ceil((1 - FRACTION) x its tokens).
    #[arg(long, value_name = "FRACTION", default_value = "0.85")]
    pub cut: String,
    /// Conversations with fewer tokens are not long enough to need compressing: skipped.
    #[arg(long, value_name = "N", default_value = "10000")]
    pub min_tokens: String,
    /// The time stages see (RFC 3339 or Unix ms). Default: 2100-01-01T00:00:00Z (a cold
    /// prompt cache).
    #[arg(long, value_name = "TIME")]
    pub now: Option<String>,
    /// Print JSON instead of tables.
    #[arg(long)]
    pub json: bool,
    /// Also grade each output with an LLM judge: anthropic or openai (OpenAI-compatible).
    #[arg(long, value_name = "API")]
    pub judge: Option<String>,
    /// The judge's model name (required with --judge).
    #[arg(long, value_name = "MODEL")]
    pub judge_model: Option<String>,
    /// The judge API's base URL (default: the provider's).
    #[arg(long, value_name = "URL")]
    pub judge_base_url: Option<String>,
    /// The NAME of the environment variable holding the judge's API key (default
    /// ANTHROPIC_API_KEY, or OPENAI_API_KEY with OpenAI's own URL; "" sends none).
    #[arg(long, value_name = "VAR")]
    pub judge_api_key_env: Option<String>,
}

#[derive(Debug, Subcommand)]
pub enum PipelineCommand {
    /// Print the effective pipeline as TOML (the embedded default, or FILE).
    Show {
        /// A pipeline file (as `pipeline check FILE` takes it); the embedded default when
        /// omitted.
        #[arg(value_name = "FILE", conflicts_with = "pipeline")]
        file: Option<PathBuf>,
        /// The same, as the other commands take it.
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
