//! Integration tests of the `microcompact` stage, linked statically (no plugin loading).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod cache_edit;
mod config;
mod openhands;
mod real_transcript;
mod support;
mod time_path;
