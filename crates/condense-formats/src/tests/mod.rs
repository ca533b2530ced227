//! Unit tests: round trips over the real transcripts and the edge-case fixtures, mapping counts
//! (the model must actually see the content), detection, and errors.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod away;
mod cache_marks;
mod claude_code;
mod claude_code_light;
mod claude_code_message;
mod cline;
mod codex;
mod edge;
mod errors;
mod frames;
mod known;
mod mapping;
mod memo;
mod passthrough;
mod quick;
mod read_back;
mod read_back_lines;
mod responses;
mod robust;
mod roundtrip;
pub(crate) mod support;
