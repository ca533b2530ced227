//! Integration tests: the real `condense` binary with dynamically loaded plugins.
//!
//! They need the plugins built into `target/plugins/` and `target/test-plugins/`; the README's
//! test command (`cargo xtask test`) does that first.

// Test helpers outside #[test] functions may unwrap: a failure there is a test failure.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod cache_marks;
mod claude_code;
mod cli;
mod cli_polish;
mod eval;
mod expand_edges;
mod folders;
mod formats;
mod fuzz;
mod history_edits;
mod kill;
mod known_lines;
mod known_lists;
mod plugin_edges;
mod plugins;
mod readme;
mod resume;
mod retention;
mod review;
mod review_flow;
mod roundtrip;
mod scaffold;
mod serve;
mod serve_api_rules;
mod serve_fake;
mod serve_sdk;
mod serve_wire;
mod store;
mod summarizer;
mod support;
