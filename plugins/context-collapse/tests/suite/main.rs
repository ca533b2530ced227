//! Integration tests of the `context-collapse` stage, linked statically (no plugin loading).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod config;
mod fixture;
mod projection;
mod real_transcript;
mod support;
