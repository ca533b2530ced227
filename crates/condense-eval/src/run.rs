//! Running pipelines and baselines on one conversation and scoring each output.
//!
//! Each pipeline runs with the recovery chain (`LoadedPipeline::fit`, what `compress --fit`
//! does) against its own throwaway store, so no run sees another's stage state and nothing
//! real is touched. The output is written with the document writer and read back: reading back
//! to an equal conversation is the last integrity probe.
//!
//! ```no_run
//! use condense_eval::{evaluate, Baseline, Candidate, CandidateKind, Settings};
//! use condense_host::Pipeline;
//!
//! # fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! let bytes = std::fs::read("session.jsonl")?;
//! let doc = condense_formats::read(&bytes, "session.jsonl", &Default::default())?;
//! let candidates = vec![
//!     Candidate {
//!         label: "default".into(),
//!         kind: CandidateKind::Pipeline(Box::new(Pipeline::default_pipeline())),
//!     },
//!     Candidate {
//!         label: "truncate-oldest".into(),
//!         kind: CandidateKind::Baseline(Baseline::TruncateOldest),
//!     },
//! ];
//! let eval = evaluate(&doc, 0, "session.jsonl", &candidates, &Settings::default(), None)?;
//! for r in &eval.results {
//!     println!("{}: artifacts {}, errors {}", r.pipeline, r.scores.artifact, r.scores.errors);
//! }
//! # Ok(()) }
//! ```

use crate::baselines::Baseline;
use crate::judge::{Judge, JudgeScores, Reference};
use crate::probes::Probes;
use crate::score::{score_with, Hits, Lost};
use crate::window::Window;
use crate::EvalError;
use condense_formats::{Document, ReadOptions};
use condense_host::{session_key, LoadedPipeline, Pipeline, RunOptions};
use condense_model::{Conversation, Message, RawJson, Role};
use condense_store::Store;
use condense_tokens::{TokenCounter, TokenizerKind};
use serde::Serialize;

/// 2100-01-01T00:00:00Z: the time stages see by default. Far in the future, so the prompt
/// cache is cold, as when a user resumes an old session (the realistic, harder case).
pub const DEFAULT_NOW_MS: i64 = 4_102_444_800_000;

/// How conversations are evaluated.
#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    /// The share of its tokens the request must lose when the window is chosen per
    /// conversation.
    pub cut: f64,
    /// A fixed window for every conversation instead (an eighth reserved for the output).
    pub context_window: Option<usize>,
    /// Conversations below this many tokens are not long enough to need compressing.
    pub min_tokens: usize,
    /// The time stages see, Unix ms.
    pub now_ms: i64,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            cut: 0.85,
            context_window: None,
            min_tokens: 10_000,
            now_ms: DEFAULT_NOW_MS,
        }
    }
}

/// A pipeline or a baseline, under the label tables show.
#[derive(Debug, Clone)]
pub struct Candidate {
    pub label: String,
    pub kind: CandidateKind,
}

#[derive(Debug, Clone)]
pub enum CandidateKind {
    Pipeline(Box<Pipeline>),
    Baseline(Baseline),
}

impl Candidate {
    /// The pipeline, its `[model]` set for `window`.
    fn pipeline(&self, window: &Window) -> Result<Pipeline, EvalError> {
        let wrap = |e: EvalError| EvalError::Window(format!("pipeline `{}`: {e}", self.label));
        match &self.kind {
            CandidateKind::Pipeline(p) => {
                let mut p = Pipeline::clone(p);
                window.apply(&mut p.budget).map_err(wrap)?;
                Ok(p)
            }
            CandidateKind::Baseline(b) => b.pipeline(window).map_err(wrap),
        }
    }
}

/// The window a conversation ran at.
#[derive(Debug, Clone, Serialize)]
pub struct WindowInfo {
    pub context_window: usize,
    pub output_reserve: usize,
    /// What the conversation may use: `context_window - output_reserve`.
    pub limit: usize,
}

