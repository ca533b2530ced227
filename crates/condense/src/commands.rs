//! The subcommands.

use crate::cli::{
    Cli, Command, CompressArgs, PipelineCommand, PluginsArgs, ReportFormat, StatsArgs,
};
use crate::input::{is_folder, read_input, read_input_knowing, Input};
use crate::output::{stage_output, write_output, Staged};
use crate::stats;
use crate::Failure;
use condense_budget::BudgetConfig;
use condense_host::{
    session_key, LoadedPipeline, Pipeline, ReadFrom, RunOptions, RunResult, Unread,
};
use condense_store::Store;
use condense_text::thousands;
use condense_tokens::{TokenCounter, TokenizerKind};
use serde::Serialize;
use std::fmt::Write;
use std::path::{Path, PathBuf};

pub fn run(cli: Cli) -> Result<(), Failure> {
    match cli.command {
        Command::Stats(args) => stats_cmd(args),
        Command::Compress(args) => compress(args),
        Command::Expand(args) => crate::expand::expand(args),
        Command::Diff(args) => crate::review::diff(args),
        Command::Snapshot(args) => crate::review::snapshot(args),
        Command::Compare(args) => crate::compare::compare(args),
        Command::Eval(args) => crate::eval::eval(args),
        Command::Pipeline(PipelineCommand::Show { file, pipeline }) => {
            let shown = load_pipeline(pipeline.or(file).as_deref())?.to_toml();
            let shown = shown.map_err(|e| Failure::run(format!("pipeline show: {e}")))?;
            print!("{shown}");
            Ok(())
        }
        Command::Pipeline(PipelineCommand::Check { file }) => check(&file),
        Command::Plugins(args) => plugins(args),
        Command::Plugin(crate::cli::PluginCommand::New(args)) => crate::scaffold::plugin_new(args),
        Command::Completions(args) => crate::docs::completions(args.shell),
        Command::Man => crate::docs::man(),
        Command::Serve(args) => crate::serve::serve(args),
    }
}

/// Applies `--context-window` / `--max-output-tokens` / `--fixed-tokens` to a pipeline and
/// re-validates its budget.
pub fn apply_model_args(
    pipeline: &mut Pipeline,
    model: &crate::cli::ModelArgs,
) -> Result<(), Failure> {
    if let Some(w) = model.context_window {
        pipeline.budget.context_window = w;
    }
    if let Some(m) = model.max_output_tokens {
        pipeline.budget.max_output_tokens = m;
    }
    if let Some(f) = model.fixed_tokens {
        pipeline.budget.fixed_tokens = f;
    }
    if model.context_window.is_some()
        || model.max_output_tokens.is_some()
        || model.fixed_tokens.is_some()
    {
        pipeline.budget.validate().map_err(|e| {
            Failure::usage(format!("--context-window/--max-output-tokens/--fixed-tokens: {e} (a small window needs a smaller --max-output-tokens)"))
        })?;
    }
    Ok(())
}

pub fn load_pipeline(path: Option<&Path>) -> Result<Pipeline, Failure> {
    match path {
        Some(p) => {
            let pipeline = Pipeline::from_file(p).map_err(|e| Failure::usage(e.to_string()))?;
            for w in pipeline.warnings() {
                crate::term::warn(&w);
            }
            Ok(pipeline)
        }
        None => Ok(Pipeline::default_pipeline()),
    }
}

fn stats_cmd(args: StatsArgs) -> Result<(), Failure> {
    let tokenizer: TokenizerKind = args
        .tokenizer
        .parse()
        .map_err(|e| Failure::usage(format!("--tokenizer: {e}")))?;
    let budget = BudgetConfig {
        context_window: args.context_window,
        max_output_tokens: args.max_output_tokens,
        fixed_tokens: args.fixed_tokens,
        ..BudgetConfig::default()
    };
    budget.validate().map_err(|e| {
        Failure::usage(format!(
            "--context-window/--max-output-tokens/--fixed-tokens: {e}"
        ))
    })?;
    let counter = TokenCounter::new(tokenizer);
    if is_folder(&args.input) {
        return crate::folder::stats(&args, &counter, &budget);
    }
    let input = read_input(&args.input)?;
    let s = stats_of(&input, &counter, &budget, &args);
    if args.json {
        crate::output::print_json(&s)
    } else {
        crate::output::print(&stats::render(&s))
    }
}

