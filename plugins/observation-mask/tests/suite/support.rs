//! The shared in-memory host, a runner, block builders, a token total.

use condense_abi::build_stage;
use condense_abi::testing::{apply, Applied};
use condense_model::{Block, Content, Conversation, Image, ImageSource, RawJson, ToolResult};
use observation_mask::ObservationMask;

pub type FakeHost = condense_abi::testing::MemoryHost;

pub fn stage(config_toml: &str) -> ObservationMask {
    build_stage::<ObservationMask>(config_toml).unwrap()
}

pub fn run(stage: &ObservationMask, conv: &Conversation) -> Applied {
    apply(stage, conv, &FakeHost::default()).unwrap()
}

/// `n` numbered lines of `label`.
pub fn lines(label: &str, n: usize) -> String {
    (1..=n)
        .map(|i| format!("{label} line {i:04}: some output\n"))
        .collect()
}

pub fn tool_use(id: &str, name: &str, input: &str) -> Block {
    Block::tool_use(id, name, RawJson::from_string_unchecked(input.to_string()))
}

pub fn tool_result(id: &str, content: Content, is_error: Option<bool>) -> Block {
    Block::ToolResult(ToolResult {
        is_error,
        ..ToolResult::new(id, content)
    })
}

pub fn image() -> Block {
    Block::Image(Image {
        source: ImageSource::Base64 {
            media_type: "image/png".into(),
            data: "iVBORw0KGgo=".into(),
        },
        extra: RawJson::default(),
    })
}

/// Tokens of every chat message's blocks with the test host's counter (bytes / 4).
pub fn tokens(conv: &Conversation) -> usize {
    fn content(c: &Content) -> usize {
        c.blocks
            .iter()
            .map(|b| match b {
                Block::Text(t) => t.text.len().div_ceil(4),
                Block::ToolResult(r) => content(&r.content),
                Block::ToolUse(t) => t.input.len().div_ceil(4),
                other => other.text_len().div_ceil(4),
            })
            .sum()
    }
    conv.chat_messages().map(|m| content(&m.content)).sum()
}

/// `(tool_use_id, text)` of every top-level tool result of a chat message.
pub fn results(conv: &Conversation) -> Vec<(String, String)> {
    conv.chat_messages()
        .flat_map(|m| m.tool_results())
        .map(|r| (r.tool_use_id.clone(), r.content.text()))
        .collect()
}

/// Ids of the results holding a placeholder.
pub fn masked_ids(conv: &Conversation) -> Vec<String> {
    results(conv)
        .into_iter()
        .filter(|(_, text)| observation_mask::is_placeholder(text))
        .map(|(id, _)| id)
        .collect()
}