/// How many probes the original holds.
#[derive(Debug, Clone, Default, Serialize)]
pub struct ProbeCounts {
    pub artifacts: usize,
    pub errors: usize,
    pub request: bool,
}

/// Hits per probe kind.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Scores {
    pub artifact: Hits,
    pub errors: Hits,
    pub request: Hits,
    pub integrity: Hits,
}

impl std::ops::AddAssign for Scores {
    fn add_assign(&mut self, o: Scores) {
        self.artifact += o.artifact;
        self.errors += o.errors;
        self.request += o.request;
        self.integrity += o.integrity;
    }
}

/// One pipeline's result on one conversation.
#[derive(Debug, Clone, Serialize)]
pub struct PipelineEval {
    pub pipeline: String,
    /// `pipeline` or `baseline`.
    pub kind: &'static str,
    pub tokens_after: usize,
    /// `1 - tokens_after / tokens_before`.
    pub cut: f64,
    /// Whether the output fits the window (less the output reserve).
    pub fits: bool,
    /// The stage whose forced run made it fit, when the recovery chain was needed.
    pub fit_by: Option<String>,
    pub scores: Scores,
    pub lost: Lost,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub judge: Option<JudgeScores>,
}

/// Every pipeline's result on one conversation.
#[derive(Debug, Clone, Serialize)]
pub struct ConversationEval {
    /// Where the conversation is in its file (`""` when the file holds one).
    pub label: String,
    pub tokens_before: usize,
    /// Why it was not evaluated (too short).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub skipped: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub window: Option<WindowInfo>,
    pub probes: ProbeCounts,
    pub results: Vec<PipelineEval>,
}

/// The token count the window is chosen from (the default tokenizer, the same for every
/// pipeline).
pub fn tokens_before(conv: &Conversation) -> usize {
    TokenCounter::new(TokenizerKind::default())
        .count_conversation(conv)
        .total
}

/// Runs every candidate on conversation `index` of `doc` (read from `source`) and scores it.
pub fn evaluate(
    doc: &Document,
    index: usize,
    source: &str,
    candidates: &[Candidate],
    settings: &Settings,
    judge: Option<&Judge>,
) -> Result<ConversationEval, EvalError> {
    let conv = &doc.conversations()[index];
    let label = doc.labels().get(index).cloned().unwrap_or_default();
    let before = tokens_before(conv);
    let mut eval = ConversationEval {
        label: label.clone(),
        tokens_before: before,
        skipped: None,
        window: None,
        probes: ProbeCounts::default(),
        results: Vec::new(),
    };
    if before < settings.min_tokens {
        eval.skipped = Some(format!(
            "not long enough to need compressing ({before} tokens < --min-tokens {})",
            settings.min_tokens
        ));
        return Ok(eval);
    }
    let window = match settings.context_window {
        Some(w) => Window::with_context_window(w),
        None => Window::for_cut(before, settings.cut),
    };
    eval.window = Some(WindowInfo {
        context_window: window.context_window,
        output_reserve: window.output_reserve,
        limit: window.limit(),
    });
    let probes = Probes::from_original(conv);
    eval.probes = ProbeCounts {
        artifacts: probes.artifacts.len(),
        errors: probes.errors.len(),
        request: probes.last_request.is_some(),
    };
    let reference = judge.map(|_| Reference::new(&probes, conv));
    for c in candidates {
        let pipeline = c.pipeline(&window)?;
        let fail = |message: String, config: bool| EvalError::Run {
            pipeline: c.label.clone(),
            file: source.to_string(),
            conversation: if label.is_empty() {
                String::new()
            } else {
                format!(" (conversation {label})")
            },
            message,
            config,
        };
        let out = run_one(pipeline, doc, index, source, settings.now_ms)
            .map_err(|(m, config)| fail(m, config))?;
        let s = score_with(&probes, conv, &out.conversation, out.roundtrip);
        let judged = match (judge, &reference) {
            (Some(j), Some(r)) => Some(j.judge(&out.conversation, r)?),
            _ => None,
        };
        eval.results.push(PipelineEval {
            pipeline: c.label.clone(),
            kind: match c.kind {
                CandidateKind::Pipeline(_) => "pipeline",
                CandidateKind::Baseline(_) => "baseline",
            },
            tokens_after: out.tokens_after,
            cut: cut(before, out.tokens_after),
            fits: out.fits,
            fit_by: out.fit_by,
            scores: Scores {
                artifact: s.artifact,
                errors: s.errors,
                request: s.request,
                integrity: s.integrity,
            },
            lost: s.lost,
            judge: judged,
        });
    }
    Ok(eval)
}

