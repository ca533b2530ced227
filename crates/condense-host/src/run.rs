//! Loading a pipeline's plugins and running its stages over a conversation.

use crate::archive::{KeyMemo, OriginalTexts};
use crate::discover::{
    find_plugin, read_checked_layouts, save_checked_layouts, search_dirs, FindError,
};
use crate::pipeline::{Pipeline, StageSpec};
use crate::resume::{self, InputHash, PointMemory, Resumed, Start};
use crate::services::StateMode;
use condense_abi::{LoadError, LoadedStage, Plugin, StageReport};
use condense_budget::Budget;
use condense_model::Conversation;
use condense_store::{Store, StoreError};
use condense_summarize::Summarizer;
use condense_tokens::TokenCounter;
use serde::Serialize;
use std::cell::RefCell;
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// A host failure, displayed as one line naming the stage (or plugin) and what went wrong.
#[derive(Debug, thiserror::Error)]
pub enum HostError {
    #[error("stage `{stage}`: {source}")]
    Find { stage: String, source: FindError },
    #[error("stage `{stage}`: {source}")]
    Load { stage: String, source: LoadError },
    #[error("stage `{stage}`: config rejected: {message}")]
    Config { stage: String, message: String },
    #[error("stage `{stage}` failed: {message}")]
    StageFailed { stage: String, message: String },
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("{0}")]
    Summarizer(String),
    /// Reading the input's unread messages ([`ReadFrom::unread`]) failed.
    #[error("the input, read again whole: {0}")]
    ReadAgain(String),
}

impl HostError {
    /// Long detail for `--verbose` (the full ABI layout report), when there is one.
    pub fn detail(&self) -> Option<&str> {
        match self {
            HostError::Load { source, .. } => source.detail(),
            _ => None,
        }
    }

    /// Whether the error is the user's configuration (exit code 2) rather than a run failure.
    pub fn is_config_error(&self) -> bool {
        matches!(
            self,
            HostError::Find { .. }
                | HostError::Load { .. }
                | HostError::Config { .. }
                | HostError::Summarizer(_)
        )
    }
}

/// A stage of a loaded pipeline.
#[derive(Debug)]
pub struct LoadedSpec {
    pub spec: StageSpec,
    /// None for disabled stages (not loaded at all).
    pub path: Option<PathBuf>,
    /// The plugin file's size and modification time (ns since the epoch) when it was loaded:
    /// what resume points are kept under (`resume::settings_hash`), taken once, as the code
    /// that runs is the file as it was loaded. `None` when it could not be read.
    file: Option<(u64, u128)>,
    stage: Option<LoadedStage>,
    /// The stage's `[stage.config]` as the TOML text the stage was made with (enabled
    /// stages): its state slot is named from it at every run ([`LoadedSpec::slot`]) instead of
    /// serializing the table again, twice a stage (a proxied turn: 22 K of 1.7 M instructions
    /// at 3k tokens, 65 K of 6.3 M at 62k).
    config: Option<String>,
}

impl LoadedSpec {
    /// The plugin file's size and modification time at load ([`LoadedSpec::path`]).
    pub(crate) fn file(&self) -> Option<(u64, u128)> {
        self.file
    }

    /// The slot its state is kept in under `pipeline`'s settings ([`crate::services::state_slot`]), from the
    /// config text it was loaded with.
    pub(crate) fn slot(&self, pipeline: &Pipeline) -> Result<String, String> {
        match &self.config {
            Some(config) => crate::services::state_slot_of(pipeline, &self.spec, config),
            None => crate::services::state_slot(pipeline, &self.spec),
        }
    }
}

/// The size and modification time (ns since the epoch) of the file at `path`.
fn file_identity(path: &Path) -> Option<(u64, u128)> {
    let meta = std::fs::metadata(path).ok()?;
    let modified = meta
        .modified()
        .ok()?
        .duration_since(std::time::UNIX_EPOCH)
        .ok()?;
    Some((meta.len(), modified.as_nanos()))
}

/// A pipeline with every enabled stage's plugin loaded and configured.
pub struct LoadedPipeline {
    pub pipeline: Pipeline,
    pub stages: Vec<LoadedSpec>,
    pub counter: Arc<TokenCounter>,
    summarizer: Box<dyn Summarizer>,
    /// The (store, session) pairs whose stored token counts `counter` holds already: a
    /// pipeline that runs turn after turn (`condense serve`) loads a session's counts once,
    /// not at every request (they grow with the session; its own runs add to the counter).
    /// Should the counter's cache fill up and start over, later runs recount what it dropped:
    /// slower, never wrong.
    preloaded: Mutex<HashSet<(PathBuf, String)>>,
    /// The sessions' last resume points, when the pipeline keeps them in memory
    /// ([`Self::keeping_points`]).
    points: Option<PointMemory>,
    /// The archive keys of the messages its runs wrote, kept with `points`.
    keys: Option<KeyMemo>,
}

