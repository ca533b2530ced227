//! The host services one stage sees ([`condense_abi::Host`]), and where its state is kept.
//!
//! # State slots
//!
//! A stage's state is only valid for the settings it was made under: collapses committed for a
//! 32,000-token window are wrong for a 200,000-token one. So each stage keeps its state per
//! session in a **slot** named after what the state depends on ([`state_slot`]): the stage's
//! name, the window and output size in plain figures, and a hash of the output reserve, the
//! tokenizer, the summarizer and the stage's plugin and config. A run under other settings
//! starts from no state and the report says that state made under other settings exists and was
//! not used; switching back finds its own slot again. `--fresh` ([`StateMode::Fresh`]) ignores
//! every slot saved before the run and replaces it (a stage that runs twice in one run, as in
//! the recovery chain, still sees what it saved earlier in the run).

use crate::archive::Pairing;
use crate::originals::Originals;
use crate::pipeline::{Pipeline, StageSpec};
use condense_abi::Host;
use condense_budget::BudgetConfig;
use condense_model::{Conversation, Message};
use condense_store::{sanitize_component, Store};
use condense_summarize::Summarizer;
use condense_tokens::TokenCounter;
use std::cell::RefCell;
use std::collections::HashSet;
use twox_hash::XxHash3_64;

/// How saved stage state is used.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum StateMode {
    /// Use the state saved under the same settings (the default).
    #[default]
    Saved,
    /// Ignore state saved before this run and replace it (`--fresh`).
    Fresh,
}

/// Separates a stage's name from its settings in a slot name.
const SLOT_SEPARATOR: &str = "--";

/// The slot `spec`'s state is kept in under `pipeline`'s settings (see the module docs). The
/// settings are serialized to be hashed; that failing is an error, never an empty text (which
/// would merge the slots of different settings).
pub(crate) fn state_slot(pipeline: &Pipeline, spec: &StageSpec) -> Result<String, String> {
    let config = toml::to_string(&spec.config)
        .map_err(|e| format!("cannot name its state slot (config): {e}"))?;
    state_slot_of(pipeline, spec, &config)
}

/// [`state_slot`] with `spec`'s config already serialized to TOML (`config`), as a loaded
/// stage keeps it.
pub(crate) fn state_slot_of(
    pipeline: &Pipeline,
    spec: &StageSpec,
    config: &str,
) -> Result<String, String> {
    let b = &pipeline.budget;
    let settings = serde_json::to_string(&(
        b.output_reserve,
        pipeline.tokenizer.as_str(),
        &pipeline.summarizer,
        &spec.plugin,
        config,
    ))
    .map_err(|e| format!("cannot name its state slot (settings): {e}"))?;
    Ok(format!(
        "{}{SLOT_SEPARATOR}w{}-o{}-{:016x}",
        spec.name,
        b.context_window,
        b.max_output_tokens,
        XxHash3_64::oneshot(settings.as_bytes())
    ))
}

/// What a run keeps across its stages for the services.
#[derive(Debug, Default)]
pub(crate) struct RunServices {
    pub(crate) originals: Originals,
    /// Slots written in this run (`--fresh` still reads those).
    written: RefCell<HashSet<String>>,
    /// The retained records of the summaries written in this run, by record name: kept in
    /// memory (a running summary is rewritten at every commit) and stored at the end of the
    /// run for the summaries the output still holds (`summaries::store_records`).
    pub(crate) records: crate::summaries::RunRecords,
}

/// The host services one stage sees.
pub(crate) struct Services<'a> {
    pub(crate) counter: &'a TokenCounter,
    pub(crate) store: &'a Store,
    pub(crate) session: &'a str,
    /// The stage's name (for messages).
    pub(crate) stage: &'a str,
    /// Where its state is kept.
    pub(crate) slot: String,
    /// Which stage call of the run this is (0, 1, ...): a running summary's records are
    /// dropped once superseded within the same call.
    pub(crate) call: usize,
    pub(crate) state_mode: StateMode,
    pub(crate) budget: &'a BudgetConfig,
    pub(crate) summarizer: &'a dyn Summarizer,
    pub(crate) run: &'a RunServices,
    /// Notes the host adds in front of the stage's own (state not used, ...).
    pub(crate) notes: RefCell<Vec<String>>,
}

impl Services<'_> {
    /// Slots of this stage other than its own: made under other settings, or by a condense that
    /// kept one state per stage.
    fn other_slots(&self) -> Vec<String> {
        let own = sanitize_component(&self.slot);
        let bare = sanitize_component(self.stage);
        let prefix = format!("{bare}{SLOT_SEPARATOR}");
        self.store
            .state_names(self.session)
            .unwrap_or_default()
            .into_iter()
            .filter(|n| *n != own && (*n == bare || n.starts_with(&prefix)))
            .collect()
    }

    fn note(&self, note: String) {
        self.notes.borrow_mut().push(note);
    }
}

