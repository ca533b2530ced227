//! Token counting for condense: the tokenizers and a cached conversation counter. The pure
//! budget arithmetic they feed (window, reserve, image estimates, the per-message overhead)
//! is `condense-budget`'s, so that stages can use it without linking a tokenizer.
//!
//! - [`Tokenizer`] / [`TokenizerKind`] / [`tokenizer()`]: `o200k_base` (the default) and
//!   `cl100k_base` from static tables laid out at build time, with a hand-written pre-tokenizer
//!   and tiktoken's merge (nothing to build at start-up; pieces over 512 bytes, rare, go to
//!   `bpe-openai`, built on that first need; the same counts as `bpe-openai` and `tiktoken-rs`;
//!   each counting thread remembers what the pieces it met lately cost: `memo`);
//!   `tiktoken-o200k_base` and `tiktoken-cl100k_base` with `tiktoken-rs`, guarded so that it
//!   never panics and stays linear (see [`tiktoken_guard`]); `estimate`, bytes / 4 rounded up.
//!   The `tiktoken-rs` tables are built once per process, on first use.
//! - [`TokenCounter`]: what blocks, messages and whole conversations cost, cached by
//!   [`Block::content_hash`](condense_model::Block::content_hash) so that counting again after a
//!   stage only tokenizes the blocks that changed. Text and thinking count their text, a tool
//!   use its name and input JSON, a tool result its blocks, an image an estimate from its
//!   dimensions ([`condense_budget::image`]), an opaque block its JSON; every message adds
//!   [`MESSAGE_OVERHEAD_TOKENS`](condense_budget::MESSAGE_OVERHEAD_TOKENS);
//!   [`Role::Event`](condense_model::Role::Event) lines cost 0. The system prompt and each
//!   tool definition count too. It implements [`condense_model::CountTokens`] (with its text
//!   cache), so the measuring helpers of `condense-turns` run on the host side too.
//!
//! ```
//! use condense_budget::{BudgetConfig, Level, MESSAGE_OVERHEAD_TOKENS};
//! use condense_model::{Block, Conversation, Message, Role};
//! use condense_tokens::{TokenCounter, TokenizerKind};
//!
//! let mut conv = Conversation::default();
//! conv.messages.push(Message::new("m0", Role::User, vec![Block::text("hello world")]));
//! conv.messages.push(Message::new("m1", Role::Event, vec![Block::text("not sent")]));
//!
//! let counter = TokenCounter::new(TokenizerKind::O200k);
//! let count = counter.count_conversation(&conv);
//! assert_eq!(count.messages, vec![2 + MESSAGE_OVERHEAD_TOKENS, 0]);
//! assert_eq!(count.total, 6);
//!
//! // The second count is answered from the cache.
//! let misses = counter.stats().misses;
//! assert_eq!(counter.count_conversation(&conv), count);
//! assert_eq!(counter.stats().misses, misses);
//!
//! let budget = counter.budget(&conv, &BudgetConfig::default());
//! assert_eq!(budget.level, Level::Normal);
//! assert_eq!(budget.autocompact_threshold, 167_000);
//! assert_eq!(budget.available, 200_000 - 6 - 20_000);
//! ```
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used))]

mod counter;
mod fast;
mod memo;
mod pretokenize;
pub mod tiktoken_guard;
mod tokenizer;
mod vocab_hash;

pub use counter::{
    CacheStats, ConversationCount, TokenCounter, DEFAULT_CACHE_CAPACITY, LINE_PARTS_FROM,
    PARALLEL_MIN_BYTES,
};
pub use tokenizer::{
    estimate_count, tokenizer, ParseTokenizerKindError, Tokenizer, TokenizerKind,
    ESTIMATE_BYTES_PER_TOKEN,
};