impl std::fmt::Debug for LoadedPipeline {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LoadedPipeline")
            .field("pipeline", &self.pipeline)
            .field("stages", &self.stages)
            .field("summarizer", &self.summarizer.name())
            .finish()
    }
}

/// Options of one run.
#[derive(Debug, Clone, Default)]
pub struct RunOptions {
    /// The time stages see, Unix ms; `None` = the system clock, read once per run.
    pub now_ms: Option<i64>,
    /// The conversation's source format name (`anthropic`, `openai`, ...), for stages.
    pub format: String,
    /// Keep each stage's output conversation in [`StageRun::output`] (for diffs and snapshots).
    pub record_outputs: bool,
    /// Plugins forced past their thresholds in every call of this run (`condense serve`'s
    /// retry after a prompt-too-long answer): their stages see `flags.forced`.
    pub forced: Vec<String>,
    /// Plugins the host turns off for this run ([`crate::env_disabled`]): their stages see
    /// `flags.disabled`.
    pub disabled: Vec<String>,
    /// Whether stages see the state saved by earlier runs (`--fresh`: they do not).
    pub state: StateMode,
    /// Keep a resume point for the session after the run, and start from the previous one
    /// when the input extends its input (`crate::resume`): per-turn use (`compress` once
    /// per turn, `serve`) then does not redo the whole session's stages. Off for runs that
    /// must see the whole input (`diff`, `snapshot`, `eval`). With [`StateMode::Fresh`] the
    /// point is saved, not used.
    pub resume: bool,
}

/// What happened to one stage in a run.
#[derive(Debug, Clone, Serialize)]
pub struct StageRun {
    pub name: String,
    pub plugin: String,
    /// `ran`, `forced` (recovery chain), `disabled`, or `skipped` (failed with
    /// `on_error = "skip"`).
    pub status: &'static str,
    /// Why it was skipped.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    pub tokens_before: usize,
    pub tokens_after: usize,
    pub tokens_saved: usize,
    pub millis: f64,
    pub report: StageReport,
    /// The conversation after this stage, when [`RunOptions::record_outputs`] asked for it.
    #[serde(skip)]
    pub output: Option<Conversation>,
}

/// The result of running a pipeline over one conversation.
#[derive(Debug, Clone, Serialize)]
pub struct RunResult {
    #[serde(skip)]
    pub conversation: Conversation,
    pub session: String,
    pub tokens_before: usize,
    pub tokens_after: usize,
    pub budget_after: Budget,
    /// Set when the run started from the previous run's output ([`RunOptions::resume`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resumed: Option<Resumed>,
    /// The run's record in the archive (`crate::archive::record_run`): pass it to
    /// [`crate::archive::archive_written`] with the output as it reads back.
    #[serde(skip)]
    pub archive_run: crate::archive::ArchivedRun,
    /// The [`fingerprint`](condense_model::fingerprint::fingerprint) of each message of
    /// `conversation`, when the run made them (for its resume point or its remembered keys;
    /// else empty).
    #[serde(skip)]
    pub output_fingerprints: Vec<u128>,
    pub stages: Vec<StageRun>,
}

/// What the document a conversation was read from tells a run about it (the reader made both
/// anyway; a run without them works the same, only slower).
#[derive(Clone, Copy)]
pub struct ReadFrom<'a> {
    /// The input's exact text of a message, archived with every original message so `expand`
    /// writes those bytes back (`condense_formats::Document::original_text`).
    pub texts: &'a OriginalTexts<'a>,
    /// Each input message's fingerprint ([`condense_model::fingerprint::fingerprint`]), in
    /// order (`condense_formats::Document::message_fingerprints`): the resume point is
    /// matched with them instead of hashing the input's messages again. Ignored unless there
    /// is one per message.
    pub fingerprints: Option<&'a [u128]>,
    /// The input messages the reader left unread (`condense_formats::Document::unread`):
    /// placeholders, never handed to a stage. A run that resumes drops them (its start stands
    /// for them); one that cannot reads them first.
    pub unread: Option<Unread<'a>>,
    /// Whether a later read of the same message list may leave its messages unread
    /// (`condense_formats::Document::lists_known`): a resume point saved without memory then
    /// keeps the input messages its output kept, packed, for that read's run.
    pub lists_known: bool,
}

