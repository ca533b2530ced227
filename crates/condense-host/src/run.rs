//! Loading a pipeline's plugins and running its stages over a conversation.

use crate::archive::archive_stage;
use crate::discover::{find_plugin, search_dirs, FindError};
use crate::guard;
use crate::pipeline::{OnError, Pipeline, StageSpec};
use condense_abi::{Host, LoadError, LoadedStage, Plugin, StageCallError, StageReport};
use condense_model::Conversation;
use condense_store::{Store, StoreError};
use condense_summarize::Summarizer;
use condense_tokens::{Budget, TokenCounter};
use serde::Serialize;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

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
            HostError::Find { .. } | HostError::Config { .. } | HostError::Summarizer(_)
        )
    }
}

/// A stage of a loaded pipeline.
#[derive(Debug)]
pub struct LoadedSpec {
    pub spec: StageSpec,
    /// None for disabled stages (not loaded at all).
    pub path: Option<PathBuf>,
    stage: Option<LoadedStage>,
}

/// A pipeline with every enabled stage's plugin loaded and configured.
pub struct LoadedPipeline {
    pub pipeline: Pipeline,
    pub stages: Vec<LoadedSpec>,
    pub counter: Arc<TokenCounter>,
    summarizer: Box<dyn Summarizer>,
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
}

/// What happened to one stage in a run.
#[derive(Debug, Clone, Serialize)]
pub struct StageRun {
    pub name: String,
    pub plugin: String,
    /// `ran`, `disabled`, or `skipped` (failed with `on_error = "skip"`).
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
    pub stages: Vec<StageRun>,
}

impl LoadedPipeline {
    /// Finds, loads and configures every enabled stage's plugin.
    pub fn load(pipeline: Pipeline) -> Result<LoadedPipeline, HostError> {
        let dirs = search_dirs(&pipeline.plugin_dirs);
        let mut stages = Vec::new();
        for spec in &pipeline.stages {
            if !spec.enabled {
                stages.push(LoadedSpec {
                    spec: spec.clone(),
                    path: None,
                    stage: None,
                });
                continue;
            }
            let path = find_plugin(&spec.plugin, pipeline.base_dir.as_deref(), &dirs).map_err(
                |source| HostError::Find {
                    stage: spec.name.clone(),
                    source,
                },
            )?;
            let plugin = Plugin::load(&path).map_err(|source| HostError::Load {
                stage: spec.name.clone(),
                source,
            })?;
            let config = toml::to_string(&spec.config).unwrap_or_default();
            let stage = plugin
                .instantiate(&config)
                .map_err(|message| HostError::Config {
                    stage: spec.name.clone(),
                    message,
                })?;
            stages.push(LoadedSpec {
                spec: spec.clone(),
                path: Some(path),
                stage: Some(stage),
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
        })
    }

    /// Runs every enabled stage, in order, over `conversation`.
    pub fn run(
        &self,
        conversation: Conversation,
        store: &Store,
        session: &str,
        opts: &RunOptions,
    ) -> Result<RunResult, HostError> {
        let now_ms = opts.now_ms.unwrap_or_else(system_now_ms);
        let tokens_before = self.counter.count_conversation(&conversation).total;
        let mut current = conversation;
        let mut current_tokens = tokens_before;
        let mut freed = 0usize;
        let mut flags: Vec<String> = Vec::new();
        let mut runs = Vec::new();
        // Invariants the input already breaks are not any stage's fault (see `guard`).
        let mut violations = guard::violations(&current);
        for loaded in &self.stages {
            let spec = &loaded.spec;
            let Some(stage) = &loaded.stage else {
                runs.push(StageRun {
                    name: spec.name.clone(),
                    plugin: spec.plugin.clone(),
                    status: "disabled",
                    error: None,
                    tokens_before: current_tokens,
                    tokens_after: current_tokens,
                    tokens_saved: 0,
                    millis: 0.0,
                    report: StageReport::default(),
                    output: opts.record_outputs.then(|| current.clone()),
                });
                continue;
            };
            let services = Services {
                counter: &self.counter,
                store,
                session,
                stage: &spec.name,
                now_ms,
                freed_before: freed,
                context_window: self.pipeline.budget.context_window,
                max_output_tokens: self.pipeline.budget.max_output_tokens,
                flags: &flags,
                format: &opts.format,
                summarizer: self.summarizer.as_ref(),
                conversation_tokens: current_tokens,
            };
            let started = Instant::now();
            let outcome = stage
                .apply(current.clone(), &services)
                .map_err(|e| match e {
                    StageCallError::Failed(m) => m,
                    other => other.to_string(),
                })
                .and_then(|out| {
                    let broken = guard::introduced(&violations, guard::violations(&out.conversation));
                    if !broken.is_empty() {
                        return Err(guard::describe(&broken));
                    }
                    let after = self.counter.count_conversation(&out.conversation).total;
                    if after > current_tokens {
                        Err(format!(
                            "made the conversation bigger ({current_tokens} -> {after} tokens); compression must never grow it"
                        ))
                    } else {
                        Ok((out, after))
                    }
                });
            let millis = started.elapsed().as_secs_f64() * 1000.0;
            match outcome {
                Ok((out, after)) => {
                    if out.report.archive_removed {
                        archive_stage(store, session, &current, &out.conversation)?;
                    }
                    let saved = current_tokens - after;
                    freed += saved;
                    flags.extend(out.report.flags.iter().cloned());
                    runs.push(StageRun {
                        name: spec.name.clone(),
                        plugin: spec.plugin.clone(),
                        status: "ran",
                        error: None,
                        tokens_before: current_tokens,
                        tokens_after: after,
                        tokens_saved: saved,
                        millis,
                        report: out.report,
                        output: opts.record_outputs.then(|| out.conversation.clone()),
                    });
                    current = out.conversation;
                    current_tokens = after;
                    violations = guard::violations(&current);
                }
                Err(message) => match spec.on_error {
                    OnError::Fail => {
                        return Err(HostError::StageFailed {
                            stage: spec.name.clone(),
                            message,
                        })
                    }
                    OnError::Skip => runs.push(StageRun {
                        name: spec.name.clone(),
                        plugin: spec.plugin.clone(),
                        status: "skipped",
                        error: Some(message),
                        tokens_before: current_tokens,
                        tokens_after: current_tokens,
                        tokens_saved: 0,
                        millis,
                        report: StageReport::default(),
                        output: opts.record_outputs.then(|| current.clone()),
                    }),
                },
            }
        }
        let budget_after = self.counter.budget(&current, &self.pipeline.budget);
        Ok(RunResult {
            conversation: current,
            session: session.to_string(),
            tokens_before,
            tokens_after: current_tokens,
            budget_after,
            stages: runs,
        })
    }
}

fn system_now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// The host services one stage sees.
struct Services<'a> {
    counter: &'a TokenCounter,
    store: &'a Store,
    session: &'a str,
    stage: &'a str,
    now_ms: i64,
    freed_before: usize,
    context_window: usize,
    max_output_tokens: usize,
    flags: &'a [String],
    format: &'a str,
    summarizer: &'a dyn Summarizer,
    conversation_tokens: usize,
}

