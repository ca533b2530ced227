//! `test-faulty`: a stage that misbehaves on purpose, so the host's defences can be tested on
//! a real dynamically loaded library.
//!
//! ```toml
//! [[stage]]
//! name = "boom"
//! plugin = "test-faulty"
//! [stage.config]
//! mode = "panic"   # noop | read | echo | panic | error | orphan-tool-result | grow
//! ```
//!
//! A `mode` it does not know makes its constructor reject the config. Built with the
//! `forged-abi-version` feature it claims ABI 99.0.0, which the host must refuse.

use condense_abi::{Context, Input, Stage, StageConfig, StageError, StageOutput, StageReport};
use condense_model::{Block, Message, Role};
use serde::{Deserialize, Serialize};

#[derive(Debug, Serialize, Deserialize, StageConfig)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// noop | read | echo | panic | error | orphan-tool-result | grow
    pub mode: String,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            mode: "noop".to_string(),
        }
    }
}

/// `noop` returns without reading the conversation; `read` reads it and changes nothing;
/// `echo` reads it and hands it back as a new conversation (the boundary's worst case).
const MODES: &[&str] = &[
    "noop",
    "read",
    "echo",
    "panic",
    "error",
    "orphan-tool-result",
    "grow",
];

pub struct Faulty {
    mode: String,
}

impl Stage for Faulty {
    type Config = Config;
    const NAME: &'static str = "test-faulty";
    const DESCRIPTION: &'static str = "Misbehaves on purpose, for testing the host.";

    fn new(config: Config) -> Result<Self, StageError> {
        if !MODES.contains(&config.mode.as_str()) {
            return Err(format!(
                "mode must be one of {}, got `{}`",
                MODES.join(", "),
                config.mode
            )
            .into());
        }
        Ok(Faulty { mode: config.mode })
    }

    fn apply(&self, input: Input<'_>, _cx: &Context<'_>) -> Result<StageOutput, StageError> {
        let report = StageReport::default();
        match self.mode.as_str() {
            "noop" => return Ok(StageOutput::unchanged(report)),
            "panic" => panic!("test-faulty was told to panic"),
            // The host's tests match this exact text (after the host's own `stage ... failed: `).
            "error" => return Err("test-faulty was told to fail".into()),
            _ => {}
        }
        let mut conversation = input.into_conversation()?;
        match self.mode.as_str() {
            "read" => return Ok(StageOutput::unchanged(report)),
            "orphan-tool-result" => conversation.messages.push(Message::new(
                "orphan",
                Role::User,
                vec![Block::tool_result(
                    "no-such-call",
                    condense_model::Content::string("dangling"),
                )],
            )),
            "grow" => conversation.messages.push(Message::new(
                "grown",
                Role::User,
                vec![Block::text("padding ".repeat(100))],
            )),
            _ => {}
        }
        Ok(StageOutput::changed(conversation, report))
    }
}

#[cfg(not(feature = "forged-abi-version"))]
condense_abi::export_stage!(Faulty);
#[cfg(feature = "forged-abi-version")]
condense_abi::export_stage!(@forged_abi_version Faulty);