/// Input messages left unread, and how to read them.
#[derive(Clone, Copy)]
pub struct Unread<'a> {
    /// Per input message: a placeholder.
    pub mask: &'a [bool],
    /// The input conversation with every message read
    /// (`condense_formats::Document::read_unread`).
    pub read_all: &'a (dyn Fn() -> Result<Conversation, String> + 'a),
}

impl<'a> ReadFrom<'a> {
    /// Nothing known: no texts, every message hashed by the run.
    pub fn nothing() -> ReadFrom<'static> {
        ReadFrom {
            texts: &|_, _| None,
            fingerprints: None,
            unread: None,
            lists_known: false,
        }
    }

    /// `conversation` as a run that resumes takes it, with what the reader knew of it.
    pub(crate) fn input(&self, conversation: Conversation) -> resume::Input<'a> {
        resume::Input {
            conversation,
            fingerprints: self.fingerprints,
            unread: self.unread,
            lists_known: self.lists_known,
        }
    }
}

impl std::fmt::Debug for ReadFrom<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReadFrom")
            .field("fingerprints", &self.fingerprints.map(<[u128]>::len))
            .field(
                "unread",
                &self.unread.map(|u| u.mask.iter().filter(|&&m| m).count()),
            )
            .finish_non_exhaustive()
    }
}

impl LoadedPipeline {
    /// Finds, loads and configures every enabled stage's plugin.
    pub fn load(pipeline: Pipeline) -> Result<LoadedPipeline, HostError> {
        let dirs = search_dirs(&pipeline.plugin_dirs);
        let checked = RefCell::new(read_checked_layouts());
        let loaded = Self::build(pipeline, |pipeline, spec, config| {
            let path = find_plugin(&spec.plugin, pipeline.base_dir.as_deref(), &dirs).map_err(
                |source| HostError::Find {
                    stage: spec.name.clone(),
                    source,
                },
            )?;
            let plugin = Plugin::load_with(&path, &mut checked.borrow_mut()).map_err(|source| {
                HostError::Load {
                    stage: spec.name.clone(),
                    source,
                }
            })?;
            Ok((Some(path), plugin.instantiate(config)))
        });
        save_checked_layouts(&checked.into_inner());
        loaded
    }

    /// A pipeline whose enabled stages `stage` builds in this process (by plugin name and
    /// config text) instead of loading plugin libraries: the runner's own tests, and any host
    /// that links its stages in.
    pub fn in_process(
        pipeline: Pipeline,
        stage: impl Fn(&str, &str) -> Result<LoadedStage, String>,
    ) -> Result<LoadedPipeline, HostError> {
        Self::build(pipeline, |_, spec, config| {
            Ok((None, stage(&spec.plugin, config)))
        })
    }

    /// The pipeline with each enabled stage made by `make` from its config text (a refused
    /// config becomes [`HostError::Config`], placed in the pipeline file), the counter and the
    /// summarizer.
    fn build(
        pipeline: Pipeline,
        make: impl Fn(&Pipeline, &StageSpec, &str) -> Result<MadeStage, HostError>,
    ) -> Result<LoadedPipeline, HostError> {
        let mut stages = Vec::new();
        for spec in &pipeline.stages {
            let (path, stage, config) = if spec.enabled {
                let config = config_text(spec)?;
                let (path, stage) = make(&pipeline, spec, &config)?;
                let stage = stage.map_err(|message| HostError::Config {
                    stage: spec.name.clone(),
                    message: pipeline.locate_config_error(spec, &message),
                })?;
                (path, Some(stage), Some(config))
            } else {
                (None, None, None)
            };
            stages.push(LoadedSpec {
                spec: spec.clone(),
                file: path.as_deref().and_then(file_identity),
                path,
                stage,
                config,
            });
        }
        let counter = Arc::new(TokenCounter::new(pipeline.tokenizer));
        let summarizer = condense_summarize::build(&pipeline.summarizer, Arc::clone(&counter))
            .map_err(|e| {
                HostError::Summarizer(format!("{}: [summarizer]: {e}", pipeline.source))
            })?;
        Ok(LoadedPipeline {
            pipeline,
            stages,
            counter,
            summarizer,
            preloaded: Mutex::new(HashSet::new()),
            points: None,
            keys: None,
        })
    }

