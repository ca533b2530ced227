//! `condense serve`: a proxy in front of the model API.
//!
//! Clients point their base URL at it (`ANTHROPIC_BASE_URL`, an OpenAI `base_url`); every
//! `POST /v1/messages`, `/v1/chat/completions` and `/v1/responses` body is read in its API's
//! format, run through the user's pipeline (the same [`condense_host::LoadedPipeline`] as
//! `condense compress`, with the model's window), written back byte-exact where no stage
//! changed it, and sent upstream; every other path passes through unchanged.
//!
//! - [`settings`]: upstreams, `on_error`, the body limit, the known models' windows;
//! - [`session`]: which session a request belongs to;
//! - [`encoding`]: decoding a gzip, deflate or zstd request body, bounded by the body limit;
//! - [`compress`]: one body through the pipeline (on the blocking pool), archived for expand;
//! - [`backend`]: the store and the per-session locks, totals and prefixes, behind one trait;
//! - [`proxy`]: the hyper service: routing, pass-through, streaming, `GET /condense/status`;
//! - `route`: a compressed route's request: the body limit, decoding, its place in its
//!   session's line, the prompt-too-long retries and the log line.

pub mod backend;
mod body;
pub mod compress;
pub mod encoding;
mod order;
pub mod proxy;
mod route;
pub mod session;
pub mod settings;
mod wire;

pub use backend::{LocalBackend, SessionBackend, Status, Totals, Turn};
pub use proxy::{Proxy, Server};
pub use settings::{OnError, Settings};

use condense_formats::Format;
use condense_host::{LoadedPipeline, Pipeline};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// A proxy setup failure, one line.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("{0}")]
    Settings(String),
    #[error("{0}")]
    Pipeline(String),
    #[error("cannot listen on {addr}: {source}")]
    Listen {
        addr: String,
        source: std::io::Error,
    },
    #[error("cannot start the runtime: {0}")]
    Runtime(std::io::Error),
    #[error("the TLS client: {0}")]
    Tls(String),
}

/// The APIs whose bodies the proxy compresses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Api {
    Anthropic,
    OpenAiChat,
    Responses,
}

impl Api {
    /// The API of a `POST` path, if it is one the proxy compresses.
    pub fn of_path(path: &str) -> Option<Api> {
        match path.trim_end_matches('/') {
            "/v1/messages" => Some(Api::Anthropic),
            "/v1/chat/completions" => Some(Api::OpenAiChat),
            "/v1/responses" => Some(Api::Responses),
            _ => None,
        }
    }

    pub fn format(self) -> Format {
        match self {
            Api::Anthropic => Format::Anthropic,
            Api::OpenAiChat => Format::OpenAi,
            Api::Responses => Format::Responses,
        }
    }

    /// Whether an upstream error body says the prompt does not fit the window.
    pub fn is_prompt_too_long(self, body: &[u8]) -> bool {
        let needle: &[u8] = match self {
            Api::Anthropic => b"prompt is too long",
            Api::OpenAiChat | Api::Responses => b"context_length_exceeded",
        };
        body.windows(needle.len()).any(|w| w == needle)
    }
}

/// The user's pipeline, loaded once per context window the requests' models need.
pub struct Pipelines {
    base: Pipeline,
    loaded: Mutex<HashMap<usize, Arc<LoadedPipeline>>>,
}

impl Pipelines {
    /// Loads `base` with its own window now, so a missing plugin is an error at start.
    pub fn new(base: Pipeline) -> Result<Pipelines, ServeError> {
        let window = base.budget.context_window;
        let pipelines = Pipelines {
            base,
            loaded: Mutex::new(HashMap::new()),
        };
        pipelines
            .for_window(Some(window))
            .map_err(ServeError::Pipeline)?;
        Ok(pipelines)
    }

    /// The pipeline for a model's window (`None`: the pipeline's own). A window too small for
    /// the pipeline's output size gets a quarter of it as output size.
    pub fn for_window(&self, window: Option<usize>) -> Result<Arc<LoadedPipeline>, String> {
        let window = window.unwrap_or(self.base.budget.context_window);
        // Loading is only ever an insert; a panic elsewhere cannot leave the map half-done.
        let mut loaded = self.loaded.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(p) = loaded.get(&window) {
            return Ok(Arc::clone(p));
        }
        let mut pipeline = self.base.clone();
        pipeline.budget.context_window = window;
        if pipeline.budget.validate().is_err() {
            pipeline.budget.max_output_tokens = pipeline.budget.max_output_tokens.min(window / 4);
        }
        pipeline
            .budget
            .validate()
            .map_err(|e| format!("a {window}-token window: {e}"))?;
        let p = Arc::new(
            LoadedPipeline::load(pipeline)
                .map_err(|e| e.to_string())?
                .keeping_points(),
        );
        loaded.insert(window, Arc::clone(&p));
        Ok(p)
    }

    /// The pipeline file's `[serve]` table.
    pub fn serve_table(&self) -> (&toml::Table, &str) {
        (&self.base.serve, &self.base.source)
    }
}
