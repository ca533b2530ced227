//! Integration tests of condense-summarize, one binary: the extractive summarizer on hand-made
//! and real sessions, what summaries retain, and the LLM backends against a scripted server on
//! 127.0.0.1 (`support`).

// Test helpers outside #[test] functions may unwrap: a failure there is a test failure.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod extractive;
mod llm;
mod retaining;
mod support;