    /// This pipeline, keeping each session's last resume point in memory as well as in the
    /// store, for a process that runs turn after turn (`condense serve`): a turn then does not
    /// read its point back from JSON. The point in memory is used only while the store still
    /// holds what it was saved as (see `resume::PointMemory`), so the output is the same. It
    /// also remembers the archive keys of the messages its runs wrote (by fingerprint), which a
    /// turn's output mostly repeats.
    pub fn keeping_points(mut self) -> Self {
        self.points = Some(PointMemory::default());
        self.keys = Some(KeyMemo::default());
        self
    }

    /// Hands a pipeline that keeps points in memory ([`Self::keeping_points`]) the output of
    /// its last run on `session` once the caller is done with it (written, sent): the session's
    /// point takes its messages from it, so the next run neither parses the input messages it
    /// kept nor reads back those it stored. Moved in, not copied. It must be that output as
    /// written: only its length and its number of stored messages are checked (one that does
    /// not add up is dropped); without it, the next run reads them as a pipeline without
    /// memory does.
    pub fn keep_output(&self, store: &Store, session: &str, output: Conversation) {
        if let Some(points) = &self.points {
            points.fill(store, session, output);
        }
    }

    /// Runs every enabled stage, in order, over `conversation`.
    pub fn run(
        &self,
        conversation: Conversation,
        store: &Store,
        session: &str,
        opts: &RunOptions,
    ) -> Result<RunResult, HostError> {
        self.run_with_texts(conversation, store, session, opts, &ReadFrom::nothing())
    }

    /// [`run`](Self::run) with what the document `conversation` was read from tells
    /// ([`ReadFrom`]): every original message archived with the bytes `read.texts` gives for
    /// it (the input's exact text of a message), so `expand` can write those bytes back.
    pub fn run_with_texts(
        &self,
        conversation: Conversation,
        store: &Store,
        session: &str,
        opts: &RunOptions,
        read: &ReadFrom<'_>,
    ) -> Result<RunResult, HostError> {
        let run = |start| self.run_to_end(start, store, session, opts, read.texts);
        self.resuming(read.input(conversation), store, session, opts, run, |r| r)
    }

    /// [`run_with_texts`](Self::run_with_texts) for a caller with somewhere to be before the
    /// session's next resume point is kept: `condense serve` sends the body upstream first,
    /// and keeps the point ([`Self::keep_point`]) while the upstream reads it. The run's own
    /// writes (what its stages stored, their states, the archive of what they removed, the
    /// token counts) are committed before this returns; the point goes in a second
    /// transaction. A process killed between the two leaves the session's previous point,
    /// which its next run starts from, as after a run killed before its commit.
    pub fn run_with_texts_deferring(
        &self,
        conversation: Conversation,
        store: &Store,
        session: &str,
        opts: &RunOptions,
        read: &ReadFrom<'_>,
    ) -> Result<(RunResult, PendingPoint), HostError> {
        let run = |start| self.run_to_end(start, store, session, opts, read.texts);
        self.deferring(read.input(conversation), store, session, opts, run)
    }

    /// Every stage from `start`, and the run's result with the input's hash.
    fn run_to_end(
        &self,
        start: Start,
        store: &Store,
        session: &str,
        opts: &RunOptions,
        texts: &OriginalTexts<'_>,
    ) -> Result<(RunResult, Option<InputHash>), HostError> {
        let state = self.run_all(start, store, session, opts, texts)?;
        state.finish(&self.pipeline, store, session, opts, self.keys.as_ref())
    }

    /// Keeps the resume point a deferred run left ([`Self::run_with_texts_deferring`]):
    /// `result` is that run's, its conversation as the run gave it.
    pub fn keep_point(
        &self,
        store: &Store,
        session: &str,
        point: PendingPoint,
        result: &RunResult,
    ) -> Result<(), HostError> {
        let batch = store.batch();
        let memory = self.points.as_ref();
        save_point(store, session, point.settings, point.hash, result, memory)?;
        batch.commit()?;
        Ok(())
    }

    /// `run` from the conversation the run starts from ([`Self::start`]) and the session's next
    /// resume point kept from its result (`result_of`: the [`RunResult`] in what `run` gives),
    /// in one transaction: a deferred run ([`Self::deferring`]) and its point, in one batch.
    fn resuming<T>(
        &self,
        input: resume::Input<'_>,
        store: &Store,
        session: &str,
        opts: &RunOptions,
        run: impl FnOnce(Start) -> Result<(T, Option<InputHash>), HostError>,
        result_of: impl Fn(&T) -> &RunResult,
    ) -> Result<T, HostError> {
        let batch = store.batch();
        let (out, point) = self.deferring(input, store, session, opts, run)?;
        self.keep_point(store, session, point, result_of(&out))?;
        batch.commit()?;
        Ok(out)
    }

