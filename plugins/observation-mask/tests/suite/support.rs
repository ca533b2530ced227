//! What only this stage's tests need: a token total as the report counts it and readers of the
//! masked results (the test host, runner and builders are `condense_testing`'s).

use condense_model::{Block, Content, Conversation};

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
