//! An in-memory [`Host`] for testing stages without loading them: a content-addressed store in a
//! map, state in a cell, a fixed clock, tokens = bytes / 4 rounded up (or any counter you give).
//!
//! ```
//! use condense_abi::testing::MemoryHost;
//! use condense_abi::Host;
//! let host = MemoryHost::default().with_now_ms(1_000).with_flag("context-collapse:active");
//! let key = host.store_put(b"removed text").unwrap();
//! assert_eq!(host.store_get(&key).unwrap().as_deref(), Some(&b"removed text"[..]));
//! assert!(host.has_flag("context-collapse:active"));
//! ```
//!
//! [`apply`] runs a stage the way the host does (lazily handing it the conversation) and
//! always gives back a conversation, so tests read `out.conversation` whether or not the stage
//! changed anything.

use crate::{Host, Input, Stage, StageReport, SummaryRequest};
use condense_model::Conversation;
use std::cell::{Cell, RefCell};
use std::collections::HashMap;

/// What [`apply`] gives back.
#[derive(Debug, Clone)]
pub struct Applied {
    /// The stage's output, or a copy of the input when the stage returned "unchanged".
    pub conversation: Conversation,
    pub report: StageReport,
    /// False when the stage returned [`StageOutput::unchanged`](crate::StageOutput::unchanged).
    pub changed: bool,
    /// Whether the stage read the conversation at all.
    pub read: bool,
}

/// Runs `stage` over `conversation` as the host would: the conversation is copied in only if
/// the stage reads it.
pub fn apply<S: Stage>(
    stage: &S,
    conversation: &Conversation,
    host: &dyn Host,
) -> Result<Applied, String> {
    let read = Cell::new(false);
    let materialize = || {
        read.set(true);
        Ok(conversation.clone())
    };
    let out = stage.apply(Input::lazy(&materialize), host)?;
    Ok(Applied {
        changed: out.conversation.is_some(),
        conversation: out.conversation.unwrap_or_else(|| conversation.clone()),
        report: out.report,
        read: read.get(),
    })
}

type SummarizeFn = dyn Fn(&SummaryRequest) -> Result<String, String>;

/// See the [module docs](self).
pub struct MemoryHost {
    pub store: RefCell<HashMap<String, Vec<u8>>>,
    pub state: RefCell<Option<String>>,
    /// Number of `store_put` calls.
    pub puts: Cell<usize>,
    /// Number of `state_put` calls.
    pub state_puts: Cell<usize>,
    pub now_ms: i64,
    pub tokens_freed_before: usize,
    /// What `conversation_tokens()` answers (set it to the fixture's size in tests).
    pub conversation_tokens: usize,
    pub context_window: usize,
    pub max_output_tokens: usize,
    /// What `output_reserve()` answers (the default `[model] output_reserve`).
    pub output_reserve: usize,
    pub flags: Vec<String>,
    pub session: String,
    pub format: String,
    counter: Box<dyn Fn(&str) -> usize>,
    summarizer: Box<SummarizeFn>,
    /// Every summary request made, in order.
    pub summary_requests: RefCell<Vec<SummaryRequest>>,
}

impl Default for MemoryHost {
    fn default() -> Self {
        MemoryHost {
            store: RefCell::default(),
            state: RefCell::default(),
            puts: Cell::new(0),
            state_puts: Cell::new(0),
            now_ms: 1_750_000_000_000,
            tokens_freed_before: 0,
            conversation_tokens: 0,
            context_window: 200_000,
            max_output_tokens: 32_000,
            output_reserve: 8_192,
            flags: Vec::new(),
            session: "test-session".into(),
            format: "anthropic".into(),
            counter: Box::new(|t: &str| t.len().div_ceil(4)),
            summarizer: Box::new(|r: &SummaryRequest| {
                let ids: Vec<&str> = r.messages.iter().map(|m| m.id.as_str()).collect();
                Ok(format!(
                    "{}summary of {} messages: {}",
                    r.previous_summary
                        .as_deref()
                        .map(|p| format!("{p}\n"))
                        .unwrap_or_default(),
                    ids.len(),
                    ids.join(", ")
                ))
            }),
            summary_requests: RefCell::default(),
        }
    }
}