/// The statistics of one input (a file, or one file of a folder).
pub(crate) fn stats_of(
    input: &Input,
    counter: &TokenCounter,
    budget: &BudgetConfig,
    args: &StatsArgs,
) -> stats::Stats {
    stats::compute(&input.source(), &input.doc, counter, budget, args.top)
}

/// Parses `--now`: Unix milliseconds, or RFC 3339 (`2025-09-03T01:00:00Z`, or with an offset;
/// without a zone, UTC).
pub fn parse_now(s: &str) -> Result<i64, Failure> {
    if let Ok(ms) = s.parse::<i64>() {
        return Ok(ms);
    }
    condense_model::time::parse_rfc3339_ms(s).ok_or_else(|| {
        Failure::usage(format!(
            "--now: expected Unix milliseconds or RFC 3339 like 2025-09-03T01:00:00Z, got `{s}`"
        ))
    })
}

#[derive(Serialize)]
pub(crate) struct CompressReport<'a> {
    source: String,
    format: &'static str,
    store: String,
    conversations: usize,
    pub tokens_before: usize,
    pub tokens_after: usize,
    tokens_saved: usize,
    /// What was scaled to fit a small window ("window 32,000: output reserve scaled to 8,000").
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub budget_notes: Vec<String>,
    /// How the runs that resumed from their previous output started (each run's `resumed`
    /// says it in the JSON report).
    #[serde(skip)]
    resume_note: Option<String>,
    stages: Vec<StageTotal>,
    runs: &'a [RunResult],
}

#[derive(Serialize)]
struct StageTotal {
    name: String,
    plugin: String,
    status: String,
    tokens_before: usize,
    tokens_after: usize,
    tokens_saved: usize,
    millis: f64,
    notes: Vec<String>,
}

fn compress(args: CompressArgs) -> Result<(), Failure> {
    let mut pipeline = load_pipeline(args.pipeline.as_deref())?;
    apply_model_args(&mut pipeline, &args.model)?;
    let now_ms = args.now.as_deref().map(parse_now).transpose()?;
    if is_folder(&args.input) {
        return crate::folder::compress(&args, pipeline, now_ms);
    }
    let path = (args.input.file.as_os_str() != "-").then_some(args.input.file.as_path());
    let store_dir = store_dir_for(&args, &pipeline, path);
    // The store is opened beside the plugins' loading too: opening it (the database, its
    // schema, its log) took 0.7-1.3 ms before the loading started, up to a sixth of `main` on
    // a small input.
    let ((input, run_store), loaded) = crate::input::read_while_loading(pipeline, || {
        let run_store = crate::known::RunStore::at(&store_dir, &args);
        let input = run_store.read(|known| read_input_knowing(&args.input, known));
        (input, run_store)
    });
    // A bad input is reported before a plugin that does not load, as when they were in turn.
    let mut input = input?;
    let loaded = loaded?;
    let store = run_store.open()?;
    let out = (&store, args.out.as_deref());
    let mut done = compress_input(&mut input, &loaded, out, now_ms, &args)?;
    for by in &done.fit_by {
        eprintln!("condense: fits after forcing `{by}`");
    }
    done.write_out()?;

    let mut report = build_report(
        &input.source(),
        input.doc.format().as_str(),
        &store_dir,
        &done.runs,
    );
    report.budget_notes = loaded.pipeline.budget.scaling_notes();
    match args.report {
        ReportFormat::Json => eprintln!("{}", crate::output::json_text(&report)?),
        ReportFormat::Text => eprint!("{}", render_report(&report)),
    }
    let unfit = std::mem::take(&mut done.unfit);
    // The process ends with this command: the input (its bytes and its conversations) and
    // the output go back to the system at exit instead of being freed string by string and
    // unmapped (a turn at 1M tokens: 1.9 M instructions fewer, 0.96x the time). The store is
    // closed as usual.
    std::mem::forget(input);
    std::mem::forget(done);
    match unfit.first() {
        Some(first) => Err(Failure::run(format!(
            "does not fit: {first}{}; the best result was written",
            if unfit.len() > 1 {
                format!(" (and {} more)", unfit.len() - 1)
            } else {
                String::new()
            }
        ))),
        None => Ok(()),
    }
}

