//! Integration tests of the `observation-mask` stage, linked statically (no plugin loading).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod config;
mod fixture;
mod idempotence;
mod real_transcript;
mod support;