impl MemoryHost {
    pub fn with_now_ms(mut self, now_ms: i64) -> Self {
        self.now_ms = now_ms;
        self
    }
    pub fn with_flag(mut self, flag: &str) -> Self {
        self.flags.push(flag.to_string());
        self
    }
    pub fn with_format(mut self, format: &str) -> Self {
        self.format = format.to_string();
        self
    }
    pub fn with_window(mut self, context_window: usize, max_output_tokens: usize) -> Self {
        self.context_window = context_window;
        self.max_output_tokens = max_output_tokens;
        self
    }
    /// Sets what `output_reserve()` answers.
    pub fn with_output_reserve(mut self, output_reserve: usize) -> Self {
        self.output_reserve = output_reserve;
        self
    }
    pub fn with_conversation_tokens(mut self, tokens: usize) -> Self {
        self.conversation_tokens = tokens;
        self
    }
    pub fn with_tokens_freed_before(mut self, tokens: usize) -> Self {
        self.tokens_freed_before = tokens;
        self
    }
    /// Counts tokens with `counter` instead of bytes / 4.
    pub fn with_counter(mut self, counter: impl Fn(&str) -> usize + 'static) -> Self {
        self.counter = Box::new(counter);
        self
    }
    /// Summarizes with `summarizer` instead of the default fake (which lists message ids).
    pub fn with_summarizer(
        mut self,
        summarizer: impl Fn(&SummaryRequest) -> Result<String, String> + 'static,
    ) -> Self {
        self.summarizer = Box::new(summarizer);
        self
    }
    /// The stored state parsed as JSON (Null when there is none).
    pub fn state_json(&self) -> serde_json::Value {
        self.state
            .borrow()
            .as_deref()
            .and_then(|s| serde_json::from_str(s).ok())
            .unwrap_or(serde_json::Value::Null)
    }
}

impl Host for MemoryHost {
    fn count_tokens(&self, text: &str) -> usize {
        (self.counter)(text)
    }
    fn now_ms(&self) -> i64 {
        self.now_ms
    }
    fn store_put(&self, bytes: &[u8]) -> Result<String, String> {
        self.puts.set(self.puts.get() + 1);
        let key = format!("{:032x}", xxhash_rust::xxh3::xxh3_128(bytes));
        self.store.borrow_mut().insert(key.clone(), bytes.to_vec());
        Ok(key)
    }
    fn store_get(&self, key: &str) -> Result<Option<Vec<u8>>, String> {
        Ok(self.store.borrow().get(key).cloned())
    }
    fn state_get(&self) -> Result<Option<String>, String> {
        Ok(self.state.borrow().clone())
    }
    fn state_put(&self, state: &str) -> Result<(), String> {
        self.state_puts.set(self.state_puts.get() + 1);
        *self.state.borrow_mut() = Some(state.to_string());
        Ok(())
    }
    fn tokens_freed_before(&self) -> usize {
        self.tokens_freed_before
    }
    fn context_window(&self) -> usize {
        self.context_window
    }
    fn max_output_tokens(&self) -> usize {
        self.max_output_tokens
    }
    fn output_reserve(&self) -> usize {
        self.output_reserve
    }
    fn has_flag(&self, flag: &str) -> bool {
        self.flags.iter().any(|f| f == flag)
    }
    fn session_id(&self) -> String {
        self.session.clone()
    }
    fn source_format(&self) -> String {
        self.format.clone()
    }
    fn conversation_tokens(&self) -> usize {
        self.conversation_tokens
    }
    fn summarize(&self, request: SummaryRequest) -> Result<String, String> {
        let out = (self.summarizer)(&request);
        self.summary_requests.borrow_mut().push(request);
        out
    }
}