/// The store an input (at `path`, `None` for stdin) is compressed with: `--store`, else the
/// pipeline's `[store]`, else `.condense/` beside the input.
pub(crate) fn store_dir_for(
    args: &CompressArgs,
    pipeline: &Pipeline,
    path: Option<&Path>,
) -> std::path::PathBuf {
    args.store
        .clone()
        .or_else(|| pipeline.store_dir.clone())
        .unwrap_or_else(|| crate::input::default_store_dir(path))
}

/// What compressing one input gave.
pub(crate) struct Compressed {
    /// The output, in the input's format.
    pub out: Vec<u8>,
    /// Where the output goes ([`write_output`]'s places), and the file written beside it
    /// while the store committed, when it was ([`stage_output`]).
    out_path: Option<PathBuf>,
    staged: Option<Staged>,
    /// One run per conversation.
    pub runs: Vec<RunResult>,
    /// With `--fit`: one line per conversation that still does not fit after forcing every level.
    pub unfit: Vec<String>,
    /// With `--fit`: the level whose forcing made a conversation fit, per conversation.
    pub fit_by: Vec<String>,
}

impl Compressed {
    /// Puts the output where [`compress_input`] was told: the file staged while the store
    /// committed is renamed into place, anything else is written now.
    pub(crate) fn write_out(&mut self) -> Result<(), Failure> {
        match self.staged.take() {
            Some(staged) => staged.publish(),
            None => write_output(self.out_path.as_deref(), &self.out),
        }
    }
}