/// `1 - after / before` (0 for an empty conversation).
pub fn cut(before: usize, after: usize) -> f64 {
    if before == 0 {
        0.0
    } else {
        1.0 - after as f64 / before as f64
    }
}

/// One run's output.
#[derive(Debug)]
pub struct RunOutput {
    pub tokens_after: usize,
    pub fits: bool,
    pub fit_by: Option<String>,
    pub conversation: Conversation,
    /// `Err(what differs)` when the written output does not read back equal.
    pub roundtrip: Result<(), String>,
}

/// Runs `pipeline` (with the recovery chain) on conversation `index` of `doc` against a
/// throwaway store, writes the document with the output in place and reads it back.
/// `Err((message, is_config_error))` when the pipeline fails to load or a stage fails.
pub fn run_one(
    pipeline: Pipeline,
    doc: &Document,
    index: usize,
    source: &str,
    now_ms: i64,
) -> Result<RunOutput, (String, bool)> {
    let conv = &doc.conversations()[index];
    let label = doc.labels().get(index).cloned().unwrap_or_default();
    let loaded =
        LoadedPipeline::load(pipeline).map_err(|e| (e.to_string(), e.is_config_error()))?;
    let dir = tempfile::tempdir()
        .map_err(|e| (format!("cannot create a temporary store: {e}"), false))?;
    let store = Store::open(dir.path()).map_err(|e| (e.to_string(), false))?;
    let opts = RunOptions {
        now_ms: Some(now_ms),
        format: doc.format().as_str().to_string(),
        ..RunOptions::default()
    };
    let session = session_key(conv, &label, None);
    let fit = loaded
        .fit(conv.clone(), &store, &session, &opts, false)
        .map_err(|e| (e.to_string(), e.is_config_error()))?;
    let conversation = fit.result.conversation;
    let roundtrip = read_back(doc, index, source, &conversation);
    Ok(RunOutput {
        tokens_after: fit.result.tokens_after,
        fits: fit.fits,
        fit_by: fit.fit_by,
        conversation,
        roundtrip,
    })
}

/// Writes `doc` with `output` as conversation `index`, reads it back, and compares.
fn read_back(
    doc: &Document,
    index: usize,
    source: &str,
    output: &Conversation,
) -> Result<(), String> {
    let mut written = doc.clone();
    written.conversations_mut()[index] = output.clone();
    let bytes = written
        .write()
        .map_err(|e| format!("the output cannot be written: {e}"))?;
    let opts = ReadOptions {
        format: Some(doc.format()),
        select: None,
    };
    let back = condense_formats::read(&bytes, source, &opts)
        .map_err(|e| format!("the written output does not read back: {e}"))?;
    let Some(again) = back.conversations().get(index) else {
        return Err("the written output reads back without this conversation".into());
    };
    match first_difference(output, again) {
        None => Ok(()),
        Some(what) => Err(format!("the written output reads back different: {what}")),
    }
}

