//! Integration tests of the `truncate-oldest` stage, linked statically (no plugin loading).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod config;
mod fixture;
mod orphans;
mod real_transcript;
mod support;
