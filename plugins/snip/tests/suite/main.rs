//! Integration tests of the `snip` stage, linked statically (no plugin loading), on the
//! in-memory host of `condense_abi::testing`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod config;
mod fixture;
mod idempotence;
mod never_grow;
mod real_transcript;
mod support;
