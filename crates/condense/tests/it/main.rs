//! Integration tests: the real `condense` binary with dynamically loaded plugins.
//!
//! They need the plugins built into `target/plugins/` and `target/test-plugins/`; the README's
//! test command (`cargo xtask test`) does that first.

mod cli;
mod plugins;
mod review;
mod roundtrip;
mod support;