/// Runs the pipeline on every conversation of `input` (in place) with the store at
/// `store_dir`, and gives the output bytes, archived as they will be read back, to be put at
/// `out_path` with [`Compressed::write_out`].
pub(crate) fn compress_input(
    input: &mut Input,
    loaded: &LoadedPipeline,
    (store, out_path): (&Store, Option<&Path>),
    now_ms: Option<i64>,
    args: &CompressArgs,
) -> Result<Compressed, Failure> {
    // Every conversation's run and the records below, in one transaction, committed before
    // the output is written: a run killed on the way leaves the store as it was.
    let batch = store.batch();
    let opts = RunOptions {
        now_ms,
        format: input.doc.format().as_str().to_string(),
        record_outputs: false,
        forced: Vec::new(),
        disabled: condense_host::env_disabled(),
        state: if args.fresh {
            condense_host::StateMode::Fresh
        } else {
            condense_host::StateMode::Saved
        },
        // Run once per turn on a growing session, a run starts from the previous output
        // (`--fresh` still saves the point, it does not use it).
        resume: !args.no_resume,
    };

    let mut runs = Vec::new();
    let mut unfit: Vec<String> = Vec::new();
    let mut fit_by: Vec<String> = Vec::new();
    let labels = input.doc.labels();
    let away = send_text_away(input);
    for i in 0..input.doc.conversations().len() {
        // Taken out of the document while the stages run; the document still answers
        // `original_text`, so the archive keeps the exact bytes of what it removes.
        let conv = std::mem::take(&mut input.doc.conversations_mut()[i]);
        let doc = &input.doc;
        let texts = |m: &condense_model::Message, at: usize| {
            doc.original_text_at(i, m, at)
                .map(condense_host::archive::Original::of)
        };
        let read_all = || doc.read_unread(i).map_err(|e| e.to_string());
        let read = ReadFrom {
            texts: &texts,
            fingerprints: doc.message_fingerprints(i),
            unread: doc.unread(i).map(|mask| Unread {
                mask,
                read_all: &read_all,
            }),
            lists_known: doc.lists_known(),
        };
        let session = session_key(
            &conv,
            labels.get(i).map_or("", String::as_str),
            args.session.as_deref(),
        );
        let mut result = if args.fit || args.prompt_too_long {
            let fit =
                loaded.fit_with_texts(conv, store, &session, &opts, args.prompt_too_long, &read)?;
            if !fit.fits {
                let label = labels
                    .get(i)
                    .filter(|l| !l.is_empty())
                    .map_or(String::new(), |l| format!(" {l}"));
                unfit.push(format!(
                    "conversation{label} still needs {} tokens with a {}-token window after forcing every level",
                    thousands(fit.result.budget_after.used + fit.result.budget_after.output_reserve),
                    thousands(fit.result.budget_after.context_window)
                ));
            } else if let Some(by) = &fit.fit_by {
                fit_by.push(by.clone());
            }
            fit.result
        } else {
            loaded.run_with_texts(conv, store, &session, &opts, &read)?
        };
        if input.select.is_some() {
            // The run records the format; expand also needs the pointer it was read with.
            let read_as = condense_host::ReadAs {
                format: opts.format.clone(),
                select: input.select.clone(),
            };
            condense_host::archive::record_read_as(store, &session, &read_as)
                .map_err(|e| Failure::run(e.to_string()))?;
        }
        // The report does not serialize the conversation: move it back into the document.
        input.doc.conversations_mut()[i] = std::mem::take(&mut result.conversation);
        runs.push(result);
    }
    if away {
        crate::memory::return_free_pages();
    }
    input
        .doc
        .bring_text_back()
        .map_err(|e| Failure::run(e.to_string()))?;
    // With the fingerprints each run made of its output (the writer looks texts up by them),
    // once every conversation is back: any change forgets them.
    for (i, run) in runs.iter().enumerate() {
        input
            .doc
            .vouch_fingerprints(i, run.output_fingerprints.clone());
    }
    crate::known::remember(store, input, &runs, args)?;
    let session = crate::known::session_of(&runs);
    let (mut memo, kept_texts) = crate::write_texts::load(store, session);
    let stored = crate::known::trust_read_back(store, session, &mut memo);
    let out = input
        .doc
        .write_remembering(&mut memo)
        .map_err(|e| Failure::run(e.to_string()))?;
    let archive_and_commit = || {
        // Nothing changed (nothing to compress): the output is the input, byte for byte, and
        // reads back as the stages' output, which the run's record names already.
        if !(input.doc.is_input(&out) && input.doc.unchanged()) {
            let sessions: Vec<_> = runs
                .iter()
                .map(|r| (r.session.as_str(), &r.archive_run))
                .collect();
            let what = (&out, &mut memo, "output");
            condense_serve::compress::archive_as_written(
                &input.doc,
                what,
                input.select.clone(),
                &sessions,
                store,
            )
            .map_err(Failure::run)?;
            crate::known::keep_read_back(store, session, (&stored, &memo))?;
            crate::write_texts::save(store, session, &memo, &kept_texts)?;
        }
        batch.commit().map_err(|e| Failure::run(e.to_string()))
    };
    // A large output file is written and synced while the store commits (a turn at 1M tokens:
    // 560 KB, about a millisecond each); it is renamed into place once the commit is done
    // ([`Compressed::write_out`]), so an output is never seen without what expands it.
    let (staged, committed) = if out.len() >= STAGE_BESIDE_FROM {
        crate::concurrent::beside(
            "write output",
            || stage_output(out_path, &out),
            archive_and_commit,
        )
    } else {
        let committed = archive_and_commit();
        (Ok(None), committed)
    };
    committed?;
    Ok(Compressed {
        out_path: out_path.map(Path::to_path_buf),
        staged: staged?,
        out: out.into_bytes(),
        runs,
        unfit,
        fit_by,
    })
}

