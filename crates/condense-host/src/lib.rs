//! The condense host: runs a pipeline of stage plugins over a conversation.
//!
//! - [`pipeline`]: the TOML pipeline file (and the embedded default);
//! - [`discover`]: finding plugin libraries by name;
//! - [`run`]: loading every stage and running them in order, with the host services
//!   (token counting, injected time, the store) each stage gets;
//! - [`archive`]: what makes `condense expand` exact: after every stage the host archives what
//!   changed, whoever wrote the stage.
//!
//! ```no_run
//! use condense_host::{LoadedPipeline, Pipeline, RunOptions, session_id};
//! # fn demo(conv: condense_model::Conversation) -> Result<(), Box<dyn std::error::Error>> {
//! let pipeline = LoadedPipeline::load(Pipeline::default_pipeline())?;
//! let store = condense_store::Store::open(".condense")?;
//! let result = pipeline.run(conv.clone(), &store, &session_id(&conv), &RunOptions::default())?;
//! println!("{} -> {} tokens", result.tokens_before, result.tokens_after);
//! # Ok(()) }
//! ```

pub mod archive;
pub mod discover;
pub mod guard;
mod originals;
pub mod pipeline;
mod resume;
pub mod run;
mod services;
mod summaries;

pub use archive::{expand, ExpandError, Expansion, ReadAs, ReadIndex};
pub use pipeline::{OnError, Pipeline, PipelineError, StageSpec};
pub use resume::Resumed;
pub use run::{
    HostError, LoadedPipeline, PendingPoint, ReadFrom, RunOptions, RunResult, StageRun, Unread,
};
pub use services::StateMode;

use condense_model::Conversation;
use twox_hash::XxHash3_64;

/// Plugins the environment turns off for this run, for the binaries that run pipelines (stages
/// never read the environment themselves): `CONDENSE_DISABLE_AUTOCOMPACT=1` (anything but
/// empty, `0` or `false`) turns off `autocompact`. Goes to [`RunOptions::disabled`].
pub fn env_disabled() -> Vec<String> {
    let on = |v: &str| std::env::var(v).is_ok_and(|x| !x.is_empty() && x != "0" && x != "false");
    let mut disabled = Vec::new();
    if on("CONDENSE_DISABLE_AUTOCOMPACT") {
        disabled.push("autocompact".to_string());
    }
    disabled
}

/// The session key under which a conversation's stage state and archive are kept: `explicit`
/// (`--session`) or [`session_id`], plus the conversation's label in a file holding several
/// (tau-bench's 200 conversations share one system prompt, but not their state).
pub fn session_key(conv: &Conversation, label: &str, explicit: Option<&str>) -> String {
    let base = explicit.map_or_else(|| session_id(conv), str::to_string);
    if label.is_empty() {
        base
    } else {
        format!("{base}{label}")
    }
}

/// The session a conversation belongs to, stable across runs and appended turns: the source's
/// own session id (Claude Code `sessionId`) when it has one, otherwise a hash of what stays
/// fixed in a session (system prompt and tool definitions, else its first message).
pub fn session_id(conv: &Conversation) -> String {
    for m in conv.messages.iter().take(8) {
        if let Ok(map) = m.envelope.to_map() {
            if let Some(id) = map.get("sessionId").and_then(|v| v.as_str()) {
                return id.to_string();
            }
        }
    }
    let mut basis = model_bytes(&(&conv.system, &conv.tools));
    if conv.system.is_none() && conv.tools.is_empty() {
        if let Some(first) = conv.messages.first() {
            basis.extend(model_bytes(&first.content));
        }
    }
    format!("h{:016x}", XxHash3_64::oneshot(&basis))
}

/// The JSON bytes of a part of the model, hashed into a session id. The model's serialization
/// cannot fail (derived impls, string keys, `RawJson` is text), and the ids of existing stores
/// are hashes of exactly these bytes. (Failing instead would change [`session_key`]'s
/// signature for every caller.)
fn model_bytes(part: &impl serde::Serialize) -> Vec<u8> {
    serde_json::to_vec(part).unwrap_or_default() // tidy: the model always serializes
}
