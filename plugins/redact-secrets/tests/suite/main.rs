//! Integration tests of the `redact-secrets` stage, linked statically (no plugin loading).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod config;
mod coverage;
mod envelopes;
mod fixture;
mod inputs;
mod lookalikes;
mod real_transcripts;
mod samples;
mod support;