/// Lets the input's text go while the stages run, when it is large, came from a file and was
/// read whole: it is idle until the write but for the texts the archive keeps, which are then
/// read from the file ([`condense_formats::Document::send_text_away`]). At 4M tokens the text
/// was the largest single thing live at the run's peak (12.8 MB of 43). Whether it went.
///
/// A run with messages left unread (a turn of a session compressed before) keeps it: its
/// stages hold little, so the write, which needs the text back, is its peak anyway (with the
/// text sent away, a turn at 1M tokens peaked at 26.1 MiB against 26.0 and took 1.14x the
/// time). So does a Claude Code session: its events hold their lines as pieces of the text
/// (no copy of their own), which the document then cannot let go.
fn send_text_away(input: &mut Input) -> bool {
    let Some(file) = input.file.take() else {
        return false;
    };
    let conversations = input.doc.conversations().len();
    let read_whole = (0..conversations).all(|i| input.doc.unread(i).is_none());
    let size = file.metadata().map_or(0, |m| m.len());
    let name = input.source();
    read_whole && size >= AWAY_FROM && input.doc.send_text_away(file, &name)
}

/// From this size on, [`send_text_away`] lets the input's text go. Below it the write's peak
/// (the text back, the output, the archive's texts) is the run's peak anyway: a first run at
/// 1M tokens (3.2 MB) peaked at 34.3 MiB against 34.5 with the text kept, for 1.04x the time;
/// at 2M tokens (6.4 MB) 2.8 MiB lower, at 4M (12.8 MB) 10.4 MiB lower (54.9 against 65.3),
/// for 1.02-1.04x the time.
const AWAY_FROM: u64 = 4_000_000;

/// From this size on, `compress` writes its output file on a second thread while it commits
/// the store: below it, the thread costs more than the write.
const STAGE_BESIDE_FROM: usize = 256 * 1024;

pub(crate) fn build_report<'a>(
    source: &str,
    format: &'static str,
    store: &Path,
    runs: &'a [RunResult],
) -> CompressReport<'a> {
    let mut stages: Vec<StageTotal> = Vec::new();
    for run in runs {
        for (i, s) in run.stages.iter().enumerate() {
            if stages.len() <= i {
                stages.push(StageTotal {
                    name: s.name.clone(),
                    plugin: s.plugin.clone(),
                    status: s.status.to_string(),
                    tokens_before: 0,
                    tokens_after: 0,
                    tokens_saved: 0,
                    millis: 0.0,
                    notes: Vec::new(),
                });
            }
            let t = &mut stages[i];
            t.tokens_before += s.tokens_before;
            t.tokens_after += s.tokens_after;
            t.tokens_saved += s.tokens_saved;
            t.millis += s.millis;
            if s.status != t.status {
                t.status = "mixed".into();
            }
            if let Some(e) = &s.error {
                t.notes.push(format!("skipped: {e}"));
            }
            if runs.len() == 1 {
                t.notes.extend(s.report.notes.iter().cloned());
            }
        }
    }
    let before: usize = runs.iter().map(|r| r.tokens_before).sum();
    let after: usize = runs.iter().map(|r| r.tokens_after).sum();
    CompressReport {
        source: source.to_string(),
        format,
        store: store.display().to_string(),
        conversations: runs.len(),
        tokens_before: before,
        tokens_after: after,
        tokens_saved: before - after.min(before),
        budget_notes: Vec::new(),
        resume_note: resume_note(runs),
        stages,
        runs,
    }
}

