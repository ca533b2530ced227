//! The test host: an in-memory [`Host`] for testing stages without loading them (a
//! content-addressed store in a map, state in a cell, tokens = bytes / 4 rounded up or any
//! counter you give, a fake summarizer) together with the [`RunContext`] a stage call sees (a
//! fixed clock, a 200k window, no flags), both set with builder methods.
//!
//! ```
//! use condense_abi::testing::MemoryHost;
//! use condense_abi::{Host, Signal};
//! let host = MemoryHost::default().with_now_ms(1_000).with_signal(Signal::CollapseActive);
//! let key = host.store_put(b"removed text").unwrap();
//! assert_eq!(host.store_get(&key).unwrap().as_deref(), Some(&b"removed text"[..]));
//! assert!(host.run.flags.raised(Signal::CollapseActive));
//! ```
//!
//! [`apply`] runs a stage the way the host does (lazily handing it the conversation, to view in
//! place or copy) and
//! always gives back a conversation, so tests read `out.conversation` whether or not the stage
//! changed anything.

use crate::ffi::FfiConversationRef;
use crate::{
    Change, Context, Host, Input, RunContext, Signal, Stage, StageError, StageReport,
    SummaryRequest,
};
use condense_model::{Block, Conversation, Format};
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
    /// The indices of the messages the stage handed back replaced in place
    /// ([`Change::Replaced`]); empty for any other change.
    pub replaced: Vec<usize>,
    /// Whether the stage read the conversation at all (through its view or a copy).
    pub read: bool,
    /// Whether the stage copied the conversation in ([`Input::into_conversation`]): a stage
    /// that only looks should not.
    pub copied: bool,
}

/// Runs `stage` over `conversation` as the host would: the stage reads a mirror of the
/// conversation lent to it, the one a plugin gets, and copies it in only if it asks.
/// The call's facts are `host.run`.
pub fn apply<S: Stage>(
    stage: &S,
    conversation: &Conversation,
    host: &MemoryHost,
) -> Result<Applied, StageError> {
    let (read, copies) = (Cell::new(false), Cell::new(0));
    let mirror = FfiConversationRef::from(conversation);
    let lend = || {
        read.set(true);
        Ok(&mirror)
    };
    let cx = Context::local(&host.run, host);
    let out = stage.apply(Input::lent(&lend, Some(&copies)), &cx)?;
    let changed = out.change != Change::Unchanged;
    let replaced = match &out.change {
        Change::Replaced(messages) => messages.iter().map(|(i, _)| *i).collect(),
        _ => Vec::new(),
    };
    // A replacement that breaks the rules fails the test as the host fails the stage.
    let (conversation, report) = out.apply_to(conversation).map_err(StageError::new)?;
    Ok(Applied {
        changed,
        replaced,
        conversation,
        report,
        read: read.get(),
        copied: copies.get() > 0,
    })
}

/// How many mirrors of a conversation [`StageInput`](crate::StageInput)s made on this thread so
/// far: a host's test reads it before and after a run to see how often its stages' input was
/// made across the boundary (once per conversation its stages read, not once per stage).
pub fn mirrors_made() -> usize {
    crate::loader::mirrors_made()
}

/// The indices of the messages that differ between two conversations of the same length: what
/// a stage that replaces messages in place should hand back ([`Applied::replaced`]).
pub fn changed_messages(before: &Conversation, after: &Conversation) -> Vec<usize> {
    assert_eq!(
        before.messages.len(),
        after.messages.len(),
        "not a change in place"
    );
    let pairs = before.messages.iter().zip(&after.messages).enumerate();
    pairs.filter(|(_, (b, a))| b != a).map(|(i, _)| i).collect()
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
    /// The facts a stage call sees ([`RunContext::default`] unless set).
    pub run: RunContext,
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
            run: RunContext::default(),
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
        self.run.now_ms = now_ms;
        self
    }
    /// The host forces the stage (its recovery chain).
    pub fn forced(mut self) -> Self {
        self.run.flags.forced = true;
        self
    }
    /// The host turned the stage off for this run.
    pub fn disabled(mut self) -> Self {
        self.run.flags.disabled = true;
        self
    }
    /// An earlier stage raised `signal`.
    pub fn with_signal(mut self, signal: Signal) -> Self {
        self.run.flags.signals.push(signal);
        self
    }
    /// The source format (`None`: unknown).
    pub fn with_format(mut self, format: Option<Format>) -> Self {
        self.run.format = format;
        self
    }
    pub fn with_window(mut self, context_window: usize, max_output_tokens: usize) -> Self {
        self.run.context_window = context_window;
        self.run.max_output_tokens = max_output_tokens;
        self
    }
    pub fn with_output_reserve(mut self, output_reserve: usize) -> Self {
        self.run.output_reserve = output_reserve;
        self
    }
    pub fn with_conversation_tokens(mut self, tokens: usize) -> Self {
        self.run.conversation_tokens = tokens;
        self
    }
    pub fn with_tokens_freed_before(mut self, tokens: usize) -> Self {
        self.run.tokens_freed_before = tokens;
        self
    }
    pub fn with_session(mut self, session: &str) -> Self {
        self.run.session = session.to_string();
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
    /// The texts of the block with the counter; an image counts as the host's fallback estimate
    /// (1,600 tokens).
    fn count_block(&self, block: &Block) -> usize {
        match block {
            Block::Text(t) => self.count_tokens(&t.text),
            Block::Thinking(t) => self.count_tokens(&t.thinking),
            Block::ToolUse(t) => self.count_tokens(&t.name) + self.count_tokens(t.input.as_str()),
            Block::ToolResult(t) => t.content.blocks.iter().map(|b| self.count_block(b)).sum(),
            Block::Image(_) => 1_600,
            Block::Opaque(o) => self.count_tokens(o.json.as_str()),
        }
    }
    fn store_put(&self, bytes: &[u8]) -> Result<String, String> {
        self.puts.set(self.puts.get() + 1);
        let key = format!("{:032x}", twox_hash::XxHash3_128::oneshot(bytes));
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
    fn summarize(&self, request: SummaryRequest) -> Result<String, String> {
        let out = (self.summarizer)(&request);
        self.summary_requests.borrow_mut().push(request);
        out
    }
}

impl condense_model::CountTokens for MemoryHost {
    fn count_tokens(&self, text: &str) -> usize {
        (self.counter)(text)
    }
}