/// `w32000-o8000` of a slot name, as `window 32,000, max output 8,000`.
fn describe_slot(name: &str) -> String {
    let settings = name.rsplit(SLOT_SEPARATOR).next().unwrap_or("");
    let mut parts = settings.split('-');
    let figure = |p: Option<&str>, k: char| {
        p.and_then(|p| p.strip_prefix(k))
            .and_then(|n| n.parse::<usize>().ok())
    };
    match (figure(parts.next(), 'w'), figure(parts.next(), 'o')) {
        (Some(w), Some(o)) => format!(
            "window {}, max output {}",
            condense_text::thousands(w),
            condense_text::thousands(o)
        ),
        _ => "an earlier condense".to_string(),
    }
}

impl Host for Services<'_> {
    fn count_tokens(&self, text: &str) -> usize {
        self.counter.count_text_cached(text)
    }
    fn count_block(&self, block: &condense_model::Block) -> usize {
        self.counter.count_block(block)
    }
    fn store_put(&self, bytes: &[u8]) -> Result<String, String> {
        self.store.put(bytes).map_err(|e| e.to_string())
    }
    fn store_get(&self, key: &str) -> Result<Option<Vec<u8>>, String> {
        self.store.get(key).map_err(|e| e.to_string())
    }
    fn state_get(&self) -> Result<Option<String>, String> {
        let written = self.run.written.borrow().contains(&self.slot);
        if self.state_mode == StateMode::Fresh && !written {
            if self
                .store
                .state_get(self.session, &self.slot)
                .map_err(|e| e.to_string())?
                .is_some()
            {
                self.note(
                    "--fresh: the state saved by earlier runs is ignored and replaced".into(),
                );
            }
            return Ok(None);
        }
        let state = self
            .store
            .state_get(self.session, &self.slot)
            .map_err(|e| e.to_string())?;
        if state.is_some() && !written {
            self.note(format!(
                "uses the state an earlier run saved for this session ({}; --fresh ignores it)",
                describe_slot(&self.slot)
            ));
        } else if state.is_none() && !written {
            let others = self.other_slots();
            if !others.is_empty() {
                let made: Vec<String> = others.iter().map(|n| describe_slot(n)).collect();
                self.note(format!(
                    "state saved for other settings ({}) is not used: this run's settings \
                     (window {}, max output {}, or the stage's config) start from none",
                    made.join("; "),
                    condense_text::thousands(self.budget.context_window),
                    condense_text::thousands(self.budget.max_output_tokens)
                ));
            }
        }
        Ok(state)
    }
    fn state_put(&self, state: &str) -> Result<(), String> {
        self.run.written.borrow_mut().insert(self.slot.clone());
        self.store
            .state_put(self.session, &self.slot, state)
            .map_err(|e| e.to_string())
    }
    fn summarize(&self, request: condense_abi::SummaryRequest) -> Result<String, String> {
        crate::summaries::summarize(self, request)
    }
}

/// Records, for the summarizer, the messages a stage rewrote in place. A stage whose removals
/// must not be kept (secret redaction) makes its output the original of what it changed: the
/// summarizer never sees what it removed.
pub(crate) fn record_rewrites(
    run: &mut RunServices,
    before: Conversation,
    after: &Conversation,
    pairing: &Pairing,
    archived: bool,
) {
    if archived {
        run.originals.record(before, after, pairing);
    } else {
        run.originals.forget_changed(after, pairing);
    }
}

/// [`record_rewrites`] for messages a stage replaced in place: `olds` are what they replaced
/// (by index in `after`, changed ones only), moved in.
pub(crate) fn record_replaced(
    run: &mut RunServices,
    olds: Vec<(usize, Message)>,
    after: &Conversation,
    archived: bool,
) {
    if archived {
        run.originals.record_replaced(olds, after);
    } else {
        run.originals
            .forget(olds.iter().map(|(i, _)| after.messages[*i].id.as_str()));
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn slots_name_the_window_and_change_with_the_settings() {
        let mut p = Pipeline::default_pipeline();
        let spec = p.stages[3].clone();
        let a = state_slot(&p, &spec).unwrap();
        assert!(a.starts_with("context-collapse--w200000-o32000-"), "{a}");
        assert_eq!(describe_slot(&a), "window 200,000, max output 32,000");
        p.budget.context_window = 32_000;
        let b = state_slot(&p, &spec).unwrap();
        assert_ne!(a, b);
        let mut other = spec.clone();
        other
            .config
            .insert("commit_at".into(), toml::Value::Float(0.5));
        assert_ne!(state_slot(&p, &other).unwrap(), b);
        assert_eq!(describe_slot("context-collapse"), "an earlier condense");
    }
}