/// The report's line on resumed runs: what the stages started from (one conversation), or how
/// many conversations resumed.
fn resume_note(runs: &[RunResult]) -> Option<String> {
    let resumed: Vec<_> = runs.iter().filter_map(|r| r.resumed.as_ref()).collect();
    let how = "--no-resume runs over the whole input";
    match (runs, resumed.as_slice()) {
        (_, []) => None,
        ([_], [r]) => Some(format!(
            "resumed: the first {} messages are the previous run's input, {}{}; the stages started from its output ({} messages){}: {} tokens ({how})",
            thousands(r.input_messages),
            match r.edited_messages {
                0 => "unchanged".to_string(),
                1 => "one of them edited since (taken from this input)".to_string(),
                n => format!("{} of them edited since (taken from this input)", thousands(n)),
            },
            match r.unread_messages {
                0 => String::new(),
                n => format!(" ({} of them not parsed again)", thousands(n)),
            },
            thousands(r.output_messages),
            match r.new_messages {
                0 => " (nothing new)".to_string(),
                n => format!(" and the {} new", thousands(n)),
            },
            thousands(r.tokens_started),
        )),
        _ => Some(format!(
            "resumed {} of {} conversations from their previous run's output ({how})",
            resumed.len(),
            runs.len()
        )),
    }
}

fn render_report(r: &CompressReport<'_>) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "condense: {} ({}, {} conversation{}), store {}",
        r.source,
        r.format,
        r.conversations,
        if r.conversations == 1 { "" } else { "s" },
        r.store
    );
    for note in r.budget_notes.iter().chain(&r.resume_note) {
        let _ = writeln!(o, "  {note}");
    }
    let _ = writeln!(
        o,
        "  {:<22} {:<8} {:>11} {:>11} {:>10} {:>9}",
        "stage", "status", "before", "after", "saved", "ms"
    );
    for s in &r.stages {
        let _ = writeln!(
            o,
            "  {:<22} {:<8} {:>11} {:>11} {:>10} {:>9.1}",
            s.name,
            s.status,
            thousands(s.tokens_before),
            thousands(s.tokens_after),
            thousands(s.tokens_saved),
            s.millis
        );
        for n in &s.notes {
            let _ = writeln!(o, "      {n}");
        }
    }
    let _ = writeln!(
        o,
        "  {:<22} {:<8} {:>11} {:>11} {:>10}",
        "total",
        "",
        thousands(r.tokens_before),
        thousands(r.tokens_after),
        thousands(r.tokens_saved)
    );
    o
}

fn check(file: &Path) -> Result<(), Failure> {
    let pipeline = Pipeline::from_file(file).map_err(|e| Failure::usage(e.to_string()))?;
    for w in pipeline.warnings() {
        crate::term::warn(&w);
    }
    // Everything that can go wrong in loading a pipeline is its configuration: exit 2, and a
    // config error points at the key in the file.
    let specs = pipeline.clone();
    let loaded = LoadedPipeline::load(pipeline).map_err(|e| {
        let located = match &e {
            condense_host::HostError::Config { stage, message } => {
                specs.stages.iter().find(|s| s.name == *stage).map(|spec| {
                    format!(
                        "stage `{stage}`: config rejected: {}",
                        specs.locate_config_error(spec, message)
                    )
                })
            }
            _ => None,
        };
        let mut failure = Failure::from(e);
        failure.code = 2;
        if let Some(message) = located {
            failure.message = message;
        }
        failure
    })?;
    println!(
        "{}: ok, {} stage{}",
        file.display(),
        loaded.stages.len(),
        if loaded.stages.len() == 1 { "" } else { "s" }
    );
    for s in &loaded.stages {
        match &s.path {
            Some(p) => println!("  {:<22} {} ({})", s.spec.name, s.spec.plugin, p.display()),
            None => println!("  {:<22} {} (disabled)", s.spec.name, s.spec.plugin),
        }
    }
    Ok(())
}