    /// `run` from the conversation the run starts from ([`Self::start`]), in one transaction
    /// ([`Self::in_one_transaction`]), and the resume point to keep from it.
    fn deferring<T>(
        &self,
        input: resume::Input<'_>,
        store: &Store,
        session: &str,
        opts: &RunOptions,
        run: impl FnOnce(Start) -> Result<(T, Option<InputHash>), HostError>,
    ) -> Result<(T, PendingPoint), HostError> {
        self.in_one_transaction(store, session, || {
            let (start, settings) = self.start(store, session, opts, input)?;
            let (out, hash) = run(start)?;
            Ok((out, PendingPoint { settings, hash }))
        })
    }

    /// The conversation a run starts from: the input, or the session's previous output
    /// followed by the input's new messages ([`crate::resume`]); and the settings hash to keep
    /// the next resume point under (`None`: keep none).
    fn start(
        &self,
        store: &Store,
        session: &str,
        opts: &RunOptions,
        input: resume::Input<'_>,
    ) -> Result<(Start, Option<String>), HostError> {
        if !opts.resume {
            return Ok((Start::whole(input.read_all()?, None), None));
        }
        let settings = resume::settings_hash(&self.pipeline, &self.stages, opts);
        let usable = settings
            .as_deref()
            .filter(|_| opts.state == StateMode::Saved);
        let memory = self.points.as_ref();
        let start = resume::start(store, session, usable, memory, input, |c| {
            self.counter.count_conversation(c)
        })?;
        Ok((start, settings))
    }

    /// Runs `run` with the store's writes held back and committed together at its end (one
    /// transaction: a run killed before it leaves the store as it was), the token counter
    /// seeded with the counts `session`'s earlier runs stored (on this pipeline's first run of
    /// the session), and the counts this run made stored with the rest. A failed run writes
    /// nothing.
    fn in_one_transaction<T>(
        &self,
        store: &Store,
        session: &str,
        run: impl FnOnce() -> Result<T, HostError>,
    ) -> Result<T, HostError> {
        let batch = store.batch();
        let tokenizer = self.counter.kind().as_str();
        let key = (store.root().to_path_buf(), session.to_string());
        // A panic while the set was held cannot leave it half-changed (one insert or lookup).
        let preloaded = || self.preloaded.lock().unwrap_or_else(|p| p.into_inner());
        if !preloaded().contains(&key) {
            self.counter
                .preload(store.token_counts(session, tokenizer)?);
            preloaded().insert(key);
        }
        let out = run()?;
        store.token_counts_put(session, tokenizer, self.counter.take_fresh())?;
        batch.commit()?;
        Ok(out)
    }

    /// Every enabled stage once, in order: the state after the last.
    fn run_all(
        &self,
        start: Start,
        store: &Store,
        session: &str,
        opts: &RunOptions,
        texts: &OriginalTexts<'_>,
    ) -> Result<RunState, HostError> {
        let mut state = RunState::new(&self.counter, start, opts);
        self.run_stages(&self.stages, &mut state, store, session, opts, false, texts)?;
        Ok(state)
    }
}

/// The resume point a deferred run leaves to keep ([`LoadedPipeline::keep_point`]). Dropped,
/// the session's next run starts from the point before, or from its whole input.
#[must_use = "without keep_point, the session's next run does not start from this run's output"]
pub struct PendingPoint {
    /// The settings hash the point is kept under (`None`: keep none).
    settings: Option<String>,
    hash: Option<InputHash>,
}

/// A stage as [`LoadedPipeline::build`]'s maker makes it: the library it came from (none for
/// an in-process stage), and the stage or its refusal of the config (the plugin's own words).
type MadeStage = (Option<PathBuf>, Result<LoadedStage, String>);

/// A stage's `[stage.config]` table as the TOML text the plugin parses. Serializing a table
/// read from TOML does not fail in practice; if it did, saying so beats handing the stage an
/// empty config (its defaults) in silence.
fn config_text(spec: &StageSpec) -> Result<String, HostError> {
    toml::to_string(&spec.config).map_err(|e| HostError::Config {
        stage: spec.name.clone(),
        message: format!("cannot pass its config on: {e}"),
    })
}

mod accept;
mod fit;
mod stage;
mod state;

pub use fit::FitResult;

use state::{save_point, RunState};

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests;
