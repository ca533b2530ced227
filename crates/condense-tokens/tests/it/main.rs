//! Integration tests of condense-tokens, one binary (each links the tokenizer tables, about
//! 60 MB): counts against tiktoken-rs and bpe-openai, the cached and parallel counters, and
//! counts that outlive the process. `startup.rs` stays its own binary: it measures the
//! process's memory, which other tests' allocations would disturb.

// Test helpers outside #[test] functions may unwrap: a failure there is a test failure.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod counter;
mod fast_counts;
mod parallel;
mod persist;
mod tokenizers;