/// Whether an id is one a reader derives from the message's position (`#12`): formats without
/// message ids (OpenAI, OpenHands events without an id) give every message read back such an
/// id, so a message a stage created or moved reads back under a new one.
fn derived_id(id: &str) -> bool {
    id.strip_prefix('#')
        .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

/// Unknown fields without the `condense:` hints a reader leaves for its writer.
fn without_hints(raw: &RawJson) -> Option<serde_json::Map<String, serde_json::Value>> {
    let mut map = raw.to_map().ok()?;
    map.retain(|k, _| !k.starts_with("condense:"));
    Some(map)
}

/// What differs between a message as written (`x`) and as read back (`y`), if anything the
/// format is expected to keep. What the writer adds to a message a stage created is not a
/// difference: an id derived from the position, the wrapper line (envelope) of a message
/// written without one, reader hints.
fn message_difference(x: &Message, y: &Message) -> Option<String> {
    if x == y {
        return None;
    }
    if x.id != y.id && !derived_id(&y.id) {
        return Some(format!("its id (`{}` → `{}`)", x.id, y.id));
    }
    if x.role != y.role {
        return Some("its role".into());
    }
    if x.content != y.content {
        return Some("its content".into());
    }
    if x.timestamp != y.timestamp {
        return Some("its timestamp".into());
    }
    if x.extra != y.extra && without_hints(&x.extra) != without_hints(&y.extra) {
        return Some("its unknown fields".into());
    }
    if !x.envelope.is_empty() && x.envelope != y.envelope {
        return Some("its wrapper line".into());
    }
    None
}

/// Where two conversations first differ, in words (`None`: they read back equal).
fn first_difference(a: &Conversation, b: &Conversation) -> Option<String> {
    if a.system != b.system {
        return Some("the system prompt".into());
    }
    if a.tools != b.tools {
        return Some("the tool definitions".into());
    }
    for (i, (x, y)) in a.messages.iter().zip(&b.messages).enumerate() {
        if let Some(field) = message_difference(x, y) {
            let kind = if x.role == Role::Event {
                "event"
            } else {
                "message"
            };
            return Some(format!("{kind} {i} (`{}`) changes {field}", x.id));
        }
    }
    if a.messages.len() != b.messages.len() {
        return Some(format!(
            "{} messages written, {} read back",
            a.messages.len(),
            b.messages.len()
        ));
    }
    (without_hints(&a.extra) != without_hints(&b.extra))
        .then(|| "the request's other fields".into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use condense_model::Block;

    #[test]
    fn ids_a_format_derives_from_positions_are_not_compared() {
        let m = |id: &str, text: &str| Message::new(id, Role::User, vec![Block::text(text)]);
        let conv = |msgs: Vec<Message>| Conversation {
            messages: msgs,
            ..Conversation::default()
        };
        let written = conv(vec![m("#0", "a"), m("autocompact-1", "summary")]);
        assert_eq!(
            first_difference(&written, &conv(vec![m("#0", "a"), m("#1", "summary")])),
            None
        );
        // The writer wraps a created message and leaves a hint: not a difference.
        let mut wrapped = m("#1", "summary");
        wrapped.envelope = RawJson::from_value(&serde_json::json!({"source": "user"}));
        wrapped.extra = RawJson::from_value(&serde_json::json!({"condense:message_is_text": true}));
        assert_eq!(
            first_difference(&written, &conv(vec![m("#0", "a"), wrapped])),
            None
        );
        let changed = conv(vec![m("#0", "a"), m("#1", "summary!")]);
        assert_eq!(
            first_difference(&written, &changed).as_deref(),
            Some("message 1 (`autocompact-1`) changes its content")
        );
        // A stored id (Claude Code uuid) must read back as written.
        let stored = conv(vec![m("#0", "a"), m("uuid-2", "summary")]);
        assert_eq!(
            first_difference(&written, &stored).as_deref(),
            Some("message 1 (`autocompact-1`) changes its id (`autocompact-1` → `uuid-2`)")
        );
        // A wrapper line that was written must come back.
        let mut x = m("u", "t");
        x.envelope = RawJson::from_value(&serde_json::json!({"isMeta": true}));
        let y = m("u", "t");
        assert_eq!(
            message_difference(&x, &y).as_deref(),
            Some("its wrapper line")
        );
        assert!(first_difference(&written, &conv(vec![m("#0", "a")])).is_some());
    }
}