fn plugins(args: PluginsArgs) -> Result<(), Failure> {
    let pipeline = load_pipeline(args.pipeline.as_deref())?;
    let dirs = condense_host::discover::search_dirs(&pipeline.plugin_dirs);
    let found = condense_host::discover::list_plugins(&dirs);
    if found.is_empty() {
        let searched: Vec<String> = dirs.iter().map(|d| d.display().to_string()).collect();
        return Err(Failure::usage(format!(
            "no plugins found (searched: {}); {}, or set {}",
            searched.join(", "),
            condense_host::discover::HOW_TO_INSTALL,
            condense_host::discover::PLUGIN_PATH_ENV
        )));
    }
    if args.markdown {
        print!("{}", plugins_markdown(&found)?);
        return Ok(());
    }
    // A library that does not load is listed with its problem, and the first one ends the
    // command with exit 2 after the list (an installation problem, as for any pipeline).
    let mut unusable: Option<(usize, String)> = None;
    for (name, path) in found {
        match condense_abi::Plugin::load(&path).and_then(|p| p.metadata(&path)) {
            Ok(m) => {
                println!("{:<22} {:<8} {}", m.name, m.version, path.display());
                if args.details {
                    println!("    {}", m.description);
                    for k in &m.config_keys {
                        println!(
                            "    {:<24} {:<8} default {:<10} {}",
                            k.name, k.ty, k.default, k.description
                        );
                    }
                }
            }
            Err(e) => {
                println!("{name:<22} {:<8} {}  (unusable)", "?", path.display());
                let first = unusable.get_or_insert((0, e.to_string()));
                first.0 += 1;
            }
        }
    }
    match unusable {
        None => Ok(()),
        Some((1, e)) => Err(Failure::usage(e)),
        Some((n, e)) => Err(Failure::usage(format!("{e} (and {} more)", n - 1))),
    }
}

/// Every plugin's metadata as Markdown: the body of docs/stages.md.
fn plugins_markdown(found: &[(String, std::path::PathBuf)]) -> Result<String, Failure> {
    let mut o = String::from(
        "# Stages\n\nThe stages shipped in `plugins/`, with their config keys. Generated from each plugin's\nmetadata by `cargo xtask docs` (CI checks it is current); `condense plugins --details` prints\nthe same for whatever plugins you have installed.\n",
    );
    for (_, path) in found {
        let m = condense_abi::Plugin::load(path)
            .and_then(|p| p.metadata(path))
            .map_err(|e| Failure::usage(e.to_string()))?;
        let _ = write!(
            o,
            "\n## `{}` {}\n\n{}\n\n",
            m.name, m.version, m.description
        );
        if m.config_keys.is_empty() {
            o.push_str("No config keys.\n");
            continue;
        }
        o.push_str("| key | type | default | description |\n|---|---|---|---|\n");
        for k in &m.config_keys {
            let default = if k.default.is_empty() {
                String::new()
            } else {
                format!("`{}`", k.default.replace('|', "\\|"))
            };
            let _ = writeln!(
                o,
                "| `{}` | {} | {} | {} |",
                k.name,
                k.ty,
                default,
                k.description.replace('|', "\\|")
            );
        }
    }
    Ok(o)
}

#[cfg(test)]
mod tests {
    use super::parse_now;

    #[test]
    fn now_is_unix_ms_or_rfc3339() {
        assert_eq!(parse_now("1756860751217").ok(), Some(1_756_860_751_217));
        assert_eq!(
            parse_now("2025-09-03T00:52:31.217Z").ok(),
            Some(1_756_860_751_217)
        );
        assert_eq!(
            parse_now("2000-02-29T14:00:00+02:00").ok(),
            Some(951_825_600_000)
        );
        // No zone (OpenHands writes these): UTC.
        assert_eq!(
            parse_now("2025-04-30T16:34:22.948624").ok(),
            Some(1_746_030_862_948)
        );
        assert!(parse_now("yesterday").is_err());
    }
}
