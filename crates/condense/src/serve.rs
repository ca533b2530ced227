//! `condense serve`: loads the pipeline as `condense compress` does and hands it to the proxy
//! (crate condense-serve); flags override the pipeline file's `[serve]` table.

use crate::commands::load_pipeline;
use crate::Failure;
use clap::Args;
use condense_serve::{settings, LocalBackend, Pipelines, Proxy, Settings};
use std::path::PathBuf;
use std::sync::Arc;

pub const AFTER_HELP: &str = "Point the client at it:\n  \
    Claude Code, the Anthropic SDK   ANTHROPIC_BASE_URL=http://127.0.0.1:8787\n  \
    Codex, the OpenAI SDK, LangChain base_url http://127.0.0.1:8787/v1\n\n\
    It compresses POST /v1/messages, /v1/chat/completions and /v1/responses with the pipeline \
    (the model's window from a table of known models, [serve.models] in the pipeline file \
    overrides it) and passes every other path through. One log line per request on stderr; \
    GET /condense/status gives the totals per session. Ctrl-C or SIGTERM stops it once the \
    answers under way are sent (at most 60 s; a second one stops at once). docs/serve.md has the \
    details.";

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Where to listen; port 0 takes a free one. The address is printed on stderr.
    #[arg(long, default_value = "127.0.0.1:8787", value_name = "ADDR")]
    pub listen: String,
    /// The pipeline file (default: the embedded pipeline); its [serve] table sets the proxy.
    #[arg(long, short, value_name = "FILE")]
    pub pipeline: Option<PathBuf>,
    /// The store for archives and stage state (default: the pipeline's `[store]`, else
    /// .condense/ in the current folder).
    #[arg(long, value_name = "DIR")]
    pub store: Option<PathBuf>,
    /// Where Anthropic requests go (default: <https://api.anthropic.com>).
    #[arg(long, value_name = "URL")]
    pub anthropic_upstream: Option<String>,
    /// Where OpenAI requests go (default: <https://api.openai.com>).
    #[arg(long, value_name = "URL")]
    pub openai_upstream: Option<String>,
    /// When a body cannot be compressed: `pass` forwards it unchanged (default), `fail`
    /// answers 502.
    #[arg(long, value_name = "POLICY")]
    pub on_error: Option<String>,
    /// Bodies over this many bytes answer 413 (default: 33554432).
    #[arg(long, value_name = "BYTES")]
    pub max_body_bytes: Option<usize>,
    /// No per-request log line.
    #[arg(long, short)]
    pub quiet: bool,
}

pub fn serve(args: ServeArgs) -> Result<(), Failure> {
    let pipeline = load_pipeline(args.pipeline.as_deref())?;
    let mut s = Settings::from_table(&pipeline.serve, &pipeline.source)
        .map_err(|e| Failure::usage(e.to_string()))?;
    if let Some(u) = &args.anthropic_upstream {
        s.anthropic_upstream = settings::check_upstream(u)
            .map_err(|e| Failure::usage(format!("--anthropic-upstream: {e}")))?;
    }
    if let Some(u) = &args.openai_upstream {
        s.openai_upstream = settings::check_upstream(u)
            .map_err(|e| Failure::usage(format!("--openai-upstream: {e}")))?;
    }
    if let Some(p) = &args.on_error {
        s.on_error = p
            .parse()
            .map_err(|e| Failure::usage(format!("--on-error: {e}")))?;
    }
    if let Some(n) = args.max_body_bytes {
        if n == 0 {
            return Err(Failure::usage("--max-body-bytes: must be above 0"));
        }
        s.max_body_bytes = n;
    }
    let store_dir = args
        .store
        .clone()
        .or_else(|| pipeline.store_dir.clone())
        .unwrap_or_else(|| PathBuf::from(".condense"));
    let store = condense_store::Store::open(&store_dir)
        .map_err(|e| Failure::run(format!("{}: {e}", store_dir.display())))?;
    // A request's commit never copies the log into the database: a thread of the store's does.
    store
        .checkpoint_in_background()
        .map_err(|e| Failure::run(format!("{}: {e}", store_dir.display())))?;
    let pipelines = Pipelines::new(pipeline).map_err(|e| Failure::usage(e.to_string()))?;
    let mut proxy = Proxy::new(s, pipelines, Arc::new(LocalBackend::new(store)))
        .map_err(|e| Failure::run(e.to_string()))?;
    proxy.log = !args.quiet;
    condense_serve::proxy::serve_forever(&args.listen, proxy, |addr| {
        eprintln!(
            "condense serve: listening on http://{addr} (store {})",
            store_dir.display()
        );
    })
    .map_err(|e| Failure::run(e.to_string()))
}
