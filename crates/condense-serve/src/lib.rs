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

    /// Whether an upstream error body says the prompt does not fit the window (or not beside
    /// the output the request asks for).
    pub fn is_prompt_too_long(self, body: &[u8]) -> bool {
        let needles: &[&[u8]] = match self {
            // The second: the prompt fits, but not with the request's `max_tokens` beside it.
            Api::Anthropic => &[b"prompt is too long", b"exceed context limit"],
            Api::OpenAiChat | Api::Responses => &[b"context_length_exceeded"],
        };
        needles
            .iter()
            .any(|needle| body.windows(needle.len()).any(|w| w == *needle))
    }
}

/// The user's pipeline, loaded once per context window the requests' models need (and per
/// room an output limit asks past the pipeline's reserve, [`Pipelines::for_request`]).
pub struct Pipelines {
    base: Pipeline,
    /// By window and the room left for the request's output limit.
    loaded: Mutex<HashMap<(usize, usize), Arc<LoadedPipeline>>>,
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
            .for_request(Some(window), None)
            .map_err(ServeError::Pipeline)?;
        Ok(pipelines)
    }

    /// The pipeline for a request: its model's window (`None`: the pipeline's own; a window
    /// too small for the pipeline's output size gets a quarter of it as output size) and the
    /// most it lets the model write (`max_tokens` and its kin, when it says), left free beside
    /// the prompt (the budget's `leaving_output`, condense-budget). Loaded once per window
    /// and room.
    pub fn for_request(
        &self,
        window: Option<usize>,
        max_output: Option<usize>,
    ) -> Result<Arc<LoadedPipeline>, String> {
        let window = window.unwrap_or(self.base.budget.context_window);
        let mut budget = self.base.budget.clone();
        budget.context_window = window;
        if budget.validate().is_err() {
            budget.max_output_tokens = budget.max_output_tokens.min(window / 4);
        }
        budget
            .validate()
            .map_err(|e| format!("a {window}-token window: {e}"))?;
        let (budget, room) = match max_output {
            Some(limit) => budget.leaving_output(limit),
            None => (budget, 0),
        };
        // Loading is only ever an insert; a panic elsewhere cannot leave the map half-done.
        let mut loaded = self.loaded.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(p) = loaded.get(&(window, room)) {
            return Ok(Arc::clone(p));
        }
        let mut pipeline = self.base.clone();
        pipeline.budget = budget;
        let p = Arc::new(
            LoadedPipeline::load(pipeline)
                .map_err(|e| e.to_string())?
                .keeping_points(),
        );
        loaded.insert((window, room), Arc::clone(&p));
        Ok(p)
    }

    /// The pipeline file's `[serve]` table.
    pub fn serve_table(&self) -> (&toml::Table, &str) {
        (&self.base.serve, &self.base.source)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Both of Anthropic's ways of saying a request does not fit send it back through the
    /// recovery chain; OpenAI's is its error code.
    #[test]
    fn prompt_too_long_in_each_apis_words() {
        let anthropic = [
            &br#"{"type":"error","error":{"message":"prompt is too long: 210000 tokens > 200000 maximum"}}"#[..],
            br#"{"type":"error","error":{"message":"input length and `max_tokens` exceed context limit: 178959 + 64000 > 200000, decrease input length or `max_tokens` and try again"}}"#,
        ];
        for body in anthropic {
            assert!(Api::Anthropic.is_prompt_too_long(body));
            assert!(!Api::OpenAiChat.is_prompt_too_long(body));
        }
        let openai = br#"{"error":{"code":"context_length_exceeded"}}"#;
        assert!(Api::OpenAiChat.is_prompt_too_long(openai));
        assert!(Api::Responses.is_prompt_too_long(openai));
        assert!(!Api::Anthropic.is_prompt_too_long(br#"{"error":{"message":"overloaded"}}"#));
    }

    /// A request's output limit reaches the pipeline's budget; limits within one step of room
    /// share a pipeline, another step loads its own.
    #[test]
    fn a_pipeline_per_window_and_output_room() {
        let pipelines = Pipelines::new(Pipeline::parse("", "p.toml", None).unwrap()).unwrap();
        let budget = |window, max_output| {
            let p = pipelines.for_request(window, max_output).unwrap();
            let b = &p.pipeline.budget;
            (b.fixed_tokens, b.max_output_tokens)
        };
        assert_eq!(budget(Some(200_000), None), (0, 32_000));
        assert_eq!(budget(Some(200_000), Some(64_000)), (49_152, 69_152));
        // Loaded once per window and step: limits within one step share a pipeline.
        let a = pipelines.for_request(Some(200_000), Some(64_000)).unwrap();
        let b = pipelines.for_request(Some(200_000), Some(62_000)).unwrap();
        let c = pipelines.for_request(Some(200_000), Some(70_000)).unwrap();
        assert!(Arc::ptr_eq(&a, &b));
        assert!(!Arc::ptr_eq(&a, &c));
    }
}