impl Host for Services<'_> {
    fn count_tokens(&self, text: &str) -> usize {
        self.counter.count_text(text)
    }
    fn now_ms(&self) -> i64 {
        self.now_ms
    }
    fn store_put(&self, bytes: &[u8]) -> Result<String, String> {
        self.store.put(bytes).map_err(|e| e.to_string())
    }
    fn store_get(&self, key: &str) -> Result<Option<Vec<u8>>, String> {
        self.store.get(key).map_err(|e| e.to_string())
    }
    fn state_get(&self) -> Result<Option<String>, String> {
        self.store
            .state_get(self.session, self.stage)
            .map_err(|e| e.to_string())
    }
    fn state_put(&self, state: &str) -> Result<(), String> {
        self.store
            .state_put(self.session, self.stage, state)
            .map_err(|e| e.to_string())
    }
    fn tokens_freed_before(&self) -> usize {
        self.freed_before
    }
    fn context_window(&self) -> usize {
        self.context_window
    }
    fn max_output_tokens(&self) -> usize {
        self.max_output_tokens
    }
    fn has_flag(&self, flag: &str) -> bool {
        self.flags.iter().any(|f| f == flag)
    }
    fn session_id(&self) -> String {
        self.session.to_string()
    }
    fn source_format(&self) -> String {
        self.format.to_string()
    }
    fn conversation_tokens(&self) -> usize {
        self.conversation_tokens
    }
    fn summarize(&self, request: condense_abi::SummaryRequest) -> Result<String, String> {
        let req = condense_summarize::SummaryRequest {
            messages: &request.messages,
            previous_summary: request.previous_summary.as_deref(),
            max_tokens: request.max_tokens,
            purpose: &request.purpose,
        };
        self.summarizer.summarize(&req).map_err(|e| e.to_string())
    }
}
