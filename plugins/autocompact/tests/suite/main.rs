//! Integration tests of the `autocompact` stage, linked statically (no plugin loading).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod breaker;
mod config;
mod fixture;
mod real_transcript;
mod restoration;
mod support;
mod suppression;
mod trigger;
